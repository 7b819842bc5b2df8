package tests

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRankUnseenKeys: ranking requests for keys that never had a labelled
// event create no per-key state, durable or in memory. 50 users learn
// (max_keys 60: room for ten more instances) and get 20 000 requests (the
// process's memory under request traffic: the Go heap's garbage between
// collections scales with the live heap, which holds the requests' join
// window); then 100 000 requests for 100 000 keys never seen arrive over
// POST /v1/rank. Every one is answered (by a blank model, n 0); the key
// store keeps the 50 users after the checkpoint that follows, memory keeps
// their 50 instances (none evicted, none added), and the resident memory
// grows by less than 50 MB.
func TestRankUnseenKeys(t *testing.T) {
	useFastBinary(t)
	b := startRankBroker(t)
	cfg := strings.ReplaceAll(rankConfig, "%DIR%", t.TempDir())
	cfg = strings.Replace(cfg, "    scope: key\n", "    scope: key\n    max_keys: 60\n", 1)
	if j := os.Getenv("RANK_UNSEEN_JOIN"); j != "" {
		cfg = strings.Replace(cfg, "  response_topic: ranked\n", "  response_topic: ranked\n  join: {events: "+j+"}\n", 1)
	}
	p := startStreamer(t, b, cfg)

	const users, perUser, dim = 50, 20, 4
	rng := rand.New(rand.NewPCG(5, 6))
	prefs := make([][]float64, users)
	for u := range prefs {
		prefs[u] = []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	}
	produce(t, b, "events", prefEvents(rng, prefs, users*perUser, "e"))
	waitFor(t, 30*time.Second, "the users' events learned and stored", func() bool {
		m := p.metrics(t)
		return sample(t, m, "streamer_events_learned_total", `model="prefs"`) == users*perUser &&
			sample(t, m, "streamer_model_keys_stored", `model="prefs"`) == users
	})
	xs := make([][]float64, 5)
	for i := range xs {
		xs[i] = []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	}
	const clients = 8
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	// flood sends n requests over clients connections, the i-th for
	// key(i), each answered 200 with a body that contains want.
	flood := func(n int, key func(int64) string, want string) time.Duration {
		var next, failed atomic.Int64
		var firstErr atomic.Pointer[string]
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(n) {
						return
					}
					body := rankRequestJSON(fmt.Sprint("q", i), key(i), xs, 3)
					resp, err := client.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(body))
					if err == nil {
						out, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(want)) {
							err = fmt.Errorf("%d %s", resp.StatusCode, out)
						}
					}
					if err != nil {
						failed.Add(1)
						s := err.Error()
						firstErr.CompareAndSwap(nil, &s)
					}
				}
			})
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d of %d requests failed, the first: %s", f, n, *firstErr.Load())
		}
		return time.Since(start)
	}
	// The same traffic for the users first: the process's memory under
	// requests (the Go heap's garbage between collections grows with the
	// live heap, which holds the requests' join window), so that what is
	// measured after is what the unseen keys add.
	flood(20_000, func(i int64) string { return fmt.Sprint("u", i%users) }, `"n":`)
	before := p.metrics(t)
	rssBefore := rss(t, p)

	requests := 100_000
	if s := os.Getenv("RANK_UNSEEN_REQUESTS"); s != "" {
		requests, _ = strconv.Atoi(s)
	}
	elapsed := flood(requests, func(i int64) string { return fmt.Sprint("anonymous-", i) }, `"n":0`)
	// One more event per user, and a checkpoint after it (snapshot.every
	// 100 ms; a checkpoint needs new offsets).
	produce(t, b, "events", prefEvents(rng, prefs, users, "f"))
	saved := p.metric(t, "streamer_snapshots_total", "")
	waitFor(t, 30*time.Second, "a checkpoint after the flood and the users' next events", func() bool {
		m := p.metrics(t)
		return sample(t, m, "streamer_events_learned_total", `model="prefs"`) == users*(perUser+1) &&
			sample(t, m, "streamer_snapshots_total", "") > saved
	})
	rssAfter := rss(t, p)
	after := p.metrics(t)
	t.Logf("%d requests for unseen keys in %v (%.0f/s); resident memory %.1f → %.1f MiB; heap in use %.1f → %.1f MiB, GC goal %.1f → %.1f MiB",
		requests, elapsed.Round(time.Millisecond), float64(requests)/elapsed.Seconds(), rssBefore/(1<<20), rssAfter/(1<<20),
		sample(t, before, "go_memstats_heap_inuse_bytes", "")/(1<<20), sample(t, after, "go_memstats_heap_inuse_bytes", "")/(1<<20),
		sample(t, before, "go_memstats_next_gc_bytes", "")/(1<<20), sample(t, after, "go_memstats_next_gc_bytes", "")/(1<<20))
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"streamer_model_keys_stored", `model="prefs"`, users},
		{"streamer_model_keys", `model="prefs"`, users},
		{"streamer_model_key_errors_total", `model="prefs"`, 0},
	} {
		if b, a := sample(t, before, c.name, c.labels), sample(t, after, c.name, c.labels); b != c.want || a != c.want {
			t.Errorf("%s{%s}: %v before the flood, %v after, want %v", c.name, c.labels, b, a, c.want)
		}
	}
	if b, a := sample(t, before, "streamer_events_learned_total", `model="prefs"`), sample(t, after, "streamer_events_learned_total", `model="prefs"`); b != users*perUser || a != users*(perUser+1) {
		t.Errorf("streamer_events_learned_total: %v before the flood, %v after, want %d and %d", b, a, users*perUser, users*(perUser+1))
	}
	if got := sample(t, after, "streamer_rank_requests_total", "") - sample(t, before, "streamer_rank_requests_total", ""); got != float64(requests) {
		t.Errorf("streamer_rank_requests_total moved by %v, want %d", got, requests)
	}
	if rssAfter-rssBefore > 50<<20 {
		t.Errorf("resident memory grew by %.1f MiB over the flood, want < 50 MiB", (rssAfter-rssBefore)/(1<<20))
	}
	// A real user is still answered by what it learned.
	resp, err := client.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(rankRequestJSON("q-u7", "u7", xs, 3)))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(fmt.Sprintf(`"n":%d`, perUser+1))) {
		t.Errorf("u7 after the flood: %d %s, want its model of %d examples", resp.StatusCode, out, perUser+1)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// rss is the process's resident memory in bytes (VmRSS of
// /proc/PID/status).
func rss(t *testing.T, p *proc) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("resident memory of the service (the test reads Linux's /proc): %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}
