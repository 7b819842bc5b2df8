package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/holder"
)

// TestJudgeRuns: an applier's shard judges and counts a run of events
// at a time (endRun); over one partition the prequential quality and the
// count of published predictions end as when each event is judged and
// counted as it is applied, and judging waits for the run's end.
func TestJudgeRuns(t *testing.T) {
	judged := func(runs bool) (*Engine, *Shard) {
		e := appliersEngine(t)
		s := instanceShard(t, e)
		if runs {
			s.Applies(0)
		}
		return e, s
	}
	ref, rs := judged(false)
	e, s := judged(true)
	for off := range 1000 {
		v := fmt.Appendf(nil, `{"features":[%d,%d],"label":%d}`, off%5-2, (off*3)%7-3, 1-2*((off/3)%2))
		msg := kafka.Message{Topic: "events", Offset: int64(off), Key: fmt.Appendf(nil, "user-%d", off%9), Value: v}
		rs.Process(&msg, &memSink{})
		s.Process(&msg, &memSink{})
		if off%7 == 6 {
			if got := len(s.judged); got != 7*len(e.defs) {
				t.Fatalf("offset %d: %d predictions waiting, want %d", off, got, 7*len(e.defs))
			}
			s.EndRun()
		}
	}
	s.EndRun()
	// The mistake bounds published: into the partition's shard of the
	// histogram a run at a time, one by one into the shard of none.
	const bounds = "streamer_model_mistake_bound"
	got, err := testutil.CollectAndFormat(e.met.bound, expfmt.TypeTextPlain, bounds)
	if err != nil {
		t.Fatal(err)
	}
	want, err := testutil.CollectAndFormat(ref.met.bound, expfmt.TypeTextPlain, bounds)
	if err != nil {
		t.Fatal(err)
	}
	if withoutSums(got) != withoutSums(want) || !strings.Contains(string(want), bounds+`_count{model="g"} 1000`) {
		t.Errorf("mistake bounds observed in runs:\n%s\none by one:\n%s", got, want)
	}
	for i, d := range e.defs {
		r := ref.defs[i]
		if got, want := testutil.ToFloat64(d.met.scored), testutil.ToFloat64(r.met.scored); got != want || want != 1000 {
			t.Errorf("model %s: %v predictions counted in runs, %v one by one, want 1000", d.name, got, want)
		}
		if d.quality.Mistakes() != r.quality.Mistakes() || d.quality.Accuracy() != r.quality.Accuracy() || r.quality.Mistakes() == 0 {
			t.Errorf("model %s: %d mistakes, accuracy %v judged in runs; %d, %v one by one", d.name,
				d.quality.Mistakes(), d.quality.Accuracy(), r.quality.Mistakes(), r.quality.Accuracy())
		}
	}
}

// TestLanesMergeGlobalModel: lanes learn a mergeable global mam each into
// statistics of their own; a lane's scores include its partition's events
// at once and the other lanes' once they publish (every holder.LanePublish
// labelled events, and when idle), so that once every lane was idle each
// lane scores exactly as one model that learned every event; a lane that
// leaves folds its statistics into the shard's state.
func TestLanesMergeGlobalModel(t *testing.T) {
	s, rs := instanceShard(t, appliersEngine(t)), instanceShard(t, appliersEngine(t))
	lanes := []*Shard{s.Lane(0), s.Lane(1)}
	for i, l := range lanes {
		l.Applies(i)
	}
	event := func(part, off int, label bool) kafka.Message {
		v := fmt.Appendf(nil, `{"features":[%d,%d]`, (off+part)%5-2, (off*3)%7-3)
		if label {
			v = fmt.Appendf(v, `,"label":%d`, 1-2*((off/3)%2))
		}
		v = append(v, '}')
		return kafka.Message{Topic: "events", Partition: part, Offset: int64(off), Key: fmt.Appendf(nil, "user-%d-%d", part, off%5), Value: v}
	}
	w := s.e.NewWorker()
	apply := func(l *Shard, msg kafka.Message, out Sink) {
		w.Prepare(&msg)
		l.ApplyAt(w, &msg, out, time.Now())
	}
	score := func(l *Shard, probe kafka.Message) float64 {
		out := &memSink{Keep: true}
		apply(l, probe, out)
		var rec struct {
			Model string
			Score float64
		}
		for _, m := range out.Msgs {
			if err := json.Unmarshal(m.Value, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Model == "g" {
				return rec.Score
			}
		}
		t.Fatal("no record of the global model")
		return 0
	}
	for off := range 500 { // runs of 25 events, the lanes alternating
		for part, l := range lanes {
			for k := range 25 {
				msg := event(part, off*25+k, true)
				apply(l, msg, &memSink{})
				rs.Process(&msg, &memSink{})
			}
			if off%50 == 49 {
				l.Idle() // its applier found no event waiting, then waited
				l.Waited(holder.LaneWoke)
				continue
			}
			if n := l.models[0].h.(interface{ Unpublished() int }).Unpublished(); n >= holder.LanePublish {
				t.Fatalf("lane %d: %d labelled events unpublished", part, n)
			}
		}
		if off%50 != 49 {
			continue
		}
		// Every lane's run ended: each scores as the one model does.
		probe := event(0, 1_000_000+off, false)
		want := score(rs, probe)
		for part, l := range lanes {
			if got := score(l, probe); math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
				t.Fatalf("after %d events each: lane %d scores %v, the one model %v", (off+1)*25, part, got, want)
			}
		}
	}
	for _, l := range lanes {
		l.Leave()
	}
	if err := online.StateClose(s.models[0].h.Instance(), rs.models[0].h.Instance(), 1e-9); err != nil {
		t.Errorf("after the lanes left, the state differs from the one model's: %v", err)
	}
	if n, _, _ := s.models[0].h.Counts(); n != 2*500*25 {
		t.Errorf("the scrape counts %d examples, want %d", n, 2*500*25)
	}
}

// appliersEngine has a global model and a key-scoped one, in instance
// scope.
func appliersEngine(t *testing.T) *Engine {
	t.Helper()
	factory := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 8, Seed: 1}, Balance: true, Delta: 0.05})
	}
	k, _ := factory()
	g, _ := online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Delta: 0.05})
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, MergeLanes: MergeLanesOn},
		[]NamedModel{{Name: "g", Model: g}, {Name: "k", Model: k, Factory: factory, MaxKeys: 4096}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}
