package engine

import (
	"bufio"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/stream/wire"
)

// TestCalibratedCertainty: a mam streamed over Ripley's 1 000 test rows
// publishes certainty.probability once its calibration window has been
// fitted in the background (at the 50th pair, Every): lower ≤ p ≤ upper, n the pairs fitted, and over
// the second half the mean p is within 0.06 of the observed rate of the
// positive class, while the interval narrows as the window fills; the live
// check's gauges are set.
func TestCalibratedCertainty(t *testing.T) {
	f, err := os.Open("../../online/testdata/ripley_test.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if r := strings.Split(sc.Text(), ","); len(r) == 3 {
			if _, err := strconv.ParseFloat(r[0], 64); err == nil {
				rows = append(rows, r)
			}
		}
	}
	// The file is sorted by class: stream it in a fixed random order.
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	m, err := online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 10, Features: 256, Seed: 1}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2,
		Calibration: CalibrationConfig{Window: 400, Every: 50}}, []NamedModel{{Name: "mam", Model: m}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	type rec struct {
		Certainty struct {
			Probability *struct {
				P, Lower, Upper float64
				N               int64
			}
		}
	}
	var sumP, pos, n, widthEarly, widthLate float64
	var nEarly, nLate int
	for i, r := range rows {
		y := r[2]
		if y == "0" {
			y = "-1"
		}
		v := []byte(`{"features":[` + r[0] + `,` + r[1] + `],"label":` + y + `}`)
		s.Process(&kafka.Message{Topic: "events", Offset: int64(i), Value: v}, sink)
		waitCalibrationFit(e)
		var got rec
		if err := json.Unmarshal(sink.Msgs[len(sink.Msgs)-1].Value, &got); err != nil {
			t.Fatal(err)
		}
		pr := got.Certainty.Probability
		if i < 50 && pr != nil {
			t.Fatalf("event %d: a probability before the first fit", i)
		}
		if pr == nil {
			if i > 150 {
				t.Fatalf("event %d: no probability yet", i)
			}
			continue
		}
		// The fit takes the later half of the pairs so far, at least
		// calibrate.RecentMin, at most the window's 400.
		if want := min(i, 400, max(calibrate.RecentMin, i-i/2)); !(pr.Lower <= pr.P && pr.P <= pr.Upper) || pr.N < int64(min(want, 50)) || pr.N > int64(want) {
			t.Fatalf("event %d: probability %+v", i, *pr)
		}
		if i >= 50 && i < 150 {
			widthEarly += pr.Upper - pr.Lower
			nEarly++
		}
		if i >= len(rows)/2 {
			sumP += pr.P
			if y == "1" {
				pos++
			}
			n++
			widthLate += pr.Upper - pr.Lower
			nLate++
		}
	}
	if d := sumP/n - pos/n; d > 0.06 || d < -0.06 {
		t.Errorf("mean p %.3f, observed positive rate %.3f", sumP/n, pos/n)
	}
	we, wl := widthEarly/float64(nEarly), widthLate/float64(nLate)
	if !(wl < we) || wl > 0.1 {
		t.Errorf("mean width %.3f while the window fills, %.3f once full (want narrower, ≤ 0.1)", we, wl)
	}
	t.Logf("mean p %.3f, observed %.3f; width %.3f → %.3f", sumP/n, pos/n, we, wl)
	if got := testutil.ToFloat64(e.met.calPairs.WithLabelValues("mam")); got != 400 { // the window holds its last 400 of 1 000 pairs
		t.Errorf("streamer_calibration_pairs %v, want 400", got)
	}
	var counted float64
	for d := range 10 {
		counted += testutil.ToFloat64(e.met.calCount.WithLabelValues("mam", strconv.Itoa(d)))
	}
	if counted < 300 || counted > 400 {
		t.Errorf("live check over %v events, want the recent ones with a probability (≤ 400)", counted)
	}
}

// TestConformalInterval: an ordinal omam streamed over the Boston housing
// levels (standardised inputs) publishes certainty.interval once its window
// is fitted, centred on the predicted level: lower ≤ level ≤ upper at 0.9, and the labels of the
// events after that fall inside their interval at least about 90% of the
// time (the live coverage gauge agrees with the records).
func TestConformalInterval(t *testing.T) {
	f, err := os.Open("../../online/testdata/boston_ordinal.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && line[0] >= '0' && line[0] <= '9' {
			rows = append(rows, line)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	om, err := online.NewOMAM(13, online.OMAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 0.05, Features: 256, Seed: 1}, Levels: 5, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 13,
		Calibration: CalibrationConfig{Window: 300, Every: 25, Delta: 0.1}},
		[]NamedModel{{Name: "omam", Model: online.Standardize(om), Traits: online.Traits{Kind: online.Ordinal}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	var in, n float64
	for i, line := range rows {
		k := strings.LastIndexByte(line, ',')
		v := []byte(`{"features":[` + line[:k] + `],"label":` + line[k+1:] + `}`)
		s.Process(&kafka.Message{Topic: "events", Offset: int64(i), Value: v}, sink)
		waitCalibrationFit(e)
		var got struct {
			Prediction int
			Certainty  struct {
				Interval *struct{ Lower, Upper, Level float64 }
			}
		}
		if err := json.Unmarshal(sink.Msgs[len(sink.Msgs)-1].Value, &got); err != nil {
			t.Fatal(err)
		}
		iv := got.Certainty.Interval
		if iv == nil {
			if i > 100 {
				t.Fatalf("event %d: no interval", i)
			}
			continue
		}
		if lvl := float64(got.Prediction); !(iv.Lower <= lvl && lvl <= iv.Upper) || iv.Level != 0.9 {
			t.Fatalf("event %d: interval %+v for level %v", i, *iv, lvl)
		}
		y, _ := strconv.ParseFloat(line[k+1:], 64)
		if iv.Lower <= y && y <= iv.Upper {
			in++
		}
		n++
	}
	cov := in / n
	t.Logf("coverage %.3f over %v events", cov, n)
	// Levels are whole numbers, so the residuals are too and the interval
	// (level ± a whole q) over-covers: conformal guarantees at least the
	// level, here ~0.98 (q = 1). A continuous score's coverage is close to
	// the level: online/calibrate's krr test, 0.906.
	if cov < 0.85 || n < 200 {
		t.Fatalf("coverage %.3f over %v events, want at least about 0.9", cov, n)
	}
	if g := testutil.ToFloat64(e.met.calCoverage.WithLabelValues("omam")); g < 0.75 || g > 1 {
		t.Fatalf("streamer_calibration_coverage %v", g)
	}
}

// waitCalibrationFit waits for a background calibration fit the last event
// started to land, as it would before the next event of a stream slower
// than a test's loop: otherwise which fits run (one at a time; one that
// falls due while another runs is skipped) depends on the scheduler, and
// so do the tables the tests measure.
func waitCalibrationFit(e *Engine) {
	for _, d := range e.defs {
		for d.cal != nil && d.cal.fitting.Load() {
			runtime.Gosched()
		}
	}
}

// waitCalibrationIdle waits until no calibration fit runs or waits for
// its turn (a refit due sooner than min_interval after the last, on
// refitLate's timer): the tables then stay as they are until the next
// event, so that two requests ranked one after the other read the same.
func waitCalibrationIdle(e *Engine) {
	for _, d := range e.defs {
		for c := d.cal; c != nil; runtime.Gosched() {
			c.mu.Lock()
			busy := c.late || c.fitting.Load()
			c.mu.Unlock()
			if !busy {
				break
			}
		}
	}
}

// The live check judges the certainty a score was published with: a pair
// judged after a refit swapped the table (a run of events judged at its
// end, Shard.EndRun) keeps what its record said; a pair whose record is
// not at hand (a delayed label) is looked up in the current table.
func TestCalibrationChecksPublishedCertainty(t *testing.T) {
	met := newEngineMetrics(prometheus.NewRegistry())
	c := newCalibration("m", online.Traits{Kind: online.Classifier}, CalibrationConfig{Window: 100, Every: 1000, Delta: 0.1}, met)
	var pairs []calibrate.Pair
	for i := range 100 {
		pairs = append(pairs, calibrate.Pair{Score: float64(i%10) - 4.5, Y: float64(i % 2)})
	}
	c.va.Store(newVATable(calibrate.FitVennAbers(pairs), true))
	p := online.Prediction{Score: 2, Label: 1}
	wp, wlo, whi := c.va.Load().Probability(2)

	pub := wire.Calibrated{HasCal: true, CalP: 0.123, CalLower: 0.1, CalUpper: 0.2, CalN: 7}
	c.add(p, 1, 1, &pub)
	if j := c.recent[0]; !j.ok || j.p != 0.123 || j.lo != 0.1 || j.hi != 0.2 {
		t.Fatalf("published certainty judged as %+v, want p 0.123 in [0.1, 0.2]", j)
	}
	c.add(p, 1, 1, &wire.Calibrated{}) // published before the first fit: none
	if j := c.recent[1]; j.ok {
		t.Fatalf("a score published without a probability judged as %+v", j)
	}
	c.add(p, 1, 1, nil)
	if j := c.recent[2]; !j.ok || j.p != wp || j.lo != wlo || j.hi != whi {
		t.Fatalf("without the record: %+v, want the table's %v [%v, %v]", j, wp, wlo, whi)
	}
}

// The live check's sums, kept as judged events enter and leave the ring,
// equal the sums over the ring at every point (counts exactly, the rest
// to rounding), across several passes.
func TestCalibrationCheckSums(t *testing.T) {
	met := newEngineMetrics(prometheus.NewRegistry())
	for _, kind := range []online.Kind{online.Classifier, online.Regression} {
		c := newCalibration("m", online.Traits{Kind: kind}, CalibrationConfig{Window: 50, Every: 7, Delta: 0.1}, met)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range 180 {
			p := online.Prediction{Score: rng.NormFloat64(), Label: 1}
			lo := rng.Float64() * 0.5
			pub := &wire.Calibrated{HasCal: i%5 != 0, CalP: rng.Float64(), CalLower: lo, CalUpper: lo + 0.5,
				HasInterval: i%5 != 0, IntLower: -lo, IntUpper: lo}
			y := float64(rng.IntN(2))
			c.add(p, y, y, pub)
			var want checkSums
			for _, j := range c.recent[:c.filled] {
				want.add(j, 1)
			}
			if want.n != c.sums.n || want.pos != c.sums.pos || want.m != c.sums.m || want.in != c.sums.in {
				t.Fatalf("kind %v, pair %d: counts %+v, want %+v", kind, i, c.sums, want)
			}
			for d := range 10 {
				if math.Abs(want.lo[d]-c.sums.lo[d]) > 1e-9 || math.Abs(want.hi[d]-c.sums.hi[d]) > 1e-9 {
					t.Fatalf("kind %v, pair %d, decile %d: ends %v %v, want %v %v", kind, i, d, c.sums.lo[d], c.sums.hi[d], want.lo[d], want.hi[d])
				}
			}
			if math.Abs(want.width-c.sums.width) > 1e-9 {
				t.Fatalf("kind %v, pair %d: width %v, want %v", kind, i, c.sums.width, want.width)
			}
		}
	}
}

// BenchmarkJudgeSections times, per event, the two sections every applier
// of an instance queues at once per run (Shard.EndRun): a model's
// calibration window (calibration.add under its lock, the refit's copy of
// the window every 100 pairs included) and its prequential quality
// (judgeLocked under judgeMu, the gauges once per run), each in runs of 64
// events of a linear MAM's kind. With many appliers the longer of the two
// bounds the events per second they can judge together (before the
// calibration had its own lock, their sum did). 0 allocs/op.
func BenchmarkJudgeSections(b *testing.B) {
	m, _ := online.NewMAM(8, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 8, Calibration: CalibrationConfig{Window: 2000, Every: 100}},
		[]NamedModel{{Name: "mam", Model: m, Fingerprint: "fp"}}, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	instanceShard(b, e) // binds the judge to instance scope (the live bound check on)
	d := e.defs[0]
	rng := rand.New(rand.NewPCG(5, 6))
	const run = 64
	preds := make([]online.Prediction, 4096)
	ys := make([]float64, len(preds))
	for i := range preds {
		s := rng.NormFloat64()
		preds[i] = online.Prediction{Score: s, Label: 1, HasBound: true, MistakeBound: 0.5, Delta: 0.05, N: int64(i)}
		if s < 0 {
			preds[i].Label = -1
		}
		ys[i] = float64(1 - 2*rng.IntN(2))
	}
	pub := wire.Calibrated{HasCal: true, CalP: 0.6, CalLower: 0.55, CalUpper: 0.65, CalN: 2000}
	b.Run("calibration", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%run == 0 {
				d.cal.mu.Lock()
			}
			k := i & (len(preds) - 1)
			d.cal.add(preds[k], ys[k], ys[k], &pub)
			if i++; i%run == 0 {
				d.cal.mu.Unlock()
			}
		}
		if i%run != 0 {
			d.cal.mu.Unlock()
		}
	})
	b.Run("quality", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%run == 0 {
				d.judgeMu.Lock()
			}
			k := i & (len(preds) - 1)
			d.judgeLocked(preds[k], preds[k], ys[k], ys[k], d.bound)
			if i++; i%run == 0 {
				d.judged()
				d.judgeMu.Unlock()
			}
		}
		if i%run != 0 {
			d.judged()
			d.judgeMu.Unlock()
		}
	})
}

// With calibration.min_interval, a burst of pairs faster than the interval
// costs one refit when it begins and one when the interval has passed, and
// that later one fits the burst's last pairs, without waiting for more
// events; then nothing runs until pairs come again. Without it, every
// `every` pairs refit (each waited for here, as a slower stream would).
func TestCalibrationMinInterval(t *testing.T) {
	const window, every, pairs = 50, 10, 1000
	const gap = 200 * time.Millisecond
	refits := func(c *calibration) int { return int(testutil.ToFloat64(c.met.refits)) }
	// The burst: labels alternate, except the last window, all positive,
	// so that a table fitted on it counts window positives.
	add := func(c *calibration, i int) {
		y := float64(i % 2)
		if i >= pairs-window {
			y = 1
		}
		c.mu.Lock()
		c.add(online.Prediction{Score: float64(i%7) - 3, Label: 1}, y, y, nil)
		c.mu.Unlock()
	}

	met := newEngineMetrics(prometheus.NewRegistry())
	c := newCalibration("m", online.Traits{Kind: online.Classifier}, CalibrationConfig{Window: window, Every: every, Delta: 0.1, MinInterval: gap}, met)
	start := time.Now()
	for i := range pairs {
		add(c, i)
	}
	burst := time.Since(start)
	for c.fitting.Load() {
		runtime.Gosched()
	}
	// A loaded machine may take longer than gap over the burst: then a
	// refit per gap it took.
	if got, most := refits(c), 1+int(burst/gap); got < 1 || got > most {
		t.Fatalf("%d refits after a burst of %v, want 1 to %d", got, burst, most)
	}
	deadline := time.Now().Add(50 * gap)
	for c.va.Load() == nil || c.va.Load().Positives() != window {
		if time.Now().After(deadline) {
			t.Fatalf("the burst's last %d pairs not fitted %v after it (%d refits; the table: %d pairs, %d positive)",
				window, 50*gap, refits(c), c.va.Load().N(), c.va.Load().Positives())
		}
		time.Sleep(gap / 20)
	}
	n := refits(c)
	time.Sleep(3 * gap)
	if got := refits(c); got != n {
		t.Fatalf("%d refits without new pairs, want none after the late one (%d)", got-n, n)
	}

	met = newEngineMetrics(prometheus.NewRegistry())
	c = newCalibration("m", online.Traits{Kind: online.Classifier}, CalibrationConfig{Window: window, Every: every, Delta: 0.1}, met)
	for i := range pairs {
		add(c, i)
		for c.fitting.Load() {
			runtime.Gosched()
		}
	}
	if got := refits(c); got != pairs/every {
		t.Fatalf("without min_interval: %d refits, want one every %d pairs, %d", got, every, pairs/every)
	}
}

// TestVATableText: a record whose probability is the table's rendered
// cell (CalText) is byte for byte the record whose floats are formatted
// when it is encoded, for scores in every cell, at the thresholds, beyond
// both ends and NaN.
func TestVATableText(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var pairs []calibrate.Pair
	for range 2000 {
		s := rng.NormFloat64()
		pairs = append(pairs, calibrate.Pair{Score: s, Y: b2f(s+0.8*rng.NormFloat64() > 0)})
	}
	vt := newVATable(calibrate.FitVennAbers(pairs), true)
	if vt.Cells() < 50 {
		t.Fatalf("%d cells", vt.Cells())
	}
	scores := []float64{math.Inf(-1), -1e300, math.NaN(), 1e300, math.Inf(1)}
	for _, p := range pairs[:500] {
		scores = append(scores, p.Score, math.Nextafter(p.Score, 0), rng.NormFloat64()*3)
	}
	cells := map[int]bool{}
	var fc wire.FloatCache
	for _, sc := range scores {
		var with wire.Calibrated
		vt.certainty(sc, &with)
		cells[vt.Cell(sc)] = true
		if sc == sc && len(with.CalText) == 0 {
			t.Fatalf("score %v: no rendered cell", sc)
		}
		without := with
		without.CalText = nil
		p, lo, hi := vt.Probability(sc)
		if with.CalP != p || with.CalLower != lo || with.CalUpper != hi || with.CalN != int64(vt.N()) || !with.HasCal {
			t.Fatalf("score %v: %+v, want %v [%v, %v]", sc, with, p, lo, hi)
		}
		a := fc.AppendScore(nil, &wire.Score{ID: []byte("e"), Model: "m", Calibrated: with})
		b := fc.AppendScore(nil, &wire.Score{ID: []byte("e"), Model: "m", Calibrated: without})
		if string(a) != string(b) {
			t.Fatalf("score %v:\n%s\n%s", sc, a, b)
		}
	}
	if len(cells) < vt.Cells()/2 {
		t.Errorf("%d of %d cells tried", len(cells), vt.Cells())
	}
	// A table the refit did not render (it replaced one within
	// renderAfter): the same values, no text.
	bare := newVATable(vt.VennAbers, false)
	for _, sc := range scores {
		var r, want wire.Calibrated
		bare.certainty(sc, &r)
		vt.certainty(sc, &want)
		if r.CalText != nil || r.CalP != want.CalP || r.CalLower != want.CalLower || r.CalUpper != want.CalUpper || r.CalN != want.CalN || !r.HasCal {
			t.Fatalf("score %v, not rendered: %+v, want %+v", sc, r, want)
		}
	}
}

// BenchmarkVATableEncode encodes a calibrated classifier's record with a
// 2 000-pair Venn–Abers table, scores over its cells: floats (the table
// not rendered: p, lower and upper formatted, most missing the encoder's
// FloatCache) / text (the cells rendered by the refit, copied); render:
// the refit's rendering of the table. 0 allocs/op for the encodings.
func BenchmarkVATableEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pairs []calibrate.Pair
	for range 2000 {
		s := rng.NormFloat64()
		pairs = append(pairs, calibrate.Pair{Score: s, Y: b2f(s+0.8*rng.NormFloat64() > 0)})
	}
	t := calibrate.FitVennAbers(pairs)
	scores := make([]float64, 1024)
	for i := range scores {
		scores[i] = rng.NormFloat64()
	}
	for _, render := range []bool{false, true} {
		name := "floats"
		if render {
			name = "text"
		}
		vt := newVATable(t, render)
		b.Run(name, func(b *testing.B) {
			var fc wire.FloatCache
			s := wire.Score{ID: []byte("e-123456"), Key: []byte("user-42"), Model: "mam", HasBound: true, MistakeBound: 0.4, Delta: 0.05, N: 1000}
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Score = scores[i&1023]
				s.Calibrated = wire.Calibrated{}
				vt.certainty(s.Score, &s.Calibrated)
				buf = fc.AppendScore(buf[:0], &s)
				i++
			}
		})
	}
	b.Run("render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			newVATable(t, true)
		}
	})
}
