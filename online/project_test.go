package online

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func randFloats(r *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * r.NormFloat64()
	}
	return v
}

// TestProjectFloat32: the map's frequencies are the float64 draw rounded
// to float32 (rbf, laplacian, orthogonal), and project is the product with
// them in float64: within the rounding of the sums of gonum's Dgemv on the
// same frequencies. The map of the unrounded frequencies (the map before
// they were stored in float32, which old snapshots were learned with)
// differs from it by at most 2⁻²⁴·argBound(x) in norm, the bound the
// window's restore check allows.
func TestProjectFloat32(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, spec := range []KernelSpec{
		{Type: KernelRBF, Gamma: 0.7},
		{Type: KernelLaplacian, Gamma: 0.3},
		{Type: KernelRBF, Gamma: 0.7, Orthogonal: true},
	} {
		for _, features := range []int{1, 3, 4, 15, 16, 17, 21, 64, 256, 259} {
			for _, dim := range []int{1, 2, 3, 5, 32, 33} {
				k := spec
				k.Features, k.Seed = features, uint64(features*100+dim)
				fm, err := NewFeatureMap(k, dim)
				if err != nil {
					t.Fatal(err)
				}
				raw := rawOmega(k, dim)
				for i, v := range fm.omega {
					if v != float64(float32(raw[i])) {
						t.Fatalf("%+v d=%d: ω[%d] = %v, the draw rounded to float32 is %v", k, dim, i, v, float32(raw[i]))
					}
				}
				x := randFloats(r, dim, 3)
				z := make([]float64, features)
				fm.project(z, x)
				want := make([]float64, features)
				blas64.Gemv(blas.NoTrans, 1,
					blas64.General{Rows: features, Cols: dim, Stride: dim, Data: fm.omega},
					blas64.Vector{N: dim, Inc: 1, Data: x}, 0,
					blas64.Vector{N: features, Inc: 1, Data: want})
				for i := range z {
					var mag float64
					for j := range dim {
						mag += math.Abs(fm.omega[i*dim+j] * x[j])
					}
					if d := math.Abs(z[i] - want[i]); d > 2*float64(dim)*0x1p-53*mag {
						t.Fatalf("%+v d=%d: z[%d] = %v, gonum %v", k, dim, i, z[i], want[i])
					}
				}
				// The map of the float64 frequencies.
				old := make([]float64, 2*features)
				blas64.Gemv(blas.NoTrans, 1,
					blas64.General{Rows: features, Cols: dim, Stride: dim, Data: raw},
					blas64.Vector{N: dim, Inc: 1, Data: x}, 0,
					blas64.Vector{N: features, Inc: 1, Data: old[features:]})
				for i, v := range old[features:] {
					s, c := math.Sincos(v)
					old[i], old[features+i] = fm.scale*c, fm.scale*s
				}
				phi := make([]float64, 2*features)
				fm.Map(phi, x)
				var dd float64
				for i := range phi {
					dd += (phi[i] - old[i]) * (phi[i] - old[i])
				}
				if b := 0x1p-24*fm.argBound(x) + 1e-15; math.Sqrt(dd) > b {
					t.Fatalf("%+v d=%d: ‖φ − φ_float64‖ = %v > bound %v", k, dim, math.Sqrt(dd), b)
				}
			}
		}
	}
}

// rawRounded is rawOmega rounded to float32 (the map's frequencies).
func rawRounded(k KernelSpec, dim int) []float64 {
	raw := rawOmega(k, dim)
	for i, v := range raw {
		raw[i] = float64(float32(v))
	}
	return raw
}

// rawOmega draws k's frequencies in float64 as NewFeatureMap does, before
// their rounding to float32.
func rawOmega(k KernelSpec, dim int) []float64 {
	omega := make([]float64, k.Features*dim)
	switch {
	case k.Orthogonal:
		orthogonalOmega(omega, k, dim)
	case k.Type == KernelRBF:
		r := rand.New(rand.NewPCG(k.Seed, pcgStream))
		sd := math.Sqrt(2 * k.Gamma)
		for i := range omega {
			omega[i] = sd * r.NormFloat64()
		}
	default:
		r := rand.New(rand.NewPCG(k.Seed, pcgStream))
		for row := range k.Features {
			z := omega[row*dim : (row+1)*dim]
			for j := range z {
				z[j] = r.NormFloat64()
			}
			u := r.NormFloat64()
			for u == 0 {
				u = r.NormFloat64()
			}
			for j := range z {
				z[j] *= k.Gamma / math.Abs(u)
			}
		}
	}
	return omega
}

// TestMapArgumentRange: inputs up to kafka.max_feature_abs (1e15) give
// products far beyond the table path's limit; the map stays finite, ok and
// within 5e-16 of math.Sincos, and reports ok = false for NaN and ±Inf.
func TestMapArgumentRange(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	fm := rbfMap(t, 10, 64, 8, 3)
	dst := make([]float64, fm.Dim())
	z := make([]float64, 64)
	x := make([]float64, 8)
	for _, scale := range []float64{0, 1e-310, 1e-3, 1, 1e4, sincosFastLimit / 40, 1e8, 1e15} {
		for range 50 {
			for i := range x {
				x[i] = scale * (2*r.Float64() - 1)
			}
			sq, ok := fm.Map(dst, x)
			if !ok || math.Abs(sq-1) > 1e-12 {
				t.Fatalf("scale %v: ‖φ‖² = %v, ok %v", scale, sq, ok)
			}
			fm.project(z, x)
			for k, v := range z {
				s, c := math.Sincos(v)
				if d := max(math.Abs(dst[k]-fm.scale*c), math.Abs(dst[64+k]-fm.scale*s)); d > 5e-16*fm.scale || math.IsNaN(dst[k]) {
					t.Fatalf("scale %v: feature %d (z = %v) off by %v", scale, k, v, d)
				}
			}
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		x[3] = bad
		if _, ok := fm.Map(dst, x); ok {
			t.Errorf("x with %v: ok", bad)
		}
	}
}
