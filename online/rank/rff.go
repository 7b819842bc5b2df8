package rank

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/streamer/streamer/online/internal/dense"
	"github.com/streamer/streamer/online/internal/vmath"
)

// pcgStream is the second PCG seed word of the frequencies of kernel t
// (plus t); the first is FeatureConfig.Seed. Part of the model format.
const pcgStream = 0x72616e6b2d726666 // "rank-rff"

// maxFeatures bounds the feature dimension (a corrupt encoding must not ask
// for an absurd allocation).
const maxFeatures = 1 << 14

// FeatureConfig configures an explicit feature map for K̄.
type FeatureConfig struct {
	Kernels []Kernel
	// Features is dim φ_t for each RBF kernel: Features/2 random
	// frequencies in pair form (even, ≥ 2). A linear kernel contributes
	// φ_t(x) = x (d features). (online.KernelSpec.Features counts
	// frequencies instead; here it is the dimension.)
	Features int
	Seed     uint64
}

// FeatureMap is φ with <φ(x), φ(x')> ≈ K̄(x, x') = Σ_t K_t(x, x')/v_t:
// φ is the concatenation of φ_t/sqrt(v_t); for an RBF kernel
// φ_t(x) = sqrt(2/F)[cos(ω_k·x), sin(ω_k·x)]_{k=1..F/2} with ω_k drawn
// from N(0, 2γI) (Rahimi & Recht 2007; docs/math.md §2), so ‖φ_t(x)‖ = 1. It
// is immutable and safe for concurrent use.
type FeatureMap struct {
	cfg   FeatureConfig
	k     kernels
	d     int
	dim   int
	omega [][]float64 // per kernel: F/2 rows of d (nil for linear)
	// panels holds each omega again packed eight rows to a panel
	// (vmath.PackPanels): the projections eight frequencies at a time.
	panels [][]float64
}

// NewFeatureMap draws the frequencies for inputs of dimension d.
func NewFeatureMap(d int, cfg FeatureConfig) (*FeatureMap, error) {
	ks, err := newKernels(cfg.Kernels)
	if err != nil {
		return nil, err
	}
	if d < 1 || d > maxFeatures {
		return nil, fmt.Errorf("%w: dimension %d", ErrConfig, d)
	}
	fm := &FeatureMap{cfg: cfg, k: ks, d: d, omega: make([][]float64, len(ks.ks)), panels: make([][]float64, len(ks.ks))}
	fm.cfg.Kernels = ks.ks
	for t, kt := range ks.ks {
		switch kt.Type {
		case Linear:
			fm.dim += d
		case RBF:
			if cfg.Features < 2 || cfg.Features%2 != 0 || cfg.Features > maxFeatures {
				return nil, fmt.Errorf("%w: features must be even and in [2, %d], got %d", ErrConfig, maxFeatures, cfg.Features)
			}
			r := rand.New(rand.NewPCG(cfg.Seed, pcgStream+uint64(t)))
			om := make([]float64, cfg.Features/2*d)
			sd := math.Sqrt(2 * kt.Gamma)
			for i := range om {
				om[i] = sd * r.NormFloat64()
			}
			fm.omega[t] = om
			rows := make([][]float64, len(om)/d)
			for k := range rows {
				rows[k] = om[k*d : (k+1)*d]
			}
			fm.panels[t] = vmath.PackPanels(rows, d)
			fm.dim += cfg.Features
		}
	}
	if fm.dim > maxFeatures {
		return nil, fmt.Errorf("%w: dim φ = %d > %d", ErrConfig, fm.dim, maxFeatures)
	}
	return fm, nil
}

// Dim is dim φ.
func (fm *FeatureMap) Dim() int { return fm.dim }

// InputDim is d.
func (fm *FeatureMap) InputDim() int { return fm.d }

// Config returns the configuration (weights normalised).
func (fm *FeatureMap) Config() FeatureConfig { return fm.cfg }

// Map writes φ(x) to dst[:Dim()]. It does not allocate.
func (fm *FeatureMap) Map(dst, x []float64) {
	if len(x) != fm.d || len(dst) < fm.dim {
		panic(fmt.Sprintf("rank: Map: %d features (want %d), dst %d (want %d)", len(x), fm.d, len(dst), fm.dim))
	}
	o := 0
	for t, kt := range fm.k.ks {
		sv := math.Sqrt(fm.k.inv[t])
		if kt.Type == Linear {
			for j, v := range x {
				dst[o+j] = sv * v
			}
			o += fm.d
			continue
		}
		h := len(fm.omega[t]) / fm.d
		c := sv * math.Sqrt(1/float64(h))
		z := dst[o+h : o+2*h] // the projections, then their sines in place
		fm.project(z, t, 0, x)
		vmath.SincosScaledRFF(dst[o:o+2*h], z, 1, c)
		o += 2 * h
	}
}

// project sets z[k] = ω_{k0+k}·x for k < len(z) (k0 a multiple of 8), the
// plain loop's sums (dotp's), from kernel t's panels eight frequencies at
// a time (vmath.PanelDotsSeq).
func (fm *FeatureMap) project(z []float64, t, k0 int, x []float64) {
	d := fm.d
	full := len(z) &^ 7
	pan := fm.panels[t][k0*d:]
	vmath.PanelDotsSeq(z[:full], pan[:full*d], x)
	if rest := len(z) - full; rest > 0 {
		var tail [8]float64
		vmath.PanelDotsSeq(tail[:], pan[full*d:(full+8)*d], x)
		copy(z[full:], tail[:rest])
	}
}

// sincosBlock is the number of frequencies whose sin/cos dotPhi computes
// at a time (on the stack).
const sincosBlock = 32

// dotPhi returns <w, φ(x)> without materialising φ.
func (fm *FeatureMap) dotPhi(w, x []float64) float64 {
	var acc float64
	o := 0
	for t, kt := range fm.k.ks {
		sv := math.Sqrt(fm.k.inv[t])
		if kt.Type == Linear {
			acc += sv * dotp(x, w[o:o+fm.d])
			o += fm.d
			continue
		}
		h := len(fm.omega[t]) / fm.d
		c := sv * math.Sqrt(1/float64(h))
		var a float64
		var buf [2 * sincosBlock]float64
		for k0 := 0; k0 < h; k0 += sincosBlock {
			n := min(sincosBlock, h-k0)
			p := buf[:2*n]
			z := p[n:]
			fm.project(z, t, k0, x)
			vmath.SincosScaledRFF(p, z, 1, 1)
			for k := range n {
				a += w[o+k0+k]*p[k] + w[o+h+k0+k]*p[n+k]
			}
		}
		acc += c * a
		o += 2 * h
	}
	return acc
}

// batch is the number of events buffered before a rank-k update of ΦᵀΦ.
const batch = 32

// Sums are the sufficient statistics of the random-feature LSRRank over a
// window: ΦᵀΦ, Φᵀ1, Φᵀy, Σy and n, kept as running sums. Add and Remove
// cost O(D·d) to map the event plus, amortised, O(D²/2) for ΦᵀΦ: events
// are buffered 32 at a time and folded in by one symmetric rank-32 update
// (dense.SyrkTN, +1 for added and −1 for removed events: the packed
// AVX2/FMA micro-kernel, 25-43 Gflop/s on one core here, against about 3
// for gonum's dsyrk and less for 32 rank-1 updates). Φᵀ1, Φᵀy and Σy are
// Neumaier-compensated; ΦᵀΦ is not (compensating a D×D matrix would halve
// the update rate): in a sliding window every entry is a sum of added and
// subtracted terms of size ≤ 2/F, so after N events its rounding error is
// O(N·ε·2/F) (a random walk in practice, O(sqrt(N)·ε·2/F)), against
// a diagonal of size about W·2/F for a window of W events: relative to the
// largest entry, N·ε/W at worst, about 1e-10 after 10⁹ events in a window
// of 1 000 (the refit model's test checks 1e-9 against sums recomputed
// from the window). Reset and re-Add the window to start the
// error afresh. Copy, AppendBinary and UnmarshalBinary keep everything,
// compensation and pending events included. Not safe for concurrent use.
type Sums struct {
	fm         *FeatureMap
	dim        int
	gram       []float64 // ΦᵀΦ, upper triangle, dim × dim
	s1, c1     []float64 // Φᵀ1 and its compensation
	sy, cy     []float64 // Φᵀy and its compensation
	sumY, cY   float64
	n          int64
	add, rem   []float64 // pending rows (batch × dim)
	nAdd, nRem int
	ws         dense.Workspace // packing buffers of the rank-32 updates
}

// NewSums returns empty sums for the feature map fm.
func NewSums(fm *FeatureMap) *Sums {
	D := fm.Dim()
	s := &Sums{fm: fm, dim: D, gram: make([]float64, D*D),
		s1: make([]float64, D), c1: make([]float64, D), sy: make([]float64, D), cy: make([]float64, D),
		add: make([]float64, batch*D), rem: make([]float64, batch*D)}
	s.ws.Reserve(D, batch)
	return s
}

// FeatureMap returns the map the sums use.
func (s *Sums) FeatureMap() *FeatureMap { return s.fm }

// Remap empties the sums and makes them sums over fm, which must have the
// dimension of their map (it panics otherwise), reusing their memory:
// gamma auto redraws its map at a new width this way and re-adds the
// window.
func (s *Sums) Remap(fm *FeatureMap) {
	if fm.Dim() != s.dim {
		panic(fmt.Sprintf("rank: Sums.Remap: map of dimension %d, sums of %d", fm.Dim(), s.dim))
	}
	s.fm = fm
	s.Reset()
}

// N is the number of events in the sums (adds minus removes).
func (s *Sums) N() int64 { return s.n }

// Reset empties the sums.
func (s *Sums) Reset() {
	clear(s.gram)
	clear(s.s1)
	clear(s.c1)
	clear(s.sy)
	clear(s.cy)
	s.sumY, s.cY, s.n, s.nAdd, s.nRem = 0, 0, 0, 0, 0
}

// Add adds the event (x, y). It does not allocate.
func (s *Sums) Add(x []float64, y float64) {
	row := s.add[s.nAdd*s.dim : (s.nAdd+1)*s.dim]
	s.fm.Map(row, x)
	s.accum(row, y, 1)
	s.n++
	if s.nAdd++; s.nAdd == batch {
		s.flushAdd()
	}
}

// Remove subtracts an event added before. It does not allocate.
func (s *Sums) Remove(x []float64, y float64) {
	row := s.rem[s.nRem*s.dim : (s.nRem+1)*s.dim]
	s.fm.Map(row, x)
	s.accum(row, y, -1)
	s.n--
	if s.nRem++; s.nRem == batch {
		s.flushRem()
	}
}

func (s *Sums) accum(phi []float64, y, sign float64) {
	for k, v := range phi {
		neumaier(&s.s1[k], &s.c1[k], sign*v)
		neumaier(&s.sy[k], &s.cy[k], sign*v*y)
	}
	neumaier(&s.sumY, &s.cY, sign*y)
}

// neumaier adds v to the compensated sum (*s, *c).
func neumaier(s, c *float64, v float64) {
	t := *s + v
	if math.Abs(*s) >= math.Abs(v) {
		*c += (*s - t) + v
	} else {
		*c += (v - t) + *s
	}
	*s = t
}

func (s *Sums) flushAdd() {
	if s.nAdd > 0 {
		s.syrk(s.add, s.nAdd, 1)
		s.nAdd = 0
	}
}

func (s *Sums) flushRem() {
	if s.nRem > 0 {
		s.syrk(s.rem, s.nRem, -1)
		s.nRem = 0
	}
}

func (s *Sums) syrk(rows []float64, k int, alpha float64) {
	s.ws.SyrkTN(s.dim, k, alpha, rows[:k*s.dim], s.dim, s.gram, s.dim)
}

// Copy sets s to a copy of src, pending events included, reusing s's
// memory; both must have been made by NewSums for the same feature map
// (it panics otherwise). It copies the upper triangle of ΦᵀΦ, about
// 4·D² bytes, and does not allocate: the refit model copies its running
// sums this way and fits the copy in the background while the original
// keeps following the stream.
func (s *Sums) Copy(src *Sums) {
	if s.fm != src.fm {
		panic("rank: Sums.Copy: different feature maps")
	}
	D := s.dim
	for i := range D {
		copy(s.gram[i*D+i:(i+1)*D], src.gram[i*D+i:(i+1)*D])
	}
	copy(s.s1, src.s1)
	copy(s.c1, src.c1)
	copy(s.sy, src.sy)
	copy(s.cy, src.cy)
	copy(s.add[:src.nAdd*D], src.add[:src.nAdd*D])
	copy(s.rem[:src.nRem*D], src.rem[:src.nRem*D])
	s.sumY, s.cY, s.n, s.nAdd, s.nRem = src.sumY, src.cY, src.n, src.nAdd, src.nRem
}

// SumsClose reports whether a and b hold the same statistics to rtol: the
// same n, and Σy, Φᵀ1, Φᵀy and ΦᵀΦ (compensation included) each within
// rtol of the other relative to the largest magnitude of that statistic
// (max-norm), so entries that cancel to nearly zero are judged on the
// scale of the whole matrix. It flushes the pending events of both.
func SumsClose(a, b *Sums, rtol float64) error {
	if a.dim != b.dim || a.fm.d != b.fm.d {
		return fmt.Errorf("rank: sums of dimension %d/%d, inputs %d/%d", a.dim, b.dim, a.fm.d, b.fm.d)
	}
	if a.n != b.n {
		return fmt.Errorf("rank: sums hold %d and %d events", a.n, b.n)
	}
	a.flushAdd()
	a.flushRem()
	b.flushAdd()
	b.flushRem()
	D := a.dim
	cmp := func(what string, n int, at func(s *Sums, i int) float64) error {
		var diff, norm float64
		worst := 0
		for i := range n {
			x, y := at(a, i), at(b, i)
			if dd := math.Abs(x - y); dd > diff || math.IsNaN(dd) {
				diff, worst = dd, i
			}
			norm = max(norm, math.Abs(x), math.Abs(y))
		}
		if diff > rtol*norm || math.IsNaN(diff) {
			return fmt.Errorf("rank: %s differ by %.3g (relative %.3g) at %d: %v vs %v",
				what, diff, diff/norm, worst, at(a, worst), at(b, worst))
		}
		return nil
	}
	if err := cmp("Σy", 1, func(s *Sums, _ int) float64 { return s.sumY + s.cY }); err != nil {
		return err
	}
	if err := cmp("Φᵀ1", D, func(s *Sums, i int) float64 { return s.s1[i] + s.c1[i] }); err != nil {
		return err
	}
	if err := cmp("Φᵀy", D, func(s *Sums, i int) float64 { return s.sy[i] + s.cy[i] }); err != nil {
		return err
	}
	return cmp("ΦᵀΦ", D*D, func(s *Sums, k int) float64 {
		i, j := k/D, k%D
		if j < i {
			i, j = j, i
		}
		return s.gram[i*D+j]
	})
}

// Fit solves the centred ridge problem of LSRRank with the approximate
// kernel <φ(x), φ(x')>: f(x) = <w, φ(x)> + b with
//
//	(ΦᵀHΦ + (nλ/2) I) w = ΦᵀH y,   b = ȳ − <w, Φᵀ1>/n,
//
// ΦᵀHΦ = ΦᵀΦ − (Φᵀ1)(Φᵀ1)ᵀ/n and ΦᵀHy = Φᵀy − (Φᵀ1)ȳ: one D×D Cholesky
// solve however many events the sums hold (w = Φᵀα for the α of the dual
// system with K = ΦΦᵀ). Fit flushes pending events; it allocates the
// D×D system and the model.
func (s *Sums) Fit(lambda float64) (*FeatureModel, error) {
	if !(lambda > 0 && !math.IsInf(lambda, 1)) {
		return nil, fmt.Errorf("%w: lambda must be finite and > 0, got %v", ErrConfig, lambda)
	}
	if s.n < 2 {
		return nil, fmt.Errorf("%w: %d events (need ≥ 2)", ErrConfig, s.n)
	}
	s.flushAdd()
	s.flushRem()
	D, n := s.dim, float64(s.n)
	a := make([]float64, D*D)
	w := make([]float64, D)
	ybar := (s.sumY + s.cY) / n
	s1 := make([]float64, D)
	for i := range D {
		s1[i] = s.s1[i] + s.c1[i]
	}
	ridge := n * lambda / 2
	for i := range D {
		ai, gi := a[i*D:(i+1)*D], s.gram[i*D:(i+1)*D]
		ci := s1[i] / n
		for j := i; j < D; j++ {
			ai[j] = gi[j] - ci*s1[j]
		}
		ai[i] += ridge
		w[i] = s.sy[i] + s.cy[i] - s1[i]*ybar
	}
	if err := cholSolve(a, D, w); err != nil {
		return nil, err
	}
	return &FeatureModel{fm: s.fm, lambda: lambda, n: s.n, w: w, b: ybar - dotp(w, s1)/n}, nil
}

// FitKRR solves kernel ridge regression with the approximate kernel, in
// scikit-learn's KernelRidge(alpha=λ) scaling and without intercept:
//
//	(ΦᵀΦ + λ I) w = Φᵀy,   f(x) = <w, φ(x)>,
//
// the primal form of the dual (ΦΦᵀ + λ I) α = y with w = Φᵀα. One D×D
// Cholesky solve however many events the sums hold; it flushes pending
// events and allocates the system and the model.
func (s *Sums) FitKRR(lambda float64) (*FeatureModel, error) {
	if !(lambda > 0 && !math.IsInf(lambda, 1)) {
		return nil, fmt.Errorf("%w: lambda must be finite and > 0, got %v", ErrConfig, lambda)
	}
	if s.n < 1 {
		return nil, fmt.Errorf("%w: %d events (need ≥ 1)", ErrConfig, s.n)
	}
	s.flushAdd()
	s.flushRem()
	D := s.dim
	a := make([]float64, D*D)
	w := make([]float64, D)
	for i := range D {
		copy(a[i*D+i:(i+1)*D], s.gram[i*D+i:(i+1)*D])
		a[i*D+i] += lambda
		w[i] = s.sy[i] + s.cy[i]
	}
	if err := cholSolve(a, D, w); err != nil {
		return nil, err
	}
	return &FeatureModel{fm: s.fm, lambda: lambda, n: s.n, w: w}, nil
}

// FeatureModel is a fitted random-feature model f(x) = <w, φ(x)> + b. It
// is immutable and safe for concurrent use.
type FeatureModel struct {
	fm     *FeatureMap
	lambda float64
	n      int64
	w      []float64
	b      float64
}

// Predict returns f(x). It does not allocate.
func (m *FeatureModel) Predict(x []float64) float64 {
	if len(x) != m.fm.d {
		panic(fmt.Sprintf("rank: Predict: %d features, want %d", len(x), m.fm.d))
	}
	return m.fm.dotPhi(m.w, x) + m.b
}

// N is the number of events the model was fitted on.
func (m *FeatureModel) N() int64 { return m.n }

// Weights returns w (a view: do not modify).
func (m *FeatureModel) Weights() []float64 { return m.w }

// Offset returns b.
func (m *FeatureModel) Offset() float64 { return m.b }

// FeatureMap returns φ.
func (m *FeatureModel) FeatureMap() *FeatureMap { return m.fm }
