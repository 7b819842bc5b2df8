package online

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/vmath"
)

// Gamma auto: the random-feature MAM with kernel.gamma 0 (the default of
// the rbf and laplacian kernels) learns B kernel widths at once and scores
// with a mixture of them weighted by their recent prequential errors
// (docs/math.md, "Gamma auto").
//
//   - One set of random directions. The model's feature map is built with
//     the reference gamma 1 (rbf: ω ~ N(0, 2I); laplacian: ω = z/|u|); each
//     event is projected once, z = Ω x, and bandwidth b uses
//     z_b = s_b·z, φ_b(x) = sqrt(1/D)[cos z_b; sin z_b]. For rbf
//     s_b = sqrt(γ_b), for laplacian s_b = γ_b: both scale the frequencies
//     of the unit kernel, so each φ_b is exactly the random-feature map of
//     its gamma (up to the rounding of the product). On the default grid
//     s_b = 2·s_{b−1} exactly, and φ_b is computed from φ_{b−1} by the
//     double-angle formulas (vmath.DoubleAngleRFF: a quarter of the cost
//     of a sin/cos, within 1e-14 of it after the five doublings).
//   - The grid. With S = median‖x − x'‖²/2 over the pairs of the last half
//     of the first N labelled inputs (N = autoWarmup = 64, inputs as the
//     model receives them, so after standardisation when it is on: the
//     first half is left out because a running standardisation's first
//     outputs are far too spread), c_b = 2^(−4 + 10b/(B−1)),
//     b = 0..B−1 (B = 6: 1/16, 1/4, 1, 4, 16, 64), and
//     rbf γ_b = c_b/S, laplacian γ_b = sqrt(c_b/S); so s_b = sqrt(c_b/S)
//     for both. For standardised inputs S ≈ d and c_b = γ_b·d is the
//     familiar gamma·d. The median is robust to outliers. If it is 0 the
//     mean squared distance is used, then 1; S is clamped to
//     [1e-200, 1e200].
//   - Warm-up. The first N labelled inputs are kept. At the k-th labelled
//     example, k a power of two or k = N, S is re-estimated from the k kept
//     (the pairs of the last half; the last two for k < 4; 1 for k = 1)
//     and every bandwidth's statistics and error record are rebuilt by
//     replaying them; so the state after the N-th example is exactly that of
//     a model whose grid was fixed beforehand, and the grid never changes
//     afterwards (the sums stay sums over one feature map). Before the first
//     labelled example S is 0 and the model is empty. The replays cost about
//     2N events in all.
//   - Learning. Every bandwidth keeps the statistics of a fixed-gamma MAM
//     (the same plain or balanced sums, window or decay) and learns every
//     labelled example. Before it learns, its prediction is judged: a
//     mistake unless y·f_b > 0.
//   - Scoring: an exponential-weights mixture. With e_b the mistakes of
//     bandwidth b among the last W judged predictions (autoSelectWindow,
//     or fewer under forgetting, see selectWindow) and e = min e_b,
//     v_b = exp(−η(e_b − e)) with Hedge's rate η = sqrt(8 ln B / W)
//     (0.24 for B = 6, W = 256); the bandwidths with v_b ≥ autoMixFloor
//     and M̂_b > 0 take part. Their scores f_b = <w̃_b, φ̃_b>/‖w̃_b‖ (as in
//     the fixed-gamma model, |f_b| ≤ 1) have very different scales (a
//     wide kernel's are much larger), so each is counted in units of its
//     own average margin M̂_b: f = Σ α_b f_b with α_b ∝ v_b/M̂_b, Σ α_b = 1
//     (if no bandwidth has M̂_b > 0, α_b ∝ v_b). With much data the weights
//     concentrate on the best width (after about 60 mistakes' difference a
//     width drops out); on small data they average the plausible ones.
//     (The figures that chose this mixture over picking the best single
//     width, or over mixing unscaled scores, are in docs/math.md.)
//   - Bound. With probability 1 − δ/B each, bandwidth b satisfies
//     E[Y f_b] ≥ M̂_b − R̂_b − 3·sqrt(2 ln(2B/δ)/n) (the deviation part of
//     Theorem 2, uniform over its unit ball); by the union bound all B hold
//     together with probability 1 − δ, so for any weights chosen from the
//     data E[Y f] ≥ Σ α_b (M̂_b − R̂_b) − 3·sqrt(2 ln(2B/δ)/n), and Markov
//     on 1 − Y f ≥ 0 (|f| ≤ 1) gives the published bound
//     MistakeBound(1, Σ α_b M̂_b, Σ α_b R̂_b, n, δ/B, ρ). The grid itself
//     depends on the first N inputs (not their labels); the bound treats
//     it as fixed.
//
// Prepare writes the projection z and an ok flag (PreparedLen D + 1): what
// it computes does not depend on the learned state. An unlabelled event
// maps and scores the bandwidths in the mixture only; a labelled one all B.
// Partition-scope merging does not apply (Mergeable is false): partitions
// would fix different grids, and the error records are not sums.

// DefaultBandwidths is the default number of kernel widths of gamma auto.
const DefaultBandwidths = 6

const (
	minBandwidths = 2
	maxBandwidths = 16

	// autoWarmup is N, the labelled examples whose inputs fix the scale S.
	autoWarmup = 64
	// autoSelectWindow is W, the judged predictions per bandwidth whose
	// mistakes set the mixture's weights.
	autoSelectWindow = 256
	// autoSelectMin is the smallest selection window under forgetting.
	autoSelectMin = 16
	// autoMixFloor is the smallest relative weight v_b of a bandwidth in
	// the mixture.
	autoMixFloor = 1e-6

	// The grid's multipliers c span [2^autoLowExp, 2^autoHighExp]
	// geometrically.
	autoLowExp, autoHighExp = -4, 6

	// autoScaleMin and autoScaleMax clamp S; with |z| < autoZMax the
	// scaled projections s_b·z stay finite (s_b ≤ sqrt(64/1e-200)); see
	// prepare for how an input is checked.
	autoScaleMin, autoScaleMax = 1e-200, 1e200
	autoZMax                   = 1e200

	// maxAutoDim bounds the input dimension of gamma auto, so that the
	// warm-up's inputs (autoWarmup·d floats, 8 MiB) stay small next to
	// what the state's encoding asks for.
	maxAutoDim = 1 << 20 / autoWarmup

	// autoRefGamma is the gamma of the reference map.
	autoRefGamma = 1
)

// autoGamma reports whether p asks for gamma auto: rbf or laplacian random
// features with gamma 0.
func (p *MAMParams) autoGamma() bool {
	return p.Budget == 0 && p.Kernel.Gamma == 0 && (p.Kernel.Type == KernelRBF || p.Kernel.Type == KernelLaplacian)
}

// bandwidths returns B.
func (p *MAMParams) bandwidths() int {
	if p.Bandwidths == 0 {
		return DefaultBandwidths
	}
	return p.Bandwidths
}

// validateAuto checks the kernel of the random-feature mode (gamma 0 is
// auto for rbf and laplacian) and the bandwidths key.
func (c *checks) validateAuto(p *MAMParams, dim int) {
	k := p.Kernel
	if p.autoGamma() {
		k.Gamma = autoRefGamma
		if p.Bandwidths != 0 && (p.Bandwidths < minBandwidths || p.Bandwidths > maxBandwidths) {
			c.add("bandwidths", "must be in [%d, %d] (0 = %d), got %d", minBandwidths, maxBandwidths, DefaultBandwidths, p.Bandwidths)
		}
		if !k.Sparse { // kernel.sparse keeps them by their entries
			c.add1(checkAutoDim(dim))
		}
	} else {
		c.bandwidthsUnused(p.Bandwidths)
	}
	c.add1(validateKernel(k, dim))
}

// bandwidthsUnused refuses the bandwidths key without gamma auto.
func (c *checks) bandwidthsUnused(b int) {
	if b != 0 {
		c.add("bandwidths", "only used with gamma auto (rbf or laplacian random features, kernel.gamma omitted or auto): must be 0, got %d", b)
	}
}

// autoExamples are the conformance suite's gamma-auto configurations.
func autoExamples() []MAMParams {
	auto := DefaultMAMParams()
	auto.Kernel.Features, auto.Bandwidths = 16, 3
	plain := auto
	plain.Balance = false
	window := auto
	window.Window.Events = 30
	decay := auto
	decay.Kernel.Type, decay.Decay.HalfLife = KernelLaplacian, 15
	sparse := window // generated frequencies: warm-up inputs kept by their entries
	sparse.Kernel.Sparse = true
	return []MAMParams{auto, plain, window, decay, sparse}
}

// cur returns the model whose counts and weights m publishes: m, or under
// gamma auto the first bandwidth's (every bandwidth has the same).
func (m *MAM) cur() *MAM {
	if m.auto != nil {
		return m.auto.banks[0]
	}
	return m
}

// mamAuto is the state of gamma auto (see above).
type mamAuto struct {
	d, nd   int     // input dimension, random frequencies D
	amp     float64 // sqrt(1/D)
	laplace bool

	c     []float64 // grid multipliers c_b
	scale float64   // S; 0 before the first labelled example
	gamma []float64 // γ_b (0 while S is 0)
	mult  []float64 // s_b: z_b = s_b·z
	dbl   []bool    // s_b = 2·s_{b−1} exactly: φ_b by the double-angle formulas
	inv   float64   // 1/amp, the double-angle step's rescaling
	banks []*MAM    // per bandwidth: the statistics of a fixed-gamma MAM (no ring)
	total int64     // labelled examples learned in all
	eta   float64   // Hedge's rate sqrt(8 ln B / W)
	hedge []float64 // hedge[e] = exp(−η·e), e = 0..W: the weight of e more mistakes
	l1    float64   // max_k ‖ω_k‖₁ of the reference map (prepare's range check)

	// Warm-up: the first N labelled inputs and labels; nil once total ≥ N.
	buf   []float64
	bufY  []int8
	pairs []float64   // scratch: the squared distances of the kept pairs
	sw    *sparseWarm // kernel.sparse: the inputs by their entries, in place of buf (mam_sparse_rff.go)

	// Sliding window (Spec.Window > 0): the window's inputs and labels, slot
	// (total mod Window) holding the next; the banks' counts are the
	// window's.
	ring  []float64
	ringY []int8

	// Prequential error record over the last win judged predictions:
	// bank b's mistakes at bits[b·words:(b+1)·words], slot total mod win.
	win, words int
	bits       []uint64
	nerr       []int   // mistakes in the record, per bank
	cum        []int64 // mistakes in all (since the last warm-up rebuild), per bank

	// Derived by mix from the records and the banks.
	pi               []float64 // Hedge weights v_b/Σ v (0: below autoMixFloor)
	alpha            []float64 // the score's weights α_b (0: not in the mixture)
	chosen           int       // the bandwidth of largest Hedge weight
	margin, rad, num float64   // Σ α_b M̂_b, Σ α_b R̂_b, the bound's numerator

	// Scratch.
	f    []float64 // per bank: the score of the current event
	sq   []float64 // per bank: ‖φ_b‖² of the current event
	z    []float64 // projection of a replayed example
	zOld []float64 // projection of the example leaving the window
	old  []float64 // φ_b of the example leaving the window
}

// selectWindow returns W for p: autoSelectWindow, at most the forgetting
// window or twice the half-life (at least autoSelectMin), so that the
// weights are as recent as the statistics.
func selectWindow(p MAMParams) int {
	w := autoSelectWindow
	if e := p.Window.Events; e > 0 {
		w = min(w, max(autoSelectMin, e))
	}
	if h := p.Decay.HalfLife; h > 0 && 2*h < float64(w) {
		w = max(autoSelectMin, int(math.Ceil(2*h)))
	}
	return w
}

// newAutoMAM builds an empty gamma-auto MAM; p is valid and autoGamma.
func newAutoMAM(dim int, p MAMParams) (*MAM, error) {
	k := p.Kernel
	k.Gamma = autoRefGamma
	fm, err := NewFeatureMap(k, dim)
	if err != nil {
		return nil, err
	}
	nb, nd := p.bandwidths(), k.Features
	a := &mamAuto{
		d: dim, nd: nd, amp: fm.scale, laplace: k.Type == KernelLaplacian,
		c: make([]float64, nb), gamma: make([]float64, nb), mult: make([]float64, nb), dbl: make([]bool, nb),
		inv:   1 / fm.scale,
		banks: make([]*MAM, nb),
		win:   selectWindow(p),
		nerr:  make([]int, nb), cum: make([]int64, nb), pi: make([]float64, nb), alpha: make([]float64, nb),
		f: make([]float64, nb), sq: make([]float64, nb),
		z: make([]float64, nd),
	}
	a.words = (a.win + 63) / 64
	a.bits = make([]uint64, nb*a.words)
	a.eta = math.Sqrt(8 * math.Log(float64(nb)) / float64(a.win))
	a.hedge = make([]float64, a.win+1)
	for e := range a.hedge {
		a.hedge[e] = math.Exp(-a.eta * float64(e))
	}
	for k := range len(fm.omega) / dim { // none for generated frequencies
		var s float64
		for _, w := range fm.omega[k*dim : (k+1)*dim] {
			s += math.Abs(w)
		}
		a.l1 = max(a.l1, s)
	}
	for b := range a.c {
		a.c[b] = math.Exp2(autoLowExp + float64(autoHighExp-autoLowExp)*float64(b)/float64(nb-1))
	}
	lnTerm := math.Log(2 * float64(nb) / p.Delta)
	bp := p
	bp.Window = Window{}
	for b := range a.banks {
		bk := &MAM{p: bp, dim: dim, fm: fm}
		bk.alloc()
		bk.lnTerm = lnTerm
		bk.refresh()
		a.banks[b] = bk
	}
	if n := p.Window.Events; n > 0 {
		a.ring = make([]float64, n*dim)
		a.ringY = make([]int8, n)
		a.zOld = make([]float64, nd)
		a.old = make([]float64, 2*nd)
	}
	a.allocWarmup()
	a.mix()
	m := &MAM{p: p, dim: dim, fm: fm, auto: a, lnTerm: lnTerm}
	m.prep = make([]float64, nd+1)
	return m, nil
}

// allocWarmup allocates the warm-up buffers.
func (a *mamAuto) allocWarmup() {
	if a.banks[0].fm.gen != nil {
		a.sw = newSparseWarm()
	} else {
		a.buf = make([]float64, autoWarmup*a.d)
	}
	a.bufY = make([]int8, autoWarmup)
	a.pairs = warmupPairs()
}

// checkAutoDim refuses gamma auto for inputs too wide to keep the first
// autoWarmup of densely.
func checkAutoDim(dim int) error {
	if dim > maxAutoDim {
		return specErrorf("kernel.gamma", "auto keeps the first %d inputs: dim must be ≤ %d, got %d (give a gamma)", autoWarmup, maxAutoDim, dim)
	}
	return nil
}

// warming reports whether the grid is still provisional.
func (a *mamAuto) warming() bool { return a.total < autoWarmup }

// setScale fixes S and the grid.
func (a *mamAuto) setScale(s float64) {
	a.scale = s
	for b, c := range a.c {
		r := c / s
		a.mult[b] = math.Sqrt(r)
		a.gamma[b] = r
		if a.laplace {
			a.gamma[b] = a.mult[b]
		}
		a.banks[b].p.Kernel.Gamma = a.gamma[b]
		a.dbl[b] = b > 0 && a.mult[b] == 2*a.mult[b-1]
	}
}

// estimate returns S from the first k kept inputs: the pairs of the last
// half of them (of the last two for k < 4; see above).
func (a *mamAuto) estimate(k int) float64 {
	if a.sw == nil {
		return warmupScale(a.pairs, a.buf, a.d, k)
	}
	return scaleOfPairs(a.pairs[:a.sw.pairs(a.pairs, WarmupLo(k), k)])
}

// WarmupLo is the first of the kept inputs whose pairs estimate S at the
// k-th labelled example: the last half of them, the last two for k < 4
// (the first inputs of a stream are standardised with the least data).
// The random-feature ranking solver's gamma auto (online/refit) uses the
// same rule.
func WarmupLo(k int) int { return min(k/2, max(k-2, 0)) }

// rebuildPoint reports whether the k-th labelled example (from 1) of the
// warm-up re-estimates S: k a power of two, or the last.
func rebuildPoint(k int) bool { return k == autoWarmup || k&(k-1) == 0 }

// warmupPairs returns the scratch for the squared distances of the pairs
// of the last half of autoWarmup kept inputs.
func warmupPairs() []float64 {
	h := autoWarmup - autoWarmup/2
	return make([]float64, h*(h-1)/2)
}

// warmupScale returns S from the first k inputs kept in buf (d values
// each): the pairs of their last half (WarmupLo), pairs the scratch.
func warmupScale(pairs, buf []float64, d, k int) float64 {
	return scaleOfPairs(pairs[:densePairs(pairs, buf, d, WarmupLo(k), k)])
}

// DenseScale returns MedianScale over every pair of the rows of x (d
// values each): the ranking models' gamma auto (online/refit) on their
// windows.
func DenseScale(x []float64, d int) float64 {
	n := len(x) / d
	pairs := make([]float64, n*(n-1)/2)
	return scaleOfPairs(pairs[:densePairs(pairs, x, d, 0, n)])
}

// densePairs writes the squared distances of the pairs among the inputs
// lo..k−1 of buf (d values each) into dst and returns their number.
func densePairs(dst, buf []float64, d, lo, k int) int {
	np := 0
	for i := lo + 1; i < k; i++ {
		xi := buf[i*d : (i+1)*d]
		for j := lo; j < i; j++ {
			xj := buf[j*d : (j+1)*d]
			var s float64
			for t, v := range xi {
				e := v - xj[t]
				s += e * e
			}
			dst[np] = s
			np++
		}
	}
	return np
}

// MedianScale is the data scale of gamma auto, S = median/2 of the
// squared distances p between pairs of inputs (sorted in place): their
// mean/2 if the median is 0, 1 if there are none or that is 0 too, clamped
// to [1e-200, 1e200]. The width c/S (rbf gamma; laplacian sqrt(c/S)) is
// then in the units of docs/math.md §3a. The ranking models' gamma auto
// (online/refit) uses it on their windows.
func MedianScale(p []float64) float64 { return scaleOfPairs(p) }

// scaleOfPairs is MedianScale.
func scaleOfPairs(p []float64) float64 {
	s := 0.0
	if np := len(p); np > 0 {
		slices.Sort(p)
		s = (p[(np-1)/2]/2 + p[np/2]/2) / 2
		if !(s > 0) {
			var sum float64
			for _, v := range p {
				sum += v
			}
			s = sum / float64(np) / 2
		}
	}
	if !(s > 0) {
		s = 1
	}
	return min(max(s, autoScaleMin), autoScaleMax)
}

// prepare is Prepare under gamma auto: dst = [z; ok], z = Ω x with the
// reference map, ok = 1 when x is finite and every |z_k| < autoZMax: with
// stored frequencies checked as max_j |x_j|·max_k ‖ω_k‖₁ < autoZMax (d
// values, not D), with generated ones (kernel.sparse, whose norms are not
// at hand) on z itself, as ObserveSparse does.
func (a *mamAuto) prepare(m *MAM, dst, x []float64) {
	if len(dst) != a.nd+1 {
		panic("online: MAM.Prepare: len(dst) != PreparedLen()")
	}
	if len(x) != m.dim {
		panic("online: MAM.Prepare: len(x) != Dim()")
	}
	z := dst[:a.nd:a.nd]
	m.fm.project(z, x)
	dst[a.nd] = 0
	if m.fm.gen != nil {
		if maxAbs(z) < autoZMax {
			dst[a.nd] = 1
		}
		return
	}
	var mx float64 // max propagates NaN
	for _, v := range x {
		mx = max(mx, math.Abs(v))
	}
	if mx*a.l1 < autoZMax {
		dst[a.nd] = 1
	}
}

// phiOf writes φ_b = sqrt(1/D)[cos(s·z); sin(s·z)] into dst (2D) and
// returns ‖φ_b‖².
func (a *mamAuto) phiOf(dst, z []float64, s float64) float64 {
	return vmath.SincosScaledRFF(dst, z, s, a.amp)
}

// phiNext writes φ_b of z into dst (2D) and returns ‖φ_b‖², given in prev
// φ_{b−1} of the same z when prev is not nil: by the double-angle formulas
// when s_b = 2·s_{b−1} (so that z_b = 2·z_{b−1} exactly; a quarter of the
// cost of a sin/cos), else directly. dst may be prev. ‖φ_b‖² is the pair
// form's, D·amp² (vmath.SincosRFF), for every finite z.
func (a *mamAuto) phiNext(dst, prev, z []float64, b int) float64 {
	if prev != nil && a.dbl[b] {
		vmath.DoubleAngleRFF(dst, prev, a.inv)
		return float64(a.nd) * float64(a.amp*a.amp)
	}
	return a.phiOf(dst, z, a.mult[b])
}

// mapAll maps z for every bank and scores it into a.f.
func (a *mamAuto) mapAll(z []float64) {
	var prev []float64
	for b, bk := range a.banks {
		a.sq[b] = a.phiNext(bk.phi, prev, z, b)
		a.f[b] = bk.score(bk.phi)
		prev = bk.phi
	}
}

// observe is ObservePrepared under gamma auto.
func (a *mamAuto) observe(m *MAM, p *Prediction, prep, x []float64, y float64, labelled bool) {
	if len(prep) != a.nd+1 {
		panic("online: MAM.ObservePrepared: len(prep) != PreparedLen()")
	}
	if x != nil && len(x) != m.dim { // nil: a sparse event (mam_sparse_rff.go)
		panic("online: MAM.ObservePrepared: len(x) != Dim()")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: MAM.Observe: label must be -1 or +1 (see Label)")
	}
	*p = Prediction{Delta: m.p.Delta, N: a.banks[0].pn}
	if prep[a.nd] == 0 {
		return
	}
	z := prep[:a.nd:a.nd]
	var f float64
	steady := labelled && !a.warming()
	switch {
	case steady:
		// Each bank scores and learns in one pass (mixture weights, bound
		// and error records are updated after the score below).
		a.mapLearn(m, z, x, y)
	case labelled:
		a.mapAll(z)
	default:
		var prev []float64
		for b, bk := range a.banks {
			if a.alpha[b] > 0 {
				a.sq[b] = a.phiNext(bk.phi, prev, z, b)
				a.f[b] = bk.score(bk.phi)
				prev = bk.phi
			} else {
				prev = nil
			}
		}
	}
	for b, w := range a.alpha {
		if w > 0 {
			f += w * a.f[b]
		}
	}
	if f == 0 {
		f = 0 // no −0 on the wire
	}
	p.Score = f
	switch {
	case f > 0:
		p.Label = 1
	case f < 0:
		p.Label = -1
	}
	p.MistakeBound = boundAt(a.num, 1, math.Abs(f))
	p.HasBound = true
	switch {
	case steady:
		a.judge(y)
		a.total++
		a.mix()
	case labelled:
		a.learn(m, x, y)
	}
}

// mapLearn is the steady state's labelled event (after the warm-up): for
// every bank, φ_b of z, then (with a window) the example leaving the window
// unlearned, then the score f_b and the update in one pass
// (MAM.scoreLearn); the window's slot takes (x, y). Judging, the count
// and the mixture are left to the caller.
func (a *mamAuto) mapLearn(m *MAM, z, x []float64, y float64) {
	var (
		leaving bool
		yo      float64
		xs      []float64
	)
	if a.ring != nil {
		d, size := a.d, int64(m.p.Window.Events)
		slot := int(a.total % size)
		xs = a.ring[slot*d : (slot+1)*d]
		if leaving = a.banks[0].n == size; leaving {
			yo = float64(a.ringY[slot])
			m.fm.project(a.zOld, xs)
		}
	}
	var prev, prevOld []float64
	for b, bk := range a.banks {
		a.sq[b] = a.phiNext(bk.phi, prev, z, b)
		prev = bk.phi
		if leaving {
			bk.unlearn(a.old, yo, a.phiNext(a.old, prevOld, a.zOld, b))
			prevOld = a.old
		}
		a.f[b] = bk.scoreLearn(bk.phi, y, a.sq[b])
	}
	if xs != nil {
		copy(xs, x)
		a.ringY[int(a.total%int64(m.p.Window.Events))] = int8(y)
	}
}

// learn learns the labelled example (x, y) whose φ_b and scores the banks
// hold (mapAll): during the warm-up it is kept, and at a rebuild point
// the banks are rebuilt from the kept examples; otherwise each bank's
// prediction is judged and the example learned.
func (a *mamAuto) learn(m *MAM, x []float64, y float64) {
	if a.warming() {
		k := int(a.total)
		a.keepWarm(k, x)
		a.bufY[k] = int8(y)
		if k++; rebuildPoint(k) {
			a.rebuild(m, k)
			return
		}
	}
	a.step(m, x, y)
}

// step judges the banks' scores a.f against y, learns (x, y) into every
// bank and picks the scoring bank (the warm-up's path; mapLearn fuses the
// scores with the updates afterwards, to the same state).
func (a *mamAuto) step(m *MAM, x []float64, y float64) {
	a.judge(y)
	if a.ring != nil {
		d, size := a.d, int64(m.p.Window.Events)
		slot := int(a.total % size)
		xs := a.ring[slot*d : (slot+1)*d]
		if a.banks[0].n == size {
			yo := float64(a.ringY[slot])
			m.fm.project(a.zOld, xs)
			var prev []float64
			for b, bk := range a.banks {
				bk.unlearn(a.old, yo, a.phiNext(a.old, prev, a.zOld, b))
				prev = a.old
			}
		}
		copy(xs, x)
		a.ringY[slot] = int8(y)
	}
	a.total++
	for b, bk := range a.banks {
		if bk.decay {
			bk.learnDecay(bk.phi, y, a.sq[b])
		} else {
			bk.learn(bk.phi, y, a.sq[b])
		}
	}
	a.mix()
}

// judge records every bank's prediction a.f[b] of the label y (a mistake
// unless y·f_b > 0) in its error record, at the slot of example a.total.
func (a *mamAuto) judge(y float64) {
	slot := int(a.total % int64(a.win))
	w, bit := slot>>6, uint64(1)<<(slot&63)
	full := a.total >= int64(a.win)
	for b := range a.banks {
		row := a.bits[b*a.words : (b+1)*a.words]
		if full && row[w]&bit != 0 {
			a.nerr[b]--
		}
		if a.f[b]*y > 0 {
			row[w] &^= bit
		} else {
			row[w] |= bit
			a.nerr[b]++
			a.cum[b]++
		}
	}
}

// mix derives the mixture's weights, its heaviest bandwidth and its M̂, R̂
// and bound numerator from the error records and the banks.
func (a *mamAuto) mix() {
	lo := slices.Min(a.nerr)
	var sum, sumA float64
	for b, e := range a.nerr {
		v := a.hedge[e-lo] // exp(−η(e_b − e))
		if v < autoMixFloor {
			v = 0
		}
		a.pi[b] = v
		sum += v
		w := 0.0
		if m := a.banks[b].margin; v > 0 && m > 0 {
			w = v / m
		}
		a.alpha[b] = w
		sumA += w
	}
	if !(sumA > 0 && sumA <= math.MaxFloat64) { // no margin yet (or absurdly small ones)
		copy(a.alpha, a.pi)
		sumA = sum
	}
	a.chosen = 0
	a.margin, a.rad = 0, 0
	for b, bk := range a.banks {
		a.pi[b] /= sum
		if a.pi[b] > a.pi[a.chosen] {
			a.chosen = b
		}
		w := a.alpha[b] / sumA
		a.alpha[b] = w
		if w > 0 {
			a.margin += w * bk.margin
			a.rad += w * bk.rad
		}
	}
	b0 := a.banks[0]
	a.num = boundNumerator(1, a.margin, a.rad, b0.neff, b0.lnTerm)
}

// rebuild re-estimates S from the first k kept examples and replays them
// into emptied banks.
func (a *mamAuto) rebuild(m *MAM, k int) {
	a.setScale(a.estimate(k))
	a.clear()
	for i := range k {
		x := a.warmInput(m, i) // projected into a.z
		a.mapAll(a.z)
		a.step(m, x, float64(a.bufY[i]))
	}
	if k == autoWarmup {
		a.buf, a.bufY, a.pairs, a.sw = nil, nil, nil, nil
	}
	a.mix()
}

// clear empties the banks, the error record and the window (not the grid
// or the warm-up buffer).
func (a *mamAuto) clear() {
	for _, bk := range a.banks {
		bk.clearState()
	}
	clear(a.bits)
	clear(a.nerr)
	clear(a.cum)
	clear(a.ringY)
	clear(a.ring)
	a.total = 0
}

// reset empties the model, the grid and warm-up included.
func (a *mamAuto) reset() {
	a.clear()
	a.scale = 0
	clear(a.gamma)
	clear(a.mult)
	for _, bk := range a.banks {
		bk.p.Kernel.Gamma = 0
	}
	if a.buf == nil && a.sw == nil {
		a.allocWarmup()
	}
	a.mix()
}

// clearState empties a bank: no examples, derived state refreshed.
func (m *MAM) clearState() {
	m.n, m.nPos, m.nNeg, m.total = 0, 0, 0, 0
	m.tr, m.trC = 0, 0
	for _, v := range m.vectors() {
		clear(v)
	}
	if m.decay {
		for _, x := range m.decayState() {
			*x = 0
		}
	}
	m.refresh()
}

// BandwidthInfo describes one kernel width of a gamma-auto MAM.
type BandwidthInfo struct {
	// Gamma is the kernel's gamma at this width (0 before the first
	// labelled example).
	Gamma float64
	// Width is the grid's multiplier c: Gamma·S for rbf, Gamma²·S for
	// laplacian, S = median‖x − x'‖²/2 of the warm-up inputs.
	Width float64
	// N is the number of judged predictions in the window W of the
	// mixture's weights and Errors the mistakes among them;
	// Error = Errors/N (NaN when N = 0).
	N, Errors int
	Error     float64
	// Weight is the width's coefficient α in the scoring mixture
	// f = Σ α_b f_b (0: left out), and Hedge its prequential weight
	// v_b/Σ v, from its mistakes in the window (see mam_auto.go).
	Weight, Hedge float64
	// Mistakes counts the width's prequential mistakes since the grid was
	// last rebuilt (the end of the warm-up, then never).
	Mistakes int64
}

// Bandwidths returns, under gamma auto, the index of the width of largest
// Hedge weight (fewest recent mistakes; the first of equals) and every
// width's gamma, prequential error and weights, in increasing gamma; chosen is −1 and cands nil for a fixed
// gamma or the linear kernel. It allocates cands.
func (m *MAM) Bandwidths() (chosen int, cands []BandwidthInfo) {
	a := m.auto
	if a == nil {
		return -1, nil
	}
	n := int(min(a.total, int64(a.win)))
	cands = make([]BandwidthInfo, len(a.banks))
	for b := range cands {
		e := math.NaN()
		if n > 0 {
			e = float64(a.nerr[b]) / float64(n)
		}
		cands[b] = BandwidthInfo{Gamma: a.gamma[b], Width: a.c[b], N: n, Errors: a.nerr[b], Error: e, Weight: a.alpha[b], Hedge: a.pi[b], Mistakes: a.cum[b]}
	}
	return a.chosen, cands
}

// AutoScale returns, under gamma auto, S = median‖x − x'‖²/2 of the
// warm-up inputs (0 before the first labelled example) and whether it is
// final (the warm-up is over); 0, false for a fixed gamma.
func (m *MAM) AutoScale() (scale float64, final bool) {
	if m.auto == nil {
		return 0, false
	}
	return m.auto.scale, !m.auto.warming()
}

// Encoding under gamma auto, after the envelope (parameters with gamma 0):
//
//	total int64 (labelled examples learned in all); S float64 (0 before
//	the first); per bandwidth the state of a fixed-gamma MAM from n to
//	the sum vectors and the decay accumulators (see codec.go; no dim φ,
//	no window); per bandwidth its mistakes in all int64 and its error
//	record, ⌈W/64⌉ uint64 (bit i of the record: slot i, slot total mod W
//	next); with a window, its labels (uint8, 0 = −1, 1 = +1) and inputs
//	(d float64 each) for slots 0..n−1 (n = the window's count); during
//	the warm-up (total < N), the labels and inputs of the total examples
//	learned.
//
// During the warm-up the state depends on the kept examples alone: a
// restore learns them again and requires the same bytes (so the size of an
// encoding always grows with the model's, B·D, as a fixed-gamma one's).
// The grid, the mixture and the derived state are rebuilt from S, the
// error records and the sums.

// autoStateSize is the encoded size of the state after the envelope of a
// gamma-auto MAM with parameters p and dimension d after total labelled
// examples.
func autoStateSize(p MAMParams, d int, total int64) int {
	nvec := 2
	if p.Balance {
		nvec = 4
	}
	bank := 5*8 + 8*2*p.Kernel.Features*nvec
	if p.Decay.HalfLife > 0 {
		bank += 8 * 8
	}
	words := (selectWindow(p) + 63) / 64
	size := 8 + 8 + p.bandwidths()*(bank+8+8*words)
	if e := p.Window.Events; e > 0 {
		size += int(min(total, int64(e))) * (1 + 8*d)
	}
	if total < autoWarmup && !p.Kernel.Sparse { // kernel.sparse: a variable tail (sparseWarm.append)
		size += int(total) * (1 + 8*d)
	}
	return size
}

func (a *mamAuto) appendState(m *MAM, dst []byte) []byte {
	dst = codec.AppendI64(dst, a.total)
	dst = codec.AppendF64(dst, a.scale)
	for _, bk := range a.banks {
		dst = codec.AppendI64(dst, bk.n)
		dst = codec.AppendI64(dst, bk.nPos)
		dst = codec.AppendI64(dst, bk.nNeg)
		dst = codec.AppendF64(dst, bk.tr)
		dst = codec.AppendF64(dst, bk.trC)
		for _, v := range bk.vectors() {
			dst = codec.AppendF64s(dst, v)
		}
		if bk.decay {
			for _, x := range bk.decayState() {
				dst = codec.AppendF64(dst, *x)
			}
		}
	}
	for b := range a.banks {
		dst = codec.AppendI64(dst, a.cum[b])
		for _, w := range a.bits[b*a.words : (b+1)*a.words] {
			dst = codec.AppendU64(dst, w)
		}
	}
	if a.ring != nil {
		n := int(a.banks[0].n)
		for _, y := range a.ringY[:n] {
			dst = codec.AppendBool(dst, y > 0)
		}
		dst = codec.AppendF64s(dst, a.ring[:n*a.d])
	}
	if a.warming() {
		k := int(a.total)
		for _, y := range a.bufY[:k] {
			dst = codec.AppendBool(dst, y > 0)
		}
		if a.sw != nil {
			dst = a.sw.append(dst, k)
		} else {
			dst = codec.AppendF64s(dst, a.buf[:k*a.d])
		}
	}
	return dst
}

// unmarshalAuto decodes the state of a gamma-auto MAM with parameters p
// (valid) and dimension d from r into m; on error m is unchanged.
func (m *MAM) unmarshalAuto(r *codec.Reader, d int, p MAMParams) error {
	total := r.I64()
	if err := r.Err(); err != nil {
		return err
	}
	if total < 0 || total > 1<<62 {
		return fmt.Errorf("%w: %d labelled examples", ErrFormat, total)
	}
	if p.Kernel.Sparse && total < autoWarmup {
		return m.unmarshalWarmupSparse(r, d, p, int(total)) // mam_sparse_rff.go
	}
	// Check the size before allocating anything for the parameters.
	if size := autoStateSize(p, d, total) - 8; r.Len() != size {
		return fmt.Errorf("%w: %d bytes of gamma-auto state, want %d", ErrFormat, r.Len(), size)
	}
	nm, err := newAutoMAM(d, p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	a := nm.auto
	if total < autoWarmup {
		return m.unmarshalWarmup(r.Rest(), nm, int(total))
	}
	s := r.F64()
	for _, bk := range a.banks {
		bk.n, bk.nPos, bk.nNeg = r.I64(), r.I64(), r.I64()
		bk.tr, bk.trC = r.F64(), r.F64()
		for _, v := range bk.vectors() {
			r.F64s(v)
		}
		if bk.decay {
			for _, x := range bk.decayState() {
				*x = r.F64()
			}
		}
	}
	for b := range a.banks {
		a.cum[b] = r.I64()
		for i := range a.bits[b*a.words : (b+1)*a.words] {
			a.bits[b*a.words+i] = r.U64()
		}
	}
	a.total = total
	if a.ring != nil {
		n := int(min(total, int64(p.Window.Events)))
		for i := range a.ringY[:n] {
			a.ringY[i] = -1
			if r.Bool("window label") {
				a.ringY[i] = 1
			}
		}
		r.F64s(a.ring[:n*d])
	}
	if err := r.End(); err != nil {
		return err
	}
	if !(s >= autoScaleMin && s <= autoScaleMax) {
		return fmt.Errorf("%w: gamma-auto scale %v outside [%g, %g]", ErrFormat, s, autoScaleMin, autoScaleMax)
	}
	a.buf, a.bufY, a.pairs, a.sw = nil, nil, nil, nil
	a.setScale(s)
	if err := a.checkState(nm); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	for _, bk := range a.banks {
		bk.refresh()
	}
	a.mix()
	*m = *nm
	return nil
}

// unmarshalWarmup decodes the state of the gamma-auto MAM nm during its
// warm-up after k labelled examples, raw being the state after its count
// (of the right size): the kept examples at its end are learned again
// into nm, whose state must then encode to the same bytes. On success
// *m = *nm.
func (m *MAM) unmarshalWarmup(raw []byte, nm *MAM, k int) error {
	a, d := nm.auto, nm.dim
	tail := codec.NewReader(raw[len(raw)-k*(1+8*d):], ErrFormat)
	ys := make([]int8, k)
	for i := range ys {
		ys[i] = -1
		if tail.Bool("warm-up label") {
			ys[i] = 1
		}
	}
	xs := make([]float64, k*d)
	tail.F64s(xs)
	if err := tail.End(); err != nil {
		return err
	}
	for i, v := range xs {
		if !(math.Abs(v) <= math.MaxFloat64) {
			return fmt.Errorf("%w: non-finite warm-up input %d", ErrFormat, i/d)
		}
	}
	// Learn them again, as Observe did.
	prep := nm.prep
	for i, y := range ys {
		x := xs[i*d : (i+1)*d]
		a.prepare(nm, prep, x)
		if prep[a.nd] == 0 {
			return fmt.Errorf("%w: warm-up input %d out of range", ErrFormat, i)
		}
		a.mapAll(prep[:a.nd])
		a.learn(nm, x, float64(y))
	}
	if !bytes.Equal(a.appendState(nm, make([]byte, 0, 8+len(raw)))[8:], raw) {
		return fmt.Errorf("%w: the warm-up state is not that of its examples", ErrFormat)
	}
	*m = *nm
	return nil
}

// checkState rejects decoded gamma-auto states (after the warm-up) that no
// sequence of updates produces.
func (a *mamAuto) checkState(m *MAM) error {
	n := a.total
	if m.p.Window.Events > 0 {
		n = min(n, int64(m.p.Window.Events))
	}
	b0 := a.banks[0]
	for b, bk := range a.banks {
		if bk.n != n || bk.nPos != b0.nPos || bk.nNeg != b0.nNeg {
			return fmt.Errorf("bandwidth %d: counts n=%d n+=%d n-=%d, want n=%d and those of bandwidth 0", b, bk.n, bk.nPos, bk.nNeg, n)
		}
		if _, err := bk.checkState(); err != nil { // no window in a bank
			return fmt.Errorf("bandwidth %d: %w", b, err)
		}
	}
	held := int(min(a.total, int64(a.win)))
	for b := range a.banks {
		row := a.bits[b*a.words : (b+1)*a.words]
		e := 0
		for i, w := range row {
			if lo := i * 64; lo+64 > held {
				var mask uint64 // slots ≥ held must be clear
				if held > lo {
					mask = uint64(1)<<(held-lo) - 1
				}
				if w&^mask != 0 {
					return fmt.Errorf("bandwidth %d: error record beyond its %d predictions", b, held)
				}
			}
			e += bits.OnesCount64(w)
		}
		if !(int64(e) <= a.cum[b] && a.cum[b] <= a.total) {
			return fmt.Errorf("bandwidth %d: %d mistakes in all, %d in the record, after %d examples", b, a.cum[b], e, a.total)
		}
		a.nerr[b] = e
	}
	if a.ring != nil {
		rebuild, err := a.checkWindow(m)
		if err == nil && rebuild {
			a.relearnWindow(m)
		}
		return err
	}
	return nil
}

// relearnWindow replaces every bank's sums, counts and trace by those of
// the window's examples learned again in order, oldest first (MAM's
// relearnWindow); the error records are kept.
func (a *mamAuto) relearnWindow(m *MAM) {
	size, n, d := int64(m.p.Window.Events), a.banks[0].n, a.d
	for _, bk := range a.banks {
		bk.clearState()
	}
	for k := range n {
		slot := int((a.total - n + k) % size)
		m.fm.project(a.z, a.ring[slot*d:(slot+1)*d])
		var prev []float64
		for b, bk := range a.banks {
			sq := a.phiNext(bk.phi, prev, a.z, b)
			prev = bk.phi
			if bk.decay {
				bk.learnDecay(bk.phi, float64(a.ringY[slot]), sq)
			} else {
				bk.learn(bk.phi, float64(a.ringY[slot]), sq)
			}
		}
	}
}

// checkWindow checks a decoded window against the banks: labels against
// the class counts, inputs finite and the sums and traces against sums
// rebuilt from the inputs (O(n·B·D)). As MAM's checkWindow, sums further
// than 1e-9·n from those but within the change of the map since its
// frequencies are stored in float32 (bandwidth b: min(2, s_b·2⁻²⁴·
// argBound(x_i)) for example i) give rebuild true.
func (a *mamAuto) checkWindow(m *MAM) (rebuild bool, err error) {
	const tol = 1e-9
	n := int(a.banks[0].n)
	var pos int64
	for _, y := range a.ringY[:n] {
		if y > 0 {
			pos++
		}
	}
	if pos != a.banks[0].nPos {
		return false, fmt.Errorf("%d positive labels in the window, n+ = %d", pos, a.banks[0].nPos)
	}
	d, np := a.d, 2*a.nd
	for i := range n {
		for _, v := range a.ring[i*d : (i+1)*d] {
			if !(math.Abs(v) <= math.MaxFloat64) {
				return false, fmt.Errorf("non-finite input in window slot %d", i)
			}
		}
	}
	z, phi := make([]float64, a.nd), make([]float64, np)
	prep := make([]float64, a.nd+1)
	arg := make([]float64, n)
	for i := range n {
		arg[i] = 0x1p-24 * (1 + 1e-9) * m.fm.argBound(a.ring[i*d:(i+1)*d])
	}
	strict := tol * max(1, float64(n))
	for b, bk := range a.banks {
		sums := [2][]float64{make([]float64, np), make([]float64, np)}
		var tr, moved float64
		for i := range n {
			a.prepare(m, prep, a.ring[i*d:(i+1)*d])
			if prep[a.nd] == 0 {
				return false, fmt.Errorf("window slot %d out of range", i)
			}
			copy(z, prep[:a.nd])
			tr += a.phiOf(phi, z, a.mult[b])
			moved += min(2, a.mult[b]*arg[i])
			k, s := 0, float64(a.ringY[i])
			if m.p.Balance {
				k, s = int((1-s)/2), 1
			}
			for j, v := range phi {
				sums[k][j] += s * v
			}
		}
		if t := bk.tr + bk.trC; !(math.Abs(t-tr) <= strict) {
			return false, fmt.Errorf("bandwidth %d: trace %v, the window's inputs give %v", b, t, tr)
		}
		vs := bk.vectors()
		for k := 0; k < len(vs); k += 2 {
			var diff float64
			for j := range vs[k] {
				e := vs[k][j] + vs[k+1][j] - sums[k/2][j]
				diff += e * e
			}
			switch diff = math.Sqrt(diff); {
			case diff <= strict:
			case diff <= strict+moved:
				rebuild = true
			default:
				return false, fmt.Errorf("bandwidth %d: sum vector %d differs from the window's inputs by %v", b, k/2, diff)
			}
		}
	}
	return rebuild, nil
}

// autoStateClose is StateClose for two gamma-auto MAMs with equal
// parameters: the same examples learned, scale, scoring bandwidth, error
// records and warm-up or window examples (identical), and each bandwidth's
// statistics as mamStateClose compares them.
func autoStateClose(ma, mb *MAM, rtol float64) error {
	a, b := ma.auto, mb.auto
	if a.total != b.total || !sameOrClose(a.scale, b.scale, rtol) {
		return fmt.Errorf("online: gamma auto: examples %d/%d, scale %v/%v", a.total, b.total, a.scale, b.scale)
	}
	if !slices.Equal(a.bits, b.bits) || !slices.Equal(a.cum, b.cum) {
		return fmt.Errorf("online: gamma auto: error records differ")
	}
	if a.warming() {
		k := int(a.total)
		if !slices.Equal(a.bufY[:k], b.bufY[:k]) || !a.warmEqual(b, k) {
			return fmt.Errorf("online: gamma auto: warm-up examples differ")
		}
	}
	if a.ring != nil {
		n := int(a.banks[0].n)
		if !slices.Equal(a.ringY[:n], b.ringY[:n]) || !slices.Equal(a.ring[:n*a.d], b.ring[:n*a.d]) {
			return fmt.Errorf("online: gamma auto: window examples differ")
		}
	}
	for i := range a.banks {
		x, y := *a.banks[i], *b.banks[i]
		if x.p.Kernel.Gamma != y.p.Kernel.Gamma { // within rtol of equal scales
			y.p.Kernel.Gamma = x.p.Kernel.Gamma
		}
		if err := mamStateClose(&x, &y, rtol); err != nil {
			return fmt.Errorf("online: gamma auto, bandwidth %d: %w", i, err)
		}
	}
	return nil
}

// AutoKeys: kernel.gamma takes auto (0), the default for rbf and
// laplacian random features.
func (p *MAMParams) AutoKeys() []string { return []string{"kernel.gamma"} }
