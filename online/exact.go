package online

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/sparse"
)

// maxBudgetFloats bounds Budget·(Dim + 7), the float64 values of an
// ExactMAM's state (128 MiB), so that a corrupt spec or snapshot cannot ask
// for an absurd allocation.
const maxBudgetFloats = 1 << 24

// ExactMAM is the exact-kernel mode of the MAM classifier (docs/math.md §3),
// selected by Spec.Budget > 0: it stores the last Budget labelled examples
// (x_i, y_i) in a ring buffer and evaluates the exact kernel K (see Kernel)
// against all of them, O(Budget·d) per event. When the buffer is full the
// oldest example leaves as a new one arrives, so Budget is also an exact
// sliding window: the state is always that of a model trained on the last
// Budget labelled examples alone (Window and HalfLife must be 0).
//
// Plain (Spec.Balance false): f(x) = Σ y_i K(x_i, x)/sqrt(yᵀΩy),
// M̂ = sqrt(yᵀΩy)/n, R̂ = (2/n)·sqrt(tr Ω), n the number of stored examples.
//
// Balanced (Spec.Balance true): the class-mean difference in kernel space
// with offset, exactly as the random-feature MAM does it (see MAM): with
// φ̃ = [φ; 1]/√2 (B = 1), w = μ₊ − μ₋, b = (‖μ₋‖² − ‖μ₊‖²)/2,
//
//	f(x) = ((1/n₊)Σ₊K(x_i, x) − (1/n₋)Σ₋K(x_i, x) + b) / (√2·sqrt(‖w‖² + b²)),
//	‖μ₊‖² = Σ₊₊/n₊², ‖μ₋‖² = Σ₋₋/n₋², <μ₊, μ₋> = Σ₊₋/(n₊n₋),
//	‖w‖² = ‖μ₊‖² + ‖μ₋‖² − 2<μ₊, μ₋>,
//	<w, s> = Σ₊₊/n₊ + Σ₋₋/n₋ − Σ₊₋·(1/n₊ + 1/n₋),
//	M̂_w = (<w, s> + b·(n₊ − n₋)) / (√2·n·sqrt(‖w‖² + b²)),
//	R̂ = (2/n)·sqrt((tr Ω + n)/2),
//
// where Σ_ab = Σ_{y_i = a, y_j = b} K(x_i, x_j) over ordered pairs. While one
// class is absent it falls back to w = s, b = n₊ − n₋ as MAM does.
//
// Incremental sums. The model keeps yᵀΩy, Σ₊₊, Σ₋₋, Σ₊₋ and tr Ω as
// compensated (Neumaier) sums, and for each stored example i the sums
// A_i^± = Σ K(x_i, x_j) over the examples j of class ± that arrived after
// it (compensated too). Adding x with label y and kernel row k_i = K(x_i, x)
// over the stored examples costs O(Budget) (one pass over the row):
//
//	yᵀΩy += 2y·Σ y_i k_i + K(x, x),  Σ_yy += 2Σ_{y_i=y} k_i + K(x, x),
//	Σ₊₋ += Σ_{y_i=−y} k_i,  tr Ω += K(x, x),  A_i^y += k_i.
//
// The example leaving the ring is the oldest, so every other stored example
// arrived after it and its A^± are exactly its kernel sums against the
// rest: removing it is O(1), the same formulas with A^± in place of the
// row sums, subtracted. Each time the ring wraps round (every Budget
// labelled events once full) the five sums are recomputed from the A's and
// the K(x_i, x_i), O(Budget), so rounding cannot drift over 10⁹ events.
//
// Per event, Observe computes the kernel row once, scores with it and, if
// the event is labelled, learns with it; it does not allocate.
//
// Numerics (docs/math.md §3): for rbf and laplacian the row is computed as
// e_i = exp(−gamma(dist_i − m)) with m the smallest distance, so that large
// gamma does not underflow every K to 0; the score is rescaled by
// exp(−gamma·m) (computed as one exp with the normaliser). Where that factor
// underflows, the score is ±0 or subnormal but its sign, and so the
// prediction, is still that of the unscaled sum.
//
// Certainty bound: B = 1 for linear (normalised inputs), rbf and laplacian,
// and MistakeBound(1, M̂, R̂, n, δ, |f(x)|) is published with n the number of
// stored examples. The polynomial kernel has K(x, x) = (‖x‖² + coef0)^degree,
// unbounded on unnormalised inputs: no B holds for every input, so the model
// publishes no bound (HasBound false, Bound returns 1).
//
// An empty model, yᵀΩy = 0 or f(x) = 0 make no decision: Label 0.
type ExactMAM struct {
	p       MAMParams
	kern    Kernel
	bounded bool
	lnTerm  float64 // ln(2/δ)
	d       int

	// Ring of stored examples; slot head is the next to be written (the
	// oldest when the ring is full). Slots fill from 0 before wrapping.
	xs          []float64 // Budget×d prepared inputs (x/‖x‖ for linear)
	ys          []float64 // labels ±1
	self        []float64 // K(x_i, x_i)
	aPos, aPosC []float64 // A_i^+ and compensation
	aNeg, aNegC []float64 // A_i^- and compensation
	head, count int
	nPos, nNeg  int
	total       int64 // labelled examples learned in all

	// Compensated sums over the stored examples.
	yy, yyC float64 // yᵀΩy
	pp, ppC float64 // Σ₊₊
	nn, nnC float64 // Σ₋₋
	pn, pnC float64 // Σ₊₋ (pairs counted once)
	tr, trC float64 // tr Ω

	// Scratch.
	xp []float64 // prepared input
	kb []float64 // kernel row

	sp *exactSparse // hashed features: the stored inputs are sparse (xs, xp nil)

	// Derived by refresh after every change of state: the score is
	// (a·k·e^−s + b·k) with a = wp·Σ₊e_i − wn·Σ₋e_i.
	wp, wn float64
	b      float64
	k      float64 // normaliser; 0 = no decision
	lk     float64 // ln k
	margin float64
	rad    float64
	num    float64 // bound numerator; NaN when there is no bound
}

// Not a Preparer: its per-event cost is the kernel row over the stored examples (state).
var (
	_ Model   = (*ExactMAM)(nil)
	_ Bounder = (*ExactMAM)(nil)
)

// budget checks the budget of mam's exact kernel mode.
func (c *checks) budget(nb, dim int) {
	if nb < 1 || nb > maxBudgetFloats/(dim+7) {
		c.add("budget", "must be ≥ 1 (0 = random-feature mode) with budget×(dim+7) ≤ %d, got %d×(%d+7)", maxBudgetFloats, nb, dim)
	}
}

// NewExactMAM builds an empty exact-kernel MAM for inputs of dimension dim;
// p.Budget must be > 0.
func NewExactMAM(dim int, p MAMParams) (*ExactMAM, error) {
	if p.Budget <= 0 {
		return nil, specErrorf("budget", "must be > 0 for the exact kernel mode, got %d", p.Budget)
	}
	if err := validateDim(dim); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	return newExactMAM(dim, 0, p)
}

// newExactMAM builds an empty ExactMAM of validated parameters: its
// stored inputs dense (nnz = 0) or, for hashed features, sparse rows of
// at most nnz entries (exactSparse).
func newExactMAM(dim, nnz int, p MAMParams) (*ExactMAM, error) {
	kd := dim
	if nnz > 0 {
		kd = 1 // the kernel's dimension matters to dense inputs only
	}
	kern, err := NewKernel(p.Kernel, kd)
	if err != nil {
		return nil, err
	}
	kern.dim = dim
	nb, d := p.Budget, dim
	m := &ExactMAM{
		p:      p,
		kern:   kern,
		lnTerm: math.Log(2 / p.Delta),
		d:      d,
		ys:     make([]float64, nb),
		self:   make([]float64, nb),
		aPos:   make([]float64, nb),
		aPosC:  make([]float64, nb),
		aNeg:   make([]float64, nb),
		aNegC:  make([]float64, nb),
		kb:     make([]float64, nb),
	}
	if nnz > 0 {
		m.sp = newExactSparse(nb, nnz)
	} else {
		m.xs, m.xp = make([]float64, nb*d), make([]float64, d)
	}
	_, m.bounded = kern.Bound()
	m.refresh()
	return m, nil
}

// Type returns MAMName, the type of both modes.
func (m *ExactMAM) Type() string { return MAMName }

// Dim returns the input dimension d.
func (m *ExactMAM) Dim() int { return m.d }

// Params returns the model's parameters.
func (m *ExactMAM) Params() MAMParams { return m.p }

// Kernel returns the model's kernel.
func (m *ExactMAM) Kernel() Kernel { return m.kern }

// Label maps −1 and 0 (false) to −1 and +1 (true) to +1.
func (m *ExactMAM) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Examples returns the number of labelled examples learned in all,
// including those that have left the budget.
func (m *ExactMAM) Examples() int64 { return m.total }

// Stored returns n, the number of examples held (≤ Budget); the model and
// its bound are those of these n examples.
func (m *ExactMAM) Stored() int { return m.count }

// ClassCounts returns n₊ and n₋ among the stored examples.
func (m *ExactMAM) ClassCounts() (pos, neg int64) { return int64(m.nPos), int64(m.nNeg) }

// Version returns 1.
func (m *ExactMAM) Version() int64 { return 1 }

// AverageMargin returns M̂ (M̂_w for the balanced model), 0 when empty.
func (m *ExactMAM) AverageMargin() float64 { return m.margin }

// Rademacher returns R̂ = (2/n)·sqrt(tr Ω) (tr Ω̃ = (tr Ω + n)/2 for the
// balanced model), 0 when empty.
func (m *ExactMAM) Rademacher() float64 { return m.rad }

// HasBound reports whether the model publishes a certainty bound (false
// for the polynomial kernel, whose B is unbounded).
func (m *ExactMAM) HasBound() bool { return m.bounded }

// Bound returns the certainty bound at margin rho for the current state,
// MistakeBound(1, AverageMargin(), Rademacher(), n, δ, rho) with n the
// number of stored examples; 1 when the model has no bound (polynomial
// kernel) or the bound is vacuous.
func (m *ExactMAM) Bound(rho float64) float64 {
	if !m.bounded {
		return 1
	}
	return boundAt(m.num, 1, rho)
}

// Observe scores x with the stored examples, then, if labelled, stores
// (x, y), evicting the oldest example when the budget is full. Inputs with a
// NaN or infinite entry, or too large to be used safely (rbf and laplacian:
// ‖x‖² > 2¹⁰⁰⁰; polynomial: K(x, x) > 2⁵⁰⁰) are neither scored nor
// learned: Score 0, Label 0, HasBound false. It panics if
// len(x) != Dim() or if labelled and y is not −1 or +1. Prediction.N is the
// number of stored examples (the n of the bound).
func (m *ExactMAM) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != m.d {
		panic("online: ExactMAM.Observe: len(x) != Dim()")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: ExactMAM.Observe: label must be -1 or +1 (see Label)")
	}
	if m.sp != nil {
		return m.observeRow(m.sp.bld.FromDense(x), y, labelled)
	}
	p := Prediction{Delta: m.p.Delta, N: int64(m.count)}
	self, ok := m.kern.prepare(m.xp, x)
	if !ok {
		return p
	}
	s := m.kern.row(m.kb[:m.count], m.xs, m.xp)
	return m.score(p, self, s, y, labelled)
}

// score finishes Observe once the input is prepared (K(x, x) = self) and
// its kernel row is in kb (K(x_i, x) = kb[i]·e^−s): the score, and the
// update when labelled.
func (m *ExactMAM) score(p Prediction, self, s, y float64, labelled bool) Prediction {
	n := m.count
	kb := m.kb[:n]

	// Class sums of the row; the oldest slot (leaving if this event is
	// learned with a full ring) is kept apart so that the learning update
	// gets the sums over the examples that stay without a subtraction.
	o := -1
	if labelled && n == len(m.ys) {
		o = m.head
	}
	var sp, sn, ep, en float64
	if o < 0 {
		sp, sn = classSums(kb, m.ys)
	} else {
		p0, n0 := classSums(kb[:o], m.ys[:o])
		p1, n1 := classSums(kb[o+1:], m.ys[o+1:])
		sp, sn = p0+p1, n0+n1
		if m.ys[o] > 0 {
			ep = kb[o]
		} else {
			en = kb[o]
		}
	}

	a := m.wp*(sp+ep) - m.wn*(sn+en)
	scale := m.k
	if s != 0 {
		scale = math.Exp(m.lk - s)
	}
	f := a*scale + m.b*m.k
	switch {
	case f > 0:
		p.Label = 1
	case f < 0:
		p.Label = -1
	default:
		f = 0 // no −0 on the wire
		if m.b == 0 && m.k > 0 {
			// e^−s underflowed: the sign is that of the scaled sum.
			switch {
			case a > 0:
				p.Label = 1
			case a < 0:
				p.Label = -1
			}
		}
	}
	p.Score = f
	if m.bounded {
		p.MistakeBound = boundAt(m.num, 1, math.Abs(f))
		p.HasBound = true
	} else {
		p.MistakeBound = 1
	}
	if labelled {
		c := 1.0
		if s != 0 {
			c = math.Exp(-s)
		}
		m.learn(y, self, c, sp*c, sn*c, o)
	}
	return p
}

// classSums returns Σ_{ys_i > 0} k_i and Σ_{ys_i < 0} k_i (ys_i = ±1),
// without branches on the label.
func classSums(k, ys []float64) (pos, neg float64) {
	ys = ys[:len(k)]
	var p0, p1, q0, q1 float64
	i := 0
	for ; i+1 < len(k); i += 2 {
		e0, e1 := k[i], k[i+1]
		h0, h1 := e0*(0.5+0.5*ys[i]), e1*(0.5+0.5*ys[i+1])
		p0 += h0
		p1 += h1
		q0 += e0 - h0
		q1 += e1 - h1
	}
	if i < len(k) {
		h := k[i] * (0.5 + 0.5*ys[i])
		p0 += h
		q0 += k[i] - h
	}
	return p0 + p1, q0 + q1
}

// learn stores the prepared input m.xp with label y and K(x, x) = self,
// given its kernel row c·m.kb over the stored examples and the row's class
// sums kp, kn over the examples other than slot o (the oldest, evicted
// first; o < 0 when the ring is not full).
func (m *ExactMAM) learn(y, self, c, kp, kn float64, o int) {
	if o >= 0 {
		m.evict(o)
	}
	// A_i^y += c·k_i for the examples that stay.
	a, ac := m.aPos, m.aPosC
	if y < 0 {
		a, ac = m.aNeg, m.aNegC
	}
	n := m.count + boolInt(o >= 0) // slots holding data before the write
	kb := m.kb[:n]
	for i, v := range kb {
		if i == o {
			continue
		}
		ai, t := a[i], c*v
		sum := ai + t
		bp := sum - ai
		ac[i] += (ai - (sum - bp)) + (t - bp)
		a[i] = sum
	}
	m.yy, m.yyC = twoSumAcc(m.yy, m.yyC, self+2*y*(kp-kn))
	if y > 0 {
		m.pp, m.ppC = twoSumAcc(m.pp, m.ppC, self+2*kp)
		m.pn, m.pnC = twoSumAcc(m.pn, m.pnC, kn)
		m.nPos++
	} else {
		m.nn, m.nnC = twoSumAcc(m.nn, m.nnC, self+2*kn)
		m.pn, m.pnC = twoSumAcc(m.pn, m.pnC, kp)
		m.nNeg++
	}
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, self)

	j := m.head
	if m.sp != nil {
		m.sp.store(j)
	} else {
		copy(m.xs[j*m.d:(j+1)*m.d], m.xp)
	}
	m.ys[j], m.self[j] = y, self
	m.aPos[j], m.aPosC[j], m.aNeg[j], m.aNegC[j] = 0, 0, 0, 0
	m.count++
	m.total++
	if m.head++; m.head == len(m.ys) {
		m.head = 0
		m.reaccumulate()
	}
	m.refresh()
}

// evict removes the example in slot o, the oldest: its A^± are its kernel
// sums against every other stored example.
func (m *ExactMAM) evict(o int) {
	if m.sp != nil {
		m.sp.evict(o)
	}
	y, self := m.ys[o], m.self[o]
	ap, an := m.aPos[o]+m.aPosC[o], m.aNeg[o]+m.aNegC[o]
	m.yy, m.yyC = twoSumAcc(m.yy, m.yyC, -(self + 2*y*(ap-an)))
	if y > 0 {
		m.pp, m.ppC = twoSumAcc(m.pp, m.ppC, -(self + 2*ap))
		m.pn, m.pnC = twoSumAcc(m.pn, m.pnC, -an)
		m.nPos--
	} else {
		m.nn, m.nnC = twoSumAcc(m.nn, m.nnC, -(self + 2*an))
		m.pn, m.pnC = twoSumAcc(m.pn, m.pnC, -ap)
		m.nNeg--
	}
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, -self)
	m.count--
}

// pairSums recomputes yᵀΩy, Σ₊₊, Σ₋₋, Σ₊₋ and tr Ω (as compensated sums
// (value, compensation)) from the stored K(x_i, x_i) and A_i^±: every pair
// (i, j) is counted once, in the A of the older of the two.
func (m *ExactMAM) pairSums() (yy, pp, nn, pn, tr [2]float64) {
	for i := range m.count {
		y, s := m.ys[i], m.self[i]
		ap, an := m.aPos[i]+m.aPosC[i], m.aNeg[i]+m.aNegC[i]
		yy[0], yy[1] = twoSumAcc(yy[0], yy[1], s+2*y*(ap-an))
		if y > 0 {
			pp[0], pp[1] = twoSumAcc(pp[0], pp[1], s+2*ap)
			pn[0], pn[1] = twoSumAcc(pn[0], pn[1], an)
		} else {
			nn[0], nn[1] = twoSumAcc(nn[0], nn[1], s+2*an)
			pn[0], pn[1] = twoSumAcc(pn[0], pn[1], ap)
		}
		tr[0], tr[1] = twoSumAcc(tr[0], tr[1], s)
	}
	return
}

// reaccumulate replaces the incrementally kept sums by pairSums, so that
// the rounding of additions and removals cannot drift.
func (m *ExactMAM) reaccumulate() {
	yy, pp, nn, pn, tr := m.pairSums()
	m.yy, m.yyC = yy[0], yy[1]
	m.pp, m.ppC = pp[0], pp[1]
	m.nn, m.nnC = nn[0], nn[1]
	m.pn, m.pnC = pn[0], pn[1]
	m.tr, m.trC = tr[0], tr[1]
}

// refresh recomputes the derived state (score weights, offset, normaliser,
// M̂, R̂, bound numerator) from the counts and sums, O(1).
func (m *ExactMAM) refresh() {
	m.wp, m.wn, m.b, m.k, m.lk = 1, 1, 0, 0, math.Inf(-1)
	m.margin, m.rad, m.num = 0, 0, math.NaN()
	if m.count == 0 {
		return
	}
	n := float64(m.count)
	invN := 1 / n
	yy := m.yy + m.yyC
	tr := max(m.tr+m.trC, 0)
	if !m.p.Balance {
		if yy > 0 {
			m.k = 1 / math.Sqrt(yy)
			m.margin = math.Sqrt(yy) * invN
		}
		m.rad = 2 * invN * math.Sqrt(tr)
	} else {
		sumY := float64(m.nPos - m.nNeg)
		var ww, ws float64
		if m.nPos > 0 && m.nNeg > 0 {
			ip, in := 1/float64(m.nPos), 1/float64(m.nNeg)
			pp, nn, pn := m.pp+m.ppC, m.nn+m.nnC, m.pn+m.pnC
			mpp, mnn, mpn := pp*ip*ip, nn*in*in, pn*ip*in
			ww = max(mpp+mnn-2*mpn, 0)
			ws = pp*ip + nn*in - pn*(ip+in)
			m.b = (mnn - mpp) / 2
			m.wp, m.wn = ip, in
		} else {
			ww, ws = max(yy, 0), yy
			m.b = sumY
		}
		if den := ww + m.b*m.b; den > 0 {
			m.k = 1 / math.Sqrt(2*den)
		}
		m.margin = (ws + m.b*sumY) * m.k * invN
		m.rad = 2 * invN * math.Sqrt((tr+n)/2)
	}
	if m.k > 0 {
		m.lk = math.Log(m.k)
	}
	if m.bounded {
		m.num = boundNumerator(1, m.margin, m.rad, n, m.lnTerm)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Serialised state of an ExactMAM, after the envelope (header.go; type
// mam; in version 1 the tag was mam_exact), little-endian:
//
//	total int64, count uint32, head uint32, n₊ uint32, n₋ uint32,
//	yᵀΩy, Σ₊₊, Σ₋₋, Σ₊₋, tr Ω: each float64 value and compensation,
//	then slots 0..count−1 in ring order, each:
//	  label uint8 (0 = −1, 1 = +1), K(x_i, x_i) float64,
//	  A_i^+, comp(A_i^+), A_i^−, comp(A_i^−) float64, x_i d×float64
//	  (the stored form: x/‖x‖ for linear).
//
// A model of hashed features (exact_sparse.go) sets bit 31 of head, writes
// the bound on an event's entries (features.max_features) u32 after the
// sums, and each slot's x_i sparse: nnz u32, nnz indices u32 (strictly
// increasing, < d), nnz float64 values (nonzero).
//
// Derived values are recomputed by the same code as after an update, so a
// restored model is bit-identical and stays so under further learning.

// AppendBinary appends the MarshalBinary encoding of m to dst
// (encoding.BinaryAppender).
func (m *ExactMAM) AppendBinary(dst []byte) ([]byte, error) {
	dst = AppendHeader(dst, MAMName, &m.p, m.d)
	dst = codec.AppendI64(dst, m.total)
	dst = codec.AppendU32(dst, uint32(m.count))
	if m.sp != nil {
		dst = codec.AppendU32(dst, uint32(m.head)|sparseHead)
	} else {
		dst = codec.AppendU32(dst, uint32(m.head))
	}
	dst = codec.AppendU32(dst, uint32(m.nPos))
	dst = codec.AppendU32(dst, uint32(m.nNeg))
	dst = codec.AppendF64s(dst, []float64{m.yy, m.yyC, m.pp, m.ppC, m.nn, m.nnC, m.pn, m.pnC, m.tr, m.trC})
	if m.sp != nil {
		dst = codec.AppendU32(dst, uint32(m.sp.nnz))
	}
	nb, o := len(m.ys), m.oldestSlot()
	for i := range m.count {
		dst = codec.AppendBool(dst, m.ys[i] > 0)
		dst = codec.AppendF64s(dst, []float64{m.self[i], m.aPos[i], m.aPosC[i], m.aNeg[i], m.aNegC[i]})
		if m.sp == nil {
			dst = codec.AppendF64s(dst, m.xs[i*m.d:(i+1)*m.d])
			continue
		}
		x := m.sp.rows.Row((i - o + nb) % nb)
		dst = codec.AppendU32(dst, uint32(x.Len()))
		for _, j := range x.Idx {
			dst = codec.AppendU32(dst, uint32(j))
		}
		dst = codec.AppendF64s(dst, x.Val)
	}
	return dst, nil
}

// MarshalBinary encodes the complete state of m.
func (m *ExactMAM) MarshalBinary() ([]byte, error) {
	if m.sp != nil {
		return m.AppendBinary(make([]byte, 0, 256+m.count*45+12*m.sp.rows.Entries()))
	}
	size := 256 + m.count*(1+8*(5+m.d))
	return m.AppendBinary(make([]byte, 0, size))
}

// UnmarshalBinary replaces m's parameters and state with the encoded ones.
// It rejects a wrong header, a truncated or over-long encoding, invalid
// parameters and inconsistent state with an error wrapping ErrFormat; m is
// then unchanged.
func (m *ExactMAM) UnmarshalBinary(b []byte) error {
	var p MAMParams
	d, r := ReadHeader(b, MAMName, &p, func(tag string, s legacySpec) error { return legacyMAM(tag, s, &p) })
	if r.Err() == nil && p.Budget <= 0 {
		r.Failf("budget %d: not the exact kernel mode", p.Budget)
	}
	total := r.I64()
	count, head := int(r.U32()), r.U32()
	nPos, nNeg := int(r.U32()), int(r.U32())
	var sums [10]float64
	r.F64s(sums[:])
	sparseRows := head&sparseHead != 0
	nnz := 0
	if sparseRows {
		head &^= sparseHead
		nnz = int(r.U32())
	}
	if err := r.Err(); err != nil {
		return err
	}
	if sparseRows {
		if d < 1 || d > MaxSparseDim {
			return fmt.Errorf("%w: dimension %d of hashed features", ErrFormat, d)
		}
		if err := specFormatErr(p.ValidateSparse(d, nnz)); err != nil {
			return err
		}
	} else {
		checkParams(r, &p, d)
		if err := r.Err(); err != nil {
			return err
		}
	}
	// Sizes before allocating anything for the parameters.
	nb, hd := p.Budget, int(head)
	switch {
	case count > nb || hd >= nb || (count < nb && hd != count):
		return fmt.Errorf("%w: ring count %d, head %d with budget %d", ErrFormat, count, hd, nb)
	case nPos+nNeg != count || total < int64(count):
		return fmt.Errorf("%w: inconsistent counts n=%d n+=%d n-=%d total=%d", ErrFormat, count, nPos, nNeg, total)
	}
	if size := count * (1 + 8*(5+d)); !sparseRows && r.Len() != size {
		return fmt.Errorf("%w: %d bytes of slots, want %d", ErrFormat, r.Len(), size)
	}
	if sparseRows && !r.Need(count*45) {
		return fmt.Errorf("%w: %d bytes for %d slots", ErrFormat, r.Len(), count)
	}
	nm, err := newExactMAM(d, nnz, p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if sparseRows {
		nm.sp.tmp = make([]sparse.Row, count)
	}
	for i := range count {
		nm.ys[i] = -1
		if r.Bool("label") {
			nm.ys[i] = 1
		}
		nm.self[i] = r.F64()
		nm.aPos[i], nm.aPosC[i] = r.F64(), r.F64()
		nm.aNeg[i], nm.aNegC[i] = r.F64(), r.F64()
		if !sparseRows {
			r.F64s(nm.xs[i*d : (i+1)*d])
			continue
		}
		k := int(r.U32())
		if r.Err() != nil || k > d || !r.Need(12*k) {
			return fmt.Errorf("%w: slot %d of %d entries: %w", ErrFormat, i, k, r.Err())
		}
		x := sparse.Row{Idx: make([]int32, k), Val: make([]float64, k)}
		for j := range x.Idx {
			x.Idx[j] = int32(r.U32())
		}
		r.F64s(x.Val)
		if err := sparse.Check(x, d); err != nil {
			return fmt.Errorf("%w: slot %d: %w", ErrFormat, i, err)
		}
		nm.sp.tmp[i] = x
	}
	if err := r.End(); err != nil {
		return err
	}
	nm.total, nm.count, nm.head, nm.nPos, nm.nNeg = total, count, hd, nPos, nNeg
	nm.yy, nm.yyC, nm.pp, nm.ppC, nm.nn, nm.nnC = sums[0], sums[1], sums[2], sums[3], sums[4], sums[5]
	nm.pn, nm.pnC, nm.tr, nm.trC = sums[6], sums[7], sums[8], sums[9]
	if sp := nm.sp; sp != nil { // store the rows oldest first
		o := nm.oldestSlot()
		for k := range count {
			i := (o + k) % nb
			x := sp.tmp[i]
			sp.x, sp.xsq = x, sparse.Sq(x)
			sp.store(i)
		}
		sp.tmp, sp.x = nil, sparse.Row{}
	}
	if err := nm.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	nm.refresh()
	*m = *nm
	return nil
}

// sparseHead is the bit of the encoded head that marks stored inputs of
// hashed features.
const sparseHead = 1 << 31

// checkState rejects decoded states that no sequence of updates produces,
// in O(Budget·d).
func (m *ExactMAM) checkState() error {
	const tol = 1e-9
	nb, d := len(m.ys), m.d
	for _, v := range [...]float64{m.yy, m.yyC, m.pp, m.ppC, m.nn, m.nnC, m.pn, m.pnC, m.tr, m.trC} {
		if !isFinite(v) {
			return errors.New("non-finite sum")
		}
	}
	pos := 0
	for i := range m.count {
		if m.ys[i] > 0 {
			pos++
		}
		var x []float64
		var sq float64 // ‖x_i‖²
		if m.sp != nil {
			r := m.sp.rows.Row((i - m.oldestSlot() + nb) % nb)
			for _, v := range r.Val {
				if !isFinite(v) {
					return fmt.Errorf("slot %d: non-finite input", i)
				}
			}
			sq = sparse.Sq(r)
		} else {
			x = m.xs[i*d : (i+1)*d]
			for _, v := range x {
				if !isFinite(v) {
					return fmt.Errorf("slot %d: non-finite input", i)
				}
			}
			sq = dot(x, x)
		}
		for _, v := range [...]float64{m.self[i], m.aPos[i], m.aPosC[i], m.aNeg[i], m.aNegC[i]} {
			if !isFinite(v) {
				return fmt.Errorf("slot %d: non-finite sum", i)
			}
		}
		s := m.self[i]
		switch m.kern.kind {
		case kindLinear:
			if !(sq == 0 && s == 0 || math.Abs(sq-1) <= tol && math.Abs(s-1) <= tol) {
				return fmt.Errorf("slot %d: stored input of norm² %v with K(x, x) = %v", i, sq, s)
			}
		case kindPolynomial:
			if want := powInt(sq+m.kern.coef0, m.kern.degree); s != want || !(s <= maxPolySelf) {
				return fmt.Errorf("slot %d: K(x, x) = %v, want %v", i, s, want)
			}
		default:
			if s != 1 || !(sq <= maxDistInputSq) {
				return fmt.Errorf("slot %d: K(x, x) = %v (want 1), ‖x‖² = %v", i, s, sq)
			}
		}
	}
	if pos != m.nPos {
		return fmt.Errorf("n+ = %d, but %d stored labels are +1", m.nPos, pos)
	}
	// A_i^± sums K over the newer examples of class ±: |K| ≤ 1 for the
	// bounded kernels (≥ 0 for rbf and laplacian), and the newest has none.
	newerPos, newerNeg := 0, 0
	for k := range m.count {
		i := (m.head - 1 - k + 2*nb) % nb // newest first
		ap, an := m.aPos[i]+m.aPosC[i], m.aNeg[i]+m.aNegC[i]
		if m.kern.kind != kindPolynomial {
			lo := -1.0
			if m.kern.kind != kindLinear {
				lo = 0
			}
			fp, fn := float64(newerPos)*(1+tol)+tol, float64(newerNeg)*(1+tol)+tol
			if !(ap >= lo*fp && ap <= fp && an >= lo*fn && an <= fn) {
				return fmt.Errorf("slot %d: kernel sums %v, %v over %d, %d newer examples", i, ap, an, newerPos, newerNeg)
			}
		} else if k == 0 && (ap != 0 || an != 0) {
			return fmt.Errorf("slot %d (newest): kernel sums %v, %v, want 0", i, ap, an)
		}
		if m.ys[i] > 0 {
			newerPos++
		} else {
			newerNeg++
		}
	}
	// The kept sums must agree with the ones the A's give.
	yy, pp, nn, pn, tr := m.pairSums()
	var mag float64 // scale of the terms, for the tolerance
	for i := range m.count {
		mag += math.Abs(m.self[i]) + 2*math.Abs(m.aPos[i]+m.aPosC[i]) + 2*math.Abs(m.aNeg[i]+m.aNegC[i])
	}
	for _, c := range []struct {
		name string
		got  float64
		want [2]float64
	}{
		{"yᵀΩy", m.yy + m.yyC, yy}, {"Σ++", m.pp + m.ppC, pp}, {"Σ--", m.nn + m.nnC, nn},
		{"Σ+-", m.pn + m.pnC, pn}, {"tr Ω", m.tr + m.trC, tr},
	} {
		if w := c.want[0] + c.want[1]; !(math.Abs(c.got-w) <= 1e-6*mag+tol) {
			return fmt.Errorf("%s = %v, but the stored kernel sums give %v", c.name, c.got, w)
		}
	}
	return nil
}

// exactStateClose reports whether a and b hold the same state (see
// StateClose): the same spec, counts, ring layout, labels and inputs, and
// sums that agree to rtol.
func exactStateClose(a, b *ExactMAM, rtol float64) error {
	if !reflect.DeepEqual(a.p, b.p) || a.d != b.d {
		return fmt.Errorf("online: parameters differ: %+v (dim %d) vs %+v (dim %d)", a.p, a.d, b.p, b.d)
	}
	if a.total != b.total || a.count != b.count || a.head != b.head || a.nPos != b.nPos || a.nNeg != b.nNeg {
		return fmt.Errorf("online: counts differ: total %d/%d, n %d/%d, head %d/%d, n₊ %d/%d", a.total, b.total, a.count, b.count, a.head, b.head, a.nPos, b.nPos)
	}
	if (a.sp == nil) != (b.sp == nil) {
		return errors.New("online: one keeps its inputs sparse (hashed features), the other dense")
	}
	for i := range a.count {
		if a.ys[i] != b.ys[i] {
			return fmt.Errorf("online: slot %d: labels differ", i)
		}
		if a.sp != nil {
			if k := (i - a.oldestSlot() + len(a.ys)) % len(a.ys); !slices.Equal(a.sp.rows.Row(k).Idx, b.sp.rows.Row(k).Idx) ||
				!slices.Equal(a.sp.rows.Row(k).Val, b.sp.rows.Row(k).Val) {
				return fmt.Errorf("online: slot %d: inputs differ", i)
			}
			continue
		}
		for j := i * a.d; j < (i+1)*a.d; j++ {
			if a.xs[j] != b.xs[j] {
				return fmt.Errorf("online: slot %d: inputs differ", i)
			}
		}
		if !closeRel(a.aPos[i]+a.aPosC[i], b.aPos[i]+b.aPosC[i], rtol) || !closeRel(a.aNeg[i]+a.aNegC[i], b.aNeg[i]+b.aNegC[i], rtol) {
			return fmt.Errorf("online: slot %d: kernel sums differ", i)
		}
	}
	for _, c := range [][4]float64{{a.yy, a.yyC, b.yy, b.yyC}, {a.pp, a.ppC, b.pp, b.ppC}, {a.nn, a.nnC, b.nn, b.nnC}, {a.pn, a.pnC, b.pn, b.pnC}, {a.tr, a.trC, b.tr, b.trC}} {
		if !closeRel(c[0]+c[1], c[2]+c[3], rtol) {
			return fmt.Errorf("online: sums differ: %v vs %v", c[0]+c[1], c[2]+c[3])
		}
	}
	return nil
}
