// Package faultfs simulates a volume of limited size, for tests: file
// systems over the real one (Pebble's vfs.FS for the key store, snapshot.FS
// for the snapshot files) whose writes fail with ENOSPC, as a full disk's
// do, once the files written through them would take more than the
// volume's size. The size can be changed at any time: raising it is freeing
// space.
//
// A file takes its length rounded up to 4 KiB blocks, or what was
// preallocated for it if that is more; directories and empty files take
// nothing. A write that does not fit writes what fits and fails with
// ENOSPC, a preallocation that does not fit fails whole. Files the volume
// has not seen written (opened or removed first) count with their length
// on disk when first seen. Hang makes writes and syncs wait, as on a disk
// that stopped answering, until Release.
package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamer/streamer/snapshot"
)

// BlockSize is the unit a file's space is counted in.
const BlockSize = 4096

// Volume is the space shared by the file systems it hands out. It is safe
// for concurrent use.
type Volume struct {
	mu      sync.Mutex
	hung    chan struct{} // closed by Release; nil while writes go through
	size    int64
	used    int64
	peak    int64
	refused int64
	files   map[string]*alloc // by cleaned path
}

// alloc is a file's share of the volume.
type alloc struct {
	length int64 // bytes written (the highest offset)
	bytes  int64 // space taken: blocks of length, or preallocated
	gone   bool  // removed: writes through handles still open count no more
}

// NewVolume returns a volume of size bytes.
func NewVolume(size int64) *Volume {
	return &Volume{size: size, files: map[string]*alloc{}}
}

// Hang makes every write, preallocation and sync wait until Release, as on
// a disk that stopped answering.
func (v *Volume) Hang() {
	v.mu.Lock()
	if v.hung == nil {
		v.hung = make(chan struct{})
	}
	v.mu.Unlock()
}

// Release lets the writes that Hang holds go on.
func (v *Volume) Release() {
	v.mu.Lock()
	if v.hung != nil {
		close(v.hung)
		v.hung = nil
	}
	v.mu.Unlock()
}

// wait blocks while the volume hangs.
func (v *Volume) wait() {
	v.mu.Lock()
	h := v.hung
	v.mu.Unlock()
	if h != nil {
		<-h
	}
}

// SetSize changes the volume's size: later writes fit in it (the files
// already there stay, even beyond it).
func (v *Volume) SetSize(n int64) {
	v.mu.Lock()
	v.size = n
	v.mu.Unlock()
}

// Used returns the bytes the volume's files take now.
func (v *Volume) Used() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.used
}

// Peak returns the most bytes the files took at once since the last
// ResetPeak.
func (v *Volume) Peak() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.peak
}

// ResetPeak starts Peak over from what is used now.
func (v *Volume) ResetPeak() {
	v.mu.Lock()
	v.peak = v.used
	v.mu.Unlock()
}

// Refused returns how many writes and preallocations failed for lack of
// space.
func (v *Volume) Refused() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.refused
}

// Files returns the bytes each file takes, by path.
func (v *Volume) Files() map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int64, len(v.files))
	for p, a := range v.files {
		out[p] = a.bytes
	}
	return out
}

func blocks(n int64) int64 { return (n + BlockSize - 1) / BlockSize * BlockSize }

func noSpace(op, path string) error {
	return &fs.PathError{Op: op, Path: path, Err: syscall.ENOSPC}
}

// file returns path's record, creating it (with its length on disk, if it
// exists) when the volume has not seen it. v.mu is held.
func (v *Volume) file(path string) *alloc {
	path = filepath.Clean(path)
	a := v.files[path]
	if a == nil {
		a = &alloc{}
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			a.length, a.bytes = fi.Size(), blocks(fi.Size())
			v.add(a.bytes)
		}
		v.files[path] = a
	}
	return a
}

// add counts n more bytes used. v.mu is held.
func (v *Volume) add(n int64) {
	v.used += n
	v.peak = max(v.peak, v.used)
}

// created records a new, empty file at path (replacing one there).
func (v *Volume) created(path string) *alloc {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.dropLocked(path)
	a := &alloc{}
	v.files[filepath.Clean(path)] = a
	return a
}

// opened returns the record of an existing file opened for writing.
func (v *Volume) opened(path string) *alloc {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.file(path)
}

// write reserves the space of writing n bytes at off of a and returns how
// many of them fit.
func (v *Volume) write(a *alloc, off int64, n int) int {
	v.wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	if a.gone || n == 0 {
		return n
	}
	end := off + int64(n)
	if need := blocks(max(a.length, end)) - a.bytes; need > 0 && v.used+need > v.size {
		// What fits: up to the last whole block of free space.
		limit := a.bytes + max(0, v.size-v.used)/BlockSize*BlockSize
		end = min(end, max(off, limit))
		v.refused++
	}
	if grown := blocks(max(a.length, end)) - a.bytes; grown > 0 {
		a.bytes += grown
		v.add(grown)
	}
	a.length = max(a.length, end)
	return int(end - off)
}

// preallocate reserves the space of a up to off+n, all or nothing.
func (v *Volume) preallocate(a *alloc, off, n int64) bool {
	v.wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	if a.gone {
		return true
	}
	need := blocks(off+n) - a.bytes
	if need <= 0 {
		return true
	}
	if v.used+need > v.size {
		v.refused++
		return false
	}
	a.bytes += need
	v.add(need)
	return true
}

// dropLocked forgets path's file (removed or replaced). v.mu is held.
func (v *Volume) dropLocked(path string) {
	path = filepath.Clean(path)
	if a := v.files[path]; a != nil {
		v.used -= a.bytes
		a.gone = true
		delete(v.files, path)
	}
}

// removed records that path (a file, or a directory and everything in it)
// is gone.
func (v *Volume) removed(path string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	path = filepath.Clean(path)
	v.dropLocked(path)
	prefix := path + string(filepath.Separator)
	for p := range v.files {
		if strings.HasPrefix(p, prefix) {
			v.dropLocked(p)
		}
	}
}

// renamed moves oldpath's record to newpath (replacing the file there).
func (v *Volume) renamed(oldpath, newpath string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	a := v.file(oldpath)
	delete(v.files, filepath.Clean(oldpath))
	v.dropLocked(newpath)
	v.files[filepath.Clean(newpath)] = a
}

func (v *Volume) usage() vfs.DiskUsage {
	v.mu.Lock()
	defer v.mu.Unlock()
	return vfs.DiskUsage{AvailBytes: uint64(max(0, v.size-v.used)), TotalBytes: uint64(v.size), UsedBytes: uint64(v.used)}
}

// PebbleFS returns a Pebble file system that writes through inner (nil:
// the operating system's, vfs.Default) within the volume.
func (v *Volume) PebbleFS(inner vfs.FS) vfs.FS {
	if inner == nil {
		inner = vfs.Default
	}
	return &pebbleFS{FS: inner, v: v}
}

type pebbleFS struct {
	vfs.FS
	v *Volume
}

func (p *pebbleFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &pebbleFile{File: f, v: p.v, a: p.v.created(name), name: name}, nil
}

func (p *pebbleFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &pebbleFile{File: f, v: p.v, a: p.v.opened(name), name: name}, nil
}

func (p *pebbleFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	p.v.renamed(oldname, newname)
	return &pebbleFile{File: f, v: p.v, a: p.v.opened(newname), name: newname}, nil
}

func (p *pebbleFS) Remove(name string) error {
	if err := p.FS.Remove(name); err != nil {
		return err
	}
	p.v.removed(name)
	return nil
}

func (p *pebbleFS) RemoveAll(name string) error {
	err := p.FS.RemoveAll(name)
	p.v.removed(name)
	return err
}

func (p *pebbleFS) Rename(oldname, newname string) error {
	if err := p.FS.Rename(oldname, newname); err != nil {
		return err
	}
	p.v.renamed(oldname, newname)
	return nil
}

func (p *pebbleFS) GetDiskUsage(string) (vfs.DiskUsage, error) { return p.v.usage(), nil }

func (p *pebbleFS) Unwrap() vfs.FS { return p.FS }

// pebbleFile counts a file's writes; it writes sequentially (Write) or at
// offsets (WriteAt).
type pebbleFile struct {
	vfs.File
	v    *Volume
	a    *alloc
	name string
	off  int64 // of the next Write
}

func (f *pebbleFile) Write(b []byte) (int, error) {
	fit := f.v.write(f.a, f.off, len(b))
	n, err := f.File.Write(b[:fit])
	f.off += int64(n)
	if err == nil && fit < len(b) {
		err = noSpace("write", f.name)
	}
	return n, err
}

func (f *pebbleFile) WriteAt(b []byte, off int64) (int, error) {
	fit := f.v.write(f.a, off, len(b))
	n, err := f.File.WriteAt(b[:fit], off)
	if err == nil && fit < len(b) {
		err = noSpace("write", f.name)
	}
	return n, err
}

func (f *pebbleFile) Sync() error {
	f.v.wait()
	return f.File.Sync()
}

func (f *pebbleFile) SyncData() error {
	f.v.wait()
	return f.File.SyncData()
}

func (f *pebbleFile) SyncTo(length int64) (bool, error) {
	f.v.wait()
	return f.File.SyncTo(length)
}

func (f *pebbleFile) Preallocate(off, n int64) error {
	if !f.v.preallocate(f.a, off, n) {
		return noSpace("fallocate", f.name)
	}
	return f.File.Preallocate(off, n)
}

// SnapshotFS returns a file system for the snapshot file store
// (snapshot.OpenFileStoreFS) that writes through the operating system's
// within the volume.
func (v *Volume) SnapshotFS() snapshot.FS { return snapFS{v: v} }

type snapFS struct{ v *Volume }

var _ snapshot.FS = snapFS{}

func (s snapFS) CreateTemp(dir, pattern string) (snapshot.TempFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &snapFile{File: f, v: s.v, a: s.v.created(f.Name())}, nil
}

func (s snapFS) Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	s.v.renamed(oldpath, newpath)
	return nil
}

func (s snapFS) Remove(name string) error {
	if err := os.Remove(name); err != nil {
		return err
	}
	s.v.removed(name)
	return nil
}

func (s snapFS) ReadDir(dir string) ([]os.DirEntry, error) { return os.ReadDir(dir) }

func (s snapFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

type snapFile struct {
	*os.File
	v   *Volume
	a   *alloc
	off int64
}

func (f *snapFile) Sync() error {
	f.v.wait()
	return f.File.Sync()
}

func (f *snapFile) Write(b []byte) (int, error) {
	fit := f.v.write(f.a, f.off, len(b))
	n, err := f.File.Write(b[:fit])
	f.off += int64(n)
	if err == nil && fit < len(b) {
		err = noSpace("write", f.Name())
	}
	return n, err
}
