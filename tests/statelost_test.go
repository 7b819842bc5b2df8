package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const stateLostConfig = `
shutdown_timeout: 5s
kafka:
  brokers: [%BROKERS%]
  group: statelost
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 300ms
models:
  - name: mam
    type: mam
    kernel: {type: linear}
    features: {dim: 2}
`

// TestEmptyStartRefused: every snapshot file is truncated while the
// consumer group has committed offsets. Start-up does not carry on with
// empty models at those offsets (losing what was learned without a word):
// it moves the files aside, exits 1 naming the choices, and starts empty
// only with --allow-empty-state, after which snapshots go on.
func TestEmptyStartRefused(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := startBroker(t, 2)
	dir := t.TempDir()
	cfg := strings.ReplaceAll(stateLostConfig, "%DIR%", dir)
	p := startStreamer(t, b, cfg)
	bigProduce(t, b, "events", 1<<20, validEvents(0, 2000))
	waitFor(t, 30*time.Second, "events learned, snapshotted and committed", func() bool {
		return p.metric(t, "streamer_model_examples", `model="mam"`) == 2000 && p.metric(t, "streamer_offset_commits_total", "") > 0
	})
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(files) == 0 {
		t.Fatal("no snapshot files")
	}
	for _, f := range files {
		if err := os.Truncate(f, 10); err != nil {
			t.Fatal(err)
		}
	}

	p = spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
	select {
	case err := <-p.done:
		logs := p.logs.String()
		if err == nil || !strings.Contains(logs, "--allow-empty-state") || !strings.Contains(logs, `consumer group "statelost" has committed offsets`) {
			t.Fatalf("exit %v; want exit 1 naming --allow-empty-state and the group's committed offsets:\n%s", err, logs)
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("still running 40s after start with every snapshot truncated:\n%s", p.logs.String())
	}
	if moved, _ := filepath.Glob(filepath.Join(dir, "*.corrupt")); len(moved) != len(files) {
		t.Fatalf("%d files moved aside, want %d", len(moved), len(files))
	}

	p = startStreamerArgs(t, b, cfg, "--allow-empty-state")
	bigProduce(t, b, "events", 1<<20, validEvents(2000, 500))
	waitFor(t, 30*time.Second, "learning and snapshots go on after the accepted loss", func() bool {
		return p.metric(t, "streamer_model_examples", `model="mam"`) == 500 && p.metric(t, "streamer_snapshots_total", "") > 0
	})
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestEmptyPartitionHeld: in partition scope, the changelog topic lost
// (deleted) while the group has committed offsets: no partition starts
// empty silently; each is held, not consumed, and /readyz says why; with
// --allow-empty-state they start empty and are consumed.
func TestEmptyPartitionHeld(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := startBroker(t, 2)
	cfg := strings.ReplaceAll(stateLostConfig, "  dir: %DIR%\n", "  changelog_topic: statelost.state\n  scope: partition\n")
	p := startStreamer(t, b, cfg)
	bigProduce(t, b, "events", 1<<20, validEvents(0, 2000))
	waitFor(t, 30*time.Second, "events learned", func() bool {
		return p.metric(t, "streamer_events_learned_total", `model="mam"`) == 2000
	})

	if err := p.stop(t); err != nil { // the final checkpoint commits every partition
		t.Fatal(err)
	}
	if err := b.DeleteTopic(context.Background(), "statelost.state"); err != nil {
		t.Fatal(err)
	}
	p = spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
	var body string
	waitFor(t, 30*time.Second, "/readyz 503 naming the held partitions", func() bool {
		var code int
		code, body = p.readyzBody()
		return code == 503 && strings.Contains(body, "partition 0 has a committed offset") && strings.Contains(body, "partition 1 has a committed offset")
	})
	bigProduce(t, b, "events", 1<<20, validEvents(2000, 100))
	time.Sleep(2 * time.Second)
	if n := p.metric(t, "streamer_events_consumed_total", ""); n != 0 {
		t.Fatalf("%v events consumed from held partitions", n)
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	p = startStreamerArgs(t, b, cfg, "--allow-empty-state")
	waitFor(t, 30*time.Second, "the held events consumed after the accepted loss", func() bool {
		return p.metric(t, "streamer_events_learned_total", `model="mam"`) == 100
	})
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
}
