package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestVolume(t *testing.T) {
	dir := t.TempDir()
	v := NewVolume(3 * BlockSize)
	fs := v.PebbleFS(nil)
	f, err := fs.Create(filepath.Join(dir, "a"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write(make([]byte, BlockSize+1)); n != BlockSize+1 || err != nil {
		t.Fatalf("write within the volume: %d, %v", n, err)
	}
	if got := v.Used(); got != 2*BlockSize {
		t.Fatalf("used %d, want 2 blocks", got)
	}
	// What fits (the rest of the second block and the third) is written.
	n, err := f.Write(make([]byte, 3*BlockSize))
	if n != 2*BlockSize-1 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write beyond the volume: %d, %v", n, err)
	}
	if err := f.Preallocate(0, 4*BlockSize); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("preallocation beyond the volume: %v", err)
	}
	f.Close()
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || fi.Size() != 3*BlockSize {
		t.Fatalf("file: %v, %v", fi, err)
	}

	// The snapshot file system shares the volume: full.
	sf, err := v.SnapshotFS().CreateTemp(dir, "t-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sf.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a full volume: %v", err)
	}
	sf.Close()
	// Renaming keeps the space, removing frees it.
	if err := fs.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if v.Used() != 3*BlockSize || v.Peak() != 3*BlockSize || v.Refused() != 3 {
		t.Fatalf("used %d, peak %d, refused %d", v.Used(), v.Peak(), v.Refused())
	}
	if err := fs.Remove(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if v.Used() != 0 {
		t.Fatalf("used %d after the file was removed", v.Used())
	}
	v.SetSize(1 << 20)

	// Hang holds writes until Release.
	g, err := fs.Create(filepath.Join(dir, "c"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	v.Hang()
	done := make(chan error, 1)
	go func() {
		_, err := g.Write([]byte("y"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a write went through a hung volume: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	v.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
