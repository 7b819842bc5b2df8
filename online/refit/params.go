package refit

import (
	"bytes"
	"fmt"
	"math"
	"time"

	"github.com/streamer/streamer/online"
)

// Keys every refitted model type shares.

// Window is the "window" key of a refitted model: the labelled events each
// refit trains on.
type Window struct {
	Events int           `yaml:"events"` // labelled events kept, ≥ 10 (default 2000)
	Time   time.Duration `yaml:"time"`   // also drop events older than this (0 = off)
	// MinEvents: no fit before the window holds this many events (0: 10):
	// a key-scoped model with a fallback leaves keys with fewer to it.
	MinEvents int `yaml:"min_events"`
}

// Schedule is the "refit" key of a refitted model: when it is refitted.
// With none of every_events, every and on_score: true given it refits
// every 1000 labelled events; with on_score: true alone every_events
// defaults to 0 (no refit on labels).
//
// OnScore refits before a score: an unlabelled event (online.Peek, a
// ranking request's candidate) that finds labelled events learned since
// the last refit, with at least the window's minimum of events, first
// refits inline on the whole current window, so that the score comes from
// a fit of it. It concerns the instances that refit inline, those never
// started: the instances of a key-scoped model (scope: key), offline
// evaluation. A started instance (the service's global one, refitted in
// the background) ignores it and refits only by every_events and every:
// with on_score alone it would never refit, so give it one of them too.
// Cost: one refit per scored instance whose window changed since its last
// refit (svm, the exact ranking solver: O(window³)).
type Schedule struct {
	EveryEvents int           `yaml:"every_events"` // after this many labelled events (0 = off)
	Every       time.Duration `yaml:"every"`        // this often (0 = off)
	OnScore     bool          `yaml:"on_score"`     // refit inline before scoring a changed window (instances not started)
}

// Defaults of the shared keys.
const (
	DefaultWindow     = 2000 // window.events
	DefaultRefitEvery = 1000 // refit.every_events when neither refit key is given
	minWindow         = 10
	maxWindowFloats   = 1 << 25 // window.events × dim, the window's ring (256 MiB)
)

// complete sets the schedule's default: every_events 1000 unless it, every
// or on_score: true is given (given: key under the model, "refit.every").
// OnScore is read as decoded: true only when given.
func (s *Schedule) complete(given func(string) bool) {
	if !given("refit.every_events") {
		s.EveryEvents = 0
		if !given("refit.every") && !s.OnScore {
			s.EveryEvents = DefaultRefitEvery
		}
	}
}

// check adds the window's and the schedule's errors to errs.
func checkWindow(errs *[]error, w Window, s Schedule, dim int) {
	if w.Events < minWindow || (dim > 0 && w.Events > maxWindowFloats/dim) {
		*errs = append(*errs, specErrorf("window.events", "must be ≥ %d (the refit window) with window×dim ≤ %d, got %d×%d", minWindow, maxWindowFloats, w.Events, dim))
	}
	if w.Time < 0 {
		*errs = append(*errs, specErrorf("window.time", "must be ≥ 0 (0 = off), got %v", w.Time))
	}
	if w.MinEvents < 0 || w.MinEvents > w.Events {
		*errs = append(*errs, specErrorf("window.min_events", "must be in [0, window.events] (0 = 10), got %d", w.MinEvents))
	}
	if s.EveryEvents < 0 || s.Every < 0 || (s.EveryEvents == 0 && s.Every == 0 && !s.OnScore) {
		*errs = append(*errs, specErrorf("refit", "set every_events and/or every (> 0), or on_score: true (key-scoped models only: a started, global instance ignores it), got every_events %d, every %v, on_score %v", s.EveryEvents, s.Every, s.OnScore))
	}
}

func specErrorf(key, format string, args ...any) error {
	return &online.SpecError{Field: key, Problem: fmt.Sprintf(format, args...)}
}

// positive reports whether x is a finite number > 0.
func positive(x float64) bool { return x > 0 && !math.IsInf(x, 0) }

// restore is the Restore of a refitted model type: the parameters from the
// envelope, a model built from them, then its state. An encoding from
// before the envelope carries no parameters: online.ErrNeedsConfig. A
// window of sparse rows (hashed features) is restored into a model built
// by the parameters' NewSparse with the encoded bound on entries.
func restore[P any, PP interface {
	*P
	online.Params
}](b []byte, name string, build func(dim int, p *P) (online.Model, error)) (online.Model, error) {
	if bytes.HasPrefix(b, []byte(legacyMagic)) {
		return nil, online.ErrNeedsConfig
	}
	var p P
	dim, r := online.ReadHeader(b, name, PP(&p), nil)
	if err := r.Err(); err != nil {
		return nil, err
	}
	if dim <= 0 {
		return nil, fmt.Errorf("%w: dimension %d", online.ErrFormat, dim)
	}
	nnz, err := sparseBound(r.Rest())
	if err != nil {
		return nil, err
	}
	var m online.Model
	if nnz > 0 {
		sp, ok := any(PP(&p)).(online.SparseParams)
		if !ok || dim > online.MaxSparseDim {
			return nil, fmt.Errorf("%w: a window of sparse rows for type %s of dimension %d", online.ErrFormat, name, dim)
		}
		if err := sp.ValidateSparse(dim, nnz); err != nil {
			return nil, fmt.Errorf("%w: parameters: %w", online.ErrFormat, err)
		}
		m, err = sp.NewSparse(dim, nnz)
	} else {
		if err := PP(&p).Validate(dim); err != nil {
			return nil, fmt.Errorf("%w: parameters: %w", online.ErrFormat, err)
		}
		m, err = build(dim, &p)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", online.ErrFormat, err)
	}
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return m, nil
}

// OnScoreOnly reports whether the schedule refits only before a score
// (on_score without every_events or every): a started, global model,
// which never refits on score, would then never refit.
func (s Schedule) OnScoreOnly() bool { return s.OnScore && s.EveryEvents == 0 && s.Every == 0 }

// OnScoreOnly is the schedule's (Schedule.OnScoreOnly).
func (p *RankParams) OnScoreOnly() bool { return p.Refit.OnScoreOnly() }

// OnScoreOnly is the schedule's (Schedule.OnScoreOnly).
func (p *SVMParams) OnScoreOnly() bool { return p.Refit.OnScoreOnly() }

// OnScoreOnly is the schedule's (Schedule.OnScoreOnly).
func (p *LowRankParams) OnScoreOnly() bool { return p.Refit.OnScoreOnly() }

// OnScoreOnly is the schedule's (Schedule.OnScoreOnly).
func (p *AdaBoostParams) OnScoreOnly() bool { return p.Refit.OnScoreOnly() }
