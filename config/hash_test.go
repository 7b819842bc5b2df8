package config

import (
	"strings"
	"testing"
)

// TestHashedFeatures: features.hash gives the dimension 2^bits and a
// default max_features, changes the fingerprint (a state hashed one way is
// not restored into a model hashed another), and its errors name the key.
func TestHashedFeatures(t *testing.T) {
	const doc = `
models:
  - name: clicks
    type: logistic
    features:
      hash: {bits: 18, seed: 3}
      namespaces: [user, item]
      interactions: [[user, item]]
`
	c, err := Parse([]byte(doc), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Models[0].Features
	if f.Dim != 1<<18 || f.MaxFeatures != DefaultMaxFeatures || f.Hash.Bits != 18 || f.Hash.Seed != 3 || len(f.Interactions) != 1 {
		t.Fatalf("features %+v", f)
	}
	other, err := Parse([]byte(strings.Replace(doc, "seed: 3", "seed: 4", 1)), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Models[0].Fingerprint() == other.Models[0].Fingerprint() {
		t.Fatal("the hash seed does not change the fingerprint")
	}
	for _, tc := range []struct{ from, to, want string }{
		{"hash: {bits: 18, seed: 3}", "hash: {bits: 31}", "models[0].features.hash.bits: must be in [1, 30], got 31"},
		{"interactions: [[user, item]]", "interactions: [[user, ad]]", `models[0].features.interactions[0]: namespace "ad" is not in models[0].features.namespaces [user, item]`},
		{"interactions: [[user, item]]", "interactions: [[user]]", "models[0].features.interactions[0]: must be a pair"},
		{"      namespaces: [user, item]\n", "      namespaces: [user, item]\n      standardize: true\n", "models[0].features.standardize: does not go with models[0].features.hash"},
		{"      hash: {bits: 18, seed: 3}\n", "      hash: {bits: 18, seed: 3}\n      dim: 5\n", "models[0].features.dim: is 5 but models[0].features.hash.bits 18 gives 2^18 = 262144"},
		{"      hash: {bits: 18, seed: 3}\n", "      dim: 4\n", "models[0].features.namespaces: only with models[0].features.hash"},
	} {
		_, err := Parse([]byte(strings.Replace(doc, tc.from, tc.to, 1)), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.to, err, tc.want)
		}
	}
}
