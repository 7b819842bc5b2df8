package online

import (
	"math"

	"github.com/streamer/streamer/online/internal/vmath"
)

// Exact kernels (docs/math.md §2), evaluated on stored examples by the exact
// kernel mode of mam (Spec.Budget > 0, see ExactMAM):
//
//   - "linear": K(x, x') = <x, x'>/(‖x‖‖x'‖) (0 when x or x' is 0), the
//     same normalised-input kernel as the linear feature map, so that
//     K(x, x) ≤ 1 and B = 1;
//   - "rbf": K(x, x') = exp(−gamma‖x − x'‖²);
//   - "laplacian": K(x, x') = exp(−gamma‖x − x'‖₂) (Euclidean norm;
//     gamma = 1/σ of docs/math.md §2);
//   - "polynomial": K(x, x') = (<x, x'> + coef0)^degree on the raw inputs,
//     degree ≥ 1, coef0 ≥ 0. K(x, x) = (‖x‖² + coef0)^degree grows without
//     limit in ‖x‖, so no B holds for every input and models publish no
//     certainty bound with it.
//
// The first three have K(x, x) ≤ 1 and B = sup sqrt(K(z, z)) = 1.

// kernelKind enumerates the exact kernels.
type kernelKind uint8

const (
	kindLinear kernelKind = iota + 1
	kindRBF
	kindLaplacian
	kindPolynomial
)

// Limits of the exact kernel mode.
const (
	maxDegree = 64
	// maxPolySelf bounds K(x, x) of an input of the polynomial kernel; a
	// larger value is refused like a non-finite input, so that the pair
	// sums over a budget (≤ Budget²·maxPolySelf by Cauchy–Schwarz) cannot
	// overflow.
	maxPolySelf = 0x1p500
	// maxDistInputSq bounds ‖x‖² of an input of rbf and laplacian (entries
	// up to about 1e150), so that ‖x − x'‖² ≤ 2¹⁰⁰² is finite.
	maxDistInputSq = 0x1p1000
)

// Kernel is an exact kernel function K(x, x') for inputs of a fixed
// dimension (see the list above). It is a small value, safe for concurrent
// use.
type Kernel struct {
	kind   kernelKind
	dim    int
	gamma  float64
	degree int
	coef0  float64
}

// NewKernel returns the exact kernel of k for inputs of dimension dim. k
// must be valid for the exact kernel mode: Features and Seed must be 0 and
// Orthogonal false (there is no random-feature map), Gamma > 0 exactly for
// rbf and laplacian, Degree ≥ 1 and Coef0 ≥ 0 exactly for polynomial.
func NewKernel(k KernelSpec, dim int) (Kernel, error) {
	if err := validateExactKernel(k, dim); err != nil {
		return Kernel{}, err
	}
	kk := Kernel{dim: dim, gamma: k.Gamma, degree: k.Degree, coef0: k.Coef0}
	switch k.Type {
	case KernelLinear:
		kk.kind = kindLinear
	case KernelRBF:
		kk.kind = kindRBF
	case KernelLaplacian:
		kk.kind = kindLaplacian
	case KernelPolynomial:
		kk.kind = kindPolynomial
	}
	return kk, nil
}

func validateExactKernel(k KernelSpec, dim int) error {
	if dim <= 0 || dim > maxDim {
		return specErrorf("dim", "must be in [1, %d], got %d", maxDim, dim)
	}
	if k.Features != 0 {
		return specErrorf("kernel.features", "not used in the exact kernel mode (budget > 0): remove it (got %d)", k.Features)
	}
	if k.Seed != 0 {
		return specErrorf("kernel.seed", "not used in the exact kernel mode (budget > 0): remove it (got %d)", k.Seed)
	}
	if k.Orthogonal {
		return specErrorf("kernel.orthogonal", "not used in the exact kernel mode (budget > 0): remove it")
	}
	switch k.Type {
	case KernelLinear, KernelRBF, KernelLaplacian, KernelPolynomial:
	case "":
		return specErrorf("kernel.type", "missing (want %q, %q, %q or %q)", KernelLinear, KernelRBF, KernelLaplacian, KernelPolynomial)
	default:
		return specErrorf("kernel.type", "unknown kernel %q (want %q, %q, %q or %q)", k.Type, KernelLinear, KernelRBF, KernelLaplacian, KernelPolynomial)
	}
	if k.Type == KernelRBF || k.Type == KernelLaplacian {
		if !(k.Gamma > 0) || math.IsInf(k.Gamma, 0) {
			return specErrorf("kernel.gamma", "must be > 0 and finite, got %v", k.Gamma)
		}
	} else if k.Gamma != 0 {
		return specErrorf("kernel.gamma", "not used by the %s kernel: must be 0, got %v", k.Type, k.Gamma)
	}
	if k.Type == KernelPolynomial {
		if k.Degree < 1 || k.Degree > maxDegree {
			return specErrorf("kernel.degree", "must be in [1, %d], got %d", maxDegree, k.Degree)
		}
		if !(k.Coef0 >= 0) || math.IsInf(k.Coef0, 0) {
			return specErrorf("kernel.coef0", "must be ≥ 0 and finite, got %v", k.Coef0)
		}
		return nil
	}
	if k.Degree != 0 {
		return specErrorf("kernel.degree", "only used by the polynomial kernel: must be 0, got %d", k.Degree)
	}
	if k.Coef0 != 0 {
		return specErrorf("kernel.coef0", "only used by the polynomial kernel: must be 0, got %v", k.Coef0)
	}
	return nil
}

// Dim returns the input dimension.
func (k Kernel) Dim() int { return k.dim }

// Bound returns B = sup_z sqrt(K(z, z)) and whether it is finite: 1 for
// linear (normalised inputs), rbf and laplacian; none for polynomial.
func (k Kernel) Bound() (B float64, ok bool) {
	if k.kind == kindPolynomial {
		return math.Inf(1), false
	}
	return 1, true
}

// Eval returns K(x, z). It panics unless len(x) == len(z) == Dim(). A NaN
// or infinite entry gives NaN (or an infinite value for polynomial).
func (k Kernel) Eval(x, z []float64) float64 {
	if len(x) != k.dim || len(z) != k.dim {
		panic("online: Kernel.Eval: wrong slice length")
	}
	switch k.kind {
	case kindLinear:
		// Scale each input by a power of two first, as mapLinear does, so
		// that neither tiny nor huge entries under- or overflow.
		sx, sz := pow2Scale(x), pow2Scale(z)
		if sx == 0 || sz == 0 {
			return 0
		}
		var xz, xx, zz float64
		for i := range x {
			a, b := x[i]*sx, z[i]*sz
			xz += a * b
			xx += a * a
			zz += b * b
		}
		return xz / (math.Sqrt(xx) * math.Sqrt(zz))
	case kindRBF:
		return math.Exp(-k.gamma * sqDist(x, z))
	case kindLaplacian:
		return math.Exp(-k.gamma * math.Sqrt(sqDist(x, z)))
	default:
		return powInt(dot(x, z)+k.coef0, k.degree)
	}
}

// pow2Scale returns 2^−e with max|x_i|·2^−e ∈ [0.5, 1), 0 when x is 0, NaN
// when x has a non-finite entry.
func pow2Scale(x []float64) float64 {
	var mx float64
	for _, v := range x {
		if !isFinite(v) {
			return math.NaN()
		}
		mx = max(mx, math.Abs(v))
	}
	if mx == 0 {
		return 0
	}
	_, e := math.Frexp(mx)
	return math.Ldexp(1, -e)
}

// prepare writes the stored form of x into dst (x/‖x‖ for linear, x
// itself otherwise) and returns K(x, x); ok is false when x has a non-finite
// entry, or is too large to be used safely: for polynomial K(x, x) > 2⁵⁰⁰,
// for rbf and laplacian ‖x‖² > 2¹⁰⁰⁰.
func (k *Kernel) prepare(dst, x []float64) (self float64, ok bool) {
	switch k.kind {
	case kindLinear:
		sq := mapLinear(dst, x)
		return sq, !math.IsNaN(sq)
	case kindPolynomial:
		for _, v := range x {
			if !isFinite(v) {
				return 0, false
			}
		}
		copy(dst, x)
		self = powInt(dot(x, x)+k.coef0, k.degree)
		return self, self <= maxPolySelf
	default:
		// ‖x‖² ≤ 2¹⁰⁰⁰ (false for a NaN or infinite entry) keeps every
		// distance between stored inputs finite.
		if sq := dot(x, x); !(sq <= maxDistInputSq) {
			return 0, false
		}
		copy(dst, x)
		return 1, true
	}
}

// row computes the kernel row of a prepared x against the stored examples
// xs (row-major, len(dst) rows of Dim() values): K(xs_i, x) = dst[i]·e^−s
// for the returned s ≥ 0. For rbf and laplacian s = gamma·m with m the
// smallest distance (docs/math.md §3, Numerics), so that the nearest example has
// dst[i] = 1 however large gamma is, and the row's sums keep their sign and
// their relative precision where e^−s underflows; for linear and polynomial
// dst[i] = K(xs_i, x) and s = 0.
func (k *Kernel) row(dst, xs, x []float64) (s float64) {
	d := k.dim
	xs = xs[:len(dst)*d]
	switch k.kind {
	case kindLinear, kindPolynomial:
		for i := range dst {
			dst[i] = dot(xs[i*d:(i+1)*d], x)
		}
		if k.kind == kindPolynomial {
			for i, v := range dst {
				dst[i] = powInt(v+k.coef0, k.degree)
			}
		}
		return 0
	}
	m := math.Inf(1)
	if d == 8 { // the common small case, unrolled
		x8 := x[:8]
		for i := range dst {
			r := xs[i*8 : i*8+8 : i*8+8]
			a0, a1 := r[0]-x8[0], r[1]-x8[1]
			a2, a3 := r[2]-x8[2], r[3]-x8[3]
			a4, a5 := r[4]-x8[4], r[5]-x8[5]
			a6, a7 := r[6]-x8[6], r[7]-x8[7]
			v := ((a0*a0 + a1*a1) + (a2*a2 + a3*a3)) + ((a4*a4 + a5*a5) + (a6*a6 + a7*a7))
			dst[i] = v
			if v < m {
				m = v
			}
		}
	} else {
		for i := range dst {
			v := sqDist(xs[i*d:(i+1)*d], x)
			dst[i] = v
			if v < m {
				m = v
			}
		}
	}
	if len(dst) == 0 {
		return 0
	}
	g := k.gamma
	if k.kind == kindLaplacian {
		for i, v := range dst {
			dst[i] = math.Sqrt(v)
		}
		m = math.Sqrt(m)
	}
	vmath.ExpShiftRow(dst, g, m) // e^−(g·(d − m)), eight at a time
	return g * m
}

// sqDist returns ‖a − b‖², len(a) == len(b).
func sqDist(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// powInt returns x^n for n ≥ 1 by repeated squaring.
func powInt(x float64, n int) float64 {
	r := 1.0
	for {
		if n&1 != 0 {
			r *= x
		}
		if n >>= 1; n == 0 {
			return r
		}
		x *= x
	}
}
