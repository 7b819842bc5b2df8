package snapshot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func openVersions(t *testing.T, keep int) *VersionStore {
	t.Helper()
	s, err := OpenVersionStore(filepath.Join(t.TempDir(), "state", VersionsDir), keep)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func versionNumbers(vs []Version) []uint64 {
	var out []uint64
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

func stateOf(i int) Model {
	return Model{Name: "mam", Type: "mam", Fingerprint: "fp1", Data: []byte(fmt.Sprintf("state %d", i))}
}

// TestVersionStoreRetention: every Add is a new version numbered past the
// last; only the newest keep are kept, exactly, and each survives until
// keep newer ones are recorded; versions read back with their metadata.
func TestVersionStoreRetention(t *testing.T) {
	const keep = 3
	s := openVersions(t, keep)
	at := time.Date(2026, 12, 1, 10, 0, 0, 123, time.UTC)
	for i := 1; i <= 7; i++ {
		v, err := s.Add(stateOf(i), Version{Seq: uint64(100 + i), N: int64(10 * i), Origin: OriginCheckpoint, CreatedAt: at.Add(time.Duration(i) * time.Second),
			Offsets: []Offset{{Topic: "events", Partition: 0, Offset: int64(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		if v.Version != uint64(i) {
			t.Fatalf("Add %d: version %d", i, v.Version)
		}
		got, bad, err := s.List("mam")
		if err != nil || len(bad) > 0 {
			t.Fatalf("List: %v %v", bad, err)
		}
		var want []uint64
		for j := i; j >= 1 && j > i-keep; j-- {
			want = append(want, uint64(j))
		}
		if !slices.Equal(versionNumbers(got), want) {
			t.Fatalf("after %d adds: versions %v, want %v", i, versionNumbers(got), want)
		}
	}
	m, v, err := s.Load("mam", 6)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "state 6" || m.Type != "mam" || m.Fingerprint != "fp1" {
		t.Fatalf("version 6: %+v", m)
	}
	if v.Version != 6 || v.Seq != 106 || v.N != 60 || v.Origin != OriginCheckpoint || v.From != 0 || !v.CreatedAt.Equal(at.Add(6*time.Second)) ||
		v.Bytes != len("state 6") || len(v.Offsets) != 1 || v.Offsets[0].Offset != 6 {
		t.Fatalf("version 6: %+v", v)
	}
	if _, _, err := s.Load("mam", 4); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("version 4 (pruned): err %v, want ErrNoVersion", err)
	}
	if _, _, err := s.Load("other", 1); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("unknown model: err %v, want ErrNoVersion", err)
	}
	// A rollback is a version like any other: numbered next, it prunes the
	// oldest, and names the version it copies.
	m5, _, err := s.Load("mam", 5)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := s.Add(*m5, Version{Seq: 108, N: 50, Origin: OriginRollback, From: 5, Request: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := s.List("mam")
	if rb.Version != 8 || !slices.Equal(versionNumbers(got), []uint64{8, 7, 6}) || got[0].Origin != OriginRollback || got[0].From != 5 || got[0].Request != "r1" {
		t.Fatalf("rollback: %+v; versions %v", rb, got)
	}
	if models, err := s.Models(); err != nil || !slices.Equal(models, []string{"mam"}) {
		t.Fatalf("Models: %v %v", models, err)
	}
}

// TestVersionStoreAddIfChanged: a state equal to the newest version's is
// not recorded again, also by a store opened afresh; a changed one is.
func TestVersionStoreAddIfChanged(t *testing.T) {
	s := openVersions(t, 5)
	meta := Version{Origin: OriginCheckpoint, N: -1}
	for i, c := range []struct {
		state int
		added bool
	}{{1, true}, {1, false}, {2, true}, {2, false}, {1, true}} {
		v, added, err := s.AddIfChanged(stateOf(c.state), meta, 0)
		if err != nil || added != c.added {
			t.Fatalf("step %d: added %v (%+v) err %v, want added %v", i, added, v, err, c.added)
		}
	}
	again, err := OpenVersionStore(s.Dir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, added, err := again.AddIfChanged(stateOf(1), meta, 0); err != nil || added {
		t.Fatalf("reopened, same state: added %v err %v", added, err)
	}
	if v, added, err := again.AddIfChanged(stateOf(3), meta, 0); err != nil || !added || v.Version != 4 {
		t.Fatalf("reopened, new state: %+v added %v err %v", v, added, err)
	}
}

// TestVersionStoreEvery: with every > 0 a changed state is recorded only
// once the newest version is that old, also for a store opened afresh.
func TestVersionStoreEvery(t *testing.T) {
	s := openVersions(t, 5)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		state int
		at    time.Duration
		added bool
	}{{1, 0, true}, {2, 30 * time.Second, false}, {3, time.Minute, true}, {3, 3 * time.Minute, false}, {4, 90 * time.Second, false}, {4, 2 * time.Minute, true}} {
		_, added, err := s.AddIfChanged(stateOf(c.state), Version{CreatedAt: t0.Add(c.at)}, time.Minute)
		if err != nil || added != c.added {
			t.Fatalf("step %d: added %v err %v, want added %v", i, added, err, c.added)
		}
	}
	again, err := OpenVersionStore(s.Dir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, added, _ := again.AddIfChanged(stateOf(5), Version{CreatedAt: t0.Add(150 * time.Second)}, time.Minute); added {
		t.Fatal("reopened: recorded 30 s after the newest version")
	}
	if v, added, _ := again.AddIfChanged(stateOf(5), Version{CreatedAt: t0.Add(180 * time.Second)}, time.Minute); !added || v.Version != 4 {
		t.Fatalf("reopened: a minute after the newest version: %+v %v", v, added)
	}
}

// TestVersionStoreCorrupt: a version file that does not verify is
// reported by List, never returned; Load says it is corrupt; new versions
// are numbered past it, and retention counts it like any file.
func TestVersionStoreCorrupt(t *testing.T) {
	s := openVersions(t, 3)
	for i := 1; i <= 3; i++ {
		if _, err := s.Add(stateOf(i), Version{Origin: OriginCheckpoint}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(s.Dir(), "mam", FileName(3))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-30] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.List("mam")
	if err != nil || !slices.Equal(versionNumbers(got), []uint64{2, 1}) || len(bad) != 1 || bad[0].Version != 3 || !errors.Is(bad[0].Err, ErrCorrupt) {
		t.Fatalf("List: %v bad %v err %v", versionNumbers(got), bad, err)
	}
	if _, _, err := s.Load("mam", 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of the corrupt version: %v", err)
	}
	// A store opened afresh compares with the newest version that reads
	// (2): state 2 is no change.
	again, err := OpenVersionStore(s.Dir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, added, err := again.AddIfChanged(stateOf(2), Version{}, 0); err != nil || added {
		t.Fatalf("state of the newest valid version: added %v err %v", added, err)
	}
	v, err := again.Add(stateOf(4), Version{})
	if err != nil || v.Version != 4 {
		t.Fatalf("Add past the corrupt file: %+v %v", v, err)
	}
	got, bad, _ = again.List("mam")
	if !slices.Equal(versionNumbers(got), []uint64{4, 2}) || len(bad) != 1 {
		t.Fatalf("after the add: %v bad %v", versionNumbers(got), bad)
	}
}

// TestVersionStoreAtomicWrite: a write that crashed before its rename
// leaves only a temp file, which List ignores and the next open of the
// model's versions removes; the versions already there are intact.
func TestVersionStoreAtomicWrite(t *testing.T) {
	s := openVersions(t, 3)
	if _, err := s.Add(stateOf(1), Version{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Dir(), "mam")
	full, err := os.ReadFile(filepath.Join(dir, FileName(1)))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, tempPrefix+"crashed")
	if err := os.WriteFile(tmp, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.List("mam")
	if err != nil || !slices.Equal(versionNumbers(got), []uint64{1}) || len(bad) != 0 {
		t.Fatalf("List with a temp file: %v %v %v", versionNumbers(got), bad, err)
	}
	again, err := OpenVersionStore(s.Dir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := again.Add(stateOf(2), Version{}); err != nil || v.Version != 2 {
		t.Fatalf("Add: %+v %v", v, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the crashed write's temp file is still there: %v", err)
	}
	for _, name := range dirNames(t, dir) {
		if strings.HasPrefix(name, ".") {
			t.Fatalf("left in %s: %s", dir, name)
		}
	}
}

// TestPendingRollback: a rollback requested offline names an existing
// version; the service reads it back, and clearing it leaves a newer
// request of the same model in place.
func TestPendingRollback(t *testing.T) {
	s := openVersions(t, 3)
	if _, err := s.Add(stateOf(1), Version{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestRollback("mam", 2); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("rollback to a missing version: %v", err)
	}
	if ps, err := s.PendingRollbacks(); err != nil || len(ps) != 0 {
		t.Fatalf("pending: %v %v", ps, err)
	}
	p1, err := s.RequestRollback("mam", 1)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := s.PendingRollbacks()
	if err != nil || len(ps) != 1 || ps[0].Model != "mam" || ps[0].To != 1 || ps[0].ID != p1.ID {
		t.Fatalf("pending: %+v %v", ps, err)
	}
	p2, err := s.RequestRollback("mam", 1)
	if err != nil || p2.ID == p1.ID {
		t.Fatalf("second request: %+v %v", p2, err)
	}
	if err := s.ClearRollback(p1); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.PendingRollbacks(); len(ps) != 1 || ps[0].ID != p2.ID {
		t.Fatalf("clearing the older request removed the newer one: %+v", ps)
	}
	if err := s.ClearRollback(p2); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.PendingRollbacks(); len(ps) != 0 {
		t.Fatalf("after clearing: %+v", ps)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "mam", PendingRollbackFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PendingRollbacks(); err == nil || !strings.Contains(err.Error(), PendingRollbackFile) {
		t.Fatalf("a bad request file: %v", err)
	}
}
