package stream

import "testing"

// keys is the key table of a key-scoped model with one stripe (partition
// scope, or max_keys under 2048), for the tests that look into it.
func (m *shardModel) keys(t testing.TB) *keyedModels {
	t.Helper()
	h := m.h.(*keyedHolder)
	if len(h.stripes) != 1 {
		t.Fatalf("model %s: its key table is in %d stripes, the test looks into one", m.def.name, len(h.stripes))
	}
	return h.stripes[0].k
}
