package online

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/internal/vmath"
)

// The exact kernel mode of mam on hashed features (features.hash): the
// budget of examples is kept as sparse rows (at most features.max_features
// entries each) in a FIFO arena, indexed by feature, so that the kernel row
// of an event costs O(budget + the entries it shares with the stored
// examples) instead of O(budget·dim), and nothing of size dim is stored.
// The kernels come from sparse dot products: rbf and laplacian through
// ‖x − x'‖² = ‖x‖² + ‖x'‖² − 2<x, x'> (clamped at 0), with the same
// rescaling by the smallest distance as the dense rows (docs/math.md §3).

var _ SparseModel = (*ExactMAM)(nil)

// exactSparse is the storage of an ExactMAM of hashed features.
type exactSparse struct {
	nnz  int              // the bound on an event's entries (features.max_features)
	rows *sparse.Ring     // the stored prepared inputs, oldest first
	post *sparse.Postings // their inverted index, by slot
	sq   []float64        // per slot: ‖x_i‖² of the prepared input
	bld  sparse.Builder   // the event's row
	xi   []int32          // the event's prepared row
	xv   []float64        //
	x    sparse.Row       // xi, xv as a row
	xsq  float64          // ‖x‖² of the prepared row
	tmp  []sparse.Row     // decoding: rows by slot
	_    [0]func()        // not comparable
}

func newExactSparse(nb, nnz int) *exactSparse {
	start := nb * min(nnz, 32) // the arena and index grow to the budget's content
	return &exactSparse{nnz: nnz, rows: sparse.NewRing(nb, start), post: sparse.NewPostings(start), sq: make([]float64, nb)}
}

// store stores the event's prepared row in slot j as the newest example.
func (sp *exactSparse) store(j int) {
	sp.rows.Push(sp.x, sp.xsq)
	sp.post.Add(int32(j), sp.x)
	sp.sq[j] = sp.xsq
}

// evict removes the oldest example, in slot o.
func (sp *exactSparse) evict(o int) {
	sp.post.Remove(int32(o), sp.rows.Row(0))
	sp.rows.Pop()
}

// prepare writes the stored form of the row x into sp.x (x/‖x‖ for linear,
// x itself otherwise) and returns K(x, x), as Kernel.prepare does for a
// dense x; ok is false in the same cases.
func (sp *exactSparse) prepare(k *Kernel, x sparse.Row) (self float64, ok bool) {
	xi, xv := sp.xi[:0], sp.xv[:0]
	var sq float64
	for _, v := range x.Val {
		sq += v * v
	}
	switch k.kind {
	case kindLinear:
		if len(x.Idx) == 0 {
			break
		}
		vals, scale := x.Val, 1.0
		if !(sq > 0x1p-900 && sq < 0x1p900) { // tiny, huge or non-finite: scale first, as mapLinear
			var mx float64
			for _, v := range vals {
				if !isFinite(v) {
					return 0, false
				}
				mx = max(mx, math.Abs(v))
			}
			_, e := math.Frexp(mx)
			scale = math.Ldexp(1, -e)
			sq = 0
			for _, v := range vals {
				v *= scale
				sq += v * v
			}
		}
		inv := 1 / math.Sqrt(sq)
		for j, v := range vals {
			if v = v * scale * inv; v != 0 {
				xi, xv = append(xi, x.Idx[j]), append(xv, v)
			}
		}
		for _, v := range xv {
			self += v * v
		}
		sq = self
	case kindPolynomial:
		for _, v := range x.Val {
			if !isFinite(v) {
				return 0, false
			}
		}
		xi, xv = append(xi, x.Idx...), append(xv, x.Val...)
		self = powInt(sq+k.coef0, k.degree)
		if !(self <= maxPolySelf) {
			return 0, false
		}
	default:
		if !(sq <= maxDistInputSq) {
			return 0, false
		}
		xi, xv = append(xi, x.Idx...), append(xv, x.Val...)
		self = 1
	}
	sp.xi, sp.xv = xi, xv
	sp.x, sp.xsq = sparse.Row{Idx: xi, Val: xv}, sq
	return self, true
}

// row computes the kernel row of the prepared sp.x against the stored
// examples, in slots 0..len(dst)−1, as Kernel.row does for dense inputs:
// K(x_i, x) = dst[i]·e^−s.
func (sp *exactSparse) row(k *Kernel, dst []float64) (s float64) {
	clear(dst)
	sp.post.Dots(dst, sp.x)
	switch k.kind {
	case kindLinear:
		return 0
	case kindPolynomial:
		for i, v := range dst {
			dst[i] = powInt(v+k.coef0, k.degree)
		}
		return 0
	}
	if len(dst) == 0 {
		return 0
	}
	m := math.Inf(1)
	sq := sp.sq[:len(dst)]
	for i, dot := range dst {
		v := sparse.Dist2(sq[i], sp.xsq, dot)
		if k.kind == kindLaplacian {
			v = math.Sqrt(v)
		}
		dst[i] = v
		m = min(m, v)
	}
	vmath.ExpShiftRow(dst, k.gamma, m)
	return k.gamma * m
}

// Sparse reports whether m takes hashed (sparse) features: nil when it was
// built for them (MAMParams.NewSparse), else why not.
func (m *ExactMAM) Sparse() error {
	if m.sp == nil {
		return errors.New("the exact kernel mode keeps its budget of examples dense: the model was built without hashed features (features.hash)")
	}
	return nil
}

// ObserveSparse is Observe on the dense x with x[idx[k]] += val[k] (see
// SparseModel), for a model built for hashed features (it panics
// otherwise, as Observe does for a bad label, and for len(idx) != len(val)
// or an index outside [0, Dim())). The kernel row costs O(Budget + the
// entries the event shares with the stored examples) through their
// inverted index; it does not allocate once the arena and the index have
// grown to the budget's content. The score agrees with Observe's on the
// densified x to rounding (about 1e-12 relative, TestExactMAMSparse).
func (m *ExactMAM) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) Prediction {
	if m.sp == nil {
		panic("online: ExactMAM.ObserveSparse: " + m.Sparse().Error())
	}
	if len(idx) != len(val) {
		panic("online: ExactMAM.ObserveSparse: len(idx) != len(val)")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: ExactMAM.ObserveSparse: label must be -1 or +1 (see Label)")
	}
	for _, i := range idx {
		if uint32(i) >= uint32(m.d) {
			panic(fmt.Sprintf("online: ExactMAM.ObserveSparse: index %d outside [0, %d)", i, m.d))
		}
	}
	return m.observeRow(m.sp.bld.Build(idx, val), y, labelled)
}

// observeRow is Observe for the sparse row x of a model of hashed features.
func (m *ExactMAM) observeRow(x sparse.Row, y float64, labelled bool) Prediction {
	p := Prediction{Delta: m.p.Delta, N: int64(m.count)}
	self, ok := m.sp.prepare(&m.kern, x)
	if !ok {
		return p
	}
	s := m.sp.row(&m.kern, m.kb[:m.count])
	return m.score(p, self, s, y, labelled)
}

// oldestSlot is the slot of the oldest stored example.
func (m *ExactMAM) oldestSlot() int {
	if m.count == len(m.ys) {
		return m.head
	}
	return 0
}

// ValidateSparse checks the parameters for hashed inputs of dimension dim
// with at most nnz entries (SparseParams): the exact kernel mode's budget
// is bounded by budget × (nnz + 7) instead of budget × (dim + 7); the
// random-feature mode is validated as for dense inputs (its sparse path,
// or the reason it has none, is MAM.Sparse's).
func (p *MAMParams) ValidateSparse(dim, nnz int) error {
	if p.Budget <= 0 {
		return p.Validate(dim)
	}
	var c checks
	if nnz < 1 || p.Budget > maxBudgetFloats/(nnz+7) {
		c.add("budget", "with hashed features budget×(features.max_features+7) must be ≤ %d, got %d×(%d+7)", maxBudgetFloats, p.Budget, nnz)
	}
	q := *p
	q.Budget = 1 // every other check: the exact mode depends on dim only through the budget's bound
	c.add1(q.Validate(1))
	return c.err()
}

// NewSparse builds a mam for hashed inputs (SparseParams): the exact kernel
// mode with sparse storage, or the random-feature mode as NewMAM builds it.
func (p *MAMParams) NewSparse(dim, nnz int) (Model, error) {
	if p.Budget <= 0 {
		return NewMAM(dim, *p)
	}
	if err := p.ValidateSparse(dim, nnz); err != nil {
		return nil, err
	}
	return newExactMAM(dim, nnz, *p)
}

var _ SparseParams = (*MAMParams)(nil)
