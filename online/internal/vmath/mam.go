package vmath

// The MAM's per-event passes over dim φ: the score's inner product and the
// compensated-sum updates (online/mam.go: dot, plainPass, balancedPass).
// Each keeps the scalar definition's order of every sum; the assembly runs
// the independent sums (the four of dot, the even and odd halves of
// PlainPass's norm, the four norms of BalancedPass) in the lanes of one
// register and the element-wise work four elements at a time.

// Dot returns <a, b> (len(b) ≥ len(a)) summed as
//
//	s_l = Σ_{i ≡ l (mod 4)} a_i·b_i in order (the tail i ≥ 4⌊n/4⌋ into s₀),
//	<a, b> = (s₀ + s₁) + (s₂ + s₃).
func Dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s [4]float64
	n := len(a) &^ 3
	if n > 0 {
		dotBlocks(a[:n], b[:n], &s)
	}
	for i := n; i < len(a); i++ {
		s[0] += float64(a[i] * b[i])
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

func dotBlocksGo(a, b []float64, s *[4]float64) {
	b = b[:len(a)]
	for i := 0; i+4 <= len(a); i += 4 {
		s[0] += float64(a[i] * b[i])
		s[1] += float64(a[i+1] * b[i+1])
		s[2] += float64(a[i+2] * b[i+2])
		s[3] += float64(a[i+3] * b[i+3])
	}
}

// PlainPass adds y·x (y = ±1, so exact) to the compensated sum (s, c),
// one TwoSum per element (the rounding error of s + y·x added to c), sets
// w = s + c and returns ‖w‖², summed in order over the even and the odd
// elements and then added: a₀ + a₁. All of s, c, x are at least as long
// as w.
func PlainPass(w, s, c, x []float64, y float64) float64 {
	s, c, x = s[:len(w)], c[:len(w)], x[:len(w)]
	var acc [2]float64
	n := len(w) &^ 3
	if n > 0 {
		plainBlocks(w[:n], s[:n], c[:n], x[:n], y, &acc)
	}
	for i := n; i < len(w); i++ {
		wi := plainOne(w, s, c, x, y, i)
		acc[i&1] += float64(wi * wi)
	}
	return acc[0] + acc[1]
}

func plainOne(w, s, c, x []float64, y float64, i int) float64 {
	v := y * x[i]
	si := s[i]
	t := si + v
	bp := t - si
	ci := c[i] + ((si - (t - bp)) + (v - bp))
	s[i], c[i] = t, ci
	wi := t + ci
	w[i] = wi
	return wi
}

func plainBlocksGo(w, s, c, x []float64, y float64, acc *[2]float64) {
	for i := range w {
		wi := plainOne(w, s, c, x, y, i)
		acc[i&1] += float64(wi * wi)
	}
}

// BalancedPass adds x to the compensated sum (t, tc) of class sgn (±1)
// by TwoSum, then, with T = t + tc and O = o + oc (the other class), sets
//
//	w = sgn·(T·it − O·io)
//
// and returns ‖w‖², <w, s> with s = sgn·(T − O), ‖T·it‖² and ‖O·io‖², each
// summed in order over the elements. All of t, tc, o, oc, x are at least
// as long as w.
func BalancedPass(w, t, tc, o, oc, x []float64, it, io, sgn float64) (ww, ws, tt, oo float64) {
	t, tc, o, oc, x = t[:len(w)], tc[:len(w)], o[:len(w)], oc[:len(w)], x[:len(w)]
	var acc [4]float64
	n := len(w) &^ 3
	if n > 0 {
		balancedBlocks(w[:n], t[:n], tc[:n], o[:n], oc[:n], x[:n], it, io, sgn, &acc)
	}
	if n < len(w) {
		balancedBlocksGo(w[n:], t[n:], tc[n:], o[n:], oc[n:], x[n:], it, io, sgn, &acc)
	}
	return acc[0], acc[1], acc[2], acc[3]
}

func balancedBlocksGo(w, t, tc, o, oc, x []float64, it, io, sgn float64, acc *[4]float64) {
	t, tc, o, oc, x = t[:len(w)], tc[:len(w)], o[:len(w)], oc[:len(w)], x[:len(w)]
	ww, ws, tt, oo := acc[0], acc[1], acc[2], acc[3]
	for i, xi := range x {
		ti := t[i]
		s := ti + xi
		bp := s - ti
		ci := tc[i] + ((ti - (s - bp)) + (xi - bp))
		t[i], tc[i] = s, ci
		T := s + ci
		O := o[i] + oc[i]
		a := T * it
		c := O * io
		d := a - c
		w[i] = sgn * d
		ww += float64(d * d)
		ws += float64(d * (T - O))
		tt += float64(a * a)
		oo += float64(c * c)
	}
	acc[0], acc[1], acc[2], acc[3] = ww, ws, tt, oo
}
