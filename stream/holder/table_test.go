package holder

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
)

// The instances kept in memory are always those a second-chance (CLOCK)
// cache of max keys keeps, while the table fills up and once it is full,
// with captures in between; and the ring is in the sweep's order, each
// instance marked as the reference marks it.
func TestKeyedSecondChance(t *testing.T) {
	const max = 8
	k := testTable(t, max)
	type slot struct {
		key  string
		used bool
	}
	var ring []slot // the reference: the sweep's order, oldest first
	rng := rand.New(rand.NewPCG(1, 2))
	evicted := 0
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
		if j := slices.IndexFunc(ring, func(s slot) bool { return s.key == key }); j >= 0 {
			ring[j].used = true
		} else {
			for len(ring) >= max {
				s := ring[0]
				ring = ring[1:]
				if s.used {
					ring = append(ring, slot{s.key, false})
				} else {
					evicted++
				}
			}
			ring = append(ring, slot{key, false})
		}
		if i%37 == 0 {
			if _, err := k.capture(); err != nil {
				t.Fatal(err)
			}
		}
		var got []slot
		for _, ent := range slices.Backward(k.bySweep()) {
			got = append(got, slot{ent.key, ent.used})
		}
		if !slices.Equal(got, ring) {
			t.Fatalf("use %d (%s): ring %v, want %v", i, key, got, ring)
		}
		if k.index[key] == nil {
			t.Fatalf("use %d: %s not in memory after its use", i, key)
		}
	}
	if evicted < 50 || len(k.pending) == 0 {
		t.Fatalf("%d evictions, %d keys pending: the test does not reach a full table", evicted, len(k.pending))
	}
	if err := k.check(); err != nil {
		t.Fatal(err)
	}
}

// Keys used again within a turn of the ring stay in memory through a flood
// of keys seen once, which an order of loading (FIFO) would evict.
func TestKeyedKeepsHotKeysThroughFlood(t *testing.T) {
	const max = 8
	k := testTable(t, max)
	hot := []string{"h0", "h1", "h2"}
	for i := range 2000 {
		key := hot[i%len(hot)]
		if i%2 == 1 {
			key = fmt.Sprintf("flood%d", i)
		}
		ent, err := k.get([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		k.learned(ent)
		for _, h := range hot {
			if _, ok := k.index[h]; !ok && i >= 2*len(hot) {
				t.Fatalf("use %d: hot key %s evicted by the flood", i, h)
			}
		}
		if k.len() > max {
			t.Fatalf("use %d: %d instances in memory, at most %d", i, k.len(), max)
		}
	}
	if err := k.check(); err != nil {
		t.Fatal(err)
	}
}

// testTable is an empty table of a linear MAM on two features keeping at
// most max instances in memory.
func testTable(t testing.TB, max int) *keyedModels {
	t.Helper()
	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Delta: 0.05})
	}
	k, err := newKeyedModels(factory, max, keys.Table("", "ring"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// BenchmarkKeyTableHit looks up a key already in memory, drawn uniformly
// among 10 000 (the table's part of bench's key-scoped case, whose keys
// mostly miss the first-level cache), and marks it learned.
func BenchmarkKeyTableHit(b *testing.B) {
	const keys = 10_000
	k := testTable(b, 2*keys)
	names := make([][]byte, keys)
	for i := range names {
		names[i] = fmt.Appendf(nil, "k%d", i)
		if _, err := k.get(names[i]); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := make([]int32, 1<<16)
	for i := range order {
		order[i] = int32(rng.IntN(keys))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ent, err := k.get(names[order[i&(len(order)-1)]])
		if err != nil {
			b.Fatal(err)
		}
		k.learned(ent)
		i++
	}
}
