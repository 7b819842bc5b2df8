package online

import (
	"fmt"
	"math"

	"github.com/streamer/streamer/online/codec"
)

// Serialised MAM, after the envelope (header.go: magic, format version,
// type mam, parameters, input dimension d), little-endian:
//
//	n, n₊, n₋ int64; tr Ω float64 and its compensation float64;
//	p = dim φ uint32; then p-float64 vectors:
//	        plain:    s, comp(s)
//	        balanced: S₊, comp(S₊), S₋, comp(S₋)
//	forgetting (after the vectors; nothing without forgetting):
//	        window:    total int64 (labelled examples learned in all), then
//	                   for the window's slots 0..n−1 (n = min(total, window);
//	                   the next example goes to slot total mod window) their
//	                   labels, uint8 each (0 = −1, 1 = +1), then their
//	                   inputs, d float64 each
//	        half-life: W = Σ w_i, Q = Σ w_i², W₊, W₋, each float64 followed
//	                   by its compensation (tr Ω then holds Σ w_i²‖φ(x_i)‖²,
//	                   the vectors the weighted sums)
//
// Gamma auto (kernel.gamma 0) has its own state after the envelope: see
// mam_auto.go.
//
// Derived values (w, b, normaliser, M̂, R̂) and the random frequencies are
// not stored: they are rebuilt from the parameters (seed) and the sums with
// the same code as after an update, so a restored model is bit-identical.

// AppendBinary appends the MarshalBinary encoding of m to dst
// (encoding.BinaryAppender).
func (m *MAM) AppendBinary(dst []byte) ([]byte, error) {
	dst = AppendHeader(dst, MAMName, &m.p, m.dim)
	if m.auto != nil {
		return m.auto.appendState(m, dst), nil
	}
	dst = codec.AppendI64(dst, m.n)
	dst = codec.AppendI64(dst, m.nPos)
	dst = codec.AppendI64(dst, m.nNeg)
	dst = codec.AppendF64(dst, m.tr)
	dst = codec.AppendF64(dst, m.trC)
	dst = codec.AppendU32(dst, uint32(m.fm.Dim()))
	for _, v := range m.vectors() {
		dst = codec.AppendF64s(dst, v)
	}
	switch {
	case m.ring != nil:
		dst = codec.AppendI64(dst, m.total)
		for _, y := range m.ringY[:m.n] {
			dst = codec.AppendBool(dst, y > 0)
		}
		dst = codec.AppendF64s(dst, m.ring[:int(m.n)*m.dim])
	case m.decay:
		for _, x := range m.decayState() {
			dst = codec.AppendF64(dst, *x)
		}
	}
	return dst, nil
}

// MarshalBinary encodes the complete state of m (see the format above).
func (m *MAM) MarshalBinary() ([]byte, error) {
	if m.auto != nil {
		return m.AppendBinary(make([]byte, 0, 200+autoStateSize(m.p, m.dim, m.auto.total)))
	}
	size := 200 + 8*m.fm.Dim()*len(m.vectors()) + m.forgetSize(m.n)
	return m.AppendBinary(make([]byte, 0, size))
}

// forgetSize is the size of the forgetting state of m's parameters with n
// examples in the window (n must be in [0, Window]).
func (m *MAM) forgetSize(n int64) int {
	switch {
	case m.p.Window.Events > 0:
		return 8 + int(n)*(1+8*m.dim)
	case m.p.Decay.HalfLife > 0:
		return 8 * 8
	}
	return 0
}

// decayState lists the decay accumulators in format order.
func (m *MAM) decayState() []*float64 {
	return []*float64{&m.wt, &m.wtC, &m.wq, &m.wqC, &m.wPos, &m.wPosC, &m.wNeg, &m.wNegC}
}

// vectors lists the stored sum vectors in format order.
func (m *MAM) vectors() [][]float64 {
	if m.p.Balance {
		return [][]float64{m.pos, m.posC, m.neg, m.negC}
	}
	return [][]float64{m.s, m.sC}
}

// UnmarshalBinary replaces m's parameters and state with the encoded ones.
// On error (wrapping ErrFormat) m is unchanged.
func (m *MAM) UnmarshalBinary(b []byte) error {
	var p MAMParams
	d, r := ReadHeader(b, MAMName, &p, func(tag string, s legacySpec) error { return legacyMAM(tag, s, &p) })
	checkParams(r, &p, d)
	if r.Err() == nil && p.Budget != 0 {
		r.Failf("budget %d: the exact kernel mode (ExactMAM)", p.Budget)
	}
	if r.Err() == nil && p.autoGamma() {
		return m.unmarshalAuto(r, d, p) // mam_auto.go
	}
	n, nPos, nNeg := r.I64(), r.I64(), r.I64()
	tr, trC := r.F64(), r.F64()
	dimPhi := int(r.U32())
	if err := r.Err(); err != nil {
		return err
	}
	// Check the sizes before allocating anything for the parameters.
	want, nvec := d, 2
	if p.Kernel.Features > 0 { // random features: cos and sin
		want = 2 * p.Kernel.Features
	}
	if p.Balance {
		nvec = 4
	}
	if dimPhi != want {
		return fmt.Errorf("%w: feature dimension %d, the parameters give %d", ErrFormat, dimPhi, want)
	}
	if p.Window.Events > 0 && !(n >= 0 && n <= int64(p.Window.Events)) {
		return fmt.Errorf("%w: %d examples in a window of %d", ErrFormat, n, p.Window.Events)
	}
	if size := 8*dimPhi*nvec + (&MAM{p: p, dim: d}).forgetSize(n); r.Len() != size {
		return fmt.Errorf("%w: %d bytes of state, want %d", ErrFormat, r.Len(), size)
	}
	nm, err := NewMAM(d, p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	for _, v := range nm.vectors() {
		r.F64s(v)
	}
	nm.n, nm.nPos, nm.nNeg, nm.tr, nm.trC = n, nPos, nNeg, tr, trC
	switch {
	case nm.ring != nil:
		nm.total = r.I64()
		for i := range nm.ringY[:n] {
			nm.ringY[i] = -1
			if r.Bool("window label") {
				nm.ringY[i] = 1
			}
		}
		r.F64s(nm.ring[:int(n)*d])
	case nm.decay:
		for _, x := range nm.decayState() {
			*x = r.F64()
		}
	}
	if err := r.End(); err != nil {
		return err
	}
	rebuild, err := nm.checkState()
	if err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	if rebuild {
		nm.relearnWindow()
	}
	nm.refresh()
	*m = *nm
	return nil
}

// relearnWindow replaces the sums, counts and trace by those of the
// window's examples learned again in order, oldest first (the window's
// slots and total are kept): the state of a window whose examples were
// learned with the current feature map.
func (m *MAM) relearnWindow() {
	size, n, d := int64(m.p.Window.Events), m.n, m.dim
	m.n, m.nPos, m.nNeg, m.tr, m.trC = 0, 0, 0, 0, 0
	for _, v := range m.vectors() {
		clear(v)
	}
	m.refresh()
	for k := range n {
		slot := int((m.total - n + k) % size)
		sq, _ := m.fm.Map(m.phi, m.ring[slot*d:(slot+1)*d]) // checked finite
		m.learn(m.phi, float64(m.ringY[slot]), sq)
	}
}

// checkState rejects decoded states that no sequence of updates produces.
// rebuild reports a window whose sums are those of its examples mapped with
// the map's frequencies before their rounding to float32 (see checkWindow):
// the caller learns the window again.
func (m *MAM) checkState() (rebuild bool, err error) {
	if m.n < 0 || m.nPos < 0 || m.nNeg < 0 || m.n != m.nPos+m.nNeg {
		return false, fmt.Errorf("inconsistent counts n=%d n+=%d n-=%d", m.n, m.nPos, m.nNeg)
	}
	const tol = 1e-9
	// Weights: every example weighs 1 without decay.
	W, Q, wp, wn := float64(m.n), float64(m.n), float64(m.nPos), float64(m.nNeg)
	switch {
	case m.ring != nil:
		if rebuild, err = m.checkWindow(); err != nil {
			return false, err
		}
	case m.decay:
		if err := m.checkDecay(); err != nil {
			return false, err
		}
		W, Q, wp, wn = m.Weights()
	}
	tr := m.tr + m.trC
	if !isFinite(m.tr) || !isFinite(m.trC) || !(tr >= -tol) || tr > Q*(1+tol)+tol {
		return false, fmt.Errorf("trace %v outside [0, n=%v]", tr, Q)
	}
	// ‖Σ w_i φ_i‖ ≤ Σ w_i since ‖φ‖ ≤ 1.
	check := func(name string, s, c []float64, count float64) error {
		var ss float64
		for i := range s {
			if !isFinite(s[i]) || !isFinite(c[i]) {
				return fmt.Errorf("non-finite %s", name)
			}
			v := s[i] + c[i]
			ss += v * v
		}
		if lim := count*(1+tol) + tol; math.Sqrt(ss) > lim {
			return fmt.Errorf("‖%s‖ = %v exceeds its count %v", name, math.Sqrt(ss), count)
		}
		return nil
	}
	if m.p.Balance {
		if err := check("S+", m.pos, m.posC, wp); err != nil {
			return false, err
		}
		return rebuild, check("S-", m.neg, m.negC, wn)
	}
	return rebuild, check("s", m.s, m.sC, W)
}

// checkWindow checks a decoded window: its size, its labels against the
// class counts, and the sums and trace against sums rebuilt from the
// stored inputs (O(n·cost of φ)).
//
// The sums agree to 1e-9·n when the window was learned with this map.
// Encodings written before the map's frequencies were stored in float32
// hold sums of the same examples mapped with the unrounded frequencies,
// which differ from this map's by at most 2⁻²⁴ of themselves: example i's
// φ by at most δ_i = min(2, 2⁻²⁴·argBound(x_i)) in norm. Sums within
// 1e-9·n + Σ δ_i are accepted with rebuild true (the window is learned
// again with this map, so that the sums stay those of the window's
// examples as they leave it).
func (m *MAM) checkWindow() (rebuild bool, err error) {
	const tol = 1e-9
	if m.total < 0 || m.n != min(m.total, int64(m.p.Window.Events)) {
		return false, fmt.Errorf("%d examples in the window after %d in all (window %d)", m.n, m.total, m.p.Window.Events)
	}
	var pos int64
	for _, y := range m.ringY[:m.n] {
		if y > 0 {
			pos++
		}
	}
	if pos != m.nPos {
		return false, fmt.Errorf("%d positive labels in the window, n+ = %d", pos, m.nPos)
	}
	p, d := m.fm.Dim(), m.dim
	sums := make([][]float64, 2)
	for i := range sums {
		sums[i] = make([]float64, p)
	}
	phi := make([]float64, p)
	var tr, moved float64
	for i := range int(m.n) {
		x := m.ring[i*d : (i+1)*d]
		sq, ok := m.fm.Map(phi, x)
		if !ok {
			return false, fmt.Errorf("non-finite input in window slot %d", i)
		}
		tr += sq
		moved += min(2, 0x1p-24*(1+1e-9)*m.fm.argBound(x))
		k, a := 0, float64(m.ringY[i])
		if m.p.Balance {
			k, a = int((1-a)/2), 1 // S₊ in sums[0], S₋ in sums[1]
		}
		for j, v := range phi {
			sums[k][j] += a * v
		}
	}
	strict := tol * max(1, float64(m.n))
	if t := m.tr + m.trC; !(math.Abs(t-tr) <= strict) {
		return false, fmt.Errorf("trace %v, the window's inputs give %v", t, tr)
	}
	vs := m.vectors()
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
			return false, fmt.Errorf("sum vector %d differs from the window's inputs by %v", k/2, diff)
		}
	}
	return rebuild, nil
}

// checkDecay checks decoded decay accumulators: finite, and
// 1 ≤ Q ≤ W ≤ min(n, 1/(1−λ)), W² ≤ n·Q, W₊ + W₋ = W, a class with no
// examples has no weight; all zero when n = 0.
func (m *MAM) checkDecay() error {
	const tol = 1e-9
	for _, x := range m.decayState() {
		if !isFinite(*x) {
			return fmt.Errorf("non-finite decay weight")
		}
	}
	W, Q, wp, wn := m.Weights()
	if m.n == 0 {
		if W != 0 || Q != 0 || wp != 0 || wn != 0 {
			return fmt.Errorf("decay weights W=%v Q=%v W+=%v W-=%v without examples", W, Q, wp, wn)
		}
		return nil
	}
	n := float64(m.n)
	lim := n
	if m.lam < 1 {
		lim = min(n, 1/(1-m.lam))
	}
	hi := 1 + tol
	if !(Q >= 1-tol && Q <= W*hi && W <= lim*hi && W*W <= n*Q*hi) {
		return fmt.Errorf("decay weights W=%v Q=%v impossible after %d examples", W, Q, m.n)
	}
	if !(wp >= 0 && wn >= 0 && math.Abs(wp+wn-W) <= tol*W) ||
		(m.nPos == 0 && wp != 0) || (m.nNeg == 0 && wn != 0) {
		return fmt.Errorf("class weights W+=%v W-=%v do not add up to W=%v (n+=%d, n-=%d)", wp, wn, W, m.nPos, m.nNeg)
	}
	return nil
}
