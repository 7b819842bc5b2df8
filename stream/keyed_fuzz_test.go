package stream

import (
	"bytes"
	"testing"

	"github.com/streamer/streamer/online"
)

// FuzzKeyedRestore fuzzes the decoder of a key-scoped model's state
// (DecodeKeyed and keyedModels.UnmarshalBinary): no input panics, a failed
// decode leaves the instances unchanged, and what decodes re-encodes to
// bytes that decode to the same encoding.
func FuzzKeyedRestore(f *testing.F) {
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 8, Seed: 1}, Balance: true, Delta: 0.05})
	}
	seed, err := newKeyedModels(factory, 3, "")
	if err != nil {
		f.Fatal(err)
	}
	for i, key := range []string{"alice", "bob", "carol", "alice", "dave"} {
		m, err := seed.get([]byte(key))
		if err != nil {
			f.Fatal(err)
		}
		m.Observe([]float64{float64(i), 1}, float64(1-2*(i%2)), true)
	}
	b, err := seed.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("KEYD\x00\x00\x00\x00"))
	f.Add([]byte("KEYD\x01\x00\x00\x00\x01\x00\x00\x00k\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := newKeyedModels(factory, 3, "")
		if err != nil {
			t.Fatal(err)
		}
		before, _ := k.MarshalBinary()
		if err := k.UnmarshalBinary(b); err != nil {
			if after, _ := k.MarshalBinary(); !bytes.Equal(before, after) {
				t.Fatalf("a failed decode changed the instances")
			}
			return
		}
		b2, err := k.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		k2, _ := newKeyedModels(factory, 3, "")
		if err := k2.UnmarshalBinary(b2); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if b3, _ := k2.MarshalBinary(); !bytes.Equal(b2, b3) {
			t.Fatalf("re-encoding is not stable")
		}
	})
}
