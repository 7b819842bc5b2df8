package wire

import "math"

// FloatCache memoises the formatting of floats (FloatCache.AppendScore):
// a direct-mapped table of the last values formatted, by their bits. A
// value's shortest 'g' form is at most 24 bytes; a hit copies them, where
// the shortest search costs several times more. It also keeps the text of
// the last second a record was stamped in (scored_at). Its zero value is
// ready; it is not safe for concurrent use (one per encoding goroutine).
type FloatCache struct {
	e [floatCacheSize]floatEntry

	// The second of the last time written (appendTime): its Unix
	// seconds and its text, when hasSec.
	sec    int64
	second [19]byte
	hasSec bool
}

const floatCacheBits = 7
const floatCacheSize = 1 << floatCacheBits

type floatEntry struct {
	bits uint64
	n    uint8 // 0: empty
	b    [24]byte
}

// appendFloat is the package's appendFloat through c (nil: none).
func (c *FloatCache) appendFloat(dst []byte, v float64) []byte {
	if c == nil {
		return appendFloat(dst, v)
	}
	bits := math.Float64bits(v)
	e := &c.e[(bits*0x9E3779B97F4A7C15)>>(64-floatCacheBits)]
	if e.n != 0 && e.bits == bits {
		return append(dst, e.b[:e.n]...)
	}
	start := len(dst)
	dst = appendFloat(dst, v)
	if n := len(dst) - start; n <= len(e.b) {
		e.bits, e.n = bits, uint8(copy(e.b[:], dst[start:]))
	}
	return dst
}
