package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

const crashConfig = `
kafka:
  brokers: [%BROKERS%]
  group: %GROUP%
  output_topic: %OUTPUT%
  session_timeout: 1s
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 300ms
  every_events: 4000
  keep: 3
  changelog_topic: %CHANGELOG%
models:
  - name: mam_rbf
    type: mam
    kernel: {type: rbf, gamma: 0.5, features: 512, seed: 3}
    features: {dim: 4}
    balance: true
  - name: mam_linear
    type: mam
    kernel: {type: linear}
    features: {dim: 4}
    balance: false
`

func crashYAML(group, output, dir, changelog string) string {
	r := strings.NewReplacer("%GROUP%", group, "%OUTPUT%", output, "%DIR%", dir, "%CHANGELOG%", changelog)
	return r.Replace(crashConfig)
}

func crashBroker(t *testing.T) *stream.Broker {
	t.Helper()
	b, err := stream.StartBrokerWith(stream.BrokerConfig{
		MinSessionTimeout: 500 * time.Millisecond,
		Topics: []stream.TopicSpec{
			{Name: "events", Partitions: 3}, {Name: "scores", Partitions: 3}, {Name: "scores.ref", Partitions: 3},
			{Name: "events.dlq", Partitions: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// produceStream writes n labelled events (ids c-0 … c-n-1) with 4 features.
func produceStream(t *testing.T, b *stream.Broker, n int) {
	t.Helper()
	produceStreamFrom(t, b, 0, n)
}

// produceStreamFrom writes events c-from … c-(from+n-1).
func produceStreamFrom(t *testing.T, b *stream.Broker, from, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(42, uint64(43+from)))
	msgs := make([]kafka.Message, 0, n)
	for i := from; i < from+n; i++ {
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		label := -1
		if x[0]*x[1]+0.5*x[2] > 0.1 {
			label = 1
		}
		msgs = append(msgs, kafka.Message{Key: []byte("u" + strconv.Itoa(i%101)), Value: eventJSON("c-"+strconv.Itoa(i), x, &label)})
	}
	produce(t, b, "events", msgs)
}

// finalState loads the newest snapshot in dir and restores its models.
func finalState(t *testing.T, dir string) (*snapshot.Snapshot, map[string]online.Model) {
	t.Helper()
	fs, err := snapshot.OpenFileStore(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := fs.LoadLatest()
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]online.Model{}
	for _, m := range snap.Models {
		if m.Type == engine.CalibrationStateType {
			continue // a model's calibration window, not a model
		}
		mod, err := testTypes.Restore(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		models[m.Name] = mod
	}
	return snap, models
}

// waitLearned waits until every model has learned n examples.
func waitLearned(t *testing.T, p *proc, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("models to learn %d examples", n), func() bool {
		for _, m := range []string{"mam_rbf", "mam_linear"} {
			if p.metric(t, "streamer_model_examples", `model="`+m+`"`) < float64(n) {
				return false
			}
		}
		return true
	})
}

// TestCrashRecovery: the real binary is SIGKILLed at five random moments
// (one of them inside a snapshot write, one after the newest snapshot was
// corrupted on disk) while it works through 100 k labelled events (200 k
// with -tags e2efull). After the
// stream ends: every event has a published score; every model has learned
// each event exactly once; and the final state equals that of an
// uninterrupted run over the same stream.
func TestCrashRecovery(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	const n, kills = 100_000 * e2eScale, 5
	useFastBinary(t)
	b := crashBroker(t)

	// The crashing run. The stream arrives in one chunk per kill, so that
	// every run has events to process and snapshot whatever the machine's
	// speed (a fast run could otherwise finish the stream before a kill
	// that waits for a snapshot write).
	dir := t.TempDir()
	cfg := crashYAML("crashy", "scores", dir, `""`)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var corrupted string
	for kill := 1; kill <= kills; kill++ {
		produceStreamFrom(t, b, (kill-1)*n/kills, n/kills)
		var p *proc
		switch kill {
		case 3:
			// Kill inside a snapshot write: the store pauses between
			// writing the temporary file and renaming it.
			p = startStreamerArgs(t, b, cfg, "--fault-snapshot-pause=2s")
			waitFor(t, 30*time.Second, "a paused snapshot write", func() bool {
				return strings.Contains(p.logs.String(), "fault: pausing snapshot write")
			})
		default:
			p = startStreamer(t, b, cfg)
			if kill == 5 {
				// The newest snapshot was corrupted before this start.
				if !strings.Contains(p.logs.String(), "corrupt snapshot skipped") {
					t.Fatalf("start-up after corrupting %s did not log the fallback", corrupted)
				}
				if v := p.metric(t, "streamer_snapshot_corrupt_total", ""); v != 1 {
					t.Fatalf("streamer_snapshot_corrupt_total = %v, want 1", v)
				}
			}
			// Kill at a random moment after this run made progress (a
			// snapshot of its own), however slow the machine is.
			waitFor(t, 60*time.Second, "a snapshot by this run", func() bool {
				return p.metric(t, "streamer_snapshots_total", "") >= 1 ||
					p.metric(t, "streamer_model_examples", `model="mam_linear"`) >= n
			})
			time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		if kill == 4 {
			corrupted = corruptNewest(t, dir)
		}
		t.Logf("kill %d: SIGKILL after %d examples in the newest snapshot", kill, examplesIn(t, dir))
	}
	p := startStreamer(t, b, cfg)
	waitLearned(t, p, n, 120*time.Second)
	if err := p.stop(t); err != nil {
		t.Fatalf("final run exit: %v", err)
	}
	if corrupted == "" {
		t.Fatal("no snapshot was corrupted")
	}

	// The reference: one uninterrupted run over the same stream.
	refDir := t.TempDir()
	ref := startStreamer(t, b, crashYAML("ref", "scores.ref", refDir, `""`))
	waitLearned(t, ref, n, 120*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference run exit: %v", err)
	}
	_, want := finalState(t, refDir)

	// Every event id has at least one published score per model.
	seen := map[string]map[string]bool{"mam_rbf": {}, "mam_linear": {}}
	c := newConsumer(t, b, "scores")
	total := highWater(t, b, "scores")
	for _, m := range c.read(t, int(total), 120*time.Second) {
		var rec struct{ ID, Model string }
		if err := json.Unmarshal(m.Value, &rec); err != nil {
			t.Fatal(err)
		}
		seen[rec.Model][rec.ID] = true
	}
	for model, ids := range seen {
		if len(ids) != n {
			t.Errorf("%s: %d distinct event ids scored, want %d", model, len(ids), n)
		}
	}
	t.Logf("%d score records for %d events × 2 models (%d duplicates from replays)", total, n, total-2*n)

	_, got := finalState(t, dir)
	for name, w := range want {
		g := got[name]
		if g == nil {
			t.Fatalf("model %s missing from the final snapshot", name)
		}
		if g.Examples() != n || w.Examples() != n {
			t.Errorf("%s: examples %d (reference %d), want exactly %d", name, g.Examples(), w.Examples(), n)
		}
		if err := online.StateClose(g, w, 1e-9); err != nil {
			t.Errorf("%s: final state differs from the uninterrupted run: %v", name, err)
		}
	}
}

// corruptNewest flips a byte in the middle of the newest snapshot file.
func corruptNewest(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(files) < 2 {
		t.Fatalf("want at least 2 snapshots to corrupt the newest, have %d", len(files))
	}
	newest := files[len(files)-1]
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x5a
	if err := os.WriteFile(newest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return newest
}

func examplesIn(t *testing.T, dir string) int64 {
	t.Helper()
	fs, err := snapshot.OpenFileStore(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := fs.LoadLatest()
	if err != nil {
		return 0
	}
	m, err := testTypes.Restore(snap.Models[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	return m.Examples()
}

func highWater(t *testing.T, b *stream.Broker, topic string) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	req := map[string][]kafka.OffsetRequest{}
	for _, p := range md.Topics[0].Partitions {
		req[topic] = append(req[topic], kafka.LastOffsetOf(p.ID))
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, po := range resp.Topics[topic] {
		sum += po.LastOffset
	}
	return sum
}
