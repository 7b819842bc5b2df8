package engine

import (
	"testing"

	"github.com/streamer/streamer/stream/holder"
)

// keys is the key table of a key-scoped model with one stripe (partition
// scope, or max_keys under 2048), for the tests that look into it.
func (m *shardModel) keys(t testing.TB) *holder.Keyed {
	t.Helper()
	h, ok := m.h.(*holder.Keyed)
	if !ok {
		t.Fatalf("model %s is not key-scoped: a %T", m.def.name, m.h)
	}
	return h
}

// deltaKeys is the keys of a key-scoped model's delta.
func deltaKeys(d *holder.Delta) [][]byte {
	keys, _ := d.States()
	return keys
}
