package holder

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
)

// The instances kept in memory are always the max most recently used
// keys, while the table fills up and once it is full, with captures in
// between; and the list is in the order of the last uses.
func TestKeyedKeepsMostRecentlyUsed(t *testing.T) {
	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Delta: 0.05})
	}
	const max = 8
	k, err := newKeyedModels(factory, max, keys.Table("", "lru"))
	if err != nil {
		t.Fatal(err)
	}
	var recent []string // the reference: most recent first
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		// The first 100 uses stay within 6 keys (the table is not full); the
		// rest range over 20 with a skew to the low ones.
		n := 20
		if i < 100 {
			n = 6
		}
		key := fmt.Sprintf("k%d", min(rng.IntN(n), rng.IntN(n)))
		ent, err := k.get([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		k.learned(ent)
		recent = slices.DeleteFunc(recent, func(s string) bool { return s == key })
		recent = slices.Insert(recent, 0, key)
		if len(recent) > max {
			recent = recent[:max]
		}
		if i%37 == 0 {
			if _, err := k.capture(); err != nil {
				t.Fatal(err)
			}
		}
		in := slices.Sorted(maps.Keys(k.index))
		want := slices.Sorted(slices.Values(recent))
		if !slices.Equal(in, want) {
			t.Fatalf("use %d (%s): in memory %v, want the %d most recent %v", i, key, in, max, want)
		}
	}
	if len(k.pending) == 0 {
		t.Fatal("no key was evicted: the test does not reach a full table")
	}
	if err := k.check(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ent := range k.byUse() {
		order = append(order, ent.key)
	}
	if !slices.Equal(order, recent) {
		t.Fatalf("order %v, want %v", order, recent)
	}
}
