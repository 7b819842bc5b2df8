package eval

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
)

// TestHashedJSONLines: streamer eval reads categorical wire events (JSON
// Lines) with features.hash exactly as the service decodes them: the
// HouseVotes84 votes (y / n / missing per member of Congress, party as
// label; online/testdata/housevotes84.csv) as categorical events, a 2/3
// prequential and 1/3 holdout split, judged by a hashed logistic model:
// holdout error under 8% (one-hot logistic over the same splits: 4.8%,
// online/sparse_test.go). A CSV file with hashing is refused naming the
// format, and a model type without a sparse path is refused naming it.
func TestHashedJSONLines(t *testing.T) {
	f, err := os.Open("../online/testdata/housevotes84.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []string
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		cols := strings.Split(sc.Text(), ",")
		label := 1
		if strings.Trim(cols[0], `"`) == "democrat" {
			label = -1
		}
		var feats []string
		for i, c := range cols[1:] {
			v := strings.Trim(c, `"`)
			if v == "NA" {
				v = "missing"
			}
			feats = append(feats, fmt.Sprintf(`"v%d":%q`, i+1, v))
		}
		events = append(events, fmt.Sprintf(`{"features":{%s},"label":%d}`, strings.Join(feats, ","), label))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	dir := t.TempDir()
	cut := len(events) * 2 / 3
	train, test := filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "test.jsonl")
	for path, evs := range map[string][]string{train: events[:cut], test: events[cut:]} {
		if err := os.WriteFile(path, []byte(strings.Join(evs, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := `
models:
  - name: votes
    type: logistic
    learning_rate: 0.1
    features: {hash: {bits: 12, seed: 1}}
`
	cfg, err := config.Parse([]byte(doc), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, testTypes, Options{Data: train, Test: test})
	if err != nil {
		t.Fatal(err)
	}
	h := rep.Models["votes"].Holdout
	if h == nil || h.Error == nil || *h.Error > 0.08 {
		t.Fatalf("holdout %+v", h)
	}
	t.Logf("hashed logistic on HouseVotes84: holdout error %.3f over %d events", *h.Error, len(events)-cut)
	// Shuffled, the sparse rows are kept as read.
	if rep, err := Run(context.Background(), cfg, testTypes, Options{Data: train, Test: test, Shuffle: true, Seed: 3}); err != nil ||
		rep.Models["votes"].Holdout.Error == nil || *rep.Models["votes"].Holdout.Error > 0.08 {
		t.Fatalf("shuffled: %v", err)
	}

	csvPath := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(csvPath, []byte("a,label\n1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg, testTypes, Options{Data: csvPath}); err == nil || !strings.Contains(err.Error(), "JSON Lines (wire events) only") {
		t.Fatalf("CSV with hashing: %v", err)
	}
	mam, err := config.Parse([]byte(strings.Replace(doc, "type: logistic\n    learning_rate: 0.1", "type: mam\n    kernel: {type: rbf, gamma: 1, features: 32}", 1)), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), mam, testTypes, Options{Data: train}); err == nil || !strings.Contains(err.Error(), "does not take hashed (sparse) features in this configuration") {
		t.Fatalf("mam with hashing: %v", err)
	}
}
