package online

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/streamer/streamer/online/codec"
)

// FMName is the configuration's name of the factorization machine.
const FMName = "fm"

// FM losses (FMParams.Loss).
const (
	FMSquared  = "squared"  // ratings and other real targets: a regression
	FMLogistic = "logistic" // clicks: a classifier with a probability
)

// FMParams are the parameters of type "fm".
type FMParams struct {
	Loss    string `yaml:"loss"`    // squared (default) | logistic
	Factors int    `yaml:"factors"` // k, the length of every feature's factor vector, 0..256 (default 16; 0: a linear model)
	// LearningRate is the AdaGrad base step of the linear weights (and of
	// the logistic loss's intercept); FactorRate that of the factors.
	LearningRate float64 `yaml:"learning_rate"`        // > 0 (default 0.2)
	FactorRate   float64 `yaml:"factor_learning_rate"` // > 0 (default 0.1)
	// StepFloor keeps a feature's weight learning at a steady pace where
	// AdaGrad alone would slow it to a halt: its step is at least
	// StepFloor × LearningRate while its AdaGrad sum G is at most
	// StepFloorUntil, and that floor falls as StepFloorUntil/G past it. A
	// feature of a few events (a user's or an item's id) then follows its
	// changes as a constant step does; one in a large share of the events
	// (a genre), whose every step moves many predictions, soon learns at
	// AdaGrad's own decaying pace. 0: AdaGrad alone.
	StepFloor      float64 `yaml:"step_floor"`       // in [0, 1] (default 0.25)
	StepFloorUntil float64 `yaml:"step_floor_until"` // ≥ 0, in the loss gradient's units squared, σ² with target_scale std (0: the default 300)
	L2             float64 `yaml:"l2"`               // L2 penalty on the weights, ≥ 0 (default 0)
	FactorL2       float64 `yaml:"factor_l2"`        // L2 penalty on the factors, ≥ 0 (default 0.05 for the squared loss with target_scale std, else 0)
	InitStdev      float64 `yaml:"init_stdev"`       // standard deviation of the factors' initial values, > 0 with factors (default 0.05)
	Seed           int     `yaml:"seed"`             // the factors' initial values, ≥ 0 (default 1)
	// Factorize lists the pairs of namespaces whose features interact
	// through their factors ([[user, item]]: a user's factors meet an
	// item's, not another user feature's); empty: every pair of features
	// (the classic factorization machine). The names are namespaces of
	// features.namespaces (hashed features).
	Factorize [][]string `yaml:"factorize"`
	// LearnIntercept makes the squared loss's intercept w₀ a weight
	// learned like the others (AdaGrad at LearningRate, from 0) instead of
	// the running mean of the labels: for a model that learns another's
	// residuals (a key-scoped residual model), whose first residuals,
	// made while the other model has not learned the key yet, would
	// otherwise stay in its mean. The logistic loss always learns it.
	LearnIntercept bool `yaml:"learn_intercept"`
	// TargetScale (the squared loss): std learns the labels in units of
	// their running standard deviation σ: the prediction is the running
	// mean (or σ·w₀ with LearnIntercept) plus σ times the weights' and
	// factors' terms, which learn from the error over σ. The steps, the
	// floors, the penalties and the factors' initial values then mean the
	// same on any scale (ratings of 1..5, 1..10, 0..100 or 0..1). none
	// learns in the labels' own units (the model before 2026-12-07), which
	// the defaults suit on a scale near 0.5..5 only. The logistic loss's
	// labels are ±1: it ignores the key.
	TargetScale string `yaml:"target_scale"` // std (default) | none

	// namespaces is features.namespaces, which the configuration sets
	// (SetNamespaces): an entry's field f ≥ 1 is the namespace
	// namespaces[f-1]. Not a key of its own: the encoding stores it after
	// the parameters, so that a snapshot knows the numbering it learned
	// under (and the configuration's fingerprint includes it).
	namespaces []string
}

// FM target scales (FMParams.TargetScale).
const (
	FMScaleStd  = "std"
	FMScaleNone = "none"
)

// FM defaults.
const (
	DefaultFMFactors      = 16
	DefaultFMLearningRate = 0.2
	DefaultFMFactorRate   = 0.1
	DefaultFMInitStdev    = 0.05
	// DefaultFMFactorL2Std is factor_l2's default for the squared loss
	// with target_scale std (0 for the others). Without it that loss's
	// factors learned the noise of ratings with little or no user × item
	// structure, and the fm lost to the user and item biases it also
	// holds: a generated set of biases and noise gave RMSE 0.962 against
	// the biases baseline's 0.955 (0.953 with the penalty). With it the fm
	// beat that baseline on every set measured, MovieLens included, and
	// lost 0.005–0.008 where the user × item structure is strong
	// (docs/performance.md, "Generated sets").
	DefaultFMFactorL2Std = 0.05
	DefaultFMSeed        = 1
	DefaultFMStepFloor   = 0.25
	// DefaultFMStepFloorUntil is StepFloorUntil's default: about 450
	// ratings' squared errors in units of σ² (target_scale std; 400 on a
	// 0.5..5 scale with none), 1 000 clicks' logistic gradients.
	DefaultFMStepFloorUntil = 300
	maxFMFactors            = 256
	// maxFMLabelAbs bounds a squared-loss label: beyond it squared errors
	// and AdaGrad sums could overflow.
	maxFMLabelAbs = 1e15
)

// DefaultFMParams returns the defaults of type "fm".
func DefaultFMParams() FMParams {
	return FMParams{Loss: FMSquared, Factors: DefaultFMFactors, LearningRate: DefaultFMLearningRate,
		FactorRate: DefaultFMFactorRate, FactorL2: DefaultFMFactorL2Std, InitStdev: DefaultFMInitStdev, Seed: DefaultFMSeed,
		StepFloor: DefaultFMStepFloor, TargetScale: FMScaleStd}
}

// Complete sets factor_l2's default, which depends on the loss and the
// target scale (DefaultFMFactorL2Std), drops target_scale from the
// logistic loss's parameters unless given (it has no effect there), and
// writes none as the empty value, so that both encode as the model before
// the key did.
func (p *FMParams) Complete(_ int, given func(string) bool) {
	if !given("factor_l2") {
		p.FactorL2 = 0
		if p.Loss == FMSquared && p.TargetScale == FMScaleStd {
			p.FactorL2 = DefaultFMFactorL2Std
		}
	}
	if p.Loss != FMSquared && !given("target_scale") || p.TargetScale == FMScaleNone {
		p.TargetScale = ""
	}
}

// SetNamespaces records features.namespaces (Namespaced).
func (p *FMParams) SetNamespaces(ns []string) { p.namespaces = slices.Clone(ns) }

// Namespaces returns the namespaces set by SetNamespaces.
func (p *FMParams) Namespaces() []string { return p.namespaces }

// maxDim: an fm keeps state only for the features it has learned, so
// hashed inputs may have up to 2^30 indices.
func (p *FMParams) maxDim() int { return MaxSparseDim }

// Validate checks the parameters.
func (p *FMParams) Validate(int) error {
	var c checks
	if p.Loss != FMSquared && p.Loss != FMLogistic {
		c.add("loss", "must be %s or %s, got %q", FMSquared, FMLogistic, p.Loss)
	}
	if p.Factors < 0 || p.Factors > maxFMFactors {
		c.add("factors", "must be in [0, %d], got %d", maxFMFactors, p.Factors)
	}
	if !(p.LearningRate > 0) || math.IsInf(p.LearningRate, 0) {
		c.add("learning_rate", "must be > 0 and finite, got %v", p.LearningRate)
	}
	if !(p.FactorRate > 0) || math.IsInf(p.FactorRate, 0) {
		c.add("factor_learning_rate", "must be > 0 and finite, got %v", p.FactorRate)
	}
	if !(p.StepFloor >= 0 && p.StepFloor <= 1) {
		c.add("step_floor", "must be in [0, 1] (a fraction of learning_rate), got %v", p.StepFloor)
	}
	if !(p.StepFloorUntil >= 0) || math.IsInf(p.StepFloorUntil, 0) {
		c.add("step_floor_until", "must be ≥ 0 and finite, got %v", p.StepFloorUntil)
	}
	if !(p.L2 >= 0) || math.IsInf(p.L2, 0) {
		c.add("l2", "must be ≥ 0 and finite, got %v", p.L2)
	}
	if !(p.FactorL2 >= 0) || math.IsInf(p.FactorL2, 0) {
		c.add("factor_l2", "must be ≥ 0 and finite, got %v", p.FactorL2)
	}
	if p.Factors > 0 && (!(p.InitStdev > 0) || p.InitStdev > 1e3) {
		// 0 would be a saddle: every factor's gradient is a sum of the
		// other factors, all 0.
		c.add("init_stdev", "must be in (0, 1000] with factors, got %v", p.InitStdev)
	}
	if p.Factors == 0 && p.InitStdev != 0 && !(p.InitStdev > 0 && p.InitStdev <= 1e3) {
		c.add("init_stdev", "must be in (0, 1000], got %v", p.InitStdev)
	}
	if p.Seed < 0 {
		c.add("seed", "must be ≥ 0, got %d", p.Seed)
	}
	if len(p.namespaces) > MaxFields {
		c.add("features.namespaces", "at most %d namespaces with an fm, got %d", MaxFields, len(p.namespaces))
	}
	for i, ns := range p.namespaces {
		if slices.Index(p.namespaces, ns) != i {
			c.add("features.namespaces", "namespace %q listed twice", ns)
		}
	}
	if p.TargetScale != "" && p.TargetScale != FMScaleStd && p.TargetScale != FMScaleNone {
		c.add("target_scale", "must be %s or %s, got %q", FMScaleStd, FMScaleNone, p.TargetScale)
	}
	if p.LearnIntercept && p.Loss == FMLogistic {
		c.add("learn_intercept", "applies to loss %s only (the %s loss's intercept is always learned)", FMSquared, FMLogistic)
	}
	if len(p.Factorize) > 0 && p.Factors == 0 {
		c.add("factorize", "needs factors > 0")
	}
	for i, pair := range p.Factorize {
		if len(pair) != 2 {
			c.add("factorize", "pair %d: want two namespaces, got %d", i, len(pair))
			continue
		}
		for _, ns := range pair {
			if !slices.Contains(p.namespaces, ns) {
				if len(p.namespaces) == 0 {
					c.add("factorize", "pair %d: namespace %q: factorize needs hashed features with features.namespaces listing it", i, ns)
				} else {
					c.add("factorize", "pair %d: namespace %q is not in features.namespaces %v", i, ns, p.namespaces)
				}
			}
		}
	}
	return c.err()
}

// FMType is the "fm" model type.
func FMType() *Type {
	return Define(Def[FMParams]{
		Name:     FMName,
		Doc:      "factorization machine: bias, weights and pairwise interactions through k factors per feature (optionally only between named namespaces), AdaGrad, O(k·nnz) per event; squared loss (ratings) or logistic (clicks)",
		Defaults: DefaultFMParams,
		Traits: func(p *FMParams) Traits {
			if p.Loss == FMLogistic {
				return Traits{Kind: Classifier, Probability: true}
			}
			return Traits{Kind: Regression, Value: true}
		},
		New: func(dim int, p *FMParams) (Model, error) { return NewFM(dim, *p) },
		Examples: func() []FMParams {
			d := DefaultFMParams()
			logistic := DefaultFMParams()
			logistic.Loss, logistic.Factors, logistic.L2, logistic.FactorL2 = FMLogistic, 4, 1e-3, 1e-3
			linear := DefaultFMParams()
			linear.Factors = 0
			fields := DefaultFMParams()
			fields.Factors, fields.Factorize = 3, [][]string{{"user", "item"}, {"item", "item"}}
			fields.SetNamespaces([]string{"user", "item"})
			return []FMParams{d, logistic, linear, fields}
		},
		Restore: RestoreNew[FM],
	})
}

// FM is a factorization machine (Rendle 2010) learned online:
//
//	ŷ(x) = w₀ + Σⱼ wⱼxⱼ + Σ_{j<j'} ⟨vⱼ, vⱼ'⟩ xⱼxⱼ'
//
// over the nonzero entries of x (dense features, or hashed ones:
// ObserveSparse), each feature j with a weight wⱼ and a factor vector vⱼ
// of length k (FMParams.Factors). With FMParams.Factorize only the pairs
// of entries whose namespaces (fields, ObserveFields) form a listed pair
// interact. The pairwise sum is computed with Rendle's identity in
// O(k·nnz): with Sₐ = Σ_{j∈a} vⱼxⱼ per namespace a,
//
//	Σ_{pairs} = Σ_{(a,b) listed, a≠b} ⟨Sₐ, S_b⟩ + Σ_{(a,a) listed} ½(‖Sₐ‖² − Σ_{j∈a} ‖vⱼxⱼ‖²)
//
// (without Factorize every entry is in one namespace paired with itself).
//
// Losses: squared (FMSquared, a regression: w₀ is the running mean of the
// labels learned, or learned from 0 with LearnIntercept, the score is ŷ
// and the prediction Value is ŷ clipped to the range of the labels
// learned so far) or logistic (FMLogistic, a
// classifier: w₀ is learned, the score is the logit, Probability σ(ŷ)).
//
// Learning, per labelled event, with g = dℓ/dŷ (ŷ − y, or −y·σ(−yŷ)):
// AdaGrad per coordinate for w (and a learned w₀) and per
// feature for vⱼ (one sum of ‖∇vⱼ‖²/k per feature):
//
//	∂ŷ/∂vⱼ = xⱼ·(Σ_{b paired with a, b≠a} S_b + [(a,a) listed]·(Sₐ − vⱼxⱼ))   for j in namespace a
//	G += ‖∇‖², θ −= η·∇/(sqrt(G) + 1e-8)
//
// every gradient taken at the state before the event. L2 (FMParams.L2,
// FactorL2) adds λθ to the gradients of the coordinates the event touches
// (as libFM's and Vowpal Wabbit's sparse updates do), not to idle ones.
//
// State is kept only for features that have been learned (a labelled event
// with xⱼ ≠ 0): a row (wⱼ, its AdaGrad sum, vⱼ's AdaGrad sum, vⱼ) in a
// table keyed by the index, so a hashed space of 2^bits indices costs
// memory and snapshot bytes in proportion to the features seen, not to
// 2^bits; scoring an unseen feature (unlabelled events, ranking requests)
// stores nothing. A feature's initial factors are a counter-based normal
// draw keyed by (Seed, index) (the generator of the generated random
// features, featuremap_hashed.go) times InitStdev, the same whichever
// order features arrive in; its initial weight is 0.
//
// Inputs whose squared norm exceeds 1e300 (or is not finite) are neither
// scored nor learned: the Prediction is empty (Score 0).
type FM struct {
	p   FMParams
	dim int
	k   int
	sq  bool // squared loss
	// learnB: w₀ is b, learned (the logistic loss, or the squared loss
	// with LearnIntercept); otherwise the running mean of the labels.
	learnB bool
	// std: the squared loss learns in units of the labels' standard
	// deviation (TargetScale std): m2 is Welford's Σ(y − ȳ)² of the labels
	// learned, scale σ = √(m2/n), 0 until two labels differ: until then
	// the prediction is the labels' mean (0 with learnB) and the weights
	// and factors do not learn, so that the model is the same on any scale.
	std   bool
	m2    float64
	scale float64

	n        int64
	ySum     float64 // Σy of the squared loss (Neumaier-compensated with yComp; with std each y clipped as fmRobustClip says)
	yComp    float64
	lo, hi   float64 // range of the squared loss's labels learned
	b, gb    float64 // learnB: the intercept w₀ and its AdaGrad sum
	nPos     int64   // logistic loss: labels +1
	rows     fmRows
	slotOf   [MaxFields + 1]int8 // field → its slot among the factorized namespaces (−1: no interactions)
	nslots   int
	adj      []bool // nslots × nslots: the slots whose pairs interact
	self     []bool // per slot: its own pairs interact
	initBase uint64 // base key of the initial factors' generator

	sc fmScratch
}

var (
	_ Model      = (*FM)(nil)
	_ FieldModel = (*FM)(nil)
)

// fmRows holds the learned features' rows: row r is
// [w, G_w, G_v, s, v_0 … v_{k−1}] (fmRowChunk), found by index
// through an open-addressing table.
type fmRows struct {
	stride int
	n      int         // rows
	idx    []int32     // row → its input index (creation order)
	chunks [][]float64 // chunk 0 holds rows [0, 16), chunk c ≥ 1 rows [16·2^(c−1), 16·2^c)
	table  []uint64    // open addressing: 0 empty, else uint64(index+1) | uint64(row)<<32
}

const (
	fmChunkBits = 4 // the first chunk's rows: 16 (a key-scoped model's few features take little)
	fmRowW      = 0 // weight
	fmRowGW     = 1 // AdaGrad Σ g² of the weight
	fmRowGV     = 2 // AdaGrad Σ ‖g‖²/k of the factors
	fmRowS      = 3 // the feature's scale: the largest |x| learned
	fmRowV      = 4 // first factor
)

// row returns row r.
func (t *fmRows) row(r int32) []float64 {
	c, off := fmRowChunk(r)
	off *= t.stride
	return t.chunks[c][off : off+t.stride : off+t.stride]
}

// fmRowChunk returns the chunk of row r and r's place in it: the chunks
// double, so that rows never move and a model with few features holds
// little.
func fmRowChunk(r int32) (chunk, off int) {
	c := bits.Len32(uint32(r) >> fmChunkBits)
	if c == 0 {
		return 0, int(r)
	}
	return c, int(r) - 1<<(fmChunkBits+c-1)
}

// slot hashes an index into the table (Fibonacci hashing).
func fmSlot(i int32, mask uint64) uint64 {
	return (uint64(uint32(i)) * 0x9e3779b97f4a7c15 >> 32) & mask
}

// find returns the row of index i, −1 if it has none.
func (t *fmRows) find(i int32) int32 {
	if len(t.table) == 0 {
		return -1
	}
	mask := uint64(len(t.table) - 1)
	key := uint64(uint32(i)) + 1
	for s := fmSlot(i, mask); ; s = (s + 1) & mask {
		e := t.table[s]
		if e == 0 {
			return -1
		}
		if e&0xffffffff == key {
			return int32(e >> 32)
		}
	}
}

// add creates the row of index i (which has none) holding init and
// returns its number.
func (t *fmRows) add(i int32, init []float64) int32 {
	r := int32(t.n)
	if _, off := fmRowChunk(r); off == 0 { // a new chunk, as large as the rows so far (16 at first)
		t.chunks = append(t.chunks, make([]float64, max(t.n, 1<<fmChunkBits)*t.stride))
	}
	t.n++
	t.idx = append(t.idx, i)
	copy(t.row(r), init) // (a chunk starts zeroed: nil init is a zero row)
	if 2*t.n > len(t.table) {
		t.grow()
	} else {
		t.put(i, r)
	}
	return r
}

func (t *fmRows) put(i, r int32) {
	mask := uint64(len(t.table) - 1)
	s := fmSlot(i, mask)
	for t.table[s] != 0 {
		s = (s + 1) & mask
	}
	t.table[s] = uint64(uint32(i)) + 1 | uint64(r)<<32
}

// grow doubles the table (at least 64 slots) and re-inserts every row.
func (t *fmRows) grow() {
	t.table = make([]uint64, max(64, 2*len(t.table)))
	for r, i := range t.idx {
		t.put(i, int32(r))
	}
}

// fmScratch is the per-event working memory.
type fmScratch struct {
	ents  []fmEnt   // the event's distinct nonzero entries
	init  []float64 // initial rows of the entries not learned yet, stride each
	step  []float64 // per entry: the factors' step size
	u     []float64 // vⱼxⱼ per entry, k each
	s     []float64 // Sₐ per slot, k each
	t     []float64 // per slot: the sum of its partners' S (its own included when self-paired)
	tt    []float64 // per slot: ‖t‖²
	d     []float64 // the factor gradients, k per entry
	gen   uint32    // the dedup table's generation (an event's own)
	seen  []uint64  // dedup: generation<<32 | position+1 of an index in ents
	dense []int32   // Observe: the nonzero indices of x
	dval  []float64
}

// fmEnt is one distinct entry of an event (no pointers: the scratch is
// written without write barriers).
type fmEnt struct {
	idx   int32
	row   int32   // its row, or when new its initial row's number in fmScratch.init
	chunk int32   // its row's chunk (−1: the initial row in fmScratch.init)
	off   int32   // and offset there
	slot  int8    // its slot among the factorized namespaces (−1: linear only)
	new   bool    // the feature has not been learned
	grow  bool    // |x| exceeds the feature's scale (score sets it)
	x     float64 // its value (duplicates summed)
	xs    float64 // and scaled: x/s with s the row's scale
	vv    float64 // ‖v‖² of its factors (score sets it when factor_l2 > 0)
}

// row returns the row of entry en: learned, or initial.
func (m *FM) row(en *fmEnt) []float64 {
	st, o := m.rows.stride, int(en.off)
	if en.chunk < 0 {
		return m.sc.init[o : o+st : o+st]
	}
	return m.rows.chunks[en.chunk][o : o+st : o+st]
}

// locate sets en's chunk and offset from its row.
func (m *FM) locate(en *fmEnt) {
	if en.new {
		en.chunk, en.off = -1, en.row*int32(m.rows.stride)
		return
	}
	c, o := fmRowChunk(en.row)
	en.chunk, en.off = int32(c), int32(o*m.rows.stride)
}

// NewFM builds an empty factorization machine for inputs of dimension dim.
func NewFM(dim int, p FMParams) (*FM, error) {
	if err := validateDimFor(dim, &p); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	p.namespaces = slices.Clone(p.namespaces)
	p.Factorize = cloneLists(p.Factorize)
	m := &FM{p: p, dim: dim, k: p.Factors, sq: p.Loss == FMSquared, learnB: p.Loss != FMSquared || p.LearnIntercept}
	m.std = m.sq && p.TargetScale == FMScaleStd
	m.rows.stride = fmRowV + m.k
	m.initBase = fmix64(uint64(p.Seed) ^ genP2)
	m.lo, m.hi = math.Inf(1), math.Inf(-1)
	for f := range m.slotOf {
		m.slotOf[f] = -1
	}
	switch {
	case m.k == 0:
	case len(p.Factorize) == 0: // every pair: one slot, paired with itself
		for f := range m.slotOf {
			m.slotOf[f] = 0
		}
		m.nslots, m.adj, m.self = 1, []bool{true}, []bool{true}
	default:
		slotOfNS := map[string]int{}
		for _, pair := range p.Factorize {
			for _, ns := range pair {
				if _, ok := slotOfNS[ns]; !ok {
					slotOfNS[ns] = len(slotOfNS)
				}
			}
		}
		m.nslots = len(slotOfNS)
		m.adj, m.self = make([]bool, m.nslots*m.nslots), make([]bool, m.nslots)
		for _, pair := range p.Factorize {
			a, b := slotOfNS[pair[0]], slotOfNS[pair[1]]
			m.adj[a*m.nslots+b], m.adj[b*m.nslots+a] = true, true
			if a == b {
				m.self[a] = true
			}
		}
		for f, ns := range p.namespaces {
			if s, ok := slotOfNS[ns]; ok {
				m.slotOf[f+1] = int8(s)
			}
		}
	}
	m.sc.s = make([]float64, m.nslots*m.k)
	m.sc.t = make([]float64, m.nslots*m.k)
	m.sc.tt = make([]float64, m.nslots)
	return m, nil
}

func cloneLists(l [][]string) [][]string {
	if l == nil {
		return nil
	}
	out := make([][]string, len(l))
	for i, s := range l {
		out[i] = slices.Clone(s)
	}
	return out
}

// Type returns "fm".
func (m *FM) Type() string { return FMName }

// Dim returns the input dimension d.
func (m *FM) Dim() int { return m.dim }

// Params returns the model's parameters.
func (m *FM) Params() FMParams { return m.p }

// Examples returns n, the number of examples learned.
func (m *FM) Examples() int64 { return m.n }

// Version returns 1.
func (m *FM) Version() int64 { return 1 }

// Features returns the number of features (input indices) with learned
// state.
func (m *FM) Features() int { return m.rows.n }

// Label maps a wire label to the model's: any finite label with
// |y| ≤ 1e15 for the squared loss; −1/0 → −1 and +1 → +1 for the logistic.
func (m *FM) Label(v float64) (float64, bool) {
	if !m.sq {
		return binaryLabel(v)
	}
	if !(math.Abs(v) <= maxFMLabelAbs) {
		return 0, false
	}
	return v, true
}

// Observe scores x and then, if labelled, learns (x, y): the nonzero
// entries of x, all of field 0. It panics if len(x) != Dim().
func (m *FM) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != m.dim {
		panic("online: FM.Observe: len(x) != Dim()")
	}
	idx, val := m.sc.dense[:0], m.sc.dval[:0]
	for j, v := range x {
		if v != 0 {
			idx = append(idx, int32(j))
			val = append(val, v)
		}
	}
	m.sc.dense, m.sc.dval = idx, val
	return m.ObserveFields(idx, val, nil, y, labelled)
}

// ObserveSparse is Observe on the x with x[idx[k]] += val[k], every entry
// of field 0.
func (m *FM) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) Prediction {
	return m.ObserveFields(idx, val, nil, y, labelled)
}

// ObserveFields is ObserveSparse with the entries' fields (FieldModel):
// duplicate indices are summed and take the field of their first
// occurrence; entries whose values sum to 0 are left out. O(k·nnz), no
// allocation once the scratch space and the row table have grown (a new
// feature's row goes into the last chunk of rows; the chunks double). It panics on
// mismatched lengths or an index outside [0, Dim()), and if labelled with
// a label Label does not return.
func (m *FM) ObserveFields(idx []int32, val []float64, field []uint8, y float64, labelled bool) Prediction {
	if len(idx) != len(val) || field != nil && len(field) != len(idx) {
		panic("online: FM.ObserveFields: len(idx), len(val) and len(field) differ")
	}
	if labelled {
		if _, ok := m.Label(y); !ok || !m.sq && y == 0 {
			panic("online: FM.ObserveFields: label outside the model's set (see Label)")
		}
	}
	p := Prediction{N: m.n}
	if !m.distinct(idx, val, field) {
		return p
	}
	yhat := m.score()
	if !isFinite(yhat) {
		return p
	}
	var g float64
	if m.sq {
		p.Score = yhat + 0 // no −0 on the wire
		if m.n > 0 {
			p.Value, p.HasValue = min(max(yhat, m.lo), m.hi), true
		}
		g = yhat - y
	} else {
		hi, lo := logitPrediction(&p, yhat)
		s := hi
		if y*p.Score >= 0 {
			s = lo
		}
		g = -y * s
	}
	if labelled {
		switch {
		case !m.std:
			m.learn(g)
		case m.scale > 0:
			g /= m.scale // the loss's derivative in units of σ
			if m.n >= fmRobustAfter {
				g = max(-fmRobustClip, min(g, fmRobustClip))
			}
			m.learn(g)
		default: // σ not known yet: the label counts only towards the mean and σ
			g = 0
		}
		m.record(g, y)
	}
	return p
}

// distinct fills the scratch with x's distinct nonzero entries, their
// slots and rows; it reports false when ‖x‖² is out of range.
func (m *FM) distinct(idx []int32, val []float64, field []uint8) bool {
	sc := &m.sc
	size := 16
	for size < 2*len(idx) {
		size *= 2
	}
	if len(sc.seen) < size {
		sc.seen = make([]uint64, size)
		sc.gen = 0
	}
	sc.gen++
	if sc.gen == 0 { // wrapped: forget every stamp
		clear(sc.seen)
		sc.gen = 1
	}
	gen := uint64(sc.gen) << 32
	seen := sc.seen[:size]
	mask := uint64(size - 1)
	ents := sc.ents[:0]
	for e, i := range idx {
		if uint32(i) >= uint32(m.dim) { // (before any change of state)
			panic(fmt.Sprintf("online: FM.ObserveFields: index %d outside [0, %d)", i, m.dim))
		}
		for s := fmSlot(i, mask); ; s = (s + 1) & mask {
			st := seen[s]
			if st&^0xffffffff != gen { // a slot of an earlier event: free
				seen[s] = gen | uint64(len(ents)+1)
				f := uint8(0)
				if field != nil {
					f = field[e]
				}
				ents = append(ents, fmEnt{idx: i, row: m.rows.find(i), slot: m.slotOf[f], x: val[e]})
				break
			}
			if p := int(st&0xffffffff) - 1; ents[p].idx == i {
				ents[p].x += val[e]
				break
			}
		}
	}
	// ‖x‖²; the entries that sum to 0 are dropped (rare: only then is the
	// list compacted); new features get their initial rows' places
	var xx float64
	zeros, newRows := false, 0
	for e := range ents {
		en := &ents[e]
		x := en.x
		xx += x * x
		zeros = zeros || x == 0
		if en.row < 0 { // new: its initial row takes |x| as its scale
			en.new, en.row = true, int32(newRows)
			newRows++
		}
		m.locate(en)
	}
	if zeros {
		w := 0
		newRows = 0
		for _, en := range ents {
			if en.x == 0 {
				continue
			}
			if en.new {
				en.row = int32(newRows)
				newRows++
				m.locate(&en)
			}
			ents[w] = en
			w++
		}
		ents = ents[:w]
	}
	sc.ents = ents
	if !(xx <= maxInputSq) {
		return false
	}
	if newRows > 0 {
		st := m.rows.stride
		sc.init = slices.Grow(sc.init[:0], newRows*st)[:newRows*st]
		clear(sc.init)
		for e := range sc.ents {
			if en := &sc.ents[e]; en.new {
				row := m.row(en)
				row[fmRowS] = math.Abs(en.x)
				if m.k > 0 && en.slot >= 0 {
					m.initFactors(row[fmRowV:], en.idx)
				}
			}
		}
	}
	return true
}

// initFactors sets v to the initial factors of index i.
func (m *FM) initFactors(v []float64, i int32) {
	c := fmix64(m.initBase + uint64(i+1)*genP3)
	s := m.p.InitStdev
	for f := range v {
		v[f] = s * genNormal(c, uint64(f))
	}
}

// score returns ŷ for the scratch's entries, leaving vⱼxⱼ in sc.u and Sₐ
// in sc.s.
func (m *FM) score() float64 {
	sc := &m.sc
	k := m.k
	var lin, mean float64 // lin starts at w₀ (σ·lin + mean with std)
	if m.learnB {
		lin = m.b
	} else if m.n > 0 {
		mean = (m.ySum + m.yComp) / float64(m.n)
		if !m.std {
			lin = mean
		}
	}
	if k == 0 {
		for e := range sc.ents {
			en := &sc.ents[e]
			row := m.row(en)
			en.xs = en.x
			if s := row[fmRowS]; s != 1 || en.x > 1 || en.x < -1 {
				en.xs /= s
				en.grow = math.Abs(en.x) > s
			}
			lin += row[fmRowW] * en.xs
		}
		if m.std {
			return mean + m.scale*lin
		}
		return lin
	}
	s := sc.s[:m.nslots*k]
	clear(s)
	sc.u = slices.Grow(sc.u[:0], len(sc.ents)*k)[:len(sc.ents)*k]
	var selfSq float64         // Σ ‖vⱼxⱼ‖² over the entries of self-paired slots
	norms := m.p.FactorL2 != 0 // learn's penalty needs each entry's ‖v‖²
	for e := range sc.ents {
		en := &sc.ents[e]
		row, xe := m.row(en), en.x
		if s := row[fmRowS]; s != 1 || xe > 1 || xe < -1 { // the value on the feature's scale
			xe /= s
			en.grow = math.Abs(en.x) > s
		}
		en.xs = xe
		lin += row[fmRowW] * xe
		a := int(en.slot)
		if a < 0 {
			continue
		}
		v := row[fmRowV : fmRowV+k]
		sa := s[a*k : a*k+k]
		if !m.self[a] { // (vⱼxⱼ is needed only for a self-paired slot's own terms)
			sa = sa[:len(v)]
			if norms {
				var vv float64
				for f, vf := range v {
					sa[f] += vf * xe
					vv += vf * vf
				}
				en.vv = vv
				continue
			}
			for f, vf := range v {
				sa[f] += vf * xe
			}
			continue
		}
		u := sc.u[e*k : e*k+k]
		var q, vv float64
		for f, vf := range v {
			uf := vf * xe
			u[f] = uf
			sa[f] += uf
			q += uf * uf
			vv += vf * vf
		}
		en.vv = vv
		selfSq += q
	}
	var inter float64
	ns := m.nslots
	for a := range ns {
		sa := s[a*k : a*k+k]
		if m.self[a] {
			inter += 0.5 * dot(sa, sa)
		}
		for b := a + 1; b < ns; b++ {
			if m.adj[a*ns+b] {
				inter += dot(sa, s[b*k:b*k+k])
			}
		}
	}
	if m.std {
		return mean + m.scale*(lin+inter-0.5*selfSq)
	}
	return lin + inter - 0.5*selfSq
}

// learn takes the AdaGrad steps for loss derivative g at the scratch's
// entries.
func (m *FM) learn(g float64) {
	sc := &m.sc
	k, ns := m.k, m.nslots
	eta, etaV, l2, l2v := m.p.LearningRate, m.p.FactorRate, m.p.L2, m.p.FactorL2
	floor, until := eta*m.p.StepFloor, m.p.StepFloorUntil
	if until == 0 {
		until = DefaultFMStepFloorUntil
	}
	// t_a = Σ over a's partners b of S_b (a itself when self-paired)
	t := sc.t[:ns*k]
	if k > 0 {
		clear(t)
		for a := range ns {
			ta := t[a*k : a*k+k]
			for b := range ns {
				if m.adj[a*ns+b] {
					sb := sc.s[b*k : b*k+k]
					for f := range ta {
						ta[f] += sb[f]
					}
				}
			}
			sc.tt[a] = dot(ta, ta)
		}
	}
	// New features get their rows (the initial ones), so that the passes
	// below read learned rows only; a feature whose |x| exceeds its scale
	// takes |x| as its new scale, its weight and factors rescaled so that
	// the model's function is the same (sums S unchanged), its AdaGrad sums
	// too (the gradients scale with x/s).
	for e := range sc.ents {
		en := &sc.ents[e]
		if en.new {
			en.row, en.new = m.rows.add(en.idx, m.row(en)), false
			m.locate(en)
			continue
		}
		if !en.grow {
			continue
		}
		row := m.row(en)
		if a := math.Abs(en.x); a > row[fmRowS] {
			r := a / row[fmRowS]
			row[fmRowW] *= r
			row[fmRowGW] /= r * r
			row[fmRowGV] /= r * r
			for f := fmRowV; f < len(row); f++ {
				row[f] *= r
			}
			row[fmRowS] = a
			en.xs = en.x / a
			en.vv *= r * r
		}
	}
	// One pass: each weight's AdaGrad step, and each factor's loss
	// gradient ∂ℓ/∂vⱼ = g·xⱼ·(t_a − [self]·vⱼxⱼ) into its AdaGrad sum (and
	// into d for a self-paired slot, whose gradient is not a multiple of
	// t_a); then the factors' step sizes and steps, in passes of their own
	// so that the square roots and divisions of different entries overlap.
	// The factors' penalty λ_v takes its part of the step, vⱼ −= step·
	// (∂ℓ/∂vⱼ + λ_v·vⱼ), a multiply per factor in the step's pass; the
	// AdaGrad sum adds ‖∂ℓ/∂vⱼ‖² + λ_v²‖vⱼ‖² (score's ‖vⱼ‖²), without the
	// cross term 2λ_v⟨∂ℓ/∂vⱼ, vⱼ⟩, which took a pass of its own (29% more
	// time per event in BenchmarkFM30).
	nd := len(sc.ents) * k
	sc.d = slices.Grow(sc.d[:0], nd)[:nd]
	sc.step = slices.Grow(sc.step[:0], len(sc.ents))[:len(sc.ents)]
	invK := 0.0
	if k > 0 {
		invK = 1 / float64(k)
	}
	for e := range sc.ents {
		en := &sc.ents[e]
		row, xe := m.row(en), en.xs
		w := row[fmRowW]
		gw := g*xe + l2*w
		G := row[fmRowGW] + gw*gw
		row[fmRowGW] = G
		if floor > 0 {
			// AdaGrad's step, or the floor where that is larger (past
			// until, floor·until/G: compared by a product, divided only
			// when it is the step)
			st := eta / (math.Sqrt(G) + adagradEps)
			if G <= until {
				if floor > st {
					st = floor
				}
			} else if floor*until > st*G {
				st = floor * (until / G)
			}
			row[fmRowW] = w - st*gw
		} else {
			row[fmRowW] = w - eta*gw/(math.Sqrt(G)+adagradEps)
		}
		a := int(en.slot)
		if a < 0 || k == 0 {
			continue
		}
		gx := g * xe
		if !m.self[a] {
			// the loss's gradient is gx·t_a: its squared norm from
			// ‖t_a‖², no pass over the factors until the step
			Gv := row[fmRowGV] + (gx*gx*sc.tt[a]+l2v*l2v*en.vv)*invK
			row[fmRowGV] = Gv
			sc.step[e] = etaV / (math.Sqrt(Gv) + adagradEps)
			continue
		}
		ta, u, d := t[a*k:a*k+k], sc.u[e*k:e*k+k], sc.d[e*k:e*k+k]
		var gg float64
		for f, tf := range ta {
			gf := gx * (tf - u[f])
			d[f] = gf
			gg += gf * gf
		}
		Gv := row[fmRowGV] + (gg+l2v*l2v*en.vv)*invK
		row[fmRowGV] = Gv
		sc.step[e] = etaV / (math.Sqrt(Gv) + adagradEps)
	}
	if k == 0 {
		return
	}
	for e := range sc.ents {
		en := &sc.ents[e]
		a := int(en.slot)
		if a < 0 {
			continue
		}
		v, step := m.row(en)[fmRowV:fmRowV+k], sc.step[e]
		if !m.self[a] {
			c, ta := step*g*en.xs, t[a*k:a*k+k]
			v = v[:len(ta)]
			if l2v == 0 {
				for f, tf := range ta {
					v[f] -= c * tf
				}
				continue
			}
			shrink := 1 - step*l2v // v − step·(gx·t_a + λv)
			for f, tf := range ta {
				v[f] = v[f]*shrink - c*tf
			}
			continue
		}
		d := sc.d[e*k : e*k+k]
		v = v[:len(d)]
		shrink := 1 - step*l2v
		for f, df := range d {
			v[f] = v[f]*shrink - step*df
		}
	}
}

// record adds label y to the loss's statistics and counts the example.
func (m *FM) record(g, y float64) {
	eta := m.p.LearningRate
	if m.learnB {
		m.gb += g * g
		m.b -= eta * g / (math.Sqrt(m.gb) + adagradEps)
	}
	if m.sq {
		m.lo, m.hi = min(m.lo, y), max(m.hi, y)
		var d float64 // y − the mean before it (Welford)
		if m.std && m.n > 0 {
			mean := (m.ySum + m.yComp) / float64(m.n)
			if c := fmRobustClip * m.scale; m.n >= fmRobustAfter && c > 0 {
				y = max(mean-c, min(y, mean+c))
			}
			d = y - mean
		}
		m.ySum, m.yComp = twoSumAcc(m.ySum, m.yComp, y)
		if m.std {
			m.m2 += d * (y - (m.ySum+m.yComp)/float64(m.n+1))
		}
	} else {
		if y > 0 {
			m.nPos++
		}
	}
	m.n++
	if m.std {
		m.scale = m.labelScale()
	}
}

// With target_scale std, from the fmRobustAfter-th label on, a label
// counts towards the mean and σ as at most fmRobustClip·σ from the mean,
// and the error over σ teaches the weights and factors as at most
// fmRobustClip (a Huber loss at fmRobustClip·σ): one wild label (a 4000
// for a 4.0 where no label range dead-letters it) moves the mean by 5σ/n
// and σ by a factor √(1 + 25/n) at most, and cannot stop a feature's
// AdaGrad steps; a scale that changes for good still moves them, by that
// much at each label. Ratings within a few σ of their mean are never
// clipped.
const (
	fmRobustAfter = 30
	fmRobustClip  = 5
)

// labelScale is σ = √(m2/n), the labels' standard deviation, or 0 while
// it is not known (fewer than two labels, or all alike) or too small to
// divide by.
func (m *FM) labelScale() float64 {
	if m.n < 2 || !(m.m2 > 0) {
		return 0
	}
	if s := math.Sqrt(m.m2 / float64(m.n)); s > 1e-150 {
		return s
	}
	return 0
}

// FM encoding, after the envelope (header.go; type "fm"):
//
//	namespaces u32 + str each (FMParams.SetNamespaces);
//	n int64; squared loss: Σy, its compensation, min y, max y f64
//	(±Inf before the first label), with target_scale std Σ(y − ȳ)² f64;
//	logistic loss: n₊ int64, w₀, G₀ f64;
//	rows u32; per row in creation order: index u32, w, G_w, G_v, v (k f64).

// AppendBinary appends the MarshalBinary encoding of m to dst
// (encoding.BinaryAppender).
func (m *FM) AppendBinary(dst []byte) ([]byte, error) {
	dst = AppendHeader(dst, FMName, &m.p, m.dim)
	dst = codec.AppendU32(dst, uint32(len(m.p.namespaces)))
	for _, ns := range m.p.namespaces {
		dst = codec.AppendBytes(dst, []byte(ns))
	}
	dst = codec.AppendI64(dst, m.n)
	if m.sq {
		dst = codec.AppendF64(dst, m.ySum)
		dst = codec.AppendF64(dst, m.yComp)
		dst = codec.AppendF64(dst, m.lo)
		dst = codec.AppendF64(dst, m.hi)
		if m.std {
			dst = codec.AppendF64(dst, m.m2)
		}
	} else {
		dst = codec.AppendI64(dst, m.nPos)
	}
	if m.learnB {
		dst = codec.AppendF64(dst, m.b)
		dst = codec.AppendF64(dst, m.gb)
	}
	dst = codec.AppendU32(dst, uint32(m.rows.n))
	for r, i := range m.rows.idx {
		dst = codec.AppendU32(dst, uint32(i))
		dst = codec.AppendF64s(dst, m.rows.row(int32(r)))
	}
	return dst, nil
}

// MarshalBinary encodes the complete state of m.
func (m *FM) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 128+m.rows.n*(4+8*m.rows.stride)))
}

// UnmarshalBinary replaces m's parameters and state with the encoded ones.
// On error (wrapping ErrFormat) m is unchanged.
func (m *FM) UnmarshalBinary(b []byte) error {
	var p FMParams
	d, r := ReadHeader(b, FMName, &p, nil)
	if nns := r.Count("namespaces", MaxFields, 4); nns > 0 {
		p.namespaces = make([]string, nns)
		for i := range p.namespaces {
			p.namespaces[i] = string(r.Bytes())
		}
	}
	checkParams(r, &p, d)
	if err := r.Err(); err != nil {
		return err
	}
	nm, err := NewFM(d, p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	nm.n = r.I64()
	if nm.sq {
		nm.ySum, nm.yComp, nm.lo, nm.hi = r.F64(), r.F64(), r.F64(), r.F64()
		if nm.std {
			nm.m2 = r.F64()
		}
	} else {
		nm.nPos = r.I64()
	}
	if nm.learnB {
		nm.b, nm.gb = r.F64(), r.F64()
	}
	rowBytes := 4 + 8*nm.rows.stride
	rows := r.Count("rows", d, rowBytes)
	row := make([]float64, nm.rows.stride)
	for range rows {
		i := r.U32()
		r.F64s(row)
		if r.Err() != nil {
			break
		}
		if int64(i) >= int64(d) || nm.rows.find(int32(i)) >= 0 {
			r.Failf("row index %d repeated or outside [0, %d)", i, d)
			break
		}
		nm.rows.add(int32(i), row)
	}
	if err := r.End(); err != nil {
		return err
	}
	if err := nm.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	if nm.std {
		nm.scale = nm.labelScale()
	}
	*m = *nm
	return nil
}

// checkState rejects decoded states that no sequence of updates produces.
func (m *FM) checkState() error {
	if m.n < 0 {
		return fmt.Errorf("n = %d", m.n)
	}
	if m.sq {
		if !isFinite(m.ySum) || !isFinite(m.yComp) {
			return fmt.Errorf("label sum %v + %v", m.ySum, m.yComp)
		}
		if m.n == 0 {
			if m.ySum != 0 || m.yComp != 0 || !math.IsInf(m.lo, 1) || !math.IsInf(m.hi, -1) {
				return errors.New("label statistics without examples")
			}
		} else if !(m.lo <= m.hi) || !isFinite(m.lo) || !isFinite(m.hi) {
			return fmt.Errorf("label range [%v, %v]", m.lo, m.hi)
		}
		if !(m.m2 >= 0) || !isFinite(m.m2) || m.n < 2 && m.m2 != 0 || m.m2 > 0 && m.lo == m.hi {
			return fmt.Errorf("label spread Σ(y − ȳ)² = %v over %d labels in [%v, %v]", m.m2, m.n, m.lo, m.hi)
		}
	} else if m.nPos < 0 || m.nPos > m.n {
		return fmt.Errorf("logistic state n+=%d", m.nPos)
	}
	if !isFinite(m.b) || !(m.gb >= 0) || !isFinite(m.gb) || m.n == 0 && (m.b != 0 || m.gb != 0) || !m.learnB && (m.b != 0 || m.gb != 0) {
		return fmt.Errorf("intercept b=%v G=%v", m.b, m.gb)
	}
	if m.n == 0 && m.rows.n > 0 {
		return errors.New("rows without examples")
	}
	for r := range m.rows.n {
		row := m.rows.row(int32(r))
		for c, x := range row {
			if !isFinite(x) || (c == fmRowGW || c == fmRowGV) && x < 0 || c == fmRowS && !(x > 0) {
				return fmt.Errorf("row %d (index %d): column %d is %v", r, m.rows.idx[r], c, x)
			}
		}
	}
	return nil
}

// stateClose is StateClose for two factorization machines: the same
// parameters, counts and learned features; the running label sum, the
// range, the intercept and every row to rtol relative to the row's norm.
func (m *FM) stateClose(other Model, rtol float64) error {
	o := other.(*FM)
	if m.dim != o.dim || !bytes.Equal(codec.AppendParams(nil, &m.p), codec.AppendParams(nil, &o.p)) || !slices.Equal(m.p.namespaces, o.p.namespaces) {
		return fmt.Errorf("online: parameters differ: %+v (dim %d) vs %+v (dim %d)", m.p, m.dim, o.p, o.dim)
	}
	if m.n != o.n || m.nPos != o.nPos || m.rows.n != o.rows.n {
		return fmt.Errorf("online: counts differ: n %d/%d, n₊ %d/%d, features %d/%d", m.n, o.n, m.nPos, o.nPos, m.rows.n, o.rows.n)
	}
	if !closeRel(m.ySum+m.yComp, o.ySum+o.yComp, rtol) || m.lo != o.lo || m.hi != o.hi || !closeRel(m.b, o.b, rtol) || !closeRel(m.gb, o.gb, rtol) ||
		!closeRel(m.m2, o.m2, rtol) {
		return fmt.Errorf("online: label statistics or intercept differ")
	}
	for r, i := range m.rows.idx {
		ro := o.rows.find(i)
		if ro < 0 {
			return fmt.Errorf("online: feature %d learned by one model only", i)
		}
		a, b := m.rows.row(int32(r)), o.rows.row(ro)
		var diff, norm float64
		for c := range a {
			diff += (a[c] - b[c]) * (a[c] - b[c])
			norm += a[c] * a[c]
		}
		if math.Sqrt(diff) > rtol*max(math.Sqrt(norm), 1e-300) {
			return fmt.Errorf("online: feature %d: row %v vs %v", i, a, b)
		}
	}
	return nil
}

// Factors returns the weight of input index i and appends to dst[:0] its
// factors, both as they multiply its value (over the feature's scale), in
// the model's units (those of the labels' σ with target_scale std), and
// reports whether i has been learned (a weight 0 and k zero factors when
// not).
func (m *FM) Factors(dst []float64, i int32) (w float64, f []float64, learned bool) {
	dst = dst[:0]
	r := m.rows.find(i)
	if r < 0 {
		for range m.k {
			dst = append(dst, 0)
		}
		return 0, dst, false
	}
	row := m.rows.row(r)
	s := row[fmRowS]
	if s == 0 {
		s = 1
	}
	for _, v := range row[fmRowV : fmRowV+m.k] {
		dst = append(dst, v/s)
	}
	return row[fmRowW] / s, dst, true
}

// K is the number of factors per feature.
func (m *FM) K() int { return m.k }
