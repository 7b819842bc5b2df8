package svm

import (
	"context"
	"math"

	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/internal/vmath"
)

// tau is LIBSVM's TAU: the curvature used when a pair's quad_coef is not positive.
const tau = 1e-12

// ctxCheckEvery is how many SMO iterations pass between context checks.
const ctxCheckEvery = 256

const (
	atLower int8 = iota
	atUpper
	free
)

// qmatrix computes and caches the rows of Q_ij = y_i y_j K(x_i, x_j). x, y and the diagonal
// follow the solver's swaps.
type qmatrix struct {
	k     Kernel
	x     [][]float64
	sq    []float64 // ‖x_i‖²
	y     []float64
	qd    []float64 // Q_ii
	cache *cache
	ex    []float64 // a row's dot products
	// px holds x again packed eight rows to a panel (vmath.PackPanels),
	// following the swaps: the dot products of an rbf or linear row, a
	// panel at a time (nil for other kernels and sparse rows).
	px []float64

	// Sparse rows (x nil): sx follows the swaps, orig maps a position to
	// the row's index in ix (the rows in their original order), acc holds
	// a row's dot products with every row, in that order.
	sx   []sparse.Row
	orig []int32
	ix   *sparse.Index
	acc  []float64
	nnz  int // entries of all rows
}

func newQMatrix(k Kernel, x [][]float64, y []float64, cacheBytes int64) *qmatrix {
	l := len(x)
	q := &qmatrix{k: k, x: x, y: y, sq: make([]float64, l), qd: make([]float64, l), cache: newCache(l, cacheBytes),
		ex: make([]float64, l+16)} // + 16: the panels around a partial row
	for i := range x {
		q.sq[i] = dot(x[i], x[i])
		q.qd[i] = k.Eval(x[i], x[i])
	}
	if (k.Type == RBF || k.Type == Linear) && l > 0 && len(x[0]) > 0 {
		d := len(x[0])
		for _, r := range x {
			if len(r) != d {
				return q
			}
		}
		q.px = vmath.PackPanels(x, d)
	}
	return q
}

// dots returns <x_i, x_j> for start ≤ j < start + n, each summed as Dot4
// sums it: from the panels that hold those rows (the panels' extra rows
// computed and dropped), else row by row.
func (q *qmatrix) dots(i, start, n int) []float64 {
	xi := q.x[i]
	if q.px == nil {
		ex := q.ex[:n]
		vmath.DotRows(ex, xi, q.x[start:start+n]) // four rows' products at a time
		return ex
	}
	d := len(xi)
	p0, p1 := start/8, (start+n+7)/8
	buf := q.ex[:(p1-p0)*8]
	vmath.PanelDots4(buf, q.px[p0*8*d:p1*8*d], xi) // a panel of eight rows at a time
	return buf[start-p0*8 : start-p0*8+n]
}

// newSparseQMatrix is newQMatrix for sparse rows.
func newSparseQMatrix(k Kernel, x []sparse.Row, y []float64, cacheBytes int64) *qmatrix {
	l := len(x)
	q := &qmatrix{k: k, sx: x, y: y, sq: make([]float64, l), qd: make([]float64, l), cache: newCache(l, cacheBytes),
		orig: make([]int32, l), ix: sparse.NewIndex(x), acc: make([]float64, l), ex: make([]float64, l)}
	for i, r := range x {
		s := sparse.Sq(r)
		q.sq[i] = s
		q.qd[i] = k.fromDot(s, s, s)
		q.orig[i] = int32(i)
		q.nnz += r.Len()
	}
	return q
}

func (q *qmatrix) swapIndex(i, j int) {
	q.cache.swapIndex(i, j)
	if q.x == nil {
		q.sx[i], q.sx[j] = q.sx[j], q.sx[i]
		q.orig[i], q.orig[j] = q.orig[j], q.orig[i]
	} else {
		q.x[i], q.x[j] = q.x[j], q.x[i]
		if q.px != nil {
			vmath.SwapPanelRows(q.px, len(q.x[i]), i, j)
		}
	}
	q.sq[i], q.sq[j] = q.sq[j], q.sq[i]
	q.y[i], q.y[j] = q.y[j], q.y[i]
	q.qd[i], q.qd[j] = q.qd[j], q.qd[i]
}

// row returns Q[i][0:n).
func (q *qmatrix) row(i, n int) []float32 {
	data, start := q.cache.get(i, n)
	if start < n {
		q.fill(i, data[start:n], start)
	}
	return data[:n]
}

// fill computes Q[i][start+k] into dst[k].
func (q *qmatrix) fill(i int, dst []float32, start int) {
	if q.x == nil {
		q.fillSparse(i, dst, start)
		return
	}
	xi, yi := q.x[i], q.y[i]
	xs := q.x[start : start+len(dst)]
	ys := q.y[start : start+len(dst)]
	switch q.k.Type {
	case RBF:
		ex := q.dots(i, start, len(dst))
		// y_i·y_j·ExpNeg(−γ·max(‖x_i‖² + ‖x_j‖² − 2<x_i, x_j>, 0)), eight at a time
		vmath.RBFRow32(dst, ex, q.sq[start:start+len(dst)], ys, q.sq[i], yi, -q.k.Gamma)
	case Linear:
		ex := q.dots(i, start, len(dst))
		for j, d := range ex {
			dst[j] = float32(yi * ys[j] * d)
		}
	default:
		k := q.k
		for j := range dst {
			dst[j] = float32(yi * ys[j] * k.Eval(xi, xs[j]))
		}
	}
}

// fillSparse is fill for sparse rows: the dot products from the inverted
// index (all l at once) when a good part of the row is wanted, else a
// merge per entry.
func (q *qmatrix) fillSparse(i int, dst []float32, start int) {
	xi, yi, sqi := q.sx[i], q.y[i], q.sq[i]
	ys := q.y[start : start+len(dst)]
	sqs := q.sq[start : start+len(dst)]
	l := len(q.sx)
	// Dots costs about l + the shared entries, a merge per entry about
	// nnz_i + nnz_j.
	ex := q.ex[:len(dst)] // the dot products
	if len(dst)*(xi.Len()+q.nnz/l) >= l+xi.Len()*(q.nnz/l) {
		q.ix.Dots(q.acc, xi)
		for j, o := range q.orig[start : start+len(dst)] {
			ex[j] = q.acc[o]
		}
	} else {
		for j, xj := range q.sx[start : start+len(dst)] {
			ex[j] = sparse.Dot(xi, xj)
		}
	}
	if q.k.Type != RBF {
		for j, dot := range ex {
			dst[j] = float32(yi * ys[j] * q.k.fromDot(dot, sqi, sqs[j]))
		}
		return
	}
	// rbf: fromDot's distances and their exps, eight at a time.
	vmath.RBFRow32(dst, ex, sqs, ys, sqi, yi, -q.k.Gamma)
}

// solver is LIBSVM's Solver (Fan, Chen and Lin 2005) for the C-SVC dual
//
//	min ½αᵀQα − eᵀα  s.t.  yᵀα = 0, 0 ≤ α_i ≤ C_i,
//
// with WSS 2, shrinking and gradient reconstruction. Indices are permuted by shrinking;
// activeSet maps them back.
type solver struct {
	l          int
	activeSize int
	y          []float64
	g          []float64 // gradient of the objective
	gBar       []float64 // Σ_{α_j = C_j} C_j Q_ij
	alpha      []float64
	status     []int8
	c          []float64
	activeSet  []int
	q          *qmatrix
	eps        float64
	unshrink   bool
	shrinking  bool
	iter       int
	maxIter    int
}

func (s *solver) updateStatus(i int) {
	switch {
	case s.alpha[i] >= s.c[i]:
		s.status[i] = atUpper
	case s.alpha[i] <= 0:
		s.status[i] = atLower
	default:
		s.status[i] = free
	}
}

func (s *solver) swapIndex(i, j int) {
	s.q.swapIndex(i, j) // swaps y too (shared slice)
	s.g[i], s.g[j] = s.g[j], s.g[i]
	s.status[i], s.status[j] = s.status[j], s.status[i]
	s.alpha[i], s.alpha[j] = s.alpha[j], s.alpha[i]
	s.activeSet[i], s.activeSet[j] = s.activeSet[j], s.activeSet[i]
	s.gBar[i], s.gBar[j] = s.gBar[j], s.gBar[i]
	s.c[i], s.c[j] = s.c[j], s.c[i]
}

// reconstructGradient recomputes G on the inactive indices from gBar and the free α.
func (s *solver) reconstructGradient() {
	l, as := s.l, s.activeSize
	if as == l {
		return
	}
	for j := as; j < l; j++ {
		s.g[j] = s.gBar[j] - 1
	}
	nrFree := 0
	for j := 0; j < as; j++ {
		if s.status[j] == free {
			nrFree++
		}
	}
	if nrFree*l > 2*as*(l-as) {
		for i := as; i < l; i++ {
			qi := s.q.row(i, as)
			var acc float64
			for j := 0; j < as; j++ {
				if s.status[j] == free {
					acc += s.alpha[j] * float64(qi[j])
				}
			}
			s.g[i] += acc
		}
	} else {
		for i := 0; i < as; i++ {
			if s.status[i] == free {
				vmath.AddScaled32(s.g[as:l], s.q.row(i, l)[as:], s.alpha[i])
			}
		}
	}
}

// selectWorkingSet is WSS 2; it reports false when the KKT violation is below eps.
func (s *solver) selectWorkingSet() (int, int, bool) {
	as := s.activeSize
	y, g, st := s.y[:as], s.g[:as], s.status[:as]
	// i: the largest −y_t·G_t over I_up (y = +1 below C, y = −1 above 0),
	// the last index on ties.
	gmax, i := vmath.WSSMax(y, g, st, atUpper, atLower)
	// j: over I_low, the least −(G_max + y_t·G_t)²/quad_it among those
	// with a positive difference, and G_max2 = max y_t·G_t for the
	// stopping test (vmath.WSSSecond: eight indices at a time).
	var gmax2 float64
	gminIdx := -1
	if i != -1 {
		gmax2, _, gminIdx = vmath.WSSSecond(s.q.row(i, as), s.q.qd[:as], y, g, st, atLower, atUpper, gmax, s.q.qd[i], y[i], tau)
	} else {
		// No i: still compute gmax2 so the stopping test is LIBSVM's.
		gmax2 = math.Inf(-1)
		for j := range y {
			if y[j] > 0 {
				if st[j] != atLower && g[j] >= gmax2 {
					gmax2 = g[j]
				}
			} else if st[j] != atUpper && -g[j] >= gmax2 {
				gmax2 = -g[j]
			}
		}
	}
	if gmax+gmax2 < s.eps || gminIdx == -1 {
		return 0, 0, false
	}
	return i, gminIdx, true
}

func (s *solver) beShrunk(i int, gmax1, gmax2 float64) bool {
	switch s.status[i] {
	case atUpper:
		if s.y[i] > 0 {
			return -s.g[i] > gmax1
		}
		return -s.g[i] > gmax2
	case atLower:
		if s.y[i] > 0 {
			return s.g[i] > gmax2
		}
		return s.g[i] > gmax1
	}
	return false
}

func (s *solver) doShrinking() {
	gmax1, gmax2 := math.Inf(-1), math.Inf(-1)
	for i := 0; i < s.activeSize; i++ {
		if s.y[i] > 0 {
			if s.status[i] != atUpper && -s.g[i] >= gmax1 {
				gmax1 = -s.g[i]
			}
			if s.status[i] != atLower && s.g[i] >= gmax2 {
				gmax2 = s.g[i]
			}
		} else {
			if s.status[i] != atUpper && -s.g[i] >= gmax2 {
				gmax2 = -s.g[i]
			}
			if s.status[i] != atLower && s.g[i] >= gmax1 {
				gmax1 = s.g[i]
			}
		}
	}
	if !s.unshrink && gmax1+gmax2 <= s.eps*10 {
		s.unshrink = true
		s.reconstructGradient()
		s.activeSize = s.l
	}
	for i := 0; i < s.activeSize; i++ {
		if s.beShrunk(i, gmax1, gmax2) {
			s.activeSize--
			for s.activeSize > i {
				if !s.beShrunk(s.activeSize, gmax1, gmax2) {
					s.swapIndex(i, s.activeSize)
					break
				}
				s.activeSize--
			}
		}
	}
}

// initGradient sets G = Qα − e and gBar from the (feasible) starting α.
func (s *solver) initGradient(ctx context.Context) error {
	l := s.l
	for i := 0; i < l; i++ {
		s.g[i] = -1
		s.gBar[i] = 0
	}
	for i := 0; i < l; i++ {
		if s.status[i] == atLower {
			continue
		}
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		qi := s.q.row(i, l)
		vmath.AddScaled32(s.g[:l], qi, s.alpha[i])
		if s.status[i] == atUpper {
			vmath.AddScaled32(s.gBar[:l], qi, s.c[i])
		}
	}
	return nil
}

// solve runs SMO. It returns ctx.Err() when the context ends.
func (s *solver) solve(ctx context.Context) error {
	l := s.l
	s.activeSize = l
	for i := 0; i < l; i++ {
		s.activeSet[i] = i
		s.updateStatus(i)
	}
	if err := s.initGradient(ctx); err != nil {
		return err
	}
	counter := min(l, 1000) + 1
	done := ctx.Done()
	for s.iter < s.maxIter {
		if s.iter%ctxCheckEvery == 0 && done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		counter--
		if counter == 0 {
			counter = min(l, 1000)
			if s.shrinking {
				s.doShrinking()
			}
		}
		i, j, ok := s.selectWorkingSet()
		if !ok {
			s.reconstructGradient()
			s.activeSize = l
			i, j, ok = s.selectWorkingSet()
			if !ok {
				break
			}
			counter = 1 // shrink at the next iteration
		}
		s.iter++
		s.step(i, j)
	}
	if s.activeSize < l {
		s.reconstructGradient()
		s.activeSize = l
	}
	return nil
}

// step solves the two-variable subproblem on (i, j) and updates G and gBar.
func (s *solver) step(i, j int) {
	as := s.activeSize
	qi := s.q.row(i, as)
	qj := s.q.row(j, as)
	ci, cj := s.c[i], s.c[j]
	oldAi, oldAj := s.alpha[i], s.alpha[j]
	ai, aj := oldAi, oldAj
	qd := s.q.qd
	if s.y[i] != s.y[j] {
		quad := qd[i] + qd[j] + 2*float64(qi[j])
		if quad <= 0 {
			quad = tau
		}
		delta := (-s.g[i] - s.g[j]) / quad
		diff := ai - aj
		ai += delta
		aj += delta
		if diff > 0 {
			if aj < 0 {
				aj, ai = 0, diff
			}
		} else if ai < 0 {
			ai, aj = 0, -diff
		}
		if diff > ci-cj {
			if ai > ci {
				ai, aj = ci, ci-diff
			}
		} else if aj > cj {
			aj, ai = cj, cj+diff
		}
	} else {
		quad := qd[i] + qd[j] - 2*float64(qi[j])
		if quad <= 0 {
			quad = tau
		}
		delta := (s.g[i] - s.g[j]) / quad
		sum := ai + aj
		ai -= delta
		aj += delta
		if sum > ci {
			if ai > ci {
				ai, aj = ci, sum-ci
			}
		} else if aj < 0 {
			aj, ai = 0, sum
		}
		if sum > cj {
			if aj > cj {
				aj, ai = cj, sum-cj
			}
		} else if ai < 0 {
			ai, aj = 0, sum
		}
	}
	s.alpha[i], s.alpha[j] = ai, aj
	dai, daj := ai-oldAi, aj-oldAj
	vmath.AddPair32(s.g[:as], qi, qj, dai, daj) // G += Q_i·Δα_i + Q_j·Δα_j, four at a time
	ui, uj := s.status[i] == atUpper, s.status[j] == atUpper
	s.updateStatus(i)
	s.updateStatus(j)
	if ui != (s.status[i] == atUpper) {
		s.addGBar(i, ci, ui)
	}
	if uj != (s.status[j] == atUpper) {
		s.addGBar(j, cj, uj)
	}
}

func (s *solver) addGBar(i int, c float64, wasUpper bool) {
	qi := s.q.row(i, s.l)
	if wasUpper {
		c = -c
	}
	vmath.AddScaled32(s.gBar[:len(qi)], qi, c)
}

// rho is LIBSVM's calculate_rho: the average of y_i G_i over free α, or the midpoint of the
// feasible interval when none is free. b = −rho.
func (s *solver) rho() float64 {
	nrFree := 0
	ub, lb := math.Inf(1), math.Inf(-1)
	sumFree := 0.0
	for i := 0; i < s.activeSize; i++ {
		yG := s.y[i] * s.g[i]
		switch s.status[i] {
		case atUpper:
			if s.y[i] < 0 {
				ub = min(ub, yG)
			} else {
				lb = max(lb, yG)
			}
		case atLower:
			if s.y[i] > 0 {
				ub = min(ub, yG)
			} else {
				lb = max(lb, yG)
			}
		default:
			nrFree++
			sumFree += yG
		}
	}
	if nrFree > 0 {
		return sumFree / float64(nrFree)
	}
	return (ub + lb) / 2
}
