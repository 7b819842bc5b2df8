package tests

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
)

const scaleConfig = `
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
  every: 300ms
  every_events: 5000
  changelog_topic: %CHANGELOG%
  scope: partition
  remote_refresh: 200ms
models:
  - name: mam_rbf
    type: mam
    kernel: {type: rbf, gamma: 0.5, features: 128, seed: 3}
    features: {dim: 4}
    balance: true
  - name: per_user
    type: mam
    kernel: {type: linear}
    features: {dim: 4}
    scope: key
    max_keys: 1000
`

func scaleYAML(group, output, changelog string) string {
	return strings.NewReplacer("%GROUP%", group, "%OUTPUT%", output, "%CHANGELOG%", changelog).Replace(scaleConfig)
}

const scalePartitions = 6

// TestScaleOut: three instances share a 6-partition input (150 k events,
// 300 k with -tags e2efull); one is
// SIGKILLed and another added mid-stream. Afterwards every event has a
// score, each partition's state in the changelog includes each of its
// events exactly once, the merge of all partitions' MAM statistics equals
// a single-instance run over the same events, and every user's model ends
// in its partition's state with that user's count.
func TestScaleOut(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	const n, half = 150_000 * e2eScale, 75_000 * e2eScale
	useFastBinary(t)
	b, err := stream.StartBrokerWith(stream.BrokerConfig{
		MinSessionTimeout: 500 * time.Millisecond,
		Topics: []stream.TopicSpec{
			{Name: "events", Partitions: scalePartitions}, {Name: "scores", Partitions: scalePartitions},
			{Name: "scores.ref", Partitions: scalePartitions}, {Name: "events.dlq", Partitions: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	produceStream(t, b, half)

	cfg := scaleYAML("scaled", "scores", "state.scaled")
	procs := []*proc{startStreamer(t, b, cfg), startStreamer(t, b, cfg), startStreamer(t, b, cfg)}
	consumed := func() float64 {
		var s float64
		for _, p := range procs {
			if p.cmd.ProcessState == nil {
				s += p.metric(t, "streamer_events_consumed_total", "")
			}
		}
		return s
	}
	waitFor(t, 120*time.Second, "a third of the events consumed", func() bool { return consumed() >= half/3 })
	// SIGKILL the second instance mid-stream.
	if err := procs[1].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[1].done
	procs = append(procs[:1], procs[2:]...)
	produceStreamFrom(t, b, half, n-half)
	// Add a fourth instance while the others work.
	procs = append(procs, startStreamer(t, b, cfg))
	waitState(t, b, "state.scaled", n, 180*time.Second)
	// Every instance scores with the merge of all partitions' statistics:
	// its own plus the others' from the changelog.
	for i, p := range procs {
		waitFor(t, 30*time.Second, "instance "+strconv.Itoa(i)+"'s global model to merge every partition", func() bool {
			return p.metric(t, "streamer_model_examples", `model="mam_rbf"`) == n
		})
		// A rebalance may be under way (a slow machine misses the 1 s
		// session timeout now and then): wait for the group to settle.
		waitFor(t, 30*time.Second, "instance "+strconv.Itoa(i)+" to own some partitions and merge the others", func() bool {
			v := p.metric(t, "streamer_scaleout_remote_partitions", "")
			return v > 0 && v < scalePartitions
		})
	}
	for _, p := range procs {
		if v := p.metric(t, "streamer_scaleout_partition_restores_total", ""); v == 0 {
			t.Errorf("an instance restored no partition")
		}
		if err := p.stop(t); err != nil {
			t.Fatalf("instance exit: %v", err)
		}
		if !strings.Contains(p.logs.String(), "restored partition state") {
			t.Errorf("no partition state was restored from the changelog by an instance:\n%s", p.logs.String())
		}
	}

	// The reference: one instance over the same events.
	ref := startStreamer(t, b, scaleYAML("single", "scores.ref", "state.single"))
	waitState(t, b, "state.single", n, 180*time.Second)
	if err := ref.stop(t); err != nil {
		t.Fatalf("reference exit: %v", err)
	}

	// Every event id has at least one score.
	seen := map[string]bool{}
	c := newConsumer(t, b, "scores")
	total := highWater(t, b, "scores")
	for _, m := range c.read(t, int(total), 180*time.Second) {
		var rec struct{ ID, Model string }
		if err := json.Unmarshal(m.Value, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Model == "mam_rbf" {
			seen[rec.ID] = true
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct event ids scored, want %d", len(seen), n)
	}
	t.Logf("%d score records for %d events × 2 models (%d duplicates from the replay after the SIGKILL)", total, n, total-2*n)

	// The merged global MAM state equals the single run's.
	scaled, single := partitionStates(t, b, "state.scaled"), partitionStates(t, b, "state.single")
	got, want := mergedMAM(t, scaled), mergedMAM(t, single)
	if got.Examples() != n || want.Examples() != n {
		t.Fatalf("merged examples %d (single run %d), want exactly %d", got.Examples(), want.Examples(), n)
	}
	gp, gn := got.ClassCounts()
	wp, wn := want.ClassCounts()
	if gp != wp || gn != wn {
		t.Fatalf("class counts %d/%d, single run %d/%d", gp, gn, wp, wn)
	}
	if err := online.StateClose(got, want, 1e-9); err != nil {
		t.Fatalf("merged state differs from the single-instance run: %v", err)
	}

	// The CLI shows every partition's state and the merge.
	out, err := exec.Command(binary, "snapshot", "changelog", "--brokers", strings.Join(b.Addrs(), ","), "state.scaled").CombinedOutput()
	if err != nil {
		t.Fatalf("streamer snapshot changelog: %v\n%s", err, out)
	}
	for _, want := range []string{"partition 0: seq", "partition 5: seq", "merged mam_rbf          over 6 partitions: n=" + strconv.Itoa(n)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("streamer snapshot changelog output lacks %q:\n%s", want, out)
		}
	}

	// Per-key models: each key's durable state in the changelog (its
	// newest key record, or the newer one in its partition's snapshot,
	// which carries the keys changed since the last checkpoint whose
	// records were written) is in the scope of its events' partition, with
	// the key's count.
	counts := map[string]int64{}
	for i := range n {
		counts["u"+strconv.Itoa(i%101)]++
	}
	perKey := keysInPartitions(t, durableKeyStates(t, b, "state.scaled", "per_user", scalePartitions), scalePartitions)
	for key, m := range perKey {
		if m.Examples() != counts[key] {
			t.Errorf("key %s: %d examples, want %d", key, m.Examples(), counts[key])
		}
	}
	if len(perKey) != len(counts) {
		t.Errorf("%d keys in the changelog's durable key states, want %d", len(perKey), len(counts))
	}
}

// waitState waits until every partition's state in the changelog includes
// the whole partition and all together n events.
func waitState(t *testing.T, b *stream.Broker, changelog string, n int, timeout time.Duration) {
	t.Helper()
	ends := topicEnds(t, b, "events", scalePartitions)
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if sum != int64(n) {
		t.Fatalf("input holds %d events, want %d", sum, n)
	}
	waitFor(t, timeout, "every partition's state to include its last event", func() bool {
		states := partitionStatesErr(b, changelog)
		if len(states) != len(ends) {
			return false
		}
		for part, snap := range states {
			if snap.Offsets[0].Offset != ends[part] {
				return false
			}
		}
		return true
	})
}

func partitionStates(t *testing.T, b *stream.Broker, changelog string) map[int]*snapshot.Snapshot {
	t.Helper()
	s := partitionStatesErr(b, changelog)
	if len(s) != scalePartitions {
		t.Fatalf("changelog %s holds the state of %d partitions, want %d", changelog, len(s), scalePartitions)
	}
	return s
}

// partitionStatesErr reads each partition's newest state from the
// changelog (those that have one).
func partitionStatesErr(b *stream.Broker, changelog string) map[int]*snapshot.Snapshot {
	cl := snapshot.NewChangelogStore(b.Addrs(), changelog, "scaleout-test")
	defer cl.Close()
	tail := cl.Tail()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tail.Poll(ctx); err != nil {
		return nil
	}
	out := map[int]*snapshot.Snapshot{}
	for _, scope := range tail.Scopes() {
		part, err := strconv.Atoi(scope)
		if err != nil {
			continue
		}
		if snap, err := tail.Latest(scope); err == nil {
			out[part] = snap
		}
	}
	return out
}

func modelData(t *testing.T, snap *snapshot.Snapshot, name string) []byte {
	t.Helper()
	for _, m := range snap.Models {
		if m.Name == name {
			return m.Data
		}
	}
	t.Fatalf("model %s missing from a partition's state", name)
	return nil
}

// mergedMAM merges mam_rbf's statistics of every partition, in order.
func mergedMAM(t *testing.T, states map[int]*snapshot.Snapshot) *online.MAM {
	t.Helper()
	var parts []*online.MAM
	for p := range scalePartitions {
		m, err := testTypes.Restore(modelData(t, states[p], "mam_rbf"))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, m.(*online.MAM))
	}
	g, err := testTypes.Restore(modelData(t, states[0], "mam_rbf"))
	if err != nil {
		t.Fatal(err)
	}
	merged := g.(*online.MAM)
	if err := merged.MergeAll(parts...); err != nil {
		t.Fatal(err)
	}
	return merged
}
