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
	return dst, nil
}

// MarshalBinary encodes the complete state of m (see the format above).
func (m *MAM) MarshalBinary() ([]byte, error) {
	size := 64 + len(m.spec.Kernel.Type) + 8*m.fm.Dim()*len(m.vectors())
	return m.AppendBinary(make([]byte, 0, size))
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
	// Check the sizes before allocating anything for the spec.
	want, nvec := spec.Dim, 2
	if spec.Kernel.Type == KernelRBF {
		want = 2 * spec.Kernel.Features
	}
	if spec.Balance {
		nvec = 4
	}
	if p != want {
		return fmt.Errorf("%w: feature dimension %d, spec gives %d", ErrFormat, p, want)
	}
	switch size := 8 * p * nvec; {
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
	tr := m.tr + m.trC
	if !isFinite(m.tr) || !isFinite(m.trC) || !(tr >= -tol) || tr > float64(m.n)*(1+tol)+tol {
		return fmt.Errorf("trace %v outside [0, n=%d]", tr, m.n)
	}
	// ‖Σ φ‖ ≤ count since ‖φ‖ ≤ 1.
	check := func(name string, s, c []float64, count int64) error {
		var ss float64
		for i := range s {
			if !isFinite(s[i]) || !isFinite(c[i]) {
				return fmt.Errorf("non-finite %s", name)
			}
			v := s[i] + c[i]
			ss += v * v
		}
		if lim := float64(count)*(1+tol) + tol; math.Sqrt(ss) > lim {
			return fmt.Errorf("‖%s‖ = %v exceeds its count %d", name, math.Sqrt(ss), count)
		}
		return nil
	}
	if m.spec.Balance {
		if err := check("S+", m.pos, m.posC, m.nPos); err != nil {
			return err
		}
		return check("S-", m.neg, m.negC, m.nNeg)
	}
	return check("s", m.s, m.sC, m.n)
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
