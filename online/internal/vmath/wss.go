package vmath

import "math"

// The two passes of LIBSVM's working-set selection (WSS 2, Fan, Chen and
// Lin 2005) for the svm solver, over its active indices t < len(y): y the
// labels, g the gradient, st the bound status. Each gives the bits, and
// the index, of the scalar loop it is documented by (TestWSSLevels); the
// AVX-512F and AVX2 kernels run eight or four indices at a time, each lane
// keeping its own extreme and last index, which the Go code then merges.

// WSSMax returns the largest v_t = −g[t] (y[t] > 0) or g[t] (otherwise)
// over the t whose status st[t] is not skipPos (y[t] > 0) or skipNeg
// (otherwise), and the last t attaining it: the loop
//
//	m, i := −Inf, −1
//	for t: if st[t] ≠ skip(t) && v_t ≥ m { m, i = v_t, t }
//
// (−Inf, −1) when no t qualifies. g and st are at least as long as y.
func WSSMax(y, g []float64, st []int8, skipPos, skipNeg int8) (float64, int) {
	n := len(y)
	g, st = g[:n], st[:n]
	m, idx := math.Inf(-1), -1
	k := wssMaxBlocks(y, g, st, skipPos, skipNeg, &m, &idx)
	for t := k; t < n; t++ {
		if y[t] > 0 {
			if st[t] != skipPos && -g[t] >= m {
				m, idx = -g[t], t
			}
		} else if st[t] != skipNeg && g[t] >= m {
			m, idx = g[t], t
		}
	}
	return m, idx
}

// WSSSecond is the second pass, given gmax and i's Q_ii = qdi and label
// yi: over the t whose status is not skipPos (y[t] > 0) or skipNeg
// (otherwise), with w_t = g[t] (y[t] > 0) or −g[t] and q the row Q_i·,
// the loop
//
//	max2, od, j := −Inf, +Inf, −1
//	for t:
//		if st[t] == skip(t) { continue }
//		if w_t ≥ max2 { max2 = w_t }
//		d := gmax + w_t                      (gmax − g[t] when y[t] ≤ 0)
//		if d > 0 {
//			quad := qdi + qd[t] − 2·yi·q[t]  (+ when y[t] ≤ 0; tau when ≤ 0)
//			if −(d·d)/quad ≤ od { od, j = −(d·d)/quad, t }
//		}
//
// (2·yi·q[t] is (2·yi)·float64(q[t])). q, qd, g and st are at least as
// long as y.
func WSSSecond(q []float32, qd, y, g []float64, st []int8, skipPos, skipNeg int8, gmax, qdi, yi, tau float64) (max2, od float64, j int) {
	n := len(y)
	q, qd, g, st = q[:n], qd[:n], g[:n], st[:n]
	max2, od, j = math.Inf(-1), math.Inf(1), -1
	k := wssSecondBlocks(q, qd, y, g, st, skipPos, skipNeg, gmax, qdi, 2*yi, tau, &max2, &od, &j)
	for t := k; t < n; t++ {
		if y[t] > 0 {
			if st[t] == skipPos {
				continue
			}
			d := gmax + g[t]
			if g[t] >= max2 {
				max2 = g[t]
			}
			if d > 0 {
				quad := qdi + qd[t] - float64(2*yi*float64(q[t]))
				if quad <= 0 {
					quad = tau
				}
				if v := -(d * d) / quad; v <= od {
					od, j = v, t
				}
			}
		} else {
			if st[t] == skipNeg {
				continue
			}
			d := gmax - g[t]
			if -g[t] >= max2 {
				max2 = -g[t]
			}
			if d > 0 {
				quad := qdi + qd[t] + float64(2*yi*float64(q[t]))
				if quad <= 0 {
					quad = tau
				}
				if v := -(d * d) / quad; v <= od {
					od, j = v, t
				}
			}
		}
	}
	return max2, od, j
}

// AddPair32 adds float64(a[k])·s + float64(b[k])·t to dst[k] for k <
// len(dst) (a and b at least as long), each product and the sum rounded
// (never fused): the solver's gradient update G += Q_i·Δα_i + Q_j·Δα_j.
// Four at a time in assembly on AVX2 and AVX-512F machines, the same bits
// (TestAddPair32Levels).
func AddPair32(dst []float64, a, b []float32, s, t float64) {
	n := len(dst)
	a, b = a[:n], b[:n]
	for k := addPairBlocks(dst, a, b, s, t); k < n; k++ {
		dst[k] += float64(float64(a[k])*s) + float64(float64(b[k])*t)
	}
}

// AddScaled32 adds s·float64(a[k]) to dst[k] for k < len(dst) (a at least
// as long), the product rounded (never fused): the solver's Ḡ update.
func AddScaled32(dst []float64, a []float32, s float64) {
	n := len(dst)
	a = a[:n]
	for k := addScaledBlocks(dst, a, s); k < n; k++ {
		dst[k] += float64(s * float64(a[k]))
	}
}

// mergeLanes folds the kernels' lanes (extreme v[l] first attained, in
// the lane's last index, at idx[l]; −1: none) into the running (m, i) of
// the indices before them: the largest index attaining the extreme, which
// is the loop's (it keeps the last t with v_t ≥ m, or ≤ for a minimum;
// its running extreme is never NaN). lanes is 4 or 8.
func mergeLanes(v *[8]float64, idx *[8]int64, lanes int, least bool, m *float64, i *int) {
	for l := range lanes {
		if idx[l] < 0 {
			continue
		}
		better := v[l] > *m
		if least {
			better = v[l] < *m
		}
		if better || (v[l] == *m && int(idx[l]) > *i) {
			*m, *i = v[l], int(idx[l])
		}
	}
}

// mergeMax folds lanes' maxima (no index) into m.
func mergeMax(v *[8]float64, lanes int, m *float64) {
	for l := range lanes {
		if v[l] > *m {
			*m = v[l]
		}
	}
}
