package calibrate

import (
	"math"
	"slices"
)

// Refits on a sliding window. The engine refits a model's table every K
// pairs on the window's newest pairs (Window.CopyRecentTo), so from one fit
// to the next at most K pairs leave and K enter out of n (K = 100, n = 2000
// by default). Sorting the n values again costs O(n log n) and was most of
// a fit; the sorted values of the last fit, less the leaving ones and
// merged with the entering ones (each sorted, O(K log K)), give the same
// sorted values in O(n + K log K). A slide keeps what that needs.

// slide is the previous fit's input: a copy of its pairs and the stream
// index of the first (Window.Added() counts them), and whether the
// sorted values kept alongside are those of these pairs.
type slide struct {
	prev   []Pair
	first  int64
	valid  bool
	scores []float64 // scratch: the leaving or entering values
}

// step returns the pairs that left and the pairs that entered between the
// previous fit's input and pairs (whose first has stream index first), or
// ok = false when an incremental update does not apply: no previous fit,
// a window that moved back or was replaced (the shared pairs differ), or
// more than half the pairs changed (sorting afresh is then as cheap).
func (s *slide) step(pairs []Pair, first int64) (leave, enter []Pair, ok bool) {
	if !s.valid || first < s.first {
		return nil, nil, false
	}
	d := first - s.first // pairs of prev that left
	end, prevEnd := first+int64(len(pairs)), s.first+int64(len(s.prev))
	if d > int64(len(s.prev)) || end < prevEnd {
		return nil, nil, false
	}
	kept := int(prevEnd - first)
	leave, enter = s.prev[:d], pairs[kept:]
	if 2*(len(leave)+len(enter)) > len(pairs) || !sameBits(s.prev[d:], pairs[:kept]) {
		return nil, nil, false
	}
	return leave, enter, true
}

// sameBits reports whether a and b hold the same pairs, bit for bit.
func sameBits(a, b []Pair) bool {
	return slices.EqualFunc(a, b, func(p, q Pair) bool {
		return math.Float64bits(p.Score) == math.Float64bits(q.Score) && math.Float64bits(p.Y) == math.Float64bits(q.Y)
	})
}

// record keeps pairs (index of the first: first) as the input of the fit
// just made.
func (s *slide) record(pairs []Pair, first int64) {
	s.prev = append(s.prev[:0], pairs...)
	s.first, s.valid = first, true
}

// values appends to dst[:0] the values of the pairs that value keeps,
// sorted.
func values(dst []float64, pairs []Pair, value func(Pair) (float64, bool)) []float64 {
	dst = dst[:0]
	for _, p := range pairs {
		if v, ok := value(p); ok {
			dst = append(dst, v)
		}
	}
	slices.Sort(dst)
	return dst
}

// resorted writes to dst the ascending values sorted less the ascending
// values out plus the ascending values in, and returns it (dst must not
// share memory with sorted). ok is false when out is not a sub-multiset of
// sorted. Values are compared with ==: they must have no NaN, and −0 must
// have been made +0, so that equal values are equal bits and the result is
// bit for bit the sort of the new values.
func resorted(dst, sorted, out, in []float64) (_ []float64, ok bool) {
	n := len(sorted) - len(out) + len(in)
	if n < 0 {
		return dst, false
	}
	dst = grow(dst, n)
	k, r, e := 0, 0, 0
	for _, v := range sorted {
		if r < len(out) && v == out[r] {
			r++
			continue
		}
		for e < len(in) && in[e] < v {
			if k == n {
				return dst, false
			}
			dst[k] = in[e]
			k, e = k+1, e+1
		}
		if k == n {
			return dst, false
		}
		dst[k] = v
		k++
	}
	if r != len(out) || k+len(in)-e != n {
		return dst, false
	}
	k += copy(dst[k:], in[e:])
	return dst[:k], true
}
