package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// challengeEngine is rankEngine's world with a second model ("b", a MAM
// like "a") challenging the rank model "a".
func challengeEngine(t testing.TB, promote string, replay bool) *Engine {
	t.Helper()
	return challengeEngineJoin(t, promote, replay, 1000)
}

// challengeEngineJoin is challengeEngine with a join window of
// joinEvents events (and as many shown items).
func challengeEngineJoin(t testing.TB, promote string, replay bool, joinEvents int) *Engine {
	t.Helper()
	var models []NamedModel
	for _, name := range []string{"a", "b"} {
		m, err := online.NewMAM(4, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, NamedModel{Name: name, Model: m, Fingerprint: name + "-fp"})
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 4, MaxMessageBytes: 1 << 20, JoinEvents: joinEvents,
		Rank: RankConfig{Model: "a", Policy: PolicyEpsilon, Epsilon: 0.5, Seed: 7, Challenger: "b", Promote: promote, Hold: 100, Replay: replay}},
		models, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestChallengerEvidence: samples where the challenger's first is
// rewarded and the champion's is not put the difference's lower bound
// above 0; after Hold samples of it, manual reports once and keeps the
// champion, auto swaps the two and starts a new generation, whose
// samples a request ranked before it no longer enters.
func TestChallengerEvidence(t *testing.T) {
	for _, promote := range []string{PromoteManual, PromoteAuto} {
		e := challengeEngine(t, promote, false)
		wins, promotions := 0, 0
		c := e.ope.ch
		promote0, wins0 := c.promote, c.wins
		c.promote = func(m, lo, n float64) { promotions++; promote0(m, lo, n) }
		c.wins = func(m, lo, n float64) { wins++; wins0(m, lo, n) }
		for i := range 1000 {
			// Half the first items are the challenger's (rewarded), half the champion's (not).
			ch := i%2 == 0
			r := 0.0
			if ch {
				r = 1
			}
			e.ope.add(opeMark{first: true, prop: 0.5, greedy: !ch, hasChal: true, chMatch: ch, predShown: 0.5, predTop: 0.5, predCh: 0.5}, r)
			if e.ope.generation() > 0 {
				break
			}
		}
		r := e.OPE(20, 1)
		switch promote {
		case PromoteManual:
			if wins != 1 || promotions != 0 || e.Champion() != "a" || r.Difference.Ahead < 100 || !(r.Difference.Lower > 0) {
				t.Errorf("manual: %d wins, %d promotions, champion %s, report %+v", wins, promotions, e.Champion(), r.Difference)
			}
		case PromoteAuto:
			if promotions != 1 || e.Champion() != "b" || r.Challenger != "a" || r.Generation != 1 || r.Samples != 0 {
				t.Errorf("auto: %d promotions, champion %s, report %+v", promotions, e.Champion(), r)
			}
			// A label of a request ranked before the promotion.
			e.ope.add(opeMark{first: true, prop: 0.5, greedy: true, hasChal: true}, 1)
			if r2 := e.OPE(20, 1); r2.Samples != 0 || r2.Labels != r.Labels+1 {
				t.Errorf("a sample of the previous generation: %d samples in this one (want 0), %d labels (want %d)", r2.Samples, r2.Labels, r.Labels+1)
			}
		}
	}
}

// TestChallengerSavedWithCheckpoint: which model ranks is saved with a
// checkpoint and restored with it.
func TestChallengerSavedWithCheckpoint(t *testing.T) {
	e := challengeEngine(t, PromoteAuto, false)
	s := instanceShard(t, e)
	e.ope.mu.Lock()
	e.ope.ch.promote(0.1, 0.05, 2000)
	e.ope.newGeneration()
	e.ope.mu.Unlock()
	cp, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	e2 := challengeEngine(t, PromoteAuto, false)
	s2, err := e2.NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	_, dropped, err := s2.Restore(cp.Models, nil)
	if err != nil || len(dropped) > 0 {
		t.Fatalf("restore: %v, dropped %v", err, dropped)
	}
	if e2.Champion() != "b" || e2.defs[e2.chal.Load()].name != "a" {
		t.Errorf("after the restore %s ranks, want b", e2.Champion())
	}
	// And a request is ranked by it.
	trainFirstAxis(s2, 4)
	sink := &memSink{Keep: true}
	msg := kafka.Message{Value: testkit.Request32(5, 4, 2)}
	s2.Process(&msg, sink)
	var resp struct{ Model string }
	if len(sink.Msgs) != 1 || json.Unmarshal(sink.Msgs[0].Value, &resp) != nil || resp.Model != "b" {
		t.Errorf("%d responses, want one by model b", len(sink.Msgs))
	}
}

// TestReplayLogged: with Replay, a request's logged decision is the
// item put first, with the logged propensity, and its label is a sample
// of the off-policy estimates with that propensity.
func TestReplayLogged(t *testing.T) {
	e := challengeEngine(t, PromoteManual, true)
	s := instanceShard(t, e)
	trainFirstAxis(s, 4)
	sink := &memSink{Keep: true}
	req := `{"id":"q1","key":"u","k":2,"candidates":[{"item":"x","features":[1,0,0,0]},{"item":"y","features":[-1,0,0,0]}],"logged":{"item":"y","propensity":0.25}}`
	msg := kafka.Message{Value: []byte(req)}
	s.Process(&msg, sink)
	var resp struct {
		Ranked []struct {
			Item       string
			Propensity float64
		}
	}
	if len(sink.Msgs) != 1 || json.Unmarshal(sink.Msgs[0].Value, &resp) != nil || len(resp.Ranked) != 2 {
		t.Fatalf("%d responses", len(sink.Msgs))
	}
	if resp.Ranked[0].Item != "y" || resp.Ranked[0].Propensity != 0.25 || resp.Ranked[1].Item != "x" {
		t.Fatalf("ranked %+v, want y first with propensity 0.25", resp.Ranked)
	}
	label := kafka.Message{Value: []byte(`{"id":"q1","item":"y","label":1}`)}
	s.Process(&label, sink)
	r := e.OPE(10, 1)
	if r.Labels != 1 || r.Logged != 1 {
		t.Fatalf("report %+v", r)
	}
	for _, est := range r.Estimates {
		// Greedy (both models put x first) never matches the logged y: IPS 0.
		if est.Estimator == "ips" && est.Value != 0 {
			t.Errorf("%s ips %v, want 0", est.Policy, est.Value)
		}
	}
}

// TestChallengerLanes: four lanes of an instance shard rank requests
// (the challenger in shadow) and apply their labels in parallel while the
// estimates are read and checkpoints captured. Run under -race (.ci/run),
// it checks the challenger's paths for races; every label is a sample.
// The shard's one buffer of shown items holds every request's item: with
// a smaller one, a lane descheduled between its request and its label
// (other lanes showing a whole buffer's items meanwhile) finds its item
// pushed out, and its label late.
func TestChallengerLanes(t *testing.T) {
	const lanes, perLane = 4, 600
	e := challengeEngineJoin(t, PromoteAuto, false, lanes*perLane)
	s := instanceShard(t, e)
	trainFirstAxis(s, 4)
	var mu sync.RWMutex // the pipeline's shard lock: lanes apply shared, a capture holds it alone
	var wg sync.WaitGroup
	for part := range lanes {
		l := s.Lane(part)
		l.Applies(part)
		w := e.NewWorker()
		wg.Go(func() {
			defer l.Leave()
			sink := &memSink{Keep: true}
			apply := func(msg *kafka.Message) {
				mu.RLock()
				defer mu.RUnlock()
				w.Prepare(msg)
				l.ApplyAt(w, msg, sink, time.Now())
				if msg.Offset%50 == 49 {
					l.EndRun()
				}
			}
			for n := range perLane {
				id := fmt.Sprintf("p%d-%d", part, n)
				req := fmt.Appendf(nil, `{"id":%q,"key":"u%d","k":1,"candidates":[{"item":"x","features":[1,0,0,0]},{"item":"y","features":[-1,0,%d,0]}]}`, id, n%7, n%3)
				sink.Msgs = sink.Msgs[:0]
				apply(&kafka.Message{Partition: part, Offset: int64(2 * n), Value: req})
				var resp struct{ Ranked []struct{ Item string } }
				if len(sink.Msgs) != 1 || json.Unmarshal(sink.Msgs[0].Value, &resp) != nil || len(resp.Ranked) != 1 {
					t.Errorf("%s: no response", id)
					return
				}
				// The challenger's item (y) is rewarded, the champion's is not.
				y := -1
				if resp.Ranked[0].Item == "y" {
					y = 1
				}
				apply(&kafka.Message{Partition: part, Offset: int64(2*n + 1), Value: fmt.Appendf(nil, `{"id":%q,"item":%q,"label":%d}`, id, resp.Ranked[0].Item, y)})
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			e.OPE(5, 1)
			mu.Lock()
			_, err := s.Capture()
			mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	if r := e.OPE(5, 1); r.Labels != lanes*perLane {
		t.Errorf("%d labels, want %d (%v late, %v of unknown ids)", r.Labels, lanes*perLane,
			testutil.ToFloat64(e.met.labelsLate), testutil.ToFloat64(e.met.labelsUnknown))
	}
}

// BenchmarkRank100Challenger is BenchmarkRank100 with a second linear mam
// ranking in shadow (challenger) beside the same request without one: what
// the challenger adds to a request. 0 allocs.
func BenchmarkRank100Challenger(b *testing.B) {
	for _, challenger := range []string{"", "b"} {
		name := "none"
		if challenger != "" {
			name = "challenger"
		}
		b.Run(name, func(b *testing.B) {
			var models []NamedModel
			for _, n := range []string{"a", "b"} {
				m, err := online.NewMAM(32, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
				if err != nil {
					b.Fatal(err)
				}
				models = append(models, NamedModel{Name: n, Model: m})
			}
			e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 32, MaxMessageBytes: 1 << 20, JoinEvents: 1000,
				Rank: RankConfig{Model: "a", Policy: PolicyGreedy, Seed: 7, Challenger: challenger}}, models, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(e.Close)
			s := instanceShard(b, e)
			trainFirstAxis(s, 32)
			msg := kafka.Message{Topic: "events", Key: []byte("u"), Value: testkit.Request32(100, 32, 10)}
			sink := &memSink{}
			b.ReportAllocs()
			for b.Loop() {
				s.Process(&msg, sink)
			}
		})
	}
}
