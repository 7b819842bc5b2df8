package engine

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamer/streamer/online"
)

// tauShard is a regression model's engine on its own registry, for the
// tests of streamer_model_kendall_tau, with tauRefresh set to refresh for
// the test: its instance shard and the sink of its records.
type tauShard struct {
	e      *Engine
	reg    *prometheus.Registry
	s      *Shard
	sink   *memSink
	labels []float64 // of the events processed, in order
}

func newTauShard(t *testing.T, refresh time.Duration) *tauShard {
	t.Helper()
	old := tauRefresh
	tauRefresh = refresh
	t.Cleanup(func() { tauRefresh = old })
	const dim = 2
	ts := &tauShard{reg: prometheus.NewRegistry(), sink: &memSink{Keep: true}}
	var err error
	ts.e, err = New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, AccuracyWindow: 1000},
		[]NamedModel{{Name: "fm", Model: valueModel(dim, 100, 0.5, 5), Traits: online.Traits{Kind: online.Regression, Value: true}}}, ts.reg)
	if err != nil {
		t.Fatal(err)
	}
	ts.s = instanceShard(t, ts.e)
	return ts
}

// process applies rating events up to the upTo-th: each predicted by its
// feature, off by up to a star, so that τ is well inside (0, 1).
func (ts *tauShard) process(upTo int) {
	for i := len(ts.labels); i < upTo; i++ {
		y := ratings[(i*7)%len(ratings)]
		msg := ratingEvent(i, "u", []float64{y + 0.5*float64(i%5-2), 0}, y)
		ts.s.Process(&msg, ts.sink)
		ts.labels = append(ts.labels, y)
	}
}

// tau scrapes the gauge.
func (ts *tauShard) tau() float64 { return testutil.ToFloat64(ts.e.met.tau) }

// want is τ-b of the last up to 1 000 judged events' published scores
// against their labels (the first prediction, made before the model had a
// value, is not judged).
func (ts *tauShard) want(t *testing.T) (float64, int) {
	t.Helper()
	recs, _ := scoreRecords(t, ts.sink)
	var scores, truth []float64
	for i := max(1, len(recs)-1000); i < len(recs); i++ {
		scores = append(scores, recs[i].Score)
		truth = append(truth, ts.labels[i])
	}
	return online.KendallTauB(scores, truth), len(scores)
}

// TestKendallTauGaugeAtScrape: streamer_model_kendall_tau is computed when
// scraped, over the judge's window as it is then: NaN before 100 labelled
// events, then exactly τ-b of the published scores against the labels of
// every event judged so far, also between two of the judge's checks
// (every 100th event), where it used to keep the last check's value.
func TestKendallTauGaugeAtScrape(t *testing.T) {
	ts := newTauShard(t, 0)
	if n := testutil.CollectAndCount(ts.reg, "streamer_model_kendall_tau"); n != 1 {
		t.Fatalf("%d series of streamer_model_kendall_tau, want 1", n)
	}
	if got := ts.tau(); !math.IsNaN(got) {
		t.Fatalf("τ %v before any event, want NaN", got)
	}
	ts.process(99)
	if got := ts.tau(); !math.IsNaN(got) {
		t.Fatalf("τ %v after 99 labelled events, want NaN until the 100th", got)
	}
	for _, n := range []int{100, 401, 402, 1250} {
		ts.process(n)
		want, pairs := ts.want(t)
		if got := ts.tau(); got != want || !(want > 0.5 && want < 1) {
			t.Errorf("after %d events: τ %v, want %v (τ-b of the window's %d published scores against their labels)", n, got, want, pairs)
		}
	}
}

// TestKendallTauScrapedWhileApplying: Prometheus scrapes (gathering the
// registry, which computes τ under the model's judge lock) while a shard
// applies regression events (run under -race by CI); the last scrape
// after the events is τ over the window's last 1 000 judged.
func TestKendallTauScrapedWhileApplying(t *testing.T) {
	ts := newTauShard(t, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.process(3000)
	}()
	scrapes := 0
	for running := true; running; scrapes++ {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := ts.reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if want, _ := ts.want(t); ts.tau() != want {
		t.Errorf("τ %v after the events, want %v", ts.tau(), want)
	}
	t.Logf("%d scrapes during 3 000 events", scrapes)
}

// TestKendallTauScrapesCapped: scrapes within tauRefresh of the last
// computation get its value, without computing τ again (under the judge's
// lock, which the appliers wait for), however many labelled events came
// since.
func TestKendallTauScrapesCapped(t *testing.T) {
	ts := newTauShard(t, time.Hour)
	ts.process(150)
	first := ts.tau()
	if !(first > 0.5 && first < 1) {
		t.Fatalf("τ %v after 150 events", first)
	}
	ts.process(400)
	if now, _ := ts.want(t); now == first {
		t.Fatalf("τ over the window did not change (%v): the test shows nothing", now)
	}
	if got := ts.tau(); got != first {
		t.Errorf("a scrape within tauRefresh: τ %v, want the last computed, %v", got, first)
	}
}
