package keystore

// Durability and disk space: how the store's writes reach the disk, what
// they cost in space, and what a failed one leaves (see "Writes and disk
// space" in the package documentation).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	// l0StopWrites is far above Pebble's default (12 sublevels): a flush
	// that met it would wait for compactions while holding the commit
	// pipeline, and compactions cannot run on a full disk. Reads of a
	// store that deep in L0 are slower, never stuck.
	l0StopWrites = 1000

	// maxManifest bounds the MANIFEST (Pebble's default: 128 MB) before it
	// is rewritten: every flush adds an edit to it, and every write here
	// is flushed.
	maxManifest = 1 << 20

	// logEvery is the least time between two lines of the same Pebble
	// message (format) in the log; the lines held back meanwhile are
	// counted in the next one.
	logEvery = 10 * time.Second
)

// Option tunes Open.
type Option func(*options)

type options struct {
	fs            vfs.FS      // nil: the operating system's
	onError       func(error) // Pebble's background errors (nil: none)
	volatile      bool        // in memory (Open("")): writes are not flushed
	noCompactions bool        // Pebble does not compact in the background (WithoutCompactions)
}

// WithFS makes the store read and write through fsys instead of the
// operating system's file system: for tests that inject faults (a full
// disk).
func WithFS(fsys vfs.FS) Option { return func(o *options) { o.fs = fsys } }

// WithoutCompactions keeps Pebble from compacting in the background: for
// tests that count the reads meeting damage a test put in a file, which a
// compaction would read too.
func WithoutCompactions() Option { return func(o *options) { o.noCompactions = true } }

// WithErrorHook calls fn with every error Pebble meets in the background
// (a flush or compaction that failed, and will be retried), also while Open
// waits for one: so that a caller can tell why an Open takes long.
func WithErrorHook(fn func(error)) Option { return func(o *options) { o.onError = fn } }

// handle is the DB's Pebble instance and what replaces it: after a failed
// write the instance is closed and opened again (reopen), which drops what
// did not reach the disk.
type handle struct {
	dir      string
	tmpl     *pebble.Options // cloned for every open
	volatile bool            // in memory (Open("")): writes are not flushed (nothing to make durable)

	wmu      sync.Mutex   // serializes writes (Apply, Undo, Clear) and reopens
	pmu      sync.RWMutex // readers hold it shared while they use p; reopen, exclusively
	readOnly bool         // p is read-only: opening for writing failed (guarded by pmu)
	down     error        // why p is read-only or nil (guarded by pmu)
	broken   atomic.Bool  // reopen before the next write

	flushes flushWatch
}

// ErrUnavailable is the error of a store whose Pebble instance could not be
// opened again after a failed write: nothing can be read or written until a
// write reopens it.
var ErrUnavailable = errors.New("keystore: unavailable")

// openPebble completes opts with the settings of every open and opens the
// store in dir (see reopen: read-only when a full disk refuses writes).
func (db *DB) openPebble(dir string, opts *pebble.Options, o options, log *slog.Logger) error {
	db.h.dir, db.h.volatile = dir, o.volatile
	opts.DisableWAL = true
	opts.L0StopWritesThreshold = l0StopWrites
	opts.MaxManifestFileSize = maxManifest
	pl := storeLogger{pebbleLogger: pebbleLogger{log}, db: db, limit: newLogLimit(logEvery)}
	opts.Logger = pl
	opts.AddEventListener(pebble.EventListener{
		FlushEnd: db.h.flushes.ended,
		BackgroundError: func(err error) {
			pl.limited(slog.LevelWarn, "background error", "pebble: background error (retried)", "err", firstLine(err.Error()))
			if o.onError != nil {
				o.onError(err)
			}
		},
	})
	db.h.tmpl = opts.Clone()
	err := db.reopen()
	switch {
	case err != nil:
		return err
	case db.h.readOnly && !IsNoSpace(db.h.down):
		// Only a full disk opens it read-only: anything else stops Open.
		err = db.h.down
		_ = db.closePebble()
		return err
	case db.h.readOnly:
		log.Warn("keystore: opened read-only: "+errorText(db.h.down)+"; writing is tried again at every write, and resumes once the disk has room", "dir", dir)
	}
	return nil
}

// closePebble closes the Pebble instance, after the write in progress.
func (db *DB) closePebble() error {
	db.h.wmu.Lock()
	defer db.h.wmu.Unlock()
	db.h.pmu.Lock()
	defer db.h.pmu.Unlock()
	if db.p == nil {
		return nil
	}
	err := closeQuietly(db.p)
	db.p = nil
	db.h.down = errors.New("closed")
	return err
}

// reopen closes the Pebble instance (if any) and opens the store again
// (the caller holds wmu, or is Open): for writing, or, when that fails (a
// full disk refuses the files an open writes), read-only, so that reads go
// on; then broken stays set and the next write tries again.
func (db *DB) reopen() error {
	h := &db.h
	h.pmu.Lock()
	defer h.pmu.Unlock()
	var cerr error
	if db.p != nil {
		cerr = closeQuietly(db.p)
		db.p = nil
	}
	opts := h.tmpl.Clone()
	// Best effort: a log left there is replayed, as it would be anyway.
	_ = dropEmptyLogs(cmp.Or[vfs.FS](h.tmpl.FS, vfs.Default), h.dir)
	p, err := pebble.Open(h.dir, opts)
	if err == nil {
		db.p, h.readOnly, h.down = p, false, nil
		h.broken.Store(false)
		return nil
	}
	werr := err
	if cerr != nil {
		werr = errors.Join(err, cerr)
	}
	ro := h.tmpl.Clone()
	ro.ReadOnly = true
	if p, err = pebble.Open(h.dir, ro); err != nil {
		db.p, h.readOnly, h.down = nil, false, werr
		h.broken.Store(true)
		return werr
	}
	db.p, h.readOnly, h.down = p, true, werr
	h.broken.Store(true)
	return nil
}

// minRecord is the size of the smallest write-ahead log record: a chunk
// header (7 bytes, 11 in the recyclable format) and a batch header (12).
const minRecord = 7 + 12

// dropEmptyLogs removes the write-ahead logs in dir too short to hold a
// record. Every open for writing creates one, which this store never writes
// (the WAL is disabled), and the next open replays it and flushes the empty
// memtable it makes: a flush Open waits for, and Pebble retries without end
// when it fails, so that on a full disk Open would never return. A log an
// earlier version wrote (with records) is kept, and replayed.
func dropEmptyLogs(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		path := fsys.PathJoin(dir, name)
		fi, err := fsys.Stat(path)
		if err != nil || fi.IsDir() || fi.Size() >= minRecord {
			continue
		}
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// closeQuietly closes p, a Pebble instance that may have failed: a panic of
// its Close is an error.
func closeQuietly(p *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("close after a failure: %v", r)
		}
	}()
	return p.Close()
}

// reader returns the Pebble instance for a read, held until doneReading.
func (db *DB) reader() (*pebble.DB, error) {
	db.h.pmu.RLock()
	if db.p == nil {
		err := db.h.down
		db.h.pmu.RUnlock()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return db.p, nil
}

func (db *DB) doneReading() { db.h.pmu.RUnlock() }

// beginWrite serializes a write with every other (and with reopens), and
// opens the store for writing first if the last write failed. On an error
// the write must not go ahead (and endWrite is not called).
func (db *DB) beginWrite() error {
	h := &db.h
	h.wmu.Lock()
	if h.broken.Load() {
		_ = db.reopen() // its error is h.down
	}
	h.pmu.RLock()
	ro, down, p := h.readOnly, h.down, db.p
	h.pmu.RUnlock()
	switch {
	case p == nil:
		h.wmu.Unlock()
		return fmt.Errorf("%w: %w", ErrUnavailable, down)
	case ro:
		h.wmu.Unlock()
		return fmt.Errorf("keystore: read-only: could not open for writing: %w", down)
	}
	return nil
}

func (db *DB) endWrite() { db.h.wmu.Unlock() }

// commit makes b durable (the caller is between beginWrite and endWrite):
// committed without the write-ahead log (there is none) and flushed, so
// that when commit returns b is in an sstable named by the synced MANIFEST.
// A failed flush (a full disk) is reported, not retried: the store is
// reopened at once, which drops b (it never reached the disk) along with
// Pebble's retries. want, when not nil, is the marker of t that b writes:
// should the store show it after the reopen (the flush failed after making
// b durable), the commit succeeded.
func (t *Table) commit(b *pebble.Batch, want *Marker) error {
	db := t.db
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	if db.h.volatile {
		return nil
	}
	err := db.flush()
	if err == nil {
		return nil
	}
	db.h.broken.Store(true)
	if rerr := db.reopen(); rerr != nil {
		return fmt.Errorf("%w (and reopening the store: %w)", err, rerr)
	}
	if want != nil {
		if m, _, merr := t.readMarker(); merr == nil && markerEqual(m, *want) {
			return nil
		}
	}
	return err
}

func markerEqual(a, b Marker) bool {
	return a.Seq == b.Seq && a.Keys == b.Keys && string(a.Meta) == string(b.Meta)
}

// flush flushes the memtable and waits until it is in an sstable, or until
// a flush fails.
func (db *DB) flush() error {
	failed := db.h.flushes.watch()
	flushed, err := db.p.AsyncFlush()
	if err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	select {
	case <-flushed:
		return nil
	case <-failed:
		select {
		case <-flushed: // the failure was an earlier flush's
			return nil
		default:
		}
		return fmt.Errorf("flush: %w", db.h.flushes.last())
	}
}

// flushWatch wakes the writers waiting for a flush when one fails.
type flushWatch struct {
	mu     sync.Mutex
	failed chan struct{} // closed at the next failure
	err    error
}

func (w *flushWatch) watch() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = make(chan struct{})
	}
	return w.failed
}

func (w *flushWatch) last() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// ended is Pebble's FlushEnd event.
func (w *flushWatch) ended(info pebble.FlushInfo) {
	// An empty memtable's flush ends with an error that is not one.
	if info.Err == nil || strings.Contains(info.Err.Error(), "empty table") {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = info.Err
	if w.failed != nil {
		close(w.failed)
		w.failed = nil
	}
}

// IsNoSpace reports whether err is a full disk's (ENOSPC) or an exceeded
// quota's (EDQUOT).
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// errorText says what err is in a few words: the system's message for a
// full disk or another I/O error, else the error's first line.
func errorText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return firstLine(err.Error())
}

// ioFailure returns the first of args that is an error of the operating
// system (an I/O error, a full disk), nil if there is none.
func ioFailure(args []any) error {
	for _, a := range args {
		err, ok := a.(error)
		if !ok {
			continue
		}
		var pe *fs.PathError
		var errno syscall.Errno
		if errors.As(err, &pe) || errors.As(err, &errno) {
			return err
		}
	}
	return nil
}

// logLimit lets at most one line of each kind through per interval and
// counts the others, for the next one.
type logLimit struct {
	every time.Duration
	mu    sync.Mutex
	kinds map[string]*logKind
}

type logKind struct {
	at   time.Time
	held int
}

// maxLogKinds bounds the kinds remembered; forgetting one only lets its
// next line through.
const maxLogKinds = 64

func newLogLimit(every time.Duration) *logLimit {
	return &logLimit{every: every, kinds: map[string]*logKind{}}
}

// pass reports whether a line of kind goes to the log, and how many were
// held back since the last that did.
func (l *logLimit) pass(kind string) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	k := l.kinds[kind]
	if k != nil && now.Sub(k.at) < l.every {
		k.held++
		return false, 0
	}
	if k == nil {
		if len(l.kinds) >= maxLogKinds {
			clear(l.kinds)
		}
		k = &logKind{}
		l.kinds[kind] = k
	}
	held = k.held
	k.at, k.held = now, 0
	return true, held
}

// limited logs msg with args at level unless a line of kind went out less
// than the limit's interval ago; the first line after held-back ones says
// how many.
func (l storeLogger) limited(level slog.Level, kind, msg string, args ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	ok, held := l.limit.pass(kind)
	if !ok {
		return
	}
	if held > 0 {
		args = append(args, "suppressed", held)
	}
	l.log.Log(context.Background(), level, msg, args...)
}

// storeLogger is the Pebble logger of an open store: pebbleLogger, but each
// kind of error (format) at most once per limit's interval (Pebble retries a
// failed flush or compaction at once, again and again, on a full disk), and
// a Fatalf of an I/O error (a MANIFEST write on a full disk, after which
// Pebble returns the error) marks the instance broken, to be reopened before
// the next write, instead of panicking.
type storeLogger struct {
	pebbleLogger
	db    *DB
	limit *logLimit
}

// Errorf logs at Warn, limited.
func (l storeLogger) Errorf(format string, args ...any) {
	l.limited(slog.LevelWarn, format, "pebble: "+fmt.Sprintf(format, args...))
}

// Fatalf logs at Error and panics, unless an argument is an I/O error.
func (l storeLogger) Fatalf(format string, args ...any) {
	if ioFailure(args) == nil {
		l.pebbleLogger.Fatalf(format, args...)
		return
	}
	l.db.h.broken.Store(true)
	l.limited(slog.LevelError, format, "pebble: "+fmt.Sprintf(format, args...)+" (the key store is opened again before its next write)")
}

// Writable returns why the store cannot be written now (nil when it can): it
// was opened read-only, or could not be opened again, after a full disk
// refused its writes. The next write tries again.
func (db *DB) Writable() error {
	db.h.pmu.RLock()
	defer db.h.pmu.RUnlock()
	switch {
	case db.p == nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, db.h.down)
	case db.h.readOnly:
		return fmt.Errorf("keystore: read-only: could not open for writing: %w", db.h.down)
	}
	return nil
}
