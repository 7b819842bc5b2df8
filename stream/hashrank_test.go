package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/allocs"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// Ranking requests and partition scope with hashed features.

// TestHashedRankHTTP: POST /v1/rank with hashed features answers from the
// live state, as a request on the input topic does (the same ranking, the
// same scores), and names a malformed candidate's feature in its 400.
func TestHashedRankHTTP(t *testing.T) {
	e := hashedRankEngine(t, engine.PolicyGreedy, 0)
	p := rankPipeline(t, e)
	sh := p.shards[""].st
	sink := &memSink{Keep: true}
	w := testkit.World{Items: 30}
	rng := rand.New(rand.NewPCG(8, 1))
	// Teach user 2 through requests on the topic and their labels.
	for r := range 200 {
		items := rng.Perm(w.Items)[:6]
		id := fmt.Sprint("t", r)
		sh.Process(&kafka.Message{Topic: "events", Offset: int64(2 * r), Key: []byte("u2"), Value: w.Request(id, 2, items, 6)}, sink)
		for _, i := range items {
			y := -1
			if w.Likes(2, i) {
				y = 1
			}
			sh.Process(&kafka.Message{Topic: "events", Key: []byte("u2"), Value: fmt.Appendf(nil, `{"id":%q,"item":"i%d","label":%d}`, id, i, y)}, sink)
		}
	}
	req := w.Request("h1", 2, []int{3, 4, 5, 6, 7, 8}, 3)
	out, err := p.Rank(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	sh.Process(&kafka.Message{Topic: "events", Key: []byte("u2"), Value: w.Request("h2", 2, []int{3, 4, 5, 6, 7, 8}, 3)}, sink)
	var viaHTTP, viaTopic struct{ Ranked []testkit.Ranked }
	if err := json.Unmarshal(out, &viaHTTP); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sink.Msgs[len(sink.Msgs)-1].Value, &viaTopic); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(viaHTTP.Ranked) != fmt.Sprint(viaTopic.Ranked) {
		t.Errorf("HTTP %v, topic %v", viaHTTP.Ranked, viaTopic.Ranked)
	}
	// User 2 likes i5 and i8 of i3…i8: they come first.
	for _, it := range viaHTTP.Ranked[:2] {
		var i int
		fmt.Sscanf(it.Item, "i%d", &i)
		if !w.Likes(2, i) {
			t.Errorf("user 2 shown %s in the first two, which it does not like: %s", it.Item, out)
		}
	}
	_, err = p.Rank(t.Context(), []byte(`{"key":"u2","candidates":[{"item":"a","features":{"item":{"tags":["x",1]}}}]}`), nil)
	if re, ok := err.(*rankError); !ok || re.status != 400 || re.Error() != "wrong_type: candidates[0].features.item.tags[1]: got number, want string" {
		t.Errorf("a malformed candidate: %v", err)
	}
}

// TestHashedRankAllocs: a warm ranking request of hashed candidates, on
// the topic and over POST /v1/rank, allocates nothing (once every slot of
// the join buffer has held a shown item's entries).
func TestHashedRankAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts: the race detector empties sync.Pools at random")
	}
	e := hashedRankGlobal(t)
	p := rankPipeline(t, e)
	s := p.shards[""].st
	trainHashed(s)
	msg := kafka.Message{Topic: "events", Key: []byte("user-42"), Value: testkit.HashedRequest100(100, 10)}
	sink := &memSink{}
	for range 200 { // every slot of the join buffer (1000) has held an item
		s.Process(&msg, sink)
	}
	if n := allocs.PerRun(50, func() { s.Process(&msg, sink) }); n != 0 {
		t.Errorf("%v allocations per warm request on the topic, want 0", n)
	}
	var dst []byte
	body := testkit.HashedRequest100(100, 10)
	if n := allocs.PerRun(50, func() {
		var err error
		if dst, err = p.Rank(t.Context(), body, dst[:0]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per warm POST /v1/rank (Pipeline.Rank), want 0", n)
	}
}

// BenchmarkServeRankHashed100 is BenchmarkServeRank100 with hashed
// features: POST /v1/rank's handler on the request of
// BenchmarkRankHashed100. Target: 0 allocs (net/http's own aside), well
// under the 2 ms p99 budget.
func BenchmarkServeRankHashed100(b *testing.B) {
	e := hashedRankGlobal(b)
	p := rankPipeline(b, e)
	trainHashed(p.shards[""].st)
	body := testkit.HashedRequest100(100, 10)
	rd := bytes.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, "/v1/rank", io.NopCloser(rd))
	req.ContentLength = int64(len(body))
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rd.Reset(body)
		w.status = 0
		p.ServeRank(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d: %s", w.status, w.body)
		}
	}
}

// TestHashedRankDuringLearning: POST /v1/rank with hashed candidates (a
// key-scoped model's) while three partitions' appliers stream labelled
// hashed events and label shown items into the same shard, with
// checkpoint captures in between; CI runs it under -race. Every answer
// ranks the candidates it was given.
func TestHashedRankDuringLearning(t *testing.T) {
	e := hashedRankEngine(t, engine.PolicyEpsilon, 0.2)
	p := rankPipeline(t, e)
	sh := p.shards[""]
	out := &countSink{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	w := testkit.World{Items: 40}
	for part := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(part), 1))
			var off int64
			fetch := func() (kafka.Message, bool) {
				select {
				case <-stop:
					return kafka.Message{}, false
				default:
				}
				off++
				u, i := rng.IntN(6), rng.IntN(w.Items)
				y := -1
				if w.Likes(u, i) {
					y = 1
				}
				v := fmt.Appendf(nil, `{"features":{"user":{"id":"u%d"},"item":{"id":"i%d","cat":"c%d"}},"label":%d}`, u, i, i%3, y)
				if off%7 == 0 { // the label of an item shown earlier (unknown ids are counted, not learned)
					v = fmt.Appendf(nil, `{"id":"q%d","item":"i%d","label":%d}`, rng.IntN(200), i, y)
				}
				return kafka.Message{Topic: "events", Partition: part, Offset: off, Key: fmt.Appendf(nil, "u%d", u), Value: v}, true
			}
			p.apply(sh, part, out, fetch, nil)
		}()
	}
	// The requests start once the appliers are learning: on a loaded
	// machine their goroutines may not have run yet, and 200 requests
	// take milliseconds.
	for deadline := time.Now().Add(10 * time.Second); out.n.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatal("no event applied in 10 s")
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for r := range 200 {
		items := rng.Perm(w.Items)[:10]
		res, err := p.Rank(t.Context(), w.Request(fmt.Sprint("q", r), rng.IntN(6), items, 3), nil)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct{ Ranked []testkit.Ranked }
		if err := json.Unmarshal(res, &resp); err != nil || len(resp.Ranked) != 3 {
			t.Fatalf("%v %s", err, res)
		}
		for _, it := range resp.Ranked {
			var i int
			if _, err := fmt.Sscanf(it.Item, "i%d", &i); err != nil || !slices.Contains(items, i) {
				t.Fatalf("ranked %s, not a candidate of %v", it.Item, items)
			}
		}
		if r%20 == 0 {
			sh.mu.Lock()
			_, err := sh.st.Capture()
			sh.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}
