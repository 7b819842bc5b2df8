package online

import "math"

// Table-driven sin/cos for the random-feature map.
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
// Measured against math.Sincos the absolute difference is ≤ 2.3e-16 and
// cos² + sin² = 1 to 4.5e-16, as for math.Sincos itself; it is about 1.5×
// faster than math.Sincos in the feature-map loop (no branches on the
// quadrant, about 40 instructions per argument).
const (
	sincosN = 256 // table entries per turn; a power of 2

	// θ = 2π/sincosN = (π/2)/64 in three parts: the standard library's
	// PI4A, PI4B, PI4C (π/4 split) times 2/64.
	thetaA = 7.85398125648498535156e-1 / 32
	thetaB = 3.77489470793079817668e-8 / 32
	thetaC = 2.69515142907905952645e-15 / 32

	invTheta = sincosN / (2 * math.Pi)

	// roundMagic: adding it rounds a float64 of magnitude < 2⁵¹ to an
	// integer held in the low bits of the mantissa.
	roundMagic = 0x1.8p52

	// sincosFastLimit bounds the arguments of the table path (|q| < 2²³);
	// larger ones, ±Inf and NaN go to math.Sincos.
	sincosFastLimit = 1 << 17
)

// sinTable[j] = sin(j·θ). Entries are computed from arguments in [0, π/4]
// (octant symmetry), where the rounding of j·θ costs < 1e-16.
var sinTable = func() (t [sincosN]float64) {
	const quarter = sincosN / 4
	theta := 2 * math.Pi / sincosN
	for j := range t {
		m := j % quarter
		var s, c float64
		if m <= quarter/2 {
			s, c = math.Sincos(float64(m) * theta)
		} else {
			c, s = math.Sincos(float64(quarter-m) * theta)
		}
		for range j / quarter { // rotate by π/2
			s, c = c, -s
		}
		t[j] = s
	}
	return t
}()

// sincosRFF turns the products z_k = ω_k·x held in p[D:2D] (D = len(p)/2)
// into the random-feature pair form: p[k] = a·cos(z_k), p[D+k] = a·sin(z_k).
// It returns Σ p[i]², NaN when some z_k is not finite.
func sincosRFF(p []float64, a float64) float64 {
	d := len(p) / 2
	cs := p[:d:d]
	sn := p[d : 2*d : 2*d]
	var sq0, sq1 float64
	for k, x := range sn {
		var sin, cos float64
		if math.Abs(x) < sincosFastLimit {
			t := x*invTheta + roundMagic
			q := t - roundMagic
			j := math.Float64bits(t) // low bits: q mod sincosN
			r := ((x - q*thetaA) - q*thetaB) - q*thetaC
			u := r * r
			sr := r + r*u*(-1.0/6+u*(1.0/120))
			cm := u * (-0.5 + u*(1.0/24-u*(1.0/720)))
			sq := sinTable[j&(sincosN-1)]
			cq := sinTable[(j+sincosN/4)&(sincosN-1)]
			sin = sq + (sq*cm + cq*sr)
			cos = cq + (cq*cm - sq*sr)
		} else {
			sin, cos = math.Sincos(x)
		}
		sin *= a
		cos *= a
		cs[k] = cos
		sn[k] = sin
		sq0 += cos * cos
		sq1 += sin * sin
	}
	return sq0 + sq1
}
