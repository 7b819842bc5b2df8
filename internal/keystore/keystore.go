// Package keystore is the embedded store of per-key model states: the keys
// that are not hot enough for the in-memory LRU live here, possibly millions
// of them. It is a Pebble database split into tables, one per model and scope.
//
// A checkpoint writes only the keys that changed since the previous one,
// together with a marker naming the checkpoint (seq), in one synced batch: the
// table reflects either the previous checkpoint or the new one, never a mix.
// A restore opens the database and reads the marker; nothing proportional to
// the number of stored keys is read.
//
// # Writes and disk space
//
// There is no write-ahead log: a write (Apply, Undo, Clear) is committed to
// the memtable and flushed, and returns once it is in an sstable that the
// synced MANIFEST names; a crash before that loses all of it.
// Pebble's log would cost space for nothing (it preallocates 1.1 times the
// memtable per log, and keeps up to four: 70 MB with 16 MB memtables), and
// it cannot fail a write cleanly: a log write or rotation that fails on a
// full disk ends in a panic, some with Pebble's locks held. A flush that
// fails is an error of the write (ENOSPC: IsNoSpace); the store is then
// closed and opened again, which drops the unflushed batch and Pebble's
// endless retries of its flush, so the table stays exactly at its previous
// state, and the next write tries again. When the disk refuses even the few
// files an open writes, the store is opened read-only: reads go on, writes
// fail until the disk has room. Pebble's background errors are logged at
// most once per 10 s per kind, with the count of those held back. On disk
// the store takes about twice its states' bytes, up to five or six times
// while a compaction rewrites them in a small store (undo records,
// overwritten states not yet compacted away, a compaction's output beside
// its inputs); nothing is preallocated (TestSpaceNeeded).
//
// # Undo
//
// The same batch records how to take the table back: the marker it replaces
// and, of every key it writes or deletes, the state it replaces or that the
// key was absent. Undo writes those back, with the old marker, in one synced
// batch, and removes the record: the table returns exactly to the previous
// checkpoint, for a service whose newest snapshots turned out corrupt and
// that restores an older one (UndoTo goes back several checkpoints). The
// records of the last SetUndoDepth Applies are kept (1 by default; the
// service keeps as many as snapshot.keep); each Apply drops the records that
// fall out of that depth, Undo the one it used, Clear all. A record holds the
// states that the batch overwrites or deletes (a new key costs only its
// name), so Apply writes up to twice as much: 1.5 times for a checkpoint of
// half new keys. Apply reads the replaced states in the existence check it
// does anyway.
//
// # Corruption
//
// Every block Pebble reads is checked against its checksum. A block that
// fails (a bad disk, a file changed behind the store's back) makes the read
// fail with a *CorruptError (errors.Is ErrCorrupt and pebble.ErrCorruption),
// never a panic: a Get of a key in a damaged block, a Scan or Apply that
// reaches one, the marker or undo record of a table in one. The rest of the
// store reads as before. Check reads every block of every file, for
// `streamer snapshot verify`.
//
// # Key layout
//
// A table's id is uvarint(len(scope)) scope uvarint(len(model)) model; the
// encoding is prefix-free, so no table's id is a prefix of another's and keys
// of different tables never collide. Pebble keys are
//
//	0x00 id seq    an undo record: of the Apply that wrote marker seq (u64 big-endian)
//	0x01 id        the table's marker
//	0x02 id key    an entity key's state
//
// (Earlier versions kept one undo record, at 0x00 id: Undo takes it as the
// record of the current marker, and the next Apply deletes it.)
//
// Markers sort together, so listing tables reads markers only, and a table's
// states are one contiguous range that Scan iterates and Clear deletes. Undo
// records sort before all of them: a record can be as large as a
// checkpoint's states, and a seek past a table's last key (as Apply's
// existence check of a new key does) loads the block of the next key in the
// store, so that next key must not be a record. A marker's value is a version
// byte (1), the seq and the key count as u64 little-endian, then the caller's
// metadata.
//
// An undo record's value is a version byte (1), the replaced marker, then one
// entry per key in key order until the end: uvarint(len(key)) key and the
// replaced state. The marker and each state are 0 (absent) or 1 followed by
// uvarint(len(value)) value, the marker's value encoded as above.
package keystore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	nsUndo   = 0x00 // namespace byte of undo records (see the package documentation)
	nsMarker = 0x01 // namespace byte of markers
	nsData   = 0x02 // namespace byte of states

	markerVersion = 1
	markerHeader  = 1 + 8 + 8 // version, seq, keys

	undoVersion = 1
	undoAbsent  = 0 // an undo record's marker or state that was not stored
	undoPresent = 1 // followed by uvarint(len(value)) value

	// cacheSize and memTableSize bound Pebble's memory: the hot keys are in the
	// caller's LRU, so this store sees mostly cold reads and checkpoint writes
	// of a few MB; Pebble keeps up to two memtables before it stalls writes.
	cacheSize    = 32 << 20
	memTableSize = 16 << 20

	// bloomBitsPerKey sizes the filters that let Get and Apply's existence
	// checks skip files without the key (about 1% false positives).
	bloomBitsPerKey = 10

	memDir = "keystore" // directory of an in-memory store in its vfs.MemFS
)

// DB is an embedded key-value store (Pebble) of per-key model states, split
// into tables. It is safe for concurrent use.
type DB struct {
	p   *pebble.DB
	mem bool // in memory: nothing to flush at Close

	mu     sync.Mutex
	tables map[string]*Table // by id, so that writers of one table share its lock
	closed bool

	undoDepth atomic.Int32 // undo records kept per table (SetUndoDepth); 0 means 1
	corrupt   *corruptions // what Pebble reported corrupt

	h handle // p and what replaces it after a failed write (durable.go)
}

// Open opens or creates the store in dir. dir == "" keeps it in memory
// (Pebble's vfs.NewMem): for services without snapshot.dir and for tests; it
// is lost at exit. log may be nil (discard); Pebble's messages go to it at
// Debug (informational) and Warn (errors).
func Open(dir string, log *slog.Logger, opts ...Option) (*DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if dir == "" {
		o.volatile = true
		return open(vfs.NewMem(), memDir, log, o)
	}
	return open(o.fs, dir, log, o)
}

// open opens the store in dir of fs; a nil fs is Pebble's default, the
// operating system's file system with disk-health checks.
func open(fs vfs.FS, dir string, log *slog.Logger, o ...options) (*DB, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := &pebble.Options{
		FS:                 fs,
		CacheSize:          cacheSize,
		MemTableSize:       memTableSize,
		FormatMajorVersion: pebble.FormatNewest,
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	oo := append(o, options{})[0]
	opts.DisableAutomaticCompactions = oo.noCompactions
	corrupt := listenCorruption(opts, log)
	_, isMem := fs.(*vfs.MemFS)
	db := &DB{mem: isMem, tables: make(map[string]*Table), corrupt: corrupt}
	if err := db.openPebble(dir, opts, oo, log); err != nil {
		return nil, fmt.Errorf("keystore: open %s: %w", dir, err)
	}
	return db, nil
}

// Close closes the store, after the write in progress if there is one
// (every write is flushed when it returns: there is nothing else to
// flush). It is idempotent; the DB and its tables must not be used after
// it.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	if err := db.closePebble(); err != nil {
		return fmt.Errorf("keystore: close: %w", err)
	}
	return nil
}

// Table is one model's states in one scope (e.g. scope "" or "3" for input
// partition 3, model "recs"). It is safe for concurrent use; Apply, Undo and
// Clear of one table are serialized (they maintain the key count and the undo
// record), everything else runs in parallel.
type Table struct {
	db           *DB
	scope, model string
	marker       []byte // Pebble key of the marker
	undo         []byte // Pebble key of the undo record
	lo, hi       []byte // Pebble keys of states are in [lo, hi); lo is their prefix

	mu sync.Mutex // serializes Apply, Undo and Clear
}

// Table returns the table of model in scope. Keys of different tables never
// collide. Every call for the same (scope, model) returns the same *Table.
func (db *DB) Table(scope, model string) *Table {
	id := tableID(scope, model)
	db.mu.Lock()
	defer db.mu.Unlock()
	if t, ok := db.tables[string(id)]; ok {
		return t
	}
	lo := append([]byte{nsData}, id...)
	t := &Table{
		db:     db,
		scope:  scope,
		model:  model,
		marker: append([]byte{nsMarker}, id...),
		undo:   append([]byte{nsUndo}, id...),
		lo:     lo,
		hi:     prefixEnd(lo),
	}
	db.tables[string(id)] = t
	return t
}

// tableID encodes (scope, model), length-prefixed so that no id is a prefix
// of another.
func tableID(scope, model string) []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(scope)+len(model))
	b = binary.AppendUvarint(b, uint64(len(scope)))
	b = append(b, scope...)
	b = binary.AppendUvarint(b, uint64(len(model)))
	return append(b, model...)
}

// parseTableID decodes tableID's encoding; ok is false unless id is exactly one.
func parseTableID(id []byte) (scope, model string, ok bool) {
	field := func() (string, bool) {
		n, w := binary.Uvarint(id)
		if w <= 0 || n > uint64(len(id)-w) {
			return "", false
		}
		s := string(id[w : w+int(n)])
		id = id[w+int(n):]
		return s, true
	}
	if scope, ok = field(); !ok {
		return "", "", false
	}
	if model, ok = field(); !ok || len(id) != 0 {
		return "", "", false
	}
	return scope, model, true
}

// prefixEnd returns the smallest key greater than every key with prefix p.
// p must not be all 0xff (ours start with a namespace byte).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic("keystore: prefix of 0xff bytes only")
}

// getOptions are the options of Get's iterators: the bloom filters of every
// level are consulted (Pebble's iterators skip those of the last level by
// default), so a key that is not stored costs no data block, and a damaged
// block fails only the reads of keys that may be in it (Apply's existence
// checks use the same filters, so they agree with Get).
var getOptions = pebble.IterOptions{UseL6Filters: true}

// keyBufs holds scratch buffers for the Pebble keys of Get: Pebble keeps the
// key in a pooled iterator, so a stack buffer would escape.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// Get appends key's stored state to dst. found is false (and val == dst) when
// the key is not stored. It allocates nothing beyond growing dst. A key in a
// damaged block is an error (*CorruptError), every time it is read.
//
// It reads through a prefix seek of a new iterator rather than pebble.DB.Get:
// both consult the bloom filters (getOptions) and cost the same, but DB.Get allocates for
// every sstable it looks into (Pebble v2.1.7, sstable format v4 and later),
// while iterators come from Pebble's pools.
func (t *Table) Get(key, dst []byte) (val []byte, found bool, err error) {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	k := append(append((*bp)[:0], t.lo...), key...)
	*bp = k
	p, err := t.db.reader()
	if err != nil {
		return dst, false, t.fail("get from", err)
	}
	defer t.db.doneReading()
	it, err := p.NewIter(&getOptions)
	if err != nil {
		return dst, false, t.fail("get from", err)
	}
	if it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k) {
		v, verr := it.ValueAndErr()
		if verr == nil {
			val, found = append(dst, v...), true
		}
	}
	if err := it.Close(); err != nil { // includes ValueAndErr's error
		return dst, false, t.fail("get from", err)
	}
	if !found {
		return dst, false, nil
	}
	return val, true, nil
}

// Marker is what the table reflects: the checkpoint seq its last Apply wrote,
// the number of keys stored, and opaque metadata of the caller (e.g. the
// model's total example count).
type Marker struct {
	Seq  uint64
	Keys int64
	Meta []byte
}

// Marker returns the table's marker (the zero Marker when nothing was
// applied). It is one point read, whatever the number of keys stored.
func (t *Table) Marker() (Marker, error) {
	m, _, err := t.readMarker()
	return m, err
}

// readMarker returns the table's marker and its stored value (a copy; nil
// when there is no marker, and then m is the zero Marker).
func (t *Table) readMarker() (m Marker, raw []byte, err error) {
	p, err := t.db.reader()
	if err != nil {
		return Marker{}, nil, t.fail("read marker of", err)
	}
	defer t.db.doneReading()
	v, closer, err := p.Get(t.marker)
	if errors.Is(err, pebble.ErrNotFound) {
		return Marker{}, nil, nil
	}
	if err != nil {
		return Marker{}, nil, t.fail("read marker of", err)
	}
	raw = bytes.Clone(v) // v is valid until closer.Close
	if err := closer.Close(); err != nil {
		return Marker{}, nil, t.fail("read marker of", err)
	}
	if m, err = decodeMarker(raw); err != nil {
		return Marker{}, nil, t.badRecord("read marker of", err)
	}
	return m, raw, nil
}

// name names the table in messages: scope/model, quoted.
func (t *Table) name() string { return fmt.Sprintf("%q/%q", t.scope, t.model) }

// encodeMarker encodes m as a marker's value (see the package documentation).
func encodeMarker(m Marker) []byte {
	b := make([]byte, markerHeader, markerHeader+len(m.Meta))
	b[0] = markerVersion
	binary.LittleEndian.PutUint64(b[1:], m.Seq)
	binary.LittleEndian.PutUint64(b[9:], uint64(m.Keys))
	return append(b, m.Meta...)
}

// decodeMarker decodes encodeMarker's encoding; Meta is a copy (nil if empty).
func decodeMarker(v []byte) (Marker, error) {
	if len(v) < markerHeader || v[0] != markerVersion {
		return Marker{}, fmt.Errorf("corrupt marker (%d bytes, version %d)", len(v), firstByte(v))
	}
	m := Marker{
		Seq:  binary.LittleEndian.Uint64(v[1:]),
		Keys: int64(binary.LittleEndian.Uint64(v[9:])),
	}
	if len(v) > markerHeader {
		m.Meta = bytes.Clone(v[markerHeader:])
	}
	return m, nil
}

// firstByte returns v[0], or -1 for an empty v, for messages.
func firstByte(v []byte) int {
	if len(v) == 0 {
		return -1
	}
	return int(v[0])
}

// Apply writes states[i] under keys[i] (a nil state deletes the key) and the
// marker with seq and meta, in one Pebble batch, committed and flushed (see
// "Writes and disk space"): after it returns, all of it is durable; after a
// crash during it, or when it fails, none of it is there. It maintains Marker.Keys (keys that were not stored
// before and are now, minus deleted ones that were stored) and returns the
// new marker. Of duplicate keys within one call the last wins.
//
// Counting needs to know which keys are stored, so Apply reads each distinct
// key once, in key order through one iterator; deletes of keys not stored are
// not written. The same read gives the states that the batch replaces: the
// batch also replaces the table's undo record with them and the old marker
// (see Undo), so it writes up to twice the bytes of the states (1.5 times
// when half of the keys are new).
func (t *Table) Apply(seq uint64, meta []byte, keys, states [][]byte) (Marker, error) {
	if len(keys) != len(states) {
		return Marker{}, fmt.Errorf("keystore: apply to %s: %d keys but %d states", t.name(), len(keys), len(states))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.db.beginWrite(); err != nil {
		return Marker{}, fmt.Errorf("keystore: apply to %s: %w", t.name(), err)
	}
	defer t.db.endWrite()

	old, oldRaw, err := t.readMarker()
	if err != nil {
		return Marker{}, err
	}

	// Distinct keys in key order, the last of duplicates winning: a stable
	// sort keeps duplicates in call order.
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return bytes.Compare(keys[a], keys[b]) })
	w := 0
	for i, j := range order {
		if i+1 < len(order) && bytes.Equal(keys[j], keys[order[i+1]]) {
			continue
		}
		order[w] = j
		w++
	}
	order = order[:w]

	// Which keys are stored, and the undo record: the states replaced, read
	// in the same pass, guessed about as large as the new ones.
	undoSize := 2 + binary.MaxVarintLen64 + len(oldRaw)
	for _, j := range order {
		undoSize += len(keys[j]) + len(states[j]) + 2*binary.MaxVarintLen32 + 1
	}
	undo := make([]byte, 0, undoSize)
	undo = append(undo, undoVersion)
	undo = appendUndoValue(undo, oldRaw, oldRaw != nil)
	stored, undo, err := t.readStored(keys, states, order, undo)
	if err != nil {
		return Marker{}, t.fail("apply to", err)
	}

	size := len(t.marker) + markerHeader + len(meta) + len(t.undo) + len(undo) + 32
	for _, j := range order {
		size += len(t.lo) + len(keys[j]) + len(states[j]) + 16
	}
	b := t.db.p.NewBatchWithSize(size)
	defer b.Close()
	keysN, err := t.write(b, keys, states, order, stored, old.Keys)
	if err != nil {
		return Marker{}, fmt.Errorf("keystore: apply to %s: %w", t.name(), err)
	}
	m := Marker{Seq: seq, Keys: keysN, Meta: bytes.Clone(meta)}
	if err := b.Set(t.marker, encodeMarker(m), nil); err != nil {
		return Marker{}, fmt.Errorf("keystore: apply to %s: %w", t.name(), err)
	}
	if err := t.putUndo(b, seq, old.Seq, undo); err != nil {
		return Marker{}, fmt.Errorf("keystore: apply to %s: %w", t.name(), err)
	}
	if err := t.commit(b, &m); err != nil {
		return Marker{}, fmt.Errorf("keystore: apply to %s: commit: %w", t.name(), err)
	}
	return m, nil
}

// readStored reports for keys[j], j in order (distinct keys in key order),
// whether it is stored (stored[i] for order[i]), and appends to undo an
// entry for each key that the batch writes (not a delete of a key that is
// not stored): the state stored, or absent.
//
// Each key is looked up as Get does, through an iterator of its own (from
// Pebble's pools), so that Apply reads the blocks Get reads and no other:
// the prefix seek consults the bloom filters (a key Get found absent is
// found absent here without reading its block, which may be a damaged one
// of other keys), and one iterator's successive seeks would move forward
// from the previous key through the blocks between them. BenchmarkApply10k
// measured it within the noise of one iterator's seeks (about 150 ms/op on
// a loaded 2-core machine, both).
func (t *Table) readStored(keys, states [][]byte, order []int32, undo []byte) (stored []bool, _ []byte, err error) {
	stored = make([]bool, len(order))
	var k []byte
	for i, j := range order {
		k = append(append(k[:0], t.lo...), keys[j]...)
		it, err := t.db.p.NewIter(&getOptions)
		if err != nil {
			return nil, nil, err
		}
		stored[i] = it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k)
		if stored[i] || states[j] != nil {
			var prev []byte
			if stored[i] {
				prev, _ = it.ValueAndErr() // its error is Close's
			}
			undo = binary.AppendUvarint(undo, uint64(len(keys[j])))
			undo = append(undo, keys[j]...)
			undo = appendUndoValue(undo, prev, stored[i])
		}
		if err := it.Close(); err != nil {
			return nil, nil, fmt.Errorf("read stored keys: %w", err)
		}
	}
	return stored, undo, nil
}

// write adds keys[j], states[j] for j in order to b, stored[i] telling
// whether order[i] is stored, and returns the key count n updated for them.
// It skips deletes of keys that are not stored.
func (t *Table) write(b *pebble.Batch, keys, states [][]byte, order []int32, stored []bool, n int64) (int64, error) {
	var k []byte
	for i, j := range order {
		k = append(append(k[:0], t.lo...), keys[j]...)
		switch {
		case states[j] != nil:
			if !stored[i] {
				n++
			}
			op := b.SetDeferred(len(k), len(states[j]))
			copy(op.Key, k)
			copy(op.Value, states[j])
			if err := op.Finish(); err != nil {
				return 0, err
			}
		case stored[i]:
			n--
			if err := b.Delete(k, nil); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// appendUndoValue appends a marker or state of an undo record to dst: absent,
// or present and v.
func appendUndoValue(dst, v []byte, present bool) []byte {
	if !present {
		return append(dst, undoAbsent)
	}
	dst = append(dst, undoPresent)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// undoValue decodes appendUndoValue's encoding at the start of rec and
// returns the rest of rec; v aliases rec.
func undoValue(rec []byte) (v []byte, present bool, rest []byte, ok bool) {
	if len(rec) == 0 {
		return nil, false, nil, false
	}
	switch rec[0] {
	case undoAbsent:
		return nil, false, rec[1:], true
	case undoPresent:
		v, rest, ok = undoBytes(rec[1:])
		return v, true, rest, ok
	}
	return nil, false, nil, false
}

// undoBytes decodes uvarint(len(v)) v at the start of rec and returns the rest
// of rec; v aliases rec.
func undoBytes(rec []byte) (v, rest []byte, ok bool) {
	n, w := binary.Uvarint(rec)
	if w <= 0 || n > uint64(len(rec)-w) {
		return nil, nil, false
	}
	return rec[w : w+int(n)], rec[w+int(n):], true
}

// ErrNoUndo is the error of Undo and UndoTo when the table's undo records
// do not reach back as asked.
var ErrNoUndo = errors.New("keystore: nothing to undo")

// SetUndoDepth keeps the undo records of the last n Applies of every table
// (n < 1: 1, the default), so that UndoTo can take a table back up to n
// checkpoints: the service keeps as many as snapshots (snapshot.keep).
// Each table's next Apply drops the records beyond n.
func (db *DB) SetUndoDepth(n int) { db.undoDepth.Store(int32(min(max(n, 1), 1<<20))) }

// depth is the number of undo records kept per table.
func (db *DB) depth() uint64 {
	if d := db.undoDepth.Load(); d > 0 {
		return uint64(d)
	}
	return 1
}

// undoKey is the Pebble key of the undo record of the Apply that wrote
// marker seq.
func (t *Table) undoKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(t.undo)+8), t.undo...), seq)
}

// putUndo adds to b the undo record rec of an Apply that writes marker seq
// over marker oldSeq, and deletes the records that fall out of the depth
// (those of markers up to seq-depth, and the single record of earlier
// versions) and those at or past seq, which no marker reaches any more. It
// deletes them by name, not by a range deletion, which would make every
// read allocate until the memtable is flushed: the records that may exist
// are those the previous Apply kept, of markers oldSeq-depth+1 … oldSeq
// (only seq-depth when seq follows oldSeq, as checkpoints do; a lowered
// depth leaves older ones, which no Undo reaches, until Clear).
func (t *Table) putUndo(b *pebble.Batch, seq, oldSeq uint64, rec []byte) error {
	if err := b.Delete(t.undo, nil); err != nil {
		return err
	}
	depth := t.db.depth()
	for s := oldSeq + 1 - min(depth, oldSeq+1); s <= oldSeq; s++ {
		if s+depth <= seq || s >= seq {
			if err := b.Delete(t.undoKey(s), nil); err != nil {
				return err
			}
		}
	}
	return b.Set(t.undoKey(seq), rec, nil)
}

// undoRecord reads the undo record of marker seq and returns its key and
// value (valid until closer.Close); with legacy, an earlier version's
// single record stands in for it. ErrNoUndo when there is none.
func (t *Table) undoRecord(seq uint64, legacy bool) (key, rec []byte, closer io.Closer, err error) {
	keys := [][]byte{t.undoKey(seq)}
	if legacy {
		keys = append(keys, t.undo)
	}
	for _, key := range keys {
		rec, closer, err := t.db.p.Get(key) // writes only: between beginWrite and endWrite
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, nil, t.fail("read undo record of", err)
		}
		return key, rec, closer, nil
	}
	return nil, nil, nil, ErrNoUndo
}

// Undo takes the table back one checkpoint: it restores the states and the
// marker that the last Apply replaced, in one synced batch, and returns the
// restored marker. It fails (ErrNoUndo) when there is nothing to undo: no
// Apply since the table was created or cleared, or every kept record was
// used (SetUndoDepth).
//
// The batch also deletes the undo record. When the Apply undone was the
// table's first, the table returns to having no marker (the zero Marker, and
// Tables omits it). Its cost is proportional to the undone Apply's keys.
func (t *Table) Undo() (Marker, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.db.beginWrite(); err != nil {
		return Marker{}, fmt.Errorf("keystore: undo %s: %w", t.name(), err)
	}
	defer t.db.endWrite()
	return t.undo1()
}

// UndoTo takes the table back to checkpoint seq (a marker's Seq it had),
// undoing its last Applies one by one, each in a synced batch, and returns
// the restored marker. It first follows the undo records back: when they do
// not reach seq (fewer are kept, or the table never was at seq) it changes
// nothing and returns ErrNoUndo. After a crash in between, the table is at a
// checkpoint on the way, from which UndoTo goes on.
func (t *Table) UndoTo(seq uint64) (Marker, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.db.beginWrite(); err != nil {
		return Marker{}, fmt.Errorf("keystore: undo %s: %w", t.name(), err)
	}
	defer t.db.endWrite()
	m, _, err := t.readMarker()
	if err != nil {
		return Marker{}, err
	}
	steps := 0
	for at := m; at.Seq != seq; steps++ {
		if at.Seq < seq {
			return Marker{}, ErrNoUndo
		}
		_, rec, closer, err := t.undoRecord(at.Seq, steps == 0)
		if err != nil {
			return Marker{}, err
		}
		at, err = undoMarker(rec)
		closer.Close()
		if err != nil {
			return Marker{}, t.badRecord("undo", err)
		}
	}
	for range steps {
		if m, err = t.undo1(); err != nil {
			return Marker{}, err
		}
	}
	return m, nil
}

// undo1 is Undo with t.mu held, between beginWrite and endWrite.
func (t *Table) undo1() (Marker, error) {
	cur, _, err := t.readMarker()
	if err != nil {
		return Marker{}, err
	}
	key, rec, closer, err := t.undoRecord(cur.Seq, true)
	if err != nil {
		return Marker{}, err
	}
	b := t.db.p.NewBatchWithSize(len(rec) + len(rec)/4 + len(t.marker) + len(key) + 32)
	defer b.Close()
	m, err := t.undoBatch(b, rec) // copies rec's bytes into b
	if cerr := closer.Close(); err == nil && cerr != nil {
		return Marker{}, t.fail("undo", cerr)
	}
	if err != nil {
		return Marker{}, t.badRecord("undo", err)
	}
	if err := b.Delete(key, nil); err != nil {
		return Marker{}, fmt.Errorf("keystore: undo %s: %w", t.name(), err)
	}
	if err := t.commit(b, &m); err != nil {
		return Marker{}, fmt.Errorf("keystore: undo %s: commit: %w", t.name(), err)
	}
	return m, nil
}

// undoMarker decodes the marker an undo record restores (the zero Marker
// for none).
func undoMarker(rec []byte) (Marker, error) {
	if len(rec) == 0 || rec[0] != undoVersion {
		return Marker{}, fmt.Errorf("corrupt undo record (%d bytes, version %d)", len(rec), firstByte(rec))
	}
	raw, present, _, ok := undoValue(rec[1:])
	switch {
	case !ok:
		return Marker{}, fmt.Errorf("corrupt undo record (%d bytes): marker", len(rec))
	case !present:
		return Marker{}, nil
	}
	return decodeMarker(raw)
}

// undoBatch adds to b the writes that restore what the undo record rec
// holds and returns the restored marker. It checks all of rec: on an error b
// must not be committed.
func (t *Table) undoBatch(b *pebble.Batch, rec []byte) (Marker, error) {
	corrupt := func(what string) error {
		return fmt.Errorf("corrupt undo record (%d bytes, version %d): %s", len(rec), firstByte(rec), what)
	}
	if len(rec) == 0 || rec[0] != undoVersion {
		return Marker{}, corrupt("version")
	}
	raw, present, rest, ok := undoValue(rec[1:])
	if !ok {
		return Marker{}, corrupt("marker")
	}
	var m Marker
	if present {
		var err error
		if m, err = decodeMarker(raw); err != nil {
			return Marker{}, corrupt(err.Error())
		}
		if err := b.Set(t.marker, raw, nil); err != nil {
			return Marker{}, err
		}
	} else if err := b.Delete(t.marker, nil); err != nil {
		return Marker{}, err
	}
	for len(rest) > 0 {
		var key, state []byte
		if key, rest, ok = undoBytes(rest); !ok {
			return Marker{}, corrupt("key")
		}
		if state, present, rest, ok = undoValue(rest); !ok {
			return Marker{}, corrupt("state")
		}
		var op *pebble.DeferredBatchOp
		if present {
			op = b.SetDeferred(len(t.lo)+len(key), len(state))
			copy(op.Value, state)
		} else {
			op = b.DeleteDeferred(len(t.lo) + len(key))
		}
		copy(op.Key[copy(op.Key, t.lo):], key)
		if err := op.Finish(); err != nil {
			return Marker{}, err
		}
	}
	return m, nil
}

// Scan calls fn for every stored key of the table in key order (not the
// marker), on a consistent snapshot; it stops at fn's first error and returns
// it, and at a damaged block (*CorruptError: the keys after it are not
// read). fn's slices are only valid during the call.
func (t *Table) Scan(fn func(key, state []byte) error) error {
	p, err := t.db.reader()
	if err != nil {
		return t.fail("scan", err)
	}
	defer t.db.doneReading()
	it, err := p.NewIter(&pebble.IterOptions{LowerBound: t.lo, UpperBound: t.hi})
	if err != nil {
		return t.fail("scan", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return t.fail("scan", err)
		}
		if err := fn(it.Key()[len(t.lo):], v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return t.fail("scan", err)
	}
	return nil
}

// Clear deletes every key, the marker and the undo records of the table in one
// synced batch (a range deletion, so its cost does not depend on the number
// of keys): for a partition that moved to another instance.
func (t *Table) Clear() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.db.beginWrite(); err != nil {
		return fmt.Errorf("keystore: clear %s: %w", t.name(), err)
	}
	defer t.db.endWrite()
	b := t.db.p.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(t.lo, t.hi, nil); err != nil {
		return fmt.Errorf("keystore: clear %s: %w", t.name(), err)
	}
	if err := b.Delete(t.marker, nil); err != nil {
		return fmt.Errorf("keystore: clear %s: %w", t.name(), err)
	}
	if err := b.DeleteRange(t.undo, prefixEnd(t.undo), nil); err != nil { // every undo record
		return fmt.Errorf("keystore: clear %s: %w", t.name(), err)
	}
	if err := t.commit(b, &Marker{}); err != nil {
		return fmt.Errorf("keystore: clear %s: commit: %w", t.name(), err)
	}
	return nil
}

// Tables lists (scope, model) of every table that has a marker, sorted, for
// inspection and for clearing scopes no longer owned. It reads markers only.
func (db *DB) Tables() ([][2]string, error) {
	p, err := db.reader()
	if err != nil {
		return nil, fmt.Errorf("keystore: list tables: %w", err)
	}
	defer db.doneReading()
	it, err := p.NewIter(&pebble.IterOptions{LowerBound: []byte{nsMarker}, UpperBound: []byte{nsMarker + 1}})
	if err != nil {
		return nil, fmt.Errorf("keystore: list tables: %w", err)
	}
	var out [][2]string
	for ok := it.First(); ok; ok = it.Next() {
		scope, model, ok := parseTableID(it.Key()[1:])
		if !ok {
			it.Close()
			return nil, &CorruptError{Op: "list tables", Err: fmt.Errorf("marker key %q is no table's", it.Key())}
		}
		out = append(out, [2]string{scope, model})
	}
	if err := it.Close(); err != nil {
		if ce := corruptErr("list tables", "", err); ce != nil {
			return nil, ce
		}
		return nil, fmt.Errorf("keystore: list tables: %w", err)
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	return out, nil
}

// pebbleLogger routes Pebble's messages to log: informational ones at Debug,
// so that a healthy store is silent, errors at Warn. Fatalf panics, as
// Pebble's contract requires (it does not expect Fatalf to return).
type pebbleLogger struct{ log *slog.Logger }

// Infof logs at Debug, formatting only if Debug is enabled.
func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

// Errorf logs at Warn.
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Warn("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf logs at Error and panics.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	l.log.Error(msg)
	panic(msg)
}
