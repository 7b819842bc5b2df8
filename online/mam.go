package online

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online/internal/vmath"
)

// MAM is the maximal-average-margin classifier of docs/math.md §3 on an explicit
// feature map φ with ‖φ‖ ≤ 1 (B = 1), learned online from running sums.
//
// Plain (Spec.Balance false), the paper's solution: s = Σ y_i φ(x_i),
//
//	f(x) = <s, φ(x)>/‖s‖,  M̂ = ‖s‖/n,  R̂ = (2/n)·sqrt(tr Ω).
//
// Balanced (Spec.Balance true), the class-mean difference with an offset:
// w = μ₊ − μ₋ (μ± = S±/n±), b = (‖μ₋‖² − ‖μ₊‖²)/2. The offset is absorbed by
// a constant coordinate, φ̃(x) = [φ(x); 1]/√2 (‖φ̃‖ ≤ 1, so B = 1), w̃ = [w; b]:
//
//	f(x) = <w̃, φ̃(x)>/‖w̃‖ = (<w, φ(x)> + b) / (√2·sqrt(‖w‖² + b²)),
//
// and the bound uses its own average margin (docs/math.md §3, "Variants"):
//
//	M̂_w = <w̃, s̃>/(n‖w̃‖) = (<w, s> + b·(n₊ − n₋)) / (√2·n·sqrt(‖w‖² + b²)),
//	R̂ = (2/n)·sqrt(tr Ω̃),  tr Ω̃ = (tr Ω + n)/2  (= n for unit-norm φ),
//
// with s̃ = Σ y_i φ̃(x_i) = [s; n₊ − n₋]/√2. M̂_w is exactly (1/n) Σ y_i f(x_i).
// While one class has no examples, μ for it is undefined and the balanced
// model falls back to the plain sum in the augmented space, w̃ = s̃ direction
// (w = s, b = n₊ − n₋), which predicts the one class seen so far for most
// inputs; the formulas above hold unchanged with that w and b.
//
// State: counts n, n₊, n₋; tr Ω = Σ ‖φ(x_i)‖²; the plain model keeps s, the
// balanced model S₊ and S₋ (s = S₊ − S₋). Every sum is compensated
// (Neumaier: the rounding error of each addition, obtained exactly with the
// branch-free TwoSum, is accumulated in a second vector) so that 10⁹ updates
// do not drift. A labelled event is one O(dim φ) pass (vmath.PlainFused,
// vmath.BalancedFused): the score <w, φ> with the direction w of the state
// before, the update of the sums, and the new w with the sums that give the
// offset b, the normaliser and the bound's M̂ and R̂ (balanced: ‖w‖²,
// <w, μ₊> and <w, μ₋>, so b = −<w, μ₊ + μ₋>/2 and <w, s> = n₊<w, μ₊> −
// n₋<w, μ₋>); nothing depends on n. The derived state is a function of the
// sums and counts alone (a restore recomputes it to the bit).
//
// An empty model (or f(x) = 0) makes no decision: Label 0.
//
// Forgetting (docs/math.md §3, "Variants"; at most one of the two):
//
//   - Spec.Window = N > 0, an exact sliding window: the model holds the
//     inputs and labels of the last N labelled examples (N·d floats). When
//     the window is full, the example leaving it is mapped again with the
//     same (deterministic) feature map and subtracted from the compensated
//     sums, counts and tr Ω before the new one is added, so the state is
//     that of a model trained on the window alone: O(dim φ) per event (two
//     feature maps). Everything above holds with n = the window's size.
//   - Spec.HalfLife = h > 0, exponential decay: before an example is added
//     every sum and weight is multiplied by λ = 2^(−1/h), so example i has
//     weight w_i = λ^age (age in labelled examples, 0 for the newest). The
//     model keeps W = Σ w_i, Q = Σ w_i², W± and, in place of tr Ω,
//     Σ w_i²·‖φ(x_i)‖², and uses the weighted sums s = Σ w_i y_i φ(x_i),
//     S± = Σ_{y_i=±1} w_i φ(x_i), μ± = S±/W±. The bound (derivation at
//     learnDecay) uses M̂ = (1/W) Σ w_i y_i f(x_i) (‖s‖/W plain),
//     R̂ = (2/W)·sqrt(Σ w_i² K(x_i, x_i)) and n_eff = W²/Q in place of n
//     in the deviation term. Prediction.N is n_eff rounded. The scaling is
//     fused into the O(dim φ) update pass, with the exact rounding error of
//     each product (FMA) added to the compensation; values below 2⁻⁶⁰⁰
//     (weights of examples about 600 half-lives old) are flushed to 0 so
//     that nothing decays into subnormal numbers.
type MAM struct {
	p      MAMParams
	dim    int
	fm     *FeatureMap
	prep   []float64 // scratch: Observe's preparation of the current event, [φ(x); ‖φ(x)‖²; ok]
	phi    []float64 // prep[:dim φ]: φ(x) of the current event (Observe)
	lnTerm float64   // ln(2/δ)

	n, nPos, nNeg int64
	tr, trC       float64 // tr Ω and its compensation

	s, sC     []float64 // plain: Σ y_i φ(x_i) and compensation
	pos, posC []float64 // balanced: S₊ and compensation
	neg, negC []float64 // balanced: S₋ and compensation

	// Sliding window (Spec.Window > 0): the inputs and labels of the last
	// Window labelled examples, slot (total mod Window) holding the next
	// one. n, n₊, n₋, tr Ω and the sums cover the window only.
	ring   []float64 // Window×d inputs, slot i at ring[i·d : (i+1)·d]
	ringY  []int8    // labels ±1
	total  int64     // labelled examples learned in all
	phiOld []float64 // scratch: φ of the example leaving the window

	// Exponential decay (Spec.HalfLife > 0): weights w_i = λ^age,
	// λ = 2^(−1/HalfLife). n, n₊, n₋ count every example learned; tr Ω
	// holds Σ w_i²‖φ(x_i)‖² and the sums are weighted (see decay below).
	decay       bool    // Spec.HalfLife > 0
	lam, lam2   float64 // λ and λ² (λ underflows to 0 for a tiny half-life)
	sweepEvery  int64   // flush tiny values when n is a multiple of this
	wt, wtC     float64 // W = Σ w_i and compensation
	wq, wqC     float64 // Q = Σ w_i² and compensation
	wPos, wPosC float64 // W₊ = Σ_{y_i=+1} w_i and compensation
	wNeg, wNegC float64 // W₋ and compensation

	// Derived by update after every change of state.
	w      []float64 // score direction (s for plain)
	b      float64   // offset in f = (<w, φ> + b)·k
	k      float64   // normaliser; 0 = no decision
	margin float64   // M̂ (M̂_w when balanced)
	rad    float64   // R̂
	neff   float64   // n (n_eff = W²/Q under decay)
	pn     int64     // Prediction.N: n, or n_eff rounded under decay
	num    float64   // boundNumerator(1, margin, rad, neff, lnTerm)

	// Gamma auto (kernel.gamma 0, mam_auto.go): the statistics live in one
	// MAM per bandwidth, and m keeps only p, dim, fm (the unit-gamma
	// reference map), prep and the window's ring; nil for a fixed gamma.
	auto *mamAuto

	// ObserveSparse's state (mam_sparse.go); nil until its first call.
	sp *mamSparse
}

var (
	_ Model    = (*MAM)(nil)
	_ Preparer = (*MAM)(nil)
)

// MAMName is the configuration's name of the MAM classifier type.
const MAMName = "mam"

// MAMParams are the parameters of type "mam": the kernel and its feature
// map, the form, the bound's δ, and optionally the exact kernel mode or a
// way of forgetting.
type MAMParams struct {
	// Kernel defaults to rbf, gamma auto (0), 1024 frequencies, seed 1.
	// Gamma 0 with rbf or laplacian random features is "auto" (mam_auto.go):
	// Bandwidths kernel widths learned at once on a grid fixed from the
	// spread of the first inputs, scoring with a mixture weighted by their
	// recent prequential errors. The exact kernel mode (Budget > 0) has no
	// auto: its default gamma stays DefaultGamma (10).
	Kernel  KernelSpec `yaml:"kernel"`
	Balance bool       `yaml:"balance"` // class-balanced direction μ₊ − μ₋ with offset (default true)
	Delta   float64    `yaml:"delta"`   // δ of the certainty bound, in (0, 1) (default 0.05)
	// Budget > 0 selects the exact kernel mode: the last Budget labelled
	// examples are stored and every score sums the exact kernel over them
	// (ExactMAM, O(Budget·d) per event); it is also the window.
	Budget int    `yaml:"budget"`
	Window Window `yaml:"window"` // exact sliding window (random features only)
	Decay  Decay  `yaml:"decay"`  // exponential forgetting (random features only)
	// Bandwidths is the number B of kernel widths of gamma auto, in
	// [2, 16]; 0 = DefaultBandwidths (6). Only with gamma auto.
	Bandwidths int `yaml:"bandwidths"`
}

// DefaultDelta is the default δ of the certainty bound.
const DefaultDelta = 0.05

// DefaultMAMParams returns the defaults of type "mam": rbf random
// features with gamma auto.
func DefaultMAMParams() MAMParams {
	k := DefaultKernel()
	k.Gamma = 0 // auto
	return MAMParams{Kernel: k, Balance: true, Delta: DefaultDelta}
}

// Complete applies the kernel type's defaults (see KernelSpec) to the keys
// not given; the exact kernel mode has no random features or seed. The
// random-feature rbf and laplacian kernels default to gamma auto (0); the
// exact kernel mode keeps DefaultGamma. Bandwidths not given is cleared
// unless gamma is auto (where 0 means DefaultBandwidths).
func (p *MAMParams) Complete(_ int, given func(string) bool) {
	p.Kernel.complete(given, p.Budget > 0)
	if !given("kernel.gamma") && p.Budget == 0 && (p.Kernel.Type == KernelRBF || p.Kernel.Type == KernelLaplacian) {
		p.Kernel.Gamma = 0
	}
	if !given("bandwidths") && !p.autoGamma() {
		p.Bandwidths = 0
	}
}

// Validate checks the parameters for inputs of dimension dim.
func (p *MAMParams) Validate(dim int) error {
	var c checks
	c.delta(p.Delta)
	switch {
	case p.Budget < 0:
		c.add("budget", "must be ≥ 0 (0 = random features), got %d", p.Budget)
	case p.Budget > 0:
		c.add1(validateExactKernel(p.Kernel, dim))
		c.sparseKernel(p.Kernel, p.Budget)
		c.budget(p.Budget, dim)
		c.bandwidthsUnused(p.Bandwidths)
		if p.Window.Events != 0 || p.Decay.HalfLife != 0 {
			c.add("budget", "the exact kernel mode already keeps a sliding window of budget examples: remove window and decay")
		}
	default:
		c.validateAuto(p, dim)
		c.forgetting(p.Window, p.Decay, dim)
	}
	return c.err()
}

// maxDim is the largest input dimension of a mam with p: MaxSparseDim with
// a generated rbf or laplacian map (kernel.sparse: nothing is kept per
// input index), else the dense limit.
func (p *MAMParams) maxDim() int {
	if p.Budget == 0 {
		return kernelMaxDim(p.Kernel)
	}
	return maxDim
}

// MAMType is the "mam" model type (MAM, or ExactMAM with budget > 0).
func MAMType() *Type {
	return Define(Def[MAMParams]{
		Name:     MAMName,
		Doc:      "maximal-average-margin classifier: random-feature kernels (linear, rbf, laplacian) in O(dim φ) per event, or the exact kernel over the last `budget` examples",
		Defaults: DefaultMAMParams,
		Traits: func(p *MAMParams) Traits {
			return Traits{Kind: Classifier, Bound: p.Budget == 0 || p.Kernel.Type != KernelPolynomial}
		},
		New: func(dim int, p *MAMParams) (Model, error) {
			if p.Budget > 0 {
				return NewExactMAM(dim, *p)
			}
			return NewMAM(dim, *p)
		},
		Examples: func() []MAMParams {
			rff := DefaultMAMParams()
			rff.Kernel.Features, rff.Kernel.Gamma = 32, 1
			plain := rff
			plain.Balance = false
			linear := MAMParams{Kernel: KernelSpec{Type: KernelLinear}, Balance: true, Delta: DefaultDelta}
			window := rff
			window.Window.Events = 20
			decay := rff
			decay.Kernel.Type, decay.Decay.HalfLife = KernelLaplacian, 15
			exact := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Balance: true, Delta: DefaultDelta, Budget: 25}
			poly := MAMParams{Kernel: KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 1}, Delta: DefaultDelta, Budget: 25}
			sparse := decay // generated frequencies (kernel.sparse, hashed features)
			sparse.Kernel.Sparse = true
			return append([]MAMParams{rff, plain, linear, window, decay, exact, poly, sparse}, autoExamples()...)
		},
		Restore:    restoreMAM,
		LegacyTags: []string{legacyTagExactMAM},
	})
}

// restoreMAM restores a "mam" encoding: MAM, or ExactMAM when its budget is
// set (and version-1 encodings, whose exact mode had the tag "mam_exact").
func restoreMAM(b []byte) (Model, error) {
	var p MAMParams
	_, r := ReadHeader(b, MAMName, &p, func(tag string, s legacySpec) error { return legacyMAM(tag, s, &p) })
	if err := r.Err(); err != nil {
		return nil, err
	}
	var m Model = new(MAM)
	if p.Budget > 0 {
		m = new(ExactMAM)
	}
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return m, nil
}

// legacyTagExactMAM is the type tag of ExactMAM's version-1 encoding.
const legacyTagExactMAM = "mam_exact"

// legacyMAM reads a version-1 mam spec.
func legacyMAM(tag string, s legacySpec, p *MAMParams) error {
	if tag != MAMName && tag != legacyTagExactMAM {
		return fmt.Errorf("model type %q, want %q", tag, MAMName)
	}
	if (tag == legacyTagExactMAM) != (s.Budget > 0) {
		return fmt.Errorf("type %q with budget %d", tag, s.Budget)
	}
	if s.Levels != 0 || len(s.Edges) != 0 || s.Normalize || s.LearningRate != 0 || s.L2 != 0 {
		return errors.New("fields of another model type set")
	}
	*p = MAMParams{Kernel: s.Kernel, Balance: s.Balance, Delta: s.Delta, Budget: s.Budget,
		Window: Window{Events: s.Window}, Decay: Decay{HalfLife: s.HalfLife}}
	return nil
}

// NewMAM builds an empty MAM classifier for inputs of dimension dim (the
// random-feature mode: p.Budget must be 0).
func NewMAM(dim int, p MAMParams) (*MAM, error) {
	if p.Budget != 0 {
		return nil, specErrorf("budget", "NewMAM is the random-feature mode: budget must be 0 (use NewExactMAM), got %d", p.Budget)
	}
	if err := validateDimFor(dim, &p); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	if p.autoGamma() {
		return newAutoMAM(dim, p)
	}
	fm, err := NewFeatureMap(p.Kernel, dim)
	if err != nil {
		return nil, err
	}
	m := &MAM{p: p, dim: dim, fm: fm}
	m.alloc()
	m.refresh()
	return m, nil
}

// Window is the "window" key of the online models that forget (mam, omam,
// lda): an exact sliding window over the last Events labelled examples.
type Window struct {
	Events int `yaml:"events"` // 0 = no window
}

// Decay is the "decay" key: exponential forgetting, example i weighing
// 2^(−age/HalfLife) with age counted in labelled examples.
type Decay struct {
	HalfLife float64 `yaml:"half_life"` // 0 = no decay
}

// maxWindowFloats limits Window·Dim, the size of the window's ring of
// inputs (256 MiB).
const maxWindowFloats = 1 << 25

// forgetting checks window and decay for inputs of dimension dim.
func (c *checks) forgetting(w Window, d Decay, dim int) {
	if w.Events < 0 || (dim > 0 && w.Events > maxWindowFloats/dim) {
		c.add("window.events", "must be ≥ 0 (0 = no window) with window×dim ≤ %d, got %d×%d", maxWindowFloats, w.Events, dim)
	}
	if !(d.HalfLife >= 0) || math.IsInf(d.HalfLife, 0) {
		c.add("decay.half_life", "must be ≥ 0 and finite (0 = no decay), got %v", d.HalfLife)
	}
	if w.Events > 0 && d.HalfLife > 0 {
		c.add("decay.half_life", "cannot be combined with window.events (%d): choose one way of forgetting", w.Events)
	}
}

func (m *MAM) alloc() {
	p := m.fm.Dim()
	m.prep = make([]float64, p+2)
	m.phi = m.prep[:p:p]
	m.w = make([]float64, p)
	m.lnTerm = math.Log(2 / m.p.Delta)
	if m.p.Balance {
		m.pos, m.posC = make([]float64, p), make([]float64, p)
		m.neg, m.negC = make([]float64, p), make([]float64, p)
	} else {
		m.s, m.sC = make([]float64, p), make([]float64, p)
	}
	if n := m.p.Window.Events; n > 0 {
		m.ring = make([]float64, n*m.dim)
		m.ringY = make([]int8, n)
		m.phiOld = make([]float64, p)
	}
	if h := m.p.Decay.HalfLife; h > 0 {
		m.decay = true
		m.lam = math.Exp2(-1 / h)
		m.lam2 = m.lam * m.lam
		// Between two sweeps a value shrinks by λ^sweepEvery ≥ 2⁻²⁵⁶, so
		// nothing flushed at 2⁻⁶⁰⁰ gets near the subnormal range (2⁻¹⁰²²).
		m.sweepEvery = int64(max(1, min(256, math.Floor(256*h))))
	}
}

// Type returns "mam".
func (m *MAM) Type() string { return MAMName }

// Dim returns the input dimension d.
func (m *MAM) Dim() int { return m.dim }

// Params returns the model's parameters.
func (m *MAM) Params() MAMParams { return m.p }

// FeatureMap returns the model's feature map; under gamma auto the
// reference map (gamma 1) whose projection every bandwidth scales.
func (m *MAM) FeatureMap() *FeatureMap { return m.fm }

// Label maps −1 and 0 (false) to −1 and +1 (true) to +1.
func (m *MAM) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Examples returns the number of labelled examples learned in all: n, or
// with a window every example that has passed through it (n, the window's
// size, is Prediction.N).
func (m *MAM) Examples() int64 {
	if m.auto != nil {
		return m.auto.total
	}
	if m.ring != nil {
		return m.total
	}
	return m.n
}

// ClassCounts returns n₊ and n₋: the window's under a window, every
// example learned under decay.
func (m *MAM) ClassCounts() (pos, neg int64) { s := m.cur(); return s.nPos, s.nNeg }

// EffectiveN returns the n of the bound's deviation term: n (the window's
// size under a window), n_eff = (Σ w_i)²/Σ w_i² under decay.
func (m *MAM) EffectiveN() float64 { return m.cur().neff }

// Weights returns W = Σ w_i, Q = Σ w_i² and W± under decay; without decay
// every weight is 1 and they are n, n, n₊, n₋.
func (m *MAM) Weights() (sum, sumSq, pos, neg float64) {
	if m.auto != nil {
		return m.cur().Weights()
	}
	if m.decay {
		return m.wt + m.wtC, m.wq + m.wqC, m.wPos + m.wPosC, m.wNeg + m.wNegC
	}
	n := float64(m.n)
	return n, n, float64(m.nPos), float64(m.nNeg)
}

// Version returns 1.
func (m *MAM) Version() int64 { return 1 }

// AverageMargin returns M̂ (M̂_w for the balanced model), 0 when empty.
// Under gamma auto it is the mixture's, Σ α_b M̂_b (mam_auto.go).
func (m *MAM) AverageMargin() float64 {
	if m.auto != nil {
		return m.auto.margin
	}
	return m.margin
}

// Rademacher returns R̂ = (2/n)·sqrt(tr Ω) (tr Ω̃ for the balanced model),
// 0 when empty; under decay R̂ = (2/W)·sqrt(Σ w_i² K(x_i, x_i)).
// Under gamma auto it is the mixture's, Σ α_b R̂_b.
func (m *MAM) Rademacher() float64 {
	if m.auto != nil {
		return m.auto.rad
	}
	return m.rad
}

// Bound returns the certainty bound at margin rho with the model's δ and
// B = 1: MistakeBound(1, AverageMargin(), Rademacher(), EffectiveN(), δ,
// rho). With a window it is the bound of the window's examples; under
// decay that of the weighted sample (n_eff in place of n).
// Under gamma auto it is the mixture's bound, with δ/B per bandwidth
// (mam_auto.go).
func (m *MAM) Bound(rho float64) float64 {
	if m.auto != nil {
		return boundAt(m.auto.num, 1, rho)
	}
	return boundAt(m.num, 1, rho)
}

// Observe scores x, then learns (x, y) if labelled. Inputs with a NaN or
// infinite entry are neither scored nor learned: the Prediction then has
// Score 0, Label 0 and HasBound false. It panics if len(x) != Dim() or if
// labelled and y is not −1 or +1. It is Prepare into the model's own
// scratch followed by ObservePrepared.
func (m *MAM) Observe(x []float64, y float64, labelled bool) (p Prediction) {
	m.Prepare(m.prep, x)
	m.observePrepared(&p, m.prep, x, y, labelled)
	return p
}

// PreparedLen returns dim φ + 2, the length of Prepare's buffer (under
// gamma auto D + 1: the projection and the ok flag).
func (m *MAM) PreparedLen() int {
	if m.auto != nil {
		return m.fm.Dim()/2 + 1
	}
	return m.fm.Dim() + 2
}

// Prepare writes [φ(x); ‖φ(x)‖²; ok] into dst, ok being 1 when x is
// finite and 0 otherwise (φ is then unspecified). It reads only the feature
// map, so it may run concurrently with Prepare, Observe, ObservePrepared
// and the other methods that change the learned state (but not with
// UnmarshalBinary, which replaces the map). Every variant (plain or
// balanced, any kernel, window or decay) prepares the same way. It panics
// unless len(dst) == PreparedLen() and len(x) == Dim(); it does not
// allocate.
func (m *MAM) Prepare(dst, x []float64) {
	if m.auto != nil {
		m.auto.prepare(m, dst, x)
		return
	}
	p := m.fm.Dim()
	if len(dst) != p+2 {
		panic("online: MAM.Prepare: len(dst) != PreparedLen()")
	}
	if len(x) != m.dim {
		panic("online: MAM.Prepare: len(x) != Dim()")
	}
	sq, ok := m.fm.Map(dst[:p], x)
	f := 0.0
	if ok {
		f = 1
	}
	dst[p], dst[p+1] = sq, f
}

// ObservePrepared is Observe(x, y, labelled) with prep written by
// Prepare(prep, x): it scores and learns φ(x) from prep without mapping x
// again (the window still stores x itself, and maps the example leaving
// it). A prep not prepared from x gives a state that is not the model of
// its examples. It panics as Observe does, or if len(prep) !=
// PreparedLen(); it does not allocate or modify prep. It needs exclusive
// use of the model.
func (m *MAM) ObservePrepared(prep, x []float64, y float64, labelled bool) (p Prediction) {
	if len(x) != m.dim {
		panic("online: MAM.ObservePrepared: len(x) != Dim()")
	}
	m.observePrepared(&p, prep, x, y, labelled)
	return p
}

// observePrepared is ObservePrepared with the Prediction written to *p, so
// that Observe shares it without copying a Prediction returned by another
// call: the compiler moves such a struct through memory in 16-byte loads
// over 8-byte stores, which defeats store-to-load forwarding and cost the
// linear MAM's Observe about 10% (amd64).
func (m *MAM) observePrepared(p *Prediction, prep, x []float64, y float64, labelled bool) {
	if m.auto != nil {
		m.auto.observe(m, p, prep, x, y, labelled)
		return
	}
	if m.sp != nil && m.sp.stale {
		m.syncSparse() // w after sparse events (mam_sparse.go)
	}
	np := len(m.phi)
	if len(prep) != np+2 {
		panic("online: MAM.ObservePrepared: len(prep) != PreparedLen()")
	}
	if x != nil && len(x) != m.dim { // nil: a sparse event (mam_sparse_rff.go)
		panic("online: MAM.ObservePrepared: len(x) != Dim()")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: MAM.Observe: label must be -1 or +1 (see Label)")
	}
	*p = Prediction{Delta: m.p.Delta, N: m.pn}
	if prep[np+1] == 0 {
		return
	}
	phi, sq := prep[:np:np], prep[np]
	num := m.num // the bound of the state that scores
	var f float64
	if labelled {
		if m.ring != nil {
			m.slide(x, y)
		}
		f = m.scoreLearn(phi, y, sq)
	} else {
		f = m.score(phi)
	}
	p.Score = f
	switch {
	case f > 0:
		p.Label = 1
	case f < 0:
		p.Label = -1
	}
	p.MistakeBound = boundAt(num, 1, math.Abs(f))
	p.HasBound = true
}

// score returns f = (<w, φ> + b)·k (no −0).
func (m *MAM) score(phi []float64) float64 {
	f := (vmath.Dot(m.w, phi) + m.b) * m.k
	if f == 0 {
		f = 0 // no −0 on the wire
	}
	return f
}

// scoreLearn returns the score of φ = phi as score does, then learns it
// with label y and ‖φ‖² = sq (learn, or learnDecay); without decay the
// score's inner product comes out of the update's pass. A window's slide
// must already have been made (it does not change w, b or k).
func (m *MAM) scoreLearn(phi []float64, y, sq float64) float64 {
	if m.decay {
		f := m.score(phi)
		m.learnDecay(phi, y, sq)
		return f
	}
	b, k := m.b, m.k
	f := (m.learn(phi, y, sq) + b) * k
	if f == 0 {
		f = 0
	}
	return f
}

// learn adds φ = phi with label y and ‖φ‖² = sq (no decay), and returns
// <w, φ> for the direction w before (from the same pass).
func (m *MAM) learn(phi []float64, y, sq float64) float64 {
	m.n++
	if y > 0 {
		m.nPos++
	} else {
		m.nNeg++
	}
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, sq)
	return m.update(phi, y)
}

// update adds x to the sums of class y (x = 0 adds nothing) and recomputes
// the derived state (w, b, k, M̂, R̂, bound numerator) in the same pass,
// which also returns <w, x> for the w before. Counts and tr Ω must already
// include the example. Restoring a model runs update with x = 0, so a
// restored model is bit-identical to the saved one.
func (m *MAM) update(x []float64, y float64) float64 { return m.derive(x, y, false) }

// derive is update; with scale (decay) every sum is first multiplied by λ
// in the same pass (the weights W, Q, W± and tr must already be decayed
// and include the example), and the returned inner product is 0. The
// decaying passes compute w and its sums exactly as the plain ones do, so
// that refresh (scale false) rebuilds the same derived state bit for bit.
func (m *MAM) derive(x []float64, y float64, scale bool) (f float64) {
	if m.sp != nil { // a dense pass: ObserveSparse's scalars are to be recomputed
		m.sp.valid, m.sp.stale = false, false
	}
	if m.n == 0 {
		clear(m.w)
		m.b, m.k, m.margin, m.rad, m.neff, m.pn, m.num = 0, 0, 0, 0, 0, 0, math.NaN()
		return 0
	}
	// W is the total weight, Q = Σ w_i², neff = W²/Q and wp, wn the class
	// weights; every weight is 1 without decay.
	n := float64(m.n)
	W, Q, neff, wp, wn := n, n, n, float64(m.nPos), float64(m.nNeg)
	m.pn = m.n
	if m.decay {
		W, Q = m.wt+m.wtC, m.wq+m.wqC
		wp, wn = m.wPos+m.wPosC, m.wNeg+m.wNegC
		neff = W * W / Q
		m.pn = int64(math.Round(neff))
	}
	invN := 1 / W
	tr := m.tr + m.trC
	if !m.p.Balance {
		var ss float64
		if scale {
			ss = vmath.PlainDecay(m.w, m.s, m.sC, x, y, m.lam)
		} else {
			f, ss = vmath.PlainFused(m.w, m.s, m.sC, x, y)
		}
		m.b, m.k = 0, 0
		if ss > 0 {
			m.k = 1 / math.Sqrt(ss)
		}
		m.margin = math.Sqrt(ss) * invN
		m.rad = 2 * invN * math.Sqrt(tr)
	} else {
		// Class means when both classes are present; else it = io = 1
		// gives w = s, the plain-sum fallback.
		both := wp > 0 && wn > 0
		t, tc, o, oc := m.pos, m.posC, m.neg, m.negC
		ft, fo := wp, wn
		if y < 0 {
			t, tc, o, oc = o, oc, t, tc
			ft, fo = fo, ft
		}
		it, io := 1.0, 1.0
		if both {
			// 1/W_t and 1/W_o with one division.
			inv := 1 / (ft * fo)
			it, io = fo*inv, ft*inv
		}
		// The pass sets w = T·(y·it) − O·(y·io) = μ₊ − μ₋ (negation is
		// exact) and returns pt = <w, T·(y·it)>, po = <w, O·(y·io)>.
		var ww, pt, po float64
		if scale {
			ww, pt, po = vmath.BalancedDecay(m.w, t, tc, o, oc, x, y*it, y*io, m.lam)
		} else {
			f, ww, pt, po = vmath.BalancedFused(m.w, t, tc, o, oc, x, y*it, y*io)
		}
		mp, mn := pt, po // <w, μ₊>, <w, μ₋>
		if y < 0 {
			mp, mn = -po, -pt
		}
		sumY := wp - wn
		ws := ww // <w, s>: w = s while a class is empty
		m.b = sumY
		if both {
			// b = (‖μ₋‖² − ‖μ₊‖²)/2 = −<w, μ₊ + μ₋>/2 and s = W₊μ₊ − W₋μ₋.
			m.b = -(mp + mn) / 2
			ws = wp*mp - wn*mn
		}
		den := ww + m.b*m.b
		m.k = 0
		if den > 0 {
			m.k = 1 / math.Sqrt(2*den)
		}
		m.margin = (ws + m.b*sumY) * m.k * invN
		m.rad = 2 * invN * math.Sqrt((tr+Q)/2)
	}
	m.neff = neff
	m.num = boundNumerator(1, m.margin, m.rad, neff, m.lnTerm)
	return f
}

// slide makes room for the labelled example (x, y) in the window: when the
// window is full, the oldest example is mapped again and subtracted
// (unlearn); then (x, y) takes its slot. learn adds the new example.
func (m *MAM) slide(x []float64, y float64) {
	d, size := m.dim, int64(m.p.Window.Events)
	slot := int(m.total % size)
	xs := m.ring[slot*d : (slot+1)*d]
	if m.n == size {
		sq, _ := m.fm.Map(m.phiOld, xs) // stored inputs are finite
		m.unlearn(m.phiOld, float64(m.ringY[slot]), sq)
	}
	copy(xs, x)
	m.ringY[slot] = int8(y)
	m.total++
}

// unlearn subtracts the example (φ = phi, label yo, ‖φ‖² = sq) leaving the
// window from the counts, tr Ω and the sums (a class, or the window, left
// empty gets exact zeros).
func (m *MAM) unlearn(phi []float64, yo, sq float64) {
	m.n--
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, -sq)
	if m.n == 0 {
		m.tr, m.trC = 0, 0
	}
	switch {
	case !m.p.Balance:
		addScaled(m.s, m.sC, phi, -yo)
		if m.n == 0 {
			clear(m.s)
			clear(m.sC)
		}
	case yo > 0:
		if m.nPos--; m.nPos == 0 {
			clear(m.pos)
			clear(m.posC)
		} else {
			addScaled(m.pos, m.posC, phi, -1)
		}
	default:
		if m.nNeg--; m.nNeg == 0 {
			clear(m.neg)
			clear(m.negC)
		} else {
			addScaled(m.neg, m.negC, phi, -1)
		}
	}
	if !m.p.Balance {
		if yo > 0 {
			m.nPos--
		} else {
			m.nNeg--
		}
	}
}

// learnDecay adds φ = phi with label y and ‖φ‖² = sq under exponential
// decay: every weight and sum is multiplied by λ, then the example is added
// with weight 1.
//
// The bound under decay. Normalise the weights, p_i = w_i/W (Σ p_i = 1),
// and treat the sample as i.i.d. with these fixed weights (the weights
// depend on positions, not on the data). docs/math.md §3 (Lemma 2 with the
// empirical average margin replaced by the weighted one, Theorem 2):
//
//  1. Deviation. g = sup_{‖w‖≤1} (E[Y<w, φ(X)>] − Σ p_i y_i <w, φ(x_i)>)
//     changes by at most 2B·p_i when example i changes, so McDiarmid gives
//     P(g − E g ≥ t) ≤ exp(−2t²/Σ(2B p_i)²) = exp(−t²·n_eff/(2B²)) with
//     Σ p_i² = Q/W² = 1/n_eff: the unweighted case with n replaced by
//     n_eff (the same holds for the concentration of the empirical
//     Rademacher average, whose differences are also ≤ 2B·p_i). Hence
//     3B·sqrt(2 ln(2/δ)/n_eff).
//  2. Symmetrisation with a ghost sample under the same weights gives
//     E g ≤ 2·E sup_{‖w‖≤1} Σ p_i σ_i y_i <w, φ(x_i)>, and (Lemma 1, Jensen)
//     E_σ ‖Σ p_i σ_i φ(x_i)‖ ≤ sqrt(Σ p_i² K(x_i, x_i)), so
//     R̂ = 2·sqrt(Σ p_i² K_ii) = (2/W)·sqrt(Σ w_i² K(x_i, x_i)) (with
//     w_i = 1 this is (2/n)·sqrt(tr Ω)). For the balanced model
//     K̃_ii = (K_ii + 1)/2, so Σ w_i² K̃_ii = (Σ w_i² K_ii + Q)/2.
//  3. Markov on B − Y f(X) as in Theorem 2, with the weighted empirical
//     margin M̂ = Σ p_i y_i f(x_i): ‖s‖/W for the plain model (f = <s, φ>/‖s‖
//     with the weighted s), <w̃, s̃>/(W‖w̃‖) for the balanced one.
//
// So the published bound is MistakeBound(1, M̂, R̂, n_eff, δ, ρ). It is a
// statement about the distribution the weighted sample was drawn from
// (stationary data); under drift it describes the recent past, which is
// what forgetting is for. Using Σ w_i² K_ii rather than Σ w_i K_ii is the
// tighter of the two; both are valid since w_i ≤ 1.
func (m *MAM) learnDecay(phi []float64, y, sq float64) {
	if m.n%m.sweepEvery == 0 {
		m.sweep()
	}
	lam, lam2 := m.lam, m.lam2
	m.n++
	m.wt, m.wtC = scaleAcc(m.wt, m.wtC, lam, 1)
	m.wq, m.wqC = scaleAcc(m.wq, m.wqC, lam2, 1)
	m.tr, m.trC = scaleAcc(m.tr, m.trC, lam2, sq)
	if y > 0 {
		m.nPos++
		m.wPos, m.wPosC = scaleAcc(m.wPos, m.wPosC, lam, 1)
		m.wNeg, m.wNegC = scaleAcc(m.wNeg, m.wNegC, lam, 0)
	} else {
		m.nNeg++
		m.wPos, m.wPosC = scaleAcc(m.wPos, m.wPosC, lam, 0)
		m.wNeg, m.wNegC = scaleAcc(m.wNeg, m.wNegC, lam, 1)
	}
	m.derive(phi, y, true)
}

// tiny is the flush threshold of sweep: a value below it is at most 2⁻⁶⁰⁰
// while W ≥ 1 after the first example, far below the sums' resolution.
const tiny = 0x1p-600

// sweep sets values below tiny in magnitude to 0 (decay only), and empties
// a class whose weight fell below it. It runs at fixed multiples of n, so a
// restored model sweeps at the same events.
func (m *MAM) sweep() {
	flush := func(v []float64) {
		for i, x := range v {
			if math.Abs(x) < tiny {
				v[i] = 0
			}
		}
	}
	if m.p.Balance {
		if math.Abs(m.wPos+m.wPosC) < tiny {
			m.wPos, m.wPosC = 0, 0
			clear(m.pos)
			clear(m.posC)
		}
		if math.Abs(m.wNeg+m.wNegC) < tiny {
			m.wNeg, m.wNegC = 0, 0
			clear(m.neg)
			clear(m.negC)
		}
	} else {
		if math.Abs(m.wPos+m.wPosC) < tiny {
			m.wPos, m.wPosC = 0, 0
		}
		if math.Abs(m.wNeg+m.wNegC) < tiny {
			m.wNeg, m.wNegC = 0, 0
		}
	}
	for _, v := range m.vectors() {
		flush(v)
	}
	for _, p := range []*float64{&m.tr, &m.trC, &m.wtC, &m.wqC, &m.wPosC, &m.wNegC} {
		if math.Abs(*p) < tiny {
			*p = 0
		}
	}
}

// refresh recomputes the derived state from the sums (after a restore).
func (m *MAM) refresh() {
	clear(m.phi)
	m.update(m.phi, 1)
}

// twoSumAcc adds x to the compensated sum (s, c): the new s is fl(s + x)
// and the exact rounding error of that addition (Knuth's TwoSum, equal to
// Neumaier's branchy form) is added to c. The value of the sum is s + c.
func twoSumAcc(s, c, x float64) (float64, float64) { return vmath.TwoSum(s, c, x) }

// scaleAcc multiplies the compensated sum (s, c) by lam, adding the exact
// rounding error of the product (FMA) to c, then adds x as twoSumAcc does.
func scaleAcc(s, c, lam, x float64) (float64, float64) {
	t := s * lam
	c = c*lam + math.FMA(s, lam, -t)
	return twoSumAcc(t, c, x)
}

// addScaled adds a·x (a = ±1, so exact) to the compensated sum (s, c) as
// twoSumAcc does.
func addScaled(s, c, x []float64, a float64) {
	s, c = s[:len(x)], c[:len(x)]
	for i, xi := range x {
		v := a * xi
		si := s[i]
		t := si + v
		bp := t - si
		c[i] += (si - (t - bp)) + (v - bp)
		s[i] = t
	}
}

// dot returns <a, b>, len(a) == len(b) (the other models' inner product;
// the MAM's is vmath.Dot).
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
