package eval

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
)

// TestHashedStoredInputsEval: models that keep their inputs — svm (a
// window refitted in the background), krr (exact solver) and the exact
// kernel mode of mam (a budget) — judged by streamer eval on HouseVotes84
// as categorical events hashed into 2^16 indices give the holdout error
// of the same models on the one-hot dense encoding (48 features) of the
// same split, within half a point: with ±1 hashed entries and no
// collision, the kernels are the one-hot ones.
func TestHashedStoredInputsEval(t *testing.T) {
	f, err := os.Open("../online/testdata/housevotes84.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type member struct {
		votes []string
		label int
	}
	var all []member
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		cols := strings.Split(sc.Text(), ",")
		m := member{label: 1}
		if strings.Trim(cols[0], `"`) == "democrat" {
			m.label = -1
		}
		for _, c := range cols[1:] {
			v := strings.Trim(c, `"`)
			if v == "NA" {
				v = "missing"
			}
			m.votes = append(m.votes, v)
		}
		all = append(all, m)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	dir := t.TempDir()
	write := func(name string, ms []member, hashed bool) string {
		var b strings.Builder
		if !hashed {
			for j := range 16 {
				fmt.Fprintf(&b, "v%dy,v%dn,v%dm,", j, j, j)
			}
			b.WriteString("label\n")
		}
		for _, m := range ms {
			if hashed {
				var feats []string
				for j, v := range m.votes {
					feats = append(feats, fmt.Sprintf(`"v%d":%q`, j+1, v))
				}
				fmt.Fprintf(&b, `{"features":{%s},"label":%d}`+"\n", strings.Join(feats, ","), m.label)
				continue
			}
			for _, v := range m.votes {
				for _, w := range []string{"y", "n", "missing"} {
					if v == w {
						b.WriteString("1,")
					} else {
						b.WriteString("0,")
					}
				}
			}
			fmt.Fprintf(&b, "%d\n", m.label)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cut := len(all) * 2 / 3
	const models = `
models:
  - name: svm
    type: svm
    kernel: {type: rbf, gamma: 0.03}
    window: {events: 400}
    refit: {every_events: 100}
    features: FEATURES
  - name: krr
    type: krr
    kernel: {type: rbf, gamma: 0.03}
    lambda: 0.1
    window: {events: 400}
    refit: {every_events: 100}
    features: FEATURES
  - name: exact
    type: mam
    kernel: {type: rbf, gamma: 0.05}
    budget: 300
    features: FEATURES
`
	run := func(features, train, test string) *Report {
		cfg, err := config.Parse([]byte(strings.ReplaceAll(models, "FEATURES", features)), nil, testTypes)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), cfg, testTypes, Options{Data: train, Test: test})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	hashed := run("{hash: {bits: 16, seed: 1}}", write("train.jsonl", all[:cut], true), write("test.jsonl", all[cut:], true))
	dense := run("{dim: 48}", write("train.csv", all[:cut], false), write("test.csv", all[cut:], false))
	for _, name := range []string{"svm", "exact"} {
		h, d := hashed.Models[name].Holdout, dense.Models[name].Holdout
		if h == nil || d == nil || h.Error == nil || d.Error == nil {
			t.Fatalf("%s: holdout %+v, dense %+v", name, h, d)
		}
		t.Logf("%s on HouseVotes84: holdout error hashed %.4f, one-hot %.4f", name, *h.Error, *d.Error)
		if math.Abs(*h.Error-*d.Error) > 0.005 || *h.Error > 0.1 {
			t.Errorf("%s: holdout error hashed %.4f, one-hot %.4f", name, *h.Error, *d.Error)
		}
	}
	h, d := hashed.Models["krr"].Holdout, dense.Models["krr"].Holdout
	if h == nil || d == nil || h.RMSE == nil || d.RMSE == nil {
		t.Fatalf("krr: holdout %+v, dense %+v", h, d)
	}
	t.Logf("krr on HouseVotes84: holdout RMSE hashed %.4f, one-hot %.4f", *h.RMSE, *d.RMSE)
	if math.Abs(*h.RMSE-*d.RMSE) > 0.01**d.RMSE || *h.RMSE > 0.6 {
		t.Errorf("krr: holdout RMSE hashed %.4f, one-hot %.4f", *h.RMSE, *d.RMSE)
	}
}
