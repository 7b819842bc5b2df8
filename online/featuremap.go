package online

import (
	"math"
	"math/rand/v2"

	"github.com/streamer/streamer/online/internal/vmath"
)

// Kernel types accepted in KernelSpec.Type.
const (
	KernelLinear     = "linear"
	KernelRBF        = "rbf"
	KernelLaplacian  = "laplacian"  // exp(−Gamma‖x − x'‖₂)
	KernelPolynomial = "polynomial" // (<x, x'> + Coef0)^Degree; exact kernel mode only
)

// KernelSpec selects a kernel and its explicit feature map φ (docs/math.md §2).
// It is the "kernel" key of the mam and omam models.
type KernelSpec struct {
	// Type is "linear", "rbf", "laplacian" or "polynomial" (the last only
	// in the exact kernel mode, budget > 0).
	Type string `yaml:"type"`
	// Gamma is the kernel width: K(x, x') = exp(−Gamma‖x − x'‖²) for "rbf",
	// exp(−Gamma‖x − x'‖₂) for "laplacian" (Gamma = 1/σ of docs/math.md §2).
	// Must be > 0 for those two (at most 1e20 with random features, whose
	// frequencies are stored in float32) and 0 for the others.
	Gamma float64 `yaml:"gamma"`
	// Features is the number D of random frequencies of the "rbf" and
	// "laplacian" maps (dim φ = 2D); must be > 0 for them and 0 for
	// "linear" (and 0 in the exact kernel mode, which has no map).
	Features int `yaml:"features"`
	// Seed fixes the random frequencies of the "rbf" and "laplacian" maps,
	// so that a restored model rebuilds the same map; 0 for the others and
	// in the exact kernel mode.
	Seed uint64 `yaml:"seed"`
	// Degree and Coef0: polynomial kernel (<x, x'> + Coef0)^Degree, Degree
	// ≥ 1, Coef0 ≥ 0 (exact kernel mode only); both 0 for other kernels.
	Degree int     `yaml:"degree"`
	Coef0  float64 `yaml:"coef0"`
	// Orthogonal draws the frequencies of the "rbf" and "laplacian" maps
	// in blocks of orthogonal directions with independent chi-distributed
	// norms (orthogonal random features, orthogonal.go) instead of
	// independently; false (the default) for the others and in the exact
	// kernel mode. False leaves the encoding of the parameters unchanged.
	Orthogonal bool `yaml:"orthogonal"`
	// Sparse generates the frequencies of the "rbf" and "laplacian" maps
	// column by column from (Seed, input index, row) where they are needed
	// instead of drawing and storing a Features × dim matrix
	// (featuremap_hashed.go): an input is projected in O(Features·nnz)
	// from its nonzero entries, whatever dim is, so that the map takes
	// hashed (sparse) features. features.hash sets it; false (the
	// default) for the others and in the exact kernel mode. False leaves
	// the encoding of the parameters unchanged.
	Sparse bool `yaml:"sparse"`
}

// Kernel defaults (the "kernel" key of mam and omam).
const (
	DefaultGamma       = 10.0 // rbf, laplacian
	DefaultRFFFeatures = 1024 // rbf, laplacian: random frequencies D
	DefaultSeed        = 1    // rbf, laplacian
	DefaultDegree      = 2    // polynomial
	DefaultCoef0       = 1.0  // polynomial
)

// DefaultKernel returns the default kernel: rbf, gamma 10, 1024 random
// frequencies, seed 1.
func DefaultKernel() KernelSpec {
	return KernelSpec{Type: KernelRBF, Gamma: DefaultGamma, Features: DefaultRFFFeatures, Seed: DefaultSeed}
}

// complete applies the defaults of the kernel's type to the keys not given
// and clears those the type does not use (given: key under the model,
// "kernel.gamma"). exact (the exact kernel mode) has no random features.
func (k *KernelSpec) complete(given func(string) bool, exact bool) {
	set := func(key string, apply func()) {
		if !given("kernel." + key) {
			apply()
		}
	}
	rff := (k.Type == KernelRBF || k.Type == KernelLaplacian) && !exact
	set("gamma", func() {
		k.Gamma = 0
		if k.Type == KernelRBF || k.Type == KernelLaplacian {
			k.Gamma = DefaultGamma
		}
	})
	set("features", func() {
		k.Features = 0
		if rff {
			k.Features = DefaultRFFFeatures
		}
	})
	set("seed", func() {
		k.Seed = 0
		if rff {
			k.Seed = DefaultSeed
		}
	})
	set("degree", func() {
		k.Degree = 0
		if k.Type == KernelPolynomial {
			k.Degree = DefaultDegree
		}
	})
	set("coef0", func() {
		k.Coef0 = 0
		if k.Type == KernelPolynomial {
			k.Coef0 = DefaultCoef0
		}
	})
	set("orthogonal", func() { k.Orthogonal = false })
	set("sparse", func() { k.Sparse = k.Sparse && rff }) // features.hash may have set it (Hashed)
}

// Limits on sizes, so that a corrupt spec or snapshot cannot ask for an
// absurd allocation.
const (
	maxDim      = 1 << 20
	maxFeatures = 1 << 16 // random frequencies D of a feature map
	maxOmega    = 1 << 24 // Features·Dim, the size of the frequency matrix (64 MiB in float32)
	// maxMapGamma bounds the gamma of a random-feature map, so that its
	// frequencies fit float32: |ω| ≤ sqrt(2γ)·|N(0,1)| for rbf and
	// γ·|N(0,1)|/|N(0,1)| for laplacian, whose generator never draws a
	// normal deviate below about 1e-10 in magnitude: |ω| < 1e32.
	maxMapGamma = 1e20
	// maxOrthoWork bounds Features·Dim·min(Features, Dim), the work of
	// the orthogonal construction's Gram–Schmidt (about 2 s on one core).
	maxOrthoWork = 1 << 31
)

// pcgStream is the second PCG seed word used to draw the RBF frequencies;
// the first is KernelSpec.Seed. Part of the model format: never change it.
const pcgStream = 0x6f6e6c696e652d31 // "online-1"

// FeatureMap is an explicit feature map φ with ‖φ(x)‖ ≤ 1 for every x, so
// that B = sup ‖φ‖ = 1 in the certainty bound (docs/math.md §3, §3):
//
//   - linear: φ(x) = x/‖x‖₂ (φ(0) = 0); dim φ = d; K(x, x') is the cosine of
//     the angle between x and x'.
//   - rbf: random Fourier features in pair form (Rahimi & Recht 2007),
//     φ(x) = sqrt(1/D)[cos(ω_k·x)]_{k=1..D} followed by
//     sqrt(1/D)[sin(ω_k·x)]_{k=1..D}, with ω_k ~ N(0, 2·Gamma·I_d) drawn
//     from a PCG generator seeded with (Seed, pcgStream); dim φ = 2D,
//     ‖φ(x)‖ = 1 and E<φ(x), φ(x')> = exp(−Gamma‖x − x'‖²).
//   - laplacian: the same pair form with ω_k drawn from the spectral density
//     of exp(−Gamma‖δ‖₂), the multivariate Cauchy distribution:
//     ω_k = Gamma·z/|u| with z ~ N(0, I_d) and u ~ N(0, 1) (z₁..z_d, then u,
//     per row, from the same PCG generator; u = 0 is redrawn), so that
//     E<φ(x), φ(x')> = exp(−Gamma‖x − x'‖₂).
//
// With Orthogonal the rbf and laplacian frequencies have the same law row
// by row but are drawn in blocks of orthogonal directions (orthogonal.go,
// which fixes the draw order). With Sparse they are generated per input
// index and row instead of drawn and stored (featuremap_hashed.go: same
// laws, another realisation), so that projecting costs O(D·nnz).
//
// Stored frequencies (not Sparse) are drawn in float64 and rounded to
// float32 (each moves by at most 2⁻²⁴ of itself, far below what the kernel
// approximation resolves); the map is exactly the random-feature map of
// the rounded frequencies, computed in float64. Stored in float32, Ω takes
// half the cache traffic per event (vmath.Matrix). Generated frequencies
// (Sparse) stay in float64.
//
// A FeatureMap is immutable after construction and safe for concurrent use.
type FeatureMap struct {
	spec   KernelSpec
	in     int          // input dimension d
	out    int          // dim φ
	omega  []float64    // rbf, laplacian: D×d frequencies, row-major, rounded to float32
	gen    *genMap      // rbf, laplacian with Sparse: generated frequencies (omega nil)
	packed vmath.Matrix // rbf, laplacian: omega packed (in float32) for project
	scale  float64      // rbf, laplacian: sqrt(1/D)
	zmult  float64      // rbf, laplacian: the projections' factor (1; see scaledMap)
}

// scaledMap returns the map of the frequencies s·ω_k, ω_k those of ref (a
// random-feature map), as gamma auto maps its bandwidths: the projections
// of ref multiplied by s; its spec has the given gamma. The tests compare
// gamma auto's bandwidths with fixed-gamma models of these maps.
func scaledMap(ref *FeatureMap, s, gamma float64) *FeatureMap {
	m := *ref
	m.spec.Gamma = gamma
	m.zmult = s * ref.zmult
	return &m
}

// NewFeatureMap builds the feature map of k for inputs of dimension dim.
func NewFeatureMap(k KernelSpec, dim int) (*FeatureMap, error) {
	if err := validateKernel(k, dim); err != nil {
		return nil, err
	}
	m := &FeatureMap{spec: k, in: dim, zmult: 1}
	switch k.Type {
	case KernelLinear:
		m.out = dim
	case KernelRBF, KernelLaplacian:
		m.out = 2 * k.Features
		m.scale = math.Sqrt(1 / float64(k.Features))
		if k.Sparse {
			m.gen = newGenMap(k)
			break
		}
		m.omega = make([]float64, k.Features*dim)
	}
	switch {
	case m.omega == nil:
	case k.Orthogonal:
		orthogonalOmega(m.omega, k, dim)
	case k.Type == KernelRBF:
		r := rand.New(rand.NewPCG(k.Seed, pcgStream))
		sd := math.Sqrt(2 * k.Gamma)
		for i := range m.omega {
			m.omega[i] = sd * r.NormFloat64()
		}
	default: // laplacian
		r := rand.New(rand.NewPCG(k.Seed, pcgStream))
		for row := range k.Features {
			z := m.omega[row*dim : (row+1)*dim]
			for j := range z {
				z[j] = r.NormFloat64()
			}
			u := r.NormFloat64()
			for u == 0 {
				u = r.NormFloat64()
			}
			s := k.Gamma / math.Abs(u)
			for j := range z {
				z[j] *= s
			}
		}
	}
	if m.omega != nil {
		for i, v := range m.omega {
			m.omega[i] = float64(float32(v))
			if math.IsInf(m.omega[i], 0) { // excluded by maxMapGamma
				return nil, specErrorf("kernel.gamma", "%v: a random frequency overflows float32", k.Gamma)
			}
		}
		m.packed = vmath.Pack(m.omega, k.Features, dim)
	}
	return m, nil
}

func validateKernel(k KernelSpec, dim int) error {
	// A generated map (Sparse) keeps nothing per input index: hashed
	// inputs up to MaxSparseDim. A stored one keeps Ω, D × dim.
	if lim := kernelMaxDim(k); dim <= 0 || dim > lim {
		return specErrorf("dim", "must be in [1, %d], got %d", lim, dim)
	}
	if k.Type != KernelPolynomial {
		if k.Degree != 0 {
			return specErrorf("kernel.degree", "only used by the polynomial kernel: must be 0, got %d", k.Degree)
		}
		if k.Coef0 != 0 {
			return specErrorf("kernel.coef0", "only used by the polynomial kernel: must be 0, got %v", k.Coef0)
		}
	}
	switch k.Type {
	case KernelLinear:
		if k.Gamma != 0 {
			return specErrorf("kernel.gamma", "not used by the linear kernel: must be 0, got %v", k.Gamma)
		}
		if k.Features != 0 {
			return specErrorf("kernel.features", "not used by the linear kernel: must be 0, got %d", k.Features)
		}
		if k.Seed != 0 {
			return specErrorf("kernel.seed", "not used by the linear kernel: must be 0, got %d", k.Seed)
		}
		if k.Orthogonal {
			return specErrorf("kernel.orthogonal", "not used by the linear kernel: must be false")
		}
		if k.Sparse {
			return specErrorf("kernel.sparse", "not used by the linear kernel (it takes sparse input as it is): must be false")
		}
	case KernelRBF, KernelLaplacian:
		if !(k.Gamma > 0) || math.IsInf(k.Gamma, 0) {
			return specErrorf("kernel.gamma", "must be > 0 and finite, got %v", k.Gamma)
		}
		if k.Gamma > maxMapGamma {
			return specErrorf("kernel.gamma", "must be at most %g with random features (their frequencies are stored in float32), got %v", maxMapGamma, k.Gamma)
		}
		if k.Features <= 0 || k.Features > maxFeatures {
			return specErrorf("kernel.features", "must be in [1, %d], got %d", maxFeatures, k.Features)
		}
		if k.Sparse {
			if k.Orthogonal {
				return specErrorf("kernel.orthogonal", "does not go with kernel.sparse: orthogonal blocks need the whole frequency matrix, which the generated map never builds")
			}
			break
		}
		if k.Features*dim > maxOmega {
			return specErrorf("kernel.features", "features×dim must be ≤ %d, got %d×%d (kernel.sparse: true generates the frequencies instead of storing them)", maxOmega, k.Features, dim)
		}
		if k.Orthogonal && k.Features*dim*min(k.Features, dim) > maxOrthoWork {
			return specErrorf("kernel.orthogonal", "features×dim×min(features, dim) must be ≤ %d (the cost of orthogonalising the frequencies), got %d×%d×%d", maxOrthoWork, k.Features, dim, min(k.Features, dim))
		}
	case KernelPolynomial:
		return specErrorf("kernel.type", "%q has no random-feature map: it needs budget > 0 (exact kernel mode)", k.Type)
	case "":
		return specErrorf("kernel.type", "missing (want %q, %q, %q, or %q with budget > 0)", KernelLinear, KernelRBF, KernelLaplacian, KernelPolynomial)
	default:
		return specErrorf("kernel.type", "unknown kernel %q (want %q, %q, %q, or %q with budget > 0)", k.Type, KernelLinear, KernelRBF, KernelLaplacian, KernelPolynomial)
	}
	return nil
}

// kernelMaxDim is the largest input dimension k's map takes: MaxSparseDim
// for the generated rbf and laplacian maps (Sparse), which keep nothing per
// input index, maxDim for the others.
func kernelMaxDim(k KernelSpec) int {
	if k.Sparse && (k.Type == KernelRBF || k.Type == KernelLaplacian) {
		return MaxSparseDim
	}
	return maxDim
}

// Spec returns the kernel spec the map was built from.
func (m *FeatureMap) Spec() KernelSpec { return m.spec }

// InputDim returns the input dimension d.
func (m *FeatureMap) InputDim() int { return m.in }

// Dim returns dim φ: d for linear, 2·Features for rbf and laplacian.
func (m *FeatureMap) Dim() int { return m.out }

// Map writes φ(x) into dst and returns ‖φ(x)‖²: for the linear map the
// sum of the squares, for rbf and laplacian the pair form's D·(1/D)
// (cos² + sin² = 1, computed as float64(D)·(a·a) with a = sqrt(1/D)). ok
// is false, and dst unspecified, when x has a NaN or infinite entry. It
// panics unless len(x) == InputDim() and len(dst) == Dim(). It does not
// allocate.
func (m *FeatureMap) Map(dst, x []float64) (sqNorm float64, ok bool) {
	if len(x) != m.in || len(dst) != m.out {
		panic("online: FeatureMap.Map: wrong slice length")
	}
	if m.omega == nil && m.gen == nil {
		sqNorm = mapLinear(dst, x)
	} else {
		m.project(dst[m.out/2:], x)
		sqNorm = sincosRFF(dst, m.scale)
	}
	if math.IsNaN(sqNorm) {
		return 0, false
	}
	return sqNorm, true
}

// project writes the random projection z = Ω x (z_k = ω_k·x, D values)
// into z. It panics unless len(x) == InputDim() and len(z) == Dim()/2 for
// a random-feature map. It does not allocate; it reads only the map, so it
// may run concurrently.
//
// The products run on a copy of Ω packed in float32 at construction
// (vmath.Matrix: panels of rows, column-major within a panel, so that one
// vector instruction multiplies four rows by the same x_j; AVX2 assembly
// on amd64), each entry converted to float64 and the products summed by
// FMA in float64.
func (m *FeatureMap) project(z, x []float64) {
	d := m.out / 2
	if (m.omega == nil && m.gen == nil) || len(x) != m.in || len(z) != d {
		panic("online: FeatureMap.project: wrong slice length or not a random-feature map")
	}
	if m.gen != nil {
		m.gen.projectDense(z, x)
	} else {
		m.packed.MulVec(z, x)
	}
	if s := m.zmult; s != 1 {
		for i := range z {
			z[i] = s * z[i]
		}
	}
}

// argBound returns max_k Σ_j |ω_kj|·|x_j| (0 for the linear map): if
// every frequency moves by at most a fraction e of itself, every
// projection ω_k·x moves by at most e·argBound(x), and so does φ(x) in
// norm (pair form: |Δcos|² + |Δsin|² ≤ Δz², averaged over the D
// frequencies).
func (m *FeatureMap) argBound(x []float64) float64 {
	d := m.in
	var mx float64
	for k := range len(m.omega) / max(d, 1) {
		var s float64
		for j, w := range m.omega[k*d : (k+1)*d] {
			s += math.Abs(w) * math.Abs(x[j])
		}
		mx = max(mx, s)
	}
	return m.zmult * mx
}

// mapLinear sets dst = x/‖x‖ (0 when x = 0) and returns ‖dst‖², NaN when x
// has a non-finite entry.
func mapLinear(dst, x []float64) float64 {
	dst = dst[:len(x)]
	var s0, s1 float64
	i := 0
	for ; i+1 < len(x); i += 2 {
		s0 += x[i] * x[i]
		s1 += x[i+1] * x[i+1]
	}
	if i < len(x) {
		s0 += x[i] * x[i]
	}
	ss := s0 + s1
	if !(ss > 0x1p-900 && ss < 0x1p900) {
		return mapLinearScaled(dst, x)
	}
	inv := 1 / math.Sqrt(ss)
	var q0, q1 float64
	i = 0
	for ; i+1 < len(x); i += 2 {
		a, b := x[i]*inv, x[i+1]*inv
		dst[i], dst[i+1] = a, b
		q0 += a * a
		q1 += b * b
	}
	if i < len(x) {
		a := x[i] * inv
		dst[i] = a
		q0 += a * a
	}
	return q0 + q1
}

// mapLinearScaled is mapLinear's rare path for a zero, non-finite, tiny or
// huge x: it scales x by a power of two to max|x_i| ∈ [0.5, 1) first.
func mapLinearScaled(dst, x []float64) float64 {
	var mx float64
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return math.NaN()
		}
		mx = max(mx, math.Abs(v))
	}
	if mx == 0 {
		clear(dst)
		return 0
	}
	_, e := math.Frexp(mx)
	var ss float64
	for i, v := range x {
		v = math.Ldexp(v, -e)
		dst[i] = v
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss)
	var q float64
	for i, v := range dst {
		v *= inv
		dst[i] = v
		q += v * v
	}
	return q
}
