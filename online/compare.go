package online

import (
	"fmt"
	"math"
	"reflect"
	"slices"
)

// StateClose reports whether two models hold the same state: the same type
// and spec, exactly the same counts, and sums that agree to rtol relative to
// each sum vector's norm (sums accumulated in a different order differ only
// by rounding). It is what a restored or replayed model is checked against.
// Under a window the counts are the window's and its examples, oldest
// first, must be identical (the number learned in all is not compared, so
// a model trained on the window alone compares equal); under decay the
// weights W, Q, W± must agree to rtol.
func StateClose(a, b Model, rtol float64) error {
	ma, okA := a.(*MAM)
	mb, okB := b.(*MAM)
	if !okA || !okB {
		return fmt.Errorf("online: compare %s with %s: unsupported model types", a.Type(), b.Type())
	}
	if !reflect.DeepEqual(ma.spec, mb.spec) {
		return fmt.Errorf("online: specs differ: %+v vs %+v", ma.spec, mb.spec)
	}
	if ma.n != mb.n || ma.nPos != mb.nPos || ma.nNeg != mb.nNeg {
		return fmt.Errorf("online: counts differ: n %d/%d, n₊ %d/%d, n₋ %d/%d", ma.n, mb.n, ma.nPos, mb.nPos, ma.nNeg, mb.nNeg)
	}
	if !closeRel(ma.tr+ma.trC, mb.tr+mb.trC, rtol) {
		return fmt.Errorf("online: tr Ω differs: %v vs %v", ma.tr+ma.trC, mb.tr+mb.trC)
	}
	if err := forgetClose(ma, mb, rtol); err != nil {
		return err
	}
	va, vb := ma.vectors(), mb.vectors()
	for k := 0; k < len(va); k += 2 { // (sum, compensation) pairs
		var diff, norm float64
		for i := range va[k] {
			x, y := va[k][i]+va[k+1][i], vb[k][i]+vb[k+1][i]
			diff += (x - y) * (x - y)
			norm += x * x
		}
		if math.Sqrt(diff) > rtol*math.Sqrt(norm) {
			return fmt.Errorf("online: sum vector %d differs: ‖a−b‖ = %.3g, ‖a‖ = %.3g (rtol %g)", k/2, math.Sqrt(diff), math.Sqrt(norm), rtol)
		}
	}
	return nil
}

func closeRel(x, y, rtol float64) bool {
	return math.Abs(x-y) <= rtol*math.Max(math.Abs(x), math.Abs(y))
}

// forgetClose compares the forgetting state of two MAM models with equal
// specs and counts (see StateClose).
func forgetClose(a, b *MAM, rtol float64) error {
	switch {
	case a.ring != nil:
		d, size := a.spec.Dim, int64(a.spec.Window)
		// The oldest example sits at slot (total − n) mod Window.
		ia, ib := (a.total-a.n)%size, (b.total-b.n)%size
		for j := range a.n {
			sa, sb := int((ia+j)%size), int((ib+j)%size)
			if a.ringY[sa] != b.ringY[sb] || !slices.Equal(a.ring[sa*d:(sa+1)*d], b.ring[sb*d:(sb+1)*d]) {
				return fmt.Errorf("online: window example %d (oldest first) differs", j)
			}
		}
	case a.decay:
		wa, qa, pa, na := a.Weights()
		wb, qb, pb, nb := b.Weights()
		if !closeRel(wa, wb, rtol) || !closeRel(qa, qb, rtol) || !closeRel(pa, pb, rtol) || !closeRel(na, nb, rtol) {
			return fmt.Errorf("online: decay weights differ: W %v/%v, Q %v/%v, W₊ %v/%v, W₋ %v/%v", wa, wb, qa, qb, pa, pb, na, nb)
		}
	}
	return nil
}
