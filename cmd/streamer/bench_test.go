package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/bench"
)

// runBench runs `streamer bench args…` and returns its stdout and stderr.
func runBench(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench"}, args...))
	err = root.Execute()
	return out.String(), errb.String(), err
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchConfigJSON benchmarks a configuration of two model types
// (a classifier and a refitted ranking model) and reads the JSON report:
// every round has both pipelines, a score record per model and event, and
// the within-round ratio.
func TestBenchConfigJSON(t *testing.T) {
	path := writeConfig(t, `
models:
  - name: lr
    type: logistic
    features: {dim: 4}
  - name: rank
    type: lsrrank
    features: {dim: 4}
    kernel: {type: linear}
    window: {events: 200}
    refit: {every_events: 500}
calibration: {window: 500, every: 50}
`)
	const events = 2000
	stdout, stderr, err := runBench(t, "--config", path, "--events", "2000", "--rounds", "2", "--warmup", "0",
		"--snapshot-every", "0", "--partitions", "2", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if !strings.Contains(rep.Setup.Models, "lr (logistic)") || !strings.Contains(rep.Setup.Models, "rank (lsrrank)") ||
		rep.Setup.Dim != 4 || rep.Setup.Labels != "±1" || len(rep.Setup.Pipelines) != 2 ||
		rep.Setup.CalibrationWindow != 500 || rep.Setup.CalibrationEvery != 50 {
		t.Errorf("setup %+v (want the config's calibration: window 500, every 50)", rep.Setup)
	}
	if len(rep.Rounds) != 2 || len(rep.Warmup) != 0 {
		t.Fatalf("%d rounds, %d warm-up, want 2 and 0", len(rep.Rounds), len(rep.Warmup))
	}
	for i, rd := range rep.Rounds {
		if rd.Round != i+1 || len(rd.Results) != 2 || len(rd.Order) != 2 {
			t.Fatalf("round %d: %+v", i+1, rd)
		}
		for _, r := range rd.Results {
			want := int64(events)
			if r.Mode == bench.Score {
				want = 2 * events // one score per model
			}
			if r.Events != events || r.Records != want || !(r.Rate() > 0) || rd.Order[r.Position] != r.Mode {
				t.Errorf("round %d %s: %+v, want %d records", i+1, r.Mode, r, want)
			}
		}
		if v := rd.Ratios["score/passthrough"]; !(v > 0) {
			t.Errorf("round %d: ratio %v", i+1, v)
		}
	}
	if len(rep.Summary.Ratios) != 1 || rep.Summary.Ratios[0].N != 2 {
		t.Errorf("summary ratios %+v", rep.Summary.Ratios)
	}
	if !strings.Contains(stderr, "| ratio, within each round |") {
		t.Errorf("the text tables are not on stderr:\n%s", stderr)
	}
}

// TestBenchCalibrationFlags: the built-in model's bench keeps the
// service's default calibration; --calibration-window 0 turns it off; a
// refit period below 1 is refused.
func TestBenchCalibrationFlags(t *testing.T) {
	def := config.Default().Calibration
	for _, c := range []struct {
		args          []string
		window, every int
	}{
		{nil, def.Window, def.Every},
		{[]string{"--calibration-window", "0"}, 0, def.Every},
		{[]string{"--calibration-window", "300", "--calibration-every", "30"}, 300, 30},
	} {
		args := append([]string{"--events", "500", "--rounds", "1", "--warmup", "0", "--snapshot-every", "0", "--json"}, c.args...)
		stdout, stderr, err := runBench(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, stderr)
		}
		var rep bench.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%v: stdout is not the JSON report: %v", c.args, err)
		}
		if rep.Setup.CalibrationWindow != c.window || rep.Setup.CalibrationEvery != c.every {
			t.Errorf("%v: calibration window %d every %d, want %d and %d", c.args,
				rep.Setup.CalibrationWindow, rep.Setup.CalibrationEvery, c.window, c.every)
		}
	}
	if _, _, err := runBench(t, "--events", "500", "--calibration-every", "0"); err == nil || !strings.Contains(err.Error(), "--calibration-every") {
		t.Errorf("--calibration-every 0: %v, want an error naming it", err)
	}
}

// TestBenchConfigLabels: an ordinal model gets level labels; a classifier
// and an ordinal model together are refused before anything runs.
func TestBenchConfigLabels(t *testing.T) {
	types := newModelTypes()
	ordinal := `
models:
  - name: o
    type: omam
    levels: 4
    kernel: {type: linear}
    features: {dim: 3}
  - name: r
    type: lsrrank
    levels: 3
    features: {dim: 3}
`
	c, err := config.Load(writeConfig(t, ordinal), nil, types)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bench.FromConfig(c, types)
	if err != nil {
		t.Fatal(err)
	}
	if m.Levels != 3 || m.Labels() != "1..3" || m.Dim != 3 {
		t.Errorf("levels %d (%s), dim %d; want the fewest levels, 3", m.Levels, m.Labels(), m.Dim)
	}
	_, stderr, err := runBench(t, "--config", writeConfig(t, ordinal+`
  - name: lr
    type: logistic
    features: {dim: 3}
`), "--events", "10")
	if err == nil || !strings.Contains(err.Error(), "lr (logistic, classifier) does not accept label 2") {
		t.Errorf("classifier with ordinal models: err %v\n%s", err, stderr)
	}
}

// TestBenchHashed benchmarks configurations with features.hash: the bench
// preloads hashed rating events (not 2^bits dense numbers), decoded by
// every score run's engine with the configuration's hashing (no dead
// letters), and every model learns every event (the bench fails
// otherwise; the JSON report's "learned" says so too). With models that
// all take ratings (a regression fm, a classifier with label.positive, a
// key-scoped fm) the labels are ratings; a plain classifier gets ±1; with
// no namespaces listed the features are top-level.
func TestBenchHashed(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		models     []string
		labels     string
		features   []string
		entries    [2]float64 // bounds of the mean hashed entries per event
	}{
		{
			name: "ratings",
			yaml: `
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    factorize: [[user, item]]
    features: &f
      hash: {bits: 16, seed: 3}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
  - name: liked
    type: logistic
    label: {positive: ">= 4"}
    features: *f
  - name: per_user
    type: fm
    loss: squared
    factors: 0
    scope: key
    max_keys: 20000
    features: *f
`,
			models:   []string{"rating", "liked", "per_user"},
			labels:   "0.5..5 (ratings)",
			features: []string{"user.id", "item.id", "item.genres"},
			// user.id, item.id, 1–3 genres (mean 2), and user × item: 1 × (1 + genres)
			entries: [2]float64{6.5, 7.5},
		},
		{
			name: "classifier, top level",
			yaml: `
models:
  - name: clicks
    type: logistic
    features: {hash: {bits: 12, seed: 1}, max_features: 16}
`,
			models:   []string{"clicks"},
			labels:   "±1",
			features: []string{"user", "item", "genres"},
			entries:  [2]float64{3.5, 4.5},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			const events = 3000
			stdout, stderr, err := runBench(t, "--config", writeConfig(t, c.yaml), "--events", "3000", "--rounds", "1", "--warmup", "0",
				"--snapshot-every", "0", "--partitions", "2", "--json")
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var rep bench.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
			}
			in := rep.Setup.Input
			if in.Kind != "hashed" || rep.Setup.Labels != c.labels || !slices.Equal(in.Features, c.features) ||
				in.Users < 100 || in.Users > in.UserIDs || in.Items < 100 || in.Items > in.ItemIDs ||
				in.EntriesPerEvent < c.entries[0] || in.EntriesPerEvent > c.entries[1] {
				t.Errorf("setup %+v, input %+v; want hashed %v events, labels %s, %v entries per event", rep.Setup, in, c.features, c.labels, c.entries)
			}
			if !strings.Contains(stderr, "hashed events in 2^") {
				t.Errorf("the text report does not say the events were hashed:\n%s", stderr)
			}
			if len(rep.Rounds) != 1 {
				t.Fatalf("%d rounds, want 1", len(rep.Rounds))
			}
			r, ok := rep.Rounds[0].Result(bench.Score)
			if !ok {
				t.Fatalf("no score run: %+v", rep.Rounds[0])
			}
			if r.Events != events || r.Records != int64(len(c.models)*events) {
				t.Errorf("score: %d events, %d records; want %d and one record per model", r.Events, r.Records, events)
			}
			for _, m := range c.models {
				if r.Learned[m] != events {
					t.Errorf("model %s learned %d events, want %d (learned %v)", m, r.Learned[m], events, r.Learned)
				}
			}
		})
	}
}
