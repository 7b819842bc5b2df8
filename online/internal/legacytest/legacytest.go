// Package legacytest reads the manifest of online/testdata/legacy: model
// states encoded before the model registry (format version 1 and the
// refitted models' RFIT formats), each with the configuration it was made
// with and the predictions it made on recorded inputs. The tests of online
// and online/refit check that today's code restores them.
package legacytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// Entry is one model of the manifest.
type Entry struct {
	Name        string      `json:"name"`
	File        string      `json:"file"`
	Type        string      `json:"type"` // the encoded type tag
	Dim         int         `json:"dim"`
	YAML        string      `json:"yaml"` // the model's configuration mapping
	Standardize bool        `json:"standardize"`
	Examples    int64       `json:"examples"`
	Inputs      [][]float64 `json:"inputs"`
	Predictions []Pred      `json:"predictions"`
}

// Pred is a recorded prediction: the fields the generator recorded, as
// the model returned them.
type Pred struct {
	Score          float64 `json:"score"`
	Label          int     `json:"label"`
	MistakeBound   float64 `json:"mistake_bound"`
	HasBound       bool    `json:"has_bound"`
	Probability    float64 `json:"probability"`
	HasProbability bool    `json:"has_probability"`
	N              int64   `json:"n"`
	Version        int64   `json:"version"`
}

// Same reports whether a and b are bit-identical.
func (a Pred) Same(b Pred) bool {
	f := math.Float64bits
	return f(a.Score) == f(b.Score) && a.Label == b.Label && f(a.MistakeBound) == f(b.MistakeBound) &&
		a.HasBound == b.HasBound && f(a.Probability) == f(b.Probability) && a.HasProbability == b.HasProbability &&
		a.N == b.N && a.Version == b.Version
}

// Load reads dir/manifest.json.
func Load(t testing.TB, dir string) []Entry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

// ConfiguredType is the type the entry's configuration names (the encoded
// tag may differ: "rfrank" was configured as lsrrank).
func (e Entry) ConfiguredType(t testing.TB) string {
	t.Helper()
	var head struct{ Type string }
	if err := yaml.Unmarshal([]byte(e.YAML), &head); err != nil {
		t.Fatal(err)
	}
	return head.Type
}

// DecodeParams decodes the entry's configuration into p (a pointer to the
// type's parameter struct, holding its defaults) as the configuration
// does: every key but name, type, features, scope and max_keys, each of
// which must be a parameter. It returns whether a key (a dotted path, as
// Completer.Complete asks) was given.
func (e Entry) DecodeParams(t testing.TB, p any) func(key string) bool {
	t.Helper()
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(e.YAML), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "type", "features", "scope", "max_keys"} {
		delete(raw, k)
	}
	keys, err := yaml.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(keys))
	dec.KnownFields(true)
	if err := dec.Decode(p); err != nil {
		t.Fatalf("%s: %v", e.YAML, err)
	}
	given := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				given[key] = true
				walk(key, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", prefix, i), e)
			}
		}
	}
	walk("", raw)
	return func(key string) bool { return given[key] }
}
