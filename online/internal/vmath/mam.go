package vmath

import "math"

// The MAM's per-event passes over dim φ (online/mam.go): the score's inner
// product and the compensated-sum update with the derived direction w and
// its sums, fused into one pass over the state. Every sum runs in eight
// lanes (element i in lane i mod 8, by FMA) added by sum8; the state's
// elements are updated by Knuth's TwoSum, its rounding error added to the
// compensation (the sum's value is s + c).

// Dot returns <a, b> (len(b) ≥ len(a)): s_l = fma(a_i, b_i, s_l) for
// i ≡ l (mod 8) in order, then sum8.
func Dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s [8]float64
	n := dotBlocks(a, b, &s)
	for i := n; i < len(a); i++ {
		s[i&7] = math.FMA(a[i], b[i], s[i&7])
	}
	return sum8(&s)
}

func dotGo(a, b []float64, s *[8]float64) {
	b = b[:len(a)]
	for i, v := range a {
		s[i&7] = math.FMA(v, b[i], s[i&7])
	}
}

// PlainFused is one labelled event of the plain MAM: it returns f = <w, x>
// for the w it is given (the score before the update), adds y·x (y = ±1,
// so exact) to the compensated sum (s, c), sets w = s + c and returns
// ww = ‖w‖². All of w, s, c are at least as long as x.
//
// Per element i (lane l = i mod 8), in this order:
//
//	f_l = fma(w_i, x_i, f_l)
//	v = y·x_i;  t = s_i + v;  b = t − s_i;  c_i += (s_i − (t − b)) + (v − b);  s_i = t
//	w_i = s_i + c_i;  ww_l = fma(w_i, w_i, ww_l)
func PlainFused(w, s, c, x []float64, y float64) (f, ww float64) {
	w, s, c = w[:len(x)], s[:len(x)], c[:len(x)]
	var acc [16]float64
	n := plainBlocks(w, s, c, x, y, &acc)
	plainGo(w[n:], s[n:], c[n:], x[n:], y, &acc, n)
	return sum8((*[8]float64)(acc[:8])), sum8((*[8]float64)(acc[8:]))
}

// plainGo is PlainFused on the elements from i0 on (w, s, c, x start at
// element i0).
func plainGo(w, s, c, x []float64, y float64, acc *[16]float64, i0 int) {
	w, s, c = w[:len(x)], s[:len(x)], c[:len(x)]
	for i, xi := range x {
		l := (i0 + i) & 7
		acc[l] = math.FMA(w[i], xi, acc[l])
		v := float64(y * xi)
		si := s[i]
		t := si + v
		bp := t - si
		ci := c[i] + ((si - (t - bp)) + (v - bp))
		s[i], c[i] = t, ci
		wi := t + ci
		w[i] = wi
		acc[8+l] = math.FMA(wi, wi, acc[8+l])
	}
}

// BalancedFused is one labelled event of the balanced MAM: it returns
// f = <w, x> for the w it is given (the score before the update), adds x to
// the compensated sum (t, tc) of the event's class, and with T = t + tc, O
// = o + oc (the other class), a = T·it and b = O·io sets w = a − b. It
// returns f, ww = ‖w‖², pt = <w, a> and po = <w, b>. For the class sgn
// (±1) with it = sgn/n_t and io = sgn/n_o, w = μ₊ − μ₋ and
// (pt, po) = (<w, μ₊>, <w, μ₋>) when sgn = +1, (−<w, μ₋>, −<w, μ₊>) when
// sgn = −1 (negation is exact, so the result does not depend on which
// class is being updated). All of w, t, tc, o, oc are at least as long as x.
//
// Per element i (lane l = i mod 8), in this order:
//
//	f_l = fma(w_i, x_i, f_l)
//	O = o_i + oc_i
//	s = t_i + x_i;  p = s − t_i;  tc_i += (t_i − (s − p)) + (x_i − p);  t_i = s
//	T = t_i + tc_i;  a = T·it;  b = O·io;  w_i = a − b
//	ww_l = fma(w_i, w_i, ww_l);  pt_l = fma(w_i, a, pt_l);  po_l = fma(w_i, b, po_l)
func BalancedFused(w, t, tc, o, oc, x []float64, it, io float64) (f, ww, pt, po float64) {
	w, t, tc, o, oc = w[:len(x)], t[:len(x)], tc[:len(x)], o[:len(x)], oc[:len(x)]
	var acc [32]float64
	n := balancedBlocks(w, t, tc, o, oc, x, it, io, &acc)
	balancedGo(w[n:], t[n:], tc[n:], o[n:], oc[n:], x[n:], it, io, &acc, n)
	return sums4(&acc)
}

func sums4(acc *[32]float64) (a, b, c, d float64) {
	return sum8((*[8]float64)(acc[0:8])), sum8((*[8]float64)(acc[8:16])),
		sum8((*[8]float64)(acc[16:24])), sum8((*[8]float64)(acc[24:32]))
}

// balancedGo is BalancedFused on the elements from i0 on.
func balancedGo(w, t, tc, o, oc, x []float64, it, io float64, acc *[32]float64, i0 int) {
	w, t, tc, o, oc = w[:len(x)], t[:len(x)], tc[:len(x)], o[:len(x)], oc[:len(x)]
	for i, xi := range x {
		l := (i0 + i) & 7
		acc[l] = math.FMA(w[i], xi, acc[l])
		O := o[i] + oc[i]
		ti := t[i]
		s := ti + xi
		bp := s - ti
		ci := tc[i] + ((ti - (s - bp)) + (xi - bp))
		t[i], tc[i] = s, ci
		balancedDerived(w, i, l, s+ci, O, it, io, acc)
	}
}

// balancedDerived sets w_i from T and O and adds to the sums of lane l.
func balancedDerived(w []float64, i, l int, T, O, it, io float64, acc *[32]float64) {
	a := float64(T * it)
	b := float64(O * io)
	wi := a - b
	w[i] = wi
	acc[8+l] = math.FMA(wi, wi, acc[8+l])
	acc[16+l] = math.FMA(wi, a, acc[16+l])
	acc[24+l] = math.FMA(wi, b, acc[24+l])
}

// PlainDecay is PlainFused under exponential decay, without the score: (s,
// c) is first multiplied by lam, the exact rounding error of the product
// (FMA) added to c, c_i = fl(c_i·lam) + (s_i·lam − fl(s_i·lam)), then y·x
// is added and w and ww computed exactly as PlainFused does. Eight at a
// time in assembly (AVX-512F; AVX2 in two registers), the same bits
// (TestDecayLevels).
func PlainDecay(w, s, c, x []float64, y, lam float64) (ww float64) {
	w, s, c = w[:len(x)], s[:len(x)], c[:len(x)]
	var acc [8]float64
	for i := plainDecayBlocks(w, s, c, x, y, lam, &acc); i < len(x); i++ {
		xi := x[i]
		r := s[i]
		si := float64(r * lam)
		ci := float64(c[i]*lam) + math.FMA(r, lam, -si)
		v := float64(y * xi)
		t := si + v
		bp := t - si
		ci += (si - (t - bp)) + (v - bp)
		s[i], c[i] = t, ci
		wi := t + ci
		w[i] = wi
		acc[i&7] = math.FMA(wi, wi, acc[i&7])
	}
	return sum8(&acc)
}

// BalancedDecay is BalancedFused under exponential decay, without the
// score: both classes' sums are first multiplied by lam as in PlainDecay,
// then x is added to (t, tc) and w, ww, pt, po computed exactly as
// BalancedFused does. Eight at a time in assembly as PlainDecay.
func BalancedDecay(w, t, tc, o, oc, x []float64, it, io, lam float64) (ww, pt, po float64) {
	w, t, tc, o, oc = w[:len(x)], t[:len(x)], tc[:len(x)], o[:len(x)], oc[:len(x)]
	var acc [32]float64
	for i := balancedDecayBlocks(w, t, tc, o, oc, x, it, io, lam, &acc); i < len(x); i++ {
		xi := x[i]
		r := t[i]
		ti := float64(r * lam)
		ci := float64(tc[i]*lam) + math.FMA(r, lam, -ti)
		s := ti + xi
		bp := s - ti
		ci += (ti - (s - bp)) + (xi - bp)
		t[i], tc[i] = s, ci
		q := o[i]
		oi := float64(q * lam)
		oci := float64(oc[i]*lam) + math.FMA(q, lam, -oi)
		o[i], oc[i] = oi, oci
		balancedDerived(w, i, i&7, s+ci, oi+oci, it, io, &acc)
	}
	_, ww, pt, po = sums4(&acc)
	return ww, pt, po
}
