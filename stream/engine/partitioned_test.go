package engine

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/allocs"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/snapshot"
)

// partitionedEngine builds an engine over three models for partitioned
// state (its shards are partitions': Engine.NewShard("0"), …): a
// mergeable MAM, a windowed MAM (per partition) and a key-scoped MAM.
func partitionedEngine(t testing.TB) *Engine { return partitionedEngineReg(t, nil) }

// partitionedEngineReg is partitionedEngine registering its metrics on reg.
func partitionedEngineReg(t testing.TB, reg prometheus.Registerer) *Engine {
	t.Helper()
	params := map[string]online.MAMParams{
		"global":   {Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 64, Seed: 5}, Balance: true, Delta: 0.05},
		"windowed": {Kernel: online.KernelSpec{Type: "linear"}, Delta: 0.05, Window: online.Window{Events: 50}},
		"per_key":  {Kernel: online.KernelSpec{Type: "linear"}, Delta: 0.05},
	}
	var models []NamedModel
	for _, name := range []string{"global", "windowed", "per_key"} {
		p := params[name]
		build := func() (online.Model, error) { return online.NewMAM(2, p) }
		m, err := build()
		if err != nil {
			t.Fatal(err)
		}
		nm := NamedModel{Name: name, Model: m, Fingerprint: name + "-fp", New: build}
		if name == "per_key" {
			nm.Factory, nm.MaxKeys = build, 100
		}
		models = append(models, nm)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2}, models, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

type partEvent struct {
	part int
	msg  kafka.Message
}

func partEvents(n, parts int) []partEvent {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]partEvent, n)
	offsets := make([]int64, parts)
	for i := range out {
		x0, x1 := rng.NormFloat64(), rng.NormFloat64()
		y := "1"
		if x0*x1 < 0 {
			y = "-1"
		}
		user := rng.IntN(12)
		p := user % parts // a key's events are in one partition
		out[i] = partEvent{p, kafka.Message{Topic: "events", Partition: p, Offset: offsets[p], Key: []byte("u" + strconv.Itoa(user)),
			Value: []byte(`{"features":[` + strconv.FormatFloat(x0, 'g', -1, 64) + `,` + strconv.FormatFloat(x1, 'g', -1, 64) + `],"label":` + y + `}`)}}
		offsets[p]++
	}
	return out
}

// node is an engine with partition-scope shards, as a pipeline runs it.
type node struct {
	*Engine
	shards map[int]*Shard
}

func newNode(e *Engine) *node { return &node{Engine: e, shards: map[int]*Shard{}} }

func (n *node) restorePart(p int, saved []snapshot.Model) (fresh, dropped []string, err error) {
	return n.restoreFrom(p, saved, nil)
}

// restoreFrom restores partition p with the keys of key-scoped models
// stored by from (nil: none), as the changelog's key records would bring
// them.
func (n *node) restoreFrom(p int, saved []snapshot.Model, from *node) (fresh, dropped []string, err error) {
	s, err := n.NewShard(strconv.Itoa(p))
	if err != nil {
		return nil, nil, err
	}
	var src KeySource
	if from != nil {
		src = func(model string) (keys, states [][]byte, err error) {
			err = from.keys.Table(strconv.Itoa(p), model).Scan(func(k, v []byte) error {
				keys, states = append(keys, bytes.Clone(k)), append(states, bytes.Clone(v))
				return nil
			})
			return keys, states, err
		}
	}
	if fresh, dropped, err = s.Restore(saved, src); err != nil {
		return nil, nil, err
	}
	n.shards[p] = s
	return fresh, dropped, nil
}

func (n *node) capturePart(p int) ([]snapshot.Model, error) {
	s := n.shards[p]
	if s == nil {
		return nil, errors.New("partition not held")
	}
	c, err := s.Capture()
	if err != nil {
		return nil, err
	}
	return c.Models, nil
}

func (n *node) dropPart(p int) {
	n.shards[p].Close()
	delete(n.shards, p)
}

func (n *node) Process(msg *kafka.Message, out Sink) { n.shards[msg.Partition].Process(msg, out) }

// instance is partition p's instance of model name (nil if not held).
func (n *node) instance(name string, p int) online.Model {
	s := n.shards[p]
	if s == nil {
		return nil
	}
	for _, m := range s.models {
		if m.def.name == name {
			return m.h.Instance()
		}
	}
	return nil
}

// keyStates is every key's state of key-scoped model name in partition
// p: the key store's, overlaid with the changes since (a capture's delta).
func (n *node) keyStates(t *testing.T, p int, name string) map[string]string {
	t.Helper()
	s := n.shards[p]
	out := map[string]string{}
	for i, m := range s.models {
		if m.def.name != name {
			continue
		}
		if err := m.keys(t).Table().Scan(func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		c, err := s.Capture()
		if err != nil {
			t.Fatal(err)
		}
		d := c.deltas[i]
		ks, sts := d.States()
		for j := range ks {
			out[string(ks[j])] = string(sts[j])
		}
	}
	return out
}

func model(t *testing.T, e *node, name string) *modelDef {
	t.Helper()
	for _, d := range e.defs {
		if d.name == name {
			return d
		}
	}
	t.Fatalf("no model %s", name)
	return nil
}

// Two engines share four partitions, one partition moves between them
// mid-stream, and each merges the other's statistics: both end with the
// same global model as one engine that held every partition, and each
// partition's per-partition and per-key state is that of the single engine.
func TestPartitionedStateMovesAndMerges(t *testing.T) {
	const parts = 4
	events := partEvents(4000, parts)
	a, b, single := newNode(partitionedEngine(t)), newNode(partitionedEngine(t)), newNode(partitionedEngine(t))
	sink := &memSink{}
	for p := range parts {
		owner := a
		if p >= 2 {
			owner = b
		}
		if _, _, err := owner.restorePart(p, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := single.restorePart(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	holder := map[int]*node{0: a, 1: a, 2: b, 3: b}
	for i, ev := range events {
		if i == len(events)/2 {
			// Partition 1 moves from a to b at a checkpoint.
			saved, err := a.capturePart(1)
			if err != nil {
				t.Fatal(err)
			}
			a.dropPart(1)
			if _, err := a.capturePart(1); err == nil {
				t.Fatal("captured a dropped partition")
			}
			fresh, dropped, err := b.restoreFrom(1, saved, a)
			if err != nil || len(fresh) != 0 || len(dropped) != 0 {
				t.Fatalf("restore: fresh %v dropped %v err %v", fresh, dropped, err)
			}
			holder[1] = b
		}
		msg := ev.msg
		holder[ev.part].Process(&msg, sink)
		msg = ev.msg
		single.Process(&msg, sink)
	}
	// Each engine merges the partitions it does not hold.
	exchange := func(from, to *node, ps ...int) {
		for _, p := range ps {
			saved, err := from.capturePart(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := to.SetRemote(p, saved, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	exchange(a, b, 0)
	exchange(b, a, 1, 2, 3)
	if n, _ := a.RemoteState(); n != 3 {
		t.Fatalf("a merges %d remote partitions, want 3", n)
	}
	want := model(t, single, "global").merged.View()
	for name, e := range map[string]*node{"a": a, "b": b} {
		got := model(t, e, "global").merged.View()
		if got.Examples() != int64(len(events)) {
			t.Fatalf("%s: global model has %d examples, want %d", name, got.Examples(), len(events))
		}
		if err := online.StateClose(got, want, 1e-12); err != nil {
			t.Fatalf("%s: global model differs from the single engine's: %v", name, err)
		}
	}
	// Per-partition and per-key state: byte-identical to the single
	// engine's (same events in the same order, restored exactly).
	for p, e := range holder {
		got, err := e.capturePart(p)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := single.capturePart(p)
		for i := range got {
			if got[i].Name == "per_key" {
				if g, r := e.keyStates(t, p, "per_key"), single.keyStates(t, p, "per_key"); !maps.Equal(g, r) || len(g) == 0 {
					t.Errorf("partition %d: per-key states differ from the single engine's (%d keys, want %d)", p, len(g), len(r))
				}
				continue
			}
			if !bytes.Equal(got[i].Data, ref[i].Data) {
				t.Errorf("partition %d, model %s: state differs from the single engine's", p, got[i].Name)
			}
		}
	}
	// A partition restored with a state of another configuration starts
	// fresh; an undecodable state is an error and changes nothing.
	saved, _ := single.capturePart(0)
	saved[1].Fingerprint = "other"
	c := newNode(partitionedEngine(t))
	if fresh, _, err := c.restorePart(0, saved); err != nil || len(fresh) != 1 || fresh[0] != "windowed" {
		t.Fatalf("fresh %v, err %v; want windowed fresh", fresh, err)
	}
	bad := []snapshot.Model{{Name: "global", Type: "mam", Fingerprint: "global-fp", Data: []byte("garbage")}}
	if _, _, err := c.restorePart(2, bad); err == nil {
		t.Fatal("restored garbage")
	}
	if _, err := c.capturePart(2); err == nil {
		t.Fatal("a failed restore left partition state behind")
	}
}

// Scoring in partitioned mode allocates nothing per event.
func TestPartitionedProcessAllocs(t *testing.T) {
	e := newNode(partitionedEngine(t))
	events := partEvents(200, 2)
	for p := range 2 {
		if _, _, err := e.restorePart(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	sink := &memSink{}
	for _, ev := range events { // warm up: keys created, buffers recycled
		msg := ev.msg
		e.Process(&msg, sink)
	}
	i := 0
	allocs := allocs.PerRun(1000, func() {
		msg := events[i%len(events)].msg
		e.Process(&msg, sink)
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per event", allocs)
	}
}

// BenchmarkPartitionedProcess is Process with partitioned state and a
// mergeable MAM (rbf D = 64): every labelled event is learned twice, into
// its partition's statistics and the global merge (target: zero
// allocations, within 2× of the unpartitioned engine).
func BenchmarkPartitionedProcess(b *testing.B) {
	e := newNode(partitionedEngine(b))
	events := partEvents(1000, 4)
	for p := range 4 {
		if _, _, err := e.restorePart(p, nil); err != nil {
			b.Fatal(err)
		}
	}
	sink := &memSink{}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		msg := events[i%len(events)].msg
		e.Process(&msg, sink)
		i++
	}
}

// A heavy model is kept per partition: each partition's SVM is refitted
// from that partition's window by the engine that holds it, and its
// refitted version moves with the partition.
func TestPartitionedHeavyModelMoves(t *testing.T) {
	p := refit.DefaultSVMParams()
	p.Kernel.Gamma = 0.5
	p.Window.Events, p.Refit.EveryEvents, p.Refit.Guard = 200, 100, 0
	build := func() (online.Model, error) { return refit.SVMType().New(2, &p) }
	newEngine := func() *node {
		m, err := build()
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2},
			[]NamedModel{{Name: "svm", Model: m, Fingerprint: "svm-fp", New: build}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.Start()
		t.Cleanup(e.Close)
		return newNode(e)
	}
	a, b := newEngine(), newEngine()
	for p := range 2 {
		if _, _, err := a.restorePart(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	sink := &memSink{}
	// Refits run in the background and one that falls due while another
	// runs waits for the next event: feed events in chunks until both
	// partitions serve a second version (however slow the machine).
	events := partEvents(40000, 2)
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		if i == len(events)/200 || time.Now().After(deadline) {
			t.Fatalf("no second refit was swapped in after %d events", i*200)
		}
		for _, ev := range events[i*200 : (i+1)*200] {
			msg := ev.msg
			a.Process(&msg, sink)
		}
		if a.instance("svm", 0).Version() >= 2 && a.instance("svm", 1).Version() >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a.instance("svm", 0) == a.instance("svm", 1) {
		t.Fatal("partitions share one heavy model")
	}
	x := []float64{0.3, -0.7}
	// A background refit may land while the state is captured: capture
	// again until the version serving before and after the capture is the
	// same, so that the capture holds it.
	var before online.Prediction
	var saved []snapshot.Model
	for {
		before = a.instance("svm", 0).Observe(x, 0, false)
		var err error
		if saved, err = a.capturePart(0); err != nil {
			t.Fatal(err)
		}
		if a.instance("svm", 0).Observe(x, 0, false).Version == before.Version {
			break
		}
	}
	a.dropPart(0)
	if _, _, err := b.restorePart(0, saved); err != nil {
		t.Fatal(err)
	}
	moved := b.instance("svm", 0)
	after := moved.Observe(x, 0, false)
	if after.Score != before.Score || after.Version != before.Version {
		t.Fatalf("moved model scores %v (version %d), before the move %v (version %d)", after.Score, after.Version, before.Score, before.Version)
	}
}

// TestShardScopeBindsEngine: an engine learns where its shards keep state
// from its first shard. In partition scope the mergeable model scores
// through the merge of the partitions and is the one whose bound is
// checked live (a windowed model's instances are per partition: no one
// bound for the stream); in instance scope the global models are checked
// against their own bound. A shard of the other scope is refused, naming
// the engine's.
func TestShardScopeBindsEngine(t *testing.T) {
	e := partitionedEngine(t)
	if _, err := e.NewShard("0"); err != nil {
		t.Fatal(err)
	}
	global, windowed := e.defs[0], e.defs[1]
	if global.merged == nil || global.bound != online.Bounder(global.merged) || windowed.bound != nil {
		t.Fatalf("partition scope: merged %v, bounds %v and %v; want the merged model's bound only", global.merged != nil, global.bound, windowed.bound)
	}
	if _, err := e.NewShard(""); err == nil || !strings.Contains(err.Error(), "partition scope") {
		t.Fatalf("an instance-scope shard after a partition's: %v, want it refused", err)
	}

	e = partitionedEngine(t)
	if _, err := e.NewShard(""); err != nil {
		t.Fatal(err)
	}
	global, windowed = e.defs[0], e.defs[1]
	if global.merged != nil || global.bound == nil || windowed.bound == nil {
		t.Fatalf("instance scope: merged %v, bounds %v and %v; want each global model's own", global.merged != nil, global.bound, windowed.bound)
	}
	if _, err := e.NewShard("1"); err == nil || !strings.Contains(err.Error(), "instance scope") {
		t.Fatalf("a partition's shard after an instance-scope one: %v, want it refused", err)
	}

	// Remote state, read from the changelog before this instance holds a
	// partition, binds partition scope and is kept for the merge.
	e = partitionedEngine(t)
	if err := e.SetRemote(3, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if e.defs[0].merged == nil {
		t.Fatal("remote state before the first shard: no merged view")
	}
	if _, err := e.NewShard(""); err == nil || !strings.Contains(err.Error(), "partition scope") {
		t.Fatalf("an instance-scope shard after remote state: %v, want it refused", err)
	}
}
