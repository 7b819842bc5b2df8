package rank

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/internal/vmath"
)

// The exact solver on sparse rows (hashed features): the same systems as
// Fit, the kernel from sparse dot products, ‖x − x'‖² = ‖x‖² + ‖x'‖² −
// 2<x, x'> (clamped at 0), and the rows of the kernel matrix from an
// inverted index of the rows, O(m + the entries a row shares with the
// others) each instead of O(m·d).

// maxSparseDim bounds the dimension of sparse rows (2^30 hashed indices).
const maxSparseDim = 1 << 30

// FitSparse is Fit on the m sparse rows X of dimension d (indices
// strictly increasing in [0, d), values finite). The model keeps its rows
// sparse and scores sparse inputs through their inverted index
// (PredictSparse). X and y are copied.
func FitSparse(ctx context.Context, X []sparse.Row, d int, y []float64, cfg Config) (*Model, error) {
	m := len(y)
	if d < 1 || d > maxSparseDim || len(X) != m {
		return nil, fmt.Errorf("%w: %d sparse rows of dimension %d for %d targets", ErrConfig, len(X), d, m)
	}
	for i, r := range X {
		if err := sparse.Check(r, d); err != nil {
			return nil, fmt.Errorf("%w: sparse row %d: %w", ErrConfig, i, err)
		}
	}
	if err := checkProblem(y, cfg); err != nil {
		return nil, err
	}
	ks, err := newKernels(cfg.Kernels)
	if err != nil {
		return nil, err
	}
	mod := &Model{method: cfg.Method, k: ks, lambda: cfg.Lambda, d: d}
	mod.setSparse(sparse.Clone(X))
	a := make([]float64, m*m) // upper triangle used
	if err := mod.gramUpperSparse(ctx, a); err != nil {
		return nil, err
	}
	alpha, b, err := solveGram(ctx, a, m, y, cfg.Method, cfg.Lambda)
	if err != nil {
		return nil, err
	}
	mod.alpha, mod.b = alpha, b
	return mod, nil
}

// setSparse makes rows the model's rows, with their norms and index.
func (m *Model) setSparse(rows []sparse.Row) {
	m.sx, m.x = rows, nil
	m.sq = make([]float64, len(rows))
	for i, r := range rows {
		m.sq[i] = sparse.Sq(r)
	}
	m.ix = sparse.NewIndex(rows)
}

// Sparse reports whether the model keeps sparse rows (FitSparse).
func (m *Model) Sparse() bool { return m.sx != nil }

// gramUpperSparse fills the upper triangle of the m × m matrix a with
// K̄(xᵢ, xⱼ) of the model's sparse rows, rows spread over GOMAXPROCS
// goroutines (each with its own row of dot products).
func (m *Model) gramUpperSparse(ctx context.Context, a []float64) error {
	n := len(m.sx)
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dots := make([]float64, n)
			for i := w; i < n; i += workers { // interleaved: balanced triangle
				if i%64 == w && ctx.Err() != nil {
					return
				}
				m.ix.Dots(dots, m.sx[i])
				row := a[i*n : (i+1)*n]
				si := m.sq[i]
				if g, ok := m.k.singleRBF(); ok {
					// fromDot's entries: the distances, then their exps
					// eight at a time (ExpNeg's bits).
					e := row[i:]
					for j, d := range dots[i:] {
						e[j] = sparse.Dist2(si, m.sq[i+j], d)
					}
					vmath.ExpNegScaled(e, e, -g)
					continue
				}
				for j := i; j < n; j++ {
					row[j] = m.k.fromDot(dots[j], si, m.sq[j])
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// fromDot returns K̄(a, b) from <a, b> = dot, ‖a‖² = sa, ‖b‖² = sb. Its
// rbf terms take vmath.ExpNeg (within 1 ulp of math.Exp, 0 below e^−707),
// whose bits the vector exps of the one-rbf paths give.
func (k *kernels) fromDot(dot, sa, sb float64) float64 {
	var s float64
	for t, kt := range k.ks {
		switch kt.Type {
		case RBF:
			s += vmath.ExpNeg(-kt.Gamma*sparse.Dist2(sa, sb, dot)) * k.inv[t]
		case Linear:
			s += dot * k.inv[t]
		}
	}
	return s
}

// PredictSparse returns f(x) for a sparse x of dimension Dim (indices
// strictly increasing). buf, when it has at least N() entries, is the
// scratch space of the dot products of a model with sparse rows: x is then
// scored through their inverted index, O(N + the entries x shares with
// them); with a shorter buf each dot product is a merge. A dense model
// gathers x's entries from each row. It does not allocate, and is safe
// for concurrent use with distinct bufs.
func (m *Model) PredictSparse(x sparse.Row, buf []float64) float64 {
	for _, i := range x.Idx {
		if uint32(i) >= uint32(m.d) {
			panic(fmt.Sprintf("rank: PredictSparse: index %d, want < %d", i, m.d))
		}
	}
	sx := sparse.Sq(x)
	s := m.b
	switch n := len(m.alpha); {
	case m.sx != nil && len(buf) >= n:
		buf = buf[:n]
		m.ix.Dots(buf, x)
		if g, ok := m.k.singleRBF(); ok {
			// fromDot's terms with the exps eight at a time, summed in
			// order: the loop's bits.
			sq := m.sq[:n]
			for i, d := range buf {
				buf[i] = sparse.Dist2(sq[i], sx, d)
			}
			vmath.ExpNegScaled(buf, buf, -g)
			for i, a := range m.alpha {
				s += a * buf[i]
			}
			break
		}
		for i, a := range m.alpha {
			s += a * m.k.fromDot(buf[i], m.sq[i], sx)
		}
	case m.sx != nil:
		for i, a := range m.alpha {
			s += a * m.k.fromDot(sparse.Dot(x, m.sx[i]), m.sq[i], sx)
		}
	default:
		d := m.d
		for i, a := range m.alpha {
			r := m.x[i*d : (i+1)*d]
			s += a * m.k.fromDot(sparse.DotDense(x, r), dotp(r, r), sx)
		}
	}
	return s
}

// predictDenseSparseModel is Predict for a model with sparse rows.
func (m *Model) predictDenseSparseModel(x []float64) float64 {
	sx := dotp(x, x)
	s := m.b
	for i, a := range m.alpha {
		s += a * m.k.fromDot(sparse.DotDense(m.sx[i], x), m.sq[i], sx)
	}
	return s
}

// Encoding of a model with sparse rows (codec.go's conventions):
//
//	"RKSP" u16 1 | method u8 | kernels | lambda f64 | d u32 | m u32 | b f64 |
//	α: m × f64 | m rows: nnz u32, nnz × u32 indices (strictly increasing,
//	< d), nnz × f64 values (finite, nonzero)
//
// pinned by testdata/format_v1_sparse.bin.
const magicSparse = "RKSP"

// appendSparse appends the encoding of a model with sparse rows.
func (m *Model) appendSparse(dst []byte) []byte {
	dst = appendHeader(dst, magicSparse)
	dst = codec.AppendU8(dst, uint8(m.method))
	dst = appendKernels(dst, m.k.ks)
	dst = codec.AppendF64(dst, m.lambda)
	dst = codec.AppendU32(dst, uint32(m.d))
	dst = codec.AppendU32(dst, uint32(len(m.alpha)))
	dst = codec.AppendF64(dst, m.b)
	dst = codec.AppendF64s(dst, m.alpha)
	for _, r := range m.sx {
		dst = codec.AppendU32(dst, uint32(r.Len()))
		for _, i := range r.Idx {
			dst = codec.AppendU32(dst, uint32(i))
		}
		dst = codec.AppendF64s(dst, r.Val)
	}
	return dst
}

// unmarshalSparse decodes a model with sparse rows.
func unmarshalSparse(b []byte) (*Model, error) {
	r := newReader(b, magicSparse)
	mod, ks := readExactHead(r, maxSparseDim)
	d, m := mod.d, len(mod.alpha)
	if r.Err() == nil && !r.Need(4*m) {
		return nil, r.Err()
	}
	rows := make([]sparse.Row, m)
	for i := range rows {
		nnz := int(r.U32())
		if r.Err() != nil || nnz > d || !r.Need(12*nnz) {
			r.Failf("row %d of %d entries", i, nnz)
			break
		}
		row := sparse.Row{Idx: make([]int32, nnz), Val: make([]float64, nnz)}
		for k := range row.Idx {
			row.Idx[k] = int32(r.U32())
		}
		r.F64s(row.Val)
		if err := sparse.Check(row, d); err != nil {
			r.Failf("row %d: %w", i, err)
			break
		}
		rows[i] = row
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	if err := mod.setKernels(ks); err != nil {
		return nil, err
	}
	mod.setSparse(rows)
	return mod, nil
}
