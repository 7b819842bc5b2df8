package online

import (
	"math"
	"math/rand/v2"

	"github.com/streamer/streamer/online/internal/vmath"
)

// Orthogonal random features (Yu et al. 2016, "Orthogonal Random
// Features"): kernel.orthogonal true replaces the independent frequencies
// of the rbf and laplacian maps by frequencies whose directions are
// orthogonal within blocks of d = InputDim rows, with the same marginal law
// per row, so that E<φ(x), φ(x')> is still K(x, x') while the errors of the
// D products cos(ω_k·δ) partly cancel (docs/math.md §2a).
//
// Construction, part of the model format like pcgStream (a restored model
// rebuilds the map from its parameters): the D rows are built in
// ceil(D/d) blocks of m = min(d, D − b·d) rows, b = 0, 1, …, all values
// drawn with NormFloat64 from the one PCG generator seeded with
// (Seed, pcgStream). For row i = 1..m of a block, in order:
//
//  1. g: d values. It is orthogonalised against the block's rows
//     q_1..q_{i−1} by two passes of modified Gram–Schmidt
//     (v ← v − <q_j, v> q_j, j = 1..i−1, twice); if the residual after the
//     first pass has norm ≤ orthoDegenerate·‖g‖ (2⁻³⁰; a probability below
//     1e-6 per row) g is discarded and d fresh values are drawn in its place.
//     q_i = v/‖v‖. So q_1..q_m are the first m rows of the Q of G = R Q,
//     R lower triangular with a positive diagonal (Gram–Schmidt's sign
//     convention, which makes Q Haar-distributed): uniformly random
//     orthonormal directions.
//  2. ρ_i: d further values z, ρ_i = ‖z‖ (chi-distributed with d degrees
//     of freedom, independent of everything else).
//  3. laplacian only: u_i, redrawn while 0.
//
// After the block's rows: ω_i = s_i·q_i with s_i = ρ_i·sqrt(2·Gamma) (rbf)
// or s_i = ρ_i·Gamma/|u_i| (laplacian). Every row then has the law of the
// independent map's row (rbf: N(0, 2·Gamma·I_d) = sqrt(2·Gamma)·chi(d) ×
// a uniform direction; laplacian: Gamma·z/|u| with z = ρq), only the rows
// of a block are coupled. Products and sums are rounded one at a time
// (explicit float64 conversions: no fused multiply–add), so the frequencies
// are the same on every platform whose NormFloat64 is.
//
// The construction costs O(D·d·min(D, d)) operations (Gram–Schmidt), once
// per model built or restored, bounded by maxOrthoWork; mapping an input
// costs what the independent map costs.

// orthoDegenerate is the relative residual below which a Gram–Schmidt row
// is redrawn (its direction would be lost to rounding).
const orthoDegenerate = 0x1p-30

// orthogonalOmega fills omega (Features×dim, row-major) with k's orthogonal
// frequencies (k is rbf or laplacian, valid for dim).
func orthogonalOmega(omega []float64, k KernelSpec, dim int) {
	scales := orthoDirections(omega, k, dim)
	f := k.Gamma // laplacian: s_i = (ρ_i/|u_i|)·Gamma
	if k.Type == KernelRBF {
		f = math.Sqrt(2 * k.Gamma) // s_i = ρ_i·sqrt(2·Gamma)
	}
	for i, s := range scales {
		s = float64(s * f)
		row := omega[i*dim : (i+1)*dim]
		for j := range row {
			row[j] = float64(row[j] * s)
		}
	}
}

// orthoDirections draws the orthogonal construction of k (rbf or
// laplacian) for inputs of dimension dim, as described above: it writes
// the unit directions q_i into q (Features×dim, row-major) and returns the
// factors ρ_i (rbf) or ρ_i/|u_i| (laplacian), one per row.
func orthoDirections(q []float64, k KernelSpec, dim int) (scales []float64) {
	scales = make([]float64, k.Features)
	r := rand.New(rand.NewPCG(k.Seed, pcgStream))
	laplace := k.Type == KernelLaplacian
	for start := 0; start < k.Features; start += dim {
		m := min(dim, k.Features-start)
		orthoBlock(q[start*dim:(start+m)*dim], scales[start:start+m], dim, r, laplace)
	}
	return scales
}

// orthoBlock draws one block of len(scales) rows of dimension d: the
// directions into block, the factors into scales (see orthoDirections).
func orthoBlock(block, scales []float64, d int, r *rand.Rand, laplace bool) {
	for i := range scales {
		v := block[i*d : (i+1)*d]
		prev := block[:i*d]
		for {
			for j := range v {
				v[j] = r.NormFloat64()
			}
			g := math.Sqrt(vmath.Dot4(v, v))
			orthoProject(v, prev, d)
			if n := math.Sqrt(vmath.Dot4(v, v)); n > orthoDegenerate*g {
				break
			}
		}
		orthoProject(v, prev, d)
		n := math.Sqrt(vmath.Dot4(v, v))
		for j := range v {
			v[j] /= n
		}
		var rho2 float64
		for range d {
			z := r.NormFloat64()
			rho2 += float64(z * z)
		}
		s := math.Sqrt(rho2)
		if laplace {
			u := r.NormFloat64()
			for u == 0 {
				u = r.NormFloat64()
			}
			s /= math.Abs(u)
		}
		scales[i] = s
	}
}

// orthoProject removes from v its components along the orthonormal rows of
// q (row-major, d columns), one after the other (one pass of modified
// Gram–Schmidt).
func orthoProject(v, q []float64, d int) {
	for j := 0; j < len(q); j += d {
		qj := q[j : j+d]
		c := vmath.Dot4(qj, v)
		for t := range v {
			v[t] -= float64(c * qj[t])
		}
	}
}
