package svm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/streamer/streamer/online/internal/sparse"
)

// Defaults, as svm-train's.
const (
	DefaultEps        = 1e-3
	DefaultCacheBytes = 100 << 20
)

// Errors returned by Train.
var (
	ErrNoData   = errors.New("svm: no training data")
	ErrOneClass = errors.New("svm: training data needs both classes (+1 and −1)")
	ErrLabel    = errors.New("svm: labels must be +1 or −1")
)

// Params are the solver's parameters. The zero value of a field means its default.
type Params struct {
	Kernel Kernel
	// C is the box constraint; CPos and CNeg override it for y = +1 and y = −1 (svm-train's
	// -c C -w1 CPos/C -w-1 CNeg/C). Default C = 1.
	C, CPos, CNeg float64
	// Eps is the stopping tolerance on the maximal KKT violation (svm-train -e); default 1e-3.
	Eps float64
	// CacheBytes caps the kernel-row cache (svm-train -m, in bytes); default 100 MB.
	CacheBytes int64
	// NoShrinking turns shrinking off (svm-train -h 0). Shrinking is on by default.
	NoShrinking bool
	// MaxIter caps the SMO iterations; default max(10⁷, 100n) as LIBSVM.
	MaxIter int
}

func (p Params) withDefaults() Params {
	if p.C == 0 {
		p.C = 1
	}
	if p.CPos == 0 {
		p.CPos = p.C
	}
	if p.CNeg == 0 {
		p.CNeg = p.C
	}
	if p.Eps == 0 {
		p.Eps = DefaultEps
	}
	if p.CacheBytes == 0 {
		p.CacheBytes = DefaultCacheBytes
	}
	return p
}

func (p Params) validate() error {
	if !(p.C > 0) || !(p.CPos > 0) || !(p.CNeg > 0) || math.IsInf(p.CPos, 0) || math.IsInf(p.CNeg, 0) {
		return fmt.Errorf("svm: C must be positive and finite (C=%v CPos=%v CNeg=%v)", p.C, p.CPos, p.CNeg)
	}
	if !(p.Eps > 0) {
		return fmt.Errorf("svm: Eps must be positive, have %v", p.Eps)
	}
	if p.CacheBytes < 0 {
		return fmt.Errorf("svm: CacheBytes must be ≥ 0, have %d", p.CacheBytes)
	}
	return p.Kernel.validate()
}

// Train solves the C-SVC dual on rows X with labels y ∈ {−1, +1}. warm, if not nil, is a
// starting α (length len(X)); it is made feasible by ProjectFeasible first. Train checks ctx
// every few hundred iterations and returns ctx.Err() (and no model) when it ends.
func Train(ctx context.Context, X [][]float64, y []float64, p Params, warm []float64) (*Model, error) {
	return TrainWeighted(ctx, X, y, nil, p, warm)
}

// TrainWeighted is Train with per-example weights: the box of example i is
// C_i = w_i · (CPos if y_i = +1, CNeg otherwise). w = nil means all ones; w_i must be > 0.
func TrainWeighted(ctx context.Context, X [][]float64, y, w []float64, p Params, warm []float64) (*Model, error) {
	if len(X) == 0 {
		return nil, ErrNoData
	}
	d := len(X[0])
	for i := range X {
		if len(X[i]) != d {
			return nil, fmt.Errorf("svm: row %d has %d features, row 0 has %d", i, len(X[i]), d)
		}
		for _, v := range X[i] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("svm: row %d has a non-finite feature %v", i, v)
			}
		}
	}
	// Private copies: the solver permutes rows, labels and bounds.
	flat := make([]float64, len(X)*d)
	xs := make([][]float64, len(X))
	for i := range X {
		xs[i] = flat[i*d : (i+1)*d : (i+1)*d]
		copy(xs[i], X[i])
	}
	return trainWeighted(ctx, rows{dense: X, x: xs, dim: d}, y, w, p, warm)
}

// TrainSparse is Train on sparse rows of dimension dim (hashed features):
// each row's indices strictly increasing in [0, dim), its values finite.
// Kernel values come from sparse dot products (ESS: ‖x − x'‖² =
// ‖x‖² + ‖x'‖² − 2<x, x'>, as LIBSVM computes them), a kernel row from an
// inverted index of the rows, O(l + the entries the row shares with the
// others) instead of O(l·d). The model keeps copies of its support
// vectors, sparse (Model.SparseSV).
func TrainSparse(ctx context.Context, X []sparse.Row, dim int, y []float64, p Params, warm []float64) (*Model, error) {
	return TrainWeightedSparse(ctx, X, dim, y, nil, p, warm)
}

// TrainWeightedSparse is TrainWeighted on sparse rows (see TrainSparse).
func TrainWeightedSparse(ctx context.Context, X []sparse.Row, dim int, y, w []float64, p Params, warm []float64) (*Model, error) {
	if len(X) == 0 {
		return nil, ErrNoData
	}
	if dim < 1 {
		return nil, fmt.Errorf("svm: dimension %d", dim)
	}
	for i, r := range X {
		if err := sparse.Check(r, dim); err != nil {
			return nil, fmt.Errorf("svm: sparse row %d: %w", i, err)
		}
	}
	return trainWeighted(ctx, rows{sx: slices.Clone(X), sparse: X, dim: dim}, y, w, p, warm)
}

// rows is a training set: dense (dense the caller's rows, x the solver's
// copy) or sparse (sparse in the caller's order, sx the solver's copy).
type rows struct {
	dense, x   [][]float64
	sparse, sx []sparse.Row
	dim        int
}

func (r *rows) len() int { return max(len(r.x), len(r.sx)) }

func trainWeighted(ctx context.Context, X rows, y, w []float64, p Params, warm []float64) (*Model, error) {
	p = p.withDefaults()
	if err := p.validate(); err != nil {
		return nil, err
	}
	l := X.len()
	if len(y) != l {
		return nil, fmt.Errorf("svm: %d rows but %d labels", l, len(y))
	}
	if w != nil && len(w) != l {
		return nil, fmt.Errorf("svm: %d rows but %d weights", l, len(w))
	}
	if warm != nil && len(warm) != l {
		return nil, fmt.Errorf("svm: %d rows but warm start of length %d", l, len(warm))
	}
	npos := 0
	for i := range l {
		switch y[i] {
		case 1:
			npos++
		case -1:
		default:
			return nil, fmt.Errorf("%w: y[%d] = %v", ErrLabel, i, y[i])
		}
		if w != nil && !(w[i] > 0) {
			return nil, fmt.Errorf("svm: weight %d is %v, must be > 0", i, w[i])
		}
	}
	if npos == 0 || npos == l {
		return nil, ErrOneClass
	}

	// Private copies: the solver permutes rows, labels and bounds.
	ys := make([]float64, l)
	cs := make([]float64, l)
	for i := range l {
		ys[i] = y[i]
		cs[i] = p.CNeg
		if y[i] > 0 {
			cs[i] = p.CPos
		}
		if w != nil {
			cs[i] *= w[i]
		}
	}
	alpha := make([]float64, l)
	if warm != nil {
		copy(alpha, warm)
		ProjectFeasible(alpha, ys, cs)
	}
	maxIter := p.MaxIter
	if maxIter <= 0 {
		maxIter = max(10_000_000, 100*l)
	}
	var q *qmatrix
	if X.x != nil {
		q = newQMatrix(p.Kernel, X.x, ys, p.CacheBytes)
	} else {
		q = newSparseQMatrix(p.Kernel, X.sx, ys, p.CacheBytes)
	}
	s := &solver{
		l: l, y: ys, g: make([]float64, l), gBar: make([]float64, l), alpha: alpha,
		status: make([]int8, l), c: cs, activeSet: make([]int, l),
		q: q, eps: p.Eps,
		shrinking: !p.NoShrinking, maxIter: maxIter,
	}
	if err := s.solve(ctx); err != nil {
		return nil, err
	}
	return s.model(X, p), nil
}

// ProjectFeasible makes α feasible for 0 ≤ α_i ≤ C_i, Σ α_i y_i = 0 in place: it clips each α_i
// to [0, C_i] (NaN becomes 0), then scales down the α of the class with the larger sum
// Σ_{y_i=±1} α_i by the ratio of the two sums. Scaling by a factor ≤ 1 keeps the box, and the
// larger class sum becomes equal to the smaller, so the result is feasible. It is not the
// Euclidean projection, but it keeps the direction of each class's α.
func ProjectFeasible(alpha, y, c []float64) {
	var sp, sn float64
	for i, a := range alpha {
		if !(a > 0) {
			a = 0
		} else if a > c[i] {
			a = c[i]
		}
		alpha[i] = a
		if y[i] > 0 {
			sp += a
		} else {
			sn += a
		}
	}
	if sp == sn {
		return
	}
	var f float64
	var side float64
	if sp > sn {
		f, side = sn/sp, 1
	} else {
		f, side = sp/sn, -1
	}
	for i := range alpha {
		if y[i] == side {
			alpha[i] *= f
		}
	}
}

// model collects the solution in the original index order.
func (s *solver) model(X rows, p Params) *Model {
	l := s.l
	rho := s.rho()
	// obj = ½αᵀQα − eᵀα = ½ Σ α_i (G_i − 1), LIBSVM's value.
	var v, sumAlpha float64
	for i := 0; i < l; i++ {
		v += s.alpha[i] * (s.g[i] - 1)
		sumAlpha += s.alpha[i]
	}
	obj := v / 2
	w2 := 2 * (obj + sumAlpha) // αᵀQα
	if w2 < 0 {
		w2 = 0
	}
	d := X.dim
	m := &Model{
		Kernel: p.Kernel, Dim: d, B: -rho, Obj: obj, Iter: s.iter,
		Converged: s.iter < s.maxIter, Alpha: make([]float64, l), w2: w2,
	}
	cOrig := make([]float64, l)
	for i := 0; i < l; i++ {
		m.Alpha[s.activeSet[i]] = s.alpha[i]
		cOrig[s.activeSet[i]] = s.c[i]
	}
	yOrig := make([]float64, l)
	for i := 0; i < l; i++ {
		yOrig[s.activeSet[i]] = s.y[i]
	}
	nsv := 0
	for i, a := range m.Alpha {
		if a > 0 {
			nsv++
			if a >= cOrig[i] {
				m.NBSV++
			}
		}
	}
	m.SVIndex = make([]int, 0, nsv)
	m.Coef = make([]float64, 0, nsv)
	var flat []float64
	var svs []sparse.Row
	if X.sparse == nil {
		flat = make([]float64, nsv*d)
		m.SV = make([][]float64, 0, nsv)
	}
	for i, a := range m.Alpha {
		if a > 0 {
			k := len(m.Coef)
			if X.sparse == nil {
				row := flat[k*d : (k+1)*d : (k+1)*d]
				copy(row, X.dense[i])
				m.SV = append(m.SV, row)
			} else {
				svs = append(svs, X.sparse[i])
			}
			m.SVIndex = append(m.SVIndex, i)
			m.Coef = append(m.Coef, a*yOrig[i])
		}
	}
	if X.sparse != nil {
		m.setSparse(sparse.Clone(svs))
	}
	m.pack()
	return m
}
