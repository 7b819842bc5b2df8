package online

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/vmath"
)

// OMAMName is the configuration's name of the ordinal MAM type.
const OMAMName = "omam"

// Sizes of the threshold fit of OMAM (part of the model format).
const (
	omamThresholdBuffer = 1024 // T: (score, level) pairs of the last labelled events
	omamRefitEvery      = 64   // labelled events between threshold refits
	omamMaxLevels       = 1 << 16
)

// OMAMParams are the parameters of type "omam".
type OMAMParams struct {
	Kernel KernelSpec `yaml:"kernel"` // default rbf, gamma auto (omam_auto.go), 1024 frequencies, seed 1
	// Levels m ≥ 2: labels are the levels 1..m (required).
	Levels int `yaml:"levels"`
	// Edges, when set (m−1 strictly increasing values), bin real-valued
	// targets: level = 1 + #{edges e : e ≤ y}.
	Edges []float64 `yaml:"edges"`
	// Normalize selects the Nadaraya–Watson form m(x)/Σᵢ K(xᵢ, x), the
	// better ranker (default true).
	Normalize bool `yaml:"normalize"`
	// Budget > 0 selects the exact kernel mode (ExactOMAM) over the last
	// Budget labelled examples.
	Budget int    `yaml:"budget"`
	Window Window `yaml:"window"` // exact sliding window (random features only)
	Decay  Decay  `yaml:"decay"`  // exponential forgetting (random features only)
}

// DefaultOMAMParams returns the defaults of type "omam" (Levels has none).
func DefaultOMAMParams() OMAMParams {
	k := DefaultKernel()
	k.Gamma = 0 // auto (omam_auto.go)
	return OMAMParams{Kernel: k, Normalize: true}
}

// Complete applies the kernel type's defaults to the keys not given; the
// exact kernel mode has no random features or seed.
func (p *OMAMParams) Complete(_ int, given func(string) bool) {
	p.Kernel.complete(given, p.Budget > 0)
	if !given("kernel.gamma") && p.Budget == 0 && (p.Kernel.Type == KernelRBF || p.Kernel.Type == KernelLaplacian) {
		p.Kernel.Gamma = 0 // auto (omam_auto.go)
	}
}

// Validate checks the parameters for inputs of dimension dim.
func (p *OMAMParams) Validate(dim int) error {
	var c checks
	maxLevels := omamMaxLevels
	if p.Budget != 0 {
		maxLevels = omamExactMaxLevels
	}
	levelsOK := p.Levels >= 2 && p.Levels <= maxLevels
	if !levelsOK {
		c.add("levels", "required: the number of levels m, in [2, %d] (labels 1..m), got %d", maxLevels, p.Levels)
	}
	if len(p.Edges) != 0 {
		if levelsOK && len(p.Edges) != p.Levels-1 {
			c.add("edges", "has %d edges; levels %d needs levels−1 = %d", len(p.Edges), p.Levels, p.Levels-1)
		}
		for i, e := range p.Edges {
			if !isFinite(e) {
				c.add(fmt.Sprintf("edges[%d]", i), "must be finite, got %v", e)
			} else if i > 0 && !(e > p.Edges[i-1]) {
				c.add(fmt.Sprintf("edges[%d]", i), "edges must be strictly increasing: %v after %v", e, p.Edges[i-1])
			}
		}
	}
	switch {
	case p.Budget < 0:
		c.add("budget", "must be ≥ 0 (0 = random features), got %d", p.Budget)
	case p.Budget > 0:
		if p.Kernel.Gamma == 0 && (p.Kernel.Type == KernelRBF || p.Kernel.Type == KernelLaplacian) {
			c.add("kernel.gamma", "auto is not available in the exact kernel mode (budget > 0), whose kernel sums over the stored examples are kept at one width from the first event on: give a number")
		} else {
			c.add1(validateExactKernel(p.Kernel, dim))
		}
		c.sparseKernel(p.Kernel, p.Budget)
		if per := dim + 2*max(p.Levels, 0) + 3; p.Budget > maxBudgetFloats/per {
			c.add("budget", "must be ≥ 1 (0 = random-feature mode) with budget×(dim+2·levels+3) ≤ %d, got %d×%d", maxBudgetFloats, p.Budget, per)
		}
		if p.Window.Events != 0 || p.Decay.HalfLife != 0 {
			c.add("budget", "the exact kernel mode already keeps a sliding window of budget examples: remove window and decay")
		}
	default:
		if err := validateOMAMKernel(p, dim); err != nil {
			c.add1(err)
		} else if dp := omamFeatureDim(p, dim); levelsOK && dp*p.Levels > maxOmega {
			c.add("levels", "levels×dim φ must be ≤ %d, got %d×%d", maxOmega, p.Levels, dp)
		}
		c.forgetting(p.Window, p.Decay, dim)
	}
	return c.err()
}

// OMAMType is the "omam" model type (OMAM, or ExactOMAM with budget > 0).
func OMAMType() *Type {
	return Define(Def[OMAMParams]{
		Name:     OMAMName,
		Doc:      "ordinal MAM: rank-weighted kernel score over levels 1..m, raw or Nadaraya–Watson normalised, levels from refitted thresholds; random features or the exact kernel (`budget`)",
		Defaults: DefaultOMAMParams,
		Traits:   func(p *OMAMParams) Traits { return Traits{Kind: Ordinal, Levels: p.Levels} },
		New: func(dim int, p *OMAMParams) (Model, error) {
			if p.Budget > 0 {
				return NewExactOMAM(dim, *p)
			}
			return NewOMAM(dim, *p)
		},
		Examples: func() []OMAMParams {
			rff := DefaultOMAMParams()
			rff.Levels, rff.Kernel.Features, rff.Kernel.Gamma = 3, 32, 1
			raw := rff
			raw.Normalize = false
			window := rff
			window.Window.Events = 20
			decay := rff
			decay.Decay.HalfLife = 15
			exact := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Levels: 3, Normalize: true, Budget: 25}
			edges := OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 3, Edges: []float64{1.5, 2.5}}
			sparse := decay // generated frequencies (kernel.sparse, hashed features)
			sparse.Kernel.Sparse = true
			auto := rff // gamma auto (omam_auto.go)
			auto.Kernel.Gamma = 0
			autoWindow := window
			autoWindow.Kernel.Gamma = 0
			sparseAuto := auto // generated frequencies: warm-up inputs kept by their entries
			sparseAuto.Kernel.Sparse = true
			sparseAutoWindow := autoWindow // dense input only (a window): replays densify the kept entries
			sparseAutoWindow.Kernel.Type, sparseAutoWindow.Kernel.Sparse = KernelLaplacian, true
			return []OMAMParams{rff, raw, window, decay, exact, edges, sparse, auto, autoWindow, sparseAuto, sparseAutoWindow}
		},
		Restore:    restoreOMAM,
		LegacyTags: []string{legacyTagExactOMAM},
	})
}

// restoreOMAM restores an "omam" encoding: OMAM, or ExactOMAM when its
// budget is set.
func restoreOMAM(b []byte) (Model, error) {
	var p OMAMParams
	_, r := ReadHeader(b, OMAMName, &p, func(tag string, s legacySpec) error { return legacyOMAM(tag, s, &p) })
	if err := r.Err(); err != nil {
		return nil, err
	}
	var m Model = new(OMAM)
	if p.Budget > 0 {
		m = new(ExactOMAM)
	}
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return m, nil
}

// legacyTagExactOMAM is the type tag of ExactOMAM's version-1 encoding.
const legacyTagExactOMAM = "omam_exact"

// legacyOMAM reads a version-1 omam spec.
func legacyOMAM(tag string, s legacySpec, p *OMAMParams) error {
	if tag != OMAMName && tag != legacyTagExactOMAM {
		return fmt.Errorf("model type %q, want %q", tag, OMAMName)
	}
	if (tag == legacyTagExactOMAM) != (s.Budget > 0) {
		return fmt.Errorf("type %q with budget %d", tag, s.Budget)
	}
	if s.Balance || s.Delta != 0 || s.LearningRate != 0 || s.L2 != 0 {
		return errors.New("fields of another model type set")
	}
	*p = OMAMParams{Kernel: s.Kernel, Levels: s.Levels, Edges: s.Edges, Normalize: s.Normalize,
		Budget: s.Budget, Window: Window{Events: s.Window}, Decay: Decay{HalfLife: s.HalfLife}}
	return nil
}

// omamFeatureDim returns dim φ of valid parameters' map: 2·Features for the
// random-feature maps, d for linear.
func omamFeatureDim(p *OMAMParams, dim int) int {
	if p.Kernel.Features > 0 {
		return 2 * p.Kernel.Features
	}
	return dim
}

// OMAM is the ordinal maximal-average-margin ranker of docs/math.md §5 ("oMAM")
// on an explicit feature map φ (FeatureMap: linear or rbf random features).
//
// Labels are levels 1..m (Spec.Levels = m ≥ 2). With Spec.Edges (m−1
// strictly increasing values) Label bins a real-valued target y into level
// 1 + #{e ≤ y}; without edges Label accepts only the integers 1..m.
//
// Example i gets the centred rank c_i = #{j : y_j < y_i} − #{j : y_j > y_i}
// and the score direction is w = Σ_i c_i φ(x_i). Per level ℓ the model keeps
// the compensated (Neumaier) sum S_ℓ = Σ_{y_i = ℓ} φ(x_i) and the count N_ℓ,
// so that c(ℓ) = N_{<ℓ} − N_{>ℓ} and w = Σ_ℓ c(ℓ) S_ℓ. Each labelled event
// costs O(m·dim φ), independent of n: it adds φ(x) to S_ℓ₀, and one pass over
// the sums recomputes w = Σ_ℓ c(ℓ) S_ℓ and T = Σ_ℓ S_ℓ from the updated
// counts. The pass costs the same as the incremental form of docs/math.md §5
// (w += Σ_{ℓ>ℓ₀} S_ℓ − Σ_{ℓ<ℓ₀} S_ℓ + c(ℓ₀) φ(x)), which the tests check it
// against, but w does not accumulate rounding error over time and a
// restored model rebuilds it bit-identically from the stored sums.
//
// Scores (Prediction.Score), larger meaning a higher level:
//
//   - raw (Spec.Normalize false): m(x) = <w, φ(x)>/‖w‖ = Σ_i c_i K(x_i, x)/‖Σ_i c_i φ(x_i)‖;
//   - normalised (Spec.Normalize true, the better ranker; Nadaraya–Watson on
//     the centred ranks): <w, φ(x)> / (W·<T, φ(x)>) = Σ_i (c_i/W) K(x_i, x) / Σ_i K(x_i, x),
//     with W = Σ_ℓ N_ℓ the number (total weight) of examples held. The
//     factor 1/W does not change the ranking at a given state; it keeps the
//     score on the scale of c_i/W ∈ (−1, 1) as the model grows, so that
//     thresholds fitted on past scores stay valid. The score is 0 when
//     |<T, φ(x)>| < 1e-12·W (no kernel mass near x).
//
// Levels (Prediction.Label) come from thresholds θ₁ ≤ … ≤ θ_{m−1} on the
// score: level = 1 + #{k : score > θ_k}. The model keeps a ring buffer of the
// last T = 1024 (score before learning, level) pairs of labelled events and,
// every 64 labelled events, refits the thresholds so that the predicted
// level frequencies on the buffer match the observed ones: with the buffer's
// scores sorted, s₍₁₎ ≤ … ≤ s₍ₜ₎, and r_k the number of its events at levels
// ≤ k, θ_k = (s₍r_k₎ + s₍r_k+1₎)/2 (−∞ when r_k = 0, +∞ when r_k = t), the
// score quantile at the cumulative proportion r_k/t. Until the first fit
// Label is 0 (no decision); RefitThresholds fits them on demand. A refit
// sorts the buffer, O(T log T), about 15 µs, amortised over 64 events.
//
// There is no certainty bound (HasBound false, Delta 0): Theorem 2 bounds
// P(Y f(X) ≤ −ρ) for a binary label Y ∈ {−1, +1} and a classifier's margin;
// an ordinal ranking score has no such margin, so no bound is published.
//
// Forgetting: Spec.Window > 0 keeps an exact sliding window of the last
// Window labelled examples (their inputs x in a ring; when one leaves,
// φ(x_old) is subtracted from its S_ℓ in the same pass that adds the new
// one). Spec.HalfLife = h > 0 multiplies every S_ℓ and N_ℓ by 2^(−1/h)
// before adding each new example. Prediction.N is the number of examples
// held: n without forgetting, the window's fill, or n_eff = (Σ w_i)²/Σ w_i²
// (rounded) under decay; Examples counts every labelled example learned.
//
// Inputs with a NaN or infinite entry are neither scored nor learned
// (Score 0, Label 0).
//
// Spec.Budget > 0 selects the exact kernel mode instead (ExactOMAM, which
// New returns; its Type is "omam" too): the random features' error of
// ~ sqrt(1/(2D)) per kernel value limits the normalised form with a peaked
// kernel (on boston_ordinal τ-b 0.67 at D = 2048 against 0.74 exact).
type OMAM struct {
	par   OMAMParams
	dim   int
	fm    *FeatureMap
	m, p  int       // levels, dim φ
	prep  []float64 // scratch: Observe's preparation of the current event, [φ(x); ok] (nil until the first)
	phiO  []float64 // scratch: φ(x) of the event leaving the window (window only)
	decay float64   // 2^(−1/HalfLife); 1 without decay

	n         int64     // labelled examples learned
	cnt, cntC []float64 // N_ℓ and compensation (ℓ = 0..m−1 for levels 1..m)
	sqw, sqwC float64   // decay: Σ w_i² (for n_eff) and compensation
	sum, sumC []float64 // S_ℓ and compensation: S_ℓ[i] at ℓ·sl + i·si (strides)
	winX      []float64 // window: inputs, Window×d ring
	winL      []int32   // window: levels (0-based)
	winNext   int       // window: slot of the next example
	winFill   int       // window: examples held
	coef      []float64 // derived: c(ℓ)
	total     float64   // derived: W = Σ N_ℓ
	held      int64     // derived: Prediction.N

	// Derived for the dense score (syncDense): nil until the first, and
	// stale when the sums changed without them (a restore, sparse events).
	// The sparse linear path reads the sums at an event's coordinates
	// instead, so that a model fed only hashed events holds no dim φ
	// vector besides its sums.
	w, tot []float64 // w = Σ c(ℓ) S_ℓ, T = Σ S_ℓ
	k      float64   // 1/‖w‖ (0 when w = 0)
	stale  bool      // w, T and k lag behind the sums

	omamThresholds // levels from scores, shared with ExactOMAM

	sp   *mamSparse // ObserveSparse's scratch (omam_sparse.go); nil until its first call
	auto *omamAuto  // gamma auto (omam_auto.go); nil for a fixed gamma
}

var (
	_ Model    = (*OMAM)(nil)
	_ Preparer = (*OMAM)(nil)
)

// NewOMAM builds an empty ordinal MAM for inputs of dimension dim (the
// random-feature mode: p.Budget must be 0).
func NewOMAM(dim int, p OMAMParams) (*OMAM, error) {
	if p.Budget != 0 {
		return nil, specErrorf("budget", "selects the exact kernel mode: use NewExactOMAM, got %d", p.Budget)
	}
	if err := validateDim(dim); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	p.Edges = slices.Clone(p.Edges)
	o := &OMAM{par: p, dim: dim, m: p.Levels, decay: 1}
	if p.autoGamma() {
		if err := newOMAMAuto(o); err != nil {
			return nil, err
		}
	} else {
		fm, err := NewFeatureMap(p.Kernel, dim)
		if err != nil {
			return nil, err
		}
		o.fm = fm
	}
	o.p = o.fm.Dim()
	if p.Decay.HalfLife > 0 {
		o.decay = math.Exp2(-1 / p.Decay.HalfLife)
	}
	m, dp := o.m, o.p
	o.cnt, o.cntC = make([]float64, m), make([]float64, m)
	o.sum, o.sumC = make([]float64, m*dp), make([]float64, m*dp)
	if w := p.Window.Events; w > 0 {
		o.winX = make([]float64, w*dim)
		o.winL = make([]int32, w)
		o.phiO = make([]float64, dp)
	}
	o.omamThresholds = newOMAMThresholds(m)
	o.coef = make([]float64, m)
	o.refresh()
	return o, nil
}

// Type returns "omam".
func (o *OMAM) Type() string { return OMAMName }

// Dim returns the input dimension d.
func (o *OMAM) Dim() int { return o.dim }

// Params returns the model's parameters.
func (o *OMAM) Params() OMAMParams {
	p := o.par
	p.Edges = slices.Clone(p.Edges)
	return p
}

// FeatureMap returns the model's feature map.
func (o *OMAM) FeatureMap() *FeatureMap { return o.fm }

// Levels returns m.
func (o *OMAM) Levels() int { return o.m }

// Examples returns the number of labelled examples learned (forgotten ones
// included).
func (o *OMAM) Examples() int64 { return o.n }

// Version returns 1.
func (o *OMAM) Version() int64 { return 1 }

// LevelCount returns N_ℓ for level ℓ in 1..m (a weight under decay).
func (o *OMAM) LevelCount(level int) float64 {
	return o.cnt[level-1] + o.cntC[level-1]
}

// Thresholds appends θ₁..θ_{m−1} to dst; ok is false (and nothing is
// appended) before the first fit.
func (o *OMAM) Thresholds(dst []float64) (_ []float64, ok bool) {
	if !o.fitted {
		return dst, false
	}
	return append(dst, o.theta...), true
}

// Label maps a wire label to a level: with Spec.Edges, a finite y goes to
// level 1 + #{e ≤ y}; without, y must be an integer in 1..m.
func (o *OMAM) Label(v float64) (float64, bool) { return omamLabel(o.par.Edges, o.m, v) }

// omamLabel is Label of an omam with m levels and the given edges.
func omamLabel(e []float64, m int, v float64) (float64, bool) {
	if !isFinite(v) {
		return 0, false
	}
	if len(e) > 0 {
		lo, hi := 0, len(e) // count of edges ≤ v by bisection
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if e[mid] <= v {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return float64(1 + lo), true
	}
	if !omamIsLevel(v, m) {
		return 0, false
	}
	return v, true
}

// omamIsLevel reports whether y is one of the levels 1..m.
func omamIsLevel(y float64, m int) bool {
	return y == math.Trunc(y) && y >= 1 && y <= float64(m)
}

// score returns the score of φ = phi with the current state.
func (o *OMAM) score(phi []float64) float64 {
	o.syncDense()
	num := dot(o.w, phi)
	var s float64
	if o.par.Normalize {
		den := dot(o.tot, phi)
		if o.total > 0 && math.Abs(den) >= 1e-12*o.total {
			s = num / (o.total * den)
		}
	} else {
		s = num * o.k
	}
	if s == 0 || !isFinite(s) {
		s = 0 // no −0 on the wire
	}
	return s
}

// Observe scores x, then learns (x, y) if labelled. It panics if
// len(x) != Dim() or if labelled and y is not a level 1..m (see Label).
// It is Prepare into the model's own scratch followed by ObservePrepared.
func (o *OMAM) Observe(x []float64, y float64, labelled bool) (pr Prediction) {
	prep := o.prepBuf()
	o.Prepare(prep, x)
	o.observePrepared(&pr, prep, x, y, labelled)
	return pr
}

// prepBuf returns the model's own preparation buffer (PreparedLen floats,
// dim + 1 for the linear kernel), allocated by its first use: a model
// that learns hashed events through the sparse linear path never needs it.
func (o *OMAM) prepBuf() []float64 {
	if o.prep == nil {
		o.prep = make([]float64, o.PreparedLen())
	}
	return o.prep
}

// PreparedLen returns dim φ + 1, the length of Prepare's buffer (D + 1
// under gamma auto: the projection, which φ is computed from).
func (o *OMAM) PreparedLen() int {
	if o.auto != nil {
		return o.auto.nd + 1
	}
	return o.fm.Dim() + 1
}

// Prepare writes [φ(x); ok] into dst, ok being 1 when x is finite and 0
// otherwise (φ is then unspecified). It reads only the feature map, so it
// may run concurrently with Prepare, Observe, ObservePrepared and the other
// methods that change the learned state (but not with UnmarshalBinary,
// which replaces the map); raw or normalised, window or decay, every
// variant prepares the same way. It panics unless len(dst) ==
// PreparedLen() and len(x) == Dim(); it does not allocate.
func (o *OMAM) Prepare(dst, x []float64) {
	if len(dst) != o.PreparedLen() {
		panic("online: OMAM.Prepare: len(dst) != PreparedLen()")
	}
	if len(x) != o.dim {
		panic("online: OMAM.Prepare: len(x) != Dim()")
	}
	if o.auto != nil {
		o.prepareAuto(dst, x) // the reference projection: no learned state
		return
	}
	p := o.fm.Dim()
	_, ok := o.fm.Map(dst[:p], x)
	dst[p] = 0
	if ok {
		dst[p] = 1
	}
}

// ObservePrepared is Observe(x, y, labelled) with prep written by
// Prepare(prep, x): it scores and learns φ(x) from prep without mapping x
// again (the window still stores x itself, and maps the example leaving
// it). It panics as Observe does, or if len(prep) != PreparedLen(); it
// does not modify prep, nor allocate but on its first call (w and T, of
// dim φ each: see syncDense). It needs exclusive use of the model.
func (o *OMAM) ObservePrepared(prep, x []float64, y float64, labelled bool) (pr Prediction) {
	if len(x) != o.dim {
		panic("online: OMAM.ObservePrepared: len(x) != Dim()")
	}
	o.observePrepared(&pr, prep, x, y, labelled)
	return pr
}

// observePrepared is ObservePrepared writing to *pr (see MAM.observePrepared).
func (o *OMAM) observePrepared(pr *Prediction, prep, x []float64, y float64, labelled bool) {
	np := o.p
	if len(prep) != o.PreparedLen() {
		panic("online: OMAM.ObservePrepared: len(prep) != PreparedLen()")
	}
	if x != nil && len(x) != o.dim { // nil: a sparse event (omam_sparse.go)
		panic("online: OMAM.ObservePrepared: len(x) != Dim()")
	}
	if labelled && !omamIsLevel(y, o.m) {
		panic("online: OMAM.Observe: label must be a level 1..m (see Label)")
	}
	*pr = Prediction{N: o.held}
	if prep[len(prep)-1] == 0 {
		return
	}
	var phi []float64
	if o.auto != nil {
		phi = o.phiAuto(prep)
	} else {
		phi = prep[:np:np]
	}
	s := o.score(phi)
	pr.Score = s
	pr.Label = o.predict(s)
	if labelled {
		if o.auto != nil && o.auto.warming() && o.keep(x, int(y)-1) {
			return // the warm-up relearned every kept example, this one included
		}
		o.learn(phi, x, int(y)-1, s)
	}
}

// learn adds φ(x) = phi at 0-based level l; s is x's score before.
func (o *OMAM) learn(phi, x []float64, l int, s float64) {
	o.syncDense() // allocated (and current, as after score)
	o.n++
	// Window: the oldest example leaves when the window is full.
	lo := -1
	if o.par.Window.Events > 0 {
		d := o.dim
		slot := o.winX[o.winNext*d : (o.winNext+1)*d]
		if o.winFill == o.par.Window.Events {
			lo = int(o.winL[o.winNext])
			o.fm.Map(o.phiO, slot) // finite: it was learned
			o.cnt[lo], o.cntC[lo] = twoSumAcc(o.cnt[lo], o.cntC[lo], -1)
		} else {
			o.winFill++
		}
		copy(slot, x)
		o.winL[o.winNext] = int32(l)
		if o.winNext++; o.winNext == o.par.Window.Events {
			o.winNext = 0
		}
	}
	if o.decay != 1 {
		a := o.decay
		for i := range o.cnt {
			o.cnt[i] *= a
			o.cntC[i] *= a
		}
		o.sqw, o.sqwC = twoSumAcc(o.sqw*a*a, o.sqwC*a*a, 1)
		scaleVec(o.sum, a)
		scaleVec(o.sumC, a)
	}
	o.cnt[l], o.cntC[l] = twoSumAcc(o.cnt[l], o.cntC[l], 1)
	o.derive()
	if lo >= 0 {
		o.pass(phi, l, o.phiO, lo)
	} else {
		o.pass(phi, l, nil, 0)
	}
	o.normalise()
	o.record(s, l, o.n)
}

// derive sets the coefficients c(ℓ) = N_{<ℓ} − N_{>ℓ}, W and the published
// example count from the counts.
func (o *OMAM) derive() {
	var W float64
	for i := range o.cnt {
		W += o.cnt[i] + o.cntC[i]
	}
	o.total = W
	var below float64
	for i := range o.cnt {
		v := o.cnt[i] + o.cntC[i]
		o.coef[i] = below - (W - below - v)
		below += v
	}
	switch {
	case o.decay != 1:
		o.held = 0
		if q := o.sqw + o.sqwC; q > 0 {
			o.held = int64(math.Round(W * W / q))
		}
	case o.par.Window.Events > 0:
		o.held = int64(o.winFill)
	default:
		o.held = o.n
	}
}

// normalise sets k = 1/‖w‖ (0 when w = 0).
func (o *OMAM) normalise() {
	ww := dot(o.w, o.w)
	o.k = 0
	if ww > 0 && !math.IsInf(ww, 0) {
		o.k = 1 / math.Sqrt(ww)
	}
}

// refresh recomputes the derived state from counts and sums (new or
// restored model) with the same code as an update, adding nothing; w, T
// and k follow at the next dense score (syncDense).
func (o *OMAM) refresh() {
	o.derive()
	o.stale = true
	o.recount()
}

// syncDense brings w, T and k = 1/‖w‖ up to date with the sums (the pass
// of an update, adding nothing), allocating w and T on the first call.
// They are derived for the dense score alone, O(m·dim φ) to rebuild: after
// a restore or sparse events they are left stale until a dense score
// needs them, so that a model fed only hashed events through the sparse
// linear path (which reads the sums at the event's coordinates) holds no
// dim φ vector but its sums.
func (o *OMAM) syncDense() {
	if !o.stale {
		return
	}
	if o.w == nil {
		o.w, o.tot = make([]float64, o.p), make([]float64, o.p)
	}
	o.pass(nil, 0, nil, 0)
	o.normalise()
	o.stale = false
}

// levelMajorMax is the largest φ dimension p whose sums are stored
// level-major (S_ℓ[i] at ℓ·p + i), where the pass over all coordinates
// runs eight at a time (vmath.LevelSums): random features, dense inputs.
// Beyond it (hashed inputs, p up to 2^24) a sparse event touches a few
// coordinates, and i-major rows (S_ℓ[i] at i·m + ℓ, a coordinate's levels
// together) cost it one cache miss a coordinate instead of m.
const levelMajorMax = 1 << 14

// strides returns the sums' layout: S_ℓ[i] is at ℓ·sl + i·si.
func (o *OMAM) strides() (sl, si int) {
	if o.p <= levelMajorMax {
		return o.p, 1
	}
	return 1, o.m
}

// pass adds add (if not nil) to level la and subtracts sub (if not nil)
// from level ls of the compensated sums, and sets w = Σ_ℓ c(ℓ)·S_ℓ and
// T = Σ_ℓ S_ℓ with S_ℓ = sum + sumC, the levels in order (the bits do not
// depend on the layout).
func (o *OMAM) pass(add []float64, la int, sub []float64, ls int) {
	p, m := o.p, o.m
	sum, sumC := o.sum[:m*p], o.sumC[:m*p]
	if sl, _ := o.strides(); sl == 1 {
		omamPassRows(o.w, o.tot, sum, sumC, o.coef, add, la, sub, ls)
		return
	}
	if add != nil {
		vmath.AccumScaled(sum[la*p:la*p+p], sumC[la*p:la*p+p], add[:p], 1)
	}
	if sub != nil {
		vmath.AccumScaled(sum[ls*p:ls*p+p], sumC[ls*p:ls*p+p], sub[:p], -1)
	}
	vmath.LevelSums(o.w, o.tot, sum, sumC, o.coef)
}

// omamPassRows is pass on i-major sums (m = len(coef) levels).
func omamPassRows(w, tot, sum, sumC, coef, add []float64, la int, sub []float64, ls int) {
	m, p := len(coef), len(w)
	sum, sumC, tot = sum[:p*m], sumC[:p*m], tot[:p]
	if add != nil {
		omamTwoSumStrided(sum, sumC, add[:p], la, m, 1)
	}
	if sub != nil {
		omamTwoSumStrided(sum, sumC, sub[:p], ls, m, -1)
	}
	for i := range w {
		row := sum[i*m : i*m+m]
		rowC := sumC[i*m : i*m+m]
		rowC = rowC[:len(row)]
		c := coef[:len(row)]
		var wi, ti float64
		for l, s := range row {
			v := s + rowC[l]
			wi += float64(c[l] * v)
			ti += v
		}
		w[i], tot[i] = wi, ti
	}
}

// omamTwoSumStrided adds sgn·x[i] (sgn = ±1, exact) to the compensated sum
// (sum, sumC) at index i·m + l, as twoSumAcc does.
func omamTwoSumStrided(sum, sumC, x []float64, l, m int, sgn float64) {
	for i, v := range x {
		v *= sgn
		j := i*m + l
		s := sum[j]
		t := s + v
		bp := t - s
		sumC[j] += (s - (t - bp)) + (v - bp)
		sum[j] = t
	}
}

// appendSums appends the sums x i-major (S_ℓ[i] at i·m + ℓ), as the
// encoding has them whatever the layout in memory.
func (o *OMAM) appendSums(dst []byte, x []float64) []byte {
	sl, si := o.strides()
	if sl == 1 {
		return codec.AppendF64s(dst, x)
	}
	for i := range o.p {
		for l := range o.m {
			dst = codec.AppendF64(dst, x[l*sl+i*si])
		}
	}
	return dst
}

// readSums reads sums stored i-major into x.
func (o *OMAM) readSums(r *codec.Reader, x []float64) {
	sl, si := o.strides()
	if sl == 1 {
		r.F64s(x)
		return
	}
	for i := range o.p {
		for l := range o.m {
			x[l*sl+i*si] = r.F64()
		}
	}
}

// scaleVec multiplies x by a.
func scaleVec(x []float64, a float64) {
	for i := range x {
		x[i] *= a
	}
}

// Serialised state of an OMAM, after the envelope (header.go; type
// "omam"), little-endian:
//
//	n int64 (labelled examples learned); p = dim φ uint32;
//	counts: m × (N_ℓ, comp) float64;
//	Σ w_i² and its compensation float64 (0, 0 without decay);
//	sums S and comp(S), each m·p float64, i-major (S_ℓ[i] at i·m + ℓ);
//	window (window.events > 0): fill uint32, then per example, oldest
//	    first: level−1 uint32, x (d float64);
//	threshold buffer: fill uint32, then per event, oldest first:
//	    score float64, level−1 uint32;
//	fitted uint8, θ₁..θ_{m−1} float64.
//
// w, T, ‖w‖ and the buffer's level counts are rebuilt by the update code,
// so a restored model predicts bit-identically and stays identical under
// further learning.

// AppendBinary appends the MarshalBinary encoding of o to dst
// (encoding.BinaryAppender).
func (o *OMAM) AppendBinary(dst []byte) ([]byte, error) {
	dst = AppendHeader(dst, OMAMName, &o.par, o.dim)
	dst = codec.AppendI64(dst, o.n)
	dst = codec.AppendU32(dst, uint32(o.p))
	for i := range o.cnt {
		dst = codec.AppendF64(dst, o.cnt[i])
		dst = codec.AppendF64(dst, o.cntC[i])
	}
	dst = codec.AppendF64(dst, o.sqw)
	dst = codec.AppendF64(dst, o.sqwC)
	dst = o.appendSums(dst, o.sum)
	dst = o.appendSums(dst, o.sumC)
	if W := o.par.Window.Events; W > 0 {
		d := o.dim
		dst = codec.AppendU32(dst, uint32(o.winFill))
		for j := range o.winFill {
			slot := (o.winNext - o.winFill + j + W) % W
			dst = codec.AppendU32(dst, uint32(o.winL[slot]))
			dst = codec.AppendF64s(dst, o.winX[slot*d:(slot+1)*d])
		}
	}
	dst = o.omamThresholds.appendBinary(dst)
	if o.auto != nil {
		dst = o.appendAuto(dst)
	}
	return dst, nil
}

// MarshalBinary encodes the complete state of o (see the format above).
func (o *OMAM) MarshalBinary() ([]byte, error) {
	size := 128 + 8*len(o.par.Edges) + 16*o.m*(o.p+1) +
		o.winFill*(4+8*o.dim) + 12*o.bufFill + 8*o.m + o.autoSize()
	return o.AppendBinary(make([]byte, 0, size))
}

// UnmarshalBinary replaces o's parameters and state with the encoded ones.
// On error (wrapping ErrFormat) o is unchanged.
func (o *OMAM) UnmarshalBinary(b []byte) error {
	var par OMAMParams
	d, r := ReadHeader(b, OMAMName, &par, func(tag string, s legacySpec) error { return legacyOMAM(tag, s, &par) })
	checkParams(r, &par, d)
	if r.Err() == nil && par.Budget != 0 {
		r.Failf("budget %d: the exact kernel mode (ExactOMAM)", par.Budget)
	}
	n := r.I64()
	p := int(r.U32())
	if err := r.Err(); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%w: negative example count %d", ErrFormat, n)
	}
	if want := omamFeatureDim(&par, d); p != want {
		return fmt.Errorf("%w: feature dimension %d, the parameters give %d", ErrFormat, p, want)
	}
	// The fixed-size part must be there before anything is allocated.
	if !r.Need(16*par.Levels + 16 + 16*par.Levels*p) {
		return r.Err()
	}
	no, err := NewOMAM(d, par)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	no.n = n
	for i := range no.cnt {
		no.cnt[i], no.cntC[i] = r.F64(), r.F64()
	}
	no.sqw, no.sqwC = r.F64(), r.F64()
	no.readSums(r, no.sum)
	no.readSums(r, no.sumC)
	m := no.m
	if W := par.Window.Events; W > 0 {
		fill := int(r.U32())
		if r.Err() == nil && (fill > W || int64(fill) != min(n, int64(W))) {
			return fmt.Errorf("%w: window holds %d of %d examples after %d", ErrFormat, fill, W, n)
		}
		if !r.Need(fill * (4 + 8*d)) {
			return r.Err()
		}
		for j := 0; j < fill && r.Err() == nil; j++ {
			l := r.U32()
			if r.Err() == nil && l >= uint32(m) {
				r.Failf("level %d out of range", int64(l)+1)
			}
			no.winL[j] = int32(l)
			r.F64s(no.winX[j*d : (j+1)*d])
		}
		no.winFill, no.winNext = fill, fill%W
	}
	no.omamThresholds.decode(r, n)
	if no.auto != nil {
		no.decodeAuto(r)
	}
	if err := r.End(); err != nil {
		return err
	}
	if err := no.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	no.refresh()
	*o = *no
	return nil
}

// checkState rejects decoded states that no sequence of updates produces.
func (o *OMAM) checkState() error {
	const tol = 1e-9
	if o.n < 0 {
		return fmt.Errorf("negative example count %d", o.n)
	}
	// Counts: integers summing to the examples held, or decayed weights.
	var W float64
	for l := range o.cnt {
		v := o.cnt[l] + o.cntC[l]
		if !isFinite(o.cnt[l]) || !isFinite(o.cntC[l]) || !(v >= -tol) {
			return fmt.Errorf("level %d count %v", l+1, v)
		}
		if o.decay == 1 && (o.cntC[l] != 0 || o.cnt[l] != math.Trunc(o.cnt[l])) {
			return fmt.Errorf("level %d count %v is not an integer", l+1, v)
		}
		W += v
	}
	switch {
	case o.decay != 1:
		q := o.sqw + o.sqwC
		lim := math.Min(float64(o.n), 1/(1-o.decay))*(1+tol) + tol
		if !isFinite(o.sqw) || !isFinite(o.sqwC) || W > lim || !(q >= -tol) || q > W*(1+tol)+tol || (o.n > 0) != (q > 0) {
			return fmt.Errorf("decayed weights: Σw = %v, Σw² = %v after %d examples", W, q, o.n)
		}
	case o.sqw != 0 || o.sqwC != 0:
		return fmt.Errorf("Σw² = %v without decay", o.sqw+o.sqwC)
	case o.par.Window.Events > 0:
		per := make([]float64, o.m)
		for j := range o.winFill {
			per[o.winL[j]]++
			for _, x := range o.winX[j*o.dim : (j+1)*o.dim] {
				if !isFinite(x) {
					return fmt.Errorf("non-finite input in the window")
				}
			}
		}
		for l := range per {
			if per[l] != o.cnt[l] {
				return fmt.Errorf("level %d count %v, window holds %v", l+1, o.cnt[l], per[l])
			}
		}
	case W != float64(o.n):
		return fmt.Errorf("level counts sum to %v, want n = %d", W, o.n)
	}
	// ‖S_ℓ‖ ≤ N_ℓ since ‖φ‖ ≤ 1.
	ss := make([]float64, o.m)
	sl, _ := o.strides()
	for i := range o.sum {
		if !isFinite(o.sum[i]) || !isFinite(o.sumC[i]) {
			return fmt.Errorf("non-finite sum")
		}
		v := o.sum[i] + o.sumC[i]
		l := i % o.m // i-major
		if sl != 1 {
			l = i / sl
		}
		ss[l] += v * v
	}
	for l, v := range ss {
		if c := o.cnt[l] + o.cntC[l]; math.Sqrt(v) > c*(1+tol)+tol {
			return fmt.Errorf("‖S_%d‖ = %v exceeds its count %v", l+1, math.Sqrt(v), c)
		}
	}
	return o.omamThresholds.check(o.n)
}

// omamThresholds turns ranking scores into levels; both modes of omam
// embed it (see OMAM, "Levels"): a ring buffer of the (score before
// learning, level) pairs of the last T = 1024 labelled events and the
// thresholds θ₁ ≤ … ≤ θ_{m−1} fitted on it every 64 labelled events.
type omamThresholds struct {
	bufScore []float64 // scores (ring of T)
	bufLevel []int32   // levels (0-based)
	bufNext  int       // slot of the next pair
	bufFill  int       // pairs held
	bufCount []int     // pairs per level (derived)
	theta    []float64 // θ₁..θ_{m−1}
	fitted   bool
	sortBuf  []float64 // scratch for the refit
}

func newOMAMThresholds(m int) omamThresholds {
	return omamThresholds{
		bufScore: make([]float64, omamThresholdBuffer),
		bufLevel: make([]int32, omamThresholdBuffer),
		bufCount: make([]int, m),
		theta:    make([]float64, m-1),
		sortBuf:  make([]float64, omamThresholdBuffer),
	}
}

// predict returns the level of score s, 0 (no decision) before the first
// fit.
func (t *omamThresholds) predict(s float64) int {
	if !t.fitted {
		return 0
	}
	return 1 + t.levelIndex(s)
}

// levelIndex returns #{k : s > θ_k}.
func (t *omamThresholds) levelIndex(s float64) int {
	lo, hi := 0, len(t.theta)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.theta[mid] < s {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// record adds the score s (before learning) and 0-based level l of the
// n-th labelled event to the buffer, and refits every 64 labelled events.
func (t *omamThresholds) record(s float64, l int, n int64) {
	if t.bufFill == omamThresholdBuffer {
		t.bufCount[t.bufLevel[t.bufNext]]--
	} else {
		t.bufFill++
	}
	t.bufScore[t.bufNext], t.bufLevel[t.bufNext] = s, int32(l)
	t.bufCount[l]++
	if t.bufNext++; t.bufNext == omamThresholdBuffer {
		t.bufNext = 0
	}
	if n%omamRefitEvery == 0 {
		t.RefitThresholds()
	}
}

// RefitThresholds fits the thresholds on the buffer of recent (score,
// level) pairs now (Observe does so every 64 labelled events); it does
// nothing while the buffer is empty. It does not allocate.
func (t *omamThresholds) RefitThresholds() {
	n := t.bufFill
	if n == 0 {
		return
	}
	s := t.sortBuf[:n]
	copy(s, t.bufScore[:n])
	slices.Sort(s)
	r := 0
	for k := range t.theta {
		r += t.bufCount[k]
		switch {
		case r == 0:
			t.theta[k] = math.Inf(-1)
		case r == n:
			t.theta[k] = math.Inf(1)
		default:
			t.theta[k] = s[r-1]/2 + s[r]/2
		}
	}
	t.fitted = true
}

// Thresholds appends θ₁..θ_{m−1} to dst; ok is false (and nothing is
// appended) before the first fit.
func (t *omamThresholds) Thresholds(dst []float64) (_ []float64, ok bool) {
	if !t.fitted {
		return dst, false
	}
	return append(dst, t.theta...), true
}

// recount rebuilds the per-level counts of the buffer.
func (t *omamThresholds) recount() {
	clear(t.bufCount)
	for i := range t.bufFill {
		t.bufCount[t.bufLevel[i]]++
	}
}

// appendBinary appends the buffer (oldest first), the fitted flag and the
// thresholds (format in OMAM's encoding).
func (t *omamThresholds) appendBinary(dst []byte) []byte {
	dst = codec.AppendU32(dst, uint32(t.bufFill))
	for j := range t.bufFill {
		slot := (t.bufNext - t.bufFill + j + omamThresholdBuffer) % omamThresholdBuffer
		dst = codec.AppendF64(dst, t.bufScore[slot])
		dst = codec.AppendU32(dst, uint32(t.bufLevel[slot]))
	}
	dst = codec.AppendBool(dst, t.fitted)
	return codec.AppendF64s(dst, t.theta)
}

// decode reads what appendBinary wrote into an empty t, after n labelled
// events; failures are recorded in r. The buffer's level counts are left to
// recount, its consistency to check.
func (t *omamThresholds) decode(r *codec.Reader, n int64) {
	fill := int(r.U32())
	if r.Err() == nil && (fill > omamThresholdBuffer || int64(fill) != min(n, omamThresholdBuffer)) {
		r.Failf("threshold buffer holds %d events after %d", fill, n)
		return
	}
	for j := 0; j < fill && r.Err() == nil; j++ {
		t.bufScore[j] = r.F64()
		l := r.U32()
		if r.Err() == nil && l >= uint32(len(t.bufCount)) {
			r.Failf("level %d out of range", int64(l)+1)
			return
		}
		t.bufLevel[j] = int32(l)
	}
	t.bufFill, t.bufNext = fill, fill%omamThresholdBuffer
	t.fitted = r.Bool("fitted")
	r.F64s(t.theta)
}

// check rejects a decoded buffer and thresholds that n labelled events
// cannot produce.
func (t *omamThresholds) check(n int64) error {
	for _, s := range t.bufScore[:t.bufFill] {
		if !isFinite(s) {
			return fmt.Errorf("non-finite score in the threshold buffer")
		}
	}
	switch {
	case t.fitted && t.bufFill == 0, !t.fitted && n >= omamRefitEvery:
		return fmt.Errorf("thresholds fitted = %v with %d events", t.fitted, n)
	}
	for k, th := range t.theta {
		if !t.fitted && th != 0 || math.IsNaN(th) || k > 0 && th < t.theta[k-1] {
			return fmt.Errorf("thresholds %v (fitted %v)", t.theta, t.fitted)
		}
	}
	return nil
}

// LevelThresholds is omam's threshold fit (see OMAM, "Levels") for any
// ranking score, so that other scorers — the refitted kernel rankers of
// online/refit — publish a level 1..m the way omam does: a ring buffer of
// the (score before learning, level) pairs of the last 1024 labelled
// events, and thresholds θ₁ ≤ … ≤ θ_{m−1} refitted on it every 64 recorded
// pairs so that the predicted level frequencies on the buffer match the
// observed ones; level = 1 + #{k : score > θ_k}. It is the same code and
// the same encoding as omam's (which embeds it), plus the count of pairs
// recorded. Not safe for concurrent use; Level, Record and Label do not
// allocate.
type LevelThresholds struct {
	t omamThresholds
	n int64 // pairs recorded
}

// NewLevelThresholds returns empty thresholds for levels 1..m.
func NewLevelThresholds(m int) (*LevelThresholds, error) {
	if m < 2 || m > omamMaxLevels {
		return nil, specErrorf("levels", "must be in 2..%d, got %d", omamMaxLevels, m)
	}
	return &LevelThresholds{t: newOMAMThresholds(m)}, nil
}

// Levels returns m.
func (l *LevelThresholds) Levels() int { return len(l.t.bufCount) }

// Recorded is the number of pairs recorded.
func (l *LevelThresholds) Recorded() int64 { return l.n }

// Label maps a wire label to a level: y must be an integer in 1..m.
func (l *LevelThresholds) Label(v float64) (float64, bool) { return omamLabel(nil, l.Levels(), v) }

// Level returns the level 1..m of score s, 0 (no decision) before the
// first fit.
func (l *LevelThresholds) Level(s float64) int { return l.t.predict(s) }

// Record adds the score s a labelled event had before it was learned and
// its level (1..m; it panics otherwise), and refits the thresholds every
// 64 recorded pairs. A non-finite score is not recorded.
func (l *LevelThresholds) Record(s float64, level int) {
	if level < 1 || level > l.Levels() {
		panic(fmt.Sprintf("online: LevelThresholds.Record: level %d outside 1..%d", level, l.Levels()))
	}
	if !isFinite(s) {
		return
	}
	l.n++
	l.t.record(s, level-1, l.n)
}

// RefitThresholds fits the thresholds on the buffer now; it does nothing
// while the buffer is empty. It does not allocate.
func (l *LevelThresholds) RefitThresholds() { l.t.RefitThresholds() }

// Thresholds appends θ₁..θ_{m−1} to dst; ok is false (and nothing is
// appended) before the first fit.
func (l *LevelThresholds) Thresholds(dst []float64) (_ []float64, ok bool) {
	return l.t.Thresholds(dst)
}

// AppendBinary appends the state to dst: m u32 | recorded i64 | omam's
// threshold section (buffer fill u32, fill × (score f64, level−1 u32)
// oldest first, fitted u8, θ: (m−1) × f64).
func (l *LevelThresholds) AppendBinary(dst []byte) ([]byte, error) {
	dst = codec.AppendU32(dst, uint32(l.Levels()))
	dst = codec.AppendI64(dst, l.n)
	return l.t.appendBinary(dst), nil
}

// Decode restores a state written by AppendBinary from r into l (which must
// have the same m); failures are recorded in r (wrapping its sentinel) and
// leave l unchanged.
func (l *LevelThresholds) Decode(r *codec.Reader) {
	m, n := int(r.U32()), r.I64()
	if r.Err() == nil && (m != l.Levels() || n < 0) {
		r.Failf("thresholds for %d levels after %d pairs, want %d levels", m, n, l.Levels())
		return
	}
	t := newOMAMThresholds(l.Levels())
	t.decode(r, n)
	if r.Err() != nil {
		return
	}
	t.recount()
	if err := t.check(n); err != nil {
		r.Fail(err)
		return
	}
	l.t, l.n = t, n
}

// omamExactMaxLevels bounds Levels in the exact kernel mode, which keeps
// the m×m level-pair kernel sums and evaluates cᵀGc, O(m²), per labelled
// event.
const omamExactMaxLevels = 256

// ExactOMAM is the exact-kernel mode of the ordinal MAM (docs/math.md §5),
// selected by Spec.Budget > 0; its Type is "omam". It stores the last
// Budget labelled examples (x_i, level ℓ_i) in a ring and evaluates the
// exact kernel K (see Kernel: linear, rbf, laplacian or polynomial)
// against all of them, O(Budget·d) per event. When the ring is full the
// oldest example leaves as a new one arrives, so the state is always that
// of a model trained on the last Budget labelled examples alone (Window
// and HalfLife must be 0). The random-feature form (OMAM) approximates the
// kernel with an error ~ sqrt(1/(2D)) per K whatever K is, which a peaked
// kernel's Nadaraya–Watson denominator cannot afford; this mode has no such
// error.
//
// Over the n stored examples, with N_ℓ the number at level ℓ and
// c(ℓ) = N_{<ℓ} − N_{>ℓ}, one pass over the kernel row k_i = K(x_i, x)
// accumulates the per-level sums R_ℓ(x) = Σ_{ℓ_i = ℓ} k_i, and
//
//   - raw (Spec.Normalize false): m(x) = Σ_ℓ c(ℓ) R_ℓ(x) / ‖w‖,
//     ‖w‖² = Σ_i Σ_j c_i c_j K(x_i, x_j) = Σ_{ℓ,ℓ'} c(ℓ) c(ℓ') G_{ℓℓ'};
//   - normalised (Spec.Normalize true): m(x) = Σ_ℓ c(ℓ) R_ℓ(x) / (n·Σ_ℓ R_ℓ(x)),
//     0 when |Σ_ℓ R_ℓ(x)| < 1e-12·n (no kernel mass near x; linear and
//     polynomial only, see Numerics);
//
// the same scores as OMAM with the exact kernel in place of the random
// features. G_{ℓℓ'} = Σ_{ℓ_i = ℓ, ℓ_j = ℓ'} K(x_i, x_j) (ordered pairs,
// i = j included) is kept incrementally as compensated (Neumaier) sums:
// for each stored example the model also keeps A_i^ℓ, the sum of K(x_i, x_j)
// over the examples j at level ℓ that arrived after it. Adding x at level
// a with row k costs O(Budget + m): G_{aa} += K(x, x) + 2R_a,
// G_{aℓ} += R_ℓ (ℓ ≠ a), A_i^a += k_i. The example leaving the ring is the
// oldest, so its A^ℓ are its kernel sums against all the others and its
// removal is the same update with A in place of R, subtracted, O(m). Each
// time the ring wraps round (every Budget labelled events once full) G is
// recomputed from the A's and the K(x_i, x_i), O(Budget·m), so rounding
// cannot drift over 10⁹ events. ‖w‖ is recomputed from G after every
// labelled event, O(m²).
//
// Numerics (docs/math.md §3): for rbf and laplacian the row is computed as
// e_i = exp(−gamma(dist_i − min_j dist_j)), so that the nearest stored
// example has e_i = 1 however large gamma is. The normalised score is a
// ratio of two sums of the same row, so the factor cancels: it never
// underflows, and far from every stored example it tends to the nearest
// one's c/n (the limit of the Nadaraya–Watson estimator); the tiny-
// denominator guard therefore never triggers for these kernels. The raw
// score is rescaled by exp(−gamma·min dist)/‖w‖ (one exp); where that
// underflows the raw score is 0.
//
// Levels come from thresholds on the score exactly as in OMAM (same code:
// a buffer of the last 1024 (score, level) pairs, refitted every 64
// labelled events; Label 0 before the first fit). No certainty bound
// (HasBound false, Delta must be 0). Prediction.N is the number of stored
// examples, Examples the number of labelled examples learned in all.
//
// Per event, Observe computes the kernel row once, scores with it and, if
// the event is labelled, learns with it; it does not allocate. Inputs with
// a NaN or infinite entry, or too large to be used safely (see ExactMAM),
// are neither scored nor learned (Score 0, Label 0).
type ExactOMAM struct {
	par     OMAMParams
	kern    Kernel
	d, m, b int // dim, levels, budget

	// Ring of stored examples; slot head is the next to be written (the
	// oldest when the ring is full). Slots fill from 0 before wrapping.
	xs          []float64 // Budget×d prepared inputs (x/‖x‖ for linear)
	lv          []int32   // levels (0-based)
	self        []float64 // K(x_i, x_i)
	acc, accC   []float64 // A_i^ℓ and compensation, level-major: [ℓ·Budget + i]
	head, count int
	cnt         []int // N_ℓ over the stored examples
	n           int64 // labelled examples learned in all

	g, gC []float64 // G_{ab} (a ≤ b, at a·m + b) and compensation

	omamThresholds // levels from scores, shared with OMAM

	// Scratch.
	xp []float64 // prepared input
	kb []float64 // kernel row
	r  []float64 // per-level row sums

	// Derived from the counts and G after every change of state.
	coef []float64 // c(ℓ)
	k    float64   // 1/‖w‖, 0 when w = 0
	lk   float64   // ln k
}

// Not a Preparer: its per-event cost is the kernel row over the stored examples (state).
var _ Model = (*ExactOMAM)(nil)

// NewExactOMAM builds an empty exact-kernel ordinal MAM for inputs of
// dimension dim; p.Budget must be > 0.
func NewExactOMAM(dim int, p OMAMParams) (*ExactOMAM, error) {
	if p.Budget <= 0 {
		return nil, specErrorf("budget", "must be > 0 for the exact kernel mode, got %d", p.Budget)
	}
	if err := validateDim(dim); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	kern, err := NewKernel(p.Kernel, dim)
	if err != nil {
		return nil, err
	}
	p.Edges = slices.Clone(p.Edges)
	nb, d, m := p.Budget, dim, p.Levels
	o := &ExactOMAM{
		par: p, kern: kern, d: d, m: m, b: nb,
		xs:   make([]float64, nb*d),
		lv:   make([]int32, nb),
		self: make([]float64, nb),
		acc:  make([]float64, m*nb), accC: make([]float64, m*nb),
		cnt: make([]int, m),
		g:   make([]float64, m*m), gC: make([]float64, m*m),
		omamThresholds: newOMAMThresholds(m),
		xp:             make([]float64, d),
		kb:             make([]float64, nb),
		r:              make([]float64, m),
		coef:           make([]float64, m),
	}
	o.derive()
	return o, nil
}

// Type returns "omam".
func (o *ExactOMAM) Type() string { return OMAMName }

// Dim returns the input dimension d.
func (o *ExactOMAM) Dim() int { return o.d }

// Params returns the model's parameters.
func (o *ExactOMAM) Params() OMAMParams {
	p := o.par
	p.Edges = slices.Clone(p.Edges)
	return p
}

// Kernel returns the model's kernel.
func (o *ExactOMAM) Kernel() Kernel { return o.kern }

// Levels returns m.
func (o *ExactOMAM) Levels() int { return o.m }

// Examples returns the number of labelled examples learned in all,
// including those that have left the budget.
func (o *ExactOMAM) Examples() int64 { return o.n }

// Stored returns the number of examples held (≤ Budget).
func (o *ExactOMAM) Stored() int { return o.count }

// LevelCount returns N_ℓ, the number of stored examples at level ℓ in 1..m.
func (o *ExactOMAM) LevelCount(level int) float64 { return float64(o.cnt[level-1]) }

// Version returns 1.
func (o *ExactOMAM) Version() int64 { return 1 }

// Label maps a wire label to a level as OMAM.Label does.
func (o *ExactOMAM) Label(v float64) (float64, bool) { return omamLabel(o.par.Edges, o.m, v) }

// Observe scores x with the stored examples, then, if labelled, stores
// (x, y), evicting the oldest example when the budget is full. It panics if
// len(x) != Dim() or if labelled and y is not a level 1..m (see Label).
func (o *ExactOMAM) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != o.d {
		panic("online: ExactOMAM.Observe: len(x) != Dim()")
	}
	if labelled && !omamIsLevel(y, o.m) {
		panic("online: ExactOMAM.Observe: label must be a level 1..m (see Label)")
	}
	pr := Prediction{N: int64(o.count)}
	self, ok := o.kern.prepare(o.xp, x)
	if !ok {
		return pr
	}
	n := o.count
	kb := o.kb[:n]
	sh := o.kern.row(kb, o.xs, o.xp)

	// Level sums over the examples that stay if the event is learned; the
	// oldest (slot head of a full ring) is added apart, whether or not the
	// event is labelled, so that the score does not depend on it.
	old := -1
	if n == o.b {
		old = o.head
	}
	omamLevelSums(o.r, kb, o.lv[:n], old)
	var num, den float64
	for l, v := range o.r {
		num += o.coef[l] * v
		den += v
	}
	if old >= 0 {
		e := kb[old]
		num += o.coef[o.lv[old]] * e
		den += e
	}
	var s float64
	if o.par.Normalize {
		if W := float64(n); W > 0 && math.Abs(den) >= 1e-12*W {
			s = num / (W * den)
		}
	} else {
		scale := o.k
		if sh != 0 {
			scale = math.Exp(o.lk - sh)
		}
		s = num * scale
	}
	if s == 0 || !isFinite(s) {
		s = 0 // no −0 on the wire
	}
	pr.Score = s
	pr.Label = o.predict(s)
	if labelled {
		c := 1.0
		if sh != 0 {
			c = math.Exp(-sh)
		}
		l := int(y) - 1
		o.learn(l, self, c, old)
		o.record(s, l, o.n)
	}
	return pr
}

// omamLevelSums sets r[ℓ] = Σ_{i ≠ skip, lv_i = ℓ} k_i.
func omamLevelSums(r, k []float64, lv []int32, skip int) {
	clear(r)
	lv = lv[:len(k)]
	if skip < 0 {
		skip = len(k)
	}
	for i, v := range k[:skip] {
		r[lv[i]] += v
	}
	for i := skip + 1; i < len(k); i++ {
		r[lv[i]] += k[i]
	}
}

// learn stores the prepared input o.xp at 0-based level l with
// K(x, x) = self, given its kernel row c·o.kb and its level sums c·o.r over
// the examples other than slot old (the oldest, evicted first; −1 when the
// ring is not full).
func (o *ExactOMAM) learn(l int, self, c float64, old int) {
	n := o.count // slots holding data before the write
	if old >= 0 {
		o.evict(old)
	}
	nb, m := o.b, o.m
	a, ac := o.acc[l*nb:l*nb+n], o.accC[l*nb:l*nb+n]
	for i, v := range o.kb[:n] {
		if i == old {
			continue
		}
		ai, t := a[i], c*v
		s := ai + t
		bp := s - ai
		ac[i] += (ai - (s - bp)) + (t - bp)
		a[i] = s
	}
	for b, v := range o.r {
		v *= c
		if b == l {
			v = self + 2*v
		}
		k := min(b, l)*m + max(b, l)
		o.g[k], o.gC[k] = twoSumAcc(o.g[k], o.gC[k], v)
	}
	j := o.head
	copy(o.xs[j*o.d:(j+1)*o.d], o.xp)
	o.lv[j], o.self[j] = int32(l), self
	for k := range m {
		o.acc[k*nb+j], o.accC[k*nb+j] = 0, 0
	}
	o.cnt[l]++
	o.count++
	o.n++
	if o.head++; o.head == nb {
		o.head = 0
		o.pairSums(o.g, o.gC)
	}
	o.derive()
}

// evict removes the example in slot j, the oldest: its A^ℓ are its kernel
// sums against every other stored example.
func (o *ExactOMAM) evict(j int) {
	b, m, nb := int(o.lv[j]), o.m, o.b
	for a := range m {
		v := o.acc[a*nb+j] + o.accC[a*nb+j]
		if a == b {
			v = o.self[j] + 2*v
		}
		k := min(a, b)*m + max(a, b)
		o.g[k], o.gC[k] = twoSumAcc(o.g[k], o.gC[k], -v)
	}
	o.cnt[b]--
	o.count--
}

// pairSums sets (g, gC) to G recomputed from the stored K(x_i, x_i) and
// A_i^ℓ: every pair (i, j) is counted once, in the A of the older of the
// two.
func (o *ExactOMAM) pairSums(g, gC []float64) {
	clear(g)
	clear(gC)
	m, nb := o.m, o.b
	for i := range o.count {
		b := int(o.lv[i])
		for a := range m {
			v := o.acc[a*nb+i] + o.accC[a*nb+i]
			if a == b {
				v = o.self[i] + 2*v
			}
			k := min(a, b)*m + max(a, b)
			g[k], gC[k] = twoSumAcc(g[k], gC[k], v)
		}
	}
}

// derive recomputes c(ℓ) and 1/‖w‖ from the counts and G, O(m²).
func (o *ExactOMAM) derive() {
	W := float64(o.count)
	var below float64
	for l, c := range o.cnt {
		v := float64(c)
		o.coef[l] = below - (W - below - v)
		below += v
	}
	m := o.m
	var ww float64
	for a, ca := range o.coef {
		if ca == 0 {
			continue
		}
		t := ca * (o.g[a*m+a] + o.gC[a*m+a])
		for b := a + 1; b < m; b++ {
			t += 2 * o.coef[b] * (o.g[a*m+b] + o.gC[a*m+b])
		}
		ww += ca * t
	}
	o.k, o.lk = 0, math.Inf(-1)
	if ww > 0 && !math.IsInf(ww, 0) {
		o.k = 1 / math.Sqrt(ww)
		o.lk = math.Log(o.k)
	}
}

// Serialised state of an ExactOMAM, after the envelope (header.go; type
// "omam", version 1: "omam_exact"), little-endian:
//
//	n int64 (labelled examples learned in all), count uint32, head uint32;
//	G: for a ≤ b (row by row), G_ab and its compensation float64;
//	slots 0..count−1 in ring order, each: level−1 uint32, K(x_i, x_i)
//	  float64, then A_i^ℓ and comp(A_i^ℓ) float64 for ℓ = 1..m, then x_i
//	  d×float64 (the stored form: x/‖x‖ for linear);
//	threshold buffer as in OMAM's encoding: fill uint32, then per event,
//	  oldest first: score float64, level−1 uint32; fitted uint8,
//	  θ₁..θ_{m−1} float64.
//
// The level counts, c(ℓ), ‖w‖ and the buffer's level counts are rebuilt
// by the update code, so a restored model predicts bit-identically and
// stays identical under further learning.

// AppendBinary appends the MarshalBinary encoding of o to dst
// (encoding.BinaryAppender).
func (o *ExactOMAM) AppendBinary(dst []byte) ([]byte, error) {
	dst = AppendHeader(dst, OMAMName, &o.par, o.d)
	dst = codec.AppendI64(dst, o.n)
	dst = codec.AppendU32(dst, uint32(o.count))
	dst = codec.AppendU32(dst, uint32(o.head))
	m, nb, d := o.m, o.b, o.d
	for a := range m {
		for b := a; b < m; b++ {
			dst = codec.AppendF64(dst, o.g[a*m+b])
			dst = codec.AppendF64(dst, o.gC[a*m+b])
		}
	}
	for i := range o.count {
		dst = codec.AppendU32(dst, uint32(o.lv[i]))
		dst = codec.AppendF64(dst, o.self[i])
		for a := range m {
			dst = codec.AppendF64(dst, o.acc[a*nb+i])
			dst = codec.AppendF64(dst, o.accC[a*nb+i])
		}
		dst = codec.AppendF64s(dst, o.xs[i*d:(i+1)*d])
	}
	return o.omamThresholds.appendBinary(dst), nil
}

// exactOMAMSize returns the size of the state after the envelope with
// count stored examples and fill buffered events.
func exactOMAMSize(d, m, count, fill int) int {
	return 16 + 8*m*(m+1) + count*(12+16*m+8*d) + 4 + 12*fill + 1 + 8*(m-1)
}

// MarshalBinary encodes the complete state of o (see the format above).
func (o *ExactOMAM) MarshalBinary() ([]byte, error) {
	size := 256 + 8*len(o.par.Edges) + exactOMAMSize(o.d, o.m, o.count, o.bufFill)
	return o.AppendBinary(make([]byte, 0, size))
}

// UnmarshalBinary replaces o's parameters and state with the encoded ones.
// It rejects a wrong header, a truncated or over-long encoding, invalid
// parameters and inconsistent state with an error wrapping ErrFormat; o is
// then unchanged.
func (o *ExactOMAM) UnmarshalBinary(b []byte) error {
	var par OMAMParams
	d, r := ReadHeader(b, OMAMName, &par, func(tag string, s legacySpec) error { return legacyOMAM(tag, s, &par) })
	checkParams(r, &par, d)
	if r.Err() == nil && par.Budget <= 0 {
		r.Failf("budget %d: not the exact kernel mode", par.Budget)
	}
	n := r.I64()
	count, head := int(r.U32()), int(r.U32())
	if err := r.Err(); err != nil {
		return err
	}
	// Sizes before allocating anything for the parameters.
	nb, m := par.Budget, par.Levels
	switch {
	case count > nb || head >= nb || (count < nb && head != count):
		return fmt.Errorf("%w: ring count %d, head %d with budget %d", ErrFormat, count, head, nb)
	case n < int64(count):
		return fmt.Errorf("%w: %d examples stored after %d learned", ErrFormat, count, n)
	}
	if !r.Need(exactOMAMSize(d, m, count, 0) - 16) {
		return r.Err()
	}
	no, err := NewExactOMAM(d, par)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	for a := range m {
		for b := a; b < m; b++ {
			no.g[a*m+b], no.gC[a*m+b] = r.F64(), r.F64()
		}
	}
	for i := 0; i < count && r.Err() == nil; i++ {
		l := r.U32()
		if r.Err() == nil && l >= uint32(m) {
			r.Failf("slot %d: level %d out of range", i, int64(l)+1)
		}
		no.lv[i] = int32(l)
		no.self[i] = r.F64()
		for a := range m {
			no.acc[a*nb+i], no.accC[a*nb+i] = r.F64(), r.F64()
		}
		r.F64s(no.xs[i*d : (i+1)*d])
	}
	if err := r.Err(); err != nil {
		return err
	}
	no.n, no.count, no.head = n, count, head
	for i := range count {
		no.cnt[no.lv[i]]++
	}
	no.omamThresholds.decode(r, n)
	if err := r.End(); err != nil {
		return err
	}
	if err := no.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	no.recount()
	no.derive()
	*o = *no
	return nil
}

// checkState rejects decoded states that no sequence of updates produces,
// in O(Budget·(d + m) + m²).
func (o *ExactOMAM) checkState() error {
	const tol = 1e-9
	nb, d, m := o.b, o.d, o.m
	for a := range m {
		for b := a; b < m; b++ {
			if !isFinite(o.g[a*m+b]) || !isFinite(o.gC[a*m+b]) {
				return errors.New("non-finite level-pair kernel sum")
			}
		}
	}
	for i := range o.count {
		x := o.xs[i*d : (i+1)*d]
		for _, v := range x {
			if !isFinite(v) {
				return fmt.Errorf("slot %d: non-finite input", i)
			}
		}
		if !isFinite(o.self[i]) {
			return fmt.Errorf("slot %d: non-finite K(x, x)", i)
		}
		for a := range m {
			if !isFinite(o.acc[a*nb+i]) || !isFinite(o.accC[a*nb+i]) {
				return fmt.Errorf("slot %d: non-finite kernel sum", i)
			}
		}
		if err := checkStoredInput(&o.kern, x, o.self[i]); err != nil {
			return fmt.Errorf("slot %d: %s", i, err)
		}
	}
	// A_i^ℓ sums K over the newer examples at level ℓ: |K| ≤ 1 for the
	// bounded kernels (≥ 0 for rbf and laplacian), and the newest has none.
	newer := make([]int, m)
	for k := range o.count {
		i := (o.head - 1 - k + 2*nb) % nb // newest first
		for a := range m {
			v := o.acc[a*nb+i] + o.accC[a*nb+i]
			if o.kern.kind == kindPolynomial {
				if k == 0 && v != 0 {
					return fmt.Errorf("slot %d (newest): kernel sum %v, want 0", i, v)
				}
				continue
			}
			lo := -1.0
			if o.kern.kind != kindLinear {
				lo = 0
			}
			if f := float64(newer[a])*(1+tol) + tol; !(v >= lo*f && v <= f) {
				return fmt.Errorf("slot %d: kernel sum %v over %d newer examples at level %d", i, v, newer[a], a+1)
			}
		}
		newer[o.lv[i]]++
	}
	// G must agree with the one the A's give.
	g, gC := make([]float64, m*m), make([]float64, m*m)
	o.pairSums(g, gC)
	var mag float64 // scale of the terms, for the tolerance
	for i := range o.count {
		mag += math.Abs(o.self[i])
		for a := range m {
			mag += 2 * math.Abs(o.acc[a*nb+i]+o.accC[a*nb+i])
		}
	}
	for a := range m {
		for b := a; b < m; b++ {
			k := a*m + b
			if got, want := o.g[k]+o.gC[k], g[k]+gC[k]; !(math.Abs(got-want) <= 1e-6*mag+tol) {
				return fmt.Errorf("G_%d%d = %v, but the stored kernel sums give %v", a+1, b+1, got, want)
			}
		}
	}
	return o.omamThresholds.check(o.n)
}

// checkStoredInput checks a decoded stored input x (in its prepared form)
// and its K(x, x) against the kernel.
func checkStoredInput(kern *Kernel, x []float64, s float64) error {
	const tol = 1e-9
	switch kern.kind {
	case kindLinear:
		sq := dot(x, x)
		if !(sq == 0 && s == 0 || math.Abs(sq-1) <= tol && math.Abs(s-1) <= tol) {
			return fmt.Errorf("stored input of norm² %v with K(x, x) = %v", sq, s)
		}
	case kindPolynomial:
		if want := powInt(dot(x, x)+kern.coef0, kern.degree); s != want || !(s <= maxPolySelf) {
			return fmt.Errorf("K(x, x) = %v, want %v", s, want)
		}
	default:
		if s != 1 || !(dot(x, x) <= maxDistInputSq) {
			return fmt.Errorf("K(x, x) = %v (want 1), ‖x‖² = %v", s, dot(x, x))
		}
	}
	return nil
}
