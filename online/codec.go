package online

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Serialised model format, version 1. All integers and float64 values
// (math.Float64bits) are little-endian; a "str" is a uint8 length followed
// by that many bytes.
//
//	header  magic "OLNM" (4 bytes), format version uint16 (= 1), model type str ("mam")
//	spec    dim uint32, kernel type str, gamma float64, features uint32,
//	        seed uint64, balance uint8 (0/1), delta float64,
//	        degree uint32, coef0 float64, budget uint32, window uint32,
//	        half-life float64, standardize uint8, levels uint32,
//	        edge count uint32 + edges float64…, normalize uint8,
//	        learning rate float64, l2 float64
//	        (every model type starts its encoding with header and spec)
//	state   n, n₊, n₋ int64; tr Ω float64 and its compensation float64;
//	        p = dim φ uint32; then p-float64 vectors:
//	        plain:    s, comp(s)
//	        balanced: S₊, comp(S₊), S₋, comp(S₋)
//	forgetting (mam only, after the vectors; nothing without forgetting):
//	        window:    total int64 (labelled examples learned in all), then
//	                   for the window's slots 0..n−1 (n = min(total, window);
//	                   the next example goes to slot total mod window) their
//	                   labels, uint8 each (0 = −1, 1 = +1), then their
//	                   inputs, d float64 each
//	        half-life: W = Σ w_i, Q = Σ w_i², W₊, W₋, each float64 followed
//	                   by its compensation (tr Ω then holds Σ w_i²‖φ(x_i)‖²,
//	                   the vectors the weighted sums)
//
// Derived values (w, b, normaliser, M̂, R̂) and the random frequencies are
// not stored: they are rebuilt from the spec (seed) and the sums with the
// same code as after an update, so a restored model is bit-identical.
const (
	formatMagic   = "OLNM"
	formatVersion = 1
)

// AppendBinary appends the MarshalBinary encoding of m to dst
// (encoding.BinaryAppender).
func (m *MAM) AppendBinary(dst []byte) ([]byte, error) {
	le := binary.LittleEndian
	dst = append(dst, formatMagic...)
	dst = le.AppendUint16(dst, formatVersion)
	dst = appendStr(dst, ModelMAM)
	dst = appendSpec(dst, m.spec)
	dst = le.AppendUint64(dst, uint64(m.n))
	dst = le.AppendUint64(dst, uint64(m.nPos))
	dst = le.AppendUint64(dst, uint64(m.nNeg))
	dst = appendF64(dst, m.tr)
	dst = appendF64(dst, m.trC)
	dst = le.AppendUint32(dst, uint32(m.fm.Dim()))
	for _, v := range m.vectors() {
		for _, x := range v {
			dst = appendF64(dst, x)
		}
	}
	switch {
	case m.ring != nil:
		dst = le.AppendUint64(dst, uint64(m.total))
		for _, y := range m.ringY[:m.n] {
			dst = append(dst, boolByte(y > 0))
		}
		for _, x := range m.ring[:int(m.n)*m.spec.Dim] {
			dst = appendF64(dst, x)
		}
	case m.decay:
		for _, x := range m.decayState() {
			dst = appendF64(dst, *x)
		}
	}
	return dst, nil
}

// MarshalBinary encodes the complete state of m (see the format above).
func (m *MAM) MarshalBinary() ([]byte, error) {
	size := 200 + len(m.spec.Kernel.Type) + 8*len(m.spec.Edges) + 8*m.fm.Dim()*len(m.vectors()) + m.forgetSize(m.n)
	return m.AppendBinary(make([]byte, 0, size))
}

// forgetSize is the size of the forgetting state of m's spec with n
// examples in the window (n must be in [0, Window]).
func (m *MAM) forgetSize(n int64) int {
	switch {
	case m.spec.Window > 0:
		return 8 + int(n)*(1+8*m.spec.Dim)
	case m.spec.HalfLife > 0:
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
	if m.spec.Balance {
		return [][]float64{m.pos, m.posC, m.neg, m.negC}
	}
	return [][]float64{m.s, m.sC}
}

// UnmarshalBinary replaces m's spec and state with the encoded ones. On
// error (wrapping ErrFormat) m is unchanged.
func (m *MAM) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	typ := r.header()
	if r.err == nil && typ != ModelMAM {
		return fmt.Errorf("%w: model type %q, want %q", ErrFormat, typ, ModelMAM)
	}
	spec := r.spec(typ)
	n, nPos, nNeg := int64(r.u64()), int64(r.u64()), int64(r.u64())
	tr, trC := r.f64(), r.f64()
	p := int(r.u32())
	if r.err != nil {
		return r.err
	}
	if err := spec.Validate(); err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			return fmt.Errorf("%w: spec: %s: %s", ErrFormat, se.Field, se.Problem)
		}
		return fmt.Errorf("%w: spec: %w", ErrFormat, err)
	}
	if err := validateForgetting(spec); err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			return fmt.Errorf("%w: spec: %s: %s", ErrFormat, se.Field, se.Problem)
		}
		return fmt.Errorf("%w: spec: %w", ErrFormat, err)
	}
	// Check the sizes before allocating anything for the spec.
	want, nvec := spec.Dim, 2
	if spec.Kernel.Features > 0 { // random features: cos and sin
		want = 2 * spec.Kernel.Features
	}
	if spec.Balance {
		nvec = 4
	}
	if p != want {
		return fmt.Errorf("%w: feature dimension %d, spec gives %d", ErrFormat, p, want)
	}
	if spec.Window > 0 && !(n >= 0 && n <= int64(spec.Window)) {
		return fmt.Errorf("%w: %d examples in a window of %d", ErrFormat, n, spec.Window)
	}
	switch size := 8*p*nvec + (&MAM{spec: spec}).forgetSize(n); {
	case len(r.b) < size:
		return fmt.Errorf("%w: truncated", ErrFormat)
	case len(r.b) > size:
		return fmt.Errorf("%w: %d trailing bytes", ErrFormat, len(r.b)-size)
	}
	nm, err := NewMAM(spec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	for _, v := range nm.vectors() {
		for i := range v {
			v[i] = r.f64()
		}
	}
	nm.n, nm.nPos, nm.nNeg, nm.tr, nm.trC = n, nPos, nNeg, tr, trC
	switch {
	case nm.ring != nil:
		nm.total = int64(r.u64())
		for i := range nm.ringY[:n] {
			switch v := r.u8(); v {
			case 0:
				nm.ringY[i] = -1
			case 1:
				nm.ringY[i] = 1
			default:
				return fmt.Errorf("%w: window label byte %d", ErrFormat, v)
			}
		}
		for i := range nm.ring[:int(n)*spec.Dim] {
			nm.ring[i] = r.f64()
		}
	case nm.decay:
		for _, x := range nm.decayState() {
			*x = r.f64()
		}
	}
	if r.err != nil {
		return r.err
	}
	if err := nm.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	nm.refresh()
	*m = *nm
	return nil
}

// checkState rejects decoded states that no sequence of updates produces.
func (m *MAM) checkState() error {
	if m.n < 0 || m.nPos < 0 || m.nNeg < 0 || m.n != m.nPos+m.nNeg {
		return fmt.Errorf("inconsistent counts n=%d n+=%d n-=%d", m.n, m.nPos, m.nNeg)
	}
	const tol = 1e-9
	// Weights: every example weighs 1 without decay.
	W, Q, wp, wn := float64(m.n), float64(m.n), float64(m.nPos), float64(m.nNeg)
	switch {
	case m.ring != nil:
		if err := m.checkWindow(); err != nil {
			return err
		}
	case m.decay:
		if err := m.checkDecay(); err != nil {
			return err
		}
		W, Q, wp, wn = m.Weights()
	}
	tr := m.tr + m.trC
	if !isFinite(m.tr) || !isFinite(m.trC) || !(tr >= -tol) || tr > Q*(1+tol)+tol {
		return fmt.Errorf("trace %v outside [0, n=%v]", tr, Q)
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
	if m.spec.Balance {
		if err := check("S+", m.pos, m.posC, wp); err != nil {
			return err
		}
		return check("S-", m.neg, m.negC, wn)
	}
	return check("s", m.s, m.sC, W)
}

// checkWindow checks a decoded window: its size, its labels against the
// class counts, and the sums and trace against sums rebuilt from the
// stored inputs (O(n·cost of φ)).
func (m *MAM) checkWindow() error {
	const tol = 1e-9
	if m.total < 0 || m.n != min(m.total, int64(m.spec.Window)) {
		return fmt.Errorf("%d examples in the window after %d in all (window %d)", m.n, m.total, m.spec.Window)
	}
	var pos int64
	for _, y := range m.ringY[:m.n] {
		if y > 0 {
			pos++
		}
	}
	if pos != m.nPos {
		return fmt.Errorf("%d positive labels in the window, n+ = %d", pos, m.nPos)
	}
	p, d := m.fm.Dim(), m.spec.Dim
	sums := make([][]float64, 2)
	for i := range sums {
		sums[i] = make([]float64, p)
	}
	phi := make([]float64, p)
	var tr float64
	for i := range int(m.n) {
		sq, ok := m.fm.Map(phi, m.ring[i*d:(i+1)*d])
		if !ok {
			return fmt.Errorf("non-finite input in window slot %d", i)
		}
		tr += sq
		k, a := 0, float64(m.ringY[i])
		if m.spec.Balance {
			k, a = int((1-a)/2), 1 // S₊ in sums[0], S₋ in sums[1]
		}
		for j, v := range phi {
			sums[k][j] += a * v
		}
	}
	if t := m.tr + m.trC; !(math.Abs(t-tr) <= tol*max(1, float64(m.n))) {
		return fmt.Errorf("trace %v, the window's inputs give %v", t, tr)
	}
	vs := m.vectors()
	for k := 0; k < len(vs); k += 2 {
		var diff float64
		for j := range vs[k] {
			e := vs[k][j] + vs[k+1][j] - sums[k/2][j]
			diff += e * e
		}
		if !(math.Sqrt(diff) <= tol*max(1, float64(m.n))) {
			return fmt.Errorf("sum vector %d differs from the window's inputs by %v", k/2, math.Sqrt(diff))
		}
	}
	return nil
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

// peekType returns the model type of an encoded model.
func peekType(b []byte) (string, error) {
	r := reader{b: b}
	typ := r.header()
	return typ, r.err
}

func appendStr(dst []byte, s string) []byte {
	return append(append(dst, uint8(len(s))), s...)
}

func appendF64(dst []byte, x float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(x))
}

func appendSpec(dst []byte, s Spec) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(s.Dim))
	dst = appendStr(dst, s.Kernel.Type)
	dst = appendF64(dst, s.Kernel.Gamma)
	dst = le.AppendUint32(dst, uint32(s.Kernel.Features))
	dst = le.AppendUint64(dst, s.Kernel.Seed)
	var bal uint8
	if s.Balance {
		bal = 1
	}
	dst = append(dst, bal)
	dst = appendF64(dst, s.Delta)
	// Fields added for the model family (same format version: nothing was
	// released with the shorter spec).
	dst = le.AppendUint32(dst, uint32(s.Kernel.Degree))
	dst = appendF64(dst, s.Kernel.Coef0)
	dst = le.AppendUint32(dst, uint32(s.Budget))
	dst = le.AppendUint32(dst, uint32(s.Window))
	dst = appendF64(dst, s.HalfLife)
	dst = append(dst, boolByte(s.Standardize))
	dst = le.AppendUint32(dst, uint32(s.Levels))
	dst = le.AppendUint32(dst, uint32(len(s.Edges)))
	for _, e := range s.Edges {
		dst = appendF64(dst, e)
	}
	dst = append(dst, boolByte(s.Normalize))
	dst = appendF64(dst, s.LearningRate)
	return appendF64(dst, s.L2)
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (r *reader) boolean(what string) bool {
	switch v := r.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: %s flag %d", ErrFormat, what, v)
		}
		return false
	}
}

// reader decodes little-endian fields with a sticky error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: truncated", ErrFormat)
		r.b = nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (r *reader) f64() float64 { return math.Float64frombits(r.u64()) }

func (r *reader) str() string { return string(r.take(int(r.u8()))) }

// header reads magic, version and model type.
func (r *reader) header() string {
	if magic := r.take(len(formatMagic)); r.err == nil && string(magic) != formatMagic {
		r.err = fmt.Errorf("%w: bad magic %q", ErrFormat, magic)
	}
	if v := r.u16(); r.err == nil && v != formatVersion {
		r.err = fmt.Errorf("%w: format version %d, want %d", ErrFormat, v, formatVersion)
	}
	return r.str()
}

func (r *reader) spec(typ string) Spec {
	s := Spec{Type: typ}
	s.Dim = int(r.u32())
	s.Kernel.Type = r.str()
	s.Kernel.Gamma = r.f64()
	s.Kernel.Features = int(r.u32())
	s.Kernel.Seed = r.u64()
	switch bal := r.u8(); bal {
	case 0:
	case 1:
		s.Balance = true
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: balance flag %d", ErrFormat, bal)
		}
	}
	s.Delta = r.f64()
	s.Kernel.Degree = int(r.u32())
	s.Kernel.Coef0 = r.f64()
	s.Budget = int(r.u32())
	s.Window = int(r.u32())
	s.HalfLife = r.f64()
	s.Standardize = r.boolean("standardize")
	s.Levels = int(r.u32())
	if ne := int(r.u32()); ne > 0 {
		if ne > 1<<16 {
			if r.err == nil {
				r.err = fmt.Errorf("%w: %d edges", ErrFormat, ne)
			}
			return s
		}
		s.Edges = make([]float64, ne)
		for i := range s.Edges {
			s.Edges[i] = r.f64()
		}
	}
	s.Normalize = r.boolean("normalize")
	s.LearningRate = r.f64()
	s.L2 = r.f64()
	return s
}
