package stream

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// StateStore makes snapshots durable in a directory of files, a compacted
// changelog topic, or both, and loads the newest valid one back.
type StateStore struct {
	file        *snapshot.FileStore
	changelog   *snapshot.ChangelogStore
	clTopic     string // the changelog's topic
	fingerprint string
	seq         uint64
	log         *slog.Logger
	met         *stateMetrics
	health      *BrokerHealth // the changelog's retries, for /readyz (nil: none)

	partsMu sync.Mutex
	parts   map[int]*partStore // partitioned state: per input partition
	tail    *snapshot.Tail     // partitioned state: the changelog, followed

	corrupt int // corrupt snapshot files moved aside by Load

	written atomic.Int64 // model bytes made durable, in all snapshots
	saved   atomic.Int64 // snapshots made durable
}

type stateMetrics struct {
	saves, saveErrors, skipped prometheus.Counter
	saveSeconds                prometheus.Histogram
	lastSave, bytes            prometheus.Gauge
	savedBytes                 prometheus.Counter
}

func newStateMetrics(reg prometheus.Registerer) *stateMetrics {
	m := &stateMetrics{
		saves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_snapshots_total", Help: "Snapshots made durable."}),
		saveErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_snapshot_errors_total", Help: "Snapshots that failed to be made durable (offsets were not committed)."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_snapshot_corrupt_total", Help: "Corrupt snapshots skipped at start-up (an older one was loaded)."}),
		saveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "streamer_snapshot_duration_seconds", Help: "Time to encode a snapshot and make it durable.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		lastSave: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamer_snapshot_last_timestamp_seconds", Help: "Unix time of the last durable snapshot."}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamer_snapshot_model_bytes", Help: "Bytes of model state in the last snapshot."}),
		savedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_snapshot_written_bytes_total", Help: "Bytes of model state made durable, in all snapshots (the changelog's traffic, less record overhead)."}),
	}
	if reg != nil {
		reg.MustRegister(m.saves, m.saveErrors, m.skipped, m.saveSeconds, m.lastSave, m.bytes, m.savedBytes)
	}
	return m
}

// OpenStateStore opens the stores cfg names. It returns nil, nil when
// snapshots are off.
func OpenStateStore(ctx context.Context, cfg config.Snapshot, brokers []string, clientID, fingerprint string,
	reg prometheus.Registerer, log *slog.Logger, health *BrokerHealth, opts ...snapshot.ChangelogOption) (*StateStore, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &StateStore{fingerprint: fingerprint, log: log, met: newStateMetrics(reg), health: health}
	if cfg.Dir != "" {
		fs, err := snapshot.OpenFileStore(cfg.Dir, cfg.Keep)
		if err != nil {
			return nil, fmt.Errorf("snapshot.dir: %w", err)
		}
		s.file = fs
	}
	if cfg.ChangelogTopic != "" {
		s.changelog, s.clTopic = snapshot.NewChangelogStore(brokers, cfg.ChangelogTopic, clientID, opts...), cfg.ChangelogTopic
		if err := retry(ctx, log, health, "create changelog topic", &topicUse{key: "snapshot.changelog_topic", topic: cfg.ChangelogTopic, needs: "CREATE"}, func() error { return s.changelog.EnsureTopic(ctx) }); err != nil {
			if isRefusal(err) {
				return nil, err // names its key
			}
			return nil, fmt.Errorf("snapshot.changelog_topic: %w", err)
		}
	}
	return s, nil
}

// changelogUse is the changelog topic as the state store uses it.
func changelogUse(topic string) *topicUse {
	return &topicUse{key: "snapshot.changelog_topic", topic: topic, needs: "READ and WRITE"}
}

// retry runs fn with backoff until it succeeds or ctx ends (the broker may
// not be up yet). An error the brokers will return whatever the retries (a
// BrokerRefusal) ends it at once; use is the topic fn works on, whose key
// the refusal names (a cluster-level refusal too: creating the topic is
// what needs the cluster permission).
//
// Each failure is reported to h (nil: none) under what, so that /readyz
// says what is retried; success clears it.
func retry(ctx context.Context, log *slog.Logger, h *BrokerHealth, what string, use *topicUse, fn func() error) error {
	wait := newBackoff(100*time.Millisecond, 5*time.Second)
	var errs repeats
	for {
		err := fn()
		if err == nil {
			h.OK(what)
			return nil
		}
		if r := refusal(err, use, "the client"); r != nil {
			if r.Code == kafka.ClusterAuthorizationFailed && use != nil {
				r.Key = use.key
			}
			return r
		}
		h.failed(what, err.Error())
		d := wait.next()
		if ok, n := errs.pass(err.Error()); ok {
			log.Warn(what+": retrying", "err", err, "in", d.String(), "repeated_since_last_logged", n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(d):
		}
	}
}

// Load returns the newest valid snapshot of the configured stores (the file
// store and the changelog are both read when both are set), or nil when
// there is none.
func (s *StateStore) Load(ctx context.Context) (*snapshot.Snapshot, error) {
	var best *snapshot.Snapshot
	var newest uint64 // the highest seq of any file, valid or not: new snapshots are numbered past it
	if s.file != nil {
		var err error
		if newest, err = s.file.NewestSeq(); err != nil {
			return nil, fmt.Errorf("load snapshot: %w", err)
		}
		snap, skipped, err := s.file.LoadLatest()
		for _, sk := range skipped {
			s.met.skipped.Inc()
			s.corrupt++
			// Moved aside: kept for inspection, never loaded or counted
			// again.
			moved, qerr := s.file.Quarantine(sk.Path)
			if qerr != nil {
				moved = sk.Path
				s.log.Error("corrupt snapshot could not be moved aside", "path", sk.Path, "err", qerr)
			}
			s.log.Error("corrupt snapshot skipped and moved aside; falling back to an older one", "path", moved, "err", sk.Err)
		}
		switch {
		case err == nil:
			best = snap
		case errors.Is(err, snapshot.ErrNoSnapshot):
		default:
			return nil, fmt.Errorf("load snapshot: %w", err)
		}
	}
	if s.changelog != nil {
		var snap *snapshot.Snapshot
		err := retry(ctx, s.log, s.health, "read changelog", changelogUse(s.clTopic), func() error {
			var err error
			snap, err = s.changelog.LoadLatest(ctx)
			if errors.Is(err, snapshot.ErrNoSnapshot) {
				snap, err = nil, nil
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if snap != nil && (best == nil || snap.Seq > best.Seq) {
			best = snap
		}
	}
	if best != nil {
		s.seq = best.Seq
	}
	s.seq = max(s.seq, newest)
	return best, nil
}

// Save makes a snapshot of models at offsets durable: for scope "" (a
// whole instance's state) in every configured store, for a partition's
// scope in that scope of the changelog (savePartition).
func (s *StateStore) Save(ctx context.Context, scope, topic string, offsets map[int]int64, models []snapshot.Model) error {
	if scope != "" {
		part, err := strconv.Atoi(scope)
		if err != nil {
			return fmt.Errorf("stream: scope %q is not a partition", scope)
		}
		return s.savePartition(ctx, topic, part, offsets[part], models)
	}
	start := time.Now()
	snap := &snapshot.Snapshot{
		Seq:         s.seq + 1,
		CreatedAt:   start.UTC(),
		Fingerprint: s.fingerprint,
		Models:      models,
	}
	for part, off := range offsets {
		snap.Offsets = append(snap.Offsets, snapshot.Offset{Topic: topic, Partition: int32(part), Offset: off})
	}
	if s.file != nil {
		if _, err := s.file.Save(snap); err != nil {
			s.met.saveErrors.Inc()
			return fmt.Errorf("save snapshot: %w", err)
		}
	}
	if s.changelog != nil {
		if err := s.changelog.Save(ctx, snap); err != nil {
			s.met.saveErrors.Inc()
			return fmt.Errorf("save snapshot to changelog: %w", err)
		}
	}
	s.seq = snap.Seq
	s.saved1(start, models, true)
	return nil
}

// saved1 counts one durable snapshot of models begun at start.
func (s *StateStore) saved1(start time.Time, models []snapshot.Model, whole bool) {
	var size int
	for _, m := range models {
		size += len(m.Data)
	}
	s.met.saves.Inc()
	s.met.saveSeconds.Observe(time.Since(start).Seconds())
	s.met.lastSave.Set(float64(start.Unix()))
	if whole {
		s.met.bytes.Set(float64(size))
	}
	s.met.savedBytes.Add(float64(size))
	s.written.Add(int64(size))
	s.saved.Add(1)
}

// PutKeys writes the key-scoped models' deltas of a durable checkpoint of
// scope to the changelog as key records, one per (model, key), so that
// compaction keeps each key's newest state: the keys travel with their
// partition to whichever instance restores it. Without a changelog it does
// nothing.
func (s *StateStore) PutKeys(ctx context.Context, scope string, c *engine.Checkpoint) error {
	if s == nil || s.changelog == nil {
		return nil
	}
	var keys []string
	var values [][]byte
	for i, d := range c.Deltas() {
		if d == nil {
			continue
		}
		ks, states := d.States()
		for j, k := range ks {
			keys = append(keys, keyRecord(scope, c.Models[i].Name, k))
			values = append(values, states[j])
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.changelog.PutRecords(ctx, keys, values); err != nil {
		s.met.saveErrors.Inc()
		return err
	}
	return nil
}

// keyRecord is the changelog key of a key-scoped model's state:
// "k/<scope>/<model>/<key in hex>". Its last component never names a
// snapshot record, so the snapshot readers pass over it.
func keyRecord(scope, model string, key []byte) string {
	return keyRecordPrefix(scope, model) + hex.EncodeToString(key)
}

// keyRecordPrefix is the prefix of a model's key records in scope, or of
// every model's with model "".
func keyRecordPrefix(scope, model string) string {
	if model == "" {
		return snapshot.RecordsPrefix + scope + "/"
	}
	return snapshot.RecordsPrefix + scope + "/" + model + "/"
}

// keyRecords are one model's keys and states as the changelog holds them.
type keyRecords struct{ keys, states [][]byte }

// LoadKeys returns the key records of every key-scoped model in scope, by
// model, as the changelog holds them now: it reads the whole changelog once
// (the instance does not keep key records in memory), keeping only this
// scope's, the newest per key.
func (s *StateStore) LoadKeys(ctx context.Context, scope string) (map[string]keyRecords, error) {
	if s == nil || s.changelog == nil {
		return nil, errors.New("no changelog")
	}
	prefix := keyRecordPrefix(scope, "")
	latest := map[string][]byte{}
	if err := s.changelog.ScanRecords(ctx, prefix, func(k string, v []byte) { latest[k] = v }); err != nil {
		return nil, fmt.Errorf("read changelog: %w", err)
	}
	out := map[string]keyRecords{}
	for k, v := range latest {
		model, hexKey, ok := strings.Cut(k[len(prefix):], "/")
		key, err := hex.DecodeString(hexKey)
		if !ok || err != nil {
			return nil, fmt.Errorf("changelog record %q: not a key record", k)
		}
		r := out[model]
		r.keys, r.states = append(r.keys, key), append(r.states, v)
		out[model] = r
	}
	return out, nil
}

// Written returns the bytes of model state made durable and the number of
// snapshots made durable, since the store was opened.
func (s *StateStore) Written() (bytes, snapshots int64) {
	if s == nil {
		return 0, 0
	}
	return s.written.Load(), s.saved.Load()
}

// Close releases the changelog's connections.
func (s *StateStore) Close() error {
	if s == nil || s.changelog == nil {
		return nil
	}
	return s.changelog.Close()
}

func (s *StateStore) setWriteHook(fn func()) {
	if s.file != nil {
		s.file.SetWriteHook(fn)
	}
}

// Partitioned state (scale-out): every input partition's state is a
// snapshot of its own, kept in the changelog under the partition's scope
// (its number), written by whichever instance owns the partition.

// partStore is the scoped store of one partition and the seq it last saved.
type partStore struct {
	cl  *snapshot.ChangelogStore
	seq uint64
}

func (s *StateStore) partition(part int) (*partStore, error) {
	if s.changelog == nil {
		return nil, errors.New("stream: partitioned state needs snapshot.changelog_topic")
	}
	s.partsMu.Lock()
	defer s.partsMu.Unlock()
	if ps := s.parts[part]; ps != nil {
		return ps, nil
	}
	cl, err := s.changelog.Scope(strconv.Itoa(part))
	if err != nil {
		return nil, err
	}
	if s.parts == nil {
		s.parts = map[int]*partStore{}
	}
	ps := &partStore{cl: cl}
	s.parts[part] = ps
	return ps, nil
}

// LoadPartition reads the changelog and returns the newest snapshot of
// partition part, or nil when it has none.
func (s *StateStore) LoadPartition(ctx context.Context, part int) (*snapshot.Snapshot, error) {
	ps, err := s.partition(part)
	if err != nil {
		return nil, err
	}
	// One incremental read of the changelog serves every partition
	// restored after a rebalance.
	tail := s.Tail()
	if _, err := tail.Poll(ctx); err != nil {
		return nil, fmt.Errorf("load state of partition %d: read changelog: %w", part, err)
	}
	snap, skipped, err := ps.cl.LoadFrom(tail)
	for _, sk := range skipped {
		s.met.skipped.Inc()
		s.log.Warn("changelog: snapshot of partition skipped; falling back to an older one", "partition", part, "path", sk.Path, "err", sk.Err)
	}
	if errors.Is(err, snapshot.ErrNoSnapshot) {
		ps.seq = 0
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state of partition %d: %w", part, err)
	}
	ps.seq = snap.Seq
	return snap, nil
}

// RefreshChangelog reads what was written to the changelog since the last
// read (one incremental read for all partitions): call it before a round
// of partition saves, whose fence judges the changelog as last read.
func (s *StateStore) RefreshChangelog(ctx context.Context) error {
	if _, err := s.Tail().Poll(ctx); err != nil {
		s.met.saveErrors.Inc()
		return fmt.Errorf("read changelog: %w", err)
	}
	return nil
}

// savePartition makes partition part's state at offset durable in its
// scope of the changelog. It is fenced: if the changelog, as last read
// (RefreshChangelog, LoadPartition), holds a state of the partition saved
// by another writer since this store's last save or load of it — the
// partition was assigned elsewhere while this instance was cut off from
// the group — this state is stale and is not saved (ErrPartitionTakenOver).
func (s *StateStore) savePartition(ctx context.Context, topic string, part int, offset int64, models []snapshot.Model) error {
	ps, err := s.partition(part)
	if err != nil {
		return err
	}
	if newest := s.Tail().NewestSeq(strconv.Itoa(part)); newest > ps.seq {
		s.met.saveErrors.Inc()
		return fmt.Errorf("save state of partition %d: %w (its newest state is seq %d, ours %d)", part, ErrPartitionTakenOver, newest, ps.seq)
	}
	start := time.Now()
	snap := &snapshot.Snapshot{
		Seq:         ps.seq + 1,
		CreatedAt:   start.UTC(),
		Fingerprint: s.fingerprint,
		Offsets:     []snapshot.Offset{{Topic: topic, Partition: int32(part), Offset: offset}},
		Models:      models,
	}
	if err := ps.cl.Save(ctx, snap); err != nil {
		s.met.saveErrors.Inc()
		return fmt.Errorf("save state of partition %d to changelog: %w", part, err)
	}
	ps.seq = snap.Seq
	s.saved1(start, models, false)
	return nil
}

// ErrPartitionTakenOver is returned by Save of a partition's scope when another instance
// saved the partition's state after this one last did.
var ErrPartitionTakenOver = errors.New("partition was taken over by another instance")

// Tail follows the changelog (other instances' partitions); nil without
// one. Every call returns the same Tail.
func (s *StateStore) Tail() *snapshot.Tail {
	if s == nil || s.changelog == nil {
		return nil
	}
	s.partsMu.Lock()
	defer s.partsMu.Unlock()
	if s.tail == nil {
		s.tail = s.changelog.Tail()
	}
	return s.tail
}
