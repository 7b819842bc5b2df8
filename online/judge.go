package online

import "math"

// JudgeCheckEvery is the number of labelled events between the O(window)
// checks of a Judge: Kendall's τ, the root mean squared error and the
// bound's validity.
const JudgeCheckEvery = 100

// Judge keeps a model's prequential quality over a window of its recent
// labelled events: each prediction it is given was published before the
// model learned from the event (test-then-train), so every measure is out
// of sample. It is the one judge of the project: the service exports it to
// Prometheus and `streamer eval` writes it to its report.
//
// What is measured follows the model's Traits:
//
//   - Classifier: accuracy over the window (a prediction of 0, "no
//     decision", is a mistake), the running count of mistakes, and the
//     accuracy of the version serving now since it was swapped in;
//   - Ordinal: mean absolute level error and zero-one error over the
//     window, and Kendall's τ-b of score against level (every
//     JudgeCheckEvery labelled events, or when asked: DeferTau);
//   - Ranking: Kendall's τ-b of score against the real target;
//   - Regression: τ-b and the root mean squared error of the predicted
//     value (Prediction.Value when HasValue, else the score; a model that
//     publishes values, Traits.Value, is not judged before it has one);
//   - Ordinal with values (AddValue: the service's "expected" label), the
//     root mean squared error of those values against the raw labels;
//   - with a bound (Traits.Bound), the live check of the bound: every
//     JudgeCheckEvery labelled events the observed fraction of the window's
//     margins y·f ≤ −ρ is compared with the model's bound(ρ) on the grid
//     ρ = 0, 0.1, …, 0.9, and every ρ where it is exceeded is a violation.
//
// Add is O(1) and does not allocate, except on a check (the first τ
// allocates its scratch). Not safe for concurrent use.
type Judge struct {
	traits Traits

	preq *Prequential   // Classifier
	ord  *OrdinalWindow // Ordinal
	sw   *scoreWindow   // Ranking, Regression
	vw   *scoreWindow   // Ordinal: AddValue's (value, raw label) pairs (nil before the first)
	win  int

	bounds   *BoundMonitor // Traits.Bound
	limits   []float64     // bound(ρ) at the last check
	boundBuf []float64

	labelled                  int64
	mistakes                  int64
	deferTau                  bool // DeferTau: τ computed when asked, not at the checks
	version                   int64
	versionN, versionRight    int64
	tau, rmse                 float64
	violations, violationsAll int
}

// NewJudge returns a judge of a model with traits t over the last window
// labelled events (window ≥ 1; 0 means 1000).
func NewJudge(t Traits, window int) *Judge {
	if window <= 0 {
		window = 1000
	}
	j := &Judge{traits: t, tau: math.NaN(), rmse: math.NaN(), win: window}
	switch t.Kind {
	case Ordinal:
		j.ord = NewOrdinalWindow(window)
	case Ranking, Regression:
		j.sw = newScoreWindow(window)
	default:
		j.preq = NewPrequential(window)
	}
	if t.Bound {
		grid := DefaultBoundGrid()
		j.bounds = NewBoundMonitor(window, grid)
		j.limits = make([]float64, len(grid))
		for i := range j.limits {
			j.limits[i] = math.NaN()
		}
	}
	return j
}

// Traits returns the traits the judge follows.
func (j *Judge) Traits() Traits { return j.traits }

// Add records one labelled event: p is the prediction published for it
// before the model learned from it, y its label as the model maps it
// (Label). b is the model's bound, consulted on a check (nil: none). It
// reports whether a check ran (τ, RMSE, bound: every JudgeCheckEvery
// labelled events).
func (j *Judge) Add(p Prediction, y float64, b Bounder) (checked bool) {
	j.labelled++
	checked = j.labelled%JudgeCheckEvery == 0
	switch {
	case j.ord != nil:
		j.ord.Add(p.Score, p.Label, int(math.Round(y)))
		if checked {
			if !j.deferTau {
				j.tau = j.ord.KendallTau()
			}
			if j.vw != nil {
				j.rmse = j.vw.rmse()
			}
		}
	case j.sw != nil:
		// A model that publishes values had none to publish before its
		// first label: nothing to judge.
		if !j.traits.Value || p.HasValue {
			v := p.Score
			if p.HasValue {
				v = p.Value
			}
			j.sw.addValue(p.Score, v, y)
		}
		if checked {
			if !j.deferTau {
				j.tau = j.sw.kendallTau()
			}
			if j.traits.Kind == Regression {
				j.rmse = j.sw.rmse()
			}
		}
	default:
		correct := float64(p.Label) == y
		j.preq.Add(correct)
		if !correct {
			j.mistakes++
		}
		if v := p.Version; v != j.version || j.versionN == 0 {
			j.version, j.versionN, j.versionRight = v, 0, 0
		}
		j.versionN++
		if correct {
			j.versionRight++
		}
	}
	if j.bounds != nil && p.HasBound {
		j.bounds.Add(y * p.Score)
		if checked && b != nil {
			j.limits, j.violations = j.bounds.Check(b.Bound, j.limits)
			j.violationsAll += j.violations
		}
	}
	return checked
}

// AddValue records, for an ordinal model, the value it published for a
// labelled event (the label it expects, on the raw label's scale) and the
// raw label, before the event's Add: RMSE is then their root mean squared
// error over the window's recent values, at Add's checks. O(1); the first
// call allocates the window.
func (j *Judge) AddValue(value, raw float64) {
	if j.ord == nil {
		return
	}
	if j.vw == nil {
		j.vw = newScoreWindow(j.win)
	}
	j.vw.add(value, raw)
}

// Labelled returns the number of labelled events judged.
func (j *Judge) Labelled() int64 { return j.labelled }

// Accuracy returns the classifier's accuracy over the window (NaN when it
// is empty or the model is no classifier).
func (j *Judge) Accuracy() float64 {
	if j.preq == nil {
		return math.NaN()
	}
	return j.preq.Accuracy()
}

// Mistakes returns the classifier's mistakes over all events judged.
func (j *Judge) Mistakes() int64 { return j.mistakes }

// VersionAccuracy returns the classifier's accuracy since the version
// serving now was swapped in (NaN before any event).
func (j *Judge) VersionAccuracy() float64 {
	if j.versionN == 0 {
		return math.NaN()
	}
	return float64(j.versionRight) / float64(j.versionN)
}

// MAE returns the ordinal model's mean absolute level error over the
// window (NaN otherwise).
func (j *Judge) MAE() float64 {
	if j.ord == nil {
		return math.NaN()
	}
	return j.ord.MAE()
}

// ZeroOne returns the ordinal model's zero-one level error over the window
// (NaN otherwise).
func (j *Judge) ZeroOne() float64 {
	if j.ord == nil {
		return math.NaN()
	}
	return j.ord.ZeroOne()
}

// KendallTau returns Kendall's τ-b of score against target over the window
// at the last check (NaN before the first, or for a classifier); after
// DeferTau, over the window as it is now (NaN before the first check),
// computed at each call.
func (j *Judge) KendallTau() float64 {
	if j.deferTau && j.labelled >= JudgeCheckEvery {
		switch {
		case j.ord != nil:
			j.tau = j.ord.KendallTau()
		case j.sw != nil:
			j.tau = j.sw.kendallTau()
		}
	}
	return j.tau
}

// DeferTau makes the judge compute Kendall's τ-b only when KendallTau is
// called, over the window as it is then, instead of at every check: τ
// costs O(window · log window), which at the checks of a window of 1 000
// is a few µs per labelled event, where a service that exports it to
// Prometheus needs it once per scrape (and bounds how often it asks). It
// changes no other measure.
func (j *Judge) DeferTau() { j.deferTau = true }

// RMSE returns the regression model's root mean squared error over the
// window at the last check (an ordinal model's, of the values given to
// AddValue; NaN otherwise).
func (j *Judge) RMSE() float64 { return j.rmse }

// BoundGrid returns the ρ grid of the bound check (nil without a bound).
func (j *Judge) BoundGrid() []float64 {
	if j.bounds == nil {
		return nil
	}
	return j.bounds.Grid()
}

// BoundObserved returns the observed fraction of the window's margins
// y·f ≤ −ρ for the i-th ρ of the grid.
func (j *Judge) BoundObserved(i int) float64 { return j.bounds.Observed(i) }

// BoundLimit returns bound(ρ) of the i-th ρ at the last check (NaN before).
func (j *Judge) BoundLimit(i int) float64 { return j.limits[i] }

// Violations returns the violations found by the last check and by all
// checks.
func (j *Judge) Violations() (last, all int) { return j.violations, j.violationsAll }

// scoreWindow holds the (score, real target) pairs of the last events of a
// ranking or regression model.
type scoreWindow struct {
	score, value, truth []float64 // value: the predicted value the RMSE judges
	next, count         int
	scratch             kendallScratch
}

func newScoreWindow(n int) *scoreWindow {
	return &scoreWindow{score: make([]float64, n), value: make([]float64, n), truth: make([]float64, n)}
}

func (w *scoreWindow) add(score, truth float64) { w.addValue(score, score, truth) }

// addValue records a score, the value predicted with it and the truth.
func (w *scoreWindow) addValue(score, value, truth float64) {
	w.score[w.next], w.value[w.next], w.truth[w.next] = score, value, truth
	if w.count < len(w.score) {
		w.count++
	}
	if w.next++; w.next == len(w.score) {
		w.next = 0
	}
}

func (w *scoreWindow) kendallTau() float64 {
	w.scratch.grow(len(w.score))
	for i := range w.count {
		w.scratch.pairs[i] = rankPair{w.score[i], w.truth[i]}
	}
	return w.scratch.tauB(w.count)
}

func (w *scoreWindow) rmse() float64 {
	if w.count == 0 {
		return math.NaN()
	}
	var s float64
	for i := range w.count {
		e := w.value[i] - w.truth[i]
		s += e * e
	}
	return math.Sqrt(s / float64(w.count))
}
