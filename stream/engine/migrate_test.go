package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
)

// legacyEntry is one model of online/testdata/legacy/manifest.json: state
// written by the code before the model registry (format version 1, old
// fingerprints).
type legacyEntry struct {
	Name     string `json:"name"`
	File     string `json:"file"`
	Type     string `json:"type"`
	YAML     string `json:"yaml"`
	Examples int64  `json:"examples"`
}

func legacyManifest(t *testing.T) []legacyEntry {
	t.Helper()
	b, err := os.ReadFile("../../online/testdata/legacy/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m []legacyEntry
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// legacyEngine builds an engine of one model from a models entry in YAML.
func legacyEngine(t *testing.T, yaml string) (*Engine, config.Config) {
	t.Helper()
	cfg, err := config.Parse([]byte("models:\n  - "+yaml+"\n"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	models, err := BuildModels(cfg, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: cfg.Models[0].Features.Dim}, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, cfg
}

// TestLegacyStateMigrates: after the upgrade to the model registry (whose
// fingerprints are computed differently), a snapshot written before it
// still restores every model whose saved parameters are exactly those
// configured — the old encodings carry them — with all its examples; a
// model configured differently starts empty, as does a refitted model
// whose old encoding did not record its parameters.
func TestLegacyStateMigrates(t *testing.T) {
	for _, e := range legacyManifest(t) {
		t.Run(e.Name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../../online/testdata/legacy", e.File))
			if err != nil {
				t.Fatal(err)
			}
			eng, cfg := legacyEngine(t, e.YAML)
			typ := cfg.Models[0].Type
			saved := []snapshot.Model{{Name: "m", Type: typ, Fingerprint: "fingerprint of the old scheme", Data: data}}
			shard, err := eng.NewShard("")
			if err != nil {
				t.Fatal(err)
			}
			fresh, _, err := shard.Restore(saved, nil)
			if err != nil {
				t.Fatal(err)
			}
			refitted := testTypes.Lookup(typ).Traits(cfg.Models[0].Params).Refitted
			switch {
			case refitted && len(fresh) != 1:
				t.Fatalf("a refitted model's old state (no parameters recorded) was restored")
			case refitted:
				return
			case len(fresh) != 0:
				t.Fatalf("the old state of an identically configured model was not restored")
			}
			if n := eng.Models()[0].Model.Examples(); n != e.Examples {
				t.Fatalf("restored %d examples, the old state had %d", n, e.Examples)
			}
			// Configured differently: starts empty.
			var other string
			if typ == "logistic" {
				other = strings.Replace(e.YAML, "features:", "learning_rate: 0.2, features:", 1)
			} else if typ == "lda" {
				other = strings.Replace(e.YAML, "features:", "window: {events: 7}, features:", 1)
			} else {
				other = strings.Replace(e.YAML, "features: {dim: ", "features: {standardize: true, dim: ", 1)
				if strings.Contains(e.YAML, "standardize: true") {
					other = strings.Replace(e.YAML, "standardize: true", "standardize: false", 1)
				}
			}
			eng2, _ := legacyEngine(t, other)
			shard2, err := eng2.NewShard("")
			if err != nil {
				t.Fatal(err)
			}
			fresh, _, err = shard2.Restore(saved, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(fresh) != 1 {
				t.Fatalf("configured as %s, the old state of %s was restored", other, e.YAML)
			}
		})
	}
}
