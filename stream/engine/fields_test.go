package engine

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

// fieldObs is one observation a fieldRecorder made.
type fieldObs struct {
	field    []uint8
	labelled bool
}

func (o fieldObs) String() string { return fmt.Sprintf("%v/%v", o.field, o.labelled) }

// fieldLog collects the observations of the fieldRecorders that share it
// (a key-scoped model's instances).
type fieldLog struct {
	mu   sync.Mutex
	obs  []fieldObs
	errs []string // calls a field model must not get
}

// take returns the observations since the last take, failing t for any
// call the recorders should not have had meanwhile.
func (l *fieldLog) take(t *testing.T) []fieldObs {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Error(e)
	}
	out := l.obs
	l.obs, l.errs = nil, nil
	return out
}

func (l *fieldLog) fail(msg string) {
	l.mu.Lock()
	l.errs = append(l.errs, msg)
	l.mu.Unlock()
}

// fieldRecorder is a logistic regression that reads the fields of its
// hashed entries (online.FieldModel): it records them, then learns as
// ObserveSparse.
type fieldRecorder struct {
	*online.Logistic
	log *fieldLog
}

var _ online.FieldModel = fieldRecorder{}

func (m fieldRecorder) ObserveFields(idx []int32, val []float64, field []uint8, y float64, labelled bool) online.Prediction {
	if len(field) != len(idx) {
		m.log.fail(fmt.Sprintf("fieldRecorder: %d fields for %d entries", len(field), len(idx)))
	}
	m.log.mu.Lock()
	m.log.obs = append(m.log.obs, fieldObs{slices.Clone(field), labelled})
	m.log.mu.Unlock()
	return m.Logistic.ObserveSparse(idx, val, y, labelled)
}

func (m fieldRecorder) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) online.Prediction {
	m.log.fail("fieldRecorder: ObserveSparse called: a field model gets ObserveFields")
	return m.Logistic.ObserveSparse(idx, val, y, labelled)
}

const fieldBits = 10

// fieldHash lists item before user: item entries have field 1, user
// entries 2.
var fieldHash = wire.HashConfig{Bits: fieldBits, Seed: 5, MaxFeatures: 64, Interactions: [][2]string{{"user", "item"}},
	Namespaces: []string{"item", "user"}}

func newFieldRecorder(log *fieldLog) func() (online.Model, error) {
	return func() (online.Model, error) {
		lg, err := online.NewLogistic(1<<fieldBits, online.LogisticParams{LearningRate: online.DefaultLearningRate})
		return fieldRecorder{lg, log}, err
	}
}

// TestHashedFields: a model that reads fields (online.FieldModel) gets,
// with every hashed entry, the field of its namespace (features.namespaces:
// item 1, user 2; 0 for the top level, an unlisted namespace and the
// interactions) — for a plain event, an impression and its delayed label
// (the join buffer keeps the fields), a ranking request's candidates
// (the request's entries and the candidate's combined, scored by the
// key-scoped rank model and by the global one, the shown item's label
// learned with them), in instance and in partition scope. A model that
// does not read fields observes as before.
func TestHashedFields(t *testing.T) {
	const (
		event   = `{"id":"e1","features":{"user":{"id":"u1"},"x":1,"item":{"id":"i1","tags":["a","b"]},"other":{"o":1}},"label":1}`
		imp     = `{"id":"imp","features":{"item":{"id":"i2"},"user":{"id":"u1","c":"fr"}}}`
		label   = `{"id":"imp","label":-1}`
		request = `{"id":"r1","key":"u1","k":2,"features":{"user":{"id":"u1"}},"candidates":[` +
			`{"item":"a","features":{"item":{"id":"a"}}},{"item":"b","features":{"item":{"id":"b","cat":"c"},"hour":3}}]}`
		itemLabel = `{"id":"r1","item":"b","label":1}`
	)
	var (
		eventFields = []uint8{2, 0, 1, 1, 1, 0, 0, 0, 0} // user.id, x, item: id, tags=a, tags=b, other.o, 1×3 user × item
		impFields   = []uint8{1, 2, 2, 0, 0}             // item.id, user: id, c, 2×1 user × item
		candA       = []uint8{2, 1, 0}                   // the request's user.id, item.id, user × item
		candB       = []uint8{2, 1, 1, 0, 0, 0}          // user.id, item: id, cat, hour, 1×2 user × item
	)
	obs := func(f []uint8, labelled bool) fieldObs { return fieldObs{f, labelled} }
	check := func(t *testing.T, what string, l *fieldLog, want ...fieldObs) {
		t.Helper()
		if got := l.take(t); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %v\nwant %v", what, got, want)
		}
	}
	process := func(s *Shard, off int64, v string) {
		sink := &memSink{Keep: true}
		s.Process(&kafka.Message{Topic: "events", Offset: off, Key: []byte("u1"), Value: []byte(v)}, sink)
		for _, m := range sink.Msgs {
			if m.Topic == "dlq" {
				t.Fatalf("%s: dead-lettered: %v", v, m.Headers)
			}
		}
	}

	t.Run("instance", func(t *testing.T) {
		var glog, klog fieldLog
		g, _ := newFieldRecorder(&glog)()
		k, _ := newFieldRecorder(&klog)()
		plain, _ := online.NewLogistic(1<<fieldBits, online.LogisticParams{LearningRate: online.DefaultLearningRate})
		hc := fieldHash
		e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << fieldBits, MaxMessageBytes: 1 << 16,
			JoinEvents: 100, Hash: &hc, Rank: RankConfig{Model: "keyed"}},
			[]NamedModel{{Name: "global", Model: g}, {Name: "keyed", Model: k, Factory: newFieldRecorder(&klog), MaxKeys: 10}, {Name: "plain", Model: plain}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		s := instanceShard(t, e)
		klog.take(t) // what building the instances did

		process(s, 0, event)
		check(t, "plain event, global", &glog, obs(eventFields, true))
		check(t, "plain event, key-scoped", &klog, obs(eventFields, true))

		process(s, 1, imp)
		check(t, "impression, global", &glog, obs(impFields, false))
		check(t, "impression, key-scoped", &klog, obs(impFields, false))
		process(s, 2, label)
		check(t, "delayed label, global", &glog, obs(impFields, true))
		check(t, "delayed label, key-scoped", &klog, obs(impFields, true))

		process(s, 3, request)
		// The rank model scores every candidate; the global model each shown
		// one (both here, in the order shown).
		check(t, "request, rank model", &klog, obs(candA, false), obs(candB, false))
		got := glog.take(t)
		slices.SortFunc(got, func(a, b fieldObs) int { return len(a.field) - len(b.field) })
		if want := []fieldObs{obs(candA, false), obs(candB, false)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("request, global:\n got %v\nwant %v", got, want)
		}
		process(s, 4, itemLabel)
		check(t, "item label, global", &glog, obs(candB, true))
		check(t, "item label, key-scoped", &klog, obs(candB, true))
	})

	t.Run("partition", func(t *testing.T) {
		var glog fieldLog
		g, _ := newFieldRecorder(&glog)()
		hc := fieldHash
		e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << fieldBits, MaxMessageBytes: 1 << 16,
			JoinEvents: 100, Hash: &hc, Rank: RankConfig{Model: "global"}},
			[]NamedModel{{Name: "global", Model: g, New: newFieldRecorder(&glog), Fingerprint: "global"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		s, err := e.NewShard("0")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Restore(nil, nil); err != nil {
			t.Fatal(err)
		}
		glog.take(t)
		process(s, 0, event)
		check(t, "plain event", &glog, obs(eventFields, true))
		process(s, 1, imp)
		process(s, 2, label)
		check(t, "impression and its label", &glog, obs(impFields, false), obs(impFields, true))
		process(s, 3, request)
		check(t, "request", &glog, obs(candA, false), obs(candB, false))
		process(s, 4, itemLabel)
		check(t, "item label", &glog, obs(candB, true))
	})
}

// TestHashConfigNamespaces: the service's decoder numbers fields by the
// configuration's features.namespaces.
func TestHashConfigNamespaces(t *testing.T) {
	h := hashConfig(config.Features{Hash: &config.Hash{Bits: 10, Seed: 2}, MaxFeatures: 64,
		Namespaces: []string{"user", "item"}, Interactions: [][]string{{"user", "item"}}})
	if h == nil || !slices.Equal(h.Namespaces, []string{"user", "item"}) || len(h.Interactions) != 1 {
		t.Fatalf("hash config %+v", h)
	}
}
