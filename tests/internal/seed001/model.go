package seed001

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// Kernel is an rbf kernel K(x, x') = exp(−Gamma‖x − x'‖²) that enters a
// model's combined kernel as K/V. The paper gives the width σ:
// Gamma = 1/(2σ²).
type Kernel struct{ Gamma, V float64 }

// RBF returns the kernel of width sigma and weight v: Gamma = 1/(2σ²).
func RBF(sigma, v float64) Kernel { return Kernel{Gamma: 1 / (2 * sigma * sigma), V: v} }

// Sigma returns the kernel's width σ = 1/√(2·Gamma).
func (k Kernel) Sigma() float64 { return 1 / math.Sqrt(2*k.Gamma) }

// Params are a model's parameters: the regulariser λ and the kernels whose
// combination K̄ = Σ_k K_k/V_k is the model's kernel. One kernel (V = 1) is
// LSRRank; two are MLSRRank.
type Params struct {
	Lambda  float64
	Kernels []Kernel
}

// String returns e.g. "λ=0.001 σ=4 v=1" (σ and v per kernel).
func (p Params) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "λ=%g", p.Lambda)
	for i, k := range p.Kernels {
		sfx := ""
		if len(p.Kernels) > 1 {
			sfx = fmt.Sprint(i + 1)
		}
		fmt.Fprintf(&b, " σ%s=%g v%s=%g", sfx, k.Sigma(), sfx, k.V)
	}
	return b.String()
}

// check reports parameters that do not define a model.
func (p Params) check() error {
	if !(p.Lambda > 0) {
		return fmt.Errorf("λ = %g, want > 0", p.Lambda)
	}
	if len(p.Kernels) == 0 {
		return errors.New("no kernel")
	}
	for _, k := range p.Kernels {
		if !(k.Gamma > 0) || !(k.V > 0) {
			return fmt.Errorf("kernel γ = %g, v = %g: want both > 0", k.Gamma, k.V)
		}
	}
	return nil
}

// kernel returns K̄ at squared distance d2.
func (p Params) kernel(d2 float64) float64 {
	s := 0.0
	for _, k := range p.Kernels {
		s += math.Exp(-k.Gamma*d2) / k.V
	}
	return s
}

// Fitted is a model learned from m (input, rating) pairs: f(x) = Σ_i α_i
// K̄(x_i, x).
type Fitted struct {
	p     Params
	xs    [][]float64
	alpha []float64
}

// Fit learns the model with parameters p from inputs xs and ratings ys (m
// each): α solves (H K̄ H + (mλ/2) I) α = H y, with K̄ the m×m kernel matrix
// and H = I − 11ᵀ/m the centring matrix, by Cholesky factorisation (the
// matrix is symmetric positive definite). This is the solution of the
// paper's (D K̄ + (m²λ/2) I) α = D y with D = mI − 11ᵀ: both give 1ᵀα = 0.
// Fit keeps xs (not copied) for Predict.
func Fit(p Params, xs [][]float64, ys []float64) (*Fitted, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	m := len(xs)
	if len(ys) != m {
		return nil, fmt.Errorf("%d inputs, %d ratings", m, len(ys))
	}
	k := make([]float64, m*m)
	for i := range m {
		for j := range i + 1 {
			v := p.kernel(sqDist(xs[i], xs[j]))
			k[i*m+j], k[j*m+i] = v, v
		}
	}
	alpha, err := solve(p.Lambda, k, ys)
	if err != nil {
		return nil, err
	}
	return &Fitted{p: p, xs: xs, alpha: alpha}, nil
}

// Predict returns f(x).
func (f *Fitted) Predict(x []float64) float64 {
	s := 0.0
	for i, xi := range f.xs {
		s += f.alpha[i] * f.p.kernel(sqDist(xi, x))
	}
	return s
}

// sqDist returns ‖a − b‖².
func sqDist(a, b []float64) float64 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("seed001: inputs of dimension %d and %d", len(a), len(b)))
	}
	s := 0.0
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return s
}

// solve returns α solving (H K H + (mλ/2) I) α = H y for the m×m kernel
// matrix k (row-major, symmetric), which it overwrites with the Cholesky
// factor (LAPACK's potrf and potrs directly: gonum/mat's Cholesky adds a
// condition estimate that took a fifth of a grid search's time).
func solve(lambda float64, k, y []float64) ([]float64, error) {
	m := len(y)
	if m == 0 {
		return nil, nil
	}
	fm := float64(m)
	// H K H: K_ij − r_i − r_j + g with r the row means (K is symmetric)
	// and g the grand mean.
	r := make([]float64, m)
	g := 0.0
	for i := range m {
		s := 0.0
		for _, v := range k[i*m : (i+1)*m] {
			s += v
		}
		r[i] = s / fm
		g += r[i]
	}
	g /= fm
	c := fm * lambda / 2
	for i := range m {
		for j := i; j < m; j++ {
			k[i*m+j] = k[i*m+j] - r[i] - r[j] + g
		}
		k[i*m+i] += c
	}
	ybar := 0.0
	for _, v := range y {
		ybar += v
	}
	ybar /= fm
	hy := make([]float64, m) // H y, then α
	for i, v := range y {
		hy[i] = v - ybar
	}
	u, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: m, Stride: m, Data: k})
	if !ok {
		return nil, fmt.Errorf("H K̄ H + (mλ/2) I not positive definite (m = %d, λ = %g)", m, lambda)
	}
	lapack64.Potrs(u, blas64.General{Rows: m, Cols: 1, Stride: 1, Data: hy})
	return hy, nil
}
