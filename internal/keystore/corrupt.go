package keystore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// ErrCorrupt marks the errors of data the store holds but cannot read back
// (*CorruptError): compare with errors.Is.
var ErrCorrupt = errors.New("keystore: corrupt data")

// CorruptError is a read of the store that met damaged data: a block of one
// of Pebble's files that fails its checksum (Pebble's pebble.ErrCorruption),
// or a marker or undo record that does not decode. errors.Is(err,
// ErrCorrupt) holds for it, and errors.Is(err, pebble.ErrCorruption) when
// Pebble found it. The damage stays until the file is replaced: reading the
// same data again fails again.
type CorruptError struct {
	Op    string // what read it: "get", "scan", "apply to", "read marker of", "undo", ...
	Table string // the table, as "scope"/"model" ("" for the whole store)
	Path  string // the file Pebble found damaged ("" when it does not say)
	Err   error
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("keystore: ")
	b.WriteString(e.Op)
	if e.Table != "" {
		b.WriteString(" " + e.Table)
	}
	b.WriteString(": corrupt data")
	if e.Path != "" {
		b.WriteString(" in " + e.Path)
	}
	b.WriteString(": ")
	b.WriteString(firstLine(e.Err.Error()))
	return b.String()
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Is reports ErrCorrupt, and pebble.ErrCorruption for damage Pebble found
// (Pebble marks its errors in a way the standard errors.Is does not see).
func (e *CorruptError) Is(target error) bool {
	return target == ErrCorrupt || (target == pebble.ErrCorruption && pebble.IsCorruptionError(e.Err))
}

// firstLine is s up to its first newline: Pebble's corruption errors carry
// details on further lines.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// corruptErr returns err as a *CorruptError of op on table when Pebble
// marked it a corruption (or it is one already), else nil.
func corruptErr(op, table string, err error) *CorruptError {
	if err == nil {
		return nil
	}
	if ce, ok := errors.AsType[*CorruptError](err); ok {
		return ce
	}
	if !pebble.IsCorruptionError(err) {
		return nil
	}
	ce := &CorruptError{Op: op, Table: table, Err: err}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		ce.Path = info.Path
	}
	return ce
}

// fail wraps err, an error of op on t, in the package's messages: a
// corruption as a *CorruptError, anything else as "keystore: op table: err".
func (t *Table) fail(op string, err error) error {
	if ce := corruptErr(op, t.name(), err); ce != nil {
		return ce
	}
	return fmt.Errorf("keystore: %s %s: %w", op, t.name(), err)
}

// badRecord is a marker or undo record of t that does not decode.
func (t *Table) badRecord(op string, err error) error {
	return &CorruptError{Op: op, Table: t.name(), Err: err}
}

// corruptions is what Pebble reported corrupt through its event listener.
// Pebble's default listener calls Logger.Fatalf, which panics in the middle
// of a read and leaves the file cache's references held (the next eviction
// or Close panics: "element has outstanding references"); the read's error
// carries the same report, so the listener only logs it, once per file.
type corruptions struct {
	log   *slog.Logger
	n     atomic.Int64
	mu    sync.Mutex
	files map[string]bool
}

// listenCorruption makes opts' event listener report data corruption to
// the returned corruptions instead of Pebble's default (Fatalf). It keeps
// the listener's other events.
func listenCorruption(opts *pebble.Options, log *slog.Logger) *corruptions {
	c := &corruptions{log: log, files: map[string]bool{}}
	if opts.EventListener == nil {
		opts.EventListener = &pebble.EventListener{}
	}
	opts.EventListener.DataCorruption = c.report
	return c
}

func (c *corruptions) report(info pebble.DataCorruptionInfo) {
	c.n.Add(1)
	c.mu.Lock()
	seen := c.files[info.Path]
	c.files[info.Path] = true
	c.mu.Unlock()
	if !seen && c.log != nil {
		c.log.Error("keystore: corrupt data in a key store file: the keys stored in its damaged blocks cannot be read (`streamer snapshot verify` lists the damage)",
			"file", info.Path, "err", firstLine(fmt.Sprint(info.Details)))
	}
}

// Corruptions returns how many reads met corrupt data since the store was
// opened.
func (db *DB) Corruptions() int64 { return db.corrupt.n.Load() }
