package online

import (
	"fmt"
	"reflect"
)

// Mergeable reports whether the state of a MAM with these parameters is a plain
// sum over its examples, so that models trained on disjoint parts of a
// stream merge exactly into the model trained on all of it (docs/math.md §3:
// the sums s, S±, tr Ω and the counts are additive). Windowed and decaying
// models are not: their state depends on the order of all examples. Nor
// is gamma auto: each partition would fix its own grid from its own first
// inputs, and the bandwidths' error records are not sums.
func (m *MAM) Mergeable() bool {
	return m.p.Window.Events == 0 && m.p.Decay.HalfLife == 0 && m.auto == nil
}

// Reset empties the model: no examples, the same parameters and feature map.
func (m *MAM) Reset() {
	if m.auto != nil {
		m.auto.reset()
		return
	}
	m.n, m.nPos, m.nNeg = 0, 0, 0
	m.tr, m.trC = 0, 0
	for _, v := range m.vectors() {
		clear(v)
	}
	m.refresh()
}

// Merge adds o's examples to m: the compensated sums are added with their
// compensation terms and the counts exactly, then the derived state (score
// direction, offset, bound) is recomputed. Both models must have the same
// parameters and dimension (so the same random features) and be mergeable; o is unchanged.
//
// Merging is exact up to the rounding of one compensated addition per
// coordinate: the merge of per-partition models equals the model trained on
// all their examples to about 1e-16 relative, and merging the same parts in
// the same order is bit-for-bit reproducible.
func (m *MAM) Merge(o *MAM) error {
	if !m.Mergeable() || !o.Mergeable() {
		return fmt.Errorf("online: merge: windowed, decaying or gamma-auto models do not merge")
	}
	if !m.sameParams(o) {
		return fmt.Errorf("online: merge: models have different parameters")
	}
	m.AddBlank(o)
	return nil
}

// MergeAll resets m and merges parts into it in order, recomputing the
// derived state once.
func (m *MAM) MergeAll(parts ...*MAM) error {
	for _, o := range parts {
		if !m.Mergeable() || !o.Mergeable() {
			return fmt.Errorf("online: merge: windowed, decaying or gamma-auto models do not merge")
		}
		if !m.sameParams(o) {
			return fmt.Errorf("online: merge: models have different parameters")
		}
	}
	m.MergeBlanks(parts...)
	return nil
}

// ObserveTee is Observe that, when it learns (x, y), also learns it into
// t, reusing φ(x): what a model merged from partitions does to keep the
// partition's own statistics too. Both must be mergeable with the same
// spec (not checked per event); t's derived state is updated as by
// Observe. It does not allocate.
func (m *MAM) ObserveTee(x []float64, y float64, labelled bool, t *MAM) Prediction {
	p := m.Observe(x, y, labelled)
	if labelled && p.HasBound { // mapped (finite input) and learned
		t.learn(m.phi, y, m.prep[len(m.phi)])
	}
	return p
}

// ObserveTeePrepared is ObserveTee for an x whose preparation is prep
// (Prepare(prep, x), see Preparer): the same Prediction and states.
func (m *MAM) ObserveTeePrepared(prep, x []float64, y float64, labelled bool, t *MAM) Prediction {
	p := m.ObservePrepared(prep, x, y, labelled)
	if labelled && p.HasBound { // mapped (finite input) and learned
		np := len(m.phi)
		t.learn(prep[:np], y, prep[np])
	}
	return p
}

func (m *MAM) mergeSums(o *MAM) {
	m.n += o.n
	m.nPos += o.nPos
	m.nNeg += o.nNeg
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, o.tr)
	m.trC += o.trC
	mv, ov := m.vectors(), o.vectors()
	for k := 0; k < len(mv); k += 2 { // (sum, compensation) pairs
		s, c := mv[k], mv[k+1]
		os, oc := ov[k], ov[k+1]
		for i := range s {
			s[i], c[i] = twoSumAcc(s[i], c[i], os[i])
			c[i] += oc[i]
		}
	}
}

// sameParams reports whether m and o have equal parameters and dimension.
func (m *MAM) sameParams(o *MAM) bool {
	return m.dim == o.dim && reflect.DeepEqual(m.p, o.p)
}

// CopySums makes m's sums and counts those of o, which has the same
// parameters (not checked), without recomputing m's derived state: m is
// then only merged into other models (Merge, MergeAll), never asked to
// score. It does not allocate.
func (m *MAM) CopySums(o *MAM) {
	m.n, m.nPos, m.nNeg = o.n, o.nPos, o.nNeg
	m.tr, m.trC = o.tr, o.trC
	if m.p.Balance {
		copy(m.pos, o.pos)
		copy(m.posC, o.posC)
		copy(m.neg, o.neg)
		copy(m.negC, o.negC)
		return
	}
	copy(m.s, o.s)
	copy(m.sC, o.sC)
}

// Blank returns a model with m's parameters and no examples, sharing m's
// feature map (which is read-only): statistics to learn into and merge
// with m and its other blanks (MergeBlanks, AddBlank). m must be
// mergeable. It allocates the state's vectors once.
func (m *MAM) Blank() *MAM {
	b := &MAM{p: m.p, dim: m.dim, fm: m.fm}
	b.alloc()
	b.refresh()
	return b
}

// MergeBlanks is MergeAll for parts that are m or blanks of one model
// (Blank): their parameters are equal by construction and not checked
// again, so it cannot fail. It does not allocate.
func (m *MAM) MergeBlanks(parts ...*MAM) {
	m.n, m.nPos, m.nNeg = 0, 0, 0
	m.tr, m.trC = 0, 0
	for _, v := range m.vectors() {
		clear(v)
	}
	for _, o := range parts {
		m.mergeSums(o)
	}
	m.refresh()
}

// AddBlank is Merge for o, a blank of m or of the model m is a blank of
// (Blank): it cannot fail. It does not allocate.
func (m *MAM) AddBlank(o *MAM) {
	m.mergeSums(o)
	m.refresh()
}
