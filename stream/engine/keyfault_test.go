package engine

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/holder"
)

// faultShard is keyedShard with a registry, a log and cfg's
// AllowKeyLoss: one key-scoped model "k" (an rbf mam on 2 features).
func faultShard(t testing.TB, max int, keys *keystore.DB, log *slog.Logger, allowLoss bool) (*Shard, *prometheus.Registry) {
	t.Helper()
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 8, Seed: 1}, Balance: true, Delta: 0.05})
	}
	m, _ := factory()
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, KeyStore: keys, Log: log, AllowKeyLoss: allowLoss},
		[]NamedModel{{Name: "k", Model: m, Fingerprint: "k-fp", Factory: factory, MaxKeys: max, New: factory}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s, err := e.NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	return s, reg
}

// keyEvent is a labelled event of key.
func keyEvent(key string, i int) kafka.Message {
	return kafka.Message{Topic: "events", Offset: int64(i), Key: []byte(key),
		Value: fmt.Appendf(nil, `{"features":[%d,%d],"label":%d}`, i%5, (i*3)%7, 1-2*(i%2))}
}

// TestKeyedCorruptKeyFails: 4 KB of random bytes inside the key store's
// table file. The keys of the damaged block fail: their events are scored
// (by a fresh instance), counted in streamer_model_key_errors_total, never
// learned and never read again (no panic, no stall, the LRU intact); every
// other key reads its state back and learns exactly as in a store without
// damage; a checkpoint writes them; streamer_model_keys_failed and
// KeyFaults (for /readyz) say so; a restore forgets the failed keys and a
// read fails them again.
func TestKeyedCorruptKeyFails(t *testing.T) {
	const nkeys = 1500
	dir := t.TempDir()
	keys, err := keystore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := keystore.Open("", nil) // the same stream, without damage
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	s, _ := faultShard(t, 3, keys, nil, false)
	r, _ := faultShard(t, 3, ref, nil, false)
	for _, sh := range []*Shard{s, r} {
		if _, _, err := sh.Restore(nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	sink := &memSink{}
	var first []kafka.Message
	for i := range 2 * nkeys {
		first = append(first, keyEvent(fmt.Sprintf("user-%05d", i%nkeys), i))
	}
	for i := range first {
		s.Process(&first[i], sink)
		r.Process(&first[i], sink)
	}
	saved := checkpointShard(t, s)
	checkpointShard(t, r)
	if err := keys.Close(); err != nil {
		t.Fatal(err)
	}
	// The table file with the keys' states: the largest. (The restore's
	// empty table wrote a small one first, which a compaction merges
	// with the checkpoint's when it runs before Close: on a loaded
	// machine it may not have.)
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(files) == 0 {
		t.Fatal("no table file")
	}
	slices.SortFunc(files, func(a, b string) int { return cmp.Compare(fileSize(t, b), fileSize(t, a)) })
	for _, f := range files {
		t.Logf("table file %s: %d bytes", filepath.Base(f), fileSize(t, f))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := len(b) / 2; i < len(b)/2+4096; i++ {
		b[i] = byte(rng.UintN(256))
	}
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	// No compaction: one that merges the two files would read the damage
	// too, and count with the keys' reads (it did on a loaded machine).
	keys, err = keystore.Open(dir, nil, keystore.WithoutCompactions())
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	s, reg := faultShard(t, 3, keys, slog.New(slog.NewTextHandler(&logs, nil)), false)
	if _, _, err := s.Restore(saved, nil); err != nil {
		t.Fatal(err)
	}
	bad := map[string]bool{}
	for i := range nkeys {
		key := fmt.Sprintf("user-%05d", i)
		if _, _, err := keys.Table("", "k").Get([]byte(key), nil); err != nil {
			if !errors.Is(err, keystore.ErrCorrupt) {
				t.Fatal(err)
			}
			bad[key] = true
		}
	}
	if len(bad) == 0 || len(bad) > nkeys/5 {
		t.Fatalf("%d keys unreadable, want those of a block or two", len(bad))
	}
	reads := keys.Corruptions()

	// Three events per key, keys interleaved, so that the instances
	// churn between memory and the store.
	var second []kafka.Message
	for i := range 3 * nkeys {
		second = append(second, keyEvent(fmt.Sprintf("user-%05d", i%nkeys), i))
	}
	k := s.models[0].keys(t)
	before := k.Stats().Examples
	sink = &memSink{Keep: true}
	for i := range second {
		s.Process(&second[i], sink)
		if i%97 == 0 {
			if err := k.Check(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	if len(sink.Msgs) != len(second) {
		t.Fatalf("%d score records for %d events", len(sink.Msgs), len(second))
	}
	if got := keys.Corruptions() - reads; got != int64(len(bad)) {
		t.Errorf("%d reads met the damage, want one per damaged key (%d): a failed key is not read again", got, len(bad))
	}
	if got := testutil.ToFloat64(s.models[0].def.met.keyErrors); got != float64(3*len(bad)) {
		t.Errorf("streamer_model_key_errors_total = %v, want %d (3 events of %d failed keys)", got, 3*len(bad), len(bad))
	}
	if n, err := testutil.GatherAndCount(reg, "streamer_model_keys_failed"); err != nil || n != 1 {
		t.Fatalf("streamer_model_keys_failed: %d series, %v", n, err)
	}
	if got := s.e.keyFaults()["k"]; got != int64(len(bad)) {
		t.Errorf("streamer_model_keys_failed = %d, want %d", got, len(bad))
	}
	if want := fmt.Sprintf("model k: %d keys failed", len(bad)); !strings.Contains(s.e.KeyFaults(), want) {
		t.Errorf("KeyFaults = %q, want %q", s.e.KeyFaults(), want)
	}
	if got, want := k.Stats().Examples-before, int64(3*(nkeys-len(bad))); got != want {
		t.Errorf("learned %d examples, want %d (none of the failed keys')", got, want)
	}
	if c := strings.Count(logs.String(), "the key is failed"); c != min(len(bad), holder.FaultsLogged) {
		t.Errorf("%d failed keys logged, want %d", c, min(len(bad), holder.FaultsLogged))
	}

	// A checkpoint writes every other key; they equal the reference's.
	c, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range deltaKeys(c.deltas[0]) {
		if bad[string(key)] {
			t.Fatalf("failed key %q in the checkpoint", key)
		}
	}
	if len(deltaKeys(c.deltas[0])) != nkeys-len(bad) {
		t.Errorf("the checkpoint carries %d keys, want %d", len(deltaKeys(c.deltas[0])), nkeys-len(bad))
	}
	if err := s.Durable(c); err != nil {
		t.Fatalf("checkpoint after the damage: %v", err)
	}
	s.Settle(c)
	var good []kafka.Message
	for _, m := range second {
		if !bad[string(m.Key)] {
			good = append(good, m)
		}
	}
	for i := range good {
		r.Process(&good[i], &memSink{})
	}
	checkpointShard(t, r)
	want := map[string]string{}
	if err := ref.Table("", "k").Scan(func(k, v []byte) error {
		if !bad[string(k)] {
			want[string(k)] = string(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for key := range want {
		v, found, err := keys.Table("", "k").Get([]byte(key), nil)
		if err != nil || !found {
			t.Fatalf("%s: %v, %v", key, found, err)
		}
		got[key] = string(v)
	}
	if !maps.Equal(got, want) || len(want) != nkeys-len(bad) {
		t.Fatalf("%d of %d keys differ from the reference's", diff(got, want), len(want))
	}

	// A restore forgets the failed keys; a read fails them again.
	if _, _, err := s.Restore(c.Models, nil); err != nil {
		t.Fatal(err)
	}
	if s.e.KeyFaults() != "" {
		t.Fatalf("after a restore: KeyFaults = %q", s.e.KeyFaults())
	}
	for key := range bad {
		if _, err := k.Key([]byte(key)); !errors.Is(err, keystore.ErrCorrupt) {
			t.Fatalf("%s after a restore: %v, want ErrCorrupt", key, err)
		}
		break
	}
}

// TestKeyedKnownCountsKeys: a key-scoped model counts the distinct keys
// with a state (streamer snapshot inspect's keys=), not lookups: events
// without a label of keys never seen, and keys that churn through the
// LRU, the pending states and checkpoints, count once each.
func TestKeyedKnownCountsKeys(t *testing.T) {
	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	s, _ := faultShard(t, 3, keys, nil, false)
	if _, _, err := s.Restore(nil, nil); err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	var saved []snapshot.Model
	for round := range 4 {
		for i := range 300 {
			m := keyEvent(fmt.Sprintf("user-%03d", i%100), i)
			s.Process(&m, sink)
			u := kafka.Message{Topic: "events", Offset: int64(i), Key: fmt.Appendf(nil, "stranger-%d-%d", round, i),
				Value: []byte(`{"features":[1,2]}`)}
			s.Process(&u, sink)
		}
		if round%2 == 0 {
			saved = checkpointShard(t, s)
		}
	}
	c, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if _, known, err := holder.KeyedSummary(c.Models[0].Data); err != nil || known != 100 {
		t.Fatalf("the snapshot counts %d keys (%v), want 100", known, err)
	}
	if _, known, err := holder.KeyedSummary(saved[0].Data); err != nil || known != 100 {
		t.Fatalf("a snapshot after a checkpoint counts %d keys (%v), want 100", known, err)
	}
	// After a restart too.
	s2, _ := faultShard(t, 3, keys, nil, false)
	if _, _, err := s2.Restore(saved, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		u := kafka.Message{Topic: "events", Key: fmt.Appendf(nil, "stranger-%d", i), Value: []byte(`{"features":[1,2]}`)}
		s2.Process(&u, sink)
		m := keyEvent(fmt.Sprintf("new-%d", i%5), i)
		s2.Process(&m, sink)
	}
	c, err = s2.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if _, known, _ := holder.KeyedSummary(c.Models[0].Data); known != 105 {
		t.Fatalf("after a restart: the snapshot counts %d keys, want 105", known)
	}
	// Keys that stay in memory across checkpoints, learning on both sides.
	for round := range 3 {
		for i := range 6 {
			m := keyEvent(fmt.Sprintf("hot-%d", i%2), i)
			s2.Process(&m, sink)
		}
		if round < 2 {
			checkpointShard(t, s2)
		}
	}
	if c, err = s2.Capture(); err != nil {
		t.Fatal(err)
	}
	if _, known, _ := holder.KeyedSummary(c.Models[0].Data); known != 107 {
		t.Fatalf("with keys in memory across checkpoints: the snapshot counts %d keys, want 107", known)
	}
}

// TestKeyedRestoreUndoesSeveral: with the undo records of three
// checkpoints kept, a restore from a snapshot two checkpoints older than
// the key store (the two newest lost) takes the key store back to it,
// every key exactly; with one kept it cannot, and says so, changing
// nothing; with AllowKeyLoss it rebuilds the table from the snapshot's
// own keys, whose states are exact, and counts only their examples.
func TestKeyedRestoreUndoesSeveral(t *testing.T) {
	// Four checkpoints of 200 events each; the second's events are of 3
	// of the 10 keys only, so its snapshot holds those 3.
	var events []kafka.Message
	for c := range 4 {
		keys := 10
		if c == 1 {
			keys = 3
		}
		for i := range 200 {
			events = append(events, keyEvent(fmt.Sprintf("user-%d", (i*7)%keys), c*200+i))
		}
	}
	sink := &memSink{}
	run := func(depth int) (*keystore.DB, [][]snapshot.Model, []map[string]string) {
		keys, err := keystore.Open("", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { keys.Close() })
		keys.SetUndoDepth(depth)
		s, _ := faultShard(t, 3, keys, nil, false)
		if _, _, err := s.Restore(nil, nil); err != nil {
			t.Fatal(err)
		}
		var saved [][]snapshot.Model
		var states []map[string]string
		for c := range 4 {
			for i := c * 200; i < (c+1)*200; i++ {
				s.Process(&events[i], sink)
			}
			saved = append(saved, checkpointShard(t, s))
			st := map[string]string{}
			if err := keys.Table("", "k").Scan(func(k, v []byte) error { st[string(k)] = string(v); return nil }); err != nil {
				t.Fatal(err)
			}
			states = append(states, st)
		}
		return keys, saved, states
	}
	table := func(keys *keystore.DB) map[string]string {
		st := map[string]string{}
		if err := keys.Table("", "k").Scan(func(k, v []byte) error { st[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return st
	}

	keys, saved, states := run(3)
	s, _ := faultShard(t, 3, keys, nil, false)
	if _, _, err := s.Restore(saved[1], nil); err != nil {
		t.Fatalf("restore two checkpoints back: %v", err)
	}
	if got := table(keys); !maps.Equal(got, states[1]) {
		t.Fatalf("two checkpoints back: %d keys differ", diff(got, states[1]))
	}
	if k := s.models[0].keys(t).Stats(); k.Examples != 400 || k.Known != 10 || k.Checkpoint != 2 {
		t.Fatalf("two checkpoints back: examples %d, keys %d, checkpoint %d; want 400, 10, 2", k.Examples, k.Known, k.Checkpoint)
	}
	// The service goes on from there; a later fall-back works again.
	for i := 400; i < 600; i++ {
		s.Process(&events[i], sink)
	}
	checkpointShard(t, s)
	if _, _, err := s.Restore(saved[0], nil); err != nil {
		t.Fatalf("restore after going on: %v", err)
	}
	if got := table(keys); !maps.Equal(got, states[0]) {
		t.Fatalf("after going on, back to the first checkpoint: %d keys differ", diff(got, states[0]))
	}

	keys, saved, states = run(1)
	s, _ = faultShard(t, 3, keys, nil, false)
	_, _, err := s.Restore(saved[1], nil)
	if mm, ok := errors.AsType[*holder.TableMismatch](err); !ok || mm.Table != 4 || mm.Snapshot != 2 {
		t.Fatalf("restore beyond the undo records: %v, want a *keyStoreMismatch", err)
	}
	if !strings.Contains(err.Error(), "--allow-empty-state") {
		t.Errorf("the refusal does not name the way out: %v", err)
	}
	if got := table(keys); !maps.Equal(got, states[3]) {
		t.Fatalf("a refused restore changed %d keys", diff(got, states[3]))
	}
	s, _ = faultShard(t, 3, keys, nil, true)
	if _, _, err := s.Restore(saved[1], nil); err != nil {
		t.Fatalf("restore with AllowKeyLoss: %v", err)
	}
	dkeys, dstates, err := holder.DecodeKeyed(saved[1][0].Data)
	if err != nil {
		t.Fatal(err)
	}
	got, want := table(keys), map[string]string{}
	var sum int64
	for i, key := range dkeys {
		want[key] = string(dstates[i])
		m, _ := s.models[0].def.keyFactory()
		if err := restoreKeyState(m, dstates[i]); err != nil {
			t.Fatal(err)
		}
		sum += m.Examples()
	}
	if !maps.Equal(got, want) || len(want) != 3 {
		t.Fatalf("rebuilt from the snapshot: %d keys differ from its delta's %d, want its 3", diff(got, want), len(want))
	}
	for key, v := range want {
		if states[1][key] != v {
			t.Fatalf("key %s: not its state at the snapshot", key)
		}
	}
	if k := s.models[0].keys(t).Stats(); k.Examples != sum || k.Known != int64(len(want)) {
		t.Fatalf("rebuilt: examples %d, keys %d; want %d, %d", k.Examples, k.Known, sum, len(want))
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
