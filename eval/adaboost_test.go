package eval

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
)

// adaboostMembersConfig: five classifiers on standardised inputs, then an
// adaboost over their prequential predictions. Its window is the last 200
// of the 398 training rows: the members' early predictions (an svm says
// "no decision" until its first refit, every model is weak at first) say
// little about the members the holdout meets, so the weights are fitted on
// the more mature half of the stream.
const adaboostMembersConfig = `
models:
  - {name: svm_rbf, type: svm, features: {dim: 30, standardize: true}, kernel: {type: rbf}, C: 1, window: {events: 1000}, refit: {every_events: 50, guard: 0}}
  - {name: svm_linear, type: svm, features: {dim: 30, standardize: true}, kernel: {type: linear}, C: 1, window: {events: 1000}, refit: {every_events: 50, guard: 0}}
  - {name: mam, type: mam, features: {dim: 30, standardize: true}, kernel: {type: rbf, gamma: 0.05, features: 512}}
  - {name: logistic, type: logistic, features: {dim: 30, standardize: true}}
  - {name: lda, type: lda, features: {dim: 30, standardize: true}}
  - {name: boost, type: adaboost, features: {dim: 30}, members: [svm_rbf, svm_linear, mam, logistic, lda], rounds: 50, window: {events: 200}, refit: {every_events: 50, guard: 0}}
`

// TestAdaBoostMembersBreastCancer: on breast_cancer (stratified 70/30
// splits, the rows shuffled), the adaboost of five members fitted on their
// prequential predictions is, on the holdout, no worse than the best
// member plus 0.5 point (mean over the splits), and the report carries its
// weights.
func TestAdaBoostMembersBreastCancer(t *testing.T) {
	data, err := os.ReadFile("testdata/breast_cancer.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	header, rows := lines[0], lines[1:]
	cfg, err := config.Parse([]byte(adaboostMembersConfig), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	const splits = 10
	sum := map[string]float64{}
	var weights []FitWeight
	for seed := range splits {
		train, test := stratified(rows, uint64(seed))
		dir := t.TempDir()
		write := func(name string, rs []string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(header+"\n"+strings.Join(rs, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		rep, err := Run(context.Background(), cfg, testTypes, Options{Data: write("train.csv", train), Test: write("test.csv", test)})
		if err != nil {
			t.Fatal(err)
		}
		var line []string
		for _, m := range cfg.Models {
			e := *rep.Models[m.Name].Holdout.Error
			sum[m.Name] += e / splits
			line = append(line, fmt.Sprintf("%s %.2f%%", m.Name, 100*e))
		}
		t.Logf("split %d holdout error: %s", seed, strings.Join(line, ", "))
		if f := rep.Models["boost"].Fit; f == nil || len(f.Weights) != 5 {
			t.Fatalf("split %d: adaboost fit %+v, want the weights of its 5 members", seed, f)
		} else if seed == 0 {
			weights = f.Weights
		}
	}
	best, bestName := 1.0, ""
	for _, m := range cfg.Models[:5] {
		if sum[m.Name] < best {
			best, bestName = sum[m.Name], m.Name
		}
	}
	t.Logf("mean holdout error: boost %.2f%%, best member %s %.2f%%; split 0 weights %+v", 100*sum["boost"], bestName, 100*best, weights)
	if sum["boost"] > best+0.005 {
		t.Errorf("adaboost's mean holdout error %.2f%% is worse than the best member's (%s, %.2f%%) plus 0.5 point", 100*sum["boost"], bestName, 100*best)
	}
}

// stratified splits rows (label last) 70/30 per class, shuffled with seed.
func stratified(rows []string, seed uint64) (train, test []string) {
	rng := rand.New(rand.NewPCG(seed, 77))
	byClass := map[string][]string{}
	var classes []string
	for _, r := range rows {
		c := r[strings.LastIndexByte(r, ',')+1:]
		if _, ok := byClass[c]; !ok {
			classes = append(classes, c)
		}
		byClass[c] = append(byClass[c], r)
	}
	for _, c := range classes {
		rs := byClass[c]
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		k := len(rs) * 7 / 10
		train, test = append(train, rs[:k]...), append(test, rs[k:]...)
	}
	rng.Shuffle(len(train), func(i, j int) { train[i], train[j] = train[j], train[i] })
	return train, test
}
