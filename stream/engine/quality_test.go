package engine

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamer/streamer/online"
)

// TestKendallTauGaugeAtScrape: streamer_model_kendall_tau is computed when
// scraped, over the judge's window as it is then: NaN before 100 labelled
// events, then exactly τ-b of the published scores against the labels of
// every event judged so far, also between two of the judge's checks
// (every 100th event), where it used to keep the last check's value.
func TestKendallTauGaugeAtScrape(t *testing.T) {
	tauRefreshed(t, 0)
	const dim = 2
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, AccuracyWindow: 1000},
		[]NamedModel{{Name: "fm", Model: valueModel(dim, 100, 0.5, 5), Traits: online.Traits{Kind: online.Regression, Value: true}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	var labels []float64
	tau := func() float64 {
		t.Helper()
		if n := testutil.CollectAndCount(reg, "streamer_model_kendall_tau"); n != 1 {
			t.Fatalf("%d series of streamer_model_kendall_tau, want 1", n)
		}
		return testutil.ToFloat64(e.met.tau)
	}
	if got := tau(); !math.IsNaN(got) {
		t.Fatalf("τ %v before any event, want NaN", got)
	}
	process := func(upTo int) {
		for i := len(labels); i < upTo; i++ {
			y := ratings[(i*7)%len(ratings)]
			x0 := y + 0.5*float64(i%5-2) // off by up to a star: τ well inside (0, 1)
			msg := ratingEvent(i, "u", []float64{x0, 0}, y)
			s.Process(&msg, sink)
			labels = append(labels, y)
		}
	}
	process(99)
	if got := tau(); !math.IsNaN(got) {
		t.Fatalf("τ %v after 99 labelled events, want NaN until the 100th", got)
	}
	for _, n := range []int{100, 401, 402, 1250} {
		process(n)
		recs, _ := scoreRecords(t, sink)
		// The first prediction, made before the model had a value, is
		// not judged; the window holds the last 1 000 judged.
		var scores, truth []float64
		for i := max(1, n-1000); i < n; i++ {
			scores = append(scores, recs[i].Score)
			truth = append(truth, labels[i])
		}
		want := online.KendallTauB(scores, truth)
		if got := tau(); got != want || !(want > 0.5 && want < 1) {
			t.Errorf("after %d events: τ %v, want %v (τ-b of the window's %d published scores against their labels)", n, got, want, len(scores))
		}
	}
}

// TestKendallTauScrapedWhileApplying: Prometheus scrapes (gathering the
// registry, which computes τ under the model's judge lock) while a shard
// applies regression events (run under -race by CI); the last scrape
// after the events is τ over the window's last 1 000 judged.
func TestKendallTauScrapedWhileApplying(t *testing.T) {
	tauRefreshed(t, 0)
	const dim, n = 2, 3000
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, AccuracyWindow: 1000},
		[]NamedModel{{Name: "fm", Model: valueModel(dim, 100, 0.5, 5), Traits: online.Traits{Kind: online.Regression, Value: true}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	labels := make([]float64, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			labels[i] = ratings[(i*3)%len(ratings)]
			msg := ratingEvent(i, "u", []float64{labels[i] + 0.5*float64(i%5-2), 0}, labels[i])
			s.Process(&msg, sink)
		}
	}()
	scrapes := 0
	for running := true; running; scrapes++ {
		select {
		case <-done:
			running = false
		default:
		}
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	recs, _ := scoreRecords(t, sink)
	var scores, truth []float64
	for i := n - 1000; i < n; i++ {
		scores = append(scores, recs[i].Score)
		truth = append(truth, labels[i])
	}
	if got, want := testutil.ToFloat64(e.met.tau), online.KendallTauB(scores, truth); got != want {
		t.Errorf("τ %v after the events, want %v", got, want)
	}
	t.Logf("%d scrapes during %d events", scrapes, n)
}

// tauRefreshed sets tauRefresh to d for the test.
func tauRefreshed(t *testing.T, d time.Duration) {
	old := tauRefresh
	tauRefresh = d
	t.Cleanup(func() { tauRefresh = old })
}

// TestKendallTauScrapesCapped: scrapes within tauRefresh of the last
// computation get its value, without computing τ again (under the judge's
// lock, which the appliers wait for), however many labelled events came
// since.
func TestKendallTauScrapesCapped(t *testing.T) {
	tauRefreshed(t, time.Hour)
	const dim = 2
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, AccuracyWindow: 1000},
		[]NamedModel{{Name: "fm", Model: valueModel(dim, 100, 0.5, 5), Traits: online.Traits{Kind: online.Regression, Value: true}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{}
	process := func(from, to int) {
		for i := from; i < to; i++ {
			y := ratings[(i*7)%len(ratings)]
			msg := ratingEvent(i, "u", []float64{y + 0.5*float64(i%5-2), 0}, y)
			s.Process(&msg, sink)
		}
	}
	process(0, 150)
	first := testutil.ToFloat64(e.met.tau)
	if !(first > 0.5 && first < 1) {
		t.Fatalf("τ %v after 150 events", first)
	}
	process(150, 400)
	d := e.defs[0]
	d.judgeMu.Lock()
	now := d.quality.KendallTau()
	d.judgeMu.Unlock()
	if now == first {
		t.Fatalf("τ over the window did not change (%v): the test shows nothing", now)
	}
	if got := testutil.ToFloat64(e.met.tau); got != first {
		t.Errorf("a scrape within tauRefresh: τ %v, want the last computed, %v", got, first)
	}
}
