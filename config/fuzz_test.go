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
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		c, err := Parse(data, strings.Split(env, "\n"))
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "config: ") {
					t.Fatalf("error line %q lacks the config: prefix", line)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted what Validate rejects: %v", err)
		}
		_ = c.Fingerprint()
	})
}
