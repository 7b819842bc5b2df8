package refit

import (
	"context"
	"fmt"
	"math"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/rank"
)

// Kernel ranking trainers (MATH.md §7, package online/rank). Targets are
// any finite real (ranking levels or regression targets). Predictions carry
// Score = f(x), Label = 0 (the Model sets the level with Config.Levels)
// and HasBound = false: no certainty bound is defined for a ranking score.
// With Label = 0 the guard's held-back error is 1 for every model, so the
// guard never rejects a ranking model: leave it off for these trainers.

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

// RFRank trains LSRRank with random Fourier features (rank.Sums). In a
// Model it fits from running sums: the Model adds each labelled event to
// ΦᵀΦ, Φᵀ1, Φᵀy, Σy as it enters the window and subtracts it as it
// leaves, O(D·d + D²/2) per event, and a refit copies the sums and solves
// one D × D system, O(D³/3) whatever the window. Fit (the Trainer method,
// on a window's rows) maps the rows into fresh sums first, O(m·D²/2). The
// serving model scores in O(D·d).
type RFRank struct {
	Kernels  []rank.Kernel
	Lambda   float64
	Features int // dim φ per RBF kernel (even)
	Seed     uint64
}

var (
	_ Trainer     = (*LSRRank)(nil)
	_ Trainer     = (*KRR)(nil)
	_ sumsTrainer = (*RFRank)(nil)
)

// rankLabel accepts any finite real.
func rankLabel(v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// Type is "lsrrank", or "mlsrrank" with more than one kernel.
func (t *LSRRank) Type() string {
	if len(t.Kernels) > 1 {
		return "mlsrrank"
	}
	return "lsrrank"
}

// Label accepts any finite real.
func (t *LSRRank) Label(v float64) (float64, bool) { return rankLabel(v) }

// Fit solves the exact system on d.
func (t *LSRRank) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	return fitExact(ctx, d, rank.Config{Method: rank.LSRRank, Kernels: t.Kernels, Lambda: t.Lambda})
}

// Unmarshal restores a fit.
func (t *LSRRank) Unmarshal(b []byte) (Fitted, error) { return unmarshalExact(b, rank.LSRRank) }

// Type is "krr".
func (t *KRR) Type() string { return "krr" }

// Label accepts any finite real.
func (t *KRR) Label(v float64) (float64, bool) { return rankLabel(v) }

// Fit solves the exact system on d.
func (t *KRR) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	return fitExact(ctx, d, rank.Config{Method: rank.KRR, Kernels: t.Kernels, Lambda: t.Lambda})
}

// Unmarshal restores a fit.
func (t *KRR) Unmarshal(b []byte) (Fitted, error) { return unmarshalExact(b, rank.KRR) }

func fitExact(ctx context.Context, d *Data, cfg rank.Config) (Fitted, Stats, error) {
	m, err := rank.Fit(ctx, d.X, d.D, d.Y, cfg)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("refit: %v: %w", cfg.Method, err)
	}
	return exactFit{m}, Stats{}, nil
}

func unmarshalExact(b []byte, want rank.Method) (Fitted, error) {
	m, err := rank.UnmarshalModel(b)
	if err != nil {
		return nil, err
	}
	if m.Method() != want {
		return nil, fmt.Errorf("refit: %v model where %v was configured", m.Method(), want)
	}
	return exactFit{m}, nil
}

type exactFit struct{ m *rank.Model }

func (f exactFit) Predict(x []float64) online.Prediction {
	return online.Prediction{Score: f.m.Predict(x), N: int64(f.m.N())}
}

func (f exactFit) MarshalBinary() ([]byte, error) { return f.m.MarshalBinary() }

// Type is "rfrank".
func (t *RFRank) Type() string { return "rfrank" }

// Label accepts any finite real.
func (t *RFRank) Label(v float64) (float64, bool) { return rankLabel(v) }

// Fit maps the window's rows into fresh sums and solves the D × D system.
func (t *RFRank) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	s, err := t.newSums(d.D)
	if err != nil {
		return nil, Stats{}, err
	}
	for i := range d.N() {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, Stats{}, ctx.Err()
		}
		s.Add(d.Row(i), d.Y[i])
	}
	return t.fitSums(ctx, s)
}

// newSums draws the feature map (seeded: every instance draws the same
// frequencies) and returns empty sums over it.
func (t *RFRank) newSums(dim int) (*rank.Sums, error) {
	fm, err := rank.NewFeatureMap(dim, rank.FeatureConfig{Kernels: t.Kernels, Features: t.Features, Seed: t.Seed})
	if err != nil {
		return nil, fmt.Errorf("refit: rfrank: %w", err)
	}
	return rank.NewSums(fm), nil
}

// fitSums solves the D × D system of s.
func (t *RFRank) fitSums(ctx context.Context, s *rank.Sums) (Fitted, Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, Stats{}, err
	}
	m, err := s.Fit(t.Lambda)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("refit: rfrank: %w", err)
	}
	return featureFit{m}, Stats{}, nil
}

// Unmarshal restores a fit.
func (t *RFRank) Unmarshal(b []byte) (Fitted, error) {
	m, err := rank.UnmarshalFeatureModel(b)
	if err != nil {
		return nil, err
	}
	return featureFit{m}, nil
}

type featureFit struct{ m *rank.FeatureModel }

func (f featureFit) Predict(x []float64) online.Prediction {
	return online.Prediction{Score: f.m.Predict(x), N: f.m.N()}
}

func (f featureFit) MarshalBinary() ([]byte, error) { return f.m.MarshalBinary() }
