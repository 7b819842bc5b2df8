package engine

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
)

// keyedShard is an instance-scope shard over one key-scoped MAM with at
// most max keys in memory, on an in-memory key store.
func keyedShard(t testing.TB, max int, keys *keystore.DB) *Shard {
	t.Helper()
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 8, Seed: 1}, Balance: true, Delta: 0.05})
	}
	m, _ := factory()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, KeyStore: keys},
		[]NamedModel{{Name: "k", Model: m, Fingerprint: "k-fp", Factory: factory, MaxKeys: max, New: factory}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s, err := e.NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzKeyedRestore fuzzes the decoder of a key-scoped model's saved state
// (a checkpoint's delta, or the encoding of earlier versions): no input
// panics, and what restores captures again to a state that restores.
func FuzzKeyedRestore(f *testing.F) {
	seed := keyedShard(f, 3, nil)
	if _, _, err := seed.Restore(nil, nil); err != nil {
		f.Fatal(err)
	}
	sink := &memSink{}
	for i, key := range []string{"alice", "bob", "carol", "alice", "dave"} {
		seed.Process(&kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"features":[%d,1],"label":%d}`, i, 1-2*(i%2))}, sink)
	}
	c, err := seed.Capture()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c.Models[0].Data)
	f.Add([]byte("KEYD\x00\x00\x00\x00"))
	f.Add([]byte("KEYD\x01\x00\x00\x00\x01\x00\x00\x00k\x00\x00\x00\x00"))
	f.Add([]byte("KEY2\x01\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := keystore.Open("", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer keys.Close()
		s := keyedShard(t, 3, keys)
		saved := []snapshot.Model{{Name: "k", Type: "mam", Fingerprint: "k-fp", Data: b}}
		if _, _, err := s.Restore(saved, nil); err != nil {
			return
		}
		c, err := s.Capture()
		if err != nil {
			t.Fatal(err)
		}
		s2 := keyedShard(t, 3, keys) // the key store the first one wrote
		if _, _, err := s2.Restore(c.Models, nil); err != nil {
			t.Fatalf("a captured state does not restore: %v", err)
		}
	})
}
