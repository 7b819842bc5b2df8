package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openStore(t *testing.T, keep int) *FileStore {
	t.Helper()
	s, err := OpenFileStore(filepath.Join(t.TempDir(), "snaps"), keep)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSave(t *testing.T, s *FileStore, snap *Snapshot) string {
	t.Helper()
	p, err := s.Save(snap)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, s *FileStore, wantSeq uint64, wantSkipped int) (*Snapshot, []Skipped) {
	t.Helper()
	snap, skipped, err := s.LoadLatest()
	if err != nil {
		t.Fatalf("LoadLatest: %v (skipped %v)", err, skipped)
	}
	if snap.Seq != wantSeq || len(skipped) != wantSkipped {
		t.Fatalf("LoadLatest: seq %d with %d skipped %v, want seq %d with %d skipped", snap.Seq, len(skipped), skipped, wantSeq, wantSkipped)
	}
	return snap, skipped
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestFileStoreRoundTrip(t *testing.T) {
	s := openStore(t, 3)
	if _, _, err := s.LoadLatest(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("empty store: err = %v", err)
	}
	want := testSnapshot(42)
	p := mustSave(t, s, want)
	if filepath.Base(p) != "snapshot-00000000000000000042.snap" {
		t.Fatalf("path %s", p)
	}
	got, _ := mustLoad(t, s, 42, 0)
	equalSnap(t, got, want)
	got, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	equalSnap(t, got, want)

	// Reopening sees the same snapshot.
	s2, err := OpenFileStore(s.Dir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = mustLoad(t, s2, 42, 0)
	equalSnap(t, got, want)
}

func TestFileStoreKeep(t *testing.T) {
	s := openStore(t, 3)
	for seq := uint64(1); seq <= 7; seq++ {
		mustSave(t, s, testSnapshot(seq*10))
	}
	paths, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	want := []string{FileName(70), FileName(60), FileName(50)}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("List = %v, want %v", names, want)
	}
	if got := dirNames(t, s.Dir()); len(got) != 3 {
		t.Fatalf("directory holds %v", got)
	}
	mustLoad(t, s, 70, 0)

	// Same seq replaces; an older seq is refused.
	mustSave(t, s, testSnapshot(70))
	if _, err := s.Save(testSnapshot(69)); err == nil {
		t.Fatal("saving an older seq succeeded")
	}
	if _, err := s.Save(&Snapshot{Models: []Model{{Name: ""}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid snapshot: err = %v", err)
	}
	if _, err := OpenFileStore(t.TempDir(), 0); err == nil {
		t.Fatal("keep 0 accepted")
	}
}

// TestFileStoreCorruptNewest damages the newest file in various ways; each
// time LoadLatest must return the previous snapshot and report the damaged one.
func TestFileStoreCorruptNewest(t *testing.T) {
	prev := testSnapshot(1)
	newest := testSnapshot(2)
	size := EncodedLen(newest)
	hdrEnd := prefixLen + headerLenV1(newest) + 4
	for _, tc := range []struct {
		name string
		harm func(b []byte) []byte
		part string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, ""},
		{"truncated trailer", func(b []byte) []byte { return b[:len(b)-1] }, "trailer"},
		{"empty", func(b []byte) []byte { return nil }, "file"},
		{"flip magic", func(b []byte) []byte { b[0] ^= 1; return b }, "file"},
		{"flip header", func(b []byte) []byte { b[prefixLen+3] ^= 1; return b }, "header"},
		{"flip model data", func(b []byte) []byte { b[hdrEnd+2] ^= 0x80; return b }, `model "mam"`},
		{"flip trailer", func(b []byte) []byte { b[size-10] ^= 1; return b }, "trailer"},
		{"flip end magic", func(b []byte) []byte { b[size-1] ^= 1; return b }, "trailer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, 3)
			mustSave(t, s, prev)
			p := mustSave(t, s, newest)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.harm(b), 0o644); err != nil {
				t.Fatal(err)
			}
			got, skipped := mustLoad(t, s, 1, 1)
			equalSnap(t, got, prev)
			if skipped[0].Path != p || !errors.Is(skipped[0].Err, ErrCorrupt) {
				t.Fatalf("skipped %+v", skipped[0])
			}
			var ce *CorruptError
			if tc.part != "" && (!errors.As(skipped[0].Err, &ce) || ce.Part != tc.part) {
				t.Fatalf("skipped error %v, want part %q", skipped[0].Err, tc.part)
			}
		})
	}
}

func TestFileStoreAllCorrupt(t *testing.T) {
	s := openStore(t, 3)
	for seq := uint64(1); seq <= 2; seq++ {
		p := mustSave(t, s, testSnapshot(seq))
		if err := os.Truncate(p, 10); err != nil {
			t.Fatal(err)
		}
	}
	snap, skipped, err := s.LoadLatest()
	if snap != nil || !errors.Is(err, ErrNoSnapshot) || len(skipped) != 2 {
		t.Fatalf("LoadLatest = %v, %v, %v", snap, skipped, err)
	}
	if skipped[0].Path < skipped[1].Path {
		t.Fatalf("skipped not newest first: %v", skipped)
	}
}

// TestFileStoreCrashBeforeRename leaves what a crash between writing the temp
// file and renaming it leaves: a complete temp file. It must be invisible to
// List and LoadLatest, and the next open must delete it.
func TestFileStoreCrashBeforeRename(t *testing.T) {
	s := openStore(t, 3)
	mustSave(t, s, testSnapshot(1))
	tmp := filepath.Join(s.Dir(), tempPrefix+"123456")
	if err := os.WriteFile(tmp, AppendEncode(nil, testSnapshot(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, 1, 0)
	if paths, _ := s.List(); len(paths) != 1 {
		t.Fatalf("List = %v", paths)
	}
	s2, err := OpenFileStore(s.Dir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temp file not removed: %v", err)
	}
	mustLoad(t, s2, 1, 0)
	mustSave(t, s2, testSnapshot(2))
	mustLoad(t, s2, 2, 0)
}

// faultFS fails the named operation.
type faultFS struct {
	osFS
	fail string
}

var errInjected = errors.New("injected fault")

type faultFile struct {
	*os.File
	fail string
}

func (f faultFile) Write(b []byte) (int, error) {
	if f.fail == "write" {
		return 0, errInjected
	}
	return f.File.Write(b)
}

func (f faultFile) Sync() error {
	if f.fail == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

func (fs faultFS) CreateTemp(dir, pattern string) (TempFile, error) {
	if fs.fail == "create" {
		return nil, errInjected
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return faultFile{f, fs.fail}, nil
}

func (fs faultFS) Rename(o, n string) error {
	if fs.fail == "rename" {
		return errInjected
	}
	return fs.osFS.Rename(o, n)
}

func (fs faultFS) SyncDir(dir string) error {
	if fs.fail == "syncdir" {
		return errInjected
	}
	return fs.osFS.SyncDir(dir)
}

func TestFileStoreFaults(t *testing.T) {
	for _, op := range []string{"create", "write", "sync", "rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			good, err := OpenFileStore(dir, 3)
			if err != nil {
				t.Fatal(err)
			}
			mustSave(t, good, testSnapshot(1))
			bad, err := openFileStore(dir, 3, faultFS{fail: op})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bad.Save(testSnapshot(2)); !errors.Is(err, errInjected) {
				t.Fatalf("Save = %v", err)
			}
			for _, n := range dirNames(t, dir) {
				if strings.HasPrefix(n, tempPrefix) {
					t.Fatalf("temp file %s left behind", n)
				}
			}
			want := uint64(1)
			if op == "syncdir" {
				want = 2 // renamed, but Save could not promise durability
			}
			mustLoad(t, good, want, 0)
		})
	}
}
