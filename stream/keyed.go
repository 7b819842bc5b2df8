package stream

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// keyedModels is one shard's state of a model with `scope: key`: one
// instance per event key (e.g. one ranking model per user, trained on that
// user's items), created on first sight from the model's configuration.
//
// At most max instances are kept in memory, least recently used evicted
// first; every key's state is in the shard's table of the embedded store
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
type keyedModels struct {
	factory func() (online.Model, error)
	max     int
	table   *keystore.Table

	index   map[string]*list.Element
	lru     *list.List // front = most recent
	pending map[string]pendingState
	held    int // bytes of the states in pending

	gen      uint64 // bumped by every change; entries and pending states carry theirs
	ckpt     uint64 // number of the last checkpoint applied to the table
	examples int64  // every key's examples, in memory or not
	known    int64  // keys in the table or created since the last checkpoint
	stored   int64  // keys in the table (its marker)
	buf      []byte // scratch of cold reads

	// legacy is the directory where an earlier version wrote evicted keys
	// (snapshot.dir/keys/<model>, a file per key named by its hash): a key
	// the table does not have is looked for there, and migrates to the
	// table at the next checkpoint. "" when there is none.
	legacy string

	reloaded int64 // keys read back from pending or the table
}

type keyedEntry struct {
	key     string
	m       online.Model
	changed uint64 // gen of its last change since the table was written; 0 = clean
}

// pendingState is the state of a dirty key evicted before the checkpoint
// that writes it to the table.
type pendingState struct {
	state []byte
	gen   uint64
}

func newKeyedModels(factory func() (online.Model, error), max int, table *keystore.Table) (*keyedModels, error) {
	if _, err := factory(); err != nil {
		return nil, err
	}
	mk, err := table.Marker()
	if err != nil {
		return nil, fmt.Errorf("keyed models: %w", err)
	}
	k := &keyedModels{factory: factory, max: max, table: table,
		index: map[string]*list.Element{}, lru: list.New(), pending: map[string]pendingState{}}
	k.adoptMarker(mk)
	return k, nil
}

func (k *keyedModels) adoptMarker(mk keystore.Marker) {
	k.ckpt, k.stored, k.known, k.examples = mk.Seq, mk.Keys, mk.Keys, 0
	if r := codec.NewReader(mk.Meta, online.ErrFormat); len(mk.Meta) >= 8 {
		k.examples = r.I64()
	}
}

// get returns the entry for key, loading it (from pending or the table) or
// creating it if it is not in memory.
func (k *keyedModels) get(key []byte) (*keyedEntry, error) {
	if e, ok := k.index[string(key)]; ok {
		k.lru.MoveToFront(e)
		return e.Value.(*keyedEntry), nil
	}
	m, err := k.factory()
	if err != nil {
		return nil, err
	}
	ent := &keyedEntry{key: string(key), m: m}
	if p, ok := k.pending[ent.key]; ok {
		if err := restoreKeyState(m, p.state); err != nil {
			return nil, fmt.Errorf("keyed models: reload %q: %w", key, err)
		}
		// Still dirty: the table does not have it yet.
		ent.changed = p.gen
		delete(k.pending, ent.key)
		k.held -= len(p.state)
		k.reloaded++
	} else {
		b, found, err := k.table.Get(key, k.buf[:0])
		if err != nil {
			return nil, fmt.Errorf("keyed models: reload %q: %w", key, err)
		}
		k.buf = b[:0]
		switch {
		case found:
			if err := restoreKeyState(m, b); err != nil {
				return nil, fmt.Errorf("keyed models: reload %q: %w", key, err)
			}
			k.reloaded++
		default:
			if k.legacy != "" {
				ok, err := k.migrate(key, m)
				if err != nil {
					return nil, err
				}
				if ok {
					// Dirty: the next checkpoint writes it to the table.
					k.gen++
					ent.changed = k.gen
					k.examples += m.Examples()
				}
			}
			k.known++
		}
	}
	k.index[ent.key] = k.lru.PushFront(ent)
	for k.lru.Len() > k.max {
		if err := k.evict(); err != nil {
			return nil, err
		}
	}
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
	if err := restoreKeyState(m, b); err != nil {
		return false, fmt.Errorf("keyed models: migrate %q: %w", key, err)
	}
	return true, nil
}

// learned records that ent's model learned an example.
func (k *keyedModels) learned(ent *keyedEntry) {
	k.gen++
	ent.changed = k.gen
	k.examples++
}

func (k *keyedModels) evict() error {
	e := k.lru.Back()
	ent := e.Value.(*keyedEntry)
	if ent.changed != 0 {
		b, err := ent.m.MarshalBinary()
		if err != nil {
			return fmt.Errorf("keyed models: evict %q: %w", ent.key, err)
		}
		if p, ok := k.pending[ent.key]; ok {
			k.held -= len(p.state)
		}
		k.pending[ent.key] = pendingState{state: b, gen: ent.changed}
		k.held += len(b)
	}
	k.lru.Remove(e)
	delete(k.index, ent.key)
	return nil
}

// len is the number of instances in memory.
func (k *keyedModels) len() int { return k.lru.Len() }

// keyDelta is what one checkpoint captured of a key-scoped model: the
// state of every key that changed since the table was last written.
type keyDelta struct {
	ckpt     uint64 // the checkpoint's number: the table's marker once applied
	examples int64
	known    int64
	gen      uint64 // k.gen at capture
	keys     [][]byte
	states   [][]byte
}

// capture encodes the delta of the next checkpoint (the shard is paused).
func (k *keyedModels) capture() (*keyDelta, error) {
	d := &keyDelta{ckpt: k.ckpt + 1, examples: k.examples, known: k.known, gen: k.gen}
	for e := k.lru.Back(); e != nil; e = e.Prev() {
		ent := e.Value.(*keyedEntry)
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
func (k *keyedModels) alias(d *keyDelta) {
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
func (k *keyedModels) apply(d *keyDelta) (keystore.Marker, error) {
	return k.table.Apply(d.ckpt, metaOf(d.examples), d.keys, d.states)
}

// settle marks the keys of an applied delta clean unless they changed
// again since its capture (the shard is paused).
func (k *keyedModels) settle(d *keyDelta, mk keystore.Marker) {
	k.ckpt, k.stored = mk.Seq, mk.Keys
	for _, key := range d.keys {
		if e, ok := k.index[string(key)]; ok {
			if ent := e.Value.(*keyedEntry); ent.changed <= d.gen {
				ent.changed = 0
			}
		}
		if p, ok := k.pending[string(key)]; ok && p.gen <= d.gen {
			delete(k.pending, string(key))
			k.held -= len(p.state)
		}
	}
}

func metaOf(examples int64) []byte { return codec.AppendI64(nil, examples) }

// reset empties the table: the model starts with no keys.
func (k *keyedModels) reset() error {
	if err := k.table.Clear(); err != nil {
		return fmt.Errorf("keyed models: %w", err)
	}
	k.index, k.lru, k.pending, k.held = map[string]*list.Element{}, list.New(), map[string]pendingState{}, 0
	k.adoptMarker(keystore.Marker{})
	return nil
}

// restore brings the table to the state of a snapshot holding delta d (a
// restarted shard): the table either has d applied already, or is one
// checkpoint behind (the crash came between the snapshot and the table's
// write), and then d is applied now, or one ahead (the newest snapshot was
// found corrupt and the one before restored), and then the table's last
// checkpoint is undone. A table at any other checkpoint does
// not belong to the snapshot (the partition moved between instances, or the
// disk is new): it is rebuilt from src, the keys as kept elsewhere (the
// changelog), with d on top; without src that is an error. The instances
// in memory are dropped; keys load on their first event.
func (k *keyedModels) restore(d *keyDelta, src func() ([][]byte, [][]byte, error)) error {
	mk, err := k.table.Marker()
	if err != nil {
		return fmt.Errorf("keyed models: %w", err)
	}
	if mk.Seq == d.ckpt+1 && d.ckpt > 0 {
		// The newest snapshot was lost (a corrupt file skipped at start-up)
		// after its keys were written: take them back.
		if undone, err := k.table.Undo(); err == nil {
			mk = undone
		} else if !errors.Is(err, keystore.ErrNoUndo) {
			return fmt.Errorf("keyed models: undo checkpoint %d: %w", mk.Seq, err)
		}
	}
	redone := true
	switch {
	case mk.Seq == d.ckpt && d.ckpt > 0:
		redone = false
	case mk.Seq+1 == d.ckpt || d.ckpt == 0:
		if mk, err = k.table.Apply(max(d.ckpt, mk.Seq+1), metaOf(d.examples), d.keys, d.states); err != nil {
			return fmt.Errorf("keyed models: redo checkpoint %d: %w", d.ckpt, err)
		}
	case src == nil:
		return fmt.Errorf("keyed models: the key store is at checkpoint %d, the snapshot at %d: they do not belong together (a key store from another deployment, or a snapshot older than the newest one); move snapshot.dir/keystore aside to start the key-scoped models empty", mk.Seq, d.ckpt)
	default:
		keys, states, err := src()
		if err != nil {
			return fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
		if err := k.table.Clear(); err != nil {
			return fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
		// The delta last: it is newer than any key record.
		keys = append(keys, d.keys...)
		states = append(states, d.states...)
		if mk, err = k.table.Apply(d.ckpt, metaOf(d.examples), keys, states); err != nil {
			return fmt.Errorf("keyed models: rebuild the key store: %w", err)
		}
	}
	k.index, k.lru, k.pending, k.held = map[string]*list.Element{}, list.New(), map[string]pendingState{}, 0
	k.adoptMarker(mk)
	k.examples, k.known = d.examples, max(d.known, mk.Keys)
	if redone {
		// The crash may have come before the checkpoint's keys reached
		// the changelog too: they go with the next checkpoint again.
		for i, key := range d.keys {
			k.gen++
			k.pending[string(key)] = pendingState{state: d.states[i], gen: k.gen}
			k.held += len(d.states[i])
		}
	}
	return nil
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
func (d *keyDelta) encode() []byte {
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

func decodeDelta(b []byte) (*keyDelta, error) {
	d := &keyDelta{}
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

// defaultMaxKeys is max_keys when the configuration leaves it out.
const defaultMaxKeys = 10_000

// checkKeyMemory refuses a key-scoped model whose instances in memory
// (max_keys of them) cannot fit: each takes at least the bytes of an empty
// instance's encoded state, which for the types that keep dense vectors
// is O(features.dim), 2^bits with hashed features (a logistic at 20 bits:
// 16 MiB a key). Without the check such a configuration starts and runs
// out of memory once enough keys have been seen, hours later.
func checkKeyMemory(cfg *EngineConfig, nm NamedModel) error {
	if nm.Factory == nil || cfg.MemoryLimit < 0 {
		return nil
	}
	limit, from := cfg.MemoryLimit, "EngineConfig.MemoryLimit"
	if limit == 0 {
		limit, from = memoryLimit()
		if limit <= 0 {
			return nil // unknown: no check
		}
	}
	inst, err := nm.Factory()
	if err != nil {
		return fmt.Errorf("stream: model %s: %w", nm.Name, err)
	}
	b, err := inst.MarshalBinary()
	if err != nil {
		return fmt.Errorf("stream: model %s: %w", nm.Name, err)
	}
	keys := nm.MaxKeys
	if keys <= 0 {
		keys = defaultMaxKeys
	}
	per := int64(len(b))
	if need := per * int64(keys); need > limit {
		hint := "lower max_keys"
		if cfg.Hash != nil {
			hint += ", or features.hash.bits (every bit doubles a key's state)"
		} else {
			hint += ", or features.dim"
		}
		return fmt.Errorf("stream: model %s (scope: key): max_keys %d instances in memory at %s each at least (an empty one's state at dimension %d) need %s, more than the %s available (%s): %s, or use a global model",
			nm.Name, keys, byteSize(per), cfg.Dim, byteSize(need), byteSize(limit), from, hint)
	}
	return nil
}

// memoryLimit returns the memory the process may use and where that
// figure comes from: GOMEMLIMIT when set, else the machine's MemTotal
// (0 when neither is known).
func memoryLimit() (int64, string) {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l, "GOMEMLIMIT"
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, ""
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
					return kb << 10, "the machine's memory"
				}
			}
		}
	}
	return 0, ""
}

// byteSize formats n bytes in binary units (16 MiB).
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTP"[exp]) + "iB"
}
