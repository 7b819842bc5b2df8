package keystore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamer/streamer/internal/faultfs"
)

// lineCounter is a slog handler that counts the lines logged (and keeps
// them).
type lineCounter struct {
	mu    sync.Mutex
	lines []string
}

func (c *lineCounter) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (c *lineCounter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, string(b))
	return len(b), nil
}

func (c *lineCounter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lines)
}

func (c *lineCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "")
}

// randomStates returns n incompressible states of size bytes.
func randomStates(rng *rand.Rand, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, (size+7)/8*8)
		for j := 0; j < size; j += 8 {
			binary.LittleEndian.PutUint64(out[i][j:], rng.Uint64())
		}
		out[i] = out[i][:size]
	}
	return out
}

func userKeys(lo, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "user-%08d", lo+i)
	}
	return out
}

// TestSpaceNeeded measures what the store takes on disk: nothing
// preallocated when it opens, and, for 10 000 keys of 200 bytes rewritten
// 2 000 at a time in 30 checkpoints, at most 7 times the states' bytes at
// any moment (the states, the last checkpoint's undo record, overwritten
// states not yet compacted away, a compaction's output before its inputs
// are deleted; about 2 times at rest). The figures are in docs/operations.md ("Disk space").
func TestSpaceNeeded(t *testing.T) {
	v := faultfs.NewVolume(1 << 40)
	db, err := Open(t.TempDir(), nil, WithFS(v.PebbleFS(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opened := v.Used()
	tb := db.Table("0", "recs")
	keys, size, per, n := 10_000, 200, 2_000, uint64(30)
	if raceEnabled { // a fifth of it: the same shape, in a few seconds
		keys, per, n = 2_000, 400, 10
	}
	rng := rand.New(rand.NewPCG(1, 2))
	mustApply(t, tb, 1, nil, userKeys(0, keys), randomStates(rng, keys, size))
	for seq := uint64(2); seq <= n; seq++ {
		ks := make([][]byte, per)
		for i := range ks {
			ks[i] = fmt.Appendf(nil, "user-%08d", rng.IntN(keys))
		}
		mustApply(t, tb, seq, nil, ks, randomStates(rng, per, size))
	}
	data := int64(keys) * int64(size)
	t.Logf("at open: %d bytes; %d keys of %d bytes (%d bytes): %d bytes used now, %d at most (%.2f× the states; %d bytes a key)",
		opened, keys, size, data, v.Used(), v.Peak(), float64(v.Peak())/float64(data), v.Peak()/int64(keys))
	if opened > 64<<10 {
		t.Errorf("the store takes %d bytes when opened, want at most 64 KiB (nothing preallocated)", opened)
	}
	if v.Peak() > 7*data { // measured 3.7–5.5×, as compactions happen to run
		t.Errorf("the store took %d bytes for %d bytes of states, want at most 7×", v.Peak(), data)
	}
}

// TestDiskFull fills a small volume: the Apply that does not fit fails with
// ENOSPC, without a panic, and leaves the table exactly at the previous
// checkpoint, in memory and on disk; Pebble's retries are not logged more
// than a few times; once the volume grows, the next Apply succeeds without
// a reopen by the caller.
func TestDiskFull(t *testing.T) {
	for _, size := range []int64{512 << 10, 4 << 20} {
		t.Run(fmt.Sprint(size>>10, "KiB"), func(t *testing.T) {
			v := faultfs.NewVolume(size)
			dir := t.TempDir()
			var lines lineCounter
			db, err := Open(dir, lines.logger(), WithFS(v.PebbleFS(nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { db.Close() }() // the last one opened
			tb := db.Table("0", "recs")
			rng := rand.New(rand.NewPCG(3, 4))
			const per, stateSize = 200, 500
			// A reader meanwhile: the first Apply's keys read back the
			// same through every failed write and reopen.
			first := randomStates(rng, per, stateSize)
			mustApply(t, tb, 1, []byte{1}, userKeys(per, per), first)
			stop := make(chan struct{})
			read := make(chan error, 1)
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						read <- nil
						return
					default:
					}
					v, found, err := tb.Get(userKeys(per+i%per, 1)[0], nil)
					if err == nil && (!found || !bytes.Equal(v, first[i%per])) {
						err = fmt.Errorf("key %d: found %v, a state of %d bytes, not the one written", per+i%per, found, len(v))
					}
					if err == nil {
						_, err = tb.Marker()
					}
					if err != nil {
						read <- err
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
			}()
			var last tableState
			var seq uint64
			var failed error
			for seq = 2; seq < 1000; seq++ {
				keys := userKeys(int(seq)*per, per)
				if _, err := tb.Apply(seq, []byte{byte(seq)}, keys, randomStates(rng, per, stateSize)); err != nil {
					failed = err
					break
				}
				last = stateOf(t, tb)
			}
			if !errors.Is(failed, syscall.ENOSPC) || !IsNoSpace(failed) {
				t.Fatalf("Apply %d on a full volume: %v, want ENOSPC", seq, failed)
			}
			t.Logf("%d KiB: Apply %d failed: %v", size>>10, seq, failed)
			checkState(t, tb, last)
			// With the volume full to the last block (other files took the
			// rest), every write fails the same way, and changes nothing.
			v.SetSize(v.Used() / 2)
			for range 3 {
				if _, err := tb.Apply(seq, nil, userKeys(0, per), randomStates(rng, per, stateSize)); !IsNoSpace(err) {
					t.Fatalf("Apply on a full volume: %v, want ENOSPC", err)
				}
				if _, err := tb.Undo(); !IsNoSpace(err) {
					t.Fatalf("Undo on a full volume: %v, want ENOSPC", err)
				}
			}
			checkState(t, tb, last)
			close(stop)
			if err := <-read; err != nil {
				t.Fatalf("read while the volume was full: %v", err)
			}
			if n := lines.n(); n > 10 {
				t.Errorf("%d log lines while the volume was full, want a few:\n%s", n, lines.String())
			}

			v.SetSize(size + 8<<20) // space freed
			m := mustApply(t, tb, seq, []byte("after"), bs("a"), bs("A"))
			if m.Seq != seq || m.Keys != last.m.Keys+1 {
				t.Fatalf("Apply once the volume grew: %+v, the table had %+v", m, last.m)
			}
			want := stateOf(t, tb)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, nil, WithFS(v.PebbleFS(nil)))
			if err != nil {
				t.Fatal(err)
			}
			checkState(t, db.Table("0", "recs"), want)
			if u := mustUndo(t, db.Table("0", "recs")); !markersEqual(u, last.m) {
				t.Fatalf("Undo of the Apply after the disk full: %+v, want %+v", u, last.m)
			}
		})
	}
}

// TestOpenFullDisk: a store on a volume with no room left opens read-only
// (Pebble writes files when it opens one for writing): reads work, writes
// fail with ENOSPC and succeed once there is room.
func TestOpenFullDisk(t *testing.T) {
	v := faultfs.NewVolume(1 << 30)
	dir := t.TempDir()
	db, err := Open(dir, nil, WithFS(v.PebbleFS(nil)))
	if err != nil {
		t.Fatal(err)
	}
	tb := db.Table("", "m")
	mustApply(t, tb, 1, []byte("x"), bs("a", "b"), bs("A", "B"))
	want := stateOf(t, tb)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	v.SetSize(v.Used() / 2) // full: other files took the rest
	var lines lineCounter
	db, err = Open(dir, lines.logger(), WithFS(v.PebbleFS(nil)))
	if err != nil {
		t.Fatalf("Open on a full volume: %v", err)
	}
	defer db.Close()
	if !strings.Contains(lines.String(), "read-only") || !strings.Contains(lines.String(), "no space left on device") {
		t.Errorf("Open on a full volume logged:\n%s", lines.String())
	}
	tb = db.Table("", "m")
	checkState(t, tb, want)
	if _, err := tb.Apply(2, nil, bs("c"), bs("C")); !IsNoSpace(err) {
		t.Fatalf("Apply on a full volume: %v, want ENOSPC", err)
	}
	checkState(t, tb, want)
	v.SetSize(1 << 30)
	mustApply(t, tb, 2, nil, bs("c"), bs("C"))
	checkGet(t, tb, "c", "C", true)

	// A new store on a full volume is an error, not a panic.
	v.SetSize(v.Used() / 2)
	if _, err := Open(t.TempDir(), nil, WithFS(v.PebbleFS(nil))); !IsNoSpace(err) {
		t.Fatalf("new store on a full volume: %v, want ENOSPC", err)
	}
}

// TestFatalfIOError: Pebble's Fatalf of an I/O error (a MANIFEST write that
// failed) marks the store for a reopen and returns; any other panics.
func TestFatalfIOError(t *testing.T) {
	var lines lineCounter
	db := &DB{}
	l := storeLogger{pebbleLogger: pebbleLogger{lines.logger()}, db: db, limit: newLogLimit(logEvery)}
	ioErr := fmt.Errorf("MANIFEST write failed: %w", &fs.PathError{Op: "write", Path: "MANIFEST-000001", Err: syscall.ENOSPC})
	for range 100 {
		l.Fatalf("%s", ioErr)
	}
	if !db.h.broken.Load() {
		t.Error("a Fatalf of an I/O error did not mark the store broken")
	}
	if n := lines.n(); n != 1 || !strings.Contains(lines.String(), "no space left on device") {
		t.Errorf("100 Fatalf of an I/O error logged %d lines, want 1:\n%s", n, lines.String())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Fatalf of an invariant violation returned")
		}
	}()
	l.Fatalf("L%d->L%d: %s already being compacted", 0, 6, "000012")
}

// TestLogLimit: a line of a kind at most once per interval, the next one
// counting those held back.
func TestLogLimit(t *testing.T) {
	var buf bytes.Buffer
	l := storeLogger{pebbleLogger: pebbleLogger{slog.New(slog.NewTextHandler(&buf, nil))}, limit: newLogLimit(logEvery)}
	for i := range 500 {
		l.Errorf("background error: %s", fmt.Sprint("000", i, ".sst: no space left on device"))
		l.Errorf("other: %d", i)
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("1000 errors of two kinds logged %d lines, want 2:\n%s", n, buf.String())
	}
	l.limit.kinds["background error: %s"].at = l.limit.kinds["background error: %s"].at.Add(-logEvery)
	l.Errorf("background error: %s", "again")
	if !strings.Contains(buf.String(), "suppressed=499") {
		t.Fatalf("the line after 499 held back does not count them:\n%s", buf.String())
	}
}
