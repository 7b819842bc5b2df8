package refit

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/rank"
)

// Kernel ranking and regression (docs/math.md §8, package online/rank):
// the keys lsrrank, mlsrrank and krr share, and their trainers. Targets
// are any finite real (ranking levels, ratings or regression targets).
// Predictions carry Score = f(x), Label = 0 (the Model sets the level with
// Config.Levels) and HasBound = false: no certainty bound is defined for a
// ranking score. The guard judges classification error, which a ranking
// score has not: these types have no guard.

// Solvers of the ranking types.
const (
	SolverExact    = "exact"    // one m × m Cholesky solve per refit
	SolverFeatures = "features" // random features: running D × D sums, one D × D solve per refit
)

// Defaults of the ranking types.
const (
	DefaultLambda       = 1e-3
	DefaultRankGamma    = 10.0
	DefaultRankFeatures = 1024 // random frequencies per rbf kernel (solver features)
	defaultMultiFeat    = 256  // mlsrrank's random frequencies per kernel (solver features)
	maxExactWindow      = 20000
)

// RankParams are the keys lsrrank, mlsrrank and krr share.
type RankParams struct {
	Lambda float64  `yaml:"lambda"` // regularisation λ > 0 (default 1e-3)
	Solver string   `yaml:"solver"` // exact (default) | features
	Window Window   `yaml:"window"`
	Refit  Schedule `yaml:"refit"`
}

// RankKernel is the "kernel" key of lsrrank and krr.
type RankKernel struct {
	Type     string  `yaml:"type"`     // rbf (default) | linear
	Gamma    float64 `yaml:"gamma"`    // rbf: K = exp(−gamma‖x − x'‖²) (default 10)
	Features int     `yaml:"features"` // solver features, rbf: random frequencies (default 1024)
	Seed     uint64  `yaml:"seed"`     // solver features, rbf: seed of the frequencies (default 1)
}

func defaultRankParams() RankParams {
	return RankParams{Lambda: DefaultLambda, Solver: SolverExact,
		Window: Window{Events: DefaultWindow}, Refit: Schedule{EveryEvents: DefaultRefitEvery}}
}

func defaultRankKernel() RankKernel {
	return RankKernel{Type: "rbf", Features: DefaultRankFeatures, Seed: 1} // gamma auto (rank_auto.go)
}

// complete sets the schedule's default.
func (p *RankParams) complete(given func(string) bool) { p.Refit.complete(given) }

// complete clears the keys the kernel's type and the solver do not use,
// unless given.
func (k *RankKernel) complete(solver string, given func(string) bool) {
	rff := k.Type == "rbf" && solver == SolverFeatures
	if !given("kernel.gamma") {
		k.Gamma = 0 // linear; rbf: auto (rank_auto.go)
	}
	if !given("kernel.features") {
		k.Features = 0
		if rff {
			k.Features = DefaultRankFeatures
		}
	}
	if !given("kernel.seed") {
		k.Seed = 0
		if rff {
			k.Seed = 1
		}
	}
}

// validate checks the shared keys.
func (p *RankParams) validate(errs *[]error, dim int) {
	if !positive(p.Lambda) {
		*errs = append(*errs, specErrorf("lambda", "must be a finite number > 0, got %v", p.Lambda))
	}
	switch p.Solver {
	case SolverExact:
		if p.Window.Events > maxExactWindow {
			*errs = append(*errs, specErrorf("window.events", "must be ≤ %d with solver exact (an m × m system per refit), got %d; use solver: features for longer windows", maxExactWindow, p.Window.Events))
		}
	case SolverFeatures:
	default:
		*errs = append(*errs, specErrorf("solver", "%q is not one of exact, features", p.Solver))
	}
	checkWindow(errs, p.Window, p.Refit, dim)
}

// validate checks a ranking kernel for the solver.
func (k *RankKernel) validate(errs *[]error, solver string) {
	add := func(key, format string, args ...any) { *errs = append(*errs, specErrorf(key, format, args...)) }
	switch k.Type {
	case "rbf":
		if k.Gamma != 0 && !positive(k.Gamma) {
			add("kernel.gamma", "must be a finite number > 0 or auto, got %v", k.Gamma)
		}
	case "linear":
		if k.Gamma != 0 {
			add("kernel.gamma", "not used by the linear kernel; remove it")
		}
	default:
		add("kernel.type", "%q is not one of rbf, linear", k.Type)
	}
	switch {
	case solver != SolverFeatures || k.Type != "rbf":
		why := "only with solver: features"
		if solver == SolverFeatures {
			why = "not used by the linear kernel (its features are the inputs)"
		}
		if k.Features != 0 {
			add("kernel.features", "%s; remove it", why)
		}
		if k.Seed != 0 {
			add("kernel.seed", "%s; remove it", why)
		}
	case k.Features < 1 || 2*k.Features > maxRankFeatures:
		add("kernel.features", "must be in 1..%d (random frequencies), got %d", maxRankFeatures/2, k.Features)
	}
}

// maxRankFeatures bounds dim φ of the random-feature solver (D × D sums).
const maxRankFeatures = 1 << 14

// kernels returns the rank package's kernel.
func (k *RankKernel) kernels() []rank.Kernel {
	if k.Type == "linear" {
		return []rank.Kernel{{Type: rank.Linear, V: 1}}
	}
	return []rank.Kernel{{Type: rank.RBF, Gamma: k.Gamma, V: 1}}
}

// checkLevels checks the levels key of lsrrank and mlsrrank.
func checkLevels(errs *[]error, levels int) {
	if levels != 0 && (levels < 2 || levels > 1000) {
		*errs = append(*errs, specErrorf("levels", "must be in 2..1000 (integer targets 1..m; 0 = off, any real target), got %d", levels))
	}
}

// rankTraits are the traits of a ranking model: ranking, or ordinal with
// levels.
func rankTraits(kind online.Kind, levels int) online.Traits {
	if levels > 0 {
		return online.Traits{Kind: online.Ordinal, Levels: levels, Refitted: true}
	}
	return online.Traits{Kind: kind, Refitted: true}
}

// newRankModel builds a ranking model of type name: the trainer of the
// solver and method, refitted from the window.
// nnz > 0: of hashed features (Config.Sparse).
func newRankModel(name string, params online.Params, dim, nnz int, p *RankParams, ks []rank.Kernel, method rank.Method, freq int, seed uint64, levels int) (online.Model, error) {
	var tr Trainer
	switch {
	case p.Solver == SolverFeatures:
		tr = &RFRank{Kernels: ks, Lambda: p.Lambda, Features: 2 * freq, Seed: seed, Method: method}
	case method == rank.KRR:
		tr = &KRR{Kernels: ks, Lambda: p.Lambda}
	default:
		tr = &LSRRank{Kernels: ks, Lambda: p.Lambda}
	}
	return New(Config{
		Type: name, Params: params, Dim: dim,
		Window: p.Window.Events, WindowTime: p.Window.Time, MinEvents: p.Window.MinEvents,
		EveryEvents: p.Refit.EveryEvents, Every: p.Refit.Every, OnScore: p.Refit.OnScore, Levels: levels, Sparse: nnz,
	}, tr)
}

// LSRRank trains exact least-squares regularised ranking (seed 001): one
// kernel is LSRRank, several are MLSRRank with K̄ = Σ K_t/v_t, solved as
// the m × m centred SPD system by Cholesky (rank.Fit). A refit costs
// O(m²d + m³/3) for a window of m events.
type LSRRank struct {
	Kernels []rank.Kernel
	Lambda  float64
}

// KRR trains exact kernel ridge regression, (K̄ + λI)α = y (scikit-learn's
// KernelRidge(alpha=λ) scaling); the score is the predicted value.
type KRR struct {
	Kernels []rank.Kernel
	Lambda  float64
}

// RFRank trains LSRRank (or, with Method rank.KRR, kernel ridge
// regression) with random Fourier features (rank.Sums). In a Model it fits
// from running sums: the Model adds each labelled event to ΦᵀΦ, Φᵀ1, Φᵀy,
// Σy as it enters the window and subtracts it as it leaves, O(D·d + D²/2)
// per event, and a refit copies the sums and solves one D × D system,
// O(D³/3) whatever the window. Fit (the Trainer method, on a window's rows)
// maps the rows into fresh sums first, O(m·D²/2). The serving model scores
// in O(D·d).
type RFRank struct {
	Kernels  []rank.Kernel
	Lambda   float64
	Features int // dim φ per RBF kernel (even)
	Seed     uint64
	Method   rank.Method // LSRRank (the centred system) or KRR
}

var (
	_ sparseTrainer = (*LSRRank)(nil)
	_ sparseTrainer = (*KRR)(nil)
	_ sumsTrainer   = (*RFRank)(nil)
	_ sparseFitted  = exactFit{}
)

func (*LSRRank) fitsSparse() {}
func (*KRR) fitsSparse()     {}

// rankLabel accepts any finite real.
func rankLabel(v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// Label accepts any finite real.
func (t *LSRRank) Label(v float64) (float64, bool) { return rankLabel(v) }

// Fit solves the exact system on d.
func (t *LSRRank) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	return fitExact(ctx, d, rank.Config{Method: rank.LSRRank, Kernels: autoKernels(t.Kernels, d), Lambda: t.Lambda})
}

// Unmarshal restores a fit.
func (t *LSRRank) Unmarshal(b []byte) (Fitted, error) { return unmarshalExact(b, rank.LSRRank) }

// Label accepts any finite real.
func (t *KRR) Label(v float64) (float64, bool) { return rankLabel(v) }

// Fit solves the exact system on d.
func (t *KRR) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	return fitExact(ctx, d, rank.Config{Method: rank.KRR, Kernels: autoKernels(t.Kernels, d), Lambda: t.Lambda})
}

// Unmarshal restores a fit.
func (t *KRR) Unmarshal(b []byte) (Fitted, error) { return unmarshalExact(b, rank.KRR) }

func fitExact(ctx context.Context, d *Data, cfg rank.Config) (Fitted, Stats, error) {
	fit := rank.Fit
	if d.Rows != nil {
		fit = func(ctx context.Context, _ []float64, dim int, y []float64, cfg rank.Config) (*rank.Model, error) {
			return rank.FitSparse(ctx, d.Rows, dim, y, cfg)
		}
	}
	m, err := fit(ctx, d.X, d.D, d.Y, cfg)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("refit: %v: %w", cfg.Method, err)
	}
	return exactFit{m}, Stats{}, nil
}

func unmarshalExact(b []byte, want rank.Method) (Fitted, error) {
	m, err := rank.UnmarshalModel(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if m.Method() != want {
		return nil, fmt.Errorf("%w: refit: %v model where %v was configured", ErrFormat, m.Method(), want)
	}
	return exactFit{m}, nil
}

type exactFit struct{ m *rank.Model }

func (f exactFit) Predict(x []float64) online.Prediction {
	return online.Prediction{Score: f.m.Predict(x), N: int64(f.m.N())}
}

func (f exactFit) predictSparse(x sparse.Row, buf []float64) online.Prediction {
	return online.Prediction{Score: f.m.PredictSparse(x, buf), N: int64(f.m.N())}
}

func (f exactFit) sparseRows() bool { return f.m.Sparse() }

func (f exactFit) MarshalBinary() ([]byte, error) { return f.m.MarshalBinary() }

func (f exactFit) inputDim() int { return f.m.Dim() }

// Label accepts any finite real.
func (t *RFRank) Label(v float64) (float64, bool) { return rankLabel(v) }

// Fit maps the window's rows into fresh sums and solves the D × D system.
// With gamma auto the map's width is that of the window's scale, as the
// exact solvers take it (a Model's running sums fix theirs in a warm-up
// instead: rank_auto.go).
func (t *RFRank) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	S := 1.0
	if slices.ContainsFunc(t.Kernels, isAuto) {
		S = windowScale(d)
	}
	fm, err := t.featureMap(d.D, S)
	if err != nil {
		return nil, Stats{}, err
	}
	s := rank.NewSums(fm)
	for i := range d.N() {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, Stats{}, ctx.Err()
		}
		s.Add(d.Row(i), d.Y[i])
	}
	return t.fitSums(ctx, s)
}

// newSums draws the feature map (seeded: every instance draws the same
// frequencies) and returns empty sums over it; gamma auto's kernels get
// the width of the scale S = 1 until the Model's warm-up sets it.
func (t *RFRank) newSums(dim int) (*rank.Sums, error) {
	fm, err := t.featureMap(dim, 1)
	if err != nil {
		return nil, err
	}
	return rank.NewSums(fm), nil
}

// featureMap draws the feature map for inputs of dimension dim, gamma
// auto's kernels at the width of the data scale S.
func (t *RFRank) featureMap(dim int, S float64) (*rank.FeatureMap, error) {
	ks := t.Kernels
	if slices.ContainsFunc(ks, isAuto) {
		ks = scaledKernels(ks, S)
	}
	fm, err := rank.NewFeatureMap(dim, rank.FeatureConfig{Kernels: ks, Features: t.Features, Seed: t.Seed})
	if err != nil {
		return nil, fmt.Errorf("refit: random features: %w", err)
	}
	return fm, nil
}

// fitSums solves the D × D system of s.
func (t *RFRank) fitSums(ctx context.Context, s *rank.Sums) (Fitted, Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stats{}, err
	}
	fit := s.Fit
	if t.Method == rank.KRR {
		fit = s.FitKRR
	}
	m, err := fit(t.Lambda)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("refit: random features %v: %w", t.Method, err)
	}
	return featureFit{m}, Stats{}, nil
}

// Unmarshal restores a fit.
func (t *RFRank) Unmarshal(b []byte) (Fitted, error) {
	m, err := rank.UnmarshalFeatureModel(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return featureFit{m}, nil
}

type featureFit struct{ m *rank.FeatureModel }

func (f featureFit) Predict(x []float64) online.Prediction {
	return online.Prediction{Score: f.m.Predict(x), N: f.m.N()}
}

func (f featureFit) MarshalBinary() ([]byte, error) { return f.m.MarshalBinary() }

func (f featureFit) inputDim() int { return f.m.FeatureMap().InputDim() }
