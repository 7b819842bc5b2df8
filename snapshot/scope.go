package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/segmentio/kafka-go"
)

// scopeSep ends a scope in a record key: "<scope>/<model>@<gen>#<i>" and
// "<scope>/_manifest@<gen>". Model names never contain it.
const scopeSep = "/"

// Scope returns a store that keeps its own snapshot under the keys of scope
// in c's topic, next to c's and other scopes' snapshots: several writers
// (one per input partition, each owned by one process at a time) share one
// compacted topic. The scoped store uses c's connections and writer; closing
// it does nothing, closing c closes them. scope must be non-empty and must
// not contain '/'.
func (c *ChangelogStore) Scope(scope string) (*ChangelogStore, error) {
	if scope == "" || strings.Contains(scope, scopeSep) {
		return nil, fmt.Errorf("snapshot: scope %q: must be non-empty without %q", scope, scopeSep)
	}
	return &ChangelogStore{
		brokers: c.brokers, topic: c.topic, chunkSize: c.chunkSize, replicas: c.replicas,
		dialer: c.dialer, transport: c.transport, writer: c.writer,
		prefix: c.prefix + scope + scopeSep, shared: true,
	}, nil
}

// Tail follows a changelog topic and keeps the latest record of every key,
// so that the newest snapshot of each scope can be read without reading the
// topic from its start again: Poll reads what was appended since the last
// Poll. It is safe for concurrent use.
type Tail struct {
	c    *ChangelogStore
	mu   sync.Mutex
	recs map[string]record
	next int64
	read int64 // records read in all
}

// Tail returns a Tail over c's topic (none of it read yet).
func (c *ChangelogStore) Tail() *Tail {
	return &Tail{c: c, recs: map[string]record{}}
}

// Poll reads the records appended since the last Poll, up to the topic's
// end offset now. It returns the number of records read.
func (t *Tail) Poll(ctx context.Context) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end, n, err := t.c.readFrom(ctx, t.recs, t.next)
	if err != nil {
		return 0, err
	}
	t.next = end
	t.read += int64(n)
	return n, nil
}

// Scopes lists the scopes that have a manifest in the records read so far,
// sorted.
func (t *Tail) Scopes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.recs {
		i := strings.LastIndex(k, scopeSep)
		if i <= 0 || !strings.HasPrefix(k[i+1:], manifestKey) {
			continue
		}
		if s := k[:i]; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Latest returns the newest restorable snapshot of scope among the records
// read so far (scope "" is the unscoped snapshot). The error wraps
// ErrNoSnapshot when there is none.
func (t *Tail) Latest(scope string) (*Snapshot, error) {
	prefix := ""
	if scope != "" {
		prefix = scope + scopeSep
	}
	t.mu.Lock()
	recs := scopeRecords(t.recs, prefix)
	t.mu.Unlock()
	snap, _, skipped, err := resolve(t.c.topic, recs)
	switch {
	case err != nil:
		return nil, err
	case snap != nil:
		return snap, nil
	case len(skipped) > 0:
		return nil, fmt.Errorf("%w: no manifest of scope %q in topic %s is restorable: %w", ErrNoSnapshot, scope, t.c.topic, skipped[0].Err)
	}
	return nil, fmt.Errorf("%w: scope %q in topic %s", ErrNoSnapshot, scope, t.c.topic)
}

// LoadFrom is Load over the records t has read (call t.Poll first to
// include everything up to now) rather than a fresh read of the topic: a
// member restoring several partitions after a rebalance reads the changelog
// once. t must follow c's topic.
func (c *ChangelogStore) LoadFrom(t *Tail) (*Snapshot, []Skipped, error) {
	if t.c.topic != c.topic {
		return nil, nil, fmt.Errorf("snapshot: tail of topic %s cannot load a store of topic %s", t.c.topic, c.topic)
	}
	t.mu.Lock()
	all := maps.Clone(t.recs)
	t.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adopt(all)
}

// NewestSeq returns the highest seq among the manifests of scope read so
// far (0 if none), whether or not that snapshot is complete: a writer that
// finds a seq above its own knows that another writer took the scope over.
func (t *Tail) NewestSeq(scope string) uint64 {
	prefix := ""
	if scope != "" {
		prefix = scope + scopeSep
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var newest uint64
	for g := range 2 {
		r, ok := t.recs[prefix+manifestKey+strconv.Itoa(g)]
		if !ok {
			continue
		}
		if m, err := decodeManifest(r.value); err == nil && m.seq > newest {
			newest = m.seq
		}
	}
	return newest
}

// RecordsPrefix starts the keys of the caller's own records (PutRecords):
// the snapshot readers and Tail pass over them, so that they cost no
// memory however many there are; ScanRecords reads them.
const RecordsPrefix = "k/"

// ScanRecords reads the whole topic and calls fn with the key and value of
// every record whose key starts with prefix (which must start with
// RecordsPrefix) and whose value is a verified payload of PutRecords (others
// are skipped), in log order: a key's last call is its newest value, as
// compaction keeps it.
func (c *ChangelogStore) ScanRecords(ctx context.Context, prefix string, fn func(key string, value []byte)) error {
	if !strings.HasPrefix(prefix, RecordsPrefix) {
		return fmt.Errorf("snapshot: record prefix %q does not start with %q", prefix, RecordsPrefix)
	}
	_, _, err := c.scan(ctx, 0, func(_ int64, key, value []byte) {
		if !bytes.HasPrefix(key, []byte(prefix)) {
			return
		}
		if v, ok := openRecord(value); ok {
			fn(string(key), v)
		}
	})
	return err
}

// PutRecords writes records of the caller's own beside the snapshots (their
// keys must start with RecordsPrefix) and returns when all are
// acknowledged. Each value is framed with a magic and a CRC that
// ScanRecords checks.
func (c *ChangelogStore) PutRecords(ctx context.Context, keys []string, values [][]byte) error {
	msgs := make([]kafka.Message, 0, min(len(keys), 1024))
	size := 0
	for i, k := range keys {
		if !strings.HasPrefix(k, RecordsPrefix) {
			return fmt.Errorf("snapshot: record key %q does not start with %q", k, RecordsPrefix)
		}
		v := make([]byte, 0, len(values[i])+8)
		v = append(v, recordMagic...)
		v = binary.LittleEndian.AppendUint32(v, crc(values[i]))
		v = append(v, values[i]...)
		msgs = append(msgs, kafka.Message{Key: []byte(k), Value: v})
		if size += len(v); size >= writeGroupBytes || len(msgs) == cap(msgs) {
			if err := c.writer.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("snapshot: write records: %w", err)
			}
			msgs, size = msgs[:0], 0
		}
	}
	if len(msgs) > 0 {
		if err := c.writer.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("snapshot: write records: %w", err)
		}
	}
	return nil
}

const recordMagic = "SREC"

func openRecord(v []byte) ([]byte, bool) {
	if len(v) < 8 || string(v[:4]) != recordMagic {
		return nil, false
	}
	payload := v[8:]
	return payload, binary.LittleEndian.Uint32(v[4:8]) == crc(payload)
}
