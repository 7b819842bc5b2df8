package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/holder"
)

// lockedSink keeps every record published, from any goroutine.
type lockedSink struct {
	mu   sync.Mutex
	msgs []kafka.Message
}

func (s *lockedSink) Buffer() []byte { return make([]byte, 0, 512) }

func (s *lockedSink) Publish(m kafka.Message) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
}

// instancePipeline is a pipeline of e in instance scope, restored empty,
// and its shard.
func instancePipeline(t testing.TB, e *engine.Engine) (*Pipeline, *pshard) {
	t.Helper()
	p := NewPipeline(PipelineConfig{Topic: "events"}, nil, nil, nil, nil)
	if err := p.UseEngine(e, nil, false, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p, p.shards[""]
}

// appliersEngine has a global model and a key-scoped one, in instance
// scope.
func appliersEngine(t *testing.T) *engine.Engine {
	t.Helper()
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 8, Seed: 1}, Balance: true, Delta: 0.05})
	}
	k, _ := factory()
	g, _ := online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Delta: 0.05})
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, MergeLanes: engine.MergeLanesOn},
		[]engine.NamedModel{{Name: "g", Model: g}, {Name: "k", Model: k, Factory: factory, MaxKeys: 4096}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestPartitionAppliersPerKey: four partitions' appliers apply to an
// instance-scope shard in parallel, each through its lane, and checkpoint
// captures pause them (run under -race by CI). Every key-scoped instance ends exactly as when one
// goroutine applies the same events (a key's events are in one
// partition, in its order); the global model learns every event once;
// every event gets one record per model, each partition's in offset
// order.
func TestPartitionAppliersPerKey(t *testing.T) {
	const parts, perPart, keysPerPart = 4, 3000, 25
	events := make([][]kafka.Message, parts)
	for part := range parts {
		for off := range perPart {
			key := fmt.Sprintf("user-%d-%d", part, (off*7)%keysPerPart)
			v := fmt.Appendf(nil, `{"features":[%d,%d],"label":%d}`, (off+part)%5-2, (off*3)%7-3, 1-2*((off/3)%2))
			events[part] = append(events[part], kafka.Message{Topic: "events", Partition: part, Offset: int64(off), Key: []byte(key), Value: v})
		}
	}

	e := appliersEngine(t)
	p, sh := instancePipeline(t, e)
	out := &lockedSink{}
	var wg sync.WaitGroup
	for part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := 0
			fetch := func() (kafka.Message, bool) {
				if i == len(events[part]) {
					return kafka.Message{}, false
				}
				i++
				return events[part][i-1], true
			}
			p.apply(sh, part, out, fetch, nil)
		}()
	}
	stop := make(chan struct{})
	captured := make(chan int)
	go func() { // checkpoints' captures meanwhile
		n := 0
		defer func() { captured <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			sh.lock()
			_, err := sh.st.Capture()
			sh.unlock()
			if err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	wg.Wait()
	close(stop)
	t.Logf("%d captures during the run", <-captured)

	// The reference: one goroutine, the partitions one after the other.
	rs := instanceShard(t, appliersEngine(t))
	for part := range parts {
		for i := range events[part] {
			rs.Process(&events[part][i], &memSink{})
		}
	}
	keyed, refKeyed := sh.st.Holder(1).(*holder.Keyed), rs.Holder(1).(*holder.Keyed)
	if n := keyed.Stripes(); n != 4 {
		t.Fatalf("the lanes share a key table in %d stripes, want 4", n)
	}
	examples, hot, _ := keyed.Counts()
	refExamples, refHot, _ := refKeyed.Counts()
	if hot != parts*keysPerPart || refHot != parts*keysPerPart || examples != refExamples {
		t.Fatalf("%d and %d keys in memory, want %d; %d and %d examples", hot, refHot, parts*keysPerPart, examples, refExamples)
	}
	for part := range parts {
		for j := range keysPerPart {
			key := []byte(fmt.Sprintf("user-%d-%d", part, j))
			got, err := keyed.Lookup(key)
			if err != nil || got == nil {
				t.Fatalf("key %s: %v", key, err)
			}
			want, _ := refKeyed.Lookup(key)
			a, _ := got.MarshalBinary()
			b, _ := want.MarshalBinary()
			if !bytes.Equal(a, b) {
				t.Fatalf("key %s: its instance differs from one goroutine's", key)
			}
		}
	}
	if got := sh.st.Holder(0).Instance().Examples(); got != parts*perPart {
		t.Errorf("the global model learned %d events, want %d", got, parts*perPart)
	}
	// The global mam learned in the lanes (mergingHolder): its state is
	// the serial run's, up to the order of the sums.
	if _, ok := holder.ForLane(sh.st.Holder(0)).(holder.Lane); !ok {
		t.Fatalf("the global mam's holder is a %T, want its lanes to learn in parallel", sh.st.Holder(0))
	}
	if err := online.StateClose(sh.st.Holder(0).Instance(), rs.Holder(0).Instance(), 1e-9); err != nil {
		t.Errorf("the global model's state differs from one goroutine's: %v", err)
	}

	if len(out.msgs) != 2*parts*perPart {
		t.Fatalf("%d records, want %d", len(out.msgs), 2*parts*perPart)
	}
	last := map[string]int64{} // model/partition: the last offset whose record was seen
	for _, m := range out.msgs {
		var r struct {
			ID    string `json:"id"`
			Model string `json:"model"`
		}
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		// An event without an id is named by its place: events:PART:OFFSET.
		var part int
		var off int64
		if _, err := fmt.Sscanf(r.ID, "events:%d:%d", &part, &off); err != nil {
			t.Fatalf("record id %q: %v", r.ID, err)
		}
		k := r.Model + "/" + strconv.Itoa(part)
		if prev, ok := last[k]; ok && off != prev+1 {
			t.Fatalf("model %s, partition %d: offset %d's record after %d's", r.Model, part, off, prev)
		}
		last[k] = off
	}
}

// TestLanesShareJoinBuffer: with delayed labels, the lanes of four
// partitions keep their impressions in the shard's one join buffer and
// take them back when the labels come, in parallel (under -race in CI):
// every label joins its impression, and the global model learns each
// labelled impression once.
func TestLanesShareJoinBuffer(t *testing.T) {
	const parts, perPart = 4, 2000
	g, _ := online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Delta: 0.05})
	reg := prometheus.NewRegistry()
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, JoinEvents: parts * perPart},
		[]engine.NamedModel{{Name: "g", Model: g}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	p, sh := instancePipeline(t, e)
	out := &lockedSink{}
	var wg sync.WaitGroup
	for part := range parts {
		// Impression n, then the label of impression n-1.
		var evs []kafka.Message
		add := func(v []byte) {
			evs = append(evs, kafka.Message{Topic: "events", Partition: part, Offset: int64(len(evs)), Key: []byte("u"), Value: v})
		}
		for n := range perPart {
			add(fmt.Appendf(nil, `{"id":"p%d-%d","features":[%d,%d]}`, part, n, n%5-2, n%3-1))
			if n > 0 {
				add(fmt.Appendf(nil, `{"id":"p%d-%d","label":%d}`, part, n-1, 1-2*((n-1)%2)))
			}
		}
		wg.Go(func() {
			i := 0
			fetch := func() (kafka.Message, bool) {
				if i == len(evs) {
					return kafka.Message{}, false
				}
				i++
				return evs[i-1], true
			}
			p.apply(sh, part, out, fetch, nil)
		})
	}
	wg.Wait()
	// Every impression but each partition's last is labelled.
	joined, unknown := metricValue(t, reg, "streamer_labels_total", "joined"), metricValue(t, reg, "streamer_labels_total", "unknown_id")
	if want := float64(parts * (perPart - 1)); joined != want || unknown != 0 {
		t.Errorf("%v labels joined, %v unknown; want %v and 0", joined, unknown, want)
	}
	if got := sh.st.Holder(0).Instance().Examples(); got != int64(parts*(perPart-1)) {
		t.Errorf("the model learned %d events, want %d", got, parts*(perPart-1))
	}
	if n := metricValue(t, reg, "streamer_join_pending", "impressions"); n != parts {
		t.Errorf("%v impressions waiting, want %d (each partition's last)", n, parts)
	}
}

// metricValue is the value of the series of metric name in reg whose one
// label has value v.
func metricValue(t *testing.T, reg *prometheus.Registry, name, v string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetValue() == v {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%q}", name, v)
	return 0
}
