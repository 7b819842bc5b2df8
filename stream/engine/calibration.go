package engine

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/stream/internal/stage"
	"github.com/streamer/streamer/stream/wire"
)

// Calibrated certainty. Every labelled event a model is judged on gives a
// prequential pair — the score published before the model learned, and
// the label — to the model's calibration window (all shards' and keys'
// pairs together). Every CalibrationConfig.Every pairs (but not sooner
// than CalibrationConfig.MinInterval after the last began: see refit) a
// background goroutine fits the window's pairs of the later half of the
// stream so far (calibrate.Window.CopyRecentTo: a model still learning
// fast scores its first events less well than its later ones, and a
// table fitted on them is underconfident): classifiers an inductive Venn–Abers table
// (online/calibrate), other kinds a split-conformal table of the absolute
// residuals |y − score|; the table is swapped in atomically and every
// score published after carries certainty.probability {p, lower, upper,
// n} or certainty.interval {lower, upper, level}. A lookup is a binary
// search (Venn–Abers) or O(1) (conformal), without allocation.
//
// Only decisions enter the window (modelDef.decided: not an empty
// classifier's 0, an ordinal model's level 0, a refitted model's score
// before its first fit, nor a value model's before its first value), and
// only decisions get an interval. A regression model's interval is centred
// on its value (Prediction.Value) when it publishes one. Intervals are
// clipped to the labels' range: an ordinal model's levels [1, m], another
// kind's [min, max] of the labels the calibration had seen at its last
// refit.
//
// Ordinal models also publish the label they expect: the mean label as
// sent (before NamedModel.Label binned it) of the window's pairs with the
// same predicted level, the value that minimises the expected squared
// error given that level (a level without pairs takes the nearest level
// that has some). The per-level sums are kept as pairs enter and leave the
// window (exactly recomputed once per pass over it), and a table of the
// means is swapped in with each refit: the lookup is O(1).

// CalibrationConfig configures calibration (Config.Calibration).
type CalibrationConfig struct {
	Window int     // pairs per model (0 = calibration off)
	Every  int     // labelled pairs between refits
	Delta  float64 // conformal intervals: level 1 − Delta
	// MinInterval is the least time from one refit's start to the
	// next's (0: none): a refit due sooner waits for it, and then fits
	// the window as it is then.
	MinInterval time.Duration
	// Labels is the context whose profiler labels the refits carry beside
	// stage=calibration (package stage); nil: none.
	Labels context.Context
}

// calibration is a model's calibration state, shared by the shards.
type calibration struct {
	kind   online.Kind
	levels int // ordinal: m (0: not known, the largest level seen)
	level  float64
	every  int64
	gap    time.Duration // CalibrationConfig.MinInterval
	met    calMetrics

	// Guarded by mu, which the judges take around add: the model's
	// judgeMu guards its quality, not these.
	mu     sync.Mutex
	win    *calibrate.Window
	recent []judged // the last len(recent) judged events' published certainty, for the live check
	next   int
	filled int
	sums   checkSums        // of recent's entries, kept as they enter and leave
	buf    []calibrate.Pair // the window's copy a fit reads (owned by it while fitting)
	fitter calibrate.Fitter // the fits' working memory (owned by the running fit)
	lo, hi float64          // the labels' range (ordinal: of the levels)
	seen   bool             // lo, hi hold a label
	means  *levelMeans      // ordinal: the raw labels by predicted level
	began  time.Time        // when the last refit began (zero: none yet)
	late   bool             // a refit waits for gap to pass (refitLate's timer is set)

	labels context.Context // of the refits' goroutines (package stage)

	fitting atomic.Bool
	va      atomic.Pointer[vaTable]
	cf      atomic.Pointer[conformalTable]
	exp     atomic.Pointer[[]float64] // ordinal: the expected label by level (index 0 unused)
}

// vaTable is a fitted Venn–Abers table, usually with each cell's record
// member rendered (wire.AppendProbability) by the refit, so that encoding
// a record copies it: the cells' floats, a few hundred distinct triples,
// would mostly miss an encoder's FloatCache and cost three shortest
// formattings a record.
type vaTable struct {
	*calibrate.VennAbers
	text []byte  // the cells' members, one after the other (nil: not rendered)
	end  []int32 // cell k's is text[end[k-1]:end[k]] (end[-1] = 0)
}

// Rendering a table of 2 000 pairs (about 400 cells) costs about 70 µs
// in the refit's goroutine, and saves an applier about 75 ns a record
// (the three floats' shortest forms, most of which miss the encoder's
// cache): BenchmarkVATableEncode. It pays for a table that serves more
// than about 900 records, and it moves that work off the appliers. A
// refit renders when the table it replaces served at least renderAfter:
// with calibration.min_interval (10 ms) every table does; with
// min_interval 0 at a high rate, refits every 100 pairs come too fast,
// and their records format the floats as before.
const renderAfter = 5 * time.Millisecond

// newVATable returns t, with its cells' members rendered if render is
// set.
func newVATable(t *calibrate.VennAbers, render bool) *vaTable {
	vt := &vaTable{VennAbers: t}
	if !render {
		return vt
	}
	n := int64(t.N())
	vt.text, vt.end = make([]byte, 0, 96*t.Cells()), make([]int32, t.Cells()) // about 90 bytes a cell
	for k := range vt.end {
		p, lo, hi := t.CellValues(k)
		vt.text = wire.AppendProbability(vt.text, p, lo, hi, n)
		vt.end[k] = int32(len(vt.text))
	}
	return vt
}

// certainty sets r's probability for score: its cell's values, and its
// text when the table is rendered (none for a NaN score: its values are
// Probability's).
func (t *vaTable) certainty(score float64, r *wire.Calibrated) {
	r.CalN, r.HasCal = int64(t.N()), true
	k := t.Cell(score)
	if k < 0 {
		r.CalP, r.CalLower, r.CalUpper = t.Probability(score)
		return
	}
	r.CalP, r.CalLower, r.CalUpper = t.CellValues(k)
	if t.end != nil {
		start := int32(0)
		if k > 0 {
			start = t.end[k-1]
		}
		r.CalText = t.text[start:t.end[k]:t.end[k]]
	}
}

// conformalTable is a fitted conformal table with the range its intervals
// are clipped to.
type conformalTable struct {
	*calibrate.Conformal
	lo, hi float64
}

// interval is the table's interval around pred at level, clipped.
func (t *conformalTable) interval(pred, level float64) (lo, hi float64, ok bool) {
	lo, hi, ok = t.Interval(pred, level)
	if ok {
		lo, hi = min(max(lo, t.lo), t.hi), max(min(hi, t.hi), t.lo)
	}
	return lo, hi, ok
}

// judged is a judged event's certainty as it would have been published
// and its label.
type judged struct {
	p, lo, hi, y float64
	ok           bool
}

// checkSums are the live check's sums over the ring of judged events
// (calibration.recent): of those with a certainty (ok), the count m and
// the intervals' total width; a classifier's count, positives and ends
// per decile of p; another kind's labels inside their interval (in).
type checkSums struct {
	n, pos, lo, hi [10]float64
	width, m, in   float64
}

// add adds j to the sums k times (1 as it enters the ring, −1 as it
// leaves).
func (s *checkSums) add(j judged, k float64) {
	if !j.ok {
		return
	}
	d := min(9, max(0, int(j.p*10)))
	// The label's side and whether it is inside its interval are as
	// random as the labels: each adds k or 0, without a branch.
	s.n[d] += k
	s.pos[d] += k * b2f(j.y > 0)
	s.lo[d] += k * j.lo
	s.hi[d] += k * j.hi
	s.width += k * (j.hi - j.lo)
	s.m += k
	s.in += k * b2f(j.lo <= j.y) * b2f(j.y <= j.hi)
}

// b2f is 1 when b holds, else 0: a select without a branch (as b2i in
// the wire and calibrate packages).
func b2f(b bool) float64 {
	var i int
	if b {
		i = 1
	}
	return float64(i)
}

type calMetrics struct {
	observed, lower, upper, count []prometheus.Gauge // per probability decile
	width, coverage, pairs        prometheus.Gauge
	refits                        prometheus.Counter
}

func newCalibration(name string, t online.Traits, cfg CalibrationConfig, met *engineMetrics) *calibration {
	kind := t.Kind
	c := &calibration{kind: kind, levels: t.Levels, level: 1 - cfg.Delta, every: int64(cfg.Every), gap: cfg.MinInterval, labels: cfg.Labels,
		win: calibrate.NewWindow(cfg.Window), recent: make([]judged, cfg.Window)}
	if kind == online.Ordinal {
		c.means = newLevelMeans(cfg.Window, t.Levels)
	}
	c.met.width = met.calWidth.WithLabelValues(name)
	c.met.pairs = met.calPairs.WithLabelValues(name)
	c.met.refits = met.calRefits.WithLabelValues(name)
	if kind == online.Classifier {
		for d := range 10 {
			ds := strconv.Itoa(d)
			c.met.observed = append(c.met.observed, met.calObserved.WithLabelValues(name, ds))
			c.met.lower = append(c.met.lower, met.calLower.WithLabelValues(name, ds))
			c.met.upper = append(c.met.upper, met.calUpper.WithLabelValues(name, ds))
			c.met.count = append(c.met.count, met.calCount.WithLabelValues(name, ds))
		}
	} else {
		c.met.coverage = met.calCoverage.WithLabelValues(name)
	}
	return c
}

// certainty sets the calibrated certainty of prediction p in r; for an
// ordinal model also its expected label, in r and in p (Value: the judge
// reads it there). The caller passes decisions only (modelDef.decided),
// but for classifiers.
func (c *calibration) certainty(p *online.Prediction, r *wire.Calibrated) (expected float64, ok bool) {
	if c.kind == online.Classifier {
		if t := c.va.Load(); t != nil {
			t.certainty(p.Score, r)
		}
		return 0, false
	}
	if t := c.cf.Load(); t != nil {
		lo, hi, ok := t.interval(c.point(p), c.level)
		if ok {
			r.IntLower, r.IntUpper, r.IntLevel, r.HasInterval = lo, hi, c.level, true
		}
	}
	if c.kind == online.Ordinal && p.Label > 0 {
		if e := c.exp.Load(); e != nil {
			x := (*e)[min(p.Label, len(*e)-1)]
			p.Value, p.HasValue = x, true
			return x, true
		}
	}
	return 0, false
}

// certify sets the calibrated certainty of the event's predictions in
// their records (Shard.ApplyAt's phase after the holders): of decisions,
// and of a classifier's every prediction; an ordinal model's expected
// label goes to its prediction's Value too, for the judge.
func (s *Shard) certify() {
	for i, m := range s.models {
		c, r := m.def.cal, &s.recs[i]
		if c == nil || !(s.decided[i] || m.def.traits.Kind == online.Classifier) {
			continue
		}
		if x, ok := c.certainty(&s.preds[i], &r.Calibrated); ok {
			r.Expected, r.HasExpected = x, true
		}
	}
}

// point is the prediction a conformal interval is centred on: an ordinal
// model's predicted level (its score is on another scale), a regression
// model's value when it has one, the score of the others.
func (c *calibration) point(p *online.Prediction) float64 {
	switch {
	case c.kind == online.Ordinal:
		return float64(p.Label)
	case c.kind == online.Regression && p.HasValue:
		return p.Value
	}
	return p.Score
}

// add records the judged pair (p, the model's own decision, and label y;
// raw: the label as sent; pub: the certainty published with p, nil when
// not known, then the current table's); c.mu is held.
func (c *calibration) add(p online.Prediction, y, raw float64, pub *wire.Calibrated) {
	j := judged{y: y}
	if !c.seen || y < c.lo {
		c.lo = y
	}
	if !c.seen || y > c.hi {
		c.hi = y
	}
	c.seen = true
	if c.means != nil {
		c.means.add(p.Label, raw)
	}
	if c.kind == online.Classifier {
		switch t := c.va.Load(); {
		case pub != nil:
			j.p, j.lo, j.hi, j.ok = pub.CalP, pub.CalLower, pub.CalUpper, pub.HasCal
		case t != nil:
			j.p, j.lo, j.hi = t.Probability(p.Score)
			j.ok = true
		}
		c.win.Add(p.Score, y > 0)
	} else {
		switch t := c.cf.Load(); {
		case pub != nil:
			j.lo, j.hi, j.ok = pub.IntLower, pub.IntUpper, pub.HasInterval
		case t != nil:
			j.lo, j.hi, j.ok = t.interval(c.point(&p), c.level)
		}
		c.win.AddResidual(c.point(&p), y)
	}
	if c.filled == len(c.recent) {
		c.sums.add(c.recent[c.next], -1) // it leaves the ring
	}
	c.recent[c.next] = j
	c.sums.add(j, 1)
	c.next = (c.next + 1) % len(c.recent)
	c.filled = min(c.filled+1, len(c.recent))
	if c.next == 0 { // once per pass over the ring: exactly, without the drift of the sums
		c.sums = checkSums{}
		for _, j := range c.recent[:c.filled] {
			c.sums.add(j, 1)
		}
	}
	if c.win.Added()%c.every != 0 || c.win.Len() == 0 {
		return
	}
	c.check()
	if c.means != nil {
		c.exp.Store(c.means.table())
	}
	c.refit(time.Now())
}

// refit starts a fit of the window in the background (c.mu held), unless
// the last began less than gap ago or is still running: then a timer
// starts it once gap has passed (refitLate), on the window as it is then,
// so that a burst of events costs one refit per gap, and its last pairs
// are fitted without waiting for more. At a high rate, a window of 2 000 pairs turns over
// in milliseconds: refitting every 100 pairs then cost about 5% of the
// process's CPU (bench, linear, two cores: 0.26 µs per event; 0.11 with
// 10 ms between refits) for tables no reader could tell apart. Without
// gap, a fit still running when one is due skips that turn.
func (c *calibration) refit(now time.Time) {
	if c.gap > 0 {
		wait := c.gap - now.Sub(c.began) // < 0 before the first (Sub saturates)
		if c.fitting.Load() {
			wait = c.gap
		}
		if wait > 0 {
			if !c.late {
				c.late = true
				time.AfterFunc(wait, c.refitLate)
			}
			return
		}
	}
	if !c.fitting.CompareAndSwap(false, true) {
		return // the previous fit is still running: the next turn
	}
	render := now.Sub(c.began) >= renderAfter // the table this one replaces served long enough (the first: yes)
	c.began = now
	pairs, first, lo, hi := c.fitInput()
	go func() {
		stage.Set(c.labels, "stage", "calibration")
		c.fit(pairs, first, lo, hi, render)
	}()
}

// fitInput copies the window's recent pairs to c.buf for a fit (c.mu
// held) and returns them, the index in the stream of the first, and the
// range its intervals are clipped to.
func (c *calibration) fitInput() (pairs []calibrate.Pair, first int64, lo, hi float64) {
	c.buf = c.win.CopyRecentTo(c.buf[:0])
	lo, hi = c.lo, c.hi
	if c.kind == online.Ordinal {
		lo, hi = 1, max(hi, float64(c.levels))
	}
	return c.buf, c.win.Added() - int64(len(c.buf)), lo, hi
}

// refitLate is the refit that waited for gap to pass.
func (c *calibration) refitLate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.late = false
	c.refit(time.Now())
}

// fit fits pairs (a copy of the window's recent pairs, the first of them
// the first-th the window was given) and swaps the table in, a Venn–Abers
// table with its cells rendered when render is set. The fitter updates the
// last fit's sorted scores with the pairs that left and entered since,
// rather than sorting them all again.
func (c *calibration) fit(pairs []calibrate.Pair, first int64, lo, hi float64, render bool) {
	defer c.fitting.Store(false)
	if c.kind == online.Classifier {
		c.va.Store(newVATable(c.fitter.VennAbersAt(pairs, first), render))
	} else {
		c.cf.Store(&conformalTable{Conformal: c.fitter.ConformalAt(pairs, first), lo: lo, hi: hi})
	}
	c.met.refits.Inc()
}

// levelMeans keeps the labels as sent of an ordinal model's last window
// decided pairs by predicted level: a ring of (level, label) and the sum
// and count per level, updated as pairs enter and leave.
type levelMeans struct {
	lv     []int32
	raw    []float64
	next   int
	n      int
	sum    []float64 // per level (index 0 unused)
	cnt    []int64
	lo, hi float64 // the labels' range
}

func newLevelMeans(window, levels int) *levelMeans {
	return &levelMeans{lv: make([]int32, window), raw: make([]float64, window),
		sum: make([]float64, levels+1), cnt: make([]int64, levels+1)}
}

// add records a pair with predicted level l ≥ 1 and label raw. O(1); it
// allocates only for a level beyond those known.
func (m *levelMeans) add(l int, raw float64) {
	if l < 1 {
		return
	}
	if l >= len(m.sum) {
		m.sum = append(m.sum, make([]float64, l+1-len(m.sum))...)
		m.cnt = append(m.cnt, make([]int64, l+1-len(m.cnt))...)
	}
	if m.n == 0 || raw < m.lo {
		m.lo = raw
	}
	if m.n == 0 || raw > m.hi {
		m.hi = raw
	}
	if m.n == len(m.lv) { // the oldest leaves
		o := m.lv[m.next]
		m.sum[o] -= m.raw[m.next]
		m.cnt[o]--
	} else {
		m.n++
	}
	m.lv[m.next], m.raw[m.next] = int32(l), raw
	m.sum[l] += raw
	m.cnt[l]++
	if m.next++; m.next == len(m.lv) {
		m.next = 0
		m.resum() // once per pass: the running sums lose nothing to rounding
	}
}

// resum recomputes the sums from the ring.
func (m *levelMeans) resum() {
	clear(m.sum)
	for i := range m.n {
		m.sum[m.lv[i]] += m.raw[i]
	}
}

// table returns the expected label per level (index 0 unused): the mean
// of the level's labels, or of the nearest level's that has some (ties:
// the lower), within the labels' range; nil before the first pair.
func (m *levelMeans) table() *[]float64 {
	if m.n == 0 {
		return nil
	}
	t := make([]float64, len(m.sum))
	near := make([]int, len(m.sum)) // the nearest level with pairs at or below, then the nearest overall
	last := -1
	for l := 1; l < len(t); l++ {
		if m.cnt[l] > 0 {
			last = l
		}
		near[l] = last
	}
	last = -1
	for l := len(t) - 1; l >= 1; l-- {
		if m.cnt[l] > 0 {
			last = l
		}
		if b := near[l]; b < 0 || (last >= 0 && last-l < l-b) {
			near[l] = last
		}
	}
	for l := 1; l < len(t); l++ {
		k := near[l]
		t[l] = min(max(m.sum[k]/float64(m.cnt[k]), m.lo), m.hi)
	}
	return &t
}

// check exports the live check over the recent judged events: per
// decile of the probability, the observed rate of positives and the mean
// interval; for intervals, their coverage and mean width.
func (c *calibration) check() {
	c.met.pairs.Set(float64(c.win.Len()))
	n, pos, lo, hi := &c.sums.n, &c.sums.pos, &c.sums.lo, &c.sums.hi
	width, m := c.sums.width, c.sums.m
	if c.kind == online.Classifier {
		for d := range 10 {
			c.met.count[d].Set(n[d])
			if n[d] == 0 {
				c.met.observed[d].Set(math.NaN())
				c.met.lower[d].Set(math.NaN())
				c.met.upper[d].Set(math.NaN())
				continue
			}
			c.met.observed[d].Set(pos[d] / n[d])
			c.met.lower[d].Set(lo[d] / n[d])
			c.met.upper[d].Set(hi[d] / n[d])
		}
		if m > 0 {
			c.met.width.Set(width / m)
		}
		return
	}
	if m > 0 {
		c.met.coverage.Set(c.sums.in / m)
		c.met.width.Set(width / m)
	}
}
