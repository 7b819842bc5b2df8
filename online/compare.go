package online

import (
	"fmt"
	"math"
	"reflect"
	"slices"
)

// StateClose reports whether two models hold the same state: the same
// concrete type and spec, exactly the same counts, and sums that agree to
// rtol relative to each sum vector's norm (sums accumulated in a different
// order differ only by rounding). It is what a restored or replayed model
// is checked against. Every model of the package is supported:
//
//   - mam: under a window the counts are the window's and its examples,
//     oldest first, must be identical (the number learned in all is not
//     compared, so a model trained on the window alone compares equal);
//     under decay the weights W, Q, W± must agree to rtol;
//   - mam, exact kernel mode: counts, ring layout, labels and inputs
//     identical, pair sums to rtol;
//   - omam (both modes): examples learned, level counts (to rtol under
//     decay), the window or stored examples (identical), the sums to rtol,
//     and the threshold state: the buffer's levels identical, its scores
//     and the thresholds to rtol. The buffer depends on the whole history,
//     so a windowed omam does not compare equal to one trained on its
//     window alone;
//   - logistic: counts, and weights, bias and AdaGrad sums to rtol;
//   - lda: counts, shift, window examples (oldest first) identical, class
//     statistics and the last solve to rtol;
//   - the Standardize wrapper: its count, its means and M2 to rtol, then
//     the inner models as above;
//   - a type with its own stateClose method (fm): that method.
//
// Models of different concrete types never compare equal.
func StateClose(a, b Model, rtol float64) error {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return fmt.Errorf("online: compare %s (%T) with %s (%T): different model types", a.Type(), a, b.Type(), b)
	}
	switch ma := a.(type) {
	case *MAM:
		return mamStateClose(ma, b.(*MAM), rtol)
	case *ExactMAM:
		return exactStateClose(ma, b.(*ExactMAM), rtol)
	case *OMAM:
		return omamStateClose(ma, b.(*OMAM), rtol)
	case *ExactOMAM:
		return exactOMAMStateClose(ma, b.(*ExactOMAM), rtol)
	case *Logistic:
		return logisticStateClose(ma, b.(*Logistic), rtol)
	case *LDA:
		return ldaStateClose(ma, b.(*LDA), rtol)
	case *Standardized:
		return stdStateClose(ma, b.(*Standardized), rtol)
	}
	if c, ok := a.(interface{ stateClose(Model, float64) error }); ok { // a type that compares itself (fm)
		return c.stateClose(b, rtol)
	}
	return fmt.Errorf("online: compare %s with %s: unsupported model type %T", a.Type(), b.Type(), a)
}

// mamStateClose is StateClose for two random-feature MAMs.
func mamStateClose(ma, mb *MAM, rtol float64) error {
	if !ma.sameParams(mb) {
		return fmt.Errorf("online: parameters differ: %+v (dim %d) vs %+v (dim %d)", ma.p, ma.dim, mb.p, mb.dim)
	}
	if ma.auto != nil {
		return autoStateClose(ma, mb, rtol) // mam_auto.go
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

// sameOrClose is closeRel that also accepts equal infinities.
func sameOrClose(x, y, rtol float64) bool {
	return x == y || closeRel(x, y, rtol)
}

// sumsClose compares the compensated vectors x + xc and y + yc (xc, yc may
// be nil): ‖a − b‖ ≤ rtol·max(‖a‖, ‖b‖). The vectors have equal lengths.
func sumsClose(name string, x, xc, y, yc []float64, rtol float64) error {
	var diff, na, nb float64
	for i := range x {
		a, b := x[i], y[i]
		if xc != nil {
			a += xc[i]
		}
		if yc != nil {
			b += yc[i]
		}
		diff += (a - b) * (a - b)
		na += a * a
		nb += b * b
	}
	if !(math.Sqrt(diff) <= rtol*math.Sqrt(max(na, nb))) {
		return fmt.Errorf("online: %s differs: ‖a−b‖ = %.3g, ‖a‖ = %.3g (rtol %g)", name, math.Sqrt(diff), math.Sqrt(na), rtol)
	}
	return nil
}

// forgetClose compares the forgetting state of two MAM models with equal
// specs and counts (see StateClose).
func forgetClose(a, b *MAM, rtol float64) error {
	switch {
	case a.ring != nil:
		d, size := a.dim, int64(a.p.Window.Events)
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

// omamStateClose is StateClose for two random-feature omams.
func omamStateClose(a, b *OMAM, rtol float64) error {
	if err := sameParams(a, b); err != nil {
		return err
	}
	if a.n != b.n {
		return fmt.Errorf("online: examples learned differ: %d vs %d", a.n, b.n)
	}
	for l := range a.cnt {
		x, y := a.cnt[l]+a.cntC[l], b.cnt[l]+b.cntC[l]
		if a.decay == 1 && x != y || !closeRel(x, y, rtol) {
			return fmt.Errorf("online: level %d counts differ: %v vs %v", l+1, x, y)
		}
	}
	if !closeRel(a.sqw+a.sqwC, b.sqw+b.sqwC, rtol) {
		return fmt.Errorf("online: Σw² differs: %v vs %v", a.sqw+a.sqwC, b.sqw+b.sqwC)
	}
	if W := a.par.Window.Events; W > 0 {
		if a.winFill != b.winFill {
			return fmt.Errorf("online: window fill differs: %d vs %d", a.winFill, b.winFill)
		}
		d := a.dim
		for j := range a.winFill {
			sa, sb := (a.winNext-a.winFill+j+W)%W, (b.winNext-b.winFill+j+W)%W
			if a.winL[sa] != b.winL[sb] || !slices.Equal(a.winX[sa*d:(sa+1)*d], b.winX[sb*d:(sb+1)*d]) {
				return fmt.Errorf("online: window example %d (oldest first) differs", j)
			}
		}
	}
	if err := sumsClose("level sums", a.sum, a.sumC, b.sum, b.sumC, rtol); err != nil {
		return err
	}
	if err := omamAutoClose(a, b, rtol); err != nil { // omam_auto.go
		return err
	}
	return thresholdsClose(&a.omamThresholds, &b.omamThresholds, rtol)
}

// thresholdsClose compares two omam threshold states.
func thresholdsClose(a, b *omamThresholds, rtol float64) error {
	if a.bufFill != b.bufFill || a.fitted != b.fitted {
		return fmt.Errorf("online: threshold buffers differ: %d/%d events, fitted %v/%v", a.bufFill, b.bufFill, a.fitted, b.fitted)
	}
	const T = omamThresholdBuffer
	for j := range a.bufFill {
		sa, sb := (a.bufNext-a.bufFill+j+T)%T, (b.bufNext-b.bufFill+j+T)%T
		if a.bufLevel[sa] != b.bufLevel[sb] || !sameOrClose(a.bufScore[sa], b.bufScore[sb], rtol) {
			return fmt.Errorf("online: threshold buffer event %d (oldest first) differs: level %d/%d, score %v/%v",
				j, a.bufLevel[sa]+1, b.bufLevel[sb]+1, a.bufScore[sa], b.bufScore[sb])
		}
	}
	for k := range a.theta {
		if !sameOrClose(a.theta[k], b.theta[k], rtol) {
			return fmt.Errorf("online: threshold %d differs: %v vs %v", k+1, a.theta[k], b.theta[k])
		}
	}
	return nil
}

// exactOMAMStateClose is StateClose for two exact-kernel omams.
func exactOMAMStateClose(a, b *ExactOMAM, rtol float64) error {
	if err := sameParams(a, b); err != nil {
		return err
	}
	if a.n != b.n || a.count != b.count || a.head != b.head || !slices.Equal(a.cnt, b.cnt) {
		return fmt.Errorf("online: counts differ: n %d/%d, stored %d/%d, head %d/%d, per level %v/%v",
			a.n, b.n, a.count, b.count, a.head, b.head, a.cnt, b.cnt)
	}
	d, m, nb := a.d, a.m, a.b
	for i := range a.count {
		if a.lv[i] != b.lv[i] || a.self[i] != b.self[i] || !slices.Equal(a.xs[i*d:(i+1)*d], b.xs[i*d:(i+1)*d]) {
			return fmt.Errorf("online: slot %d: stored example differs", i)
		}
		for l := range m {
			x, y := a.acc[l*nb+i]+a.accC[l*nb+i], b.acc[l*nb+i]+b.accC[l*nb+i]
			if !closeRel(x, y, rtol) {
				return fmt.Errorf("online: slot %d: kernel sum at level %d differs: %v vs %v", i, l+1, x, y)
			}
		}
	}
	if err := sumsClose("level-pair kernel sums", a.g, a.gC, b.g, b.gC, rtol); err != nil {
		return err
	}
	return thresholdsClose(&a.omamThresholds, &b.omamThresholds, rtol)
}

// logisticStateClose is StateClose for two logistic regressions.
func logisticStateClose(a, b *Logistic, rtol float64) error {
	if err := sameParams(a, b); err != nil {
		return err
	}
	a.flush() // sparse events' deferred L2 steps (logically no change)
	b.flush()
	if a.n != b.n || a.nPos != b.nPos || a.nNeg != b.nNeg {
		return fmt.Errorf("online: counts differ: n %d/%d, n₊ %d/%d, n₋ %d/%d", a.n, b.n, a.nPos, b.nPos, a.nNeg, b.nNeg)
	}
	if err := sumsClose("weights", a.w, nil, b.w, nil, rtol); err != nil {
		return err
	}
	if err := sumsClose("AdaGrad sums", a.g, nil, b.g, nil, rtol); err != nil {
		return err
	}
	if !closeRel(a.b, b.b, rtol) || !closeRel(a.gb, b.gb, rtol) {
		return fmt.Errorf("online: bias or its AdaGrad sum differs: %v/%v, %v/%v", a.b, b.b, a.gb, b.gb)
	}
	return nil
}

// ldaStateClose is StateClose for two LDA models.
func ldaStateClose(a, b *LDA, rtol float64) error {
	if err := sameParams(a, b); err != nil {
		return err
	}
	if a.n != b.n || a.since != b.since || a.centred != b.centred || a.count != b.count || a.valid != b.valid {
		return fmt.Errorf("online: counts differ: n %d/%d, since solve %d/%d, window %d/%d, solved %v/%v",
			a.n, b.n, a.since, b.since, a.count, b.count, a.valid, b.valid)
	}
	if !slices.Equal(a.c, b.c) {
		return fmt.Errorf("online: shifts differ")
	}
	if W := a.p.Window.Events; W > 0 {
		d := a.d
		for j := range a.count {
			sa, sb := (a.head-a.count+j+W)%W, (b.head-b.count+j+W)%W
			if a.ringY[sa] != b.ringY[sb] || !slices.Equal(a.ring[sa*d:(sa+1)*d], b.ring[sb*d:(sb+1)*d]) {
				return fmt.Errorf("online: window example %d (oldest first) differs", j)
			}
		}
	}
	for _, c := range []struct {
		name string
		x, y *ldaClass
	}{{"class +1", &a.pos, &b.pos}, {"class -1", &a.neg, &b.neg}} {
		if !closeRel(c.x.wt+c.x.wtC, c.y.wt+c.y.wtC, rtol) {
			return fmt.Errorf("online: %s weight differs: %v vs %v", c.name, c.x.wt+c.x.wtC, c.y.wt+c.y.wtC)
		}
		if err := sumsClose(c.name+" sum", c.x.s, c.x.sC, c.y.s, c.y.sC, rtol); err != nil {
			return err
		}
		if err := sumsClose(c.name+" scatter", c.x.q, c.x.qC, c.y.q, c.y.qC, rtol); err != nil {
			return err
		}
	}
	if !closeRel(a.sw2, b.sw2, rtol) {
		return fmt.Errorf("online: Σω² differs: %v vs %v", a.sw2, b.sw2)
	}
	if err := sumsClose("direction w", a.w, nil, b.w, nil, rtol); err != nil {
		return err
	}
	if !closeRel(a.b, b.b, rtol) {
		return fmt.Errorf("online: offsets differ: %v vs %v", a.b, b.b)
	}
	return nil
}

// stdStateClose is StateClose for two Standardize wrappers: their Welford
// statistics, then their inner models.
func stdStateClose(a, b *Standardized, rtol float64) error {
	if a.Dim() != b.Dim() {
		return fmt.Errorf("online: dimensions differ: %d vs %d", a.Dim(), b.Dim())
	}
	if a.n != b.n {
		return fmt.Errorf("online: standardizer counts differ: %d vs %d", a.n, b.n)
	}
	if err := sumsClose("standardizer means", a.mean, a.meanC, b.mean, b.meanC, rtol); err != nil {
		return err
	}
	if err := sumsClose("standardizer M2", a.m2, a.m2C, b.m2, b.m2C, rtol); err != nil {
		return err
	}
	if err := StateClose(a.inner, b.inner, rtol); err != nil {
		return fmt.Errorf("inner model: %w", err)
	}
	return nil
}

// sameParams reports whether a and b have equal parameters and dimensions.
func sameParams(a, b interface {
	Model
	paramsValue() any
}) error {
	if a.Dim() != b.Dim() || !reflect.DeepEqual(a.paramsValue(), b.paramsValue()) {
		return fmt.Errorf("online: parameters differ: %+v (dim %d) vs %+v (dim %d)", a.paramsValue(), a.Dim(), b.paramsValue(), b.Dim())
	}
	return nil
}

func (o *OMAM) paramsValue() any      { return o.par }
func (o *ExactOMAM) paramsValue() any { return o.par }
func (m *Logistic) paramsValue() any  { return m.p }
func (m *LDA) paramsValue() any       { return m.p }
