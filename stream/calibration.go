package stream

import (
	"math"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/stream/wire"
)

// Calibrated certainty. Every labelled event a model is judged on gives a
// prequential pair — the score published before the model learned, and
// the label — to the model's calibration window (all shards' and keys'
// pairs together). Every CalibrationConfig.Every pairs a background
// goroutine fits the window's pairs of the later half of the stream so far
// (calibrate.Window.CopyRecentTo: a model still learning fast scores its
// first events less well than its later ones, and a table fitted on them
// is underconfident): classifiers an inductive Venn–Abers table
// (online/calibrate), other kinds a split-conformal table of the absolute
// residuals |y − score|; the table is swapped in atomically and every
// score published after carries certainty.probability {p, lower, upper,
// n} or certainty.interval {lower, upper, level}. A lookup is a binary
// search (Venn–Abers) or O(1) (conformal), without allocation.

// CalibrationConfig configures calibration (EngineConfig.Calibration).
type CalibrationConfig struct {
	Window int     // pairs per model (0 = calibration off)
	Every  int     // labelled pairs between refits
	Delta  float64 // conformal intervals: level 1 − Delta
}

// calibration is a model's calibration state, shared by the shards.
type calibration struct {
	kind  online.Kind
	level float64
	every int64
	met   calMetrics

	// Guarded by the model's judgeMu.
	win    *calibrate.Window
	recent []judged // the last len(recent) judged events' published certainty, for the live check
	next   int
	filled int
	buf    []calibrate.Pair // the window's copy a fit reads (owned by it while fitting)
	fitter calibrate.Fitter // the fits' working memory (owned by the running fit)

	fitting atomic.Bool
	va      atomic.Pointer[calibrate.VennAbers]
	cf      atomic.Pointer[calibrate.Conformal]
}

// judged is a judged event's certainty as it would have been published
// and its label.
type judged struct {
	p, lo, hi, y float64
	ok           bool
}

type calMetrics struct {
	observed, lower, upper, count []prometheus.Gauge // per probability decile
	width, coverage, pairs        prometheus.Gauge
}

func newCalibration(name string, kind online.Kind, cfg CalibrationConfig, met *engineMetrics) *calibration {
	c := &calibration{kind: kind, level: 1 - cfg.Delta, every: int64(cfg.Every),
		win: calibrate.NewWindow(cfg.Window), recent: make([]judged, cfg.Window)}
	c.met.width = met.calWidth.WithLabelValues(name)
	c.met.pairs = met.calPairs.WithLabelValues(name)
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

// certainty sets the calibrated certainty of score p in r.
func (c *calibration) certainty(p *online.Prediction, r *wire.Score) {
	if c.kind == online.Classifier {
		if t := c.va.Load(); t != nil {
			r.CalP, r.CalLower, r.CalUpper = t.Probability(p.Score)
			r.CalN, r.HasCal = int64(t.N()), true
		}
		return
	}
	if t := c.cf.Load(); t != nil {
		lo, hi, ok := t.Interval(c.point(p), c.level)
		if ok {
			r.IntLower, r.IntUpper, r.IntLevel, r.HasInterval = lo, hi, c.level, true
		}
	}
}

// point is the prediction a conformal interval is centred on: an ordinal
// model's predicted level (its score is on another scale), the score of
// the others.
func (c *calibration) point(p *online.Prediction) float64 {
	if c.kind == online.Ordinal {
		return float64(p.Label)
	}
	return p.Score
}

// add records the judged pair (p published, label y); the model's judgeMu
// is held.
func (c *calibration) add(p online.Prediction, y float64) {
	if p.Label == 0 && p.Score == 0 && c.kind == online.Classifier {
		return // "no decision": an empty model, or a refitted one before its first fit
	}
	j := judged{y: y}
	if c.kind == online.Classifier {
		if t := c.va.Load(); t != nil {
			j.p, j.lo, j.hi = t.Probability(p.Score)
			j.ok = true
		}
		c.win.Add(p.Score, y > 0)
	} else {
		if t := c.cf.Load(); t != nil {
			j.lo, j.hi, j.ok = t.Interval(c.point(&p), c.level)
		}
		c.win.AddResidual(c.point(&p), y)
	}
	c.recent[c.next] = j
	c.next = (c.next + 1) % len(c.recent)
	c.filled = min(c.filled+1, len(c.recent))
	if c.win.Added()%c.every != 0 || c.win.Len() == 0 {
		return
	}
	c.check()
	if !c.fitting.CompareAndSwap(false, true) {
		return // the previous fit is still running: the next turn
	}
	c.buf = c.win.CopyRecentTo(c.buf[:0])
	go c.fit(c.buf, c.win.Added()-int64(len(c.buf)))
}

// fit fits pairs (a copy of the window's recent pairs, the first of them
// the first-th the window was given) and swaps the table in. The fitter
// updates the last fit's sorted scores with the pairs that left and entered
// since, rather than sorting them all again.
func (c *calibration) fit(pairs []calibrate.Pair, first int64) {
	defer c.fitting.Store(false)
	if c.kind == online.Classifier {
		c.va.Store(c.fitter.VennAbersAt(pairs, first))
	} else {
		c.cf.Store(c.fitter.ConformalAt(pairs, first))
	}
}

// check exports the live check over the recent judged events: per
// decile of the probability, the observed rate of positives and the mean
// interval; for intervals, their coverage and mean width.
func (c *calibration) check() {
	c.met.pairs.Set(float64(c.win.Len()))
	if c.kind == online.Classifier {
		var n, pos, lo, hi [10]float64
		var width, m float64
		for _, j := range c.recent[:c.filled] {
			if !j.ok {
				continue
			}
			d := min(9, int(j.p*10))
			n[d]++
			if j.y > 0 {
				pos[d]++
			}
			lo[d] += j.lo
			hi[d] += j.hi
			width += j.hi - j.lo
			m++
		}
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
	var in, width, m float64
	for _, j := range c.recent[:c.filled] {
		if !j.ok {
			continue
		}
		if j.lo <= j.y && j.y <= j.hi {
			in++
		}
		width += j.hi - j.lo
		m++
	}
	if m > 0 {
		c.met.coverage.Set(in / m)
		c.met.width.Set(width / m)
	}
}
