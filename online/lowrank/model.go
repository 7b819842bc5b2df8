package lowrank

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/streamer/streamer/online/codec"
)

// Model is a trained low-rank classifier: f(X) = <U Vᵀ, X>_F + B.
type Model struct {
	Rows, Cols, Rank int
	U                []float64 // Rows×Rank, row-major
	V                []float64 // Cols×Rank, row-major
	B                float64   // offset
	// Obj is the objective J = ½‖UVᵀ‖²_F + Σ C_i hinge_i at the end (≥ 0).
	Obj       float64
	Iter      int  // iterations (each a U-step and a V-step)
	Converged bool // J settled within Tol before MaxIter
	NSV       int  // support vectors of the last block step

	// Not encoded: what the fit went through, and its duals.
	SMOIter        int       // SMO iterations of all block steps
	Capped         int       // block steps stopped by Params.SMOMaxIter
	History        []float64 // J after each iteration
	AlphaU, AlphaV []float64 // the last U-step's and V-step's α, for warm starts

	w []float64 // U Vᵀ, Rows×Cols row-major: what Decision uses
}

// derive computes what Decision uses from U and V.
func (m *Model) derive() { m.w = product(m.U, m.V, m.Rows, m.Cols, m.Rank) }

// Dim is the number of entries of an example, Rows·Cols.
func (m *Model) Dim() int { return m.Rows * m.Cols }

// Weights returns U Vᵀ (Rows×Cols, row-major). The slice is the model's:
// do not modify it.
func (m *Model) Weights() []float64 { return m.w }

// Norm returns ‖U Vᵀ‖_F.
func (m *Model) Norm() float64 {
	var s float64
	for _, v := range m.w {
		s += v * v
	}
	return math.Sqrt(s)
}

// Decision returns f(x) for x of Rows·Cols entries (row-major). It does
// not allocate.
func (m *Model) Decision(x []float64) float64 {
	if len(x) != len(m.w) {
		panic(fmt.Sprintf("lowrank: Decision got %d entries, model is %d×%d", len(x), m.Rows, m.Cols))
	}
	w := m.w[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += w[i] * x[i]
		s1 += w[i+1] * x[i+1]
		s2 += w[i+2] * x[i+2]
		s3 += w[i+3] * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += w[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3) + m.B
}

// Binary encoding, version 1 (package online/codec's conventions:
// little-endian, float64 as IEEE-754 bits):
//
//	"LRKM" | version u8 | rows, cols, rank u32 | B, Obj f64 | iter, nSV u32 |
//	converged u8 | U rows·rank f64 | V cols·rank f64 | CRC-32 (IEEE) of
//	everything before, u32
//
// U Vᵀ is recomputed on decoding with the code that computed it after the
// fit, so a restored model scores bit-identically.
const (
	codecMagic   = "LRKM"
	codecVersion = 1
)

// ErrFormat is wrapped by every error of UnmarshalBinary.
var ErrFormat = errors.New("lowrank: bad model encoding")

// MarshalBinary implements encoding.BinaryMarshaler.
func (m *Model) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 64+8*(len(m.U)+len(m.V))))
}

// AppendBinary appends the encoding of m to dst.
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, codecMagic...)
	dst = codec.AppendU8(dst, codecVersion)
	dst = codec.AppendU32(dst, uint32(m.Rows))
	dst = codec.AppendU32(dst, uint32(m.Cols))
	dst = codec.AppendU32(dst, uint32(m.Rank))
	dst = codec.AppendF64(dst, m.B)
	dst = codec.AppendF64(dst, m.Obj)
	dst = codec.AppendU32(dst, uint32(m.Iter))
	dst = codec.AppendU32(dst, uint32(m.NSV))
	dst = codec.AppendBool(dst, m.Converged)
	dst = codec.AppendF64s(dst, m.U)
	dst = codec.AppendF64s(dst, m.V)
	return codec.AppendU32(dst, crc32.ChecksumIEEE(dst[start:])), nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler. Errors wrap
// ErrFormat; on error m is unchanged.
func (m *Model) UnmarshalBinary(b []byte) error {
	if len(b) < len(codecMagic)+1+4 || string(b[:len(codecMagic)]) != codecMagic {
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
	out.Rows, out.Cols, out.Rank = int(r.U32()), int(r.U32()), int(r.U32())
	out.B, out.Obj = r.F64(), r.F64()
	out.Iter, out.NSV = int(r.U32()), int(r.U32())
	out.Converged = r.Bool("converged")
	if err := r.Err(); err != nil {
		return err
	}
	if out.Rows < 1 || out.Cols < 1 || out.Rows > MaxDim/out.Cols || out.Rank < 1 || out.Rank > min(out.Rows, out.Cols) {
		return fmt.Errorf("%w: shape %d×%d, rank %d", ErrFormat, out.Rows, out.Cols, out.Rank)
	}
	if !finite(out.B) || !finite(out.Obj) {
		return fmt.Errorf("%w: offset %v, objective %v", ErrFormat, out.B, out.Obj)
	}
	// d1·d2 ≤ 2²⁰ and rank ≤ a side: the products cannot overflow.
	if want := 8 * (out.Rows + out.Cols) * out.Rank; r.Len() != want {
		return fmt.Errorf("%w: %d bytes for the factors of a %d×%d rank-%d model, want %d", ErrFormat, r.Len(), out.Rows, out.Cols, out.Rank, want)
	}
	out.U = make([]float64, out.Rows*out.Rank)
	out.V = make([]float64, out.Cols*out.Rank)
	r.F64s(out.U)
	r.F64s(out.V)
	if err := r.End(); err != nil {
		return err
	}
	for _, f := range [][]float64{out.U, out.V} {
		for _, v := range f {
			if !finite(v) {
				return fmt.Errorf("%w: non-finite factor entry %v", ErrFormat, v)
			}
		}
	}
	out.derive()
	*m = out
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
