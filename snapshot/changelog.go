package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

const (
	// DefaultChunkSize is the largest model payload one changelog record
	// carries, well under Kafka's default 1 MiB message limit.
	DefaultChunkSize = 512 << 10

	chunkMagic     = "SNCK"
	manifestMagic  = "SNMF"
	recordVersion  = 1
	chunkHeaderLen = 4 + 4 + 8 + 4 + 4 // magic, version, seq, index, count
	manifestKey    = "_manifest@"      // + generation digit

	writeGroupBytes = 16 << 20 // model bytes handed to one WriteMessages call
	fetchMaxBytes   = 16 << 20
	readTimeout     = 30 * time.Second // per fetch, when ctx has no earlier deadline
)

// ChangelogStore keeps the latest snapshot in a compacted, single-partition
// Kafka topic so that a pod without local disk can restore from Kafka alone.
// The record layout and why a restore is always consistent are described in
// the package documentation.
//
// A ChangelogStore is safe for concurrent use, but only one writer (one
// process) may save to a topic at a time. It starts no goroutines until the
// first Save; Close releases the writer's goroutines and connections.
type ChangelogStore struct {
	brokers   []string
	topic     string
	chunkSize int
	replicas  int
	dialer    *kafka.Dialer
	transport *kafka.Transport
	writer    *kafka.Writer

	mu    sync.Mutex
	known bool        // whether last and genKeys reflect the topic
	last  *genState   // the newest restorable generation, nil if none
	keys  [2][]string // chunk keys present in each generation
	// afterChunks, when set, runs after the model records of a Save are
	// acknowledged and before the manifest is written; an error stops the
	// Save there (tests simulate a crash with it).
	afterChunks func() error

	closeOnce sync.Once
	// prefix scopes the store's keys ("<scope>/"); shared is set on stores
	// made by Scope, which use their parent's writer and do not close it.
	prefix string
	shared bool
}

type genState struct {
	gen int
	seq uint64
}

// ChangelogOption configures a ChangelogStore.
type ChangelogOption func(*ChangelogStore)

// WithReplicationFactor sets the replication factor EnsureTopic creates the
// topic with; the default, -1, uses the broker's default.
func WithReplicationFactor(n int) ChangelogOption {
	return func(c *ChangelogStore) { c.replicas = n }
}

// WithChunkSize sets the largest model payload per record (default
// DefaultChunkSize). Keep it under the topic's max.message.bytes.
func WithChunkSize(n int) ChangelogOption {
	return func(c *ChangelogStore) {
		if n > 0 {
			c.chunkSize = n
		}
	}
}

// WithDialer makes the store connect with d (its reader: DialLeader) and t
// (its writer and the admin client of EnsureTopic), e.g. to use TLS and
// SASL. A nil argument keeps the default, plaintext one. The store closes
// t's idle connections on Close.
func WithDialer(d *kafka.Dialer, t *kafka.Transport) ChangelogOption {
	return func(c *ChangelogStore) {
		if d != nil {
			c.dialer = d
		}
		if t != nil {
			c.transport = t
		}
	}
}

// NewChangelogStore returns a store for topic on the given brokers. It does
// not connect; call EnsureTopic to create the topic if needed.
func NewChangelogStore(brokers []string, topic, clientID string, opts ...ChangelogOption) *ChangelogStore {
	c := &ChangelogStore{
		brokers:   slices.Clone(brokers),
		topic:     topic,
		chunkSize: DefaultChunkSize,
		replicas:  -1,
		dialer:    &kafka.Dialer{ClientID: clientID, Timeout: 10 * time.Second, DualStack: true},
		transport: &kafka.Transport{ClientID: clientID, DialTimeout: 10 * time.Second},
	}
	for _, o := range opts {
		o(c)
	}
	c.writer = &kafka.Writer{
		Addr:         kafka.TCP(c.brokers...),
		Topic:        topic,
		Balancer:     kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 }),
		RequiredAcks: kafka.RequireAll,
		BatchBytes:   int64(c.chunkSize) + 64<<10, // one full chunk per batch, plus small records
		BatchSize:    256,                         // kafka-go preallocates this many messages per batch
		BatchTimeout: time.Millisecond,
		Transport:    c.transport,
	}
	return c
}

// Close stops the writer and closes idle connections. It is idempotent.
func (c *ChangelogStore) Close() error {
	if c.shared {
		return nil
	}
	var err error
	c.closeOnce.Do(func() {
		err = c.writer.Close()
		c.transport.CloseIdleConnections()
	})
	return err
}

// EnsureTopic creates the topic (1 partition, cleanup.policy=compact) if it
// is missing, and checks that an existing topic is compacted and not also
// subject to deletion by retention, which would lose snapshots.
func (c *ChangelogStore) EnsureTopic(ctx context.Context) error {
	cl := &kafka.Client{Addr: kafka.TCP(c.brokers...), Transport: c.transport}
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic:             c.topic,
		NumPartitions:     1,
		ReplicationFactor: c.replicas,
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}})
	if err != nil {
		return fmt.Errorf("snapshot: create topic %s: %w", c.topic, err)
	}
	if err := resp.Errors[c.topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("snapshot: create topic %s: %w", c.topic, err)
	}
	dresp, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic,
		ResourceName: c.topic,
		ConfigNames:  []string{"cleanup.policy"},
	}}})
	if err != nil {
		return fmt.Errorf("snapshot: describe topic %s: %w", c.topic, err)
	}
	for _, r := range dresp.Resources {
		if r.Error != nil {
			return fmt.Errorf("snapshot: describe topic %s: %w", c.topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "cleanup.policy" && strings.TrimSpace(e.ConfigValue) != "compact" {
				return fmt.Errorf("snapshot: topic %s has cleanup.policy=%q, want \"compact\"", c.topic, e.ConfigValue)
			}
		}
	}
	return nil
}

// Save writes snap to the topic and returns only when every record is
// acknowledged by all in-sync replicas. It writes all model records into the
// generation the newest restorable snapshot does not use, then the manifest.
// If Save fails, the previously saved snapshot stays restorable even after
// compaction. A snap.Seq lower than the newest saved one is refused.
//
// The first Save of a store that has not loaded reads the topic once to learn
// which generation is in use.
func (c *ChangelogStore) Save(ctx context.Context, snap *Snapshot) error {
	if err := snap.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		if _, _, err := c.load(ctx); err != nil && !errors.Is(err, ErrNoSnapshot) {
			return fmt.Errorf("snapshot: save: %w", err)
		}
	}
	gen := 0
	if c.last != nil {
		if snap.Seq < c.last.seq {
			return fmt.Errorf("snapshot: save: seq %d is older than the newest saved snapshot %d", snap.Seq, c.last.seq)
		}
		gen = 1 - c.last.gen
	}

	// Model records, a group at a time to bound the memory held by copies.
	man := manifest{gen: gen, seq: snap.Seq, createdAt: snap.CreatedAt, fingerprint: snap.Fingerprint, offsets: snap.Offsets}
	var written []string
	done := false
	defer func() {
		// Records written by a failed Save are in the topic too; remember
		// them so a later save of this generation can delete stale ones.
		if !done {
			for _, k := range written {
				if !slices.Contains(c.keys[gen], k) {
					c.keys[gen] = append(c.keys[gen], k)
				}
			}
		}
	}()
	var msgs []kafka.Message
	pending := 0
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		if err := c.writer.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("snapshot: save: write model records: %w", err)
		}
		msgs, pending = msgs[:0], 0
		return nil
	}
	for i := range snap.Models {
		m := &snap.Models[i]
		n := (len(m.Data) + c.chunkSize - 1) / c.chunkSize
		man.models = append(man.models, manifestModel{
			name: m.Name, typ: m.Type, fp: m.Fingerprint, chunks: uint32(n), length: uint64(len(m.Data)), crc: crc(m.Data),
		})
		for j := range n {
			payload := m.Data[j*c.chunkSize : min((j+1)*c.chunkSize, len(m.Data))]
			key := c.prefix + chunkKey(m.Name, gen, j)
			msgs = append(msgs, kafka.Message{Key: []byte(key), Value: appendChunk(nil, snap.Seq, uint32(j), uint32(n), payload)})
			written = append(written, key)
			if pending += len(payload); pending >= writeGroupBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if c.afterChunks != nil {
		if err := c.afterChunks(); err != nil {
			return err
		}
	}

	// The manifest makes the snapshot visible.
	mk := c.prefix + manifestKey + strconv.Itoa(gen)
	if err := c.writer.WriteMessages(ctx, kafka.Message{Key: []byte(mk), Value: appendManifest(nil, &man)}); err != nil {
		return fmt.Errorf("snapshot: save: write manifest: %w", err)
	}
	done = true
	stale := c.keys[gen]
	c.last = &genState{gen: gen, seq: snap.Seq}
	c.keys[gen] = written

	// Best effort: delete chunk keys of this generation that the new
	// manifest no longer references (a model shrank or was removed), so that
	// compaction can drop them. Nothing references them, so a failure here
	// only leaves garbage that the next save of this generation retries.
	var tomb []kafka.Message
	for _, k := range stale {
		if !slices.Contains(written, k) {
			tomb = append(tomb, kafka.Message{Key: []byte(k)})
		}
	}
	if len(tomb) > 0 {
		if err := c.writer.WriteMessages(ctx, tomb...); err != nil {
			for _, m := range tomb {
				c.keys[gen] = append(c.keys[gen], string(m.Key))
			}
		}
	}
	return nil
}

// LoadLatest reads the topic from its start to its end offset and returns the
// newest snapshot whose manifest and model records are all present and
// verify. The error wraps ErrNoSnapshot when there is none.
func (c *ChangelogStore) LoadLatest(ctx context.Context) (*Snapshot, error) {
	snap, _, err := c.Load(ctx)
	return snap, err
}

// Load is LoadLatest that also reports the manifests it passed over (Path is
// "topic/key") because they or their records were missing or bad. A newer
// manifest whose chunks were overwritten by a later, interrupted Save (one
// whose own success was not acknowledged) is reported here; that is expected
// and harmless.
func (c *ChangelogStore) Load(ctx context.Context) (*Snapshot, []Skipped, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.load(ctx)
}

// load reads the topic and updates the writer state. c.mu must be held.
func (c *ChangelogStore) load(ctx context.Context) (*Snapshot, []Skipped, error) {
	all := make(map[string]record)
	if _, _, err := c.readFrom(ctx, all, 0); err != nil {
		return nil, nil, err
	}
	return c.adopt(all)
}

// adopt resolves the store's snapshot among all (the latest record of
// every key of the topic) and takes its generation state from them. c.mu
// must be held.
func (c *ChangelogStore) adopt(all map[string]record) (*Snapshot, []Skipped, error) {
	recs := scopeRecords(all, c.prefix)
	var keys [2][]string
	for k := range recs {
		if _, gen, _, ok := parseChunkKey(k); ok {
			keys[gen] = append(keys[gen], c.prefix+k)
		}
	}
	for g := range keys {
		slices.Sort(keys[g])
	}
	snap, gen, skipped, err := resolve(c.topic, recs)
	if err != nil {
		return nil, skipped, err
	}
	c.keys = keys
	c.known = true
	c.last = nil
	if snap != nil {
		c.last = &genState{gen: gen, seq: snap.Seq}
		return snap, skipped, nil
	}
	if len(skipped) > 0 {
		return nil, skipped, fmt.Errorf("%w: no manifest in topic %s is restorable: %w", ErrNoSnapshot, c.topic, skipped[0].Err)
	}
	return nil, nil, fmt.Errorf("%w in topic %s", ErrNoSnapshot, c.topic)
}

type record struct {
	offset int64
	value  []byte
}

// readFrom reads partition 0 from offset from (or its first offset, if
// later) to its end offset into recs, which then holds the latest value per
// key, as compaction would leave it; tombstones remove keys. The caller's
// own records (RecordsPrefix) are not kept: ScanRecords reads them. It
// returns the end offset read to.
func (c *ChangelogStore) readFrom(ctx context.Context, recs map[string]record, from int64) (end int64, n int, err error) {
	return c.scan(ctx, from, func(off int64, key, value []byte) {
		n++
		if bytes.HasPrefix(key, []byte(RecordsPrefix)) {
			return
		}
		if len(value) == 0 {
			delete(recs, string(key))
		} else {
			recs[string(key)] = record{offset: off, value: value}
		}
	})
}

// scan reads partition 0 from offset from (or its first offset, if later)
// to its end offset, calling fn with every record in log order, and returns
// the end offset read to and the records read.
func (c *ChangelogStore) scan(ctx context.Context, from int64, fn func(offset int64, key, value []byte)) (end int64, n int, err error) {
	conn, err := c.dialLeader(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	first, end, err := conn.ReadOffsets()
	if err != nil {
		return 0, 0, fmt.Errorf("snapshot: read offsets of %s: %w", c.topic, err)
	}
	first = max(first, from)
	if first >= end {
		return end, n, nil
	}
	if _, err := conn.Seek(first, kafka.SeekAbsolute); err != nil {
		return 0, 0, fmt.Errorf("snapshot: seek %s: %w", c.topic, err)
	}
	for off, stuck := first, 0; off < end; {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		dl := time.Now().Add(readTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		conn.SetReadDeadline(dl)
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: fetchMaxBytes, MaxWait: time.Second})
		for {
			msg, err := batch.ReadMessage()
			if err != nil {
				break
			}
			if msg.Offset >= end {
				continue
			}
			n++
			fn(msg.Offset, msg.Key, msg.Value)
		}
		if err := batch.Close(); err != nil {
			return 0, 0, fmt.Errorf("snapshot: read %s at offset %d: %w", c.topic, off, err)
		}
		next, _ := conn.Offset()
		if next <= off {
			if stuck++; stuck > 3 {
				return 0, 0, fmt.Errorf("snapshot: read %s: no progress at offset %d of %d", c.topic, off, end)
			}
			continue
		}
		off, stuck = next, 0
	}
	return end, n, nil
}

// scopeRecords returns the records of one scope with the scope's prefix
// removed from their keys; prefix "" selects the unscoped keys (those
// without a '/', which model names never contain).
func scopeRecords(all map[string]record, prefix string) map[string]record {
	out := make(map[string]record)
	for k, r := range all {
		switch {
		case prefix == "":
			if !strings.Contains(k, scopeSep) {
				out[k] = r
			}
		case strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], scopeSep):
			out[k[len(prefix):]] = r
		}
	}
	return out
}

func (c *ChangelogStore) dialLeader(ctx context.Context) (*kafka.Conn, error) {
	var errs []error
	for _, b := range c.brokers {
		conn, err := c.dialer.DialLeader(ctx, "tcp", b, c.topic, 0)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("snapshot: dial leader of %s/0: %w", c.topic, errors.Join(errs...))
}

// resolve picks the newest restorable manifest among the latest records of
// one scope (keys without the scope prefix); topic names skipped records.
func resolve(topic string, recs map[string]record) (*Snapshot, int, []Skipped, error) {
	type cand struct {
		key    string
		offset int64
		man    *manifest
	}
	var cands []cand
	var skipped []Skipped
	for g := range 2 {
		k := manifestKey + strconv.Itoa(g)
		r, ok := recs[k]
		if !ok {
			continue
		}
		m, err := decodeManifest(r.value)
		if err == nil && m.gen != g {
			err = corrupt("manifest", "generation %d stored under key %q", m.gen, k)
		}
		if err != nil {
			skipped = append(skipped, Skipped{Path: topic + "/" + k, Err: err})
			continue
		}
		cands = append(cands, cand{k, r.offset, m})
	}
	// Newest first: by seq, then by position in the log.
	slices.SortFunc(cands, func(a, b cand) int {
		if a.man.seq != b.man.seq {
			return -cmpU64(a.man.seq, b.man.seq)
		}
		return -cmpU64(uint64(a.offset), uint64(b.offset))
	})
	for _, cd := range cands {
		snap, err := assemble(cd.man, recs)
		if err == nil {
			return snap, cd.man.gen, skipped, nil
		}
		skipped = append(skipped, Skipped{Path: topic + "/" + cd.key, Err: fmt.Errorf("seq %d: %w", cd.man.seq, err)})
	}
	return nil, 0, skipped, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// assemble rebuilds the snapshot a manifest describes from its chunks.
func assemble(m *manifest, recs map[string]record) (*Snapshot, error) {
	s := &Snapshot{
		Format:      FormatVersion,
		Seq:         m.seq,
		CreatedAt:   m.createdAt,
		Fingerprint: m.fingerprint,
		Offsets:     m.offsets,
	}
	if len(m.models) > 0 {
		s.Models = make([]Model, len(m.models))
	}
	for i, mm := range m.models {
		part := fmt.Sprintf("model %q", mm.name)
		// Verify every chunk before allocating, so a bad manifest cannot make
		// us allocate more than the records actually hold.
		payloads := make([][]byte, 0, min(int(mm.chunks), len(recs)))
		var total uint64
		for j := range int(mm.chunks) {
			key := chunkKey(mm.name, m.gen, j)
			r, ok := recs[key]
			if !ok {
				return nil, corrupt(part, "record %q missing", key)
			}
			seq, idx, n, payload, err := decodeChunk(r.value)
			switch {
			case err != nil:
				return nil, fmt.Errorf("record %q: %w", key, err)
			case seq != m.seq:
				return nil, corrupt(part, "record %q belongs to seq %d", key, seq)
			case idx != uint32(j) || n != mm.chunks:
				return nil, corrupt(part, "record %q is chunk %d of %d, want %d of %d", key, idx, n, j, mm.chunks)
			}
			payloads = append(payloads, payload)
			total += uint64(len(payload))
		}
		if total != mm.length {
			return nil, corrupt(part, "chunks hold %d bytes, %d declared", total, mm.length)
		}
		var data []byte
		if total > 0 {
			data = make([]byte, 0, total)
			for _, p := range payloads {
				data = append(data, p...)
			}
		}
		if got := crc(data); got != mm.crc {
			return nil, corrupt(part, "checksum mismatch (stored %08x, computed %08x)", mm.crc, got)
		}
		s.Models[i] = Model{Name: mm.name, Type: mm.typ, Fingerprint: mm.fp, Data: data}
	}
	return s, nil
}

// ---- record codecs ----

func chunkKey(model string, gen, i int) string {
	return model + "@" + strconv.Itoa(gen) + "#" + strconv.Itoa(i)
}

// parseChunkKey splits "<model>@<gen>#<i>", parsing from the right so model
// names may contain '@' and '#'.
func parseChunkKey(k string) (model string, gen, i int, ok bool) {
	h := strings.LastIndexByte(k, '#')
	if h < 0 {
		return "", 0, 0, false
	}
	i, err := strconv.Atoi(k[h+1:])
	if err != nil || i < 0 {
		return "", 0, 0, false
	}
	a := strings.LastIndexByte(k[:h], '@')
	if a < 1 || (k[a+1:h] != "0" && k[a+1:h] != "1") {
		return "", 0, 0, false
	}
	return k[:a], int(k[a+1] - '0'), i, true
}

// appendChunk appends a chunk record value: magic, version, seq, index,
// count, payload, CRC-32C of everything before it.
func appendChunk(dst []byte, seq uint64, idx, n uint32, payload []byte) []byte {
	dst = slices.Grow(dst, chunkHeaderLen+len(payload)+4)
	start := len(dst)
	dst = append(dst, chunkMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, recordVersion)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, idx)
	dst = binary.LittleEndian.AppendUint32(dst, n)
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, crc(dst[start:]))
}

func decodeChunk(v []byte) (seq uint64, idx, n uint32, payload []byte, err error) {
	if len(v) < chunkHeaderLen+4 {
		return 0, 0, 0, nil, corrupt("chunk", "truncated: %d bytes", len(v))
	}
	if string(v[:4]) != chunkMagic {
		return 0, 0, 0, nil, corrupt("chunk", "bad magic %q", v[:4])
	}
	if ver := binary.LittleEndian.Uint32(v[4:]); ver != recordVersion {
		return 0, 0, 0, nil, fmt.Errorf("%w: chunk record version %d", ErrUnsupportedVersion, ver)
	}
	body := v[:len(v)-4]
	if got, want := crc(body), binary.LittleEndian.Uint32(v[len(v)-4:]); got != want {
		return 0, 0, 0, nil, corrupt("chunk", "checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	return binary.LittleEndian.Uint64(v[8:]), binary.LittleEndian.Uint32(v[16:]),
		binary.LittleEndian.Uint32(v[20:]), body[chunkHeaderLen:], nil
}

type manifest struct {
	gen         int
	seq         uint64
	createdAt   time.Time
	fingerprint string
	offsets     []Offset
	models      []manifestModel
}

type manifestModel struct {
	name, typ, fp string
	chunks        uint32
	length        uint64
	crc           uint32
}

func appendManifest(dst []byte, m *manifest) []byte {
	start := len(dst)
	dst = append(dst, manifestMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, recordVersion)
	dst = append(dst, byte(m.gen))
	dst = binary.LittleEndian.AppendUint64(dst, m.seq)
	dst = appendTime(dst, m.createdAt)
	dst = appendString(dst, m.fingerprint)
	dst = appendOffsets(dst, m.offsets)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(m.models)))
	for _, mm := range m.models {
		dst = appendString(dst, mm.name)
		dst = appendString(dst, mm.typ)
		dst = appendString(dst, mm.fp)
		dst = binary.LittleEndian.AppendUint32(dst, mm.chunks)
		dst = binary.LittleEndian.AppendUint64(dst, mm.length)
		dst = binary.LittleEndian.AppendUint32(dst, mm.crc)
	}
	return binary.LittleEndian.AppendUint32(dst, crc(dst[start:]))
}

func decodeManifest(v []byte) (*manifest, error) {
	if len(v) < 8+4 {
		return nil, corrupt("manifest", "truncated: %d bytes", len(v))
	}
	if string(v[:4]) != manifestMagic {
		return nil, corrupt("manifest", "bad magic %q", v[:4])
	}
	if ver := binary.LittleEndian.Uint32(v[4:]); ver != recordVersion {
		return nil, fmt.Errorf("%w: manifest record version %d", ErrUnsupportedVersion, ver)
	}
	body := v[:len(v)-4]
	if got, want := crc(body), binary.LittleEndian.Uint32(v[len(v)-4:]); got != want {
		return nil, corrupt("manifest", "checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	r := reader{b: body[8:]}
	m := &manifest{gen: int(r.u8()), seq: r.u64(), createdAt: r.time(), fingerprint: r.str(MaxFingerprintLen), offsets: r.offsets()}
	n := r.count(4 + 1 + 4 + 4 + 4 + 8 + 4)
	for range n {
		mm := manifestModel{name: r.str(MaxNameLen), typ: r.str(MaxNameLen), fp: r.str(MaxFingerprintLen), chunks: r.u32(), length: r.u64(), crc: r.u32()}
		if r.err != nil {
			break
		}
		m.models = append(m.models, mm)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d unused bytes at the end", len(r.b))
	}
	if r.err == nil && m.gen > 1 {
		r.fail("generation %d", m.gen)
	}
	if r.err != nil {
		return nil, corrupt("manifest", "malformed: %v", r.err)
	}
	check := Snapshot{Offsets: m.offsets, Fingerprint: m.fingerprint}
	for _, mm := range m.models {
		check.Models = append(check.Models, Model{Name: mm.name, Type: mm.typ, Fingerprint: mm.fp})
	}
	if err := check.Validate(); err != nil {
		return nil, corrupt("manifest", "%v", err)
	}
	return m, nil
}
