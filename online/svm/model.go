package svm

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/streamer/streamer/online/codec"
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

// Binary encoding, version 1 (package online/codec's conventions: little-endian, float64 as
// IEEE-754 bits):
//
//	"SVMM" | version u8 | kernel type u8 | degree i32 | gamma, coef0 f64 | dim u32 | n u32 (len Alpha)
//	| nSV u32 | B, Obj, w2 f64 | nBSV, iter u32 | converged u8 | Alpha n×f64
//	| nSV × (index u32, coef f64, dim×f64) | CRC-32 (IEEE) of everything before, u32
//
// The golden files testdata/format_v1*.bin pin it.
const (
	codecMagic   = "SVMM"
	codecVersion = 1
)

// ErrFormat is wrapped by every error of UnmarshalBinary: data that is not a valid encoded
// Model (truncated, corrupt, or of another format version).
var ErrFormat = errors.New("svm: bad model encoding")

// ErrCorrupt is ErrFormat under its former name.
//
// Deprecated: use ErrFormat.
var ErrCorrupt = ErrFormat

// MarshalBinary implements encoding.BinaryMarshaler.
func (m *Model) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 64+8*len(m.Alpha)+len(m.SV)*(12+8*m.Dim)))
}

// AppendBinary appends the encoding of m to dst.
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, codecMagic...)
	dst = codec.AppendU8(dst, codecVersion)
	dst = codec.AppendU8(dst, uint8(m.Kernel.Type))
	dst = codec.AppendU32(dst, uint32(m.Kernel.Degree))
	dst = codec.AppendF64(dst, m.Kernel.Gamma)
	dst = codec.AppendF64(dst, m.Kernel.Coef0)
	dst = codec.AppendU32(dst, uint32(m.Dim))
	dst = codec.AppendU32(dst, uint32(len(m.Alpha)))
	dst = codec.AppendU32(dst, uint32(len(m.SV)))
	dst = codec.AppendF64(dst, m.B)
	dst = codec.AppendF64(dst, m.Obj)
	dst = codec.AppendF64(dst, m.w2)
	dst = codec.AppendU32(dst, uint32(m.NBSV))
	dst = codec.AppendU32(dst, uint32(m.Iter))
	dst = codec.AppendBool(dst, m.Converged)
	dst = codec.AppendF64s(dst, m.Alpha)
	for i, sv := range m.SV {
		dst = codec.AppendU32(dst, uint32(m.SVIndex[i]))
		dst = codec.AppendF64(dst, m.Coef[i])
		dst = codec.AppendF64s(dst, sv)
	}
	return codec.AppendU32(dst, crc32.ChecksumIEEE(dst[start:])), nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler. Errors wrap ErrFormat; on error m
// is unchanged.
func (m *Model) UnmarshalBinary(b []byte) error {
	if len(b) < len(codecMagic)+2+4 || string(b[:len(codecMagic)]) != codecMagic {
		return fmt.Errorf("%w: no %s header", ErrFormat, codecMagic)
	}
	body := b[:len(b)-4]
	if sum := codec.NewReader(b[len(body):], ErrFormat).U32(); crc32.ChecksumIEEE(body) != sum {
		return fmt.Errorf("%w: checksum mismatch", ErrFormat)
	}
	r := codec.NewReader(body[len(codecMagic):], ErrFormat)
	if v := r.U8(); v != codecVersion {
		return fmt.Errorf("%w: format version %d (this build reads %d)", ErrFormat, v, codecVersion)
	}
	var out Model
	out.Kernel.Type = KernelType(r.U8())
	out.Kernel.Degree = int(int32(r.U32()))
	out.Kernel.Gamma = r.F64()
	out.Kernel.Coef0 = r.F64()
	out.Dim = int(r.U32())
	n := int(r.U32())
	nsv := int(r.U32())
	out.B, out.Obj, out.w2 = r.F64(), r.F64(), r.F64()
	out.NBSV, out.Iter = int(r.U32()), int(r.U32())
	out.Converged = r.Bool("converged")
	if err := r.Err(); err != nil {
		return err
	}
	if err := out.Kernel.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	// The rest must be exactly n α and nSV rows (checked by division: no
	// product of decoded counts can overflow and pass).
	rest := uint64(r.Len()) - 8*uint64(n)
	if nsv > n || uint64(r.Len()) < 8*uint64(n) ||
		(nsv == 0 && rest != 0) || (nsv > 0 && (rest%uint64(nsv) != 0 || rest/uint64(nsv) != 12+8*uint64(out.Dim))) {
		return fmt.Errorf("%w: %d bytes for %d coefficients and %d support vectors of dimension %d",
			ErrFormat, r.Len(), n, nsv, out.Dim)
	}
	out.Alpha = make([]float64, n)
	r.F64s(out.Alpha)
	flat := make([]float64, nsv*out.Dim)
	out.SV = make([][]float64, nsv)
	out.SVIndex = make([]int, nsv)
	out.Coef = make([]float64, nsv)
	for k := range nsv {
		out.SVIndex[k] = int(r.U32())
		out.Coef[k] = r.F64()
		row := flat[k*out.Dim : (k+1)*out.Dim : (k+1)*out.Dim]
		r.F64s(row)
		out.SV[k] = row
	}
	if err := r.End(); err != nil {
		return err
	}
	*m = out
	return nil
}
