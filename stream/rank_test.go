package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// rankPipeline is a pipeline (no brokers) serving POST /v1/rank from the
// instance shard of engine e, ready.
func rankPipeline(t testing.TB, e *engine.Engine) *Pipeline {
	t.Helper()
	p, _ := instancePipeline(t, e)
	three := func(context.Context) (int, error) { return 3, nil }
	if err := p.EnableRankHTTP(RankHTTPConfig{MaxBytes: 1 << 20, Partitions: three}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	for part := range 3 { // this instance consumes every partition of the input
		p.owned[part] = true
	}
	p.mu.Unlock()
	p.ready.Store(true)
	return p
}

// discardWriter is an http.ResponseWriter that keeps the status and the
// last body written.
type discardWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *discardWriter) Header() http.Header  { return w.h }
func (w *discardWriter) WriteHeader(code int) { w.status = code }
func (w *discardWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body = append(w.body[:0], b...)
	return len(b), nil
}

// BenchmarkServeRank100 is POST /v1/rank's handler on one request of 100
// candidates × 32 features (linear mam, top 10, greedy): the body read,
// decoded, ranked under the shard's lock, encoded and written. Target: 0
// allocs (net/http's own per-request allocations aside), well under the
// 2 ms p99 budget of issue 16.
func BenchmarkServeRank100(b *testing.B) {
	e := rankEngine(b, 32, engine.PolicyGreedy, 0)
	p := rankPipeline(b, e)
	trainFirstAxis(p.shards[""].st, 32)
	body := testkit.Request32(100, 32, 10)
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

// countSink counts the records published (under the shard's lock).
type countSink struct{ n atomic.Int64 }

func (c *countSink) Buffer() []byte        { return nil }
func (c *countSink) Publish(kafka.Message) { c.n.Add(1) }

// TestRankRequestsAheadOfBatches: while three partitions' appliers stream
// labelled events into one shard as fast as they can, each through its
// lane, ranking requests take the shard's lock after at most the one
// event each applier was applying when they asked for it, not after a
// batch of up to 128 per applier; the appliers carry on between requests, and
// checkpoint captures come in between. For a global model ranked greedily
// and for per-key models ranked by ucb and thompson (whose statistics the
// events change and the captures encode); run under -race by CI.
func TestRankRequestsAheadOfBatches(t *testing.T) {
	const dim = 8
	for _, tc := range []struct {
		name string
		e    func() *engine.Engine
	}{
		{"greedy", func() *engine.Engine { return rankEngine(t, dim, engine.PolicyGreedy, 0) }},
		{"greedy, merged lanes", func() *engine.Engine { // the lanes learn the mam in parallel (mergingHolder)
			return rankEngineLanes(t, dim, engine.PolicyGreedy, 0, engine.MergeLanesOn)
		}},
		{"ucb", func() *engine.Engine { return exploreEngine(t, dim, 2, nil, engine.PolicyUCB, 0.5) }},
		{"thompson", func() *engine.Engine { return exploreEngine(t, dim, 2, nil, engine.PolicyThompson, 0.5) }},
	} {
		t.Run(tc.name, func(t *testing.T) { requestsAheadOfBatches(t, tc.e(), dim) })
	}
}

func requestsAheadOfBatches(t *testing.T, e *engine.Engine, dim int) {
	p := rankPipeline(t, e)
	sh := p.shards[""]
	out := &countSink{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for part := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var off int64
			fetch := func() (kafka.Message, bool) {
				select {
				case <-stop:
					return kafka.Message{}, false
				default:
				}
				off++
				x := make([]float64, dim)
				x[0], x[1+part] = float64(off%5)-2, 1
				y := 1
				if x[0] < 0 {
					y = -1
				}
				v, _ := json.Marshal(map[string]any{"features": x, "label": y})
				key := []byte{'u', byte('0' + off%4)}
				return kafka.Message{Topic: "events", Partition: part, Offset: off, Key: key, Value: v}, true
			}
			p.apply(sh, part, out, fetch, nil)
		}()
	}
	// Events applied: every event is labelled, and each one learned
	// counts in the model's examples as it is applied (its records are
	// published once its partition's applier has released the lock).
	applied := func() int64 { n, _, _ := sh.st.Holder(0).Counts(); return n } // the rank model: the engines' first
	body := testkit.Request32(20, dim, 3)
	worst := int64(0)
	for i := range 500 {
		for out.n.Load() < int64(10*(i+1)) { // the appliers move on between requests
			runtime.Gosched()
		}
		sh.waits() // pshard.lock, measured
		before := applied()
		sh.mu.Lock()
		sh.in()
		worst = max(worst, applied()-before)
		sh.mu.Unlock()
		if _, err := p.Rank(t.Context(), body, nil); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 { // a checkpoint's capture
			sh.lock()
			_, err := sh.st.Capture()
			sh.unlock()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d events applied; a request waited for at most %d of them", out.n.Load(), worst)
	if worst > 3 { // the appliers apply in parallel, each through its lane
		t.Errorf("a request waited while %d events were applied, want at most the one each of the 3 appliers was applying", worst)
	}
}

// TestRankPartitionsOffRequestPath: POST /v1/rank for a key-scoped model
// maps the key to its input partition with the count refreshPartitions
// keeps. Before any count is kept a request asks the brokers itself (and
// is answered 503 when they do not answer); once refreshPartitions has
// one, requests never ask, and are answered while the brokers are down;
// refreshPartitions returns when its generation ends.
func TestRankPartitionsOffRequestPath(t *testing.T) {
	const dim = 8
	p := rankPipeline(t, exploreEngine(t, dim, 2, nil, engine.PolicyGreedy, 0))
	if !p.rank.keyed {
		t.Fatal("the model is not key-scoped")
	}
	var asked atomic.Int64
	var down atomic.Bool
	p.rank.cfg.Partitions = func(context.Context) (int, error) {
		asked.Add(1)
		if down.Load() {
			return 0, errors.New("brokers down")
		}
		return 3, nil
	}
	body := testkit.Request32(10, dim, 3)
	serve := func() *discardWriter {
		req := httptest.NewRequest(http.MethodPost, "/v1/rank", bytes.NewReader(body))
		w := &discardWriter{h: http.Header{}}
		p.ServeRank(w, req)
		return w
	}
	down.Store(true)
	if w := serve(); w.status != http.StatusServiceUnavailable || !bytes.Contains(w.body, []byte("brokers down")) {
		t.Fatalf("no count and the brokers down: %d %s, want 503 naming the error", w.status, w.body)
	}
	if asked.Load() != 1 {
		t.Fatalf("the request asked the brokers %d times, want 1", asked.Load())
	}

	down.Store(false)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { p.rank.refreshPartitions(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.rank.mu.Lock()
		n := len(p.rank.parts)
		p.rank.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("refreshPartitions kept no count")
		}
		time.Sleep(time.Millisecond)
	}
	down.Store(true)
	before := asked.Load()
	for i := range 20 {
		if w := serve(); w.status != http.StatusOK {
			t.Fatalf("request %d with the count kept and the brokers down: %d %s", i, w.status, w.body)
		}
	}
	if got := asked.Load(); got != before {
		t.Fatalf("20 requests asked the brokers %d times, want 0", got-before)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("refreshPartitions did not return when its context ended")
	}
}
