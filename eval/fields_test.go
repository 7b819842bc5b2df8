package eval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
)

// fieldRec is a logistic regression that reads the fields of its hashed
// entries (online.FieldModel) and records them in fieldRecLog.
type fieldRec struct{ *online.Logistic }

var fieldRecLog struct {
	mu  sync.Mutex
	obs []string // fmt.Sprint(field) of every observation
}

func (m fieldRec) ObserveFields(idx []int32, val []float64, field []uint8, y float64, labelled bool) online.Prediction {
	fieldRecLog.mu.Lock()
	fieldRecLog.obs = append(fieldRecLog.obs, fmt.Sprint(field))
	fieldRecLog.mu.Unlock()
	return m.Logistic.ObserveSparse(idx, val, y, labelled)
}

type fieldRecParams struct {
	Rate float64 `yaml:"rate"`
}

func (*fieldRecParams) Validate(int) error { return nil }

var typesWithFieldRec = online.MustRegistry(append(testTypes.Types(), online.Define(online.Def[fieldRecParams]{
	Name:     "fieldrec",
	Doc:      "test: a logistic regression that records the fields of its hashed entries",
	Defaults: func() fieldRecParams { return fieldRecParams{Rate: 0.1} },
	Traits:   func(*fieldRecParams) online.Traits { return online.Traits{Kind: online.Classifier} },
	New: func(dim int, p *fieldRecParams) (online.Model, error) {
		lg, err := online.NewLogistic(dim, online.LogisticParams{LearningRate: p.Rate})
		return fieldRec{lg}, err
	},
	Restore:  func([]byte) (online.Model, error) { return nil, errors.New("not restored in this test") },
	Examples: func() []fieldRecParams { return []fieldRecParams{{Rate: 0.1}} },
}))...)

// TestHashedFieldsJSONLines: streamer eval gives a model that reads fields
// the field of every hashed entry of a JSON Lines event, numbered by
// features.namespaces as the service numbers them, in the file's order and
// shuffled.
func TestHashedFieldsJSONLines(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.jsonl")
	lines := []string{
		`{"features":{"user":{"id":"u1"},"x":1,"item":{"id":"i1","tags":["a","b"]}},"label":1}`,
		`{"features":{"item":{"id":"i2"},"other":{"o":1}},"label":0}`,
		`{"features":{"user":{"id":"u2","c":"fr"},"item":{"id":"i3"}},"label":1}`,
	}
	if err := os.WriteFile(data, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
models:
  - name: rec
    type: fieldrec
    features:
      hash: {bits: 10}
      namespaces: [item, user]
      interactions: [[user, item]]
`), nil, typesWithFieldRec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[2 0 1 1 1 0 0 0]", "[1 0]", "[2 2 1 0 0]"}
	for _, shuffle := range []bool{false, true} {
		fieldRecLog.obs = nil
		if _, err := Run(context.Background(), cfg, typesWithFieldRec, Options{Data: data, Shuffle: shuffle, Seed: 3}); err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(fieldRecLog.obs)
		if shuffle {
			slices.Sort(got)
			want = slices.Sorted(slices.Values(want))
		}
		if !slices.Equal(got, want) {
			t.Errorf("shuffle %v: fields\n got %q\nwant %q", shuffle, got, want)
		}
	}
}
