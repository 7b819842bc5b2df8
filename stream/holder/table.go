package holder

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// keyedModels is one shard's state of a model with `scope: key`: one
// instance per event key (e.g. one ranking model per user, trained on that
// user's items), created on first sight from the model's configuration.
//
// At most max instances are kept in memory, evicted in the order of a
// second-chance (CLOCK) sweep, an approximation of least recently used
// that costs a hit one flag in the entry it reads anyway (an exact order of
// use relinked two other, random entries per event: a cache miss or two
// each); every key's state is in the shard's table of the embedded store
// (internal/keystore) as of the shard's last checkpoint. A key's state moves
// to the store only at checkpoints, and only if it changed: a checkpoint
// captures the delta (every key learned since the last durable checkpoint)
// into the shard's snapshot, and once that snapshot is durable the delta is
// applied to the table in one synced batch, tagged with the checkpoint's
// number. A dirty key evicted between checkpoints waits, encoded, in
// pending. So the table never holds a state the durable snapshot does not
// include, and after a crash the snapshot's delta brings the table exactly
// to the snapshot's offsets (redo): every key learns every event exactly
// once. A restore reads the snapshot and the table's marker, never the cold
// keys; they are read on their first event (a cache miss).
//
// A key whose stored state cannot be read back (a damaged block of the key
// store, a state that does not decode) is failed (faults.go): its events
// are scored by a fresh instance and never learned, and it is not read again.
type keyedModels struct {
	factory func() (online.Model, error)
	max     int
	table   *keystore.Table
	name    string       // the model's, for messages
	log     *slog.Logger // never nil
	faults  *keyFaults   // failed keys

	index   map[string]*keyedEntry
	ring    keyedEntry // the sentinel of the ring of the instances in memory, in the sweep's order (use, victim)
	hot     int        // instances in memory
	pending map[string]pendingState
	held    int // bytes of the states in pending

	gen      uint64 // bumped by every change; entries and pending states carry theirs
	ckpt     uint64 // number of the last checkpoint applied to the table
	examples int64  // every key's examples, in memory or not
	known    int64  // distinct keys with a state: in the table, or learned and not written to it yet
	stored   int64  // keys in the table (its marker)
	buf      []byte // scratch of cold reads

	// legacy is the directory where an earlier version wrote evicted keys
	// (snapshot.dir/keys/<model>, a file per key named by its hash): a key
	// the table does not have is looked for there, and migrates to the
	// table at the next checkpoint. "" when there is none.
	legacy string

	reloaded int64 // keys read back from pending or the table

	fresh online.Model // blank's instance; nil until asked

	restore func(m online.Model, b []byte) error // a key's stored state into a fresh instance (Spec.RestoreKey)
}

type keyedEntry struct {
	// newer and older link the instances in memory in the sweep's order
	// (keyedModels.ring), kept in the entry itself.
	newer, older *keyedEntry
	key          string
	m            online.Model
	changed      uint64 // gen of its last change since the table was written; 0 = clean
	inTable      bool   // the table holds a state of the key (known counts it)
	used         bool   // used since it was loaded or the sweep last passed it (the second chance)
}

// pendingState is the state of a dirty key evicted before the checkpoint
// that writes it to the table.
type pendingState struct {
	state   []byte
	gen     uint64
	inTable bool
}

func newKeyedModels(factory func() (online.Model, error), max int, table *keystore.Table) (*keyedModels, error) {
	if _, err := factory(); err != nil {
		return nil, err
	}
	mk, err := table.Marker()
	if err != nil {
		return nil, fmt.Errorf("keyed models: %w", err)
	}
	k := &keyedModels{factory: factory, max: max, table: table, log: slog.New(slog.DiscardHandler), faults: newKeyFaults(), restore: online.Model.UnmarshalBinary}
	k.emptyMemory()
	k.adoptMarker(mk)
	return k, nil
}

// emptyMemory drops every instance in memory and every pending state.
func (k *keyedModels) emptyMemory() {
	k.index, k.pending, k.held, k.hot = map[string]*keyedEntry{}, map[string]pendingState{}, 0, 0
	k.ring.newer, k.ring.older = &k.ring, &k.ring
}

// The instances in memory are a ring through k.ring in the sweep's order:
// k.ring.newer is the next the sweep looks at (the oldest), k.ring.older
// the last it will (the newest: loaded or given its second chance last).

// use records a use of ent: it links ent in as the newest if it is not in
// memory yet, and otherwise marks it used, which spares it the sweep's
// next pass. A hit writes only ent, which the caller reads anyway.
func (k *keyedModels) use(ent *keyedEntry) {
	if ent.newer != nil {
		ent.used = true
		return
	}
	k.link(ent)
	k.hot++
}

// link puts ent in the ring as the newest.
func (k *keyedModels) link(ent *keyedEntry) {
	last := k.ring.older
	ent.newer, ent.older = &k.ring, last
	last.newer, k.ring.older = ent, ent
}

// unlink takes ent out of the ring.
func (k *keyedModels) unlink(ent *keyedEntry) {
	detach(ent)
	ent.newer, ent.older = nil, nil
	k.hot--
}

// detach joins ent's neighbours in the ring, leaving ent's links as they
// were.
func detach(ent *keyedEntry) { ent.newer.older, ent.older.newer = ent.older, ent.newer }

// oldest is the instance the sweep looks at next; nil when none is in
// memory.
func (k *keyedModels) oldest() *keyedEntry {
	if k.hot == 0 {
		return nil
	}
	return k.ring.newer
}

// victim is the instance to evict: the sweep takes the oldest, and one
// used since it was loaded or last passed loses its mark and becomes the
// newest instead (its second chance). It returns within one turn of the
// ring, as every instance it passes loses its mark; nil when none is in
// memory. Each mark a use set is cleared once, so a victim costs O(1)
// amortised.
func (k *keyedModels) victim() *keyedEntry {
	for k.hot > 0 {
		ent := k.ring.newer
		if !ent.used {
			return ent
		}
		ent.used = false
		detach(ent)
		k.link(ent)
	}
	return nil
}

// bySweep is the instances in memory, the newest first (the sweep's
// order reversed).
func (k *keyedModels) bySweep() []*keyedEntry {
	var out []*keyedEntry
	for ent := k.ring.older; ent != &k.ring && len(out) <= k.hot; ent = ent.older {
		out = append(out, ent)
	}
	return out
}

// check checks the invariants of the instances in memory: the sweep's
// order is a ring that links each entry both ways, and holds the index's
// entries, at most max of them (unless an eviction failed), none failed
// and none also pending.
func (k *keyedModels) check() error {
	ring := k.bySweep()
	if len(ring) != k.hot || len(k.index) != k.hot || k.hot > k.max {
		return fmt.Errorf("keyed models %s: %d in the ring, counted %d, %d in the index, at most %d", k.name, len(ring), k.hot, len(k.index), k.max)
	}
	for _, ent := range ring {
		switch {
		case ent.older.newer != ent || ent.newer.older != ent:
			return fmt.Errorf("keyed models %s: %q not linked both ways", k.name, ent.key)
		case k.index[ent.key] != ent:
			return fmt.Errorf("keyed models %s: %q in the ring, not in the index", k.name, ent.key)
		case k.faults.get([]byte(ent.key)) != nil:
			return fmt.Errorf("keyed models %s: failed key %q in memory", k.name, ent.key)
		}
		if _, ok := k.pending[ent.key]; ok {
			return fmt.Errorf("keyed models %s: %q in memory and pending", k.name, ent.key)
		}
	}
	return nil
}

// newerThan is the instance after ent in the sweep's order; nil after the
// newest.
func (k *keyedModels) newerThan(ent *keyedEntry) *keyedEntry {
	if ent.newer == &k.ring {
		return nil
	}
	return ent.newer
}

// sibling returns another stripe of k's table (Keyed), empty, with
// at most maxKeys instances in memory: the table's totals stay counted in k.
func (k *keyedModels) sibling(maxKeys int) *keyedModels {
	s := &keyedModels{factory: k.factory, max: maxKeys, table: k.table, name: k.name, log: k.log, faults: newKeyFaults(), legacy: k.legacy, restore: k.restore,
		ckpt: k.ckpt, stored: k.stored}
	s.emptyMemory()
	return s
}

func (k *keyedModels) adoptMarker(mk keystore.Marker) {
	k.ckpt, k.stored, k.known, k.examples = mk.Seq, mk.Keys, mk.Keys, 0
	if r := codec.NewReader(mk.Meta, online.ErrFormat); len(mk.Meta) >= 8 {
		k.examples = r.I64()
	}
}

// get returns the entry for key, loading it (from pending or the table) or
// creating it if it is not in memory. A failed key (faults.go) is an
// error, without a read; so is a key whose read fails now, which a read
// that cannot succeed later (damage, a state that does not decode) fails.
// On an error nothing changes but the failed keys: the caller scores the
// event with a fresh instance and the key does not learn.
func (k *keyedModels) get(key []byte) (*keyedEntry, error) { return k.load(key, true) }

// find is get for a look that must not create state: a key with a state
// (in memory, pending or in the table) is loaded and kept as get keeps it,
// while for a key with none, nil is returned and nothing is kept, evicted
// or counted. Ranking requests look keys up this way: a flood of requests
// for keys that never learned cannot push real keys' instances out of
// memory (blank returns the instance that scores them).
func (k *keyedModels) find(key []byte) (*keyedEntry, error) { return k.load(key, false) }

// blank returns the instance that scores a key without state for find's
// callers: fresh, made once, never learning and never kept in the index
// (its callers only peek at it).
func (k *keyedModels) blank() (online.Model, error) {
	if k.fresh == nil {
		m, err := k.factory()
		if err != nil {
			return nil, err
		}
		k.fresh = m
	}
	return k.fresh, nil
}

func (k *keyedModels) load(key []byte, create bool) (*keyedEntry, error) {
	if ent, ok := k.index[string(key)]; ok {
		k.use(ent)
		return ent, nil
	}
	if err := k.faults.get(key); err != nil {
		return nil, err
	}
	var ent *keyedEntry
	if p, ok := k.pending[string(key)]; ok {
		m, err := k.factory()
		if err != nil {
			return nil, err
		}
		ent = &keyedEntry{key: string(key), m: m}
		if err := k.restore(m, p.state); err != nil {
			return nil, k.fail(ent.key, fmt.Errorf("keyed models: reload %q: %w", key, err), true)
		}
		// Still dirty: the table does not have it yet.
		ent.changed, ent.inTable = p.gen, p.inTable
		delete(k.pending, ent.key)
		k.held -= len(p.state)
		k.reloaded++
	} else {
		b, found, err := k.table.Get(key, k.buf[:0])
		if err != nil {
			return nil, k.fail(string(key), fmt.Errorf("keyed models: reload %q: %w", key, err), false)
		}
		k.buf = b[:0]
		if found || create || k.legacy != "" {
			m, err := k.factory()
			if err != nil {
				return nil, err
			}
			ent = &keyedEntry{key: string(key), m: m}
		}
		switch {
		case found:
			if err := k.restore(ent.m, b); err != nil {
				return nil, k.fail(ent.key, fmt.Errorf("keyed models: reload %q: its stored state does not decode: %w", key, err), true)
			}
			ent.inTable = true
			k.reloaded++
		case k.legacy != "":
			ok, err := k.migrate(key, ent.m)
			if err != nil {
				return nil, err
			}
			if ok {
				// Dirty: the next checkpoint writes it to the table.
				k.dirty(ent)
				k.examples += ent.m.Examples()
			} else if !create {
				return nil, nil
			}
		case !create:
			return nil, nil
		}
	}
	// Room first, so that the sweep never takes ent itself.
	for k.hot >= k.max && k.hot > 0 {
		if err := k.evict(); err != nil {
			// The sweep's victim stays in memory, beyond max, rather
			// than lose what it learned; ent joins it and learns this
			// event.
			k.log.Error("key-scoped model: an instance could not be evicted; kept in memory", "model", k.name, "err", err)
			break
		}
	}
	k.index[ent.key] = ent
	k.use(ent)
	return ent, nil
}

// migrate reads key's state from the directory of an earlier version into
// m, reporting whether there was one.
func (k *keyedModels) migrate(key []byte, m online.Model) (bool, error) {
	h := sha256.Sum256(key)
	b, err := os.ReadFile(filepath.Join(k.legacy, hex.EncodeToString(h[:16])+".model"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("keyed models: migrate %q: %w", key, err)
	}
	if err := k.restore(m, b); err != nil {
		return false, fmt.Errorf("keyed models: migrate %q: %w", key, err)
	}
	return true, nil
}

// learned records that ent's model learned an example.
func (k *keyedModels) learned(ent *keyedEntry) {
	k.dirty(ent)
	k.examples++
}

// dirty marks ent changed since the table was written. A key the table
// does not hold becomes known when it first changes: lookups of keys that
// never learn (ranking requests, events without labels) count nothing.
func (k *keyedModels) dirty(ent *keyedEntry) {
	if ent.changed == 0 && !ent.inTable {
		k.known++
	}
	k.gen++
	ent.changed = k.gen
}

func (k *keyedModels) evict() error {
	ent := k.victim()
	if ent.changed != 0 {
		b, err := ent.m.MarshalBinary()
		if err != nil {
			return fmt.Errorf("keyed models: evict %q: %w", ent.key, err)
		}
		if p, ok := k.pending[ent.key]; ok {
			k.held -= len(p.state)
		}
		k.pending[ent.key] = pendingState{state: b, gen: ent.changed, inTable: ent.inTable}
		k.held += len(b)
	}
	k.unlink(ent)
	delete(k.index, ent.key)
	return nil
}

// len is the number of instances in memory.
func (k *keyedModels) len() int { return k.hot }

// Delta is what one checkpoint captured of a key-scoped model: the
// state of every key that changed since the table was last written.
type Delta struct {
	ckpt     uint64 // the checkpoint's number: the table's marker once applied
	examples int64
	known    int64
	sum      int64  // examples of the keys in the delta (set by a restore)
	gen      uint64 // k.gen at capture
	keys     [][]byte
	states   [][]byte
	parts    []*Delta // a striped table's (keyedHolder): each stripe's delta, whose keys and states are slices of these
}

// Examples is every key's examples at the delta's checkpoint.
func (d *Delta) Examples() int64 { return d.examples }

// States are the keys of the delta and their states (not to be changed).
func (d *Delta) States() (keys, states [][]byte) { return d.keys, d.states }

// capture encodes the delta of the next checkpoint (the shard is paused).
func (k *keyedModels) capture() (*Delta, error) {
	d := &Delta{ckpt: k.ckpt + 1, examples: k.examples, known: k.known, gen: k.gen}
	for ent := k.oldest(); ent != nil; ent = k.newerThan(ent) {
		if ent.changed == 0 {
			continue
		}
		b, err := ent.m.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("keyed models: %q: %w", ent.key, err)
		}
		d.keys = append(d.keys, []byte(ent.key))
		d.states = append(d.states, b)
	}
	for key, p := range k.pending {
		d.keys = append(d.keys, []byte(key))
		d.states = append(d.states, p.state)
	}
	return d, nil
}

// alias makes the pending states of d's keys share d's states (d was
// decoded from its encoding), so that a checkpoint holds them once.
func (k *keyedModels) alias(d *Delta) {
	for i, key := range d.keys {
		if p, ok := k.pending[string(key)]; ok && p.gen <= d.gen {
			k.held += len(d.states[i]) - len(p.state)
			p.state = d.states[i]
			k.pending[string(key)] = p
		}
	}
}

// apply writes a durable checkpoint's delta to the table (outside the
// shard's lock: the table is safe for concurrent use, and a key read from
// it meanwhile is either still in pending or already written).
func (k *keyedModels) apply(d *Delta) (keystore.Marker, error) {
	return k.table.Apply(d.ckpt, metaOf(d.examples), d.keys, d.states)
}

// settle marks the keys of an applied delta clean unless they changed
// again since its capture (the shard is paused).
func (k *keyedModels) settle(d *Delta, mk keystore.Marker) {
	k.ckpt, k.stored = mk.Seq, mk.Keys
	for _, key := range d.keys {
		if ent, ok := k.index[string(key)]; ok {
			ent.inTable = true
			if ent.changed <= d.gen {
				ent.changed = 0
			}
		}
		if p, ok := k.pending[string(key)]; ok {
			if p.gen <= d.gen {
				delete(k.pending, string(key))
				k.held -= len(p.state)
			} else {
				p.inTable = true
				k.pending[string(key)] = p
			}
		}
	}
}

func metaOf(examples int64) []byte { return codec.AppendI64(nil, examples) }

// reset empties the table: the model starts with no keys.
func (k *keyedModels) reset() error {
	if err := k.table.Clear(); err != nil {
		return fmt.Errorf("keyed models: %w", err)
	}
	k.restart(tableRestore{}, true)
	return nil
}

// tableRestore is what restoreTable did to the table: its marker now, the
// examples of every key, and whether the delta was (re)applied.
type tableRestore struct {
	mk       keystore.Marker
	examples int64
	redone   bool
}

// restoreTable brings the table to the state of a snapshot holding delta d (a
// restarted shard): the table either has d applied already, or is one
// checkpoint behind (the crash came between the snapshot and the table's
// write), and then d is applied now, or ahead (the newest snapshots were
// found corrupt and an older one restored), and then the table's last
// checkpoints are undone, as far back as its undo records reach (as many
// as snapshot.keep). A table at any other checkpoint does not belong to
// the snapshot (the partition moved between instances, the disk is new,
// the key store was moved aside): it is rebuilt from src, the keys as kept
// elsewhere (the changelog), with d on top; without src and with lossy
// (--allow-empty-state), from d alone: the keys d's checkpoint changed
// keep their state, every other key's is lost (logged with the counts);
// otherwise it is a *keyStoreMismatch, and nothing changes. It is the
// table's part of a restore, shared by every stripe of a key table
// (keyedHolder.restore, which then empties the stripes, restart, and
// keeps d's keys as pending again, redo: keys load on their first event).
func (k *keyedModels) restoreTable(d *Delta, src func() ([][]byte, [][]byte, error), lossy bool) (tableRestore, error) {
	mk, err := k.table.Marker()
	if err != nil {
		return tableRestore{}, fmt.Errorf("keyed models: %w", err)
	}
	if mk.Seq > d.ckpt && d.ckpt > 0 {
		// The newest snapshots were lost (corrupt files skipped at
		// start-up) after their keys were written: take them back.
		undone, err := k.table.UndoTo(d.ckpt)
		switch {
		case err == nil:
			k.log.Info("key-scoped model: the key store taken back to the restored snapshot's checkpoint", "model", k.name, "from", mk.Seq, "to", d.ckpt)
			mk = undone
		case !errors.Is(err, keystore.ErrNoUndo):
			return tableRestore{}, fmt.Errorf("keyed models: undo checkpoints %d to %d: %w", mk.Seq, d.ckpt+1, err)
		}
	}
	redone, examples := true, d.examples
	switch from := mk.Seq; {
	case mk.Seq == d.ckpt && d.ckpt > 0:
		redone = false
	case mk.Seq+1 == d.ckpt || d.ckpt == 0:
		if mk, err = k.table.Apply(max(d.ckpt, mk.Seq+1), metaOf(d.examples), d.keys, d.states); err != nil {
			return tableRestore{}, fmt.Errorf("keyed models: redo checkpoint %d: %w", d.ckpt, err)
		}
	case src != nil:
		keys, states, err := src()
		if err != nil {
			return tableRestore{}, fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
		if err := k.table.Clear(); err != nil {
			return tableRestore{}, fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
		// The delta last: it is newer than any key record.
		keys = append(keys, d.keys...)
		states = append(states, d.states...)
		if mk, err = k.table.Apply(d.ckpt, metaOf(d.examples), keys, states); err != nil {
			return tableRestore{}, fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
	case lossy:
		if err := k.table.Clear(); err != nil {
			return tableRestore{}, fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
		if mk, err = k.table.Apply(d.ckpt, metaOf(d.sum), d.keys, d.states); err != nil {
			return tableRestore{}, fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
		examples = d.sum
		k.log.Warn("--allow-empty-state: the key store did not hold the restored snapshot's checkpoint; the key-scoped model's keys are rebuilt from the snapshot, which holds those its checkpoint changed: every other key's state is lost, and it starts empty on its next event",
			"model", k.name, "key_store_checkpoint", from, "snapshot_checkpoint", d.ckpt,
			"keys_kept", len(d.keys), "examples_kept", d.sum,
			"keys_lost", max(0, d.known-int64(len(d.keys))), "examples_lost", max(0, d.examples-d.sum))
	default:
		return tableRestore{}, &TableMismatch{Table: mk.Seq, Snapshot: d.ckpt, keys: len(d.keys), known: d.known, examples: d.examples, kept: d.sum}
	}
	return tableRestore{mk: mk, examples: examples, redone: redone}, nil
}

// restart empties memory after restoreTable (r) or a reset: the instances
// in memory are dropped, and keys load on their first event. The table
// holds the snapshot's keys now, each once; counts, the table's totals,
// go to one stripe of the table (first), the others counting from zero.
func (k *keyedModels) restart(r tableRestore, counts bool) {
	k.emptyMemory()
	k.faults.clear()
	k.adoptMarker(r.mk)
	k.examples, k.known = 0, 0
	if counts {
		k.examples, k.known = r.examples, r.mk.Keys
	}
}

// redo keeps a restored delta's key state as pending: the crash may have
// come before the checkpoint's keys reached the changelog too, so they go
// with the next checkpoint again.
func (k *keyedModels) redo(key, state []byte) {
	k.gen++
	k.pending[string(key)] = pendingState{state: state, gen: k.gen, inTable: true}
	k.held += len(state)
}

// TableMismatch is a key-scoped model's table that does not belong to
// the snapshot restored, with nothing to rebuild it from.
type TableMismatch struct {
	Table, Snapshot uint64 // their checkpoints
	keys            int    // in the snapshot's delta
	known           int64  // keys the snapshot counts
	examples, kept  int64  // the snapshot's examples, and its delta's
}

func (e *TableMismatch) Error() string {
	why := "the key store's undo records (of the last snapshot.keep checkpoints) do not reach back to it"
	if e.Table < e.Snapshot {
		why = "more than one checkpoint behind it"
	}
	return fmt.Sprintf("keyed models: the key store is at checkpoint %d, the snapshot at %d, %s: "+
		"they do not belong together (a key store moved aside, lost or from another deployment, or a snapshot older than the undo records reach); nothing was changed. "+
		"Put back the key store that belongs to the snapshot; or accept the loss: with --allow-empty-state the key store is rebuilt from the snapshot, "+
		"which holds %d of the %d keys it counts (%d of %d examples), the keys its checkpoint changed; every other key's state is lost and starts empty on its next event "+
		"(with snapshot.changelog_topic set, the key store is rebuilt from the changelog, losing nothing)",
		e.Table, e.Snapshot, why, e.keys, max(e.known, int64(e.keys)), e.kept, e.examples)
}

// Encoding of a keyed delta in a snapshot (online/codec's conventions):
// magic "KEY2", u64 checkpoint number, i64 examples of every key, i64 keys
// known, count u32, then per key its key and its model's state, each as
// bytes (u32 length + bytes). The encoding of earlier versions, "KEYD"
// (every instance in memory, least recent first, with no numbers), decodes
// as a delta with checkpoint 0: applied on top of whatever the table holds.
const (
	keyedMagic       = "KEY2"
	keyedMagicLegacy = "KEYD"
)

// maxKeyedInstances bounds the count of a decoded keyed state.
const maxKeyedInstances = 1 << 26

// encode returns d's encoding and makes d's keys and states slices of it,
// so that a checkpoint holds every state once (the encoding goes into the
// snapshot, the slices into the key store).
func (d *Delta) encode() []byte {
	n := len(keyedMagic) + 28
	for i := range d.keys {
		n += 8 + len(d.keys[i]) + len(d.states[i])
	}
	dst := make([]byte, 0, n) // exact: the appends below never move it
	dst = append(dst, keyedMagic...)
	dst = codec.AppendU64(dst, d.ckpt)
	dst = codec.AppendI64(dst, d.examples)
	dst = codec.AppendI64(dst, d.known)
	dst = codec.AppendU32(dst, uint32(len(d.keys)))
	for i := range d.keys {
		dst = codec.AppendBytes(dst, d.keys[i])
		d.keys[i] = dst[len(dst)-len(d.keys[i]):]
		dst = codec.AppendBytes(dst, d.states[i])
		d.states[i] = dst[len(dst)-len(d.states[i]):]
	}
	return dst
}

// IsKeyed reports whether b is the encoded state of a key-scoped model
// (scope: key).
func IsKeyed(b []byte) bool {
	return bytes.HasPrefix(b, []byte(keyedMagic)) || bytes.HasPrefix(b, []byte(keyedMagicLegacy))
}

// DecodeKeyed splits the encoded state of a key-scoped model into the keys
// and encoded states it holds (aliasing b): the keys that changed in its
// checkpoint (every key in memory, for the encoding of earlier versions).
// Errors wrap online.ErrFormat.
func DecodeKeyed(b []byte) (keys []string, states [][]byte, err error) {
	d, err := decodeDelta(b)
	if err != nil {
		return nil, nil, err
	}
	for i := range d.keys {
		keys = append(keys, string(d.keys[i]))
	}
	return keys, d.states, nil
}

// KeyedSummary is what a key-scoped model's saved state says about all its
// keys: the examples learned and the keys known at its checkpoint.
func KeyedSummary(b []byte) (examples, keys int64, err error) {
	d, err := decodeDelta(b)
	if err != nil {
		return 0, 0, err
	}
	return d.examples, d.known, nil
}

func decodeDelta(b []byte) (*Delta, error) {
	d := &Delta{}
	var r *codec.Reader
	switch {
	case bytes.HasPrefix(b, []byte(keyedMagic)):
		r = codec.NewReader(b[len(keyedMagic):], online.ErrFormat)
		d.ckpt = r.U64()
		d.examples = r.I64()
		d.known = r.I64()
	case bytes.HasPrefix(b, []byte(keyedMagicLegacy)):
		r = codec.NewReader(b[len(keyedMagicLegacy):], online.ErrFormat)
		d.examples = -1 // summed by the caller
	default:
		return nil, fmt.Errorf("%w: keyed models: bad magic", online.ErrFormat)
	}
	n := r.Count("keyed instances", maxKeyedInstances, 8)
	seen := make(map[string]bool, n)
	for range n {
		key := r.Bytes()
		state := r.Bytes()
		if r.Err() != nil {
			break
		}
		if seen[string(key)] {
			r.Failf("keyed models: key %q repeated", key)
			break
		}
		seen[string(key)] = true
		d.keys = append(d.keys, key)
		d.states = append(d.states, state)
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("keyed models: %w", err)
	}
	if d.known < 0 || d.examples < -1 {
		return nil, fmt.Errorf("%w: keyed models: negative counts", online.ErrFormat)
	}
	return d, nil
}
