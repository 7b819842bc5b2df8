package rank

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online/codec"
)

// Encodings (package online/codec's conventions: little-endian; float64 as
// IEEE-754 bits). Each starts with a 4-byte magic and a u16 format version
// (1); decoders reject other versions and trailing bytes.
//
//	Model (exact):   "RKEX" u16 1 | method u8 | kernels | lambda f64 | d u32 | m u32 |
//	                 b f64 | α: m × f64 | x: m·d × f64
//	                 (with sparse rows "RKSP": see sparse.go)
//	FeatureModel:    "RKRF" u16 1 | kernels | features u32 | seed u64 | d u32 |
//	                 lambda f64 | n i64 | b f64 | dim u32 | w: dim × f64
//	Sums:            "RKSU" u16 1 | kernels | features u32 | seed u64 | d u32 | dim u32 |
//	                 n i64 | Σy f64 | its compensation f64 | pending adds u32 |
//	                 pending removes u32 | Φᵀ1, its compensation, Φᵀy, its
//	                 compensation: 4 × dim × f64 | ΦᵀΦ upper triangle by rows:
//	                 dim(dim+1)/2 × f64 | pending rows (adds, then removes) × dim × f64
//	kernels:         count u8 | count × (type u8 | gamma f64 | v f64)
//
// A FeatureModel stores the seed, not the frequencies: decoding redraws
// them (the PCG stream is fixed), so an encoding stays small. Sums are
// stored exactly — compensation terms and the mapped rows of events not
// yet folded into ΦᵀΦ included — so decoded sums continue bit for bit as
// the encoded ones would have. The golden files testdata/format_v1_*.bin
// pin these formats.
const (
	magicExact   = "RKEX"
	magicFeature = "RKRF"
	magicSums    = "RKSU"
	encVersion   = 1
	maxRows      = 1 << 26
	kernelSize   = 1 + 8 + 8 // encoded size of one kernel
)

// ErrFormat is wrapped by every decoding error.
var ErrFormat = errors.New("rank: bad model encoding")

func appendHeader(dst []byte, magic string) []byte {
	return codec.AppendU16(append(dst, magic...), encVersion)
}

func appendKernels(dst []byte, ks []Kernel) []byte {
	dst = codec.AppendU8(dst, uint8(len(ks)))
	for _, k := range ks {
		dst = codec.AppendU8(dst, uint8(k.Type))
		dst = codec.AppendF64(dst, k.Gamma)
		dst = codec.AppendF64(dst, k.V)
	}
	return dst
}

// AppendBinary appends the encoding of m to dst ("RKSP" for a model with
// sparse rows, sparse.go).
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	if m.sx != nil {
		return m.appendSparse(dst), nil
	}
	dst = appendHeader(dst, magicExact)
	dst = codec.AppendU8(dst, uint8(m.method))
	dst = appendKernels(dst, m.k.ks)
	dst = codec.AppendF64(dst, m.lambda)
	dst = codec.AppendU32(dst, uint32(m.d))
	dst = codec.AppendU32(dst, uint32(len(m.alpha)))
	dst = codec.AppendF64(dst, m.b)
	dst = codec.AppendF64s(dst, m.alpha)
	return codec.AppendF64s(dst, m.x), nil
}

// MarshalBinary encodes m.
func (m *Model) MarshalBinary() ([]byte, error) {
	n := 64 + 8*(len(m.alpha)+len(m.x))
	for _, r := range m.sx {
		n += 4 + 12*r.Len()
	}
	return m.AppendBinary(make([]byte, 0, n))
}

// AppendBinary appends the encoding of m to dst.
func (m *FeatureModel) AppendBinary(dst []byte) ([]byte, error) {
	cfg := m.fm.cfg
	dst = appendHeader(dst, magicFeature)
	dst = appendKernels(dst, cfg.Kernels)
	dst = codec.AppendU32(dst, uint32(cfg.Features))
	dst = codec.AppendU64(dst, cfg.Seed)
	dst = codec.AppendU32(dst, uint32(m.fm.d))
	dst = codec.AppendF64(dst, m.lambda)
	dst = codec.AppendI64(dst, m.n)
	dst = codec.AppendF64(dst, m.b)
	dst = codec.AppendU32(dst, uint32(len(m.w)))
	return codec.AppendF64s(dst, m.w), nil
}

// MarshalBinary encodes m.
func (m *FeatureModel) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 128+8*len(m.w)))
}

// AppendBinary appends the encoding of s to dst.
func (s *Sums) AppendBinary(dst []byte) ([]byte, error) {
	cfg, D := s.fm.cfg, s.dim
	dst = appendHeader(dst, magicSums)
	dst = appendKernels(dst, cfg.Kernels)
	dst = codec.AppendU32(dst, uint32(cfg.Features))
	dst = codec.AppendU64(dst, cfg.Seed)
	dst = codec.AppendU32(dst, uint32(s.fm.d))
	dst = codec.AppendU32(dst, uint32(D))
	dst = codec.AppendI64(dst, s.n)
	dst = codec.AppendF64(dst, s.sumY)
	dst = codec.AppendF64(dst, s.cY)
	dst = codec.AppendU32(dst, uint32(s.nAdd))
	dst = codec.AppendU32(dst, uint32(s.nRem))
	for _, v := range [][]float64{s.s1, s.c1, s.sy, s.cy} {
		dst = codec.AppendF64s(dst, v)
	}
	for i := range D {
		dst = codec.AppendF64s(dst, s.gram[i*D+i:(i+1)*D])
	}
	dst = codec.AppendF64s(dst, s.add[:s.nAdd*D])
	return codec.AppendF64s(dst, s.rem[:s.nRem*D]), nil
}

// MarshalBinary encodes s.
func (s *Sums) MarshalBinary() ([]byte, error) {
	D := s.dim
	return s.AppendBinary(make([]byte, 0, 128+8*(4*D+D*(D+1)/2+(s.nAdd+s.nRem)*D)))
}

// newReader returns a reader of b, past the header of an encoding with
// this magic, whose errors wrap ErrFormat.
func newReader(b []byte, magic string) *codec.Reader {
	r := codec.NewReader(b, ErrFormat)
	if p := r.Take(len(magic)); r.Err() == nil && string(p) != magic {
		r.Failf("bad magic %q, want %q", p, magic)
	}
	if v := r.U16(); r.Err() == nil && v != encVersion {
		r.Failf("format version %d (this build reads %d)", v, encVersion)
	}
	return r
}

// readKernels reads a kernels list.
func readKernels(r *codec.Reader) []Kernel {
	n := int(r.U8())
	if !r.Need(n * kernelSize) {
		return nil
	}
	ks := make([]Kernel, n)
	for i := range ks {
		ks[i] = Kernel{Type: KernelType(r.U8()), Gamma: r.F64(), V: r.F64()}
	}
	return ks
}

// readF64s reads n float64 values into a new slice, checking first that
// the input holds them (a corrupt count must not ask for an absurd
// allocation).
func readF64s(r *codec.Reader, n int) []float64 {
	if !r.Need(8 * n) {
		return nil
	}
	v := make([]float64, n)
	r.F64s(v)
	return v
}

// UnmarshalBinary restores sums written by MarshalBinary into s, which
// must have been made for a feature map with the same configuration and
// input dimension. On error (wrapping ErrFormat) s is unchanged.
func (s *Sums) UnmarshalBinary(b []byte) error {
	r := newReader(b, magicSums)
	ks := readKernels(r)
	features, seed := int(r.U32()), r.U64()
	d, D := int(r.U32()), int(r.U32())
	n := r.I64()
	sumY, cY := r.F64(), r.F64()
	nAdd, nRem := int(r.U32()), int(r.U32())
	if err := r.Err(); err != nil {
		return err
	}
	cfg := s.fm.cfg
	same := len(ks) == len(cfg.Kernels) && features == cfg.Features && seed == cfg.Seed && d == s.fm.d && D == s.dim
	for i := 0; same && i < len(ks); i++ {
		same = ks[i] == cfg.Kernels[i]
	}
	if !same {
		return fmt.Errorf("%w: sums of another feature map (kernels %v, features %d, seed %d, d %d, dim %d)",
			ErrFormat, ks, features, seed, d, D)
	}
	if n < 0 || nAdd >= batch || nRem >= batch {
		return fmt.Errorf("%w: %d events, %d/%d pending", ErrFormat, n, nAdd, nRem)
	}
	vecs := readF64s(r, 4*D)
	tri := readF64s(r, D*(D+1)/2)
	add, rem := readF64s(r, nAdd*D), readF64s(r, nRem*D)
	if err := r.End(); err != nil {
		return err
	}
	for _, v := range [][]float64{vecs, tri, add, rem, {sumY, cY}} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: non-finite statistic", ErrFormat)
			}
		}
	}
	copy(s.s1, vecs[:D])
	copy(s.c1, vecs[D:2*D])
	copy(s.sy, vecs[2*D:3*D])
	copy(s.cy, vecs[3*D:])
	clear(s.gram)
	for i, o := 0, 0; i < D; i++ {
		o += copy(s.gram[i*D+i:(i+1)*D], tri[o:])
	}
	copy(s.add, add)
	copy(s.rem, rem)
	s.sumY, s.cY, s.n, s.nAdd, s.nRem = sumY, cY, n, nAdd, nRem
	return nil
}

// UnmarshalModel decodes an exact Model written by MarshalBinary (dense or
// sparse rows). Errors wrap ErrFormat.
func UnmarshalModel(b []byte) (*Model, error) {
	if len(b) >= len(magicSparse) && string(b[:len(magicSparse)]) == magicSparse {
		return unmarshalSparse(b)
	}
	r := newReader(b, magicExact)
	mod, ks := readExactHead(r, maxFeatures)
	mod.x = readF64s(r, len(mod.alpha)*mod.d)
	if err := r.End(); err != nil {
		return nil, err
	}
	if err := mod.setKernels(ks); err != nil {
		return nil, err
	}
	mod.pack()
	return mod, nil
}

// readExactHead reads what the dense and the sparse encodings of an exact
// Model share: the method, kernels, lambda, dimension (at most maxDim),
// bias and coefficients. The kernels are made (setKernels) once the rest
// has been read.
func readExactHead(r *codec.Reader, maxDim int) (*Model, []Kernel) {
	method := Method(r.U8())
	ks := readKernels(r)
	lambda := r.F64()
	d, m := int(r.U32()), int(r.U32())
	bias := r.F64()
	if r.Err() == nil && (d < 1 || d > maxDim || m < 1 || m > maxRows || method > KRR) {
		r.Failf("method %d, %d rows of %d", method, m, d)
	}
	return &Model{method: method, lambda: lambda, d: d, alpha: readF64s(r, m), b: bias}, ks
}

// setKernels makes the decoded kernels ks the model's.
func (m *Model) setKernels(ks []Kernel) error {
	k, err := newKernels(ks)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	m.k = k
	return nil
}

// UnmarshalFeatureModel decodes a FeatureModel written by MarshalBinary.
// Errors wrap ErrFormat.
func UnmarshalFeatureModel(b []byte) (*FeatureModel, error) {
	r := newReader(b, magicFeature)
	cfg := FeatureConfig{Kernels: readKernels(r)}
	cfg.Features = int(r.U32())
	cfg.Seed = r.U64()
	d := int(r.U32())
	lambda := r.F64()
	n := r.I64()
	bias := r.F64()
	dim := int(r.U32())
	if r.Err() == nil && dim > maxFeatures {
		r.Failf("dim φ %d", dim)
	}
	w := readF64s(r, dim)
	if err := r.End(); err != nil {
		return nil, err
	}
	// dim φ follows from the kernels: check it before drawing the
	// frequencies, so that a corrupt kernel list cannot ask for them.
	want := 0
	for _, k := range cfg.Kernels {
		if k.Type == Linear {
			want += d
		} else {
			want += cfg.Features
		}
	}
	if want != dim {
		return nil, fmt.Errorf("%w: %d weights for dim φ = %d", ErrFormat, dim, want)
	}
	fm, err := NewFeatureMap(d, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if fm.Dim() != dim {
		return nil, fmt.Errorf("%w: %d weights for dim φ = %d", ErrFormat, dim, fm.Dim())
	}
	return &FeatureModel{fm: fm, lambda: lambda, n: n, w: w, b: bias}, nil
}
