package tests

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/holder"
)

// keyedCrashModels are two key-scoped models (one instance per event key),
// at most 20 instances of each in memory.
const keyedCrashModels = `
models:
  - name: key_linear
    type: mam
    kernel: {type: linear}
    features: {dim: 4}
    scope: key
    max_keys: 20
  - name: key_rbf
    type: mam
    kernel: {type: rbf, gamma: 0.5, features: 64, seed: 3}
    features: {dim: 4}
    balance: true
    scope: key
    max_keys: 20
`

var keyedCrashModelNames = []string{"key_linear", "key_rbf"}

// keyedCrashConfig: instance scope, file snapshots every second (and every
// 10 000 events, so that a crash loses little and replays often).
const keyedCrashConfig = `
kafka:
  brokers: [%BROKERS%]
  group: %GROUP%
  output_topic: %OUTPUT%
  session_timeout: 1s
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 1s
  every_events: 10000
  keep: 3
` + keyedCrashModels

// keyedPartitionConfig: partition scope, the states in the changelog.
const keyedPartitionConfig = `
kafka:
  brokers: [%BROKERS%]
  group: %GROUP%
  output_topic: %OUTPUT%
  session_timeout: 1s
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  every: 1s
  every_events: 10000
  changelog_topic: %CHANGELOG%
  scope: partition
  remote_refresh: 200ms
` + keyedCrashModels

const (
	keyedCrashEvents = 100_000 * e2eScale
	keyedCrashKeys   = 101
)

// produceKeyed writes n labelled events (ids k-0 … k-(n-1)) with 4 features,
// each keyed by one of 101 keys drawn at random (so that with max_keys 20
// the in-memory instances churn all the time); the key decides the
// partition. It returns each key's event count.
func produceKeyed(t *testing.T, b *stream.Broker, n int) map[string]int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	counts := map[string]int64{}
	msgs := make([]kafka.Message, 0, n)
	for i := range n {
		key := "user" + strconv.Itoa(rng.IntN(keyedCrashKeys))
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		label := -1
		if x[0]*x[1]+0.5*x[2] > 0.1 {
			label = 1
		}
		counts[key]++
		msgs = append(msgs, kafka.Message{Key: []byte(key), Value: eventJSON("k-"+strconv.Itoa(i), x, &label)})
	}
	if len(counts) != keyedCrashKeys {
		t.Fatalf("the stream has %d keys, want %d", len(counts), keyedCrashKeys)
	}
	produce(t, b, "events", msgs)
	return counts
}

// keystoreStates reads every key's state of each model from the key store
// in dir (shard "", instance scope). The streamer must have stopped.
func keystoreStates(t *testing.T, dir string) map[string]map[string]online.Model {
	t.Helper()
	db, err := keystore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]online.Model{}
	for _, model := range keyedCrashModelNames {
		tab := db.Table("", model)
		states := map[string]online.Model{}
		if err := tab.Scan(func(key, state []byte) error {
			m, err := testTypes.Restore(bytes.Clone(state))
			if err != nil {
				return fmt.Errorf("key %q: %w", key, err)
			}
			states[string(key)] = m
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		mk, err := tab.Marker()
		if err != nil {
			t.Fatal(err)
		}
		if mk.Keys != int64(len(states)) {
			t.Errorf("%s: the key store's marker counts %d keys, the table holds %d", model, mk.Keys, len(states))
		}
		out[model] = states
	}
	return out
}

// keyRecordStates reads the newest key record of every key of model in
// each of parts partitions' scopes from the changelog: partition → key →
// state.
func keyRecordStates(t *testing.T, b *stream.Broker, changelog, model string, parts int) map[int]map[string]online.Model {
	t.Helper()
	cl := snapshot.NewChangelogStore(b.Addrs(), changelog, "keyed-test")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[int]map[string]online.Model{}
	for part := range parts {
		prefix := "k/" + strconv.Itoa(part) + "/" + model + "/"
		states := map[string]online.Model{}
		// In log order: a key's last record is its newest state.
		err := cl.ScanRecords(ctx, prefix, func(k string, v []byte) {
			key, err := hex.DecodeString(strings.TrimPrefix(k, prefix))
			if err != nil {
				t.Errorf("changelog record %q: key not in hex: %v", k, err)
				return
			}
			m, err := testTypes.Restore(v)
			if err != nil {
				t.Errorf("changelog record %q: %v", k, err)
				return
			}
			states[string(key)] = m
		})
		if err != nil {
			t.Fatalf("read changelog %s: %v", changelog, err)
		}
		out[part] = states
	}
	return out
}

// compareKeyed checks that got holds exactly the keys of counts, each with
// its count of examples and a state close to want's.
func compareKeyed(t *testing.T, model string, got, want map[string]online.Model, counts map[string]int64) {
	t.Helper()
	if len(got) != len(counts) || len(want) != len(counts) {
		t.Errorf("%s: %d keys (reference %d), want %d", model, len(got), len(want), len(counts))
	}
	var sum int64
	for key, g := range got {
		sum += g.Examples()
		w := want[key]
		switch {
		case counts[key] == 0:
			t.Errorf("%s: key %q has a state but no events", model, key)
		case w == nil:
			t.Errorf("%s: key %q missing from the reference", model, key)
		case g.Examples() != counts[key] || w.Examples() != counts[key]:
			t.Errorf("%s: key %q: %d examples (reference %d), want exactly %d", model, key, g.Examples(), w.Examples(), counts[key])
		default:
			if err := online.StateClose(g, w, 1e-9); err != nil {
				t.Errorf("%s: key %q: state differs from the uninterrupted run: %v", model, key, err)
			}
		}
	}
	if sum != keyedCrashEvents {
		t.Errorf("%s: the keys' examples sum to %d, want exactly %d", model, sum, keyedCrashEvents)
	}
}

// checkScored reads the whole output topic (3 partitions) and checks that
// every event id has at least one score record per model; it logs the
// duplicates.
func checkScored(t *testing.T, b *stream.Broker, topic string, n int) {
	t.Helper()
	start := time.Now()
	seen := map[string]map[string]bool{}
	for _, m := range keyedCrashModelNames {
		seen[m] = map[string]bool{}
	}
	total := 0
	for _, recs := range readPartitions(t, b, topic, 3) {
		for _, v := range recs {
			var rec struct{ ID, Model string }
			if err := json.Unmarshal(v, &rec); err != nil {
				t.Fatal(err)
			}
			if seen[rec.Model] == nil {
				t.Fatalf("score record of unknown model %q", rec.Model)
			}
			seen[rec.Model][rec.ID] = true
			total++
		}
	}
	for model, ids := range seen {
		if len(ids) != n {
			t.Errorf("%s: %d distinct event ids scored, want %d", model, len(ids), n)
		}
	}
	t.Logf("%d score records for %d events × %d models (%d duplicates from replays), read in %s",
		total, n, len(keyedCrashModelNames), total-len(keyedCrashModelNames)*n, time.Since(start).Round(time.Millisecond))
}

// readPartitions reads the values of every record of each of parts
// partitions of topic, up to its end now, the partitions in parallel.
func readPartitions(t *testing.T, b *stream.Broker, topic string, parts int) [][][]byte {
	t.Helper()
	ends := topicEnds(t, b, topic, parts)
	out := make([][][]byte, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for part := range parts {
		wg.Go(func() {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: topic, Partition: part,
				MaxWait: 100 * time.Millisecond})
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			for int64(len(out[part])) < ends[part] {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					errs[part] = fmt.Errorf("read %s/%d: %d of %d records: %w", topic, part, len(out[part]), ends[part], err)
					return
				}
				out[part] = append(out[part], m.Value)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// keyedExamples returns streamer_model_examples of each key-scoped model.
func keyedExamples(t *testing.T, p *proc) []float64 {
	t.Helper()
	var out []float64
	for _, m := range keyedCrashModelNames {
		out = append(out, p.metric(t, "streamer_model_examples", `model="`+m+`"`))
	}
	return out
}

// waitKeyedExactly waits until every key-scoped model of p has learned n
// examples, failing as soon as one counts more.
func waitKeyedExactly(t *testing.T, p *proc, n int, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("the key-scoped models to learn %d examples", n), func() bool {
		ex := keyedExamples(t, p)
		for i, v := range ex {
			if v > float64(n) {
				t.Fatalf("%s: streamer_model_examples %v, more than the %d events", keyedCrashModelNames[i], v, n)
			}
		}
		return !slices.ContainsFunc(ex, func(v float64) bool { return v != float64(n) })
	})
}

// TestKeyedCrashRecovery: key-scoped models (101 keys, max_keys 20, so the
// instances churn between memory and the key store all the time) in
// instance scope with file snapshots every second; the real binary is
// SIGKILLed at five random moments while it works through 100 k labelled
// events (200 k with -tags e2efull). Afterwards every event has a score
// from each model, streamer_model_examples is exactly their number, and
// every key's state in the
// key store equals that of an uninterrupted run over the same stream, with
// the key's count of examples.
func TestKeyedCrashRecovery(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	const n = keyedCrashEvents
	useFastBinary(t)
	b := crashBroker(t)
	counts := produceKeyed(t, b, n)
	yaml := func(group, output, dir string) string {
		return strings.NewReplacer("%GROUP%", group, "%OUTPUT%", output, "%DIR%", dir).Replace(keyedCrashConfig)
	}

	// The reference: one uninterrupted run.
	start := time.Now()
	refDir := t.TempDir()
	ref := startStreamer(t, b, yaml("keyed-ref", "scores.ref", refDir))
	waitKeyedExactly(t, ref, n, 120*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference run exit: %v", err)
	}
	want := keystoreStates(t, filepath.Join(refDir, "keystore"))
	t.Logf("reference run: %s", time.Since(start).Round(time.Millisecond))

	// The crashing run.
	start = time.Now()
	dir := t.TempDir()
	cfg := yaml("keyed-crashy", "scores", dir)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for kill := 1; kill <= 5; kill++ {
		p := startStreamer(t, b, cfg)
		if ex := keyedExamples(t, p); slices.ContainsFunc(ex, func(v float64) bool { return v > n }) {
			t.Fatalf("start %d: streamer_model_examples %v after the restore, more than the %d events", kill, ex, n)
		}
		// Kill at a random moment after this run made progress (a
		// snapshot of its own), however slow the machine is.
		waitFor(t, 60*time.Second, "a snapshot by this run", func() bool {
			return p.metric(t, "streamer_snapshots_total", "") >= 1 ||
				p.metric(t, "streamer_model_examples", `model="key_linear"`) >= n
		})
		time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
		ex := keyedExamples(t, p)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		t.Logf("kill %d: SIGKILL at about %v examples", kill, ex)
	}
	p := startStreamer(t, b, cfg)
	waitKeyedExactly(t, p, n, 120*time.Second)
	// Once there, it stays there: nothing is learned twice.
	time.Sleep(1500 * time.Millisecond)
	final := keyedExamples(t, p)
	for i, model := range keyedCrashModelNames {
		if final[i] != n {
			t.Errorf("%s: streamer_model_examples %v, want exactly %d", model, final[i], n)
		}
		if v := p.metric(t, "streamer_model_keys", `model="`+model+`"`); v > 20 {
			t.Errorf("%s: %v instances in memory, max_keys 20", model, v)
		}
		waitFor(t, 10*time.Second, model+"'s keys in the key store", func() bool {
			return p.metric(t, "streamer_model_keys_stored", `model="`+model+`"`) == keyedCrashKeys
		})
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("final run exit: %v", err)
	}
	t.Logf("crashing run: %s", time.Since(start).Round(time.Millisecond))

	checkScored(t, b, "scores", n)

	got := keystoreStates(t, filepath.Join(dir, "keystore"))
	for _, model := range keyedCrashModelNames {
		compareKeyed(t, model, got[model], want[model], counts)
	}
}

// TestKeyedCrashRecoveryPartitioned: the same key-scoped models in
// partition scope (the states in the changelog, each key's as a key
// record) with two instances in one group over 100 k events (200 k with
// -tags e2efull): one is
// SIGKILLed at a random moment and a new one added, so partitions move and
// are restored from the changelog's key records. Afterwards every event
// has a score, each partition's newest state includes the whole partition,
// and every key's newest key record equals that of a single-instance run
// over the same events, with the key's count of examples, in the key's
// partition.
func TestKeyedCrashRecoveryPartitioned(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	const n, parts = keyedCrashEvents, 3
	useFastBinary(t)
	b := crashBroker(t)
	counts := produceKeyed(t, b, n)
	yaml := func(group, output, changelog string) string {
		return strings.NewReplacer("%GROUP%", group, "%OUTPUT%", output, "%CHANGELOG%", changelog).Replace(keyedPartitionConfig)
	}
	ends := topicEnds(t, b, "events", parts)

	// The reference: one instance.
	start := time.Now()
	ref := startStreamer(t, b, yaml("keyed-single", "scores.ref", "state.keyed-single"))
	waitPartitionStates(t, b, "state.keyed-single", ends, 120*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference exit: %v", err)
	}
	t.Logf("reference run: %s", time.Since(start).Round(time.Millisecond))

	// Two instances; one is killed, another added.
	start = time.Now()
	cfg := yaml("keyed-scaled", "scores", "state.keyed-scaled")
	procs := []*proc{startStreamer(t, b, cfg), startStreamer(t, b, cfg)}
	victim := procs[1]
	waitFor(t, 60*time.Second, "a snapshot by the instance to kill", func() bool {
		return victim.metric(t, "streamer_snapshots_total", "") >= 1
	})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
	consumed := victim.metric(t, "streamer_events_consumed_total", "")
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.done
	t.Logf("SIGKILL after the victim consumed %v events", consumed)
	procs = append(procs[:1], startStreamer(t, b, cfg))
	waitPartitionStates(t, b, "state.keyed-scaled", ends, 120*time.Second)
	// Both live instances own partitions; the added one (its key store
	// empty) restored its partitions from the changelog.
	waitFor(t, 30*time.Second, "the live instances to share the partitions", func() bool {
		a, b := procs[0].metric(t, "streamer_assigned_partitions", ""), procs[1].metric(t, "streamer_assigned_partitions", "")
		return a > 0 && b > 0 && a+b == parts
	})
	if v := procs[1].metric(t, "streamer_scaleout_partition_restores_total", ""); v == 0 {
		t.Errorf("the added instance restored no partition")
	}
	// Together they store every key (each its partitions' keys).
	for _, model := range keyedCrashModelNames {
		waitFor(t, 10*time.Second, model+"'s keys in the live instances' key stores", func() bool {
			var stored float64
			for _, p := range procs {
				stored += p.metric(t, "streamer_model_keys_stored", `model="`+model+`"`)
			}
			return stored == keyedCrashKeys
		})
	}
	for _, p := range procs {
		if err := p.stop(t); err != nil {
			t.Fatalf("instance exit: %v", err)
		}
	}
	t.Logf("scaled run: %s", time.Since(start).Round(time.Millisecond))

	checkScored(t, b, "scores", n)

	// Each partition's newest state includes the whole partition.
	for _, changelog := range []string{"state.keyed-scaled", "state.keyed-single"} {
		states := partitionStatesErr(b, changelog)
		for part := range parts {
			snap := states[part]
			switch {
			case snap == nil:
				t.Errorf("%s: no state of partition %d", changelog, part)
			case len(snap.Offsets) != 1 || snap.Offsets[0].Offset != ends[part]:
				t.Errorf("%s: partition %d's newest state is at %v, the partition ends at %d", changelog, part, snap.Offsets, ends[part])
			}
		}
	}

	// Every key's durable state (its newest key record, or the newer one
	// in its partition's snapshot): in its partition, with its count,
	// equal to the single run's.
	for _, model := range keyedCrashModelNames {
		got := keysInPartitions(t, durableKeyStates(t, b, "state.keyed-scaled", model, parts), parts)
		want := keysInPartitions(t, durableKeyStates(t, b, "state.keyed-single", model, parts), parts)
		compareKeyed(t, model, got, want, counts)
	}
}

// durableKeyStates is the state of every key of model that a restore of
// each of parts partitions rebuilds from the changelog: the key records
// (keyRecordStates), then the key deltas in the partition's newest
// snapshot, which are newer than any record (a checkpoint writes its
// snapshot first and its key records after it; when the instance stops
// or loses the partition in between, the records lag and the snapshot
// holds the difference: stream's keyedModels.restore).
func durableKeyStates(t *testing.T, b *stream.Broker, changelog, model string, parts int) map[int]map[string]online.Model {
	t.Helper()
	out := keyRecordStates(t, b, changelog, model, parts)
	snaps := partitionStatesErr(b, changelog)
	if len(snaps) != parts {
		t.Fatalf("%s holds the state of %d partitions, want %d", changelog, len(snaps), parts)
	}
	for part, snap := range snaps {
		keys, states, err := holder.DecodeKeyed(modelData(t, snap, model))
		if err != nil {
			t.Fatalf("%s: partition %d's %s delta: %v", changelog, part, model, err)
		}
		for i, key := range keys {
			m, err := testTypes.Restore(states[i])
			if err != nil {
				t.Fatalf("%s: partition %d's %s delta, key %q: %v", changelog, part, model, key, err)
			}
			if out[part] == nil {
				out[part] = map[string]online.Model{}
			}
			out[part][key] = m
		}
	}
	return out
}

// keysInPartitions flattens partition → key → state, checking that each
// key is in the partition its events are in (and so in one only).
func keysInPartitions(t *testing.T, byPart map[int]map[string]online.Model, parts int) map[string]online.Model {
	t.Helper()
	bal := &kafka.Murmur2Balancer{}
	all := make([]int, parts)
	for i := range all {
		all[i] = i
	}
	out := map[string]online.Model{}
	for part, states := range byPart {
		for key, m := range states {
			if owner := bal.Balance(kafka.Message{Key: []byte(key)}, all...); owner != part {
				t.Errorf("key %s has a key record in partition %d's scope, its events are in partition %d", key, part, owner)
			}
			out[key] = m
		}
	}
	return out
}

// topicEnds returns the end offset of each of parts partitions of topic.
func topicEnds(t *testing.T, b *stream.Broker, topic string, parts int) map[int]int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := map[string][]kafka.OffsetRequest{}
	for p := range parts {
		req[topic] = append(req[topic], kafka.LastOffsetOf(p))
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out
}

// waitPartitionStates waits until each partition's newest state in the
// changelog includes the partition up to its end.
func waitPartitionStates(t *testing.T, b *stream.Broker, changelog string, ends map[int]int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "every partition's state to include its last event", func() bool {
		states := partitionStatesErr(b, changelog)
		if len(states) != len(ends) {
			return false
		}
		for part, snap := range states {
			if len(snap.Offsets) != 1 || snap.Offsets[0].Offset != ends[part] {
				return false
			}
		}
		return true
	})
}
