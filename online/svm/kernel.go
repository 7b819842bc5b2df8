package svm

import (
	"fmt"
	"math"

	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/internal/vmath"
)

// KernelType selects the kernel function.
type KernelType uint8

// The kernels. Linear, Polynomial, RBF and Sigmoid use LIBSVM's parameterisation, so Gamma, Coef0
// and Degree mean what svm-train's -g, -r and -d mean.
const (
	Linear     KernelType = iota // <x, x'>
	Polynomial                   // (Gamma<x, x'> + Coef0)^Degree
	RBF                          // exp(−Gamma‖x − x'‖²)
	Laplacian                    // exp(−Gamma‖x − x'‖₂) (not in LIBSVM)
	Sigmoid                      // tanh(Gamma<x, x'> + Coef0) (not positive definite)
)

func (t KernelType) String() string {
	switch t {
	case Linear:
		return "linear"
	case Polynomial:
		return "polynomial"
	case RBF:
		return "rbf"
	case Laplacian:
		return "laplacian"
	case Sigmoid:
		return "sigmoid"
	}
	return fmt.Sprintf("KernelType(%d)", uint8(t))
}

// Kernel is a kernel function with its parameters.
type Kernel struct {
	Type   KernelType
	Gamma  float64 // Polynomial, RBF, Laplacian, Sigmoid
	Coef0  float64 // Polynomial, Sigmoid
	Degree int     // Polynomial
}

func (k Kernel) validate() error {
	switch k.Type {
	case Linear:
		return nil
	case Polynomial:
		if k.Degree < 0 {
			return fmt.Errorf("svm: polynomial degree %d < 0", k.Degree)
		}
		return nil
	case RBF, Laplacian, Sigmoid:
		if !(k.Gamma > 0) && k.Type != Sigmoid {
			return fmt.Errorf("svm: %s kernel needs Gamma > 0, have %v", k.Type, k.Gamma)
		}
		return nil
	}
	return fmt.Errorf("svm: unknown kernel type %d", uint8(k.Type))
}

// Eval returns K(a, b). a and b must have the same length.
func (k Kernel) Eval(a, b []float64) float64 {
	switch k.Type {
	case Linear:
		return dot(a, b)
	case Polynomial:
		return powi(k.Gamma*dot(a, b)+k.Coef0, k.Degree)
	case RBF:
		return math.Exp(-k.Gamma * sqDist(a, b))
	case Laplacian:
		return math.Exp(-k.Gamma * math.Sqrt(sqDist(a, b)))
	case Sigmoid:
		return math.Tanh(k.Gamma*dot(a, b) + k.Coef0)
	}
	panic("svm: unknown kernel type")
}

// EvalSparse returns K(a, b) for sparse rows (see fromDot).
func (k Kernel) EvalSparse(a, b sparse.Row) float64 {
	return k.fromDot(sparse.Dot(a, b), sparse.Sq(a), sparse.Sq(b))
}

// fromDot returns K(a, b) from <a, b> = dot, ‖a‖² = sa and ‖b‖² = sb
// (the distance of rbf and laplacian by ‖a‖² + ‖b‖² − 2<a, b>, clamped
// at 0): the kernels of sparse rows. rbf uses the table exp of the dense
// kernel rows and Decision.
func (k Kernel) fromDot(dot, sa, sb float64) float64 {
	switch k.Type {
	case Linear:
		return dot
	case Polynomial:
		return powi(k.Gamma*dot+k.Coef0, k.Degree)
	case RBF:
		return vmath.ExpNeg(-k.Gamma * max(sa+sb-2*dot, 0))
	case Laplacian:
		return math.Exp(-k.Gamma * math.Sqrt(max(sa+sb-2*dot, 0)))
	case Sigmoid:
		return math.Tanh(k.Gamma*dot + k.Coef0)
	}
	panic("svm: unknown kernel type")
}

// powi is LIBSVM's powi: base^times by repeated squaring.
func powi(base float64, times int) float64 {
	tmp, ret := base, 1.0
	for t := times; t > 0; t /= 2 {
		if t%2 == 1 {
			ret *= tmp
		}
		tmp *= tmp
	}
	return ret
}

// dot is the svm's dot product, vmath.Dot4: the sums of its kernel rows
// (vmath.DotRows), bit for bit.
func dot(a, b []float64) float64 { return vmath.Dot4(a, b) }

func sqDist(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0 := a[i] - b[i]
		d1 := a[i+1] - b[i+1]
		d2 := a[i+2] - b[i+2]
		d3 := a[i+3] - b[i+3]
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
