package svm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Model is a trained C-SVC: f(x) = Σ_{i ∈ SV} Coef_i K(SV_i, x) + B.
type Model struct {
	Kernel Kernel
	Dim    int // number of features

	SV      [][]float64 // support vectors (rows of X with α > 0), in training order
	SVIndex []int       // their row indices in the training data
	Coef    []float64   // α_i y_i of each support vector

	// Alpha is the full dual solution, one per training row (0 for non-support vectors); it
	// is what a warm start takes.
	Alpha []float64
	B     float64 // offset; LIBSVM's rho = −B
	// Obj is the minimised dual objective ½αᵀQα − Σα, the number svm-train prints as obj.
	Obj       float64
	NBSV      int  // support vectors at their upper bound α_i = C_i
	Iter      int  // SMO iterations
	Converged bool // false when MaxIter stopped the solver before eps was reached

	w2 float64
}

// NSV returns the number of support vectors.
func (m *Model) NSV() int { return len(m.SV) }

// Rho returns LIBSVM's rho = −B.
func (m *Model) Rho() float64 { return -m.B }

// W2 returns Σ_ij α_i α_j y_i y_j K_ij = ‖w‖², the squared RKHS norm of f − B (W² of
// Corollary 1). It is computed by the solver from its gradient, to the precision of the
// float32 kernel cache.
func (m *Model) W2() float64 { return m.w2 }

// Decision returns f(x). It does not allocate. x must have Dim entries.
func (m *Model) Decision(x []float64) float64 {
	if len(x) != m.Dim {
		panic(fmt.Sprintf("svm: Decision got %d features, model has %d", len(x), m.Dim))
	}
	var s float64
	switch m.Kernel.Type {
	case RBF:
		g := -m.Kernel.Gamma
		for i, sv := range m.SV {
			s += m.Coef[i] * expNeg(g*sqDist(x, sv))
		}
	case Linear:
		for i, sv := range m.SV {
			s += m.Coef[i] * dot(x, sv)
		}
	default:
		k := m.Kernel
		for i, sv := range m.SV {
			s += m.Coef[i] * k.Eval(x, sv)
		}
	}
	return s + m.B
}

// Predict returns sign f(x) as ±1 (+1 when f(x) > 0, as svm-predict).
func (m *Model) Predict(x []float64) float64 {
	if m.Decision(x) > 0 {
		return 1
	}
	return -1
}

// Binary encoding, version 1 (little endian):
//
//	"SVMM" | version u8 | kernel type u8 | degree i32 | gamma, coef0 f64 | dim u32 | n u32 (len Alpha)
//	| nSV u32 | B, Obj, w2 f64 | nBSV, iter u32 | converged u8 | Alpha n×f64
//	| nSV × (index u32, coef f64, dim×f64) | CRC-32 (IEEE) of everything before, u32
const (
	codecMagic   = "SVMM"
	codecVersion = 1
)

// ErrCorrupt is returned by UnmarshalBinary for data that is not a valid encoded Model.
var ErrCorrupt = errors.New("svm: corrupt model encoding")

// MarshalBinary implements encoding.BinaryMarshaler.
func (m *Model) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(nil)
}

// AppendBinary appends the encoding of m to dst.
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	le := binary.LittleEndian
	f64 := func(v float64) { dst = le.AppendUint64(dst, math.Float64bits(v)) }
	u32 := func(v int) { dst = le.AppendUint32(dst, uint32(v)) }
	dst = append(dst, codecMagic...)
	dst = append(dst, codecVersion, byte(m.Kernel.Type))
	u32(m.Kernel.Degree)
	f64(m.Kernel.Gamma)
	f64(m.Kernel.Coef0)
	u32(m.Dim)
	u32(len(m.Alpha))
	u32(len(m.SV))
	f64(m.B)
	f64(m.Obj)
	f64(m.w2)
	u32(m.NBSV)
	u32(m.Iter)
	if m.Converged {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	for _, a := range m.Alpha {
		f64(a)
	}
	for i, sv := range m.SV {
		u32(m.SVIndex[i])
		f64(m.Coef[i])
		for _, v := range sv {
			f64(v)
		}
	}
	dst = le.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
	return dst, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *Model) UnmarshalBinary(b []byte) error {
	le := binary.LittleEndian
	if len(b) < len(codecMagic)+2+4 || string(b[:4]) != codecMagic {
		return ErrCorrupt
	}
	body, sum := b[:len(b)-4], le.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if v := body[4]; v != codecVersion {
		return fmt.Errorf("svm: model encoding version %d not supported", v)
	}
	p := body[5:]
	bad := false
	need := func(n int) []byte {
		if bad || len(p) < n {
			bad = true
			return make([]byte, n)
		}
		r := p[:n]
		p = p[n:]
		return r
	}
	f64 := func() float64 { return math.Float64frombits(le.Uint64(need(8))) }
	u32 := func() int { return int(le.Uint32(need(4))) }
	var out Model
	out.Kernel.Type = KernelType(need(1)[0])
	out.Kernel.Degree = int(int32(le.Uint32(need(4))))
	out.Kernel.Gamma = f64()
	out.Kernel.Coef0 = f64()
	out.Dim = u32()
	n := u32()
	nsv := u32()
	out.B, out.Obj, out.w2 = f64(), f64(), f64()
	out.NBSV, out.Iter = u32(), u32()
	out.Converged = need(1)[0] == 1
	if bad || out.Kernel.validate() != nil || nsv > n ||
		uint64(len(p)) != 8*uint64(n)+uint64(nsv)*(12+8*uint64(out.Dim)) {
		return ErrCorrupt
	}
	out.Alpha = make([]float64, n)
	for i := range out.Alpha {
		out.Alpha[i] = f64()
	}
	flat := make([]float64, nsv*out.Dim)
	out.SV = make([][]float64, nsv)
	out.SVIndex = make([]int, nsv)
	out.Coef = make([]float64, nsv)
	for k := 0; k < nsv; k++ {
		out.SVIndex[k] = u32()
		out.Coef[k] = f64()
		row := flat[k*out.Dim : (k+1)*out.Dim : (k+1)*out.Dim]
		for j := range row {
			row[j] = f64()
		}
		out.SV[k] = row
	}
	*m = out
	return nil
}
