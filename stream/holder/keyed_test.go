package holder

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
)

func testSpec() *Spec {
	return &Spec{
		Name: "k",
		Factory: func() (online.Model, error) {
			return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Delta: 0.05})
		},
		Version:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "v"}),
		KeyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "e"}),
	}
}

// A key table in stripes, with fewer instances in memory than keys, goes
// through checkpoints (capture, durable, settle) and a restore into a new
// holder on the same key store: every key's instance is then what it was,
// and the figures add up.
func TestKeyedCheckpointRestore(t *testing.T) {
	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	const nkeys = 40
	c := KeyedConfig{Table: keys.Table("", "k"), MaxKeys: 16, Stripes: 4, Hold: 1 << 20, Want: new(atomic.Bool)}
	h, err := NewKeyed(testSpec(), new(Figures), c)
	if err != nil {
		t.Fatal(err)
	}
	h.Share()
	var in Input
	var saved []byte
	for i := range 1000 {
		key := fmt.Appendf(nil, "user-%d", (i*7)%nkeys)
		in.SetDense([]float64{float64(i%5) - 2, float64((i*3)%7) - 3})
		h.Observe(key, &in, float64(1-2*(i%2)), true)
		if i%250 == 249 {
			data, d, err := h.Capture()
			if err != nil {
				t.Fatal(err)
			}
			mk, err := h.Durable(d)
			if err != nil {
				t.Fatal(err)
			}
			h.Settle(d, mk)
			saved = data
		}
		if err := h.Check(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	// In memory: each stripe's share of max_keys, or fewer when fewer of
	// the keys hash to it (the stripes' seed is random).
	perStripe := map[*keyStripe]int{}
	for j := range nkeys {
		perStripe[h.stripe(fmt.Appendf(nil, "user-%d", j))]++
	}
	hot := 0
	for _, st := range h.stripes {
		hot += min(perStripe[st], st.k.max)
	}
	st := h.Stats()
	if st.Examples != 1000 || st.Known != nkeys || st.Stored != nkeys || st.Checkpoint != 4 || st.Hot != hot || st.Pending != 0 {
		t.Fatalf("stats %+v, want 1000 examples, %d keys known and stored, checkpoint 4, %d in memory, none pending", st, nkeys, hot)
	}

	r, err := NewKeyed(testSpec(), new(Figures), c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Decode(saved)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(saved, d, nil, false); err != nil {
		t.Fatal(err)
	}
	for j := range nkeys {
		key := fmt.Appendf(nil, "user-%d", j)
		a, err := h.Lookup(key)
		if err != nil || a == nil {
			t.Fatalf("%s: %v", key, err)
		}
		b, err := r.Lookup(key)
		if err != nil || b == nil {
			t.Fatalf("%s after the restore: %v", key, err)
		}
		x, _ := a.MarshalBinary()
		y, _ := b.MarshalBinary()
		if !bytes.Equal(x, y) {
			t.Fatalf("%s: the restored instance differs", key)
		}
	}
	if got := r.Stats(); got.Examples != 1000 || got.Known != nkeys {
		t.Errorf("restored stats %+v, want 1000 examples and %d keys", got, nkeys)
	}
	if m, err := r.Lookup([]byte("stranger")); m != nil || err != nil {
		t.Errorf("a key never seen: %v, %v; want nothing", m, err)
	}
}
