package rank

import (
	"errors"
	"fmt"
	"math"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("rank: bad configuration")

// KernelType selects a kernel. The zero value is RBF.
type KernelType uint8

const (
	// RBF is K(x, x') = exp(−Gamma‖x − x'‖²).
	RBF KernelType = iota
	// Linear is K(x, x') = <x, x'>.
	Linear
)

func (t KernelType) String() string {
	switch t {
	case RBF:
		return "rbf"
	case Linear:
		return "linear"
	}
	return fmt.Sprintf("KernelType(%d)", t)
}

// Kernel is one kernel K_t of a (possibly multiscale) combination with its
// weight V (v_t of seed 001, Theorem 1). A zero V means 1.
type Kernel struct {
	Type  KernelType
	Gamma float64 // RBF width, > 0; must be 0 for Linear
	V     float64 // weight v_t ≥ 0 (0 = 1); normalised so that min v_t = 1
}

// kernels is the combined kernel K̄ = Σ_t K_t / v_t of docs/math.md §8, with the
// weights normalised (v_t ← v_t / min v).
type kernels struct {
	ks  []Kernel  // normalised: every V ≥ 1, min V = 1
	inv []float64 // 1 / V
}

// newKernels validates ks and normalises the weights.
func newKernels(ks []Kernel) (kernels, error) {
	if len(ks) == 0 {
		return kernels{}, fmt.Errorf("%w: no kernels", ErrConfig)
	}
	if len(ks) > 64 {
		return kernels{}, fmt.Errorf("%w: %d kernels (at most 64)", ErrConfig, len(ks))
	}
	out := kernels{ks: make([]Kernel, len(ks)), inv: make([]float64, len(ks))}
	vmin := math.Inf(1)
	for i, k := range ks {
		if k.V == 0 {
			k.V = 1
		}
		switch {
		case k.Type == RBF && !(k.Gamma > 0 && !math.IsInf(k.Gamma, 1)):
			return kernels{}, fmt.Errorf("%w: kernel %d: rbf gamma must be finite and > 0, got %v", ErrConfig, i, k.Gamma)
		case k.Type == Linear && k.Gamma != 0:
			return kernels{}, fmt.Errorf("%w: kernel %d: linear kernel takes no gamma", ErrConfig, i)
		case k.Type > Linear:
			return kernels{}, fmt.Errorf("%w: kernel %d: unknown type %d", ErrConfig, i, k.Type)
		case !(k.V > 0 && !math.IsInf(k.V, 1)):
			return kernels{}, fmt.Errorf("%w: kernel %d: weight v must be finite and > 0, got %v", ErrConfig, i, k.V)
		}
		out.ks[i] = k
		vmin = min(vmin, k.V)
	}
	for i := range out.ks {
		out.ks[i].V /= vmin
		out.inv[i] = 1 / out.ks[i].V
	}
	return out, nil
}

// singleRBF returns γ when K̄ is one rbf kernel of weight 1 (then
// K̄(a, b) = exp(−γ‖a − b‖²), eval's value to the bit).
func (k *kernels) singleRBF() (gamma float64, ok bool) {
	if len(k.ks) == 1 && k.ks[0].Type == RBF && k.inv[0] == 1 {
		return k.ks[0].Gamma, true
	}
	return 0, false
}

func dotp(a, b []float64) float64 {
	b = b[:len(a)]
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}
