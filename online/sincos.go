package online

import "github.com/streamer/streamer/online/internal/vmath"

// The random-feature map's sin/cos (vmath.Sincos, vmath.SincosRFF):
// table-driven, four arguments per instruction on amd64 with AVX2.
//
// x is reduced to x = q·θ + r with θ = 2π/sincosN, q the nearest integer to
// x/θ and |r| ≤ θ/2 ≈ 0.0123 (Cody–Waite: θ is split into three parts, the
// first two with few enough significant bits that q·θa and q·θb are exact
// for |q| < 2²³). Then, with (s_q, c_q) = (sin, cos)(q·θ) from a table and
// short Taylor polynomials for sin r and cos r − 1 (truncation < 1e-17),
//
//	sin x = s_q + (s_q·(cos r − 1) + c_q·sin r)
//	cos x = c_q + (c_q·(cos r − 1) − s_q·sin r).
//
// The table path takes |x| < sincosFastLimit = 2¹⁷ (|q| < 5.4·10⁶ < 2²³);
// larger arguments go to math.Sincos (Payne–Hanek for the largest), and
// ±Inf and NaN give NaN (the map then reports ok = false). The arguments
// are the products ω_k·x: finite inputs are bounded by
// kafka.max_feature_abs (1e15), so |ω_k·x| ≤ 1e15·‖ω_k‖₁, which exceeds
// 2¹⁷ for large inputs or gamma; those arguments take the fallback, which
// is exact to math.Sincos.
//
// Measured against math.Sincos the absolute difference is ≤ 2.3e-16 and
// cos² + sin² = 1 to 4.5e-16, as for math.Sincos itself (tests here and in
// vmath). The assembly and the portable code (build tag purego, other
// architectures) give the same bits.
const (
	sincosN         = vmath.SincosN         // table entries per turn
	sincosFastLimit = vmath.SincosFastLimit // arguments of the table path: |x| < 2¹⁷

	// roundMagic: adding it rounds a float64 of magnitude < 2⁵¹ to an
	// integer held in the low bits of the mantissa (also used by
	// expNegRow).
	roundMagic = 0x1.8p52
)

// sincosRFF turns the products z_k = ω_k·x held in p[D:2D] (D = len(p)/2)
// into the random-feature pair form: p[k] = a·cos(z_k), p[D+k] = a·sin(z_k).
// It returns Σ p[i]², NaN when some z_k is not finite. It does not
// allocate.
//
// The sum of squares runs in eight accumulators (the cosines' and the
// sines' of the features k ≡ l mod 4), combined at the end; each feature
// is the same to the bit as before the vectorisation, only Σ p[i]² may
// differ in its last bits.
func sincosRFF(p []float64, a float64) float64 { return vmath.SincosRFF(p, a) }
