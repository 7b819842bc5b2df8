package online

import "github.com/streamer/streamer/online/internal/vmath"

// The random-feature map's sin/cos (vmath.Sincos, vmath.SincosRFF):
// table-driven, eight arguments per instruction on amd64 with AVX-512 (four
// with AVX2).
//
// x is reduced to x = q·θ + r with θ = 2π/sincosN = π/16, q the nearest
// integer to x/θ and |r| ≤ θ/2 + tiny ≈ 0.0982, by two FMAs (Cody–Waite:
// θ = θa + θb with θa = fl(π)/16; q·θa and q·θb are exact inside the FMA).
// Then, with (s_q, c_q) = (sin, cos)(q·θ) from a table of 16 entries and a
// sign, and polynomials for sin r (to r⁷, minimax) and cos r − 1 (to r⁸,
// Taylor), both within 3e-17,
//
//	sin x = s_q + (s_q·(cos r − 1) + c_q·sin r)
//	cos x = c_q + (c_q·(cos r − 1) − s_q·sin r).
//
// The table path takes |x| < sincosFastLimit = 2¹⁷; larger arguments go to
// math.Sincos (Payne–Hanek for the largest), and ±Inf and NaN give NaN
// (the map then reports ok = false). The arguments are the products ω_k·x:
// finite inputs are bounded by kafka.max_feature_abs (1e15), so
// |ω_k·x| ≤ 1e15·‖ω_k‖₁, which exceeds 2¹⁷ for large inputs or gamma;
// those arguments take the fallback, which is exact to math.Sincos.
//
// Measured against math.Sincos the absolute difference is ≤ 2.3e-16 and
// cos² + sin² = 1 to 1e-15 (tests here and in vmath). The assembly (AVX-512,
// AVX2) and the portable code (build tag purego, other architectures) give
// the same bits.
const (
	sincosN         = vmath.SincosN         // table entries per turn
	sincosFastLimit = vmath.SincosFastLimit // arguments of the table path: |x| < 2¹⁷
)

// sincosRFF turns the products z_k = ω_k·x held in p[D:2D] (D = len(p)/2)
// into the random-feature pair form: p[k] = a·cos(z_k), p[D+k] = a·sin(z_k).
// It returns the pair form's ‖p‖² = D·a², NaN when some z_k is not finite.
// It does not allocate.
func sincosRFF(p []float64, a float64) float64 { return vmath.SincosRFF(p, a) }
