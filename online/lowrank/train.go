package lowrank

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/streamer/streamer/online/svm"
)

// Defaults.
const (
	DefaultRank    = 2
	DefaultC       = 1
	DefaultTol     = 1e-4
	DefaultMaxIter = 50
	// DefaultEps is the SMO tolerance of each block step (svm.Params.Eps),
	// svm-train's. Tighter values cost 4× (1e-4) to 10× (1e-5) the time on
	// the reference problem for the same objective to 3e-4.
	DefaultEps = svm.DefaultEps
	// MaxDim caps d1·d2 of a decoded or trained model (online's input
	// dimension limit).
	MaxDim = 1 << 20
	// MaxIterLimit caps Params.MaxIter.
	MaxIterLimit = 10_000
)

// Errors returned by Train.
var (
	ErrNoData   = errors.New("lowrank: no training data")
	ErrOneClass = errors.New("lowrank: training data needs both classes (+1 and −1)")
)

// Params are the solver's parameters. A zero field means its default
// (Rows, Cols and Rank have none: they are required).
type Params struct {
	Rows, Cols int     // d1, d2: an example is a d1×d2 matrix, d1·d2 entries row-major
	Rank       int     // r, 1 ≤ r ≤ min(d1, d2)
	C          float64 // box constraint (default 1)
	Tol        float64 // stop when J changes by at most Tol·|J| in an iteration (default 1e-4)
	MaxIter    int     // at most this many iterations (default 50)
	Eps        float64 // SMO tolerance of each block step (default DefaultEps)
	CacheBytes int64   // SMO kernel cache of each block step (default svm's)
	// SMOMaxIter caps the SMO iterations of each block step (default
	// max(10⁶, 100n), a tenth of svm's max(10⁷, 100n)): a block step is one of
	// many, and the next iteration's step starts warm from where a capped
	// one stopped. Model.Capped counts the steps it stopped.
	SMOMaxIter int
}

func (p Params) withDefaults() Params {
	if p.C == 0 {
		p.C = DefaultC
	}
	if p.Tol == 0 {
		p.Tol = DefaultTol
	}
	if p.MaxIter == 0 {
		p.MaxIter = DefaultMaxIter
	}
	if p.Eps == 0 {
		p.Eps = DefaultEps
	}
	return p
}

// Validate checks p (after defaults) for examples of dim entries.
func (p Params) Validate(dim int) error {
	p = p.withDefaults()
	if p.Rows < 1 || p.Cols < 1 || p.Rows > MaxDim/p.Cols {
		return fmt.Errorf("lowrank: shape %d×%d: sides must be ≥ 1 with d1·d2 ≤ %d", p.Rows, p.Cols, MaxDim)
	}
	if p.Rows*p.Cols != dim {
		return fmt.Errorf("lowrank: shape %d×%d has %d entries, the examples %d", p.Rows, p.Cols, p.Rows*p.Cols, dim)
	}
	if p.Rank < 1 || p.Rank > min(p.Rows, p.Cols) {
		return fmt.Errorf("lowrank: rank %d: must be in 1..min(%d, %d)", p.Rank, p.Rows, p.Cols)
	}
	if !(p.C > 0) || math.IsInf(p.C, 0) {
		return fmt.Errorf("lowrank: C must be positive and finite, have %v", p.C)
	}
	if !(p.Tol > 0 && p.Tol < 1) {
		return fmt.Errorf("lowrank: Tol must be in (0, 1), have %v", p.Tol)
	}
	if p.MaxIter < 1 || p.MaxIter > MaxIterLimit {
		return fmt.Errorf("lowrank: MaxIter must be in 1..%d, have %d", MaxIterLimit, p.MaxIter)
	}
	if !(p.Eps > 0) || math.IsInf(p.Eps, 0) {
		return fmt.Errorf("lowrank: Eps must be positive and finite, have %v", p.Eps)
	}
	if p.CacheBytes < 0 || p.SMOMaxIter < 0 {
		return fmt.Errorf("lowrank: CacheBytes (%d) and SMOMaxIter (%d) must be ≥ 0", p.CacheBytes, p.SMOMaxIter)
	}
	return nil
}

// Start is a starting point for TrainWeighted; every field is optional.
type Start struct {
	// V is V⁰, Cols×Rank row-major (nil: from the data, see the package
	// documentation).
	V []float64
	// AlphaU and AlphaV warm-start the first U-step and V-step (one per
	// example; made feasible for the boxes by svm.ProjectFeasible).
	AlphaU, AlphaV []float64
}

// Train fits the classifier to rows X (each Rows·Cols entries, the matrix
// row-major) with labels y ∈ {−1, +1}, from the data's initialisation. It
// checks ctx between and inside the block steps and returns ctx.Err() when
// it ends.
func Train(ctx context.Context, X [][]float64, y []float64, p Params) (*Model, error) {
	return TrainWeighted(ctx, X, y, nil, p, nil)
}

// TrainWeighted is Train with per-example weights (the box of example i is
// w_i·C; w = nil means all ones, w_i must be > 0) and an optional start.
func TrainWeighted(ctx context.Context, X [][]float64, y, w []float64, p Params, start *Start) (*Model, error) {
	p = p.withDefaults()
	n := len(X)
	if n == 0 {
		return nil, ErrNoData
	}
	dim := p.Rows * p.Cols
	if err := p.Validate(len(X[0])); err != nil {
		return nil, err
	}
	if len(y) != n || (w != nil && len(w) != n) {
		return nil, fmt.Errorf("lowrank: %d rows, %d labels, %d weights", n, len(y), len(w))
	}
	npos := 0
	for i, x := range X {
		if len(x) != dim {
			return nil, fmt.Errorf("lowrank: row %d has %d entries, want %d×%d", i, len(x), p.Rows, p.Cols)
		}
		for _, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("lowrank: row %d has a non-finite entry %v", i, v)
			}
		}
		switch y[i] {
		case 1:
			npos++
		case -1:
		default:
			return nil, fmt.Errorf("lowrank: label %d is %v, want ±1", i, y[i])
		}
		if w != nil && !(w[i] > 0 && !math.IsInf(w[i], 0)) {
			return nil, fmt.Errorf("lowrank: weight %d is %v, must be positive and finite", i, w[i])
		}
	}
	if npos == 0 || npos == n {
		return nil, ErrOneClass
	}
	if p.SMOMaxIter == 0 {
		p.SMOMaxIter = max(1_000_000, 100*n)
	}
	s := newState(X, y, w, p)
	if start != nil && start.V != nil {
		if len(start.V) != p.Cols*p.Rank {
			return nil, fmt.Errorf("lowrank: start V has %d entries, want %d×%d", len(start.V), p.Cols, p.Rank)
		}
		copy(s.v, start.V)
	} else {
		s.initV()
	}
	if start != nil {
		for _, a := range [][]float64{start.AlphaU, start.AlphaV} {
			if a != nil && len(a) != n {
				return nil, fmt.Errorf("lowrank: warm start of %d α for %d rows", len(a), n)
			}
		}
		s.alphaU, s.alphaV = clone(start.AlphaU), clone(start.AlphaV)
	}
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s.model(), nil
}

func clone(a []float64) []float64 {
	if a == nil {
		return nil
	}
	return append([]float64(nil), a...)
}

// state is one run of the block coordinate descent.
type state struct {
	p    Params
	x    [][]float64
	y, w []float64

	u, v           []float64 // Rows×Rank, Cols×Rank, row-major
	b              float64
	alphaU, alphaV []float64

	z    [][]float64 // the transformed examples of the current step
	zbuf []float64

	obj       float64
	history   []float64
	iter      int
	converged bool
	smoIter   int
	capped    int
	nsv       int
	dual      float64 // the last step's dual objective (svm.Model.Obj)
}

func newState(X [][]float64, y, w []float64, p Params) *state {
	return &state{
		p: p, x: X, y: y, w: w,
		u: make([]float64, p.Rows*p.Rank), v: make([]float64, p.Cols*p.Rank),
		z: make([][]float64, len(X)), zbuf: make([]float64, len(X)*max(p.Rows, p.Cols)*p.Rank),
	}
}

// initV sets V to the top-r right singular vectors of the difference of
// the class means.
func (s *state) initV() {
	d1, d2, r := s.p.Rows, s.p.Cols, s.p.Rank
	m := make([]float64, d1*d2)
	var np, nn float64
	for _, yi := range s.y {
		if yi > 0 {
			np++
		} else {
			nn++
		}
	}
	for i, x := range s.x {
		c := -1 / nn
		if s.y[i] > 0 {
			c = 1 / np
		}
		for j, v := range x {
			m[j] += c * v
		}
	}
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(d1, d2, m), mat.SVDThin) {
		// Not expected for finite input; any orthonormal start will do.
		for k := range r {
			s.v[k*r+k] = 1
		}
		return
	}
	var vt mat.Dense
	svd.VTo(&vt) // d2×min(d1, d2), columns by decreasing singular value
	for i := range d2 {
		for k := range r {
			s.v[i*r+k] = vt.At(i, k)
		}
	}
}

// run iterates U-steps and V-steps until J settles.
func (s *state) run(ctx context.Context) error {
	prev := math.Inf(1)
	for s.iter < s.p.MaxIter {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.iter++
		if err := s.step(ctx, false); err != nil {
			return err
		}
		if err := s.step(ctx, true); err != nil {
			return err
		}
		s.obj = s.objective()
		s.history = append(s.history, s.obj)
		if math.Abs(prev-s.obj) <= s.p.Tol*math.Abs(s.obj) {
			s.converged = true
			break
		}
		prev = s.obj
	}
	return nil
}

// step solves one block: the U-step (vstep false: V fixed) or the V-step.
func (s *state) step(ctx context.Context, vstep bool) error {
	d1, d2, r := s.p.Rows, s.p.Cols, s.p.Rank
	fixed, out, k := s.v, s.u, d1 // k: rows of the block solved for
	warm := &s.alphaU
	if vstep {
		fixed, out, k = s.u, s.v, d2
		warm = &s.alphaV
	}
	other := d1 + d2 - k
	sInv := invSqrtGram(fixed, other, r) // (FᵀF)^{-1/2}, r×r
	q := mulRR(fixed, other, r, sInv)    // F (FᵀF)^{-1/2}: orthonormal columns (or zero)
	fdim := k * r
	for i, x := range s.x {
		zi := s.zbuf[i*fdim : (i+1)*fdim : (i+1)*fdim]
		if vstep {
			transformT(zi, x, q, d1, d2, r)
		} else {
			transform(zi, x, q, d1, d2, r)
		}
		s.z[i] = zi
	}
	m, err := svm.TrainWeighted(ctx, s.z, s.y, s.w,
		svm.Params{Kernel: svm.Kernel{Type: svm.Linear}, C: s.p.C, Eps: s.p.Eps, CacheBytes: s.p.CacheBytes, MaxIter: s.p.SMOMaxIter}, *warm)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("lowrank: %s-step %d: %w", map[bool]string{false: "U", true: "V"}[vstep], s.iter, err)
	}
	*warm = m.Alpha
	s.smoIter += m.Iter
	if !m.Converged {
		s.capped++
	}
	s.nsv = m.NSV()
	s.dual = m.Obj
	// W = Σ α_i y_i Z_i (k×r); the block is W (FᵀF)^{-1/2}.
	wt := make([]float64, fdim)
	for i, a := range m.Alpha {
		if a == 0 {
			continue
		}
		c := a * s.y[i]
		for j, v := range s.z[i] {
			wt[j] += c * v
		}
	}
	res := mulRR(wt, k, r, sInv)
	copy(out, res)
	s.b = m.B
	return nil
}

// transform sets z = X Q (d1×r) for X d1×d2 and Q d2×r, all row-major.
func transform(z, x, q []float64, d1, d2, r int) {
	for a := range d1 {
		row := x[a*d2 : (a+1)*d2]
		za := z[a*r : (a+1)*r]
		clear(za)
		for c, v := range row {
			if v == 0 {
				continue
			}
			qc := q[c*r : (c+1)*r]
			for k := range za {
				za[k] += v * qc[k]
			}
		}
	}
}

// transformT sets z = Xᵀ Q (d2×r) for X d1×d2 and Q d1×r, all row-major.
func transformT(z, x, q []float64, d1, d2, r int) {
	clear(z)
	for a := range d1 {
		row := x[a*d2 : (a+1)*d2]
		qa := q[a*r : (a+1)*r]
		for c, v := range row {
			if v == 0 {
				continue
			}
			zc := z[c*r : (c+1)*r]
			for k := range zc {
				zc[k] += v * qa[k]
			}
		}
	}
}

// mulRR returns A S for A k×r and S r×r, row-major.
func mulRR(a []float64, k, r int, s []float64) []float64 {
	out := make([]float64, k*r)
	for i := range k {
		ai := a[i*r : (i+1)*r]
		oi := out[i*r : (i+1)*r]
		for j, v := range ai {
			for l := range r {
				oi[l] += v * s[j*r+l]
			}
		}
	}
	return out
}

// pinvTol is the relative size below which an eigenvalue of a Gram matrix
// counts as zero in invSqrtGram.
const pinvTol = 1e-12

// invSqrtGram returns (AᵀA)^{-1/2} (r×r, row-major) for A k×r, as a
// pseudo-inverse: eigenvalues at most pinvTol·λ_max count as zero, and
// their directions map to 0. A zero A gives the zero matrix.
func invSqrtGram(a []float64, k, r int) []float64 {
	g := mat.NewSymDense(r, nil)
	for i := range r {
		for j := i; j < r; j++ {
			var v float64
			for l := range k {
				v += a[l*r+i] * a[l*r+j]
			}
			g.SetSym(i, j, v)
		}
	}
	out := make([]float64, r*r)
	var eig mat.EigenSym
	if !eig.Factorize(g, true) {
		return out
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)
	top := 0.0
	for _, l := range vals {
		top = max(top, l)
	}
	if !(top > 0) {
		return out
	}
	for e, l := range vals {
		if !(l > pinvTol*top) {
			continue
		}
		f := 1 / math.Sqrt(l)
		for i := range r {
			for j := range r {
				out[i*r+j] += f * vecs.At(i, e) * vecs.At(j, e)
			}
		}
	}
	return out
}

// objective is J at the current U, V, b.
func (s *state) objective() float64 {
	wts := product(s.u, s.v, s.p.Rows, s.p.Cols, s.p.Rank)
	return Objective(wts, s.b, s.x, s.y, s.w, s.p.C)
}

// Objective returns ½‖B‖²_F + Σ_i C w_i max(0, 1 − y_i(<B, X_i> + b)) for
// B (d1·d2 entries, row-major) and rows X; w = nil means all ones.
func Objective(B []float64, b float64, X [][]float64, y, w []float64, C float64) float64 {
	var loss float64
	for i, x := range X {
		f := b
		for j, v := range x {
			f += B[j] * v
		}
		if h := 1 - y[i]*f; h > 0 {
			if w != nil {
				h *= w[i]
			}
			loss += h
		}
	}
	var reg float64
	for _, v := range B {
		reg += v * v
	}
	return 0.5*reg + C*loss
}

// product returns U Vᵀ (d1×d2, row-major) for U d1×r and V d2×r.
func product(u, v []float64, d1, d2, r int) []float64 {
	out := make([]float64, d1*d2)
	for a := range d1 {
		ua := u[a*r : (a+1)*r]
		oa := out[a*d2 : (a+1)*d2]
		for c := range d2 {
			vc := v[c*r : (c+1)*r]
			var t float64
			for k, x := range ua {
				t += x * vc[k]
			}
			oa[c] = t
		}
	}
	return out
}

// model collects the result, with U and V rebalanced from the SVD of U Vᵀ.
func (s *state) model() *Model {
	m := &Model{
		Rows: s.p.Rows, Cols: s.p.Cols, Rank: s.p.Rank,
		B: s.b, Obj: s.obj, Iter: s.iter, Converged: s.converged,
		SMOIter: s.smoIter, Capped: s.capped, NSV: s.nsv,
		AlphaU: s.alphaU, AlphaV: s.alphaV, History: s.history,
	}
	m.U, m.V = balance(s.u, s.v, s.p.Rows, s.p.Cols, s.p.Rank)
	m.derive()
	return m
}

// balance returns U' = P Σ^{1/2}, V' = R Σ^{1/2} for the thin SVD
// U Vᵀ = P Σ Rᵀ truncated to r (exact: U Vᵀ has rank ≤ r), with the sign
// of each pair of columns fixed so that the largest entry of V' is
// positive. When the SVD fails, U and V are returned unchanged.
func balance(u, v []float64, d1, d2, r int) ([]float64, []float64) {
	bm := product(u, v, d1, d2, r)
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(d1, d2, bm), mat.SVDThin) {
		return u, v
	}
	sv := svd.Values(nil)
	var pu, rv mat.Dense
	svd.UTo(&pu)
	svd.VTo(&rv)
	nu, nv := make([]float64, d1*r), make([]float64, d2*r)
	for k := range r {
		f := math.Sqrt(max(sv[k], 0))
		sign, big := 1.0, 0.0
		for c := range d2 {
			if x := rv.At(c, k); math.Abs(x) > big {
				big, sign = math.Abs(x), math.Copysign(1, x)
			}
		}
		for a := range d1 {
			nu[a*r+k] = sign * f * pu.At(a, k)
		}
		for c := range d2 {
			nv[c*r+k] = sign * f * rv.At(c, k)
		}
	}
	return nu, nv
}
