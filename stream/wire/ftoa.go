package wire

import (
	"math"
	"math/bits"
)

// Shortest float64 formatting: the text strconv.AppendFloat(dst, v, 'g',
// -1, 64) writes, byte for byte, in less than half its time. Every
// output record carries five or six arbitrary floats (the score, the
// mistake bound, the calibrated probability and its bounds), and strconv's
// general path (its decimal slice, then the 'e' or 'f' layout a byte at a
// time) was most of their cost; the digits here come out of one integer.
//
// The digits are those of Schubfach (R. Giulietti, "The Schubfach way to
// render doubles", 2020; the algorithm of Java's Double.toString since JDK
// 19): for v = c·2^q, the rounding interval of v scaled by 10^−k, with k
// chosen so that it holds 1 to 10 units, is computed with one 128-bit
// power of ten (pow10Table) and round-to-odd products; the shortest
// decimal in it is then s or s + 1 units, or a multiple of 10 units next to
// them, and among the shortest the one nearest v, ties to even. TestFtoa
// compares the text with strconv's on all powers of two and ten and their
// neighbours and on millions of random floats.

// appendShortest appends v, finite, as strconv.AppendFloat(dst, v, 'g',
// -1, 64) does.
func appendShortest(dst []byte, v float64) []byte {
	b := math.Float64bits(v)
	if b>>63 != 0 {
		dst = append(dst, '-')
	}
	m, e := b&(1<<52-1), int(b>>52&0x7ff)
	if m == 0 && e == 0 {
		return append(dst, '0')
	}
	d, exp := shortestDecimal(m, e)
	return appendDecimalG(dst, d, exp)
}

// shortestDecimal returns the shortest decimal d·10^exp that reads back as
// the finite, non-zero float64 of mantissa bits m and biased exponent e,
// the nearest to it among the shortest (ties: d even), without trailing
// zeros in d.
func shortestDecimal(m uint64, e int) (d uint64, exp int) {
	c, q := m, -1074 // v = c·2^q
	if e != 0 {
		c, q = m|1<<52, e-1075
		if q <= 0 && q > -53 && c&(1<<uint(-q)-1) == 0 {
			return trimZeros(c>>uint(-q), 0) // an integer below 2^53: its digits
		}
	}
	// The rounding interval of v is [v−, v+], the midpoints to its
	// neighbours, closed when c is even (a decimal halfway reads back as the
	// even one): 4c ∓ 2 in units of 2^(q−2), or 4c − 1 below when v is a
	// power of two whose lower neighbour is nearer (its spacing halves).
	even := c&1 == 0
	closer := m == 0 && e > 1
	cb := c << 2
	cbl, cbr := cb-2, cb+2
	k := (q * 1262611) >> 22 // ⌊log10 2^q⌋
	if closer {
		cbl++
		k = (q*1262611 - 524031) >> 22 // ⌊log10 (3/4)·2^q⌋
	}
	// 10^−k = g·2^r with 2^127 ≤ g < 2^128 (g rounded up), so that
	// rop(g, x·2^h) = x·2^q·10^−k for h = q + ⌊log2 10^−k⌋ + 1, in 1..4.
	h := uint(q + ((-k)*1741647)>>19 + 1)
	g := &pow10Table[-k-pow10Min]
	vbl, vb, vbr := rop(g[0], g[1], cbl<<h), rop(g[0], g[1], cb<<h), rop(g[0], g[1], cbr<<h)
	if !even {
		vbl++
		vbr--
	}
	// vb = 4v·10^−k (round to odd), and [vbl, vbr] the interval in the same
	// units, 4 to 40 of them wide: s = ⌊v·10^−k⌋. Of the multiples of 10
	// next to s (one digit fewer) at most one is inside; if none, the
	// shortest is s or s + 1 when one of them alone is inside, and the one
	// nearer v when both are.
	s := vb >> 2
	if s >= 10 {
		sp := s / 10
		up, wp := vbl <= 40*sp, 40*sp+40 <= vbr
		if up != wp {
			return trimZeros(sp+b2u(wp), k+1)
		}
	}
	u, w := vbl <= 4*s, 4*s+4 <= vbr
	if u != w {
		return trimZeros(s+b2u(w), k)
	}
	mid := 4*s + 2
	return trimZeros(s+b2u(vb > mid || vb == mid && s&1 != 0), k)
}

// rop is ⌊g·x / 2^128⌋ for g = g1·2^64 + g0, rounded to odd: its lowest
// bit set when the product's discarded bits are not (as g is rounded up,
// a remainder of at most 1 in the next word counts as none).
func rop(g1, g0, x uint64) uint64 {
	x1, _ := bits.Mul64(g0, x)
	y1, y0 := bits.Mul64(g1, x)
	y0, carry := bits.Add64(y0, x1, 0)
	return (y1 + carry) | b2u(y0 > 1)
}

// trimZeros drops d's trailing zeros into exp.
func trimZeros(d uint64, exp int) (uint64, int) {
	for d%10 == 0 {
		d /= 10
		exp++
	}
	return d, exp
}

func b2u(b bool) uint64 { return uint64(b2i(b)) }

// digitPairs holds "00" to "99".
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// put8 writes x < 10^8 as eight digits, leading zeros included: four
// pairs computed apart (no chain of divisions).
func put8(b []byte, x uint32) {
	_ = b[7]
	a, c := x/10000, x%10000
	a1, a2, c1, c2 := a/100, a%100, c/100, c%100
	b[0], b[1], b[2], b[3] = digitPairs[2*a1], digitPairs[2*a1+1], digitPairs[2*a2], digitPairs[2*a2+1]
	b[4], b[5], b[6], b[7] = digitPairs[2*c1], digitPairs[2*c1+1], digitPairs[2*c2], digitPairs[2*c2+1]
}

// appendDecimalG appends d·10^exp (d ≥ 1, without trailing zeros) in
// strconv's shortest 'g' layout: with an exponent (d.ddde±XX) when the
// decimal exponent of the first digit is below −4 or at least 6 (the
// precision 'g' takes for the shortest form), as a plain decimal
// otherwise.
func appendDecimalG(dst []byte, d uint64, exp int) []byte {
	var buf [24]byte // d's digits, right-aligned
	i := len(buf)
	if d >= 1e8 { // the last eight apart, in 32-bit halves (d < 10^17)
		hi := d / 1e8
		put8(buf[16:24], uint32(d-hi*1e8))
		i, d = 16, hi
	}
	x := uint32(d)
	for x >= 100 {
		q := x / 100
		r := x - q*100
		i -= 2
		buf[i], buf[i+1] = digitPairs[2*r], digitPairs[2*r+1]
		x = q
	}
	if x >= 10 {
		i -= 2
		buf[i], buf[i+1] = digitPairs[2*x], digitPairs[2*x+1]
	} else {
		i--
		buf[i] = byte('0' + x)
	}
	digits := buf[i:]
	nd := len(digits)
	dp := nd + exp // the decimal point's place: v = 0.digits × 10^dp
	if x := dp - 1; x < -4 || x >= 6 {
		dst = append(dst, digits[0])
		if nd > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e', '+')
		if x < 0 {
			dst[len(dst)-1] = '-'
			x = -x
		}
		if x >= 100 {
			dst = append(dst, byte('0'+x/100))
			x %= 100
		}
		return append(dst, digitPairs[2*x], digitPairs[2*x+1])
	}
	switch {
	case dp <= 0: // 0.000ddd
		dst = append(dst, "0.0000"[:2-dp]...)
		return append(dst, digits...)
	case dp < nd: // dd.ddd
		dst = append(dst, digits[:dp]...)
		dst = append(dst, '.')
		return append(dst, digits[dp:]...)
	default: // ddd000
		dst = append(dst, digits...)
		return append(dst, "00000"[:dp-nd]...)
	}
}

// appendFloat writes v in strconv's shortest 'g' form, or null when v is NaN or ±Inf.
func appendFloat(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	if b, ok := appendShortDecimal(dst, v); ok {
		return b
	}
	return appendShortest(dst, v)
}

// appendShortDecimal writes v as strconv.AppendFloat(dst, v, 'g', -1, 64)
// does when v is, to the float64, a decimal of at most six places in
// [1e-4, 1e6) (a certainty's delta, 0.05; a level of 0.9), and reports
// whether it did; the shortest search (appendShortest) costs twice as much
// on such a value, and rejecting another costs a few ns.
//
// v is such a decimal when k = v·10⁶ is an integer below 2⁵³ with
// k / 10⁶ == v: both are exact in a float64 and the division is correctly
// rounded, so v is the float64 nearest k·10⁻⁶, and the decimal k·10⁻⁶
// (its trailing zeros dropped) reads back as v. It is the shortest such
// decimal: it has at most 12 significant digits, and two decimals of at
// most 15 never read back as the same float64. In [1e-4, 1e6) 'g' writes
// it without an exponent.
func appendShortDecimal(dst []byte, v float64) ([]byte, bool) {
	a := math.Abs(v)
	if !(a >= 1e-4 && a < 1e6) {
		return dst, false
	}
	x := a * 1e6
	k := uint64(x)
	if float64(k) != x || float64(k)/1e6 != a {
		return dst, false
	}
	if v < 0 {
		dst = append(dst, '-')
	}
	d, exp := trimZeros(k, -6) // k ≥ 100 (a ≥ 1e-4)
	return appendDecimalG(dst, d, exp), true
}
