package snapshot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

const (
	filePrefix = "snapshot-"
	fileSuffix = ".snap"
	tempPrefix = ".tmp-snapshot-" // temp files; a leading dot keeps them out of casual listings
)

// FileName returns the name of the file that holds snapshot seq:
// snapshot-<seq as 20 decimal digits>.snap, so names sort like sequence numbers.
func FileName(seq uint64) string {
	return fmt.Sprintf("%s%020d%s", filePrefix, seq, fileSuffix)
}

// parseFileName returns the sequence number of a snapshot file name.
func parseFileName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, filePrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, fileSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}

// FS is what a FileStore needs from the operating system to write: the
// operating system's own by default (OpenFileStore); tests give
// OpenFileStoreFS one that injects faults (a full disk).
type FS interface {
	CreateTemp(dir, pattern string) (TempFile, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	ReadDir(dir string) ([]os.DirEntry, error)
	SyncDir(dir string) error
}

// TempFile is a file FS.CreateTemp created.
type TempFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

type osFS struct{}

var _ FS = osFS{}

func (osFS) CreateTemp(dir, pattern string) (TempFile, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Rename(oldpath, newpath string) error             { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                         { return os.Remove(name) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)        { return os.ReadDir(dir) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// FileStore keeps the newest snapshots as files in one directory. Each save
// is atomic (temp file, fsync, rename, fsync of the directory), so after a
// crash the directory holds complete snapshots and, at worst, a stale temp
// file that the next OpenFileStore deletes.
//
// A FileStore is safe for concurrent use. Only one process may use a
// directory at a time.
type FileStore struct {
	dir  string
	keep int
	fs   FS
	mu   sync.Mutex // serialises Save (write + prune)
	hook func()     // fault injection: runs after the temp file is written
}

// SetWriteHook makes every Save call fn after the snapshot is written to its
// temporary file and before that file is synced and renamed into place. It
// exists for fault-injection tests (a crash in the middle of a write); set it
// before the first Save.
func (s *FileStore) SetWriteHook(fn func()) { s.hook = fn }

// Skipped reports a snapshot file that LoadLatest passed over.
type Skipped struct {
	Path string
	Err  error
}

// OpenFileStore opens (creating it if needed) the snapshot directory dir and
// deletes temp files left there by a crashed save. Save keeps the newest keep
// snapshots; keep must be at least 1, and 2 or more lets LoadLatest fall back
// when the newest file is damaged.
func OpenFileStore(dir string, keep int) (*FileStore, error) {
	return openFileStore(dir, keep, osFS{})
}

// OpenFileStoreFS is OpenFileStore writing through fsys.
func OpenFileStoreFS(dir string, keep int, fsys FS) (*FileStore, error) {
	return openFileStore(dir, keep, fsys)
}

func openFileStore(dir string, keep int, fsys FS) (*FileStore, error) {
	if keep < 1 {
		return nil, fmt.Errorf("snapshot: open %s: keep must be at least 1, got %d", dir, keep)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot: open: %w", err)
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: open: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) && !e.IsDir() {
			if err := fsys.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("snapshot: open: remove stale temp file: %w", err)
			}
		}
	}
	return &FileStore{dir: dir, keep: keep, fs: fsys}, nil
}

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// Save writes snap durably as FileName(snap.Seq) and returns its path. It
// returns only after the file and the directory entry are fsynced; when it
// returns an error nothing visible has changed (apart from the pruning of old
// files). A snap.Seq lower than the newest stored one is refused; an equal one
// replaces that file. After a successful save only the newest keep snapshots
// are kept; pruning is best effort and a failed removal is retried by the next
// Save.
func (s *FileStore) Save(snap *Snapshot) (path string, err error) {
	if err := snap.Validate(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	seqs, err := s.seqs()
	if err != nil {
		return "", fmt.Errorf("snapshot: save: %w", err)
	}
	if len(seqs) > 0 && snap.Seq < seqs[0] {
		return "", fmt.Errorf("snapshot: save: seq %d is older than the newest stored snapshot %d", snap.Seq, seqs[0])
	}

	path = filepath.Join(s.dir, FileName(snap.Seq))
	f, err := s.fs.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("snapshot: save: %w", err)
	}
	tmp := f.Name()
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				f.Close()
			}
			s.fs.Remove(tmp)
		}
	}()
	if _, err = Encode(f, snap); err != nil {
		return "", fmt.Errorf("snapshot: save: write: %w", err)
	}
	if s.hook != nil {
		s.hook()
	}
	if err = f.Sync(); err != nil {
		return "", fmt.Errorf("snapshot: save: fsync: %w", err)
	}
	closed = true
	if err = f.Close(); err != nil {
		return "", fmt.Errorf("snapshot: save: close: %w", err)
	}
	if err = s.fs.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("snapshot: save: rename: %w", err)
	}
	if err = s.fs.SyncDir(s.dir); err != nil {
		// The rename happened but may not survive a crash; report it, the
		// caller must not treat the snapshot as durable.
		return "", fmt.Errorf("snapshot: save: fsync dir: %w", err)
	}

	if len(seqs) == 0 || seqs[0] != snap.Seq {
		seqs = append([]uint64{snap.Seq}, seqs...)
	}
	for _, old := range seqs[min(s.keep, len(seqs)):] {
		s.fs.Remove(filepath.Join(s.dir, FileName(old)))
	}
	return path, nil
}

// NewestSeq returns the highest sequence number among the snapshot files,
// valid or not (0 when there is none): new snapshots are numbered past it,
// so that a save is never refused for a corrupt file's number.
func (s *FileStore) NewestSeq() (uint64, error) {
	seqs, err := s.seqs()
	if err != nil || len(seqs) == 0 {
		return 0, err
	}
	return seqs[0], nil
}

// Quarantine moves a snapshot file that does not verify aside, renaming it
// to path + ".corrupt" (kept for inspection; no longer listed or loaded),
// and returns the new name.
func (s *FileStore) Quarantine(path string) (string, error) {
	if filepath.Dir(path) != filepath.Clean(s.dir) {
		return "", fmt.Errorf("snapshot: quarantine %s: not in %s", path, s.dir)
	}
	to := path + ".corrupt"
	if err := s.fs.Rename(path, to); err != nil {
		return "", fmt.Errorf("snapshot: quarantine: %w", err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return "", fmt.Errorf("snapshot: quarantine: %w", err)
	}
	return to, nil
}

// seqs returns the sequence numbers of the snapshot files, newest first.
func (s *FileStore) seqs() ([]uint64, error) {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	return fileSeqs(ents), nil
}

// fileSeqs are the numbers of the snapshot files among ents, newest first.
func fileSeqs(ents []os.DirEntry) []uint64 {
	var seqs []uint64
	for _, e := range ents {
		if seq, ok := parseFileName(e.Name()); ok && e.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	slices.Reverse(seqs)
	return seqs
}

// List returns the paths of the snapshot files, newest (highest Seq) first.
// Temp files are not listed.
func (s *FileStore) List() ([]string, error) {
	seqs, err := s.seqs()
	if err != nil {
		return nil, fmt.Errorf("snapshot: list: %w", err)
	}
	paths := make([]string, len(seqs))
	for i, seq := range seqs {
		paths[i] = filepath.Join(s.dir, FileName(seq))
	}
	return paths, nil
}

// LoadLatest returns the newest snapshot that reads and verifies. Newer files
// that do not (corrupt, truncated, unreadable, written in a newer format) are
// skipped and reported in the returned slice, newest first, even when the
// call succeeds. When no file is usable the error wraps ErrNoSnapshot; if
// skipped is then non-empty, snapshots existed but all were bad, and starting
// from scratch would lose state.
func (s *FileStore) LoadLatest() (*Snapshot, []Skipped, error) {
	paths, err := s.List()
	if err != nil {
		return nil, nil, err
	}
	var skipped []Skipped
	for _, p := range paths {
		snap, err := ReadFile(p)
		if err == nil {
			return snap, skipped, nil
		}
		skipped = append(skipped, Skipped{Path: p, Err: err})
	}
	if len(skipped) == 0 {
		return nil, nil, fmt.Errorf("%w in %s", ErrNoSnapshot, s.dir)
	}
	return nil, skipped, fmt.Errorf("%w: none of the %d snapshot files in %s is valid", ErrNoSnapshot, len(skipped), s.dir)
}

// ReadFile reads and verifies the snapshot file at path (any supported format
// version). Errors from bad content wrap ErrCorrupt.
func ReadFile(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	snap, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return snap, nil
}
