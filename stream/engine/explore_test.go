package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"
	"gonum.org/v1/gonum/mat"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// exploreShard is an instance shard whose rank model is a linear mam per
// key (d = dim, at most max keys in memory, the rest in keys) ordered by
// policy with alpha.
func exploreShard(t testing.TB, dim, max int, keys *keystore.DB, policy string, alpha float64) *Shard {
	t.Helper()
	s := exploreShardState(t, dim, max, keys, policy, alpha)
	if _, _, err := s.Restore(nil, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// exploreShardState is exploreShard without the restore (the caller's).
func exploreShardState(t testing.TB, dim, max int, keys *keystore.DB, policy string, alpha float64) *Shard {
	t.Helper()
	s, err := exploreEngine(t, dim, max, keys, policy, alpha).NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exploreEngine is exploreShard's engine.
func exploreEngine(t testing.TB, dim, max int, keys *keystore.DB, policy string, alpha float64) *Engine {
	t.Helper()
	factory := func() (online.Model, error) {
		return online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	}
	m, _ := factory()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, KeyStore: keys, MaxMessageBytes: 1 << 20,
		Rank: RankConfig{Model: "k", Policy: policy, Alpha: alpha, Seed: 3}},
		[]NamedModel{{Name: "k", Model: m, Fingerprint: "k-fp", Factory: factory, MaxKeys: max, New: factory}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// exploreEvents are labelled events of dimension dim over keys
// user-0 … user-(keys-1); every 13th has a zero input.
func exploreEvents(n, dim, keys int) []kafka.Message {
	out := make([]kafka.Message, n)
	for i := range out {
		x := make([]float64, dim)
		if i%13 != 0 {
			for j := range x {
				x[j] = float64((i*(j+3))%11) - 5
			}
		}
		v, _ := json.Marshal(map[string]any{"features": x, "label": 1 - 2*(i%2)})
		out[i] = kafka.Message{Topic: "events", Offset: int64(i), Key: fmt.Appendf(nil, "user-%d", (i*7)%keys), Value: v}
	}
	return out
}

// wantA is I + Σ z zᵀ over key's events (z = [x/‖x‖; 1]/√2), brute force.
func wantA(t *testing.T, events []kafka.Message, key string, dim int) *mat.SymDense {
	a := mat.NewSymDense(dim+1, nil)
	for i := range dim + 1 {
		a.SetSym(i, i, 1)
	}
	for _, m := range events {
		if string(m.Key) != key {
			continue
		}
		var ev struct{ Features []float64 }
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		z := make([]float64, dim+1)
		var ss float64
		for _, v := range ev.Features {
			ss += v * v
		}
		for j, v := range ev.Features {
			if ss > 0 {
				z[j] = v / math.Sqrt(ss) / math.Sqrt2
			}
		}
		z[dim] = 1 / math.Sqrt2
		a.SymRankOne(a, 1, mat.NewVecDense(dim+1, z))
	}
	return a
}

// statsOf decodes the exploration statistics of a stored key state.
func statsOf(t *testing.T, b []byte, dim int) []float64 {
	t.Helper()
	_, a, err := splitExplored(b, dim)
	if err != nil || a == nil {
		t.Fatalf("state without statistics (%v)", err)
	}
	return a
}

// TestExploreStatisticsDurable: the exploration statistics of ucb are key
// state like the model's. Every key's A is I + Σ zzᵀ over the events it
// learned (brute force, 1e-12), and a restart from a checkpoint taken
// while keys are evicted (in pending and in the key store) gives every key
// exactly the state (model and A, byte for byte) of a reference that
// learned the same events without eviction, checkpoint or restart. A key
// state written without statistics restores with A = I; with the policy
// off, a state with statistics restores its model alone.
func TestExploreStatisticsDurable(t *testing.T) {
	const dim, nkeys = 3, 10
	events := exploreEvents(900, dim, nkeys)
	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	sink := &memSink{}
	feed := func(s *Shard, msgs []kafka.Message) {
		for i := range msgs {
			s.Process(&msgs[i], sink)
		}
	}
	s := exploreShard(t, dim, 3, keys, PolicyUCB, 0.1)
	feed(s, events[:400])
	checkpointShard(t, s)
	feed(s, events[400:700])
	saved := checkpointShard(t, s)

	r := exploreShardState(t, dim, 3, keys, PolicyUCB, 0.1)
	if _, _, err := r.Restore(saved, nil); err != nil {
		t.Fatal(err)
	}
	feed(r, events[700:])
	ref := exploreShard(t, dim, nkeys, nil, PolicyUCB, 0.1)
	feed(ref, events)
	got := (&node{Engine: r.e, shards: map[int]*Shard{0: r}}).keyStates(t, 0, "k")
	want := (&node{Engine: ref.e, shards: map[int]*Shard{0: ref}}).keyStates(t, 0, "k")
	if !maps.Equal(got, want) || len(want) != nkeys {
		t.Fatalf("after the restart %d of %d keys differ from the reference", diff(got, want), len(want))
	}
	for k := range nkeys {
		key := "user-" + strconv.Itoa(k)
		a := statsOf(t, []byte(got[key]), dim)
		w := wantA(t, events, key, dim)
		at := 0
		for i := range dim + 1 {
			for j := i; j <= dim; j++ {
				if math.Abs(a[at]-w.At(i, j)) > 1e-12*(1+math.Abs(w.At(i, j))) {
					t.Fatalf("%s: A[%d][%d] = %v, brute force %v", key, i, j, a[at], w.At(i, j))
				}
				at++
			}
		}
	}

	// The policy off: a plain instance takes the model and drops A.
	plain, _ := online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	st := []byte(got["user-1"])
	if err := restoreKeyState(plain, st); err != nil {
		t.Fatal(err)
	}
	inner, _ := KeyModelState(st)
	if b, _ := plain.MarshalBinary(); string(b) != string(inner) {
		t.Fatal("the model restored without its statistics differs")
	}
	// The policy on for a state written without: A = I, the model as it was.
	ex := newExplored(mustMAM(t, dim), dim)
	if err := ex.UnmarshalBinary(inner); err != nil {
		t.Fatal(err)
	}
	fresh := newExplored(mustMAM(t, dim), dim)
	if !slicesEqual(ex.a, fresh.a) || ex.Examples() != plain.Examples() {
		t.Fatal("a state without statistics: want A = I and the model's examples")
	}
	// Bad encodings: a wrong dimension, a truncated one, a non-positive
	// diagonal.
	for name, b := range map[string][]byte{
		"dimension": mustMarshal(t, newExplored(mustMAM(t, dim+1), dim+1)),
		"truncated": st[:len(st)-3],
		"diagonal":  func() []byte { e := newExplored(mustMAM(t, dim), dim); e.a[0] = 0; return mustMarshal(t, e) }(),
	} {
		if err := newExplored(mustMAM(t, dim), dim).UnmarshalBinary(b); !errors.Is(err, online.ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
}

func mustMAM(t *testing.T, dim int) online.Model {
	t.Helper()
	m, err := online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustMarshal(t *testing.T, m online.Model) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rankResponse is a decoded ranking response.
type rankResponse struct {
	Ranked []struct {
		Item       string
		Score      float64
		Propensity float64
	}
}

// rankOnce sends request body for key u to s and decodes the response.
func rankOnce(t *testing.T, s *Shard, body []byte) rankResponse {
	t.Helper()
	sink := &memSink{Keep: true}
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: body}, sink)
	var r rankResponse
	if len(sink.Msgs) != 1 || json.Unmarshal(sink.Msgs[0].Value, &r) != nil {
		t.Fatalf("%d records", len(sink.Msgs))
	}
	return r
}

// teachAxis teaches key u's model n examples along the first axis
// (positive first feature: the positive class) and returns the events.
func teachAxis(t *testing.T, s *Shard, dim, n int) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for i := range n {
		x := make([]float64, dim)
		x[0], x[1] = 1, 0.2*float64(i%3)
		y := 1
		if i%2 == 1 {
			x[0], y = -1, -1
		}
		v, _ := json.Marshal(map[string]any{"features": x, "label": y})
		out = append(out, kafka.Message{Topic: "events", Key: []byte("u"), Value: v})
	}
	sink := &memSink{}
	for i := range out {
		s.Process(&out[i], sink)
	}
	return out
}

// TestRankUCB: a key that has only been shown inputs along the first two
// axes. Candidate "known" lies along the first axis and scores highest;
// "new" lies along the third, which the key has never seen, and scores
// lower. Greedy puts known first; ucb puts new first once alpha times the
// gap in width exceeds the gap in score, and the widths it uses are
// sqrt(zᵀA⁻¹z) (checked through the order at alpha just below and above
// the crossing, computed by brute force). Propensities are 1.
func TestRankUCB(t *testing.T) {
	const dim = 4
	body := []byte(`{"id":"r","key":"u","k":2,"candidates":[` +
		`{"item":"known","features":[1,0.1,0,0]},{"item":"new","features":[0.3,0,1,0]}]}`)
	g := exploreShard(t, dim, 10, nil, PolicyGreedy, 0)
	events := teachAxis(t, g, dim, 40)
	r := rankOnce(t, g, body)
	if r.Ranked[0].Item != "known" {
		t.Fatalf("greedy: %+v", r)
	}
	gap := r.Ranked[0].Score - r.Ranked[1].Score
	a := wantA(t, events, "u", dim)
	var inv mat.Dense
	if err := inv.Inverse(a); err != nil {
		t.Fatal(err)
	}
	width := func(x []float64) float64 {
		z := make([]float64, dim+1)
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		for j, v := range x {
			z[j] = v / math.Sqrt(2*ss)
		}
		z[dim] = 1 / math.Sqrt2
		zv := mat.NewVecDense(dim+1, z)
		return math.Sqrt(mat.Inner(zv, &inv, zv))
	}
	wk, wn := width([]float64{1, 0.1, 0, 0}), width([]float64{0.3, 0, 1, 0})
	if !(wn > wk) || !(gap > 0) {
		t.Fatalf("widths known %v, new %v; score gap %v", wk, wn, gap)
	}
	cross := gap / (wn - wk)
	t.Logf("score gap %.4f, widths known %.4f new %.4f: ucb prefers new above alpha %.4f", gap, wk, wn, cross)
	for _, c := range []struct {
		alpha float64
		first string
	}{{0.98 * cross, "known"}, {1.02 * cross, "new"}} {
		s := exploreShard(t, dim, 10, nil, PolicyUCB, c.alpha)
		teachAxis(t, s, dim, 40)
		r := rankOnce(t, s, body)
		if r.Ranked[0].Item != c.first || r.Ranked[0].Propensity != 1 || r.Ranked[1].Propensity != 1 {
			t.Errorf("ucb, alpha %.4f: %+v, want %s first with propensities 1", c.alpha, r, c.first)
		}
	}
}

// TestRankThompson: thompson's propensities are the probabilities of its
// draws. Over 3 000 requests for a key with some history, every item's
// frequency at the first position matches the mean propensity logged with
// it there (within 4 standard errors and the estimate's 1/(samples+1)),
// and for the items first in at least 5% of requests the IPS estimate of
// "this item first" from the log, the mean of [first = item]/propensity,
// is 1 within 4 standard errors (IPS is unbiased); at alpha 0 it is greedy
// with propensity 1.
func TestRankThompson(t *testing.T) {
	const dim, n, trials = 4, 6, 3000
	var b []byte
	b = append(b, `{"id":"r","key":"u","k":2,"candidates":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"item":"i%d","features":[%g,%g,%g,0.1]}`, i, 0.2*float64(i)-0.4, 0.5-0.1*float64(i), float64(i%2))
	}
	b = append(b, "]}"...)

	g := exploreShard(t, dim, 10, nil, PolicyThompson, 0)
	teachAxis(t, g, dim, 10)
	r0 := rankOnce(t, g, b)
	gr := exploreShard(t, dim, 10, nil, PolicyGreedy, 0)
	teachAxis(t, gr, dim, 10)
	if rg := rankOnce(t, gr, b); rg.Ranked[0].Item != r0.Ranked[0].Item || r0.Ranked[0].Propensity != 1 {
		t.Fatalf("thompson at alpha 0: %+v, greedy %+v", r0, rg)
	}

	s := exploreShard(t, dim, 10, nil, PolicyThompson, 0.5)
	teachAxis(t, s, dim, 10)
	count := map[string]float64{}
	prop := map[string]float64{}
	w, w2 := map[string]float64{}, map[string]float64{} // Σ 1/p, Σ 1/p² when first
	for range trials {
		r := rankOnce(t, s, b)
		it := r.Ranked[0]
		count[it.Item]++
		prop[it.Item] += it.Propensity
		w[it.Item] += 1 / it.Propensity
		w2[it.Item] += 1 / (it.Propensity * it.Propensity)
		if !(it.Propensity > 0 && it.Propensity <= 1) {
			t.Fatalf("propensity %v", it.Propensity)
		}
	}
	if len(count) < 2 {
		t.Fatalf("thompson at alpha 0.5 always put %v first: no exploration", count)
	}
	for item, c := range count {
		f := c / trials
		mp := prop[item] / c
		se := math.Sqrt(f * (1 - f) / trials)
		t.Logf("%s first in %.4f of requests, mean propensity logged %.4f", item, f, mp)
		if math.Abs(f-mp) > 4*se+1.0/101 {
			t.Errorf("%s: first in %.4f of requests, but its mean logged propensity is %.4f", item, f, mp)
		}
		if f < 0.05 {
			continue
		}
		ips := w[item] / trials
		ipsSE := math.Sqrt((w2[item]/trials - ips*ips) / trials)
		t.Logf("%s: IPS of [first = %s] %.4f ± %.4f", item, item, ips, 1.96*ipsSE)
		if math.Abs(ips-1) > 4*ipsSE {
			t.Errorf("%s: IPS of an item-first indicator %.4f ± %.4f, want 1", item, ips, ipsSE)
		}
	}
}

// BenchmarkRank100Explore is BenchmarkRank100 for a key-scoped linear mam
// ranked by ucb and by thompson (100 draws for the propensities): 100
// candidates of 32 features, top 10. Target: 0 allocs; ucb adds the
// factorisation of A (33×33) and a triangular solve per candidate.
func BenchmarkRank100Explore(b *testing.B) {
	for _, policy := range []string{PolicyGreedy, PolicyUCB, PolicyThompson} {
		b.Run(policy, func(b *testing.B) {
			s := exploreShard(b, 32, 10, nil, policy, 0.1)
			sink := &memSink{}
			for i := range 200 {
				x := make([]float64, 32)
				x[i%32], x[(i*7)%32] = 1, -0.5
				v, _ := json.Marshal(map[string]any{"features": x, "label": 1 - 2*(i%2)})
				s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: v}, sink)
			}
			msg := kafka.Message{Topic: "events", Key: []byte("u"), Value: testkit.Request32(100, 32, 10)}
			b.ReportAllocs()
			for b.Loop() {
				s.Process(&msg, sink)
			}
		})
	}
}
