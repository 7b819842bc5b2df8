package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/internal/testkit"
	"github.com/streamer/streamer/stream/wire"
)

// hashedRankEngine ranks with a key-scoped linear mam ("prefs") of hashed
// features; a global logistic regression ("ctr") learns from the same
// labels.
func hashedRankEngine(t testing.TB, policy string, eps float64) *Engine {
	t.Helper()
	proto, _ := testkit.HashedMAM()
	lg, _ := testkit.HashedLogistic()
	hc := testkit.HashedConfig
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << testkit.HashedBits, MaxMessageBytes: 1 << 20,
		JoinEvents: 10000, Hash: &hc, Rank: RankConfig{Model: "prefs", Policy: policy, Epsilon: eps, Seed: 3}},
		[]NamedModel{{Name: "prefs", Model: proto, Factory: testkit.HashedMAM, MaxKeys: 100}, {Name: "ctr", Model: lg}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestHashedRank: ranking requests with hashed features on the input
// topic. Each candidate is scored on the request's features (the user's
// namespace) combined with its own (the item's), the user × item
// interaction included: every published score is, bit for bit, what a
// twin of the user's model gives the single event of that combination,
// and the greedy order sorts them. The labels of the shown items, by
// (request, item), teach the key's model and the global one the same
// entries as the twins learn them (the published scores stay equal), feed
// the off-policy estimates, and the per-user model learns: the shown
// first items are liked in the last quarter of the run far more often
// than in the first requests. ucb and thompson, which keep dense statistics, are
// refused.
func TestHashedRank(t *testing.T) {
	e := hashedRankEngine(t, PolicyGreedy, 0)
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	w := testkit.World{Items: 60}
	plain, _ := wire.NewDecoder(1<<testkit.HashedBits, nil, 0)
	plain, _ = plain.WithHashing(testkit.HashedConfig)
	twins := map[int]online.SparseModel{}
	ctr, _ := testkit.HashedLogistic()
	twinCtr := ctr.(online.SparseModel)
	rng := rand.New(rand.NewPCG(5, 6))
	const requests, cands, k = 800, 12, 3
	var firstLiked [requests]bool
	var ev wire.Event
	off := int64(0)
	for r := range requests {
		u := rng.IntN(8)
		items := rng.Perm(w.Items)[:cands]
		id := fmt.Sprintf("q%d", r)
		req := w.Request(id, u, items, k)
		before := len(sink.Msgs)
		s.Process(&kafka.Message{Topic: "events", Offset: off, Key: fmt.Appendf(nil, "u%d", u), Value: req}, sink)
		off++
		if len(sink.Msgs) != before+1 {
			t.Fatalf("request %d: %d records", r, len(sink.Msgs)-before)
		}
		var resp struct {
			Model  string
			Ranked []testkit.Ranked
		}
		if err := json.Unmarshal(sink.Msgs[before].Value, &resp); err != nil || resp.Model != "prefs" || len(resp.Ranked) != k {
			t.Fatalf("request %d: %v %s", r, err, sink.Msgs[before].Value)
		}
		tw := twins[u]
		if tw == nil {
			m, _ := testkit.HashedMAM()
			tw = m.(online.SparseModel)
			twins[u] = tw
		}
		// Every candidate's twin score; the shown ones must match, the
		// first must be the best.
		best := math.Inf(-1)
		combined := func(i int) []byte {
			return fmt.Appendf(nil, `{"features":{"user":{"id":"u%d"},"hour":%d,"item":{"id":"i%d","cat":"c%d","tags":["t%d"]}}}`, u, u%24, i, i%3, i%7)
		}
		for _, i := range items {
			if err := plain.Decode(combined(i), &ev); err != nil {
				t.Fatal(err)
			}
			best = max(best, online.PeekSparse(tw, ev.Idx, ev.Val).Score)
		}
		if resp.Ranked[0].Score != best {
			t.Fatalf("request %d: first score %v, the best twin score %v", r, resp.Ranked[0].Score, best)
		}
		for j, it := range resp.Ranked {
			var i int
			fmt.Sscanf(it.Item, "i%d", &i)
			if err := plain.Decode(combined(i), &ev); err != nil {
				t.Fatal(err)
			}
			if p := online.PeekSparse(tw, ev.Idx, ev.Val); p.Score != it.Score || it.Propensity != 1 {
				t.Fatalf("request %d, position %d: score %v propensity %v, twin %v", r, j, it.Score, it.Propensity, p.Score)
			}
			if j > 0 && it.Score > resp.Ranked[j-1].Score {
				t.Fatalf("request %d: not in greedy order: %+v", r, resp.Ranked)
			}
		}
		for j, it := range resp.Ranked {
			var i int
			fmt.Sscanf(it.Item, "i%d", &i)
			if err := plain.Decode(combined(i), &ev); err != nil {
				t.Fatal(err)
			}
			y := -1
			if w.Likes(u, i) {
				y = 1
			}
			if j == 0 {
				firstLiked[r] = y == 1
			}
			// The label comes back for every shown item; both models learn.
			s.Process(&kafka.Message{Topic: "events", Offset: off, Key: fmt.Appendf(nil, "u%d", u),
				Value: fmt.Appendf(nil, `{"id":%q,"item":%q,"label":%d}`, id, it.Item, y)}, sink)
			off++
			tw.ObserveSparse(ev.Idx, ev.Val, float64(y), true)
			twinCtr.ObserveSparse(ev.Idx, ev.Val, float64(y), true)
		}
	}
	if got := testutil.ToFloat64(e.met.labelsJoined); got != requests*k {
		t.Errorf("%v labels joined, want %d", got, requests*k)
	}
	if e.ope.sums.N() != requests {
		t.Errorf("%v off-policy samples, want %d", e.ope.sums.N(), requests)
	}
	// The global model learned exactly what its twin did.
	s.Process(&kafka.Message{Topic: "events", Offset: off, Value: []byte(`{"features":{"user":{"id":"u1"},"item":{"id":"i4","cat":"c1"}}}`)}, sink)
	if err := plain.Decode([]byte(`{"features":{"user":{"id":"u1"},"item":{"id":"i4","cat":"c1"}}}`), &ev); err != nil {
		t.Fatal(err)
	}
	var rec struct{ Model string }
	var score struct{ Score float64 }
	last := sink.Msgs[len(sink.Msgs)-1]
	_ = json.Unmarshal(last.Value, &rec)
	_ = json.Unmarshal(last.Value, &score)
	if want := online.PeekSparse(twinCtr, ev.Idx, ev.Val).Score; rec.Model != "ctr" || score.Score != want {
		t.Errorf("ctr after the labels: %s, twin %v", last.Value, want)
	}
	liked := func(from, to int) float64 {
		n := 0
		for _, l := range firstLiked[from:to] {
			if l {
				n++
			}
		}
		return float64(n) / float64(to-from)
	}
	early, late := liked(0, 16), liked(3*requests/4, requests)
	t.Logf("first item liked: %.2f of the first 16 requests (about 2 per user), %.2f of the last quarter", early, late)
	if late < 0.95 || late < early+0.2 {
		t.Errorf("first item liked %.2f of the first 16 requests, %.2f of the last quarter: want ≥ 0.95 and 0.2 more", early, late)
	}

	for _, policy := range []string{PolicyUCB, PolicyThompson} {
		proto, _ := testkit.HashedMAM()
		hc := testkit.HashedConfig
		_, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << testkit.HashedBits, Hash: &hc, Rank: RankConfig{Model: "prefs", Policy: policy}},
			[]NamedModel{{Name: "prefs", Model: proto, Factory: testkit.HashedMAM}}, nil)
		if err == nil || !strings.Contains(err.Error(), "needs dense features") {
			t.Errorf("%s with hashed features: %v", policy, err)
		}
	}
}

// TestHashedRankEpsilon: epsilon exploration with hashed features; the
// propensities are those of its draws, and a request whose combined
// features are too many is dead-lettered naming the candidate.
func TestHashedRankEpsilon(t *testing.T) {
	e := hashedRankEngine(t, PolicyEpsilon, 0.5)
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	w := testkit.World{Items: 20}
	explored := 0
	for r := range 200 {
		s.Process(&kafka.Message{Topic: "events", Offset: int64(r), Value: w.Request(fmt.Sprint("q", r), 1, []int{0, 1, 2, 3, 4}, 2)}, sink)
		var resp struct{ Ranked []testkit.Ranked }
		if err := json.Unmarshal(sink.Msgs[len(sink.Msgs)-1].Value, &resp); err != nil {
			t.Fatal(err)
		}
		for j, it := range resp.Ranked {
			r := 5 - j
			if p := it.Propensity; p != 1-0.5+0.5/float64(r) && p != 0.5/float64(r) {
				t.Fatalf("position %d: propensity %v", j, p)
			}
			if it.Propensity < 0.5 {
				explored++
			}
		}
	}
	if explored < 100 || explored > 300 {
		t.Errorf("%d exploring picks of 400, want about 200·(1 − 1/r) each", explored)
	}
	tags := make([]string, 70)
	for i := range tags {
		tags[i] = fmt.Sprintf(`"t%d"`, i)
	}
	big := `{"id":"x","features":{"user":{"id":"u1"}},"candidates":[{"item":"a","features":{"item":{"id":"a"}}},{"item":"b","features":{"item":{"tags":[` + strings.Join(tags[:40], ",") + `]}}}]}`
	s.Process(&kafka.Message{Topic: "events", Value: []byte(big)}, sink)
	m := sink.Msgs[len(sink.Msgs)-1]
	if m.Topic != "dlq" || headerValue(m, HeaderReason) != "too_many_features" || !strings.HasPrefix(headerValue(m, HeaderDetail), "candidates[1]: 81 features") {
		t.Errorf("a request over max_features: %s %s %s", m.Topic, headerValue(m, HeaderReason), headerValue(m, HeaderDetail))
	}
}

// TestHashedPartitioned: hashed features in partition scope. A mergeable
// mam (linear, and rbf with generated frequencies) learns every event into
// the merge of the instance's partitions and into the event's partition's
// own statistics: its published scores are, bit for bit, a single twin's
// fed every event in order, and each partition's state is, byte for byte,
// a twin's fed that partition's events. A ranking request is scored by the
// merge, and its item's label is learned like an event. A logistic regression keeps one
// instance per partition, each its partition's twin. When a partition
// leaves (its statistics stay merged as remote state) the merge still
// scores as the twin does, up to the merge's rounding.
func TestHashedPartitioned(t *testing.T) {
	const parts = 3
	rbf := func() (online.Model, error) {
		return online.NewMAM(1<<testkit.HashedBits, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelRBF, Gamma: 0.5, Features: 32, Seed: 2, Sparse: true}, Balance: true, Delta: 0.05})
	}
	builds := []func() (online.Model, error){testkit.HashedMAM, rbf, testkit.HashedLogistic}
	names := []string{"lin", "rbf", "lg"}
	var models []NamedModel
	for i, b := range builds {
		m, _ := b()
		models = append(models, NamedModel{Name: names[i], Model: m, New: b, Fingerprint: names[i]})
	}
	hc := testkit.HashedConfig
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << testkit.HashedBits, Hash: &hc,
		JoinEvents: 100, Rank: RankConfig{Model: "lin"}}, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if !e.defs[0].mergeable || !e.defs[1].mergeable || e.defs[2].mergeable {
		t.Fatalf("mergeable: %v %v %v", e.defs[0].mergeable, e.defs[1].mergeable, e.defs[2].mergeable)
	}
	shards := make([]*Shard, parts)
	for p := range shards {
		s, err := e.NewShard(fmt.Sprint(p))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Restore(nil, nil); err != nil {
			t.Fatal(err)
		}
		shards[p] = s
	}
	newTwin := func(i int) online.SparseModel { m, _ := builds[i](); return m.(online.SparseModel) }
	global := []online.SparseModel{newTwin(0), newTwin(1)}
	perPart := make([][]online.SparseModel, parts)
	for p := range perPart {
		perPart[p] = []online.SparseModel{newTwin(0), newTwin(1), newTwin(2)}
	}
	plain, _ := wire.NewDecoder(1<<testkit.HashedBits, nil, 0)
	plain, _ = plain.WithHashing(testkit.HashedConfig)
	rng := rand.New(rand.NewPCG(2, 7))
	sink := &memSink{Keep: true}
	var ev wire.Event
	offsets := make([]int64, parts)
	for i := range 1500 {
		v, y := clickEvent(rng)
		u := rng.IntN(30)
		part := u % parts
		if err := plain.Decode(v, &ev); err != nil {
			t.Fatal(err)
		}
		before := len(sink.Msgs)
		shards[part].Process(&kafka.Message{Topic: "events", Partition: part, Offset: offsets[part], Key: fmt.Appendf(nil, "u%d", u), Value: v}, sink)
		offsets[part]++
		for k := range 3 {
			var r struct{ Score float64 }
			if err := json.Unmarshal(sink.Msgs[before+k].Value, &r); err != nil {
				t.Fatal(err)
			}
			var want float64
			if k < 2 {
				want = global[k].ObserveSparse(ev.Idx, ev.Val, float64(y), true).Score
				perPart[part][k].ObserveSparse(ev.Idx, ev.Val, float64(y), true)
			} else {
				want = perPart[part][k].ObserveSparse(ev.Idx, ev.Val, float64(y), true).Score
			}
			if r.Score != want {
				t.Fatalf("event %d, model %s: published %v, twin %v", i, names[k], r.Score, want)
			}
		}
	}
	// A ranking request on partition 1 is scored by the merge; the label
	// of its first item teaches the merge and partition 1's own sums.
	req := []byte(`{"id":"r1","features":{"user":{"id":"u4","group":"g1"}},"candidates":[` +
		`{"item":"a","features":{"item":{"id":"i1","group":"h2"}}},{"item":"b","features":{"item":{"id":"i2","group":"h1"}}}]}`)
	before := len(sink.Msgs)
	shards[1].Process(&kafka.Message{Topic: "events", Partition: 1, Offset: offsets[1], Key: []byte("u4"), Value: req}, sink)
	offsets[1]++
	var resp struct{ Ranked []testkit.Ranked }
	if err := json.Unmarshal(sink.Msgs[before].Value, &resp); err != nil || len(resp.Ranked) != 2 {
		t.Fatalf("%v %s", err, sink.Msgs[before].Value)
	}
	combined := map[string]string{
		"a": `{"features":{"user":{"id":"u4","group":"g1"},"item":{"id":"i1","group":"h2"}}}`,
		"b": `{"features":{"user":{"id":"u4","group":"g1"},"item":{"id":"i2","group":"h1"}}}`,
	}
	for _, it := range resp.Ranked {
		if err := plain.Decode([]byte(combined[it.Item]), &ev); err != nil {
			t.Fatal(err)
		}
		if want := online.PeekSparse(global[0], ev.Idx, ev.Val).Score; it.Score != want {
			t.Errorf("item %s: score %v, the merge's twin %v", it.Item, it.Score, want)
		}
	}
	first := resp.Ranked[0].Item
	shards[1].Process(&kafka.Message{Topic: "events", Partition: 1, Offset: offsets[1], Key: []byte("u4"),
		Value: []byte(`{"id":"r1","item":"` + first + `","label":1}`)}, sink)
	offsets[1]++
	if err := plain.Decode([]byte(combined[first]), &ev); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		global[k].ObserveSparse(ev.Idx, ev.Val, 1, true)
	}
	for k := range 3 {
		perPart[1][k].ObserveSparse(ev.Idx, ev.Val, 1, true)
	}
	for p, s := range shards {
		c, err := s.Capture()
		if err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			want, _ := perPart[p][k].MarshalBinary()
			if string(c.Models[k].Data) != string(want) {
				t.Errorf("partition %d, model %s: state differs from its twin's", p, names[k])
			}
		}
	}
	// Partition 2 leaves: its statistics stay merged, now remote.
	shards[2].Close()
	v := []byte(`{"features":{"user":{"id":"u7","group":"g1"},"item":{"id":"i9","group":"h3","tags":["a"]},"hour":3}}`)
	if err := plain.Decode(v, &ev); err != nil {
		t.Fatal(err)
	}
	before = len(sink.Msgs)
	shards[0].Process(&kafka.Message{Topic: "events", Offset: offsets[0], Value: v}, sink)
	for k := range 2 {
		var r struct{ Score float64 }
		_ = json.Unmarshal(sink.Msgs[before+k].Value, &r)
		want := online.PeekSparse(global[k], ev.Idx, ev.Val).Score
		if math.Abs(r.Score-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("model %s after a partition left: %v, twin %v", names[k], r.Score, want)
		}
	}
}

// hashedRankGlobal is an engine whose global linear mam of hashed features
// (2^18 indices, the user × item interaction) ranks requests greedily,
// with delayed labels on.
func hashedRankGlobal(t testing.TB) *Engine {
	t.Helper()
	const bits = 18
	m, err := online.NewMAM(1<<bits, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	hc := wire.HashConfig{Bits: bits, Seed: 1, MaxFeatures: 64, Interactions: [][2]string{{"user", "item"}}}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << bits, MaxMessageBytes: 1 << 20,
		JoinEvents: 1000, Hash: &hc, Rank: RankConfig{Model: "mam", Policy: PolicyGreedy}},
		[]NamedModel{{Name: "mam", Model: m}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// trainHashed teaches s's model clicks of the hashed world of testkit.World.
func trainHashed(s *Shard) {
	sink := &memSink{}
	for _, m := range testkit.HashedClicks() {
		s.Process(&m, sink)
	}
}

// BenchmarkRankHashed100 is BenchmarkRank100 with hashed features: a
// request of 100 candidates of 20 hashed features each (the request's user
// namespace combined with each item's, the user × item interaction
// included), decoded and hashed, ranked by a global linear mam over 2^18
// indices, top 10 kept for their labels, the response encoded. Target:
// well under the 2 ms p99 budget of POST /v1/rank, 0 allocs.
func BenchmarkRankHashed100(b *testing.B) {
	e := hashedRankGlobal(b)
	s := instanceShard(b, e)
	trainHashed(s)
	msg := kafka.Message{Topic: "events", Key: []byte("user-42"), Value: testkit.HashedRequest100(100, 10)}
	sink := &memSink{}
	b.ReportAllocs()
	for b.Loop() {
		s.Process(&msg, sink)
	}
}
