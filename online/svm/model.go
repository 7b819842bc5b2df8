package svm

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/internal/vmath"
)

// Model is a trained C-SVC: f(x) = Σ_{i ∈ SV} Coef_i K(SV_i, x) + B.
type Model struct {
	Kernel Kernel
	Dim    int // number of features

	SV      [][]float64 // support vectors (rows of X with α > 0), in training order
	SVIndex []int       // their row indices in the training data
	Coef    []float64   // α_i y_i of each support vector

	// SparseSV holds the support vectors of a model trained on sparse rows
	// (TrainSparse), in training order; SV is then nil.
	SparseSV []sparse.Row
	svSq     []float64     // ‖SparseSV_i‖²
	index    *sparse.Index // of SparseSV

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

	// packed holds SV and Coef again, packed for vmath's rbf sum, for a
	// dense rbf model made by Train or UnmarshalBinary: Decision's path.
	packed *vmath.Rows
	// w is Σ_i Coef_i·SV_i, the primal weights of a linear model made by
	// Train, TrainSparse (Dim ≤ maxSparsePrimal) or UnmarshalBinary:
	// Decision's path, O(Dim), and DecisionSparse's, O(entries).
	w []float64
}

// maxSparsePrimal is the largest Dim for which a sparse linear model keeps
// dense primal weights (8 MB).
const maxSparsePrimal = 1 << 20

// pack builds m.packed for a dense rbf model, m.w for a linear one.
func (m *Model) pack() {
	m.packed, m.w = nil, nil
	if m.Kernel.Type == Linear && m.SparseSV != nil && len(m.SparseSV) == len(m.Coef) && m.Dim <= maxSparsePrimal {
		// f(x) = Σ_i c_i <SV_i, x> + B = <w, x> + B, w summed in support
		// vector order (scores agree with the index's to rounding).
		m.w = make([]float64, m.Dim)
		for i, sv := range m.SparseSV {
			c := m.Coef[i]
			for k, j := range sv.Idx {
				m.w[j] += c * sv.Val[k]
			}
		}
		return
	}
	if m.SV == nil || len(m.SV) != len(m.Coef) {
		return
	}
	if m.Kernel.Type == Linear {
		// f(x) = Σ_i c_i <SV_i, x> + B = <w, x> + B: the same function,
		// summed in another order (scores agree to rounding, about 1e-16
		// relative of Σ_i |c_i <SV_i, x>|).
		m.w = make([]float64, m.Dim)
		for i, sv := range m.SV {
			c := m.Coef[i]
			for j, v := range sv {
				m.w[j] += c * v
			}
		}
		return
	}
	if m.Kernel.Type != RBF {
		return
	}
	flat := make([]float64, 0, len(m.SV)*m.Dim)
	for _, sv := range m.SV {
		flat = append(flat, sv...)
	}
	r := vmath.PackRows(flat, len(m.SV), m.Dim, m.Coef)
	m.packed = &r
}

// NSV returns the number of support vectors.
func (m *Model) NSV() int { return len(m.Coef) }

// Sparse reports whether the support vectors are sparse (TrainSparse).
func (m *Model) Sparse() bool { return m.SparseSV != nil }

// setSparse makes svs the model's support vectors, with their norms and
// inverted index.
func (m *Model) setSparse(svs []sparse.Row) {
	m.SparseSV, m.SV = svs, nil
	m.svSq = make([]float64, len(svs))
	for i, r := range svs {
		m.svSq[i] = sparse.Sq(r)
	}
	m.index = sparse.NewIndex(svs)
}

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
	if m.w != nil { // linear: the primal weights
		return dot(x, m.w) + m.B
	}
	if m.SparseSV != nil {
		k, sx := m.Kernel, dot(x, x)
		for i, sv := range m.SparseSV {
			s += m.Coef[i] * k.fromDot(sparse.DotDense(sv, x), m.svSq[i], sx)
		}
		return s + m.B
	}
	switch m.Kernel.Type {
	case RBF:
		if m.packed != nil && m.packed.Len() == len(m.Coef) {
			// Eight support vectors at a time (AVX-512F), e^v within 1 ulp:
			// about ten times the loop below.
			return m.packed.RBFSum(x, m.Kernel.Gamma) + m.B
		}
		g := -m.Kernel.Gamma
		for i, sv := range m.SV {
			s += m.Coef[i] * vmath.ExpNeg(g*sqDist(x, sv))
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

// DecisionSparse returns f(x) for a sparse x of dimension Dim (indices
// strictly increasing, not checked beyond the dimension). buf, when it
// has at least NSV() entries, is the scratch space of the dot products of
// a model with sparse support vectors: x is then scored through their
// inverted index in O(NSV + the entries x shares with them); with a
// shorter buf each dot product is a merge, O(NSV·nnz). A dense model
// gathers x's entries from each support vector, O(NSV·(nnz + Dim)). It
// does not allocate, and is safe for concurrent use with distinct bufs.
func (m *Model) DecisionSparse(x sparse.Row, buf []float64) float64 {
	for _, i := range x.Idx {
		if uint32(i) >= uint32(m.Dim) {
			panic(fmt.Sprintf("svm: DecisionSparse: index %d, model has %d features", i, m.Dim))
		}
	}
	if m.w != nil { // linear: the primal weights, O(entries)
		s := m.B
		for k, j := range x.Idx {
			s += x.Val[k] * m.w[j]
		}
		return s
	}
	k, sx := m.Kernel, sparse.Sq(x)
	var s float64
	switch n := len(m.Coef); {
	case m.SparseSV != nil && len(buf) >= n:
		buf = buf[:n]
		m.index.Dots(buf, x)
		if k.Type == RBF {
			// fromDot's distances, their exps eight at a time
			// (vmath.ExpNegScaled: ExpNeg's bits), then the sum in order:
			// the loop below's result, a quarter of its time.
			sq := m.svSq[:n]
			for i, d := range buf {
				buf[i] = max(sq[i]+sx-2*d, 0)
			}
			vmath.ExpNegScaled(buf, buf, -k.Gamma)
			for i, e := range buf {
				s += m.Coef[i] * e
			}
			break
		}
		for i, d := range buf {
			s += m.Coef[i] * k.fromDot(d, m.svSq[i], sx)
		}
	case m.SparseSV != nil:
		for i, sv := range m.SparseSV {
			s += m.Coef[i] * k.fromDot(sparse.Dot(x, sv), m.svSq[i], sx)
		}
	default:
		for i, sv := range m.SV {
			s += m.Coef[i] * k.fromDot(sparse.DotDense(x, sv), dot(sv, sv), sx)
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
// Version 2 is a model with sparse support vectors (TrainSparse): the same
// but for the rows, nSV × (index u32, coef f64, nnz u32, nnz × u32 indices
// (strictly increasing, < dim), nnz × f64 values (finite, nonzero)). A
// dense model is always written as version 1. The golden files
// testdata/format_v1*.bin and format_v2_sparse.bin pin them.
const (
	codecMagic   = "SVMM"
	codecVersion = 1
	codecSparse  = 2
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
	n := 64 + 8*len(m.Alpha) + len(m.SV)*(12+8*m.Dim)
	for _, r := range m.SparseSV {
		n += 16 + 12*r.Len()
	}
	return m.AppendBinary(make([]byte, 0, n))
}

// AppendBinary appends the encoding of m to dst.
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, codecMagic...)
	if m.SparseSV != nil {
		dst = codec.AppendU8(dst, codecSparse)
	} else {
		dst = codec.AppendU8(dst, codecVersion)
	}
	dst = codec.AppendU8(dst, uint8(m.Kernel.Type))
	dst = codec.AppendU32(dst, uint32(m.Kernel.Degree))
	dst = codec.AppendF64(dst, m.Kernel.Gamma)
	dst = codec.AppendF64(dst, m.Kernel.Coef0)
	dst = codec.AppendU32(dst, uint32(m.Dim))
	dst = codec.AppendU32(dst, uint32(len(m.Alpha)))
	dst = codec.AppendU32(dst, uint32(len(m.Coef)))
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
	for i, sv := range m.SparseSV {
		dst = codec.AppendU32(dst, uint32(m.SVIndex[i]))
		dst = codec.AppendF64(dst, m.Coef[i])
		dst = codec.AppendU32(dst, uint32(sv.Len()))
		for _, j := range sv.Idx {
			dst = codec.AppendU32(dst, uint32(j))
		}
		dst = codec.AppendF64s(dst, sv.Val)
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
	v := r.U8()
	if v != codecVersion && v != codecSparse {
		return fmt.Errorf("%w: format version %d (this build reads %d and %d)", ErrFormat, v, codecVersion, codecSparse)
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
	if v == codecSparse {
		if err := out.decodeSparse(r, n, nsv); err != nil {
			return err
		}
		out.pack()
		*m = out
		return nil
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
	out.pack()
	*m = out
	return nil
}

// decodeSparse reads the α and the sparse support vectors of version 2.
func (out *Model) decodeSparse(r *codec.Reader, n, nsv int) error {
	if out.Dim < 1 || nsv > n || uint64(r.Len()) < 8*uint64(n)+16*uint64(nsv) {
		return fmt.Errorf("%w: %d bytes for %d coefficients and %d support vectors", ErrFormat, r.Len(), n, nsv)
	}
	out.Alpha = make([]float64, n)
	r.F64s(out.Alpha)
	out.SVIndex = make([]int, nsv)
	out.Coef = make([]float64, nsv)
	svs := make([]sparse.Row, nsv)
	for k := range nsv {
		out.SVIndex[k] = int(r.U32())
		out.Coef[k] = r.F64()
		nnz := int(r.U32())
		if r.Err() != nil || nnz > out.Dim || !r.Need(12*nnz) {
			return fmt.Errorf("%w: support vector %d of %d entries: %w", ErrFormat, k, nnz, r.Err())
		}
		row := sparse.Row{Idx: make([]int32, nnz), Val: make([]float64, nnz)}
		for j := range row.Idx {
			row.Idx[j] = int32(r.U32())
		}
		r.F64s(row.Val)
		if err := sparse.Check(row, out.Dim); err != nil {
			return fmt.Errorf("%w: support vector %d: %w", ErrFormat, k, err)
		}
		svs[k] = row
	}
	if err := r.End(); err != nil {
		return err
	}
	out.setSparse(svs)
	return nil
}
