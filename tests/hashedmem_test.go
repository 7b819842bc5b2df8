package tests

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const hashedMemConfig = `
kafka:
  brokers: [%BROKERS%]
  group: hashed-mem
  commit_interval: 200ms
http:
  listen: "%HTTP%"
  pprof: true
log:
  level: warn
snapshot:
  dir: %DIR%
  every: 300ms
models:
  - name: ranks
    type: omam
    levels: 5
    edges: [-0.5, 0, 0.5, 0.75]
    kernel: {type: linear}
    features:
      hash: {bits: 20, seed: 1}
  - name: clicks
    type: logistic
    features:
      hash: {bits: 20, seed: 1}
  - name: ranks_rbf
    type: omam
    levels: 5
    edges: [-0.5, 0, 0.5, 0.75]
    features:
      hash: {bits: 20, seed: 1}
`

// TestHashedIdleMemory: an idle service with hashed features in 2^20
// indices over 3 partitions holds its models' weights and little more.
// The models' own state is a linear omam's 5 levels of compensated sums
// (2·5·2^20 float64, 80 MiB) and a logistic model's weights, AdaGrad sums
// and L2 stamps (3·2^20 words, 24 MiB); the default omam (rbf, gamma auto
// with generated frequencies: its warm-up keeps the inputs' entries, not
// 64 dense rows of 8 MiB) holds nothing per index. The rest must not grow
// with 2^bits: it did, by a dense preparation buffer of 2^20 floats per
// model in each of the 32 prepared-event slots of every partition (768
// MiB for the linear omam alone), and by the models' dense scratch (the
// linear omam's 32 MiB, the logistic model's 8 MiB). After start-up, 100
// events (the auto width's warm-up over) and a snapshot, the heap in use
// after a collection (go_memstats_heap_inuse_bytes, read after
// /debug/pprof/heap?gc=1) must stay under 150 MB; it was 975 MB, it is
// about 119 MB. E2E_HEAP_PROFILE=file writes the heap profile there
// (go tool pprof -sample_index=inuse_space -top file).
func TestHashedIdleMemory(t *testing.T) {
	useFastBinary(t) // the race detector's shadow memory is not the service's
	b := startBroker(t, 3)
	cfg := strings.ReplaceAll(hashedMemConfig, "%DIR%", t.TempDir())
	p := startStreamer(t, b, cfg)
	const n = 100
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "u%d", i%7), Value: fmt.Appendf(nil,
			`{"id":"e%d","features":{"user":"u%d","item":"i%d","hour":%d},"label":%d}`, i, i%7, i%11, i%24, 2*(i%2)-1)})
	}
	produce(t, b, "events", msgs)
	waitFor(t, 60*time.Second, "every event processed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") == n
	})
	for _, m := range []string{"ranks", "clicks", "ranks_rbf"} {
		if got := p.metric(t, "streamer_model_examples", `model="`+m+`"`); got != n {
			t.Errorf("model %s learned %v events, want %d", m, got, n)
		}
	}
	// A snapshot, and the models' first versions (snapshot.versions),
	// which the checkpoint writes after it: idle is after both.
	waitFor(t, 60*time.Second, "a snapshot and the models' versions", func() bool {
		if p.metric(t, "streamer_snapshots_total", "") < 1 {
			return false
		}
		text := p.metrics(t)
		for _, m := range []string{"ranks", "clicks", "ranks_rbf"} {
			if !strings.Contains(text, `streamer_model_saved_version{model="`+m+`"} `) {
				return false
			}
		}
		return true
	})
	prof := p.heapProfile(t) // collects garbage first (gc=1)
	if path := os.Getenv("E2E_HEAP_PROFILE"); path != "" {
		if err := os.WriteFile(path, prof, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const memLimit = 150e6
	inuse := p.metric(t, "go_memstats_heap_inuse_bytes", "")
	t.Logf("heap in use after a collection: %.1f MB", inuse/1e6)
	if inuse > memLimit {
		t.Errorf("heap in use %.1f MB, want < %.0f MB (the models' weights are 109 MB)", inuse/1e6, memLimit/1e6)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// heapProfile returns the process's heap profile, after a collection.
func (p *proc) heapProfile(t *testing.T) []byte {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /debug/pprof/heap: %d, %v", resp.StatusCode, err)
	}
	return b
}
