package online

import "math"

// MAM is the maximal-average-margin classifier of MATH.md §1 on an explicit
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
// and the bound uses its own average margin (MATH.md §1, "Variants"):
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
// do not drift. After each update the score direction w, the offset b, the
// normaliser and the bound's M̂ and R̂ are recomputed in one O(dim φ) pass;
// nothing depends on n.
//
// An empty model (or f(x) = 0) makes no decision: Label 0.
type MAM struct {
	spec   Spec
	fm     *FeatureMap
	phi    []float64 // scratch: φ(x) of the current event
	lnTerm float64   // ln(2/δ)

	n, nPos, nNeg int64
	tr, trC       float64 // tr Ω and its compensation

	s, sC     []float64 // plain: Σ y_i φ(x_i) and compensation
	pos, posC []float64 // balanced: S₊ and compensation
	neg, negC []float64 // balanced: S₋ and compensation

	// Derived by update after every change of state.
	w      []float64 // score direction (s for plain)
	b      float64   // offset in f = (<w, φ> + b)·k
	k      float64   // normaliser; 0 = no decision
	margin float64   // M̂ (M̂_w when balanced)
	rad    float64   // R̂
	num    float64   // boundNumerator(1, margin, rad, n, lnTerm)
}

var _ Model = (*MAM)(nil)

// NewMAM builds an empty MAM classifier; spec.Type must be "mam".
func NewMAM(spec Spec) (*MAM, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Type != ModelMAM {
		return nil, specErrorf("type", "want %q, got %q", ModelMAM, spec.Type)
	}
	fm, err := NewFeatureMap(spec.Kernel, spec.Dim)
	if err != nil {
		return nil, err
	}
	m := &MAM{spec: spec, fm: fm}
	m.alloc()
	m.refresh()
	return m, nil
}

func (m *MAM) alloc() {
	p := m.fm.Dim()
	m.phi = make([]float64, p)
	m.w = make([]float64, p)
	m.lnTerm = math.Log(2 / m.spec.Delta)
	if m.spec.Balance {
		m.pos, m.posC = make([]float64, p), make([]float64, p)
		m.neg, m.negC = make([]float64, p), make([]float64, p)
	} else {
		m.s, m.sC = make([]float64, p), make([]float64, p)
	}
}

// Type returns "mam".
func (m *MAM) Type() string { return ModelMAM }

// Dim returns the input dimension d.
func (m *MAM) Dim() int { return m.spec.Dim }

// Spec returns the model's spec.
func (m *MAM) Spec() Spec { return m.spec }

// FeatureMap returns the model's feature map.
func (m *MAM) FeatureMap() *FeatureMap { return m.fm }

// Label maps −1 and 0 (false) to −1 and +1 (true) to +1.
func (m *MAM) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Examples returns n, the number of examples learned.
func (m *MAM) Examples() int64 { return m.n }

// ClassCounts returns n₊ and n₋.
func (m *MAM) ClassCounts() (pos, neg int64) { return m.nPos, m.nNeg }

// Version returns 1.
func (m *MAM) Version() int64 { return 1 }

// AverageMargin returns M̂ (M̂_w for the balanced model), 0 when empty.
func (m *MAM) AverageMargin() float64 { return m.margin }

// Rademacher returns R̂ = (2/n)·sqrt(tr Ω) (tr Ω̃ for the balanced model),
// 0 when empty.
func (m *MAM) Rademacher() float64 { return m.rad }

// Bound returns the certainty bound at margin rho with the model's δ and
// B = 1: MistakeBound(1, AverageMargin(), Rademacher(), n, δ, rho).
func (m *MAM) Bound(rho float64) float64 { return boundAt(m.num, 1, rho) }

// Observe scores x, then learns (x, y) if labelled. Inputs with a NaN or
// infinite entry are neither scored nor learned: the Prediction then has
// Score 0, Label 0 and HasBound false. It panics if len(x) != Dim() or if
// labelled and y is not −1 or +1.
func (m *MAM) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != m.spec.Dim {
		panic("online: MAM.Observe: len(x) != Dim()")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: MAM.Observe: label must be -1 or +1 (see Label)")
	}
	p := Prediction{Delta: m.spec.Delta, N: m.n}
	sq, ok := m.fm.Map(m.phi, x)
	if !ok {
		return p
	}
	f := (dot(m.w, m.phi) + m.b) * m.k
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
	p.MistakeBound = boundAt(m.num, 1, math.Abs(f))
	p.HasBound = true
	if labelled {
		m.learn(y, sq)
	}
	return p
}

// learn adds φ = m.phi with label y and ‖φ‖² = sq.
func (m *MAM) learn(y, sq float64) {
	m.n++
	if y > 0 {
		m.nPos++
	} else {
		m.nNeg++
	}
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, sq)
	m.update(m.phi, y)
}

// update adds x to the sums of class y (x = 0 adds nothing) and recomputes
// the derived state (w, b, k, M̂, R̂, bound numerator) in the same pass.
// Counts and tr Ω must already include the example. Restoring a model runs
// update with x = 0, so a restored model is bit-identical to the saved one.
func (m *MAM) update(x []float64, y float64) {
	if m.n == 0 {
		clear(m.w)
		m.b, m.k, m.margin, m.rad, m.num = 0, 0, 0, 0, math.NaN()
		return
	}
	n := float64(m.n)
	invN := 1 / n
	tr := m.tr + m.trC
	if !m.spec.Balance {
		ss := plainPass(m.w, m.s, m.sC, x, y)
		m.b, m.k = 0, 0
		if ss > 0 {
			m.k = 1 / math.Sqrt(ss)
		}
		m.margin = math.Sqrt(ss) * invN
		m.rad = 2 * invN * math.Sqrt(tr)
	} else {
		// Class means when both classes are present; else it = io = 1
		// gives w = s, the plain-sum fallback.
		both := m.nPos > 0 && m.nNeg > 0
		t, tc, o, oc := m.pos, m.posC, m.neg, m.negC
		nt, no := m.nPos, m.nNeg
		if y < 0 {
			t, tc, o, oc = o, oc, t, tc
			nt, no = no, nt
		}
		it, io := 1.0, 1.0
		if both {
			// 1/n_t and 1/n_o with one division.
			ft, fo := float64(nt), float64(no)
			inv := 1 / (ft * fo)
			it, io = fo*inv, ft*inv
		}
		ww, ws, tt, oo := balancedPass(m.w, t, tc, o, oc, x, it, io, y)
		sumY := float64(m.nPos - m.nNeg)
		switch {
		case !both:
			m.b = sumY
		case y > 0: // t is the positive class
			m.b = (oo - tt) / 2
		default:
			m.b = (tt - oo) / 2
		}
		den := ww + m.b*m.b
		m.k = 0
		if den > 0 {
			m.k = 1 / math.Sqrt(2*den)
		}
		m.margin = (ws + m.b*sumY) * m.k * invN
		m.rad = 2 * invN * math.Sqrt((tr+n)/2)
	}
	m.num = boundNumerator(1, m.margin, m.rad, n, m.lnTerm)
}

// refresh recomputes the derived state from the sums (after a restore).
func (m *MAM) refresh() {
	clear(m.phi)
	m.update(m.phi, 1)
}

// twoSumAcc adds x to the compensated sum (s, c): the new s is fl(s + x)
// and the exact rounding error of that addition (Knuth's TwoSum, equal to
// Neumaier's branchy form) is added to c. The value of the sum is s + c.
func twoSumAcc(s, c, x float64) (float64, float64) {
	t := s + x
	bp := t - s
	return t, c + ((s - (t - bp)) + (x - bp))
}

// plainPass adds y·x (y = ±1, so exact) to the compensated sum (s, c) as
// in twoSumAcc, sets w = s + c and returns ‖w‖².
func plainPass(w, s, c, x []float64, y float64) float64 {
	s, c, x = s[:len(w)], c[:len(w)], x[:len(w)]
	var a0, a1 float64
	i := 0
	for ; i+1 < len(w); i += 2 {
		v0, v1 := y*x[i], y*x[i+1]
		s0, s1 := s[i], s[i+1]
		t0, t1 := s0+v0, s1+v1
		b0, b1 := t0-s0, t1-s1
		c0 := c[i] + ((s0 - (t0 - b0)) + (v0 - b0))
		c1 := c[i+1] + ((s1 - (t1 - b1)) + (v1 - b1))
		s[i], s[i+1], c[i], c[i+1] = t0, t1, c0, c1
		w0, w1 := t0+c0, t1+c1
		w[i], w[i+1] = w0, w1
		a0 += w0 * w0
		a1 += w1 * w1
	}
	if i < len(w) {
		v := y * x[i]
		si := s[i]
		t := si + v
		bp := t - si
		ci := c[i] + ((si - (t - bp)) + (v - bp))
		s[i], c[i] = t, ci
		w[i] = t + ci
		a0 += w[i] * w[i]
	}
	return a0 + a1
}

// balancedPass adds x to the compensated sum (t, tc) of class sgn (±1),
// then, with T = t + tc and O = o + oc (the other class), sets
//
//	w = sgn·(T·it − O·io),  i.e. μ₊ − μ₋ when it, io are 1/n_t, 1/n_o
//
// and returns ‖w‖², <w, s> with s = sgn·(T − O) = S₊ − S₋, ‖T·it‖² and
// ‖O·io‖². Negation is exact, so the result does not depend on which class
// is being updated.
func balancedPass(w, t, tc, o, oc, x []float64, it, io, sgn float64) (ww, ws, tt, oo float64) {
	t, tc, o, oc, x = t[:len(w)], tc[:len(w)], o[:len(w)], oc[:len(w)], x[:len(w)]
	for i, xi := range x {
		ti := t[i]
		s := ti + xi
		bp := s - ti
		ci := tc[i] + ((ti - (s - bp)) + (xi - bp))
		t[i], tc[i] = s, ci
		T := s + ci
		O := o[i] + oc[i]
		a := T * it
		c := O * io
		d := a - c
		w[i] = sgn * d
		ww += d * d
		ws += d * (T - O) // = w_i·s_i: the signs cancel
		tt += a * a
		oo += c * c
	}
	return ww, ws, tt, oo
}

// dot returns <a, b>, len(a) == len(b).
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
