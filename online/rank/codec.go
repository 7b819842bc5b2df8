package rank

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Encodings (little-endian; float64 as IEEE-754 bits). Both start with a
// 4-byte magic and a u16 format version (1); decoders reject other
// versions and trailing bytes.
//
//	Model (exact):   "RKEX" u16 1 | method u8 | kernels | lambda f64 | d u32 | m u32 |
//	                 b f64 | α: m × f64 | x: m·d × f64
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
// the encoded ones would have.
const (
	magicExact   = "RKEX"
	magicFeature = "RKRF"
	magicSums    = "RKSU"
	encVersion   = 1
	maxRows      = 1 << 26
)

// ErrFormat is wrapped by every decoding error.
var ErrFormat = errors.New("rank: bad model encoding")

func appendF64(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

func appendKernels(dst []byte, ks []Kernel) []byte {
	dst = append(dst, byte(len(ks)))
	for _, k := range ks {
		dst = append(dst, byte(k.Type))
		dst = appendF64(dst, k.Gamma)
		dst = appendF64(dst, k.V)
	}
	return dst
}

// AppendBinary appends the encoding of m to dst.
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	le := binary.LittleEndian
	dst = append(dst, magicExact...)
	dst = le.AppendUint16(dst, encVersion)
	dst = append(dst, byte(m.method))
	dst = appendKernels(dst, m.k.ks)
	dst = appendF64(dst, m.lambda)
	dst = le.AppendUint32(dst, uint32(m.d))
	dst = le.AppendUint32(dst, uint32(len(m.alpha)))
	dst = appendF64(dst, m.b)
	for _, v := range m.alpha {
		dst = appendF64(dst, v)
	}
	for _, v := range m.x {
		dst = appendF64(dst, v)
	}
	return dst, nil
}

// MarshalBinary encodes m.
func (m *Model) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 64+8*(len(m.alpha)+len(m.x))))
}

// AppendBinary appends the encoding of m to dst.
func (m *FeatureModel) AppendBinary(dst []byte) ([]byte, error) {
	le := binary.LittleEndian
	cfg := m.fm.cfg
	dst = append(dst, magicFeature...)
	dst = le.AppendUint16(dst, encVersion)
	dst = appendKernels(dst, cfg.Kernels)
	dst = le.AppendUint32(dst, uint32(cfg.Features))
	dst = le.AppendUint64(dst, cfg.Seed)
	dst = le.AppendUint32(dst, uint32(m.fm.d))
	dst = appendF64(dst, m.lambda)
	dst = le.AppendUint64(dst, uint64(m.n))
	dst = appendF64(dst, m.b)
	dst = le.AppendUint32(dst, uint32(len(m.w)))
	for _, v := range m.w {
		dst = appendF64(dst, v)
	}
	return dst, nil
}

// MarshalBinary encodes m.
func (m *FeatureModel) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 128+8*len(m.w)))
}

// AppendBinary appends the encoding of s to dst.
func (s *Sums) AppendBinary(dst []byte) ([]byte, error) {
	le := binary.LittleEndian
	cfg, D := s.fm.cfg, s.dim
	dst = append(dst, magicSums...)
	dst = le.AppendUint16(dst, encVersion)
	dst = appendKernels(dst, cfg.Kernels)
	dst = le.AppendUint32(dst, uint32(cfg.Features))
	dst = le.AppendUint64(dst, cfg.Seed)
	dst = le.AppendUint32(dst, uint32(s.fm.d))
	dst = le.AppendUint32(dst, uint32(D))
	dst = le.AppendUint64(dst, uint64(s.n))
	dst = appendF64(dst, s.sumY)
	dst = appendF64(dst, s.cY)
	dst = le.AppendUint32(dst, uint32(s.nAdd))
	dst = le.AppendUint32(dst, uint32(s.nRem))
	for _, v := range [][]float64{s.s1, s.c1, s.sy, s.cy} {
		for _, x := range v {
			dst = appendF64(dst, x)
		}
	}
	for i := range D {
		for _, x := range s.gram[i*D+i : (i+1)*D] {
			dst = appendF64(dst, x)
		}
	}
	for _, x := range s.add[:s.nAdd*D] {
		dst = appendF64(dst, x)
	}
	for _, x := range s.rem[:s.nRem*D] {
		dst = appendF64(dst, x)
	}
	return dst, nil
}

// MarshalBinary encodes s.
func (s *Sums) MarshalBinary() ([]byte, error) {
	D := s.dim
	return s.AppendBinary(make([]byte, 0, 128+8*(4*D+D*(D+1)/2+(s.nAdd+s.nRem)*D)))
}

// UnmarshalBinary restores sums written by MarshalBinary into s, which
// must have been made for a feature map with the same configuration and
// input dimension. On error s is unchanged.
func (s *Sums) UnmarshalBinary(b []byte) error {
	r := &reader{b: b}
	r.header(magicSums)
	ks := r.kernels()
	features, seed := int(r.u32()), r.u64()
	d, D := int(r.u32()), int(r.u32())
	n := int64(r.u64())
	sumY, cY := r.f64(), r.f64()
	nAdd, nRem := int(r.u32()), int(r.u32())
	if r.err != nil {
		return r.err
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
	vecs := r.f64s(4 * D)
	tri := r.f64s(D * (D + 1) / 2)
	add, rem := r.f64s(nAdd*D), r.f64s(nRem*D)
	if err := r.end(); err != nil {
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

// reader decodes with a sticky error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%w: truncated", ErrFormat)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *reader) f64() float64 { return math.Float64frombits(r.u64()) }

func (r *reader) f64s(n int) []float64 {
	if r.err == nil && (n < 0 || n > len(r.b)/8) {
		r.err = fmt.Errorf("%w: truncated", ErrFormat)
	}
	if r.err != nil {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = r.f64()
	}
	return out
}

func (r *reader) header(magic string) {
	if p := r.take(6); p == nil || string(p[:4]) != magic {
		r.err = fmt.Errorf("%w: bad header", ErrFormat)
	} else if v := binary.LittleEndian.Uint16(p[4:]); v != encVersion {
		r.err = fmt.Errorf("%w: format version %d (this build reads %d)", ErrFormat, v, encVersion)
	}
}

func (r *reader) kernels() []Kernel {
	ks := make([]Kernel, r.u8())
	for i := range ks {
		ks[i] = Kernel{Type: KernelType(r.u8()), Gamma: r.f64(), V: r.f64()}
	}
	return ks
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrFormat, len(r.b))
	}
	return r.err
}

// UnmarshalModel decodes an exact Model written by MarshalBinary.
func UnmarshalModel(b []byte) (*Model, error) {
	r := &reader{b: b}
	r.header(magicExact)
	method := Method(r.u8())
	ks := r.kernels()
	lambda := r.f64()
	d, m := int(r.u32()), int(r.u32())
	bias := r.f64()
	if r.err == nil && (d < 1 || d > maxFeatures || m < 1 || m > maxRows || method > KRR) {
		r.err = fmt.Errorf("%w: method %d, %d rows of %d", ErrFormat, method, m, d)
	}
	alpha := r.f64s(m)
	x := r.f64s(m * d)
	if err := r.end(); err != nil {
		return nil, err
	}
	k, err := newKernels(ks)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return &Model{method: method, k: k, lambda: lambda, d: d, x: x, alpha: alpha, b: bias}, nil
}

// UnmarshalFeatureModel decodes a FeatureModel written by MarshalBinary.
func UnmarshalFeatureModel(b []byte) (*FeatureModel, error) {
	r := &reader{b: b}
	r.header(magicFeature)
	cfg := FeatureConfig{Kernels: r.kernels()}
	cfg.Features = int(r.u32())
	cfg.Seed = r.u64()
	d := int(r.u32())
	lambda := r.f64()
	n := int64(r.u64())
	bias := r.f64()
	dim := int(r.u32())
	if r.err == nil && dim > maxFeatures {
		r.err = fmt.Errorf("%w: dim φ %d", ErrFormat, dim)
	}
	w := r.f64s(dim)
	if err := r.end(); err != nil {
		return nil, err
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
