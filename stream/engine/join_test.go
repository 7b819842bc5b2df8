package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/allocs"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// The sizes joinBytes counts with are the types' own.
func TestJoinSizes(t *testing.T) {
	if got := unsafe.Sizeof(joinSlot{}); got != joinSlotBytes {
		t.Errorf("joinSlot is %d bytes, joinSlotBytes %d", got, joinSlotBytes)
	}
	if got := unsafe.Sizeof(online.Prediction{}); got != predictionBytes {
		t.Errorf("online.Prediction is %d bytes, predictionBytes %d", got, predictionBytes)
	}
}

// TestJoinBufferRules: what leaves a join buffer, and why. The oldest
// event leaves for a newer one when the slots are full (counted full, its
// label then too late); an event older than the buffer's time leaves
// (expired); an event whose key already has perKey waiting is not kept
// (quota), and its key's room comes back as its events join or leave; a
// repeated id replaces the event, which counts once against its key; a
// label must match the id's two hashes.
func TestJoinBufferRules(t *testing.T) {
	preds := []online.Prediction{{Score: 1}}
	x := []float64{1, 2}
	put := func(j *joinBuffer, id, key string, now int64) (bool, joinDrops) {
		return j.put([]byte(id), []byte(key), x, preds, now)
	}
	t.Run("full", func(t *testing.T) {
		j := newJoinBuffer(joinConfig{events: 4, dim: 2, models: 1})
		var d joinDrops
		for i := range 6 {
			kept, di := put(j, fmt.Sprint("e", i), "k", 0)
			if !kept {
				t.Fatalf("e%d not kept", i)
			}
			d.add(di)
		}
		if d != (joinDrops{full: 2}) || j.pending() != 4 {
			t.Fatalf("drops %+v, pending %d; want 2 full, 4 pending", d, j.pending())
		}
		if _, st, _ := j.take([]byte("e1"), 0); st != tooLate {
			t.Fatalf("e1: %v, want too late", st)
		}
		sl, st, _ := j.take([]byte("e5"), 0)
		if st != joined || !slices.Equal(sl.x, x) || sl.preds[0].Score != 1 {
			t.Fatalf("e5: %v %+v", st, sl)
		}
		if _, st, _ := j.take([]byte("e5"), 0); st != unknownID {
			t.Fatalf("e5 again: %v, want unknown", st)
		}
		// e2..e4 leave for f0..f2, counted; the joined e5 leaves for f3
		// without counting.
		d = joinDrops{}
		for i := range 3 {
			_, di := put(j, fmt.Sprint("f", i), "k", 0)
			d.add(di)
		}
		if _, d3 := put(j, "f3", "k", 0); d != (joinDrops{full: 3}) || d3 != (joinDrops{}) {
			t.Fatalf("drops %+v, then %+v; want 3 full, then none", d, d3)
		}
	})
	t.Run("expired", func(t *testing.T) {
		j := newJoinBuffer(joinConfig{events: 10, dim: 2, models: 1, maxAge: 100})
		put(j, "a", "k", 0)
		put(j, "b", "k", 50)
		if _, d := put(j, "c", "k", 120); d != (joinDrops{expired: 1}) {
			t.Fatalf("drops %+v, want 1 expired", d)
		}
		if _, st, dropped := j.take([]byte("b"), 200); st != tooLate || dropped != 1 {
			t.Fatalf("b at 200: %v, %d dropped; want too late, 1", st, dropped)
		}
		if _, st, _ := j.take([]byte("c"), 200); st != joined {
			t.Fatalf("c at 200: %v", st)
		}
	})
	t.Run("quota", func(t *testing.T) {
		j := newJoinBuffer(joinConfig{events: 10, dim: 2, models: 1, perKey: 2})
		put(j, "a1", "a", 0)
		put(j, "a2", "a", 0)
		if kept, d := put(j, "a3", "a", 0); kept || d != (joinDrops{quota: 1}) {
			t.Fatalf("a3: kept %v, drops %+v; want refused by the quota", kept, d)
		}
		if kept, _ := put(j, "b1", "b", 0); !kept {
			t.Fatal("b1 refused: another key's quota")
		}
		if kept, _ := put(j, "a2", "a", 0); !kept { // a repeated id replaces: a still has 2
			t.Fatal("a2 again refused")
		}
		if j.pending() != 3 || j.keys[j.keyHash([]byte("a"))] != 2 {
			t.Fatalf("pending %d, a has %d", j.pending(), j.keys[j.keyHash([]byte("a"))])
		}
		if _, st, _ := j.take([]byte("a1"), 0); st != joined {
			t.Fatal(st)
		}
		if kept, _ := put(j, "a4", "a", 0); !kept {
			t.Fatal("a4 refused after a1 joined")
		}
		if _, st, _ := j.take([]byte("a3"), 0); st != unknownID {
			t.Fatalf("a3 (never kept): %v", st)
		}
	})
	// The keys that labelled keep their events against a flood of
	// new keys: new keys' events hold at most newShare of the slots; once
	// they do, one more takes the oldest's slot if that is a new key's, or
	// is not kept (new_keys). A labelled key's event pushes out the oldest
	// as before. Without protect the flood pushes them all out.
	t.Run("new keys", func(t *testing.T) {
		for _, protect := range []bool{true, false} {
			j := newJoinBuffer(joinConfig{events: 10, dim: 2, models: 1, protect: protect, newShare: 0.5})
			put(j, "u0", "u", 0)
			if _, st, _ := j.take([]byte("u0"), 0); st != joined { // u labels: a labelled key
				t.Fatal(st)
			}
			for i := range 4 {
				put(j, fmt.Sprint("u", i+1), "u", 0)
			}
			var d joinDrops
			for i := range 1000 { // a flood of made-up keys
				_, di := put(j, fmt.Sprint("anon", i), fmt.Sprint("anon-", i), 0)
				d.add(di)
			}
			for i := range 4 {
				_, st, _ := j.take([]byte(fmt.Sprint("u", i+1)), 0)
				if protect && st != joined || !protect && st == joined {
					t.Fatalf("protect %v: u%d after the flood: %v", protect, i+1, st)
				}
			}
			if !protect {
				if d.full != 1000-6 || d.newKeys != 0 { // six slots were free (u0 joined)
					t.Fatalf("unprotected: drops %+v", d)
				}
				continue
			}
			// Five slots (half) for the new keys, the rest refused.
			if d != (joinDrops{newKeys: 995}) || j.fresh != 5 {
				t.Fatalf("protected: drops %+v, new keys' events %d; want 995 refused, 5 kept", d, j.fresh)
			}
			// u's items joined: their slots are free, but not for new keys,
			// which hold their half.
			if kept, di := put(j, "anon-x", "anon-x", 0); kept || di != (joinDrops{newKeys: 1}) {
				t.Fatalf("a new key's item past their share: kept %v, %+v", kept, di)
			}
			for i := range 5 {
				if kept, di := put(j, fmt.Sprint("u", 10+i), "u", 0); !kept || di != (joinDrops{}) {
					t.Fatalf("the labelled key's item u%d: kept %v, %+v", 10+i, kept, di)
				}
			}
			// The oldest is now a new key's: the next takes its slot.
			if kept, di := put(j, "anon-y", "anon-y", 0); !kept || di != (joinDrops{full: 1}) || j.fresh != 5 {
				t.Fatalf("a new key's item with a new key's oldest: kept %v, %+v, new keys' %d", kept, di, j.fresh)
			}
		}
	})
	t.Run("check", func(t *testing.T) {
		j := newJoinBuffer(joinConfig{events: 10, dim: 2, models: 1})
		put(j, "a", "k", 0)
		h := j.hash([]byte("a"))
		j.slots[j.index[h]].check++ // as if another id had a's first hash
		if _, st, _ := j.take([]byte("a"), 0); st != unknownID {
			t.Fatalf("a label whose second hash differs: %v", st)
		}
	})
}

// TestJoinBufferRing: with hashed entries in a ring of fixed size, events
// of random sizes, keys and labels over many turns of the ring: every
// joined event gives back exactly its entries, fields and predictions;
// the ring and the slots never hold more than their size, no key more
// than its quota; and every event put is accounted for (joined, dropped
// by reason, refused, replaced or still pending).
func TestJoinBufferRing(t *testing.T) {
	for _, protect := range []bool{false, true} {
		t.Run(fmt.Sprint("protect=", protect), func(t *testing.T) { testJoinBufferRing(t, protect) })
	}
}

// testJoinBufferRing is TestJoinBufferRing, with protect (the keys a label
// joined for keep their events against new keys' beyond 0.1 of the slots)
// and half the events of 300 more keys: the new keys' events counted are
// the live ones, and those refused are accounted for.
func testJoinBufferRing(t *testing.T, protect bool) {
	const events, entries, perKey = 50, 400, 12
	j := newJoinBuffer(joinConfig{events: events, models: 2, maxAge: 20, perKey: perKey, entries: entries, protect: protect, newShare: 0.1})
	type stored struct {
		idx   []int32
		val   []float64
		field []uint8
		score float64
	}
	live := map[string]stored{}
	rng := rand.New(rand.NewPCG(1, 2))
	var drops joinDrops
	var puts, kept, joinedN, replaced int
	now := int64(0)
	for i := range 20000 {
		now += int64(rng.IntN(3))
		if rng.IntN(3) == 0 && len(live) > 0 {
			// A label for a random id put lately (maybe gone).
			id := fmt.Sprint("e", i-1-rng.IntN(min(i, 80)))
			sl, st, dropped := j.take([]byte(id), now)
			drops.expired += dropped
			want, ok := live[id]
			if st == joined {
				joinedN++
				if !ok || !slices.Equal(sl.idx, want.idx) || !slices.Equal(sl.val, want.val) || !slices.Equal(sl.field, want.field) || sl.preds[1].Score != want.score {
					t.Fatalf("label %d for %s: got %v %v %v %v, want %+v (live %v)", i, id, sl.idx, sl.val, sl.field, sl.preds, want, ok)
				}
				delete(live, id)
			}
			continue
		}
		id := fmt.Sprint("e", i)
		if rng.IntN(20) == 0 && i > 0 {
			id = fmt.Sprint("e", i-1) // a repeated id
		}
		n := rng.IntN(40)
		s := stored{score: float64(i)}
		for k := range n {
			s.idx = append(s.idx, int32(rng.IntN(1000)))
			s.val = append(s.val, rng.NormFloat64())
			s.field = append(s.field, uint8(k))
		}
		key := fmt.Sprint("k", rng.IntN(3))
		if protect && rng.IntN(2) == 0 {
			key = fmt.Sprint("n", rng.IntN(300)) // mostly new keys
		}
		if _, ok := live[id]; ok {
			replaced++
			delete(live, id)
		}
		puts++
		ok, d := j.putSparse([]byte(id), []byte(key), s.idx, s.val, s.field, []online.Prediction{{}, {Score: s.score}}, now)
		drops.add(d)
		if ok {
			kept++
			live[id] = s
		}
		// What left the buffer left the reference too.
		for id := range live {
			h := j.hash([]byte(id))
			if _, in := j.index[h]; !in {
				delete(live, id)
			}
		}
		if j.pending() != len(live) || j.size > events || j.ring.used > entries {
			t.Fatalf("after put %d: pending %d, reference %d, slots %d, ring %d", i, j.pending(), len(live), j.size, j.ring.used)
		}
		for k, c := range j.keys {
			if c > perKey || c <= 0 {
				t.Fatalf("key %x has %d waiting", k, c)
			}
		}
		fresh := 0
		for k := range j.size {
			if s := &j.slots[(j.head+k)%events]; s.hash != 0 && s.fresh {
				fresh++
			}
		}
		if fresh != j.fresh {
			t.Fatalf("after put %d: %d new keys' events live, counted %d", i, fresh, j.fresh)
		}
	}
	if protect && drops.newKeys == 0 || !protect && drops.newKeys != 0 {
		t.Fatalf("protect %v: %d refused for new keys", protect, drops.newKeys)
	}
	if kept+drops.quota+drops.newKeys != puts || kept != joinedN+drops.full+drops.expired+replaced+j.pending() {
		t.Fatalf("%d puts: %d kept, %d refused (quota); kept = %d joined + %+v + %d replaced + %d pending?", puts, kept, drops.quota, joinedN, drops, replaced, j.pending())
	}
	if drops.full == 0 || drops.expired == 0 || drops.quota == 0 && !protect || joinedN == 0 { // protect: the new keys take the hot keys' share
		t.Fatalf("the run did not exercise every way out: %+v, %d joined", drops, joinedN)
	}
	t.Logf("%d puts: %d joined, %+v, %d replaced, %d pending", puts, joinedN, drops, replaced, j.pending())
}

// TestJoinBytes: joinBytes bounds what a buffer takes once every slot has
// held an event (dense features, per-key counts; hashed entries in a ring;
// with protect, the labelled keys, every other event's key joined for).
func TestJoinBytes(t *testing.T) {
	for _, c := range []joinConfig{
		{events: 20000, dim: 16, models: 2, perKey: 5},
		{events: 20000, models: 2, perKey: 5, entries: 64 * 20000},
		{events: 20000, dim: 16, models: 2, perKey: 5, protect: true, newShare: 0.5},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		j := newJoinBuffer(c)
		x := make([]float64, c.dim)
		idx, val, field := make([]int32, 64), make([]float64, 64), make([]uint8, 64)
		preds := make([]online.Prediction, c.models)
		var id, key []byte
		for i := range 3 * c.events {
			id = fmt.Appendf(id[:0], "request-%d\x00item-%d", i, i)
			key = fmt.Appendf(key[:0], "user-%d", i)
			if c.dim > 0 {
				j.put(id, key, x, preds, 0)
			} else {
				j.putSparse(id, key, idx, val, field, preds, 0)
			}
			if c.protect && i%2 == 0 {
				j.take(id, 0)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		got, bound := int64(m1.HeapAlloc)-int64(m0.HeapAlloc), joinBytes(c)
		t.Logf("%+v: %d bytes held, bound %d (%.0f a slot)", c, got, bound, float64(bound)/float64(c.events))
		if got > bound {
			t.Errorf("%+v: %d bytes held, over the bound %d", c, got, bound)
		}
		runtime.KeepAlive(j)
	}
}

// floodEngine ranks with a linear mam (dense, d = 4), delayed labels on:
// impressions kept 200, shown items apart, 60 of them, 15 per key.
func floodEngine(t testing.TB, reg prometheus.Registerer) *Engine {
	return floodEngineLabelled(t, reg, 0)
}

// floodEngineLabelled is floodEngine with RankConfig.JoinLabelled set.
func floodEngineLabelled(t testing.TB, reg prometheus.Registerer, labelled float64) *Engine {
	t.Helper()
	m, err := online.NewMAM(4, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 4, MaxMessageBytes: 1 << 20,
		JoinEvents: 200, JoinTime: time.Hour, Rank: RankConfig{Model: "mam", Seed: 1, JoinEvents: 60, JoinPerKey: 15, JoinLabelled: labelled}},
		[]NamedModel{{Name: "mam", Model: m}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// floodRequest is a request of key with 6 fresh candidates, 3 shown.
func floodRequest(id, key string, rng *rand.Rand) []byte {
	b := fmt.Appendf(nil, `{"id":%q,"key":%q,"k":3,"candidates":[`, id, key)
	for c := range 6 {
		if c > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"item":"%s-i%d","features":[%g,%g,%g,%g]}`, id, c, rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64())
	}
	return append(b, "]}"...)
}

// TestRequestFloodKeepsImpressions: 3 000 ranking requests (fresh item
// ids, one key flooding, the others each new) between the stream's
// impressions and their labels: every impression's label joins, none is
// dropped; the requests' window keeps at most its size and each key at
// most its quota, and counts what it drops (full, quota) under
// source="requests"; a label for an item shown lately still joins and
// feeds the off-policy estimates, one for an item pushed out is too late.
func TestRequestFloodKeepsImpressions(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := floodEngine(t, reg)
	s := instanceShard(t, e)
	sink := &memSink{}
	rng := rand.New(rand.NewPCG(4, 5))
	off := int64(0)
	process := func(key string, v []byte) {
		s.Process(&kafka.Message{Topic: "events", Offset: off, Key: []byte(key), Value: v}, sink)
		off++
	}
	const imps, requests = 150, 3000
	// An item shown by a request 51 before the last: pushed out since,
	// and still remembered (the window remembers as many ids gone as it
	// holds).
	const early = requests - 51
	var earlyItem string
	for i := range requests {
		if i%20 == 0 && i/20 < imps {
			n := i / 20
			process(fmt.Sprint("u", n%5), fmt.Appendf(nil, `{"id":"imp-%d","features":[%g,%g,%g,%g]}`, n, rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()))
		}
		key := "flooder"
		if i%2 == 1 {
			key = fmt.Sprint("anon-", i)
		}
		process(key, floodRequest(fmt.Sprint("r", i), key, rng))
		if i == early {
			earlyItem = string(s.rk.resp.Ranked[0].Item)
		}
	}
	for n := range imps {
		process(fmt.Sprint("u", n%5), fmt.Appendf(nil, `{"id":"imp-%d","label":%d}`, n, 2*(n%2)-1))
	}
	if j, u := testutil.ToFloat64(e.met.labelsJoined), testutil.ToFloat64(e.met.labelsUnknown); j != imps || u != 0 {
		t.Fatalf("impressions' labels: %v joined, %v unknown; want %d, 0", j, u, imps)
	}
	imp, req := e.met.joinDropped[srcImpressions], e.met.joinDropped[srcRequests]
	if f, x := testutil.ToFloat64(imp[0]), testutil.ToFloat64(imp[1]); f != 0 || x != 0 {
		t.Fatalf("impressions dropped: %v full, %v expired", f, x)
	}
	full, quota := testutil.ToFloat64(req[0]), testutil.ToFloat64(req[2])
	if full == 0 || quota == 0 || s.shown.pending() > 60 {
		t.Fatalf("requests: %v full, %v quota, %d pending", full, quota, s.shown.pending())
	}
	// 9 000 items shown: 60 wait, the rest were dropped (the flooder's
	// beyond its 15 by the quota) or replaced by none.
	if got := full + quota + float64(s.shown.pending()); got != 3*requests {
		t.Fatalf("%v full + %v quota + %d pending = %v, want the %d items shown", full, quota, s.shown.pending(), got, 3*requests)
	}
	if c := s.shown.keys[s.shown.keyHash([]byte("flooder"))]; c > 15 {
		t.Fatalf("the flooder has %d items waiting", c)
	}
	// The last request's first item: its label joins (the ranking is
	// greedy: the item first is the one the response put first).
	last := fmt.Sprint("anon-", requests-1)
	resp := s.rk.resp
	first := string(resp.Ranked[0].Item)
	process(last, fmt.Appendf(nil, `{"id":"r%d","item":%q,"label":1}`, requests-1, first))
	process(fmt.Sprint("anon-", early), fmt.Appendf(nil, `{"id":"r%d","item":%q,"label":1}`, early, earlyItem))
	if j, l := testutil.ToFloat64(e.met.labelsJoined), testutil.ToFloat64(e.met.labelsLate); j != imps+1 || l != 1 {
		t.Fatalf("item labels: %v joined, %v too late; want %d, 1", j, l, imps+1)
	}
	if n := e.ope.sums.N(); n != 1 {
		t.Fatalf("off-policy labels %v, want 1", n)
	}
	// The metrics by source and reason.
	body := testkit.Samples(t, reg, "streamer_join_dropped_total", "streamer_join_pending")
	for _, want := range []string{
		`streamer_join_dropped_total{reason="expired",source="impressions"} 0`,
		`streamer_join_dropped_total{reason="full",source="impressions"} 0`,
		`streamer_join_dropped_total{reason="quota",source="impressions"} 0`,
		fmt.Sprintf(`streamer_join_dropped_total{reason="full",source="requests"} %v`, full),
		fmt.Sprintf(`streamer_join_dropped_total{reason="quota",source="requests"} %v`, quota),
		`streamer_join_pending{source="impressions"} 0`,
		fmt.Sprintf(`streamer_join_pending{source="requests"} %d`, s.shown.pending()),
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}

// TestRankJoinOff: with RankConfig.JoinEvents < 0 the shown items are not
// kept: their labels count as unknown ids, the impressions join as ever.
func TestRankJoinOff(t *testing.T) {
	m, _ := online.NewMAM(4, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 4, MaxMessageBytes: 1 << 20,
		JoinEvents: 10, Rank: RankConfig{Model: "mam", JoinEvents: -1}}, []NamedModel{{Name: "mam", Model: m}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	if s.shown != nil {
		t.Fatal("a window for the shown items")
	}
	sink := &memSink{}
	rng := rand.New(rand.NewPCG(1, 1))
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: floodRequest("r", "u", rng)}, sink)
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: []byte(`{"id":"imp","features":[1,0,0,0]}`)}, sink)
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: []byte(`{"id":"r","item":"r-i0","label":1}`)}, sink)
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: []byte(`{"id":"imp","label":1}`)}, sink)
	if j, u := testutil.ToFloat64(e.met.labelsJoined), testutil.ToFloat64(e.met.labelsUnknown); j != 1 || u != 1 {
		t.Fatalf("%v joined, %v unknown; want 1, 1", j, u)
	}
}

// A flood of requests with fresh ids, over several turns of the shown
// items' window and over a key's quota, allocates nothing once warm:
// dense features, and hashed ones in the entries' ring.
func TestRankFloodAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(7, 7))
	dense := floodEngine(t, nil)
	msgs := make([]kafka.Message, 256)
	for i := range msgs {
		key := fmt.Sprint("u", i%4)
		msgs[i] = kafka.Message{Topic: "events", Key: []byte(key), Value: floodRequest(fmt.Sprint("q", i), key, rng)}
	}
	hashed := hashedRankGlobal(t)
	hashed.cfg.Rank.JoinEvents, hashed.cfg.Rank.JoinEntries, hashed.cfg.Rank.JoinPerKey = 50, 500, 5
	hmsgs := make([]kafka.Message, 256)
	for i := range hmsgs {
		v := strings.Replace(string(testkit.HashedRequest100(8, 3)), `"req-1"`, fmt.Sprintf(`"req-%d"`, i), 1)
		hmsgs[i] = kafka.Message{Topic: "events", Key: []byte(fmt.Sprint("user-", i%3)), Value: []byte(v)}
	}
	for _, tc := range []struct {
		name string
		e    *Engine
		msgs []kafka.Message
	}{{"dense", dense, msgs}, {"hashed", hashed, hmsgs}} {
		s := instanceShard(t, tc.e)
		sink := &memSink{}
		for range 2 { // every slot and every key's count used
			for i := range tc.msgs {
				s.Process(&tc.msgs[i], sink)
			}
		}
		i := 0
		if n := allocs.PerRun(500, func() {
			s.Process(&tc.msgs[i%len(tc.msgs)], sink)
			i++
		}); n != 0 {
			t.Errorf("%s: %v allocations a request", tc.name, n)
		}
		if q := testutil.ToFloat64(tc.e.met.joinDropped[srcRequests][2]); q == 0 {
			t.Errorf("%s: no item refused by the quota", tc.name)
		}
		if tc.name == "hashed" && s.shown.ring == nil {
			t.Error("hashed: no entries' ring")
		}
	}
}

// TestImpressionFloodQuota: one key floods the stream with 1 000
// unlabelled impressions between five users' 50 impressions and their
// labels. With labels.join_window.per_key (20 of a window of 200) every
// user's label joins, the flooder keeps 20 waiting and the rest are
// counted as quota drops under source="impressions"; without it the flood
// pushes the users' impressions out of the window and their labels are
// unknown. The configuration's key reaches the engine's.
func TestImpressionFloodQuota(t *testing.T) {
	cfg, err := config.Parse([]byte(`
kafka: {brokers: ["127.0.0.1:9092"], group: g, input_topic: in, output_topic: out}
labels: {join_window: {events: 200, time: 1h, per_key: 20}}
models: [{name: mam, type: mam, kernel: {type: linear}, features: {dim: 4}}]
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if c := ConfigFrom(cfg); c.JoinEvents != 200 || c.JoinPerKey != 20 {
		t.Fatalf("labels.join_window: engine's JoinEvents %d, JoinPerKey %d; want 200, 20", c.JoinEvents, c.JoinPerKey)
	}
	run := func(perKey int) (*Engine, *Shard) {
		m, err := online.NewMAM(4, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 4, MaxMessageBytes: 1 << 20,
			JoinEvents: 200, JoinTime: time.Hour, JoinPerKey: perKey}, []NamedModel{{Name: "mam", Model: m}}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		s := instanceShard(t, e)
		sink := &memSink{}
		off := int64(0)
		process := func(key string, v []byte) {
			s.Process(&kafka.Message{Topic: "events", Offset: off, Key: []byte(key), Value: v}, sink)
			off++
		}
		const users, floods = 50, 1000
		for i := range floods {
			if i%20 == 0 && i/20 < users {
				n := i / 20
				process(fmt.Sprint("u", n%5), fmt.Appendf(nil, `{"id":"imp-%d","features":[%d,1,0,0]}`, n, n))
			}
			process("flooder", fmt.Appendf(nil, `{"id":"flood-%d","features":[0,0,1,%d]}`, i, i))
		}
		for n := range users {
			process(fmt.Sprint("u", n%5), fmt.Appendf(nil, `{"id":"imp-%d","label":%d}`, n, 2*(n%2)-1))
		}
		return e, s
	}
	e, s := run(20)
	if j, u := testutil.ToFloat64(e.met.labelsJoined), testutil.ToFloat64(e.met.labelsUnknown); j != 50 || u != 0 {
		t.Fatalf("with a quota: %v labels joined, %v unknown; want 50, 0", j, u)
	}
	imp := e.met.joinDropped[srcImpressions]
	full, quota := testutil.ToFloat64(imp[0]), testutil.ToFloat64(imp[2])
	if c := s.join.keys[s.join.keyHash([]byte("flooder"))]; c != 20 || full != 0 || quota != 1000-20 {
		t.Fatalf("with a quota: the flooder has %d waiting, %v dropped full, %v quota; want 20, 0, 980", c, full, quota)
	}
	e, _ = run(0)
	if u := testutil.ToFloat64(e.met.labelsUnknown); u == 0 {
		t.Fatal("without a quota the flood pushed no user's impression out: the test shows nothing")
	}
}

// TestRequestFloodKeepsLabellingKeys: a client ranking for 3 000 made-up
// keys, between requests for keys that have labelled before (a label of a
// shown item joined; a labelled event of the stream) and those requests'
// labels, no longer pushes their items out (the flood the
// hostile-client audit ran against the recommendation demo): with
// rank.join.new_keys 0.5 the labels join, the flood's items beyond its
// share are not kept, counted new_keys; with 1 (no limit) the labels come
// too late, as before.
func TestRequestFloodKeepsLabellingKeys(t *testing.T) {
	for _, labelled := range []float64{0.5, 0} {
		e := floodEngineLabelled(t, prometheus.NewRegistry(), labelled)
		s := instanceShard(t, e)
		sink := &memSink{}
		rng := rand.New(rand.NewPCG(6, 7))
		off := int64(0)
		process := func(key string, v []byte) {
			s.Process(&kafka.Message{Topic: "events", Offset: off, Key: []byte(key), Value: v}, sink)
			off++
		}
		shown := func() []string {
			var items []string
			for _, r := range s.rk.resp.Ranked {
				items = append(items, string(r.Item))
			}
			return items
		}
		// u42 has labelled: a label of an earlier request joined; u7 sent
		// a labelled event (a rating) of the stream.
		process("u42", floodRequest("v0", "u42", rng))
		process("u42", fmt.Appendf(nil, `{"id":"v0","item":%q,"label":1}`, shown()[0]))
		process("u7", []byte(`{"id":"e7","features":[1,0,0,1],"label":1}`))
		process("u42", floodRequest("v1", "u42", rng))
		victim := shown()
		process("u7", floodRequest("w1", "u7", rng))
		victim7 := shown()
		for i := range 3000 {
			key := fmt.Sprint("anon-", i)
			process(key, floodRequest(fmt.Sprint("r", i), key, rng))
		}
		before := testutil.ToFloat64(e.met.labelsJoined)
		for _, item := range victim {
			process("u42", fmt.Appendf(nil, `{"id":"v1","item":%q,"label":1}`, item))
		}
		for _, item := range victim7 {
			process("u7", fmt.Appendf(nil, `{"id":"w1","item":%q,"label":-1}`, item))
		}
		joined := testutil.ToFloat64(e.met.labelsJoined) - before
		newKeys := testutil.ToFloat64(e.met.joinDropped[srcRequests][3])
		if labelled > 0 && (joined != 6 || newKeys == 0) || labelled == 0 && (joined != 0 || newKeys != 0) {
			t.Errorf("labelled share %v: %v of the victims' 6 labels joined after the flood, %v items refused for new keys", labelled, joined, newKeys)
		}
		t.Logf("labelled share %v: %v of 6 joined; requests' items: %v full, %v new_keys", labelled, joined,
			testutil.ToFloat64(e.met.joinDropped[srcRequests][0]), newKeys)
	}
}
