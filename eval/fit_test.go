package eval

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
)

// TestLowRankReport: eval reads 4×4 matrices flattened row-major from CSV
// and reports the lowrank model's shape, rank, iterations and objective,
// in report.json's fit and under the terminal table.
func TestLowRankReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var b strings.Builder
	for j := range 16 {
		fmt.Fprintf(&b, "x%d,", j)
	}
	b.WriteString("label\n")
	u, v := []float64{1, -1, 0.5, 0}, []float64{0.5, 1, -1, 1}
	for range 600 {
		s := 0.0
		for r := range 4 {
			for c := range 4 {
				x := rng.NormFloat64()
				s += u[r] * v[c] * x
				fmt.Fprintf(&b, "%.4f,", x)
			}
		}
		y := 1
		if s < 0 {
			y = -1
		}
		fmt.Fprintf(&b, "%d\n", y)
	}
	path := filepath.Join(t.TempDir(), "matrix.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
models:
  - {name: lr, type: lowrank, features: {shape: [4, 4]}, rank: 1, window: {events: 300}, refit: {every_events: 150, guard: 0}}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, testTypes, Options{Data: path})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Models["lr"].Fit
	if f == nil || f.Rows != 4 || f.Cols != 4 || f.Rank != 1 || f.Iterations < 1 || f.Objective == nil || !(*f.Objective > 0) {
		t.Fatalf("fit %+v, want 4×4 rank 1 with its iterations and objective", f)
	}
	if e := *rep.Models["lr"].Prequential.DecidedError; e > 0.1 { // no decision before the first refit, at 150 events
		t.Errorf("prequential error over the decided rows %.3f on a rank-1 signal, want ≤ 0.1", e)
	}
	var out bytes.Buffer
	if err := rep.WriteSummary(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "lr: 4×4 rank 1, ") {
		t.Errorf("summary does not report the fit:\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}

// ripleyReport runs streamer eval's protocol for the models of the YAML
// list on shuffled Ripley, and returns the report and its terminal summary.
func ripleyReport(t *testing.T, models string) (*Report, string) {
	t.Helper()
	cfg, err := config.Parse([]byte("models:\n"+models), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, testTypes, Options{Data: writeShuffledRipley(t), Test: "testdata/ripley_test.csv"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteSummary(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	return rep, out.String()
}

// TestGammaAutoReport: a mam with the default gamma (auto) reports its
// bandwidths: each candidate's gamma, prequential error and weight, and
// the gamma leaned on, in the report and under the terminal table.
func TestGammaAutoReport(t *testing.T) {
	rep, out := ripleyReport(t, "  - {name: m, type: mam, features: {dim: 2}}\n")
	f := rep.Models["m"].Fit
	if f == nil || len(f.Bandwidths) != 6 || f.ChosenGamma == nil {
		t.Fatalf("fit %+v, want 6 bandwidths and the chosen gamma", f)
	}
	sum := 0.0
	for i, b := range f.Bandwidths {
		if b.Error == nil || !(b.Gamma > 0) || (i > 0 && !(b.Gamma > f.Bandwidths[i-1].Gamma)) {
			t.Fatalf("bandwidth %d: %+v, want increasing gammas with an error", i, b)
		}
		sum += b.Weight
	}
	if !(sum > 0) {
		t.Fatalf("mixture weights sum to %v", sum)
	}
	if !strings.Contains(out, "m gamma auto: ") {
		t.Errorf("summary does not report the bandwidths:\n%s", out)
	}
}

// TestOneWidthAutoReport: an omam, and a krr with each solver, with the
// default gamma (auto) report the one width they took from the data's
// scale (Ripley's raw inputs: S is about 0.2, so omam's γ = 1/S is about
// 5 and krr's median heuristic 1/(4S) about 1), in the report and under
// the table.
func TestOneWidthAutoReport(t *testing.T) {
	rep, out := ripleyReport(t, "  - {name: o, type: omam, levels: 2, edges: [0.5], features: {dim: 2}}\n"+
		"  - {name: k, type: krr, window: {events: 300}, refit: {every_events: 100}, features: {dim: 2}}\n"+
		"  - {name: f, type: krr, solver: features, kernel: {features: 64}, window: {events: 300}, refit: {every_events: 100}, features: {dim: 2}}\n")
	for name, lim := range map[string][2]float64{"o": {1, 20}, "k": {0.2, 5}, "f": {0.2, 5}} {
		f := rep.Models[name].Fit
		if f == nil || f.ChosenGamma == nil || !(*f.ChosenGamma > lim[0] && *f.ChosenGamma < lim[1]) || len(f.Bandwidths) != 0 {
			t.Errorf("%s: fit %+v, want one chosen gamma in %v", name, f, lim)
		}
		if !strings.Contains(out, name+" gamma auto: ") {
			t.Errorf("summary does not report %s's width:\n%s", name, out)
		}
	}
}
