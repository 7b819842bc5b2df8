package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream"
)

// TestRankFlood: configs/recommendation.yaml, its impressions and their
// ratings flowing on the stream, while clients flood POST /v1/rank with
// requests of fresh random items (k = 3 of 4 candidates), from a few
// anonymous keys and from the stream's users. The requests' shown items
// wait in rank.join, apart from the impressions' labels.join_window: every
// impression's rating joins (no unknown_id, no too_late, no impression
// dropped), the shown items dropped are counted (full and quota, adding
// up with those waiting to every item shown), and the heap after the
// flood is within the bound of the requests' window over the heap before
// it. The CI size: a window of 3 000 shown items (300 a key), 3 000
// impressions rated a second later, at least 30 000 requests (the flood
// lasts as long as the stream); RANK_FLOOD_FULL=1 runs the configuration
// as shipped (1 M impressions, 100 000 shown items) under at least 1 M
// requests, 100 000 impressions rated a minute later (the flood;
// by hand: 3 minutes).
func TestRankFlood(t *testing.T) {
	full := os.Getenv("RANK_FLOOD_FULL") == "1"
	useFastBinary(t)
	requests, imps, delay := 30000, 3000, time.Second
	windowEvents, perKey := 3000, 300
	if full {
		requests, imps, delay = 1_000_000, 100_000, time.Minute
		windowEvents, perKey = 100_000, 10_000
	}
	cfg := shippedConfig(t, "recommendation.yaml")
	replace := cfg.replace
	replace(`listen: "%HTTP%"`, "listen: \"%HTTP%\"\n  pprof: true")
	if !full {
		// Room for the impressions waiting (about a second's), not for
		// the items the flood shows meanwhile (18 000 a second here).
		replace("join_window: {events: 1000000, time: 10m, per_key: 10000}", "join_window: {events: 5000, time: 10m, per_key: 10000}")
		replace("join: {events: 100000, time: 10m, per_key: 10000}", fmt.Sprintf("join: {events: %d, time: 10m, per_key: %d}", windowEvents, perKey))
	}
	b, err := stream.StartBroker(0, stream.TopicSpec{Name: "impressions", Partitions: 3},
		stream.TopicSpec{Name: "impression-scores", Partitions: 3}, stream.TopicSpec{Name: "impressions.dlq", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p := startStreamer(t, b, cfg.cfg)

	const users, dim = 50, 16
	rng := rand.New(rand.NewPCG(11, 12))
	features := func(b []byte, r *rand.Rand) []byte {
		b = append(b, '[')
		for j := range dim {
			if j > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, "%.4f", r.NormFloat64())
		}
		return append(b, ']')
	}
	// The users' first impressions and ratings, so that their models
	// exist before the flood (the heap's baseline holds them).
	stream := func(from, to int) (impressions, ratings []kafka.Message) {
		for i := from; i < to; i++ {
			key := []byte(fmt.Sprint("u", i%users))
			v := fmt.Appendf(nil, `{"id":"imp-%d","features":`, i)
			v = append(features(v, rng), '}')
			impressions = append(impressions, kafka.Message{Key: key, Value: v})
			ratings = append(ratings, kafka.Message{Key: key, Value: fmt.Appendf(nil, `{"id":"imp-%d","label":%d}`, i, 1+i%5)})
		}
		return impressions, ratings
	}
	warm := 20 * users
	im, ra := stream(0, warm)
	produce(t, b, "impressions", im)
	produce(t, b, "impressions", ra)
	waitFor(t, 60*time.Second, "the warm-up's ratings joined", func() bool {
		return p.metric(t, "streamer_labels_total", `outcome="joined"`) == float64(warm)
	})
	heapBefore := p.heapAfterGC(t)

	// The stream, while the flood runs: 100 impressions every 100 ms,
	// each rated delay later (1 s; RANK_FLOOD_FULL: a minute), when the
	// flood has shown far more items than labels.join_window holds.
	streamDone := make(chan error, 1)
	var streaming atomic.Bool // the flood lasts as long
	streaming.Store(true)
	go func() {
		defer streaming.Store(false)
		w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "impressions", Balancer: &kafka.Murmur2Balancer{},
			BatchTimeout: 2 * time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)}
		defer w.Close()
		const batch = 100
		type due struct {
			at      time.Time
			ratings []kafka.Message
		}
		var queue []due
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for next := warm; next < warm+imps || len(queue) > 0; <-tick.C {
			var out []kafka.Message
			if next < warm+imps {
				im, ra := stream(next, min(next+batch, warm+imps))
				next += batch
				out = append(out, im...)
				queue = append(queue, due{time.Now().Add(delay), ra})
			}
			for len(queue) > 0 && time.Now().After(queue[0].at) {
				out = append(out, queue[0].ratings...)
				queue = queue[1:]
			}
			if len(out) == 0 {
				continue
			}
			if err := w.WriteMessages(context.Background(), out...); err != nil {
				streamDone <- err
				return
			}
		}
		streamDone <- nil
	}()

	// The flood: clients on keep-alive connections, each request new
	// items. Two are anonymous, with keys the stream never saw: one key
	// (over its quota soon), and 200 keys (whose quotas add up to more
	// than the window); the others use the stream's users' keys.
	const clients = 8
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var sent, answered, failed atomic.Int64
	var firstErr atomic.Pointer[string]
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 99))
			var body []byte
			for {
				n := sent.Add(1)
				if n > int64(requests) && !streaming.Load() {
					return
				}
				key := fmt.Sprint("u", r.IntN(users))
				switch c {
				case 0:
					key = "anonymous"
				case 1:
					key = fmt.Sprint("anonymous-", r.IntN(200))
				}
				body = fmt.Appendf(body[:0], `{"id":"f%d","key":%q,"k":3,"candidates":[`, n, key)
				for j := range 4 {
					if j > 0 {
						body = append(body, ',')
					}
					body = fmt.Appendf(body, `{"item":"x%d","features":`, r.Uint64())
					body = append(features(body, r), '}')
				}
				body = append(body, "]}"...)
				resp, err := client.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(body))
				if err == nil {
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%d %s", resp.StatusCode, out)
					}
				}
				answered.Add(1)
				if err != nil {
					failed.Add(1)
					s := err.Error()
					firstErr.CompareAndSwap(nil, &s)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := <-streamDone; err != nil {
		t.Fatal(err)
	}
	requests = int(answered.Load()) // at least requests, more if the stream lasted longer
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d requests failed, the first: %s", f, requests, *firstErr.Load())
	}
	total := warm + imps
	waitFor(t, 120*time.Second, "every rating processed", func() bool {
		m := p.metrics(t)
		return sample(t, m, "streamer_labels_total", `outcome="joined"`)+sample(t, m, "streamer_labels_total", `outcome="unknown_id"`)+
			sample(t, m, "streamer_labels_total", `outcome="too_late"`) >= float64(total)
	})
	heapAfter := p.heapAfterGC(t)
	m := p.metrics(t)
	get := func(name, labels string) float64 { return sample(t, m, name, labels) }
	shown := 3 * float64(requests)
	full_, quota := get("streamer_join_dropped_total", `reason="full",source="requests"`), get("streamer_join_dropped_total", `reason="quota",source="requests"`)
	pending := get("streamer_join_pending", `source="requests"`)
	t.Logf("%d requests in %v (%.0f/s) beside %d impressions and their ratings: shown items dropped %v (full) + %v (quota), %v waiting; heap in use %.1f MiB before the flood, %.1f MiB after",
		requests, elapsed.Round(time.Millisecond), float64(requests)/elapsed.Seconds(), imps, full_, quota, pending, heapBefore/(1<<20), heapAfter/(1<<20))
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"streamer_labels_total", `outcome="joined"`, float64(total)},
		{"streamer_labels_total", `outcome="unknown_id"`, 0},
		{"streamer_labels_total", `outcome="too_late"`, 0},
		{"streamer_join_dropped_total", `reason="full",source="impressions"`, 0},
		{"streamer_join_dropped_total", `reason="expired",source="impressions"`, 0},
		{"streamer_rank_requests_total", "", float64(requests)},
	} {
		if got := get(c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if full_ == 0 || quota == 0 || pending > float64(windowEvents) || full_+quota+pending != shown {
		t.Errorf("shown items: %v full + %v quota + %v waiting (at most %d), want every one of the %v shown, some by each reason",
			full_, quota, pending, windowEvents, shown)
	}
	// The requests' window holds at most windowEvents items of 16
	// features and 2 models' predictions (stream/engine/join.go, joinBytes): it
	// is allocated whole at start, so the flood adds only what it leaves
	// behind until the next GC, connections and the anonymous keys'
	// models; 32 MiB of slack for that.
	bound := float64(windowEvents)*(184+8*dim+88*2+8+3*40) + 32<<20
	if heapAfter-heapBefore > bound {
		t.Errorf("the heap grew by %.1f MiB over the flood, more than the requests' window's %.1f MiB and 32 MiB of slack",
			(heapAfter-heapBefore)/(1<<20), (bound-32<<20)/(1<<20))
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// heapAfterGC makes the service collect its garbage (GET
// /debug/pprof/heap?gc=1, with http.pprof on) and returns its
// go_memstats_heap_inuse_bytes then.
func (p *proc) heapAfterGC(t *testing.T) float64 {
	t.Helper()
	p.heapProfile(t)
	return p.metric(t, "go_memstats_heap_inuse_bytes", "")
}

// sample reads one sample from a /metrics page (0 when absent).
func sample(t *testing.T, body, name, labels string) float64 {
	t.Helper()
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, want+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}
