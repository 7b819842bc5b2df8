package snapshot

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Model versions: the states of a model as durable checkpoints saved them,
// kept so that an operator can list them and roll the model back to one.
//
// A VersionStore keeps them under one directory (the service's
// snapshot.dir/versions), a subdirectory per model, one file per version:
// a snapshot file (the format above, written by a FileStore with the same
// guarantees: temp file, fsync, rename, directory fsync) whose Seq is the
// version number, CreatedAt its time, Offsets the input offsets of the
// checkpoint that saved it, and whose two entries are the model's state
// and VersionMetaName, the version's metadata as JSON (versionMeta). The
// newest keep versions of each model are kept. Version numbers increase
// per model from 1 and are never reused while a version file is there: a
// rollback is recorded as a new version (Origin "rollback", From the
// version it copies), never by rewriting or deleting one.
//
// A rollback requested while the service is stopped (RequestRollback) is
// a file of its own in the model's directory, PendingRollbackFile, which
// the service applies at start and removes (ClearRollback) once the
// version recording it is written.

// VersionsDir is the subdirectory of snapshot.dir that holds the versions.
const VersionsDir = "versions"

// VersionMetaName is the name of a version file's metadata entry (not a
// valid model name: it has a dot).
const VersionMetaName = "version.meta"

// PendingRollbackFile is the name of a model's pending rollback request.
const PendingRollbackFile = "rollback-pending.json"

// The origins of a version.
const (
	OriginCheckpoint = "checkpoint" // a checkpoint's state of the model
	OriginRollback   = "rollback"   // a rollback: the state of version From
)

// ErrNoVersion is wrapped when a model has no version of the number asked
// for (never recorded, or no longer kept).
var ErrNoVersion = errors.New("snapshot: no such version")

// Version describes one version of a model.
type Version struct {
	Model       string    `json:"-"`
	Version     uint64    `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	Seq         uint64    `json:"seq"`            // the snapshot seq of the checkpoint that saved the state
	N           int64     `json:"n"`              // examples the state learned; -1 unknown
	Origin      string    `json:"origin"`         // OriginCheckpoint or OriginRollback
	From        uint64    `json:"from,omitempty"` // a rollback's: the version whose state it copies
	Request     string    `json:"-"`              // a rollback's: the id of the request that made it
	Type        string    `json:"type"`
	Fingerprint string    `json:"-"`
	Bytes       int       `json:"bytes"`
	Offsets     []Offset  `json:"-"`
}

// versionMeta is the metadata entry of a version file.
type versionMeta struct {
	Seq     uint64 `json:"seq"`
	N       int64  `json:"n"`
	Origin  string `json:"origin"`
	From    uint64 `json:"from,omitempty"`
	Request string `json:"request,omitempty"`
}

// BadVersion is a version file that does not read (or verify).
type BadVersion struct {
	Version uint64
	Path    string
	Err     error
}

// VersionStore keeps the versions of the models in a directory. It is
// safe for concurrent use; only one process may write to a directory at a
// time.
type VersionStore struct {
	dir  string
	keep int

	mu     sync.Mutex // serialises Add, guards stores and heads
	stores map[string]*FileStore
	heads  map[string]head // per model: its newest version, once known
}

// head is what AddIfChanged compares a state with: the newest version's.
type head struct {
	sum [sha256.Size]byte // of its state
	at  time.Time         // when it was recorded
}

// OpenVersionStore opens (creating it if needed) the versions directory
// dir; each model keeps its newest keep versions (at least 1).
func OpenVersionStore(dir string, keep int) (*VersionStore, error) {
	if keep < 1 {
		return nil, fmt.Errorf("snapshot: versions %s: keep must be at least 1, got %d", dir, keep)
	}
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("snapshot: versions: %w", err)
	}
	return &VersionStore{dir: dir, keep: keep, stores: map[string]*FileStore{}, heads: map[string]head{}}, nil
}

// Dir returns the store's directory.
func (s *VersionStore) Dir() string { return s.dir }

// Keep returns the number of versions kept per model.
func (s *VersionStore) Keep() int { return s.keep }

// mkdirDurable creates dir (and its parents) when missing, fsyncing the
// directory that gains the entry, so that the directory survives a crash.
func mkdirDurable(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if err := mkdirDurable(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return osFS{}.SyncDir(parent)
}

// validModelDir reports whether name may be a model's directory: the
// service's model names are [a-z0-9_-], 1..MaxNameLen.
func validModelDir(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// store returns model's FileStore, opening it (and creating its directory)
// on first use. s.mu held.
func (s *VersionStore) store(model string) (*FileStore, error) {
	if fs := s.stores[model]; fs != nil {
		return fs, nil
	}
	if !validModelDir(model) {
		return nil, fmt.Errorf("snapshot: versions: %q is not a model name", model)
	}
	dir := filepath.Join(s.dir, model)
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("snapshot: versions of %s: %w", model, err)
	}
	fs, err := OpenFileStore(dir, s.keep)
	if err != nil {
		return nil, err
	}
	s.stores[model] = fs
	return fs, nil
}

// Models returns the names of the models with a versions directory,
// sorted.
func (s *VersionStore) Models() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: versions: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && validModelDir(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Add records m's state as a new version of m.Name, numbered past every
// version file of the model, with meta's Seq, N, Origin, From, Request and
// Offsets (meta.CreatedAt zero: now), and keeps the newest Keep versions.
// It returns the version recorded, once it is durable.
func (s *VersionStore) Add(m Model, meta Version) (Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.add(m, meta)
}

// AddIfChanged is Add unless m's state is byte for byte the state of the
// model's newest version, or that version was recorded less than every
// before meta.CreatedAt (now when zero; every 0: whenever it changed):
// then added is false and nothing is written.
func (s *VersionStore) AddIfChanged(m Model, meta Version, every time.Duration) (v Version, added bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, known := s.heads[m.Name]
	if !known {
		if newest, at, err := s.newestValid(m.Name); err == nil && newest != nil {
			h, known = head{sum: sha256.Sum256(newest.Data), at: at}, true
			s.heads[m.Name] = h
		}
	}
	now := meta.CreatedAt
	if now.IsZero() {
		now = time.Now()
	}
	if known && (now.Sub(h.at) < every || h.sum == sha256.Sum256(m.Data)) {
		return Version{}, false, nil
	}
	v, err = s.add(m, meta)
	return v, err == nil, err
}

// newestValid returns the state of model's newest version that reads and
// when it was recorded, nil when none reads. s.mu held.
func (s *VersionStore) newestValid(model string) (*Model, time.Time, error) {
	fs, err := s.store(model)
	if err != nil {
		return nil, time.Time{}, err
	}
	paths, err := fs.List()
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, p := range paths {
		if snap, err := ReadFile(p); err == nil {
			if m := snap.Model(model); m != nil {
				return m, snap.CreatedAt, nil
			}
		}
	}
	return nil, time.Time{}, nil
}

func (s *VersionStore) add(m Model, meta Version) (Version, error) {
	fs, err := s.store(m.Name)
	if err != nil {
		return Version{}, err
	}
	newest, err := fs.NewestSeq()
	if err != nil {
		return Version{}, fmt.Errorf("snapshot: versions of %s: %w", m.Name, err)
	}
	at := meta.CreatedAt
	if at.IsZero() {
		at = time.Now()
	}
	vm := versionMeta{Seq: meta.Seq, N: meta.N, Origin: meta.Origin, From: meta.From, Request: meta.Request}
	b, err := json.Marshal(vm)
	if err != nil {
		return Version{}, err
	}
	snap := &Snapshot{Seq: newest + 1, CreatedAt: at.UTC(), Offsets: meta.Offsets,
		Models: []Model{m, {Name: VersionMetaName, Type: "json", Data: b}}}
	if _, err := fs.Save(snap); err != nil {
		return Version{}, fmt.Errorf("snapshot: version %d of %s: %w", snap.Seq, m.Name, err)
	}
	s.heads[m.Name] = head{sum: sha256.Sum256(m.Data), at: snap.CreatedAt}
	return versionOf(m.Name, snap), nil
}

// versionOf is the description of a version file's snapshot.
func versionOf(model string, snap *Snapshot) Version {
	v := Version{Model: model, Version: snap.Seq, CreatedAt: snap.CreatedAt, N: -1, Offsets: snap.Offsets}
	if m := snap.Model(model); m != nil {
		v.Type, v.Fingerprint, v.Bytes = m.Type, m.Fingerprint, len(m.Data)
	}
	if mm := snap.Model(VersionMetaName); mm != nil {
		var vm versionMeta
		if json.Unmarshal(mm.Data, &vm) == nil {
			v.Seq, v.N, v.Origin, v.From, v.Request = vm.Seq, vm.N, vm.Origin, vm.From, vm.Request
		}
	}
	return v
}

// read reads version file path of model: its state and description.
func readVersion(model, path string) (*Model, Version, error) {
	snap, err := ReadFile(path)
	if err != nil {
		return nil, Version{}, err
	}
	m := snap.Model(model)
	if m == nil {
		return nil, Version{}, fmt.Errorf("%s: %w", path, &CorruptError{Part: "version", Detail: "holds no state of model " + model})
	}
	return m, versionOf(model, snap), nil
}

// List returns model's versions, newest first, and the version files that
// do not read (corrupt, truncated: reported, never returned as versions).
// A model without versions has none of either.
func (s *VersionStore) List(model string) ([]Version, []BadVersion, error) {
	if !validModelDir(model) {
		return nil, nil, fmt.Errorf("snapshot: versions: %q is not a model name", model)
	}
	dir := filepath.Join(s.dir, model)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: versions of %s: %w", model, err)
	}
	seqs := fileSeqs(ents)
	var out []Version
	var bad []BadVersion
	for _, seq := range seqs {
		p := filepath.Join(dir, FileName(seq))
		_, v, err := readVersion(model, p)
		switch {
		case errors.Is(err, os.ErrNotExist): // pruned meanwhile
		case err != nil:
			bad = append(bad, BadVersion{Version: seq, Path: p, Err: err})
		default:
			out = append(out, v)
		}
	}
	return out, bad, nil
}

// Load returns version v of model: its state and description. The error
// wraps ErrNoVersion when there is no such version file, ErrCorrupt when
// it does not verify.
func (s *VersionStore) Load(model string, v uint64) (*Model, Version, error) {
	if !validModelDir(model) {
		return nil, Version{}, fmt.Errorf("%w: %q is not a model name", ErrNoVersion, model)
	}
	p := filepath.Join(s.dir, model, FileName(v))
	m, ver, err := readVersion(model, p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, Version{}, fmt.Errorf("%w: model %s has no version %d", ErrNoVersion, model, v)
	}
	if err != nil {
		return nil, Version{}, err
	}
	return m, ver, nil
}

// Newest returns the number of model's newest version file, valid or not
// (0 when it has none): the next version is numbered past it.
func (s *VersionStore) Newest(model string) (uint64, error) {
	if !validModelDir(model) {
		return 0, fmt.Errorf("snapshot: versions: %q is not a model name", model)
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, model))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("snapshot: versions of %s: %w", model, err)
	}
	var newest uint64
	for _, e := range ents {
		if seq, ok := parseFileName(e.Name()); ok && e.Type().IsRegular() {
			newest = max(newest, seq)
		}
	}
	return newest, nil
}

// PendingRollback is a rollback requested while the service was stopped
// (RequestRollback): the service applies it at start.
type PendingRollback struct {
	Model       string    `json:"model"`
	To          uint64    `json:"to"`
	ID          string    `json:"id"`
	RequestedAt time.Time `json:"requested_at"`
}

// RequestRollback writes a pending rollback of model to version to, which
// must be there and read; a pending rollback of the model already there is
// replaced.
func (s *VersionStore) RequestRollback(model string, to uint64) (PendingRollback, error) {
	if _, _, err := s.Load(model, to); err != nil {
		return PendingRollback{}, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	p := PendingRollback{Model: model, To: to, ID: hex.EncodeToString(id[:]), RequestedAt: time.Now().UTC()}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return PendingRollback{}, err
	}
	dir := filepath.Join(s.dir, model)
	if err := writeFileDurable(dir, PendingRollbackFile, append(b, '\n')); err != nil {
		return PendingRollback{}, fmt.Errorf("snapshot: rollback request: %w", err)
	}
	return p, nil
}

// PendingRollbacks returns the rollbacks requested while the service was
// stopped, by model name; a request file that does not read is an error
// naming it.
func (s *VersionStore) PendingRollbacks() ([]PendingRollback, error) {
	models, err := s.Models()
	if err != nil {
		return nil, err
	}
	var out []PendingRollback
	for _, m := range models {
		path := filepath.Join(s.dir, m, PendingRollbackFile)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot: rollback request: %w", err)
		}
		var p PendingRollback
		if err := json.Unmarshal(b, &p); err != nil || p.Model != m || p.To == 0 || p.ID == "" {
			return nil, fmt.Errorf("snapshot: rollback request %s is not a rollback request of model %s (%v): remove it, or write it again with streamer models rollback", path, m, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ClearRollback removes the pending rollback p of its model once it is
// applied and recorded, unless the file now holds another request.
func (s *VersionStore) ClearRollback(p PendingRollback) error {
	dir := filepath.Join(s.dir, p.Model)
	path := filepath.Join(dir, PendingRollbackFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var cur PendingRollback
	if json.Unmarshal(b, &cur) == nil && cur.ID != p.ID {
		return nil // a newer request
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return osFS{}.SyncDir(dir)
}

// writeFileDurable writes data as dir/name atomically: a temp file, fsync,
// rename, directory fsync (dir is created when missing).
func writeFileDurable(dir, name string, data []byte) (err error) {
	if err := mkdirDurable(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return osFS{}.SyncDir(dir)
}
