package keystore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// corruptSST writes n random bytes at offset off of the store's one table
// file (fillStore compacts it into one), keeping its size, and returns its
// path.
func corruptSST(t *testing.T, dir string, off func(size int) int, n int) string {
	t.Helper()
	path := sstOf(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	at := off(len(b))
	for i := at; i < at+n && i < len(b); i++ {
		b[i] = byte(rng.UintN(256))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sstOf returns the path of the store's one table file.
func sstOf(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(files) != 1 {
		t.Fatalf("table files %v (%v), want one", files, err)
	}
	return files[0]
}

func fillKey(i int) []byte { return fmt.Appendf(nil, "user-%08d", i) }

// fillState is fillStore's state of key i.
func fillState(i int) []byte { return fmt.Appendf(bytes.Repeat([]byte{'s'}, 90), "%010d", i) }

// TestCorruptBlock: 4 KB of random bytes inside the data of a store's table
// file. Reading a key of the damaged block fails with ErrCorrupt (and
// pebble.ErrCorruption), every time, and never panics; every other key
// reads its state; Apply of other keys, new ones included, works; the store
// closes and opens again (Pebble's default reaction, Fatalf from inside the
// read, left file-cache references held and made Close panic).
func TestCorruptBlock(t *testing.T) {
	const n = 5000
	dir := t.TempDir()
	fillStore(t, dir, n)
	path := corruptSST(t, dir, func(size int) int { return size / 3 }, 4096)

	var logs bytes.Buffer
	db, err := Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tb := db.Table("0", "recs")
	if m, err := tb.Marker(); err != nil || m.Keys != n {
		t.Fatalf("Marker = %+v, %v", m, err)
	}
	var bad []int
	for range 2 { // a second read of a damaged key fails again
		bad = bad[:0]
		for i := range n {
			v, found, err := tb.Get(fillKey(i), nil)
			switch {
			case err != nil:
				if !errors.Is(err, ErrCorrupt) || !errors.Is(err, pebble.ErrCorruption) {
					t.Fatalf("Get %d: %v, want ErrCorrupt and pebble.ErrCorruption", i, err)
				}
				ce, ok := errors.AsType[*CorruptError](err)
				if !ok || ce.Path != path || !strings.Contains(err.Error(), "checksum mismatch") {
					t.Fatalf("Get %d: %v, want a *CorruptError naming %s", i, err, path)
				}
				bad = append(bad, i)
			case !found || !bytes.Equal(v, fillState(i)):
				t.Fatalf("Get %d = %q, %v", i, v, found)
			}
		}
	}
	if len(bad) == 0 || len(bad) > n/10 {
		t.Fatalf("%d keys unreadable, want those of a block or two", len(bad))
	}
	if c := strings.Count(logs.String(), "corrupt data in a key store file"); c != 1 {
		t.Errorf("the damaged file was logged %d times, want once:\n%s", c, logs.String())
	}
	if db.Corruptions() < int64(2*len(bad)) {
		t.Errorf("Corruptions = %d, want at least %d", db.Corruptions(), 2*len(bad))
	}
	if err := tb.Scan(func(key, state []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Scan: %v, want ErrCorrupt", err)
	}
	// A key of the damaged block cannot be overwritten through Apply (its
	// replaced state is unknown), and the failed Apply changes nothing.
	if _, err := tb.Apply(2, nil, [][]byte{fillKey(bad[0])}, bs("x")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Apply of a damaged key: %v, want ErrCorrupt", err)
	}
	// Keys elsewhere, and new keys that Get finds absent (the bloom
	// filters answer for them, as they do in Apply), are written.
	keys, states := [][]byte{fillKey(0), fillKey(n - 1)}, bs("first", "last")
	for i := range 100 {
		k := fmt.Appendf(nil, "user-%08d-new", bad[0]+i-50)
		if _, found, err := tb.Get(k, nil); err == nil && !found {
			keys, states = append(keys, k), append(states, []byte("new"))
		}
	}
	m, err := tb.Apply(2, []byte("meta"), keys, states)
	if err != nil {
		t.Fatalf("Apply of %d keys outside the damage: %v", len(keys), err)
	}
	if want := int64(n + len(keys) - 2); m.Keys != want {
		t.Errorf("Apply: %d keys, want %d", m.Keys, want)
	}
	if _, err := tb.Undo(); err != nil {
		t.Errorf("Undo: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := db.Table("0", "recs").Get(fillKey(bad[0]), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("after reopening: %v, want ErrCorrupt", err)
	}
}

// TestCheck: Check reads a sound store back entirely (every state, the
// markers and undo records agreeing) and reports damage anywhere in a table
// file, in blocks that reads of keys never touch (the filter and metadata
// blocks near the end) as well as in the data; a store in use is refused.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir, 5000)
	r, err := Check(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 0 || r.Files != 1 || len(r.Tables) != 1 {
		t.Fatalf("sound store: %+v", r)
	}
	if tc := r.Tables[0]; tc.Scope != "0" || tc.Model != "recs" || tc.Keys != 5000 || tc.Marker.Keys != 5000 || tc.Undo != 1 {
		t.Fatalf("sound store: table %+v", tc)
	}
	states := 0
	r, err = Check(dir, func(scope, model string, key, state []byte) error {
		states++
		if key[len(key)-1] == '7' {
			return errors.New("does not decode")
		}
		return nil
	})
	if err != nil || states != 5000 || len(r.Problems) != maxProblems+1 || !strings.Contains(r.Problems[0], `key "user-00000007": does not decode`) {
		t.Fatalf("Check with a state that does not decode: %d states, %v, %q", states, err, r.Problems[:2])
	}

	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(dir, nil); err == nil || !strings.Contains(err.Error(), "stop it") {
		t.Errorf("Check of a store in use: %v", err)
	}
	db.Close()

	for _, tc := range []struct {
		name string
		off  func(size int) int
	}{
		{"data", func(size int) int { return size / 3 }},
		{"filter and metadata", func(size int) int { return size - 2000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			fillStore(t, d, 5000)
			corruptSST(t, d, tc.off, 200)
			r, err := Check(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(sstOf(t, d))
			if len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "file "+name) || !strings.Contains(r.Problems[0], "checksum mismatch") {
				t.Fatalf("damaged store: %+v", r)
			}
			t.Logf("%q", r.Problems)
		})
	}
	if _, err := Check(filepath.Join(dir, "none"), nil); err == nil {
		t.Error("Check of a directory without a store: no error")
	}
}

// TestUndoTo: with SetUndoDepth(3) the table goes back up to three
// checkpoints, exactly, surviving a reopen; a fourth is refused without a
// change; the records kept stay three.
func TestUndoTo(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.SetUndoDepth(3)
	tb := db.Table("", "m")
	var states []tableState // states[i]: after Apply i+1
	for seq := uint64(1); seq <= 6; seq++ {
		i := int(seq)
		mustApply(t, tb, seq, []byte{byte(seq)}, bs(fmt.Sprint("k", i), fmt.Sprint("k", i-1), "common"),
			bs(fmt.Sprint("new", i), fmt.Sprint("again", i), fmt.Sprint("c", i)))
		states = append(states, stateOf(t, tb))
		if got, want := undoRecords(t, db), min(i, 3); got != want {
			t.Fatalf("after Apply %d: %d undo records, want %d", i, got, want)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetUndoDepth(3)
	tb = db.Table("", "m")
	if _, err := tb.UndoTo(2); !errors.Is(err, ErrNoUndo) {
		t.Fatalf("UndoTo 4 checkpoints back: %v, want ErrNoUndo", err)
	}
	checkState(t, tb, states[5])
	if m, err := tb.UndoTo(4); err != nil || m.Seq != 4 {
		t.Fatalf("UndoTo(4) = %+v, %v", m, err)
	}
	checkState(t, tb, states[3])
	if m, err := tb.UndoTo(3); err != nil || m.Seq != 3 {
		t.Fatalf("UndoTo(3) = %+v, %v", m, err)
	}
	checkState(t, tb, states[2])
	checkNoUndo(t, tb)
	// Forward again: the chain restarts from here.
	mustApply(t, tb, 4, []byte{4}, bs("k4", "k3", "common"), bs("new4", "again4", "c4"))
	checkState(t, tb, states[3])
	if m, err := tb.UndoTo(3); err != nil || m.Seq != 3 {
		t.Fatalf("UndoTo(3) after a new Apply = %+v, %v", m, err)
	}
	checkState(t, tb, states[2])
}

// undoRecords counts the undo records of db.
func undoRecords(t *testing.T, db *DB) int {
	t.Helper()
	it, err := db.p.NewIter(&pebble.IterOptions{LowerBound: []byte{nsUndo}, UpperBound: []byte{nsUndo + 1}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUndoLegacyRecord: a store of an earlier version holds its one undo
// record at 0x00 id; Undo takes it as the record of the current marker,
// and the next Apply deletes it.
func TestUndoLegacyRecord(t *testing.T) {
	db := openMem(t)
	tb := db.Table("", "m")
	mustApply(t, tb, 1, nil, bs("a"), bs("A"))
	first := stateOf(t, tb)
	mustApply(t, tb, 2, nil, bs("a", "b"), bs("AA", "B"))
	second := stateOf(t, tb)
	legacy := func() { // move the record of marker 2 where an earlier version kept it
		t.Helper()
		rec, closer, err := db.p.Get(tb.undoKey(2))
		if err != nil {
			t.Fatal(err)
		}
		rec = bytes.Clone(rec)
		closer.Close()
		b := db.p.NewBatch()
		_ = b.Delete(tb.undoKey(1), nil)
		_ = b.Delete(tb.undoKey(2), nil)
		_ = b.Set(tb.undo, rec, nil)
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	legacy()
	mustUndo(t, tb)
	checkState(t, tb, first)
	checkNoUndo(t, tb)
	mustApply(t, tb, 2, nil, bs("a", "b"), bs("AA", "B"))
	legacy()
	mustApply(t, tb, 3, nil, bs("c"), bs("C"))
	if n := undoRecords(t, db); n != 1 {
		t.Fatalf("%d undo records after an Apply over an earlier version's, want 1", n)
	}
	mustUndo(t, tb)
	checkState(t, tb, second)
	checkNoUndo(t, tb)
}
