package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input panics, that every error starts with
// "config: ", and that whatever is accepted validates and fingerprints.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.yaml")
	bad, _ := filepath.Glob("testdata/bad/*.yaml")
	for _, p := range append(paths, bad...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	f.Add([]byte(minimal), "STREAMER_KAFKA_BROKERS=a:1,b:2")
	f.Add([]byte("models: [{name: m, type: mam, kernel: {gamma: 1e-3}, features: {dim: 2}, delta: .05}]"), "STREAMER_LOG_LEVEL=warn")
	// One model of each type, with nested keys and lists of structs.
	f.Add([]byte(`models:
  - {name: o, type: omam, levels: 3, edges: [1, 2], budget: 10, kernel: {type: polynomial}, features: {dim: 2}}
  - {name: l, type: logistic, learning_rate: 0.5, features: {dim: 2, standardize: true}}
  - {name: d, type: lda, decay: {half_life: 100}, features: {dim: 2}}
  - {name: s, type: svm, kernel: {type: sigmoid, coef0: 0.5}, window: {events: 50, time: 1m}, refit: {every: 1s, guard: 0}, probability: {levels: 4}, features: {dim: 2}}
  - {name: r, type: lsrrank, solver: features, kernel: {features: 16, seed: 2}, levels: 5, features: {dim: 2}, scope: key}
  - {name: k, type: krr, lambda: 0.1, kernel: {type: linear}, features: {dim: 2}}
  - {name: m, type: mlsrrank, kernels: [{gamma: 1}, {gamma: 2, v: 3}], features: {dim: 2}}
`), "")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		c, err := Parse(data, strings.Split(env, "\n"), testTypes)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "config: ") {
					t.Fatalf("error line %q lacks the config: prefix", line)
				}
			}
			return
		}
		if err := c.Validate(testTypes); err != nil {
			t.Fatalf("Parse accepted what Validate rejects: %v", err)
		}
		_ = c.Fingerprint()
	})
}
