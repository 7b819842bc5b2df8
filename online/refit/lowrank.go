package refit

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/lowrank"
	"github.com/streamer/streamer/online/svm"
)

// LowRankName is the configuration's name of the low-rank matrix
// classifier.
const LowRankName = "lowrank"

// LowRankParams are the parameters of type "lowrank": a large-margin
// classifier on matrix features with a rank-r weight matrix (online/lowrank),
// refitted in the background from a window.
type LowRankParams struct {
	// Rows and Cols are the shape d1×d2 of an event's features, given as
	// the d1·d2 numbers of the matrix in row-major order: Rows·Cols must
	// be the input dimension. One of them 0 is the dimension divided by
	// the other; both 0 is dim×1 unless the configuration's
	// features.shape sets them (SetShape).
	Rows int `yaml:"rows"`
	Cols int `yaml:"cols"`
	// Rank is r, in 1..min(rows, cols) (default 2, or min(rows, cols) when
	// that is smaller and rank is not given).
	Rank          int           `yaml:"rank"`
	Kernel        LowRankKernel `yaml:"kernel"`
	C             float64       `yaml:"C"`              // box constraint, > 0 (default 1); C = 1/(2λn)
	Tol           float64       `yaml:"tol"`            // stop when the objective changes by ≤ tol·|objective| in an iteration, in (0, 1) (default 1e-4)
	MaxIterations int           `yaml:"max_iterations"` // at most this many U-step + V-step iterations, 1..10000 (default 50)
	Delta         float64       `yaml:"delta"`          // δ of the certainty bound, in (0, 1) (default 0.05)
	Window        Window        `yaml:"window"`
	Refit         SVMRefit      `yaml:"refit"`
	Probability   Probability   `yaml:"probability"`

	// rankDefault: rank was not given (Complete), so the default follows
	// the shape, also one set by SetShape after Complete.
	rankDefault bool
}

// LowRankKernel is the lowrank's "kernel" key.
type LowRankKernel struct {
	Type string `yaml:"type"` // linear (default); polynomial and rbf are not implemented yet
}

// DefaultLowRankParams returns the defaults of type "lowrank".
func DefaultLowRankParams() LowRankParams {
	return LowRankParams{
		Kernel: LowRankKernel{Type: "linear"}, // Rank: min(2, rows, cols), set by Complete
		C:      lowrank.DefaultC, Tol: lowrank.DefaultTol, MaxIterations: lowrank.DefaultMaxIter,
		Delta:  online.DefaultDelta,
		Window: Window{Events: DefaultWindow},
		Refit:  SVMRefit{Schedule: Schedule{EveryEvents: DefaultRefitEvery}, Guard: 0.1, GuardSlack: 0.02},
	}
}

// SetShape sets the shape to rows×cols when neither rows nor cols is set
// (the configuration calls it with features.shape; the model's own keys
// win). When rank was not given it follows the shape: min(2, rows, cols).
func (p *LowRankParams) SetShape(rows, cols int) {
	if p.Rows != 0 || p.Cols != 0 {
		return
	}
	p.Rows, p.Cols = rows, cols
	if p.rankDefault && rows > 0 && cols > 0 {
		p.Rank = min(lowrank.DefaultRank, rows, cols)
	}
}

// Complete applies the refit schedule's default and, when rank is not
// given, caps the default rank at min(rows, cols) of the shape as it is
// now (dim×1 when no shape is set: rank 1).
func (p *LowRankParams) Complete(dim int, given func(string) bool) {
	p.Refit.Schedule.complete(given)
	p.rankDefault = !given("rank")
	if !p.rankDefault {
		return
	}
	if rows, cols, ok := p.shape(dim); ok {
		p.Rank = min(lowrank.DefaultRank, rows, cols)
	}
}

// shape resolves rows×cols for inputs of dimension dim (ok false when they
// do not fit it).
func (p *LowRankParams) shape(dim int) (rows, cols int, ok bool) {
	rows, cols = p.Rows, p.Cols
	switch {
	case dim <= 0 || rows < 0 || cols < 0 || rows > dim || cols > dim:
		return rows, cols, false
	case rows == 0 && cols == 0:
		return dim, 1, true
	case cols == 0:
		if dim%rows != 0 {
			return rows, cols, false
		}
		return rows, dim / rows, true
	case rows == 0:
		if dim%cols != 0 {
			return rows, cols, false
		}
		return dim / cols, cols, true
	}
	return rows, cols, rows*cols == dim
}

var lowRankPlanned = map[string]bool{"polynomial": true, "rbf": true}

// Validate checks the parameters for inputs of dimension dim.
func (p *LowRankParams) Validate(dim int) error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, specErrorf(key, format, args...)) }
	for _, s := range []struct {
		key string
		v   int
	}{{"rows", p.Rows}, {"cols", p.Cols}} {
		if s.v < 0 {
			add(s.key, "must be ≥ 0 (0: from the other side, features.shape or the dimension), got %d", s.v)
		}
	}
	rows, cols, ok := p.shape(dim)
	if !ok && p.Rows >= 0 && p.Cols >= 0 {
		add("rows", "the shape rows×cols = %s×%s must hold the %d features (rows·cols = dim)", side(p.Rows), side(p.Cols), dim)
	}
	if ok && (p.Rank < 1 || p.Rank > min(rows, cols)) {
		add("rank", "must be in 1..min(rows, cols) = %d for the shape %d×%d, got %d", min(rows, cols), rows, cols, p.Rank)
	} else if !ok && p.Rank < 1 {
		add("rank", "must be ≥ 1, got %d", p.Rank)
	}
	switch k := p.Kernel.Type; {
	case k == "linear":
	case lowRankPlanned[k]:
		add("kernel.type", "%q is not implemented yet for lowrank: only linear is (the row kernels of seed 002 §4 are planned)", k)
	default:
		add("kernel.type", "%q is not a kernel of lowrank: use linear (polynomial and rbf are not implemented yet)", k)
	}
	if !positive(p.C) {
		add("C", "must be a finite number > 0, got %v", p.C)
	}
	if !(p.Tol > 0 && p.Tol < 1) {
		add("tol", "must be in (0, 1), got %v", p.Tol)
	}
	if p.MaxIterations < 1 || p.MaxIterations > lowrank.MaxIterLimit {
		add("max_iterations", "must be in 1..%d, got %d", lowrank.MaxIterLimit, p.MaxIterations)
	}
	if !(p.Delta > 0 && p.Delta < 1) {
		add("delta", "must be in (0, 1), got %v", p.Delta)
	}
	checkWindow(&errs, p.Window, p.Refit.Schedule, dim)
	if !(p.Refit.Guard >= 0 && p.Refit.Guard < 0.5) {
		add("refit.guard", "must be in [0, 0.5), got %v", p.Refit.Guard)
	}
	if !(p.Refit.GuardSlack >= 0) || math.IsInf(p.Refit.GuardSlack, 0) {
		add("refit.guard_slack", "must be a finite number ≥ 0, got %v", p.Refit.GuardSlack)
	}
	if l := p.Probability.Levels; l != 0 && (l < 2 || l > 100) {
		add("probability.levels", "must be in 2..100 (0 = off), got %d", l)
	}
	return errors.Join(errs...)
}

// side prints a side of the shape, "?" for 0 (to be inferred).
func side(v int) string {
	if v == 0 {
		return "?"
	}
	return fmt.Sprint(v)
}

// LowRankType is the "lowrank" model type.
func LowRankType() *online.Type {
	return online.Define(online.Def[LowRankParams]{
		Name:     LowRankName,
		Doc:      "large-margin classifier on matrix features with a rank-r weight matrix U Vᵀ (alternating SMO on U and V), refitted in the background from a window; optional probability",
		Defaults: DefaultLowRankParams,
		Traits: func(p *LowRankParams) online.Traits {
			return online.Traits{Kind: online.Classifier, Bound: true, Probability: p.Probability.Levels > 0, Refitted: true}
		},
		Examples: func() []LowRankParams {
			// The suite's features have scales 1, 30 and 0.05 and a
			// vector shape makes one block a single feature: small C
			// keeps its SMO steps short.
			p := DefaultLowRankParams()
			p.Rank, p.Window.Events, p.Refit.EveryEvents = 1, 30, 12 // dim×1
			prob := p
			prob.Rows, prob.C, prob.Probability.Levels, prob.Refit.Guard, prob.MaxIterations = 1, 0.1, 4, 0, 5 // 1×dim
			tight := p
			tight.Cols, tight.C, tight.Tol, tight.MaxIterations = 1, 0.5, 1e-8, 3
			return []LowRankParams{p, prob, tight}
		},
		New:     newLowRankModel,
		Restore: func(b []byte) (online.Model, error) { return restore(b, LowRankName, newLowRankModel) },
	})
}

func newLowRankModel(dim int, p *LowRankParams) (online.Model, error) {
	rows, cols, ok := p.shape(dim)
	if !ok {
		return nil, specErrorf("rows", "the shape does not hold %d features", dim)
	}
	return New(Config{
		Type: LowRankName, Params: p, Dim: dim,
		Window: p.Window.Events, WindowTime: p.Window.Time, MinEvents: p.Window.MinEvents,
		EveryEvents: p.Refit.EveryEvents, Every: p.Refit.Every, OnScore: p.Refit.OnScore, Guard: p.Refit.Guard, GuardSlack: p.Refit.GuardSlack,
	}, &LowRank{
		Params: lowrank.Params{Rows: rows, Cols: cols, Rank: p.Rank, C: p.C, Tol: p.Tol, MaxIter: p.MaxIterations},
		Delta:  p.Delta, ProbLevels: p.Probability.Levels,
	})
}

// LowRank trains low-rank matrix classifiers (online/lowrank) on windows.
// Scores are decision values f(X) = <U Vᵀ, X>_F + b. The certainty bound
// is Corollary 1 of docs/math.md §4 with the clipped margin, as the linear
// svm's: the scorer without its offset is <B, X>_F with the Frobenius inner
// product (the linear kernel on the flattened matrices), so W = ‖U Vᵀ‖_F
// and tr Ω = Σ ‖X_i‖²_F over the training window; the rank-r scorers are a
// subset of the Frobenius ball of radius W, whose Rademacher complexity
// bounds theirs. With ProbLevels ≥ 2 it also fits the weighted classifiers
// at π = h/H and publishes a probability. Fits start from the window's own
// initialisation (package lowrank), not from the serving model: a refit is
// a function of its window alone.
type LowRank struct {
	Params     lowrank.Params
	Delta      float64
	ProbLevels int
}

var _ Trainer = (*LowRank)(nil)

// Label maps −1/0 to −1 and 1 to +1.
func (t *LowRank) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Fit trains on d. Stats: Objective is the final primal objective
// ½‖UVᵀ‖²_F + C Σ hinge (≥ 0; svm's is its dual objective), Iterations the
// alternating iterations, SupportVectors those of the last block step.
func (t *LowRank) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	X, err := binaryRows(d, "lowrank")
	if err != nil {
		return nil, Stats{}, err
	}
	n := len(X)
	m, err := lowrank.Train(ctx, X, d.Y, t.Params)
	if err != nil {
		return nil, Stats{}, err
	}
	f := &lowRankFit{m: m, marginStats: marginStats{delta: t.Delta, n: n, w: m.Norm()}}
	var clip float64
	for i, x := range X {
		clip += svm.Clip(d.Y[i] * m.Decision(x))
		for _, v := range x {
			f.tr += v * v
		}
	}
	f.avgClip = clip / float64(n)
	if t.ProbLevels >= 2 {
		if f.prob, err = lowrank.TrainProbability(ctx, X, d.Y, t.Params, t.ProbLevels, m); err != nil {
			return nil, Stats{}, err
		}
	}
	m.AlphaU, m.AlphaV = nil, nil // only the probability fits' warm start needed them
	return f, Stats{SupportVectors: m.NSV, Objective: m.Obj, Iterations: m.Iter}, nil
}

type lowRankFit struct {
	m           *lowrank.Model
	prob        *lowrank.ProbModel
	marginStats // w = ‖U Vᵀ‖_F, tr = Σ ‖Xᵢ‖²_F over the training window
}

func (f *lowRankFit) Predict(x []float64) online.Prediction {
	s := f.m.Decision(x)
	p := online.Prediction{Score: s, N: int64(f.n), HasBound: true, Delta: f.delta}
	switch {
	case s > 0:
		p.Label = 1
	case s < 0:
		p.Label = -1
	}
	p.MistakeBound = f.Bound(math.Abs(s))
	if f.prob != nil {
		p.Probability, p.HasProbability = f.prob.Prob(x), true
	}
	return p
}

// inputDim is the dimension of the inputs the fit scores.
func (f *lowRankFit) inputDim() int { return f.m.Dim() }

// Model returns the fitted classifier (U, V, b, shape, rank, iterations,
// objective); it must not be modified.
func (f *lowRankFit) Model() *lowrank.Model { return f.m }

// LowRankInfo describes the serving version of a lowrank model.
type LowRankInfo struct {
	Version          int64 // the serving version (≥ 1)
	Rows, Cols, Rank int
	Iterations       int     // alternating iterations of its fit
	Converged        bool    // the objective settled within tol before max_iterations
	Objective        float64 // final ½‖UVᵀ‖²_F + C Σ hinge of its fit
	SupportVectors   int     // of the fit's last block step
	Window           int     // events it was trained on
	ProbLevels       int     // H of its probability (0: none)
}

// LowRankState reports the serving version of a lowrank model (m or a
// model it wraps, such as a Standardized one); ok is false for another
// model or before the first refit.
func LowRankState(m online.Model) (LowRankInfo, bool) {
	rm, ok := online.Unwrap[*Model](m)
	if !ok {
		return LowRankInfo{}, false
	}
	s := rm.cur.Load()
	if s == nil {
		return LowRankInfo{}, false
	}
	f, ok := s.fit.(*lowRankFit)
	if !ok {
		return LowRankInfo{}, false
	}
	info := LowRankInfo{
		Version: s.version, Rows: f.m.Rows, Cols: f.m.Cols, Rank: f.m.Rank,
		Iterations: f.m.Iter, Converged: f.m.Converged, Objective: f.m.Obj, SupportVectors: f.m.NSV, Window: f.n,
	}
	if f.prob != nil {
		info.ProbLevels = f.prob.H
	}
	return info, true
}

// Encoding of a fitted lowrank model (package online/codec's conventions):
// magic "RLRK" u16 version 1, n u32, delta, avgClip, w, tr float64, the
// model as a frame (u32 length + lowrank.Model's encoding), prob H u32
// (0 = none), then H−1 model frames of the same shape and rank.
const (
	lowRankFitMagic   = "RLRK"
	lowRankFitVersion = 1
)

// MarshalBinary encodes the fit.
func (f *lowRankFit) MarshalBinary() ([]byte, error) {
	var h int
	var probs []appendFunc
	if f.prob != nil {
		h = f.prob.H
		for _, m := range f.prob.Models {
			probs = append(probs, m.AppendBinary)
		}
	}
	return appendMarginFit(lowRankFitMagic, lowRankFitVersion, &f.marginStats, f.m.AppendBinary, h, probs)
}

// Unmarshal restores a fit written by MarshalBinary. Errors wrap
// ErrFormat (and, for a model that does not decode, lowrank.ErrFormat).
func (t *LowRank) Unmarshal(b []byte) (Fitted, error) {
	r := codec.NewReader(b, ErrFormat)
	f := &lowRankFit{marginStats: readMarginHead(r, "lowrank", lowRankFitMagic, lowRankFitVersion)}
	f.m = readLowRankModel(r, nil)
	if h := readProbLevels(r, "lowrank"); h != 0 {
		f.prob = &lowrank.ProbModel{H: h}
		for range h - 1 {
			if r.Err() != nil {
				break
			}
			f.prob.Models = append(f.prob.Models, readLowRankModel(r, f.m))
		}
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	return f, nil
}

// readLowRankModel reads a model frame; like, when not nil, is a model
// whose shape and rank it must have. Failures are recorded in r.
func readLowRankModel(r *codec.Reader, like *lowrank.Model) *lowrank.Model {
	b := r.Bytes()
	if r.Err() != nil {
		return nil
	}
	m := new(lowrank.Model)
	if err := m.UnmarshalBinary(b); err != nil {
		r.Fail(fmt.Errorf("refit: lowrank: %w", err))
		return nil
	}
	if like != nil && (m.Rows != like.Rows || m.Cols != like.Cols || m.Rank != like.Rank) {
		r.Failf("refit: lowrank: probability model %d×%d rank %d, the fit's is %d×%d rank %d", m.Rows, m.Cols, m.Rank, like.Rows, like.Cols, like.Rank)
		return nil
	}
	return m
}
