package rank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/streamer/streamer/online/internal/dense"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/internal/vmath"
)

// Method selects the problem the exact solver solves.
type Method uint8

const (
	// LSRRank is least-squares regularised ranking (seed 001, Lemma 1; with
	// several kernels MLSRRank, Theorem 1, through K̄): with H = I − 11ᵀ/m,
	//
	//	(H K̄ H + (mλ/2) I) α = H y,   f(x) = Σ αᵢ K̄(xᵢ, x) + b,
	//
	// and b = ȳ − (1/m) Σᵢ (K̄α)ᵢ, so that the mean fitted value equals the
	// mean target. The pairwise loss does not see b; it only puts f on the
	// scale of y (MSD, M1D and every rank measure ignore it).
	LSRRank Method = iota
	// KRR is kernel ridge regression (seed 003 §9), with scikit-learn's
	// KernelRidge(alpha=λ) scaling and no intercept:
	//
	//	(K̄ + λ I) α = y,   f(x) = Σ αᵢ K̄(xᵢ, x).
	KRR
)

func (m Method) String() string {
	switch m {
	case LSRRank:
		return "LSRRank"
	case KRR:
		return "KRR"
	}
	return fmt.Sprintf("Method(%d)", m)
}

// Config configures an exact fit.
type Config struct {
	Method  Method
	Kernels []Kernel // one kernel: LSRRank; several: MLSRRank with K̄ = Σ K_t/v_t
	Lambda  float64  // λ > 0
}

// ErrNotPD is returned when the system matrix is not numerically positive
// definite (λ too small for the data).
var ErrNotPD = errors.New("rank: system matrix not positive definite")

// Model is a fitted exact-kernel model: f(x) = Σ αᵢ K̄(xᵢ, x) + b. It is
// immutable and safe for concurrent use.
type Model struct {
	method Method
	k      kernels
	lambda float64
	d      int
	x      []float64 // m rows of d, row-major (nil with sparse rows)
	alpha  []float64
	b      float64
	// packed holds x and alpha again, packed eight rows to a panel, when
	// the rows are dense: Predict's path (vmath's rbf sum for one rbf
	// kernel, else mixtureRows), 8·m·d bytes more.
	packed *vmath.Rows

	// Sparse rows (FitSparse): the rows, their squared norms, their
	// inverted index.
	sx []sparse.Row
	sq []float64
	ix *sparse.Index
}

// Fit solves the exact problem of cfg.Method on the m rows of X (row-major,
// d columns) with targets y, by one Cholesky factorisation of the m × m
// system (online/internal/dense). It costs O(m²d) for the kernel matrix
// (built on all CPUs) and m³/3 flops for the factorisation; ctx is checked
// between the stages, not inside the factorisation. X and y are copied.
func Fit(ctx context.Context, X []float64, d int, y []float64, cfg Config) (*Model, error) {
	m := len(y)
	if d < 1 || len(X) != m*d {
		return nil, fmt.Errorf("%w: X has %d values for %d rows of %d", ErrConfig, len(X), m, d)
	}
	if err := checkProblem(y, cfg); err != nil {
		return nil, err
	}
	ks, err := newKernels(cfg.Kernels)
	if err != nil {
		return nil, err
	}
	mod := &Model{method: cfg.Method, k: ks, lambda: cfg.Lambda, d: d,
		x: append([]float64(nil), X...)}

	a := make([]float64, m*m) // upper triangle used
	if err := gramUpper(ctx, a, mod.x, d, &ks); err != nil {
		return nil, err
	}
	alpha, b, err := solveGram(ctx, a, m, y, cfg.Method, cfg.Lambda)
	if err != nil {
		return nil, err
	}
	mod.alpha, mod.b = alpha, b
	mod.pack()
	return mod, nil
}

// pack builds m.packed for a dense model.
func (m *Model) pack() {
	if m.sx == nil && m.x != nil {
		r := vmath.PackRows(m.x, len(m.alpha), m.d, m.alpha)
		m.packed = &r
	}
}

// mixturePanels is how many panels mixtureRows computes at a time (its
// scratch, on the stack).
const mixturePanels = 32

// mixtureRows sets acc[8(p − p0) + l] = K̄(row 8p + l, x) for the panels
// p0 ≤ p < p1 (p1 − p0 ≤ mixturePanels) of the packed rows r: the squared
// distances by vmath's FMA panels and their exps eight at a time
// (vmath.ExpNegScaled, ExpNeg's bits) for the rbf terms, Dot4's sums for
// the linear ones, each term times 1/v_t added in the kernels' order. The
// Gram matrix and Predict both take their entries from it.
func (k *kernels) mixtureRows(acc []float64, r *vmath.Rows, x []float64, p0, p1 int) {
	var d2, e, dots [8 * mixturePanels]float64
	n := 8 * (p1 - p0)
	acc = acc[:n]
	clear(acc)
	haveD2, haveDot := false, false
	for t, kt := range k.ks {
		inv := k.inv[t]
		switch kt.Type {
		case RBF:
			if !haveD2 {
				r.SqDistsRange(d2[:n], x, p0, p1)
				haveD2 = true
			}
			ex := e[:n]
			vmath.ExpNegScaled(ex, d2[:n], -kt.Gamma)
			for j, v := range ex {
				acc[j] += v * inv
			}
		case Linear:
			if !haveDot {
				r.Dots4(dots[:n], x, p0, p1)
				haveDot = true
			}
			for j, v := range dots[:n] {
				acc[j] += v * inv
			}
		}
	}
}

// solveGram solves the system of method for the m × m kernel matrix whose
// upper triangle is in a (overwritten) and returns α and b.
func solveGram(ctx context.Context, a []float64, m int, y []float64, method Method, lambda float64) ([]float64, float64, error) {
	fm := float64(m)
	alpha := make([]float64, m)
	var ybar float64
	for _, v := range y {
		ybar += v
	}
	ybar /= fm
	var rows []float64 // row sums of K̄ (LSRRank)
	switch method {
	case LSRRank:
		rows = rowSumsUpper(a, m)
		var g float64
		for _, r := range rows {
			g += r
		}
		g /= fm * fm
		ridge := fm * lambda / 2
		for i := range m {
			ri := rows[i]/fm - g
			row := a[i*m : (i+1)*m]
			for j := i; j < m; j++ {
				row[j] -= ri + rows[j]/fm
			}
			row[i] += ridge
			alpha[i] = y[i] - ybar
		}
	case KRR:
		for i := range m {
			a[i*m+i] += lambda
		}
		copy(alpha, y)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := cholSolve(a, m, alpha); err != nil {
		return nil, 0, err
	}
	var b float64
	if method == LSRRank {
		var s float64
		for i, r := range rows {
			s += r * alpha[i]
		}
		b = ybar - s/fm
	}
	return alpha, b, nil
}

// cholSolve solves A z = rhs in place for SPD A (upper triangle of a,
// overwritten by its factor), on all CPUs (online/internal/dense: the
// recursive Cholesky on the AVX2 micro-kernel; 0.09 s at m = 2 000 and
// 0.49 s at m = 4 000 on two cores here, 11-15× faster than gonum's Dpotrf).
func cholSolve(a []float64, m int, rhs []float64) error {
	if !dense.Cholesky(a, m, m, runtime.GOMAXPROCS(0)) {
		return ErrNotPD
	}
	dense.CholeskySolve(a, m, m, rhs)
	return nil
}

// gramUpper fills the upper triangle of the m × m matrix a with K̄(xᵢ, xⱼ),
// rows spread over GOMAXPROCS goroutines.
//
// For one rbf kernel the entries are those Predict sums (vmath.Rows.RBFSum,
// bit for bit): the squared distances of a row to the rows from its panel
// of eight on (vmath.Rows.SqDists), then their exps eight at a time
// (vmath.ExpNegScaled). A mixture's entries are mixtureRows', Predict's
// too.
func gramUpper(ctx context.Context, a, x []float64, d int, k *kernels) error {
	m := len(x) / d
	workers := min(runtime.GOMAXPROCS(0), max(1, m/64))
	g, rbf := k.singleRBF()
	rows := vmath.PackRows(x, m, d, make([]float64, m))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []float64
			if rbf {
				buf = make([]float64, (m+7)/8*8)
			}
			for i := w; i < m; i += workers { // interleaved: balanced triangle
				if i%64 == w && ctx.Err() != nil {
					return
				}
				xi := x[i*d : (i+1)*d]
				row := a[i*m : (i+1)*m]
				if rbf {
					p0 := i / 8
					rows.SqDists(buf, xi, p0)
					e := buf[i-8*p0 : m-8*p0]
					vmath.ExpNegScaled(e, e, -g)
					copy(row[i:], e)
					continue
				}
				// A mixture: mixtureRows' entries, Predict's to the bit.
				var acc [8 * mixturePanels]float64
				np := (m + 7) / 8
				for p0 := i / 8; p0 < np; p0 += mixturePanels {
					p1 := min(np, p0+mixturePanels)
					k.mixtureRows(acc[:], &rows, xi, p0, p1)
					lo := max(i, 8*p0)
					copy(row[lo:min(m, 8*p1)], acc[lo-8*p0:])
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// rowSumsUpper returns the row sums of the symmetric matrix whose upper
// triangle is in a.
func rowSumsUpper(a []float64, m int) []float64 {
	r := make([]float64, m)
	for i := range m {
		row := a[i*m : (i+1)*m]
		s := row[i]
		for j := i + 1; j < m; j++ {
			s += row[j]
			r[j] += row[j]
		}
		r[i] += s
	}
	return r
}

// Predict returns f(x). It does not allocate.
func (m *Model) Predict(x []float64) float64 {
	if len(x) != m.d {
		panic(fmt.Sprintf("rank: Predict: %d features, want %d", len(x), m.d))
	}
	if m.sx != nil {
		return m.predictDenseSparseModel(x)
	}
	// Every dense model is packed (Fit and the decoder call pack).
	if g, ok := m.k.singleRBF(); ok {
		// K̄ = exp(−γ‖xᵢ − x‖²) alone: vmath's rbf sum over the packed
		// rows (AVX-512F: eight rows at a time, its exp within 1 ulp),
		// about 20 times a loop of math.Exp.
		return m.b + m.packed.RBFSum(x, g)
	}
	// A mixture: its entries a block of panels at a time
	// (mixtureRows), Σ_i α_i K̄(x_i, x) in row order.
	var acc [8 * mixturePanels]float64
	s := m.b
	np, n := (len(m.alpha)+7)/8, len(m.alpha)
	for p0 := 0; p0 < np; p0 += mixturePanels {
		p1 := min(np, p0+mixturePanels)
		m.k.mixtureRows(acc[:], m.packed, x, p0, p1)
		for j, a := range m.alpha[8*p0 : min(n, 8*p1)] {
			s += a * acc[j]
		}
	}
	return s
}

// Method returns the fitted problem.
func (m *Model) Method() Method { return m.method }

// N is the number of training examples m.
func (m *Model) N() int { return len(m.alpha) }

// Dim is the input dimension d.
func (m *Model) Dim() int { return m.d }

// Alpha returns the coefficients αᵢ (a view: do not modify).
func (m *Model) Alpha() []float64 { return m.alpha }

// Offset returns b (0 for KRR).
func (m *Model) Offset() float64 { return m.b }

// Kernels returns the kernels with normalised weights.
func (m *Model) Kernels() []Kernel { return append([]Kernel(nil), m.k.ks...) }

// checkProblem checks what Fit and FitSparse share: at least two targets,
// all finite, a known method and a finite lambda > 0.
func checkProblem(y []float64, cfg Config) error {
	m := len(y)
	if m < 2 {
		return fmt.Errorf("%w: %d examples (need ≥ 2)", ErrConfig, m)
	}
	if cfg.Method > KRR {
		return fmt.Errorf("%w: unknown method %d", ErrConfig, cfg.Method)
	}
	if !(cfg.Lambda > 0 && !math.IsInf(cfg.Lambda, 1)) {
		return fmt.Errorf("%w: lambda must be finite and > 0, got %v", ErrConfig, cfg.Lambda)
	}
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: target %d is %v", ErrConfig, i, v)
		}
	}
	return nil
}
