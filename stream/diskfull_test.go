package stream

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/faultfs"
	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/holder"
)

// The disk-full tests run the service in-process against a Kafka-protocol
// broker, its snapshot.dir (snapshot files and key store) on a simulated
// volume (internal/faultfs) that the test fills and then grows again.

const diskFullConfig = `
shutdown_timeout: 3s
kafka:
  brokers: [%BROKERS%]
  group: diskfull
  session_timeout: 6s
http:
  listen: "127.0.0.1:0"
snapshot:
  dir: %DIR%
  every: 100ms
  keep: 2
models:
  - name: key_rbf
    type: mam
    kernel: {type: rbf, gamma: 0.5, features: 32, seed: 3}
    features: {dim: 4}
    scope: key
    max_keys: 20
  - name: global
    type: mam
    kernel: {type: linear}
    features: {dim: 4}
`

// logLines is a slog handler's output, counted by line with its time.
type logLines struct {
	mu    sync.Mutex
	at    []time.Time
	lines []string
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, time.Now())
	l.lines = append(l.lines, string(b))
	return len(b), nil
}

// since returns the lines logged since t.
func (l *logLines) since(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.at, t, func(a, b time.Time) int { return a.Compare(b) })
	return slices.Clone(l.lines[i:])
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

// diskFullRig is a broker with the input, output and dead-letter topics (2
// partitions) and a volume for the service's snapshot.dir.
type diskFullRig struct {
	t    *testing.T
	b    *Broker
	vol  *faultfs.Volume // snapshot.dir's
	keys *faultfs.Volume // the key store's: vol unless the test gives it one of its own
	dir  string
	cfg  config.Config
	log  *logLines
	sent map[string]int64 // labelled events per key, produced so far
	n    int
	tune func(*Service) // if set, applied to each service before it runs
}

func newDiskFullRig(t *testing.T, size int64) *diskFullRig {
	t.Helper()
	b, err := StartBroker(0, TopicSpec{Name: "events", Partitions: 2}, TopicSpec{Name: "scores", Partitions: 2}, TopicSpec{Name: "events.dlq", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	vol := faultfs.NewVolume(size)
	r := &diskFullRig{t: t, b: b, vol: vol, keys: vol, dir: filepath.Join(t.TempDir(), "state"), log: &logLines{}, sent: map[string]int64{}}
	yaml := strings.NewReplacer("%BROKERS%", strings.Join(b.Addrs(), ","), "%DIR%", r.dir).Replace(diskFullConfig)
	path := filepath.Join(t.TempDir(), "streamer.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if r.cfg, err = config.Load(path, nil, testTypes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("DISKFULL_LOG") != "" {
			t.Logf("service log:\n%s", r.log.String())
		}
	})
	return r
}

// running is a service started by the rig.
type running struct {
	s      *Service
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned err
	err    error
}

// start starts the service (NewService and Run) on the volume.
func (r *diskFullRig) start() *running {
	r.t.Helper()
	log := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	s, err := NewService(ctx, r.cfg, testTypes, nil, log, WithStateFS(r.vol.SnapshotFS(), r.keys.PebbleFS(nil)))
	if err != nil {
		cancel()
		r.t.Fatalf("start-up: %v", err)
	}
	if r.tune != nil {
		r.tune(s)
	}
	run := &running{s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		run.err = s.Run(ctx)
		close(run.done)
	}()
	r.t.Cleanup(func() {
		cancel()
		select {
		case <-run.done:
		case <-time.After(20 * time.Second):
		}
	})
	return run
}

// stop cancels the service's context (SIGTERM) and returns how long Run
// took to return, and its error.
func (run *running) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	run.cancel()
	select {
	case <-run.done:
		return time.Since(start), run.err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of the stop")
		return 0, nil
	}
}

// produce writes n labelled events with 4 features, keyed by 150 keys.
func (r *diskFullRig) produce(n int) {
	r.t.Helper()
	rng := rand.New(rand.NewPCG(uint64(r.n), 5))
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		key := "user" + strconv.Itoa(rng.IntN(150))
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		label := -1
		if x[0]*x[1]+0.5*x[2] > 0.1 {
			label = 1
		}
		r.sent[key]++
		msgs[i] = kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, `{"id":"e-%d","features":[%g,%g,%g,%g],"label":%d}`, r.n+i, x[0], x[1], x[2], x[3], label)}
	}
	r.n += n
	w := &kafka.Writer{Addr: kafka.TCP(r.b.Addrs()...), Topic: "events", Balancer: &kafka.Murmur2Balancer{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		r.t.Fatal(err)
	}
}

// ends returns the input topic's end offsets.
func (r *diskFullRig) ends() map[int]int64 {
	r.t.Helper()
	out := map[int]int64{}
	for p := range 2 {
		out[p] = lastOffset(r.t, r.b.Addrs()[0], "events", p)
	}
	return out
}

// committed returns the group's committed offsets.
func (r *diskFullRig) committed(s *Service) map[int]int64 {
	r.t.Helper()
	c, err := s.sec.CommittedOffsets(context.Background(), r.cfg.Kafka, 10*time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// durable returns the offsets of the newest snapshot file (nil when there
// is none), read as a restart would.
func (r *diskFullRig) durable() map[int]int64 {
	r.t.Helper()
	paths, _ := filepath.Glob(filepath.Join(r.dir, "snapshot-*.snap"))
	slices.Sort(paths)
	for i := len(paths) - 1; i >= 0; i-- {
		snap, err := snapshot.ReadFile(paths[i])
		if err != nil {
			continue // pruned meanwhile
		}
		out := map[int]int64{}
		for _, o := range snap.Offsets {
			out[int(o.Partition)] = o.Offset
		}
		return out
	}
	return nil
}

// checkCommitted checks that the committed offsets are not past the newest
// durable snapshot's.
func (r *diskFullRig) checkCommitted(s *Service) {
	r.t.Helper()
	committed, durable := r.committed(s), r.durable()
	for p, off := range committed {
		if off > durable[p] {
			r.t.Fatalf("partition %d: offset %d committed, the newest durable snapshot has %d (%v, %v)", p, off, durable[p], committed, durable)
		}
	}
}

// waitFor polls cond until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// caughtUp reports whether every event produced is in the newest snapshot
// and committed.
func (r *diskFullRig) caughtUp(s *Service) bool {
	ends, committed, durable := r.ends(), r.committed(s), r.durable()
	for p, end := range ends {
		if committed[p] != end || durable[p] != end {
			return false
		}
	}
	return true
}

// tempFiles lists the snapshot temp files in the directory.
func (r *diskFullRig) tempFiles() []string {
	m, _ := filepath.Glob(filepath.Join(r.dir, ".tmp-snapshot-*"))
	return m
}

// checkExact restores the state on disk into a fresh engine and checks
// that every key's model learned exactly the labelled events produced for
// it (the service has stopped).
func (r *diskFullRig) checkExact() {
	t := r.t
	t.Helper()
	store, err := snapshot.OpenFileStore(r.dir, r.cfg.Snapshot.Keep)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := store.LoadLatest()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keystore.Open(filepath.Join(r.dir, "keystore"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	models, err := engine.BuildModels(r.cfg, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	ecfg := engine.ConfigFrom(r.cfg)
	ecfg.KeyStore = keys
	e, err := engine.New(ecfg, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sh, err := e.NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sh.Restore(snap.Models, nil); err != nil {
		t.Fatal(err)
	}
	var total int64
	for key, want := range r.sent {
		m, err := sh.Holder(0).(*holder.Keyed).Key([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Examples(); got != want {
			t.Errorf("key %s: %d examples, %d labelled events", key, got, want)
		}
		total += want
	}
	if got := sh.Holder(1).Instance().Examples(); got != total {
		t.Errorf("global model: %d examples, %d labelled events", got, total)
	}
}

// TestDiskFull fills the volume of snapshot.dir during the run, for a
// 4 MB and a 64 MB volume: no panic; checkpoints fail, offsets are not
// committed past the newest durable snapshot, /readyz says why and since
// when, the partly written snapshot files are removed, the log has a few
// lines a second at most; a stop (SIGTERM) then returns at once saying
// what was not saved; a restart on the full volume starts, and saves again
// by itself once the volume has room, learning every event exactly once.
func TestDiskFull(t *testing.T) {
	for _, size := range []int64{4 << 20, 64 << 20} {
		t.Run(fmt.Sprintf("%dMB", size>>20), func(t *testing.T) {
			r := newDiskFullRig(t, size)
			run := r.start()
			r.produce(3000)
			waitFor(t, 30*time.Second, "the first events saved and committed, and ready", func() bool {
				return r.caughtUp(run.s) && run.s.NotReady() == ""
			})
			t.Logf("%d MB volume: %d bytes used (nothing preallocated), %d at most", size>>20, r.vol.Used(), r.vol.Peak())
			if r.vol.Peak() > min(size, 16<<20) {
				t.Errorf("the state took %d bytes at most", r.vol.Peak())
			}

			// Other files take the whole volume: no write fits, also once
			// the state's own clean-up (old snapshots, the key store's
			// obsolete files) frees space. (Half of what was used, as
			// before, let a checkpoint through now and then once a clean-up
			// had freed more than that.)
			r.vol.SetSize(0)
			full := time.Now()
			before := r.committed(run.s)
			r.produce(2000)
			var reason string
			waitFor(t, 20*time.Second, "/readyz saying the snapshots fail", func() bool {
				reason = run.s.NotReady()
				return strings.Contains(reason, "snapshots failing")
			})
			if !strings.Contains(reason, "no space left on device") || !strings.Contains(reason, "last good checkpoint") {
				t.Errorf("/readyz: %q, want it to say no space left on device, and the last good checkpoint's age", reason)
			}
			for range 10 {
				r.checkCommitted(run.s)
				time.Sleep(150 * time.Millisecond)
			}
			if got := r.committed(run.s); !maps.Equal(got, before) {
				t.Errorf("offsets committed while every snapshot failed: %v, were %v", got, before)
			}
			waitFor(t, 2*time.Second, "no snapshot temp file left", func() bool { return len(r.tempFiles()) == 0 })
			lines := r.log.since(full)
			if secs := time.Since(full).Seconds(); float64(len(lines)) > 3*secs+5 {
				t.Errorf("%d log lines in %.1fs on a full disk, want a few a second at most:\n%s", len(lines), secs, strings.Join(lines, ""))
			}
			t.Logf("full for %v: /readyz %q; %d log lines", time.Since(full).Round(100*time.Millisecond), reason, len(lines))

			// A stop on the full disk: at once, saying what was not saved.
			took, err := run.stop(t)
			t.Logf("stop on a full disk: %v after %v", err, took.Round(10*time.Millisecond))
			if err == nil || !strings.Contains(err.Error(), "not saved") || !strings.Contains(err.Error(), "no space left on device") {
				t.Errorf("stop on a full disk: %v, want an error saying what was not saved and why", err)
			}
			if took > r.cfg.ShutdownTimeout {
				t.Errorf("stop took %v, shutdown_timeout %v", took, r.cfg.ShutdownTimeout)
			}
			if len(r.tempFiles()) != 0 {
				t.Errorf("snapshot temp files left: %v", r.tempFiles())
			}

			// A restart on the full volume starts, and says why it cannot
			// save.
			// (At once when the key store's open cannot write and it opens
			// read-only; otherwise at the first checkpoint.)
			run = r.start()
			waitFor(t, 10*time.Second, "/readyz saying the disk is full after a start on it", func() bool {
				reason := run.s.NotReady()
				return strings.Contains(reason, "failing") && strings.Contains(reason, "no space left on device")
			})
			waitFor(t, 20*time.Second, "/readyz saying the snapshots fail after the restart", func() bool {
				return strings.Contains(run.s.NotReady(), "snapshots failing")
			})
			r.checkCommitted(run.s)

			// Room again: saving resumes by itself.
			r.vol.SetSize(size + 64<<20)
			waitFor(t, 40*time.Second, "every event saved and committed once the volume has room", func() bool { return r.caughtUp(run.s) })
			waitFor(t, 5*time.Second, "ready", func() bool { return run.s.NotReady() == "" })
			if !strings.Contains(r.log.String(), "checkpoint: saving again") {
				t.Error("no line saying that saving resumed")
			}
			if _, err := run.stop(t); err != nil {
				t.Fatalf("stop: %v", err)
			}
			r.checkExact()
		})
	}
}

// TestStopOnHungDisk: a stop while the disk of snapshot.dir does not
// answer (every write waits) returns within shutdown_timeout, with an
// error saying that the final checkpoint did not finish and what it did
// not save.
func TestStopOnHungDisk(t *testing.T) {
	r := newDiskFullRig(t, 64<<20)
	run := r.start()
	r.produce(1000)
	waitFor(t, 30*time.Second, "the first events saved and committed", func() bool { return r.caughtUp(run.s) })
	r.vol.Hang()
	// Run returns while a checkpoint is stuck in a write (that is the
	// point); released, that write goes on in the background: let it
	// finish before the test's directories are removed (cleanups run last
	// registered first, so this one before t.TempDir's).
	t.Cleanup(func() {
		r.vol.Release()
		settle(t, r.dir)
	})
	r.produce(500)
	time.Sleep(500 * time.Millisecond) // a checkpoint is stuck in a write
	took, err := run.stop(t)
	t.Logf("stop on a hung disk: %v after %v", err, took.Round(10*time.Millisecond))
	if took > r.cfg.ShutdownTimeout+time.Second {
		t.Errorf("stop took %v, shutdown_timeout %v", took, r.cfg.ShutdownTimeout)
	}
	if err == nil || !strings.Contains(err.Error(), "did not finish") || !strings.Contains(err.Error(), "not saved") {
		t.Errorf("stop on a hung disk: %v, want an error saying the final checkpoint did not finish", err)
	}
}

// TestKeyStoreFull: the key store's disk is full, the snapshot files'
// is not: the snapshots stay durable and the offsets are committed with
// them, /readyz says the key store fails, the keys not written are tried
// again with backoff also while no event comes, and go in once there is
// room; every key learns each of its events exactly once.
func TestKeyStoreFull(t *testing.T) {
	r := newDiskFullRig(t, 64<<20)
	r.keys = faultfs.NewVolume(64 << 20)
	run := r.start()
	r.produce(2000)
	waitFor(t, 30*time.Second, "the first events saved and committed, and ready", func() bool {
		return r.caughtUp(run.s) && run.s.NotReady() == ""
	})
	r.keys.SetSize(0) // other files took it all: no clean-up makes room
	r.produce(2000)
	var reason string
	waitFor(t, 20*time.Second, "/readyz saying the key store fails", func() bool {
		reason = run.s.NotReady()
		return strings.Contains(reason, "key store failing") && strings.Contains(reason, "no space left on device")
	})
	waitFor(t, 20*time.Second, "the events in a durable snapshot and committed", func() bool { return r.caughtUp(run.s) })
	r.checkCommitted(run.s)
	time.Sleep(time.Second) // no event comes: the keys are retried all the same
	if reason = run.s.NotReady(); !strings.Contains(reason, "key store failing") {
		t.Fatalf("/readyz %q, want the key store still failing", reason)
	}
	t.Logf("/readyz: %q", reason)
	r.keys.SetSize(256 << 20)
	waitFor(t, 40*time.Second, "ready once the key store's disk has room", func() bool { return run.s.NotReady() == "" })
	if _, err := run.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	r.checkExact()
}

// settle waits until dir's tree has not changed for half a second (at most
// 15 s): what a write released after the service stopped still does.
func settle(t *testing.T, dir string) {
	list := func() string {
		var b strings.Builder
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil {
				if fi, err := d.Info(); err == nil {
					fmt.Fprintf(&b, "%s %d\n", p, fi.Size())
				}
			}
			return nil
		})
		return b.String()
	}
	last, since := list(), time.Now()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if now := list(); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return
		}
	}
	t.Logf("%s still changing 15 s after the release", dir)
}
