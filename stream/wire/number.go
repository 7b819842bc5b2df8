package wire

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unsafe"
)

//go:generate go run gen_pow5.go

// The exponents of pow5, the Eisel–Lemire table (pow5_table.go): w·10^q
// with w < 2^64 is below half the smallest subnormal for q < minPow5 and
// above the largest float64 for q > maxPow5.
const minPow5, maxPow5 = -342, 308

type numStatus int

const (
	numOK numStatus = iota
	numSyntax
	numWrongType
	numNonFinite
	numSlow // parseNumber's own: the number is left to strconv
)

// parseNumber parses the JSON number at src[start:] and returns its value,
// bit for bit what strconv.ParseFloat returns for the same bytes, the
// index after it and its status. On numWrongType (src[start] does not
// begin a number) the index is start; on numSyntax it is that of the byte
// that broke the grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// (what follows a valid number, such as the 1 of 01, is the caller's to
// reject). numNonFinite is a number beyond the float64 range (1e999).
//
// The fraction's digits are read eight at a time (the integer part's one
// at a time: it is short). A significand of at most 19 digits is exact in
// a uint64 w: when w ≤ 2^53 and the decimal exponent q is in
// [−22, 22], w and 10^|q| are exact float64 values and one IEEE
// multiplication or division rounds correctly (Clinger's fast path);
// otherwise the Eisel–Lemire algorithm (Lemire, "Number Parsing at a
// Gigabyte per Second", 2021) multiplies w by a 128-bit approximation of
// 5^q and rounds, unless the product is too close to a rounding boundary
// to tell. A longer significand is cut to 19 digits w: when w and w+1
// round to the same float64, so does every number between them. The rest
// (ambiguous products, exact ties, subnormal and overflowing results) is
// strconv.ParseFloat's.
func parseNumber(src []byte, start int) (float64, int, numStatus) {
	v, end, st := fastNumber(src, start)
	if st == numSlow {
		v, st = slowNumber(src[start:end])
	}
	return v, end, st
}

// shortNumber parses the number at src[i:] when it has the most common
// short form, -?d.d{1,7} (one digit before the point, one to seven after
// it, no exponent), as fastNumber would, and reports whether it had: the
// features of an event written with a fixed number of decimals. Its
// value w·10^−n has w < 10^8, so one division rounds correctly
// (Clinger's fast path). It reads eleven bytes from i, so it returns
// false with fewer.
func shortNumber(src []byte, i int) (float64, int, bool) {
	if i < 0 || i+11 > len(src) {
		return 0, i, false
	}
	// The number past its sign, if any (without a branch: features are
	// signed as often as not), indexed by constants below: one bounds
	// check here, none there.
	neg := src[i] == '-'
	j := i + b2i(neg)
	b := src[j : j+10 : j+10]
	d0 := b[0] - '0'
	if d0 > 9 || b[1] != '.' {
		return 0, i, false
	}
	x := binary.LittleEndian.Uint64(b[2:10])
	n := leadingDigits(x) & 7 // 8 (more digits) is 0 here, refused as none
	if n == 0 || byte(x>>(8*n))|0x20 == 'e' {
		return 0, i, false
	}
	return signed(float64(int64(uint64(d0)*upow10[n]+digitsValue(x, n)))/pow10[n], neg), j + 2 + n, true // below 10^8: an int64 converts without uint64's branch
}

// slowNumber parses a valid JSON number literal with strconv.
func slowNumber(lit []byte) (float64, numStatus) {
	v, err := strconv.ParseFloat(unsafe.String(&lit[0], len(lit)), 64)
	if err != nil || math.IsInf(v, 0) { // the grammar is valid, so err is ErrRange: overflow
		return 0, numNonFinite
	}
	return v, numOK
}

// fastNumber is parseNumber without strconv: numSlow (the grammar is
// valid) is a number it leaves to strconv.ParseFloat.
func fastNumber(src []byte, start int) (float64, int, numStatus) {
	i := start
	if i >= len(src) {
		return 0, start, numWrongType
	}
	// The sign without a branch: features are signed as often as not,
	// so a branch would mispredict every other number.
	neg := src[i] == '-'
	i += b2i(neg)
	if i >= len(src) || !isDigit(src[i]) {
		if i == start {
			return 0, start, numWrongType
		}
		return 0, i, numSyntax
	}
	first := i // the first digit of the significand
	var w uint64
	// Integer parts are short (one digit for most floats as printed),
	// where a byte loop is cheaper than a word. A leading 0 stands alone:
	// what follows it is the caller's to reject. (Checked after the loop,
	// where it is rare, not before it, where features in (−1, 1) as often
	// as not would make the branch mispredict every other number.)
	for ; i < len(src) && isDigit(src[i]); i++ {
		w = w*10 + uint64(src[i]-'0') // wraps past 19 digits: see below
	}
	if i-first > 1 && src[first] == '0' {
		return signed(0, neg), first + 1, numOK
	}
	nd := i - first // digits, leading zeros included
	q := 0
	if i < len(src) && src[i] == '.' {
		i++
		f := i
		// Eight bytes at a time while there are eight to read: the
		// digits among them, and on to the next eight if all are.
		for i+8 <= len(src) {
			x := binary.LittleEndian.Uint64(src[i:])
			n := leadingDigits(x)
			if n == 0 {
				break
			}
			w = w*upow10[n] + digitsValue(x, n)
			i += n
			if n < 8 {
				break
			}
		}
		for ; i < len(src) && isDigit(src[i]); i++ { // the last bytes of src
			w = w*10 + uint64(src[i]-'0')
		}
		if i == f {
			return 0, i, numSyntax
		}
		nd += i - f
		q = f - i
	}
	if i < len(src) && src[i]|0x20 == 'e' {
		i++
		eneg := false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			eneg = src[i] == '-'
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			return 0, i, numSyntax
		}
		e, huge := 0, false
		for ; i < len(src) && isDigit(src[i]); i++ {
			if e < 1<<20 { // e·10 + 9 fits in 32 bits
				e = e*10 + int(src[i]-'0')
			} else {
				huge = true
			}
		}
		if huge { // 0 or infinite, unless the significand is as long
			return 0, i, numSlow
		}
		if eneg {
			e = -e
		}
		q += e
	}
	if nd > 19 { // w wrapped around if more than 19 digits are significant
		nd = significantDigits(src, first, nd)
		if nd > 800 {
			// strconv.ParseFloat (Go 1.26) misrounds some numbers of
			// more than 800 significant digits ("1" and 1 099 zeros
			// "e-1099" gives 1e-300): left to it, so that every result
			// is strconv's, as encoding/json's.
			return 0, i, numSlow
		}
	}
	switch {
	case nd == 0 || w == 0 && nd <= 19:
		return signed(0, neg), i, numOK
	case nd <= 19:
		if w <= 1<<53 && q >= -22 && q <= 22 {
			f := float64(w)
			if q > 0 {
				f *= pow10[q]
			} else if q < 0 {
				f /= pow10[-q]
			}
			return signed(f, neg), i, numOK
		}
		if f, ok := eiselLemire(w, q); ok {
			return signed(f, neg), i, numOK
		}
	default:
		// The value lies in [w·10^q, (w+1)·10^q) for the first 19
		// significant digits w.
		w, q := first19(src, first, q+nd-19)
		if f, ok := eiselLemire(w, q); ok {
			if g, ok := eiselLemire(w+1, q); ok && f == g {
				return signed(f, neg), i, numOK
			}
		}
	}
	return 0, i, numSlow
}

// signed is f (≥ +0) with its sign set when neg, without a branch.
func signed(f float64, neg bool) float64 {
	return math.Float64frombits(math.Float64bits(f) | uint64(b2i(neg))<<63)
}

// b2i is 1 for true and 0 for false (a flag set from the comparison).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pow10 holds the powers of ten that are exact in a float64.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// upow10[n] is 10^n for n in [0, 8].
var upow10 = [9]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8}

// leadingDigits returns how many of the bytes of x, taken from the lowest
// (the first in memory), are ASCII digits before the first that is not.
// A byte is flagged (its high bit set in t) if it is below '0' (x − '0'
// borrows) or above '9' (x + 0x46 reaches 0x80, or, from 0xba up, x − '0'
// has its high bit set). Borrows and carries only move upwards, out of a
// flagged byte, so the lowest flagged byte is the first non-digit.
func leadingDigits(x uint64) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	t := ((x + lo*(0x80-'9'-1)) | (x - lo*'0')) & hi
	return bits.TrailingZeros64(t) >> 3 // 8 when t is 0
}

// digitsValue returns the value of the 1 ≤ n ≤ 8 leading ASCII digits of x
// (the first the most significant). The digits are moved to the top
// bytes, zeros (leading zeros) below them; then each byte k becomes the
// two-digit value 10·d_k + d_(k+1) (from x·10 + x>>8: at most 99, no
// carry), and the pairs in bytes 0, 2, 4 and 6 are weighted by 10^6,
// 10^4, 10^2 and 1 in two multiplications, bytes 0 and 4 in one, 2 and 6
// in the other, whose sums land in bits 32–63.
func digitsValue(x uint64, n int) uint64 {
	const lo = 0x0101010101010101
	x = (x - lo*'0') << ((64 - 8*n) & 63) // the borrows of the bytes past n go out at the top
	x = x*10 + x>>8
	const m = 0x000000ff000000ff
	return ((x&m)*(100+1000000<<32) + (x>>16&m)*(1+10000<<32)) >> 32
}

// significantDigits returns the number of digits of the significand
// that starts at src[first] and has nd digits, leading zeros (of 0.000…)
// not counted.
func significantDigits(src []byte, first, nd int) int {
	for i := first; nd > 0 && (src[i] == '0' || src[i] == '.'); i++ {
		if src[i] == '0' {
			nd--
		}
	}
	return nd
}

// first19 returns the first 19 significant digits of the significand at
// src[first:] (it has more) as an integer, and q.
func first19(src []byte, first, q int) (uint64, int) {
	var w uint64
	n := 0
	for i := first; n < 19; i++ {
		c := src[i]
		if c == '.' || c == '0' && n == 0 {
			continue
		}
		w = w*10 + uint64(c-'0')
		n++
	}
	return w, q
}

// eiselLemire returns w·10^q, w ≠ 0, rounded to the nearest float64 (ties
// to even), and true; or false when it cannot tell: q out of the table's
// range, a subnormal or an infinite result, a product whose discarded
// bits may carry into the kept ones, or an exact tie.
//
// w is shifted so that its top bit is set and multiplied by the 128-bit
// approximation T of 5^q (see gen_pow5.go); the top 64 bits of the
// 192-bit product w·T hold the 54 bits of a float64 significand and its
// rounding bit, and the binary exponent is ⌊q·log2 10⌋ − (w's shift) + a
// constant. First w times T's high word only: the low word adds less than
// w to the product's middle word, which only matters when the 9 bits
// below the kept ones are all ones (a carry may reach them). Then with the
// low word too, where only a middle word of all ones leaves the outcome
// open (section 5 of the paper). A product whose bits below the rounding
// bit are all zero may be an exact tie between two float64 values, which
// 128 bits cannot settle: left to strconv when the tie would round to
// even downwards.
func eiselLemire(w uint64, q int) (float64, bool) {
	if q < minPow5 || q > maxPow5 {
		return 0, false
	}
	shift := bits.LeadingZeros64(w)
	w <<= shift
	t := &pow5[q-minPow5]
	hi, mid := bits.Mul64(w, t[0])
	if hi&0x1ff == 0x1ff && mid+w < mid {
		lhi, llo := bits.Mul64(w, t[1])
		m := mid + lhi
		if m < mid {
			hi++
		}
		if hi&0x1ff == 0x1ff && m+1 == 0 && llo+w < llo {
			return 0, false
		}
		mid = m
	}
	top := int(hi >> 63)   // 1 if the product has 192 bits, 0 if 191
	sig := hi >> (9 + top) // 54 bits: the significand and the rounding bit
	if mid == 0 && hi&0x1ff == 0 && sig&3 == 1 {
		return 0, false // maybe halfway, the even float64 below
	}
	sig = (sig + sig&1) >> 1
	// 217706/2^16 is log2 10 closely enough that the floor is exact for
	// every q of the table (TestLog2Pow10).
	exp := (217706*q)>>16 + 1023 + 64 - shift - (1 - top)
	if sig >= 1<<53 { // rounded up to the next power of two
		sig >>= 1
		exp++
	}
	if exp <= 0 || exp >= 0x7ff {
		return 0, false
	}
	return math.Float64frombits(uint64(exp)<<52 | sig&(1<<52-1)), true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
