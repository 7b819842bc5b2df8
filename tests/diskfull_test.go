package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
)

// diskFullConfig: the key-scoped models of the crash tests, file snapshots
// every 200 ms in %DIR%, a 3 s shutdown_timeout.
const diskFullConfig = `
shutdown_timeout: 3s
kafka:
  brokers: [%BROKERS%]
  group: diskfull
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 200ms
  keep: 2
` + keyedCrashModels

// mountTmpfs mounts a tmpfs of size bytes on a new directory for the test,
// or skips the test where mounting is not permitted (not root, or no
// CAP_SYS_ADMIN in a container); the stream package's disk-full tests
// cover the same ground on a simulated volume everywhere.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): skipped", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file at path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// produceLabelled writes n labelled events keyed by the crash tests' 101
// keys, adding each key's count to counts.
func produceLabelled(t *testing.T, b *stream.Broker, seed uint64, n int, counts map[string]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		key := "user" + strconv.Itoa(rng.IntN(keyedCrashKeys))
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		label := -1
		if x[0]*x[1]+0.5*x[2] > 0.1 {
			label = 1
		}
		counts[key]++
		msgs[i] = kafka.Message{Key: []byte(key), Value: eventJSON(fmt.Sprintf("d%d-%d", seed, i), x, &label)}
	}
	produce(t, b, "events", msgs)
}

// groupOffsets returns the committed offsets of group on the 2 partitions
// of events.
func groupOffsets(t *testing.T, b *stream.Broker, group string) map[int]int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{"events": {0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics["events"] {
		if p.CommittedOffset >= 0 {
			out[p.Partition] = p.CommittedOffset
		}
	}
	return out
}

// newestSnapshotOffsets returns the offsets of the newest snapshot file in
// dir, nil when there is none.
func newestSnapshotOffsets(dir string) map[int]int64 {
	paths, _ := filepath.Glob(filepath.Join(dir, "snapshot-*.snap"))
	slices.Sort(paths)
	for i := len(paths) - 1; i >= 0; i-- {
		if snap, err := snapshot.ReadFile(paths[i]); err == nil {
			out := map[int]int64{}
			for _, o := range snap.Offsets {
				out[int(o.Partition)] = o.Offset
			}
			return out
		}
	}
	return nil
}

// TestDiskFullTmpfs: the real binary with snapshot.dir (snapshot files
// and key store) on a 32 MB tmpfs, which a file fills during the run. No
// panic; /readyz 503 says the snapshots fail for lack of space; the offsets
// committed never pass the newest snapshot's; a few log lines a second at
// most; SIGTERM exits within shutdown_timeout, non-zero, saying what was
// not saved; a restart on the full volume starts and says so too; once the
// file is removed, saving resumes by itself and every key's model has
// learned each of its events exactly once.
func TestDiskFullTmpfs(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	mnt := mountTmpfs(t, 32<<20)
	dir := filepath.Join(mnt, "state")
	useFastBinary(t)
	b := startBroker(t, 2)
	cfg := strings.ReplaceAll(diskFullConfig, "%DIR%", dir)
	counts := map[string]int64{}
	total := 0
	p := startStreamer(t, b, cfg)
	produceLabelled(t, b, 1, 3000, counts)
	total += 3000
	waitKeyedExactly(t, p, total, 60*time.Second)
	waitFor(t, 20*time.Second, "the events committed", func() bool {
		c := groupOffsets(t, b, "diskfull")
		return c[0]+c[1] == int64(total)
	})

	filler := filepath.Join(mnt, "filler")
	fill(t, filler)
	filled := time.Now()
	linesBefore := strings.Count(p.logs.String(), "\n")
	produceLabelled(t, b, 2, 2000, counts)
	total += 2000
	var body string
	waitFor(t, 20*time.Second, "/readyz 503 saying the snapshots fail", func() bool {
		var code int
		code, body = p.readyzBody()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "snapshots failing")
	})
	if !strings.Contains(body, "no space left on device") {
		t.Errorf("/readyz: %q, want it to say no space left on device", body)
	}
	for range 10 {
		committed, durable := groupOffsets(t, b, "diskfull"), newestSnapshotOffsets(dir)
		for part, off := range committed {
			if off > durable[part] {
				t.Fatalf("partition %d: offset %d committed, the newest snapshot has %d", part, off, durable[part])
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	lines := strings.Count(p.logs.String(), "\n") - linesBefore
	if secs := time.Since(filled).Seconds(); float64(lines) > 3*secs+5 {
		t.Errorf("%d log lines in %.1fs on a full disk, want a few a second at most", lines, secs)
	}
	t.Logf("full: /readyz %q; %d log lines in %v", strings.TrimSpace(body), lines, time.Since(filled).Round(100*time.Millisecond))

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		took := time.Since(start)
		t.Logf("SIGTERM on the full disk: exit after %v: %v", took.Round(10*time.Millisecond), err)
		if err == nil || !strings.Contains(p.logs.String(), "not saved") {
			t.Errorf("exit %v; want a non-zero exit saying what was not saved", err)
		}
		if took > 3*time.Second+time.Second {
			t.Errorf("exit %v after SIGTERM, shutdown_timeout 3s", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20s after SIGTERM with shutdown_timeout 3s")
	}

	// A restart on the full volume says why it cannot save: it runs and
	// its snapshots fail; or, when the stop came after a snapshot was
	// durable but before its keys reached the key store (the disk filled
	// in between), bringing the key store to the snapshot is a write, and
	// start-up waits for room, /readyz saying so.
	p = spawnStreamer(t, strings.Join(b.Addrs(), ","), cfg)
	waitFor(t, 30*time.Second, "/readyz saying the snapshots fail, or the restore waits for room, after the restart", func() bool {
		_, body = p.readyzBody()
		return strings.Contains(body, "no space left on device") &&
			(strings.Contains(body, "snapshots failing") || strings.Contains(body, "restoring the models' state"))
	})
	t.Logf("restarted on the full disk: /readyz %q", strings.TrimSpace(body))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitKeyedExactly(t, p, total, 60*time.Second)
	waitFor(t, 60*time.Second, "every event committed once the disk has room", func() bool {
		c := groupOffsets(t, b, "diskfull")
		return c[0]+c[1] == int64(total) && p.readyz(t) == http.StatusOK
	})
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after the disk had room again: %v", err)
	}
	got := keystoreStates(t, filepath.Join(dir, "keystore"))
	for _, model := range keyedCrashModelNames {
		var sum int64
		for key, m := range got[model] {
			sum += m.Examples()
			if m.Examples() != counts[key] {
				t.Errorf("%s: key %q: %d examples, want exactly %d", model, key, m.Examples(), counts[key])
			}
		}
		if sum != int64(total) || len(got[model]) != len(counts) {
			t.Errorf("%s: %d keys with %d examples, want %d keys with %d", model, len(got[model]), sum, len(counts), total)
		}
	}
}
