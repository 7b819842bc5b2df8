package config

import (
	"strings"
	"testing"

	"github.com/streamer/streamer/online"
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
	// mam's and omam's random features generate their frequencies
	// (kernel.sparse); the linear kernel takes sparse input as it is.
	for _, tc := range []struct {
		typ    string
		sparse bool
	}{
		{"type: mam", true},
		{"type: mam\n    kernel: {type: laplacian, gamma: 2}", true},
		{"type: mam\n    kernel: {type: linear}", false},
		{"type: mam\n    budget: 20", false},
	} {
		c, err := Parse([]byte(strings.Replace(doc, "type: logistic", tc.typ, 1)), nil, testTypes)
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		if k := c.Models[0].Params.(*online.MAMParams).Kernel; k.Sparse != tc.sparse {
			t.Errorf("%s: kernel %+v, want sparse %v", tc.typ, k, tc.sparse)
		}
	}
	dense, err := Parse([]byte("models:\n  - {name: clicks, type: mam, features: {dim: 16}}\n"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if dense.Models[0].Params.(*online.MAMParams).Kernel.Sparse {
		t.Error("dense features with kernel.sparse")
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
		{"type: logistic", "type: lda", "models[0].features.hash: lda does not take hashed features: it keeps a dense dim × dim covariance"},
	} {
		_, err := Parse([]byte(strings.Replace(doc, tc.from, tc.to, 1)), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.to, err, tc.want)
		}
	}
}

// TestHashedStoredInputs: the models that keep their inputs (svm, the
// exact ranking solver, the exact kernel mode of mam) are validated for
// hashed features by their sparse rules — the window bounded by
// max_features, not 2^bits — and build with sparse storage (Spec); what
// has no sparse path is refused naming the key.
func TestHashedStoredInputs(t *testing.T) {
	const doc = `
models:
  - name: m
    type: svm
    kernel: {type: rbf, gamma: 0.02}
    window: {events: 2000}
    features:
      hash: {bits: 18}
      max_features: 64
`
	c, err := Parse([]byte(doc), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Models[0].Spec(); s.MaxFeatures != 64 || s.Dim != 1<<18 {
		t.Fatalf("spec %+v", s)
	}
	m, err := testTypes.New(c.Models[0].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := online.SparseSupport(m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"    kernel: {type: rbf, gamma: 0.02}\n", "", "models[0].kernel.gamma: the default 1/dim = 1/262144 makes no sense for hashed features"},
		{"max_features: 64", "max_features: 10000", "models[0].window.events: with hashed features window.events × features.max_features must be ≤"},
		{"type: svm\n    kernel: {type: rbf, gamma: 0.02}", "type: lsrrank\n    solver: features", "models[0].solver: features (random features of the dense input"},
		{"type: svm\n    kernel: {type: rbf, gamma: 0.02}", "type: lowrank", "models[0].features.hash: type lowrank takes matrix features"},
		{"type: svm\n    kernel: {type: rbf, gamma: 0.02}\n    window: {events: 2000}", "type: mam\n    kernel: {type: rbf, gamma: 1}\n    budget: 300000", "models[0].budget: with hashed features budget×(features.max_features+7)"},
	} {
		_, err := Parse([]byte(strings.Replace(doc, tc.from, tc.to, 1)), nil, testTypes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.to, err, tc.want)
		}
	}
	// Without hashing the same window at 2^18 dense values is refused.
	dense := strings.Replace(doc, "      hash: {bits: 18}\n      max_features: 64\n", "      dim: 262144\n", 1)
	if _, err := Parse([]byte(dense), nil, testTypes); err == nil || !strings.Contains(err.Error(), "window.events") {
		t.Fatalf("dense window of 2000 × 2^18: %v", err)
	}
}

// TestHashedGeneratedMapBits: a mam whose rbf or laplacian frequencies are
// generated per index (kernel.sparse, set by features.hash) keeps nothing
// per input index, so it takes more than 20 bits; the linear kernel, whose
// sums are per index, does not.
func TestHashedGeneratedMapBits(t *testing.T) {
	const doc = `
models:
  - name: ctr
    type: mam
    kernel: {type: rbf, features: 256}
    features:
      hash: {bits: 26}
      max_features: 64
`
	c, err := Parse([]byte(doc), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	m, err := testTypes.New(c.Models[0].Spec())
	if err != nil {
		t.Fatal(err)
	}
	if m.Dim() != 1<<26 {
		t.Fatalf("dim %d", m.Dim())
	}
	if err := online.SparseSupport(m); err != nil {
		t.Fatal(err)
	}
	if b, _ := m.MarshalBinary(); len(b) > 1<<20 {
		t.Fatalf("an empty model's state is %d bytes: something is kept per input index", len(b))
	}
	lin := strings.Replace(doc, "{type: rbf, features: 256}", "{type: linear}", 1)
	if _, err := Parse([]byte(lin), nil, testTypes); err == nil || !strings.Contains(err.Error(), "models[0].features.hash.bits: 26 gives 2^26") {
		t.Fatalf("linear mam at 26 bits: %v", err)
	}
}
