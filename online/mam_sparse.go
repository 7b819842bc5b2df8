package online

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

var _ SparseModel = (*MAM)(nil)

// Sparse reports whether m takes sparse input (ObserveSparse): nil for the
// linear kernel without window or decay, and for the rbf and laplacian
// random features with generated frequencies (kernel.sparse, fixed gamma
// or auto, decay or not; mam_sparse_rff.go) without window; otherwise an
// error saying why not. Call it once, when the model is built;
// ObserveSparse panics with this error.
func (m *MAM) Sparse() error {
	switch {
	case m.p.Kernel.Type != KernelLinear && m.fm.gen == nil:
		return fmt.Errorf("kernel %s: the stored frequency matrix has a column per input dimension; set kernel.sparse: true (features.hash sets it) to generate the columns an event needs", m.p.Kernel.Type)
	case m.p.Window.Events > 0:
		return errors.New("window: the window stores every input densely and maps the leaving one again, O(dim) per event (not implemented)")
	case m.p.Decay.HalfLife > 0 && m.fm.gen == nil:
		return errors.New("decay with the linear kernel: every event scales all dim φ sums by λ (a lazy common scale is not implemented)")
	}
	return nil
}

// mamSparse is the part of a MAM only ObserveSparse uses.
//
// The sums (s, or S₊ and S₋) are updated at the touched coordinates only,
// exactly as the dense pass does (the same compensated additions), so the
// encoded state is the dense path's. What the dense pass recomputes over
// all of dim φ after every update — the direction w and the norms the
// offset, the normaliser and the bound need — depends on the sums only
// through a few scalars, kept here from the touched coordinates' old and
// new values:
//
//	plain:     ss = ‖s‖²  (s = Σ y_i φ_i, compensated values s + c)
//	balanced:  ss = ‖s‖², tt = ‖t‖², st = <s, t>  with s = S₊ − S₋, t = S₊ + S₋.
//
// With n = n₊ + n₋, Δ = n₊ − n₋ and q = 4n₊²n₋², w = μ₊ − μ₋ =
// (n·s − Δ·t)/(2n₊n₋) and μ₊ + μ₋ = (n·t − Δ·s)/(2n₊n₋), so
//
//	‖w‖² = (n²ss − 2nΔ·st + Δ²tt)/q,   <w, s> = (n·ss − Δ·st)/(2n₊n₋),
//	b = (‖μ₋‖² − ‖μ₊‖²)/2 = −<w, μ₊ + μ₋>/2 = −((n² + Δ²)st − nΔ(ss + tt))/(2q).
//
// (In s and t rather than ‖S₊‖², ‖S₋‖², <S₊, S₋>: for balanced classes
// ‖w‖² is then dominated by the term in ss alone instead of being the
// difference of three large terms.) Every incremental update adds its
// rounding error bound to eSS, eTT, eST; derived from them are bounds on
// the errors of ‖w‖², b and <w, s>, and when the resulting error of the
// score's normaliser, the offset's share of the score or the average
// margin exceeds sparseTol, or after every = max(4096, 2·dim φ) sparse
// events since the last exact pass (a safety net: the bounds are
// rigorous), the scalars are recomputed exactly (O(dim φ), amortised to
// a few ns per event).
//
// The dense w is not kept up to date (every coordinate of μ₊ − μ₋ changes
// with the counts): ObserveSparse scores with the touched coordinates of w
// computed from the sums, and stale tells the dense Observe to rebuild w
// first. A dense update (derive) makes the scalars invalid; the next
// labelled ObserveSparse recomputes them exactly.
type mamSparse struct {
	acc []float64 // zero between calls: x accumulated by index (also the zero vector of sync); nil until needed
	dim int       // the input dimension: acc's length
	si  []int32   // the event's distinct nonzero indices
	sx  []float64 // their summed values, then φ

	// distinct's table for short events: slot h holds index hkey[h], at
	// si[hpos[h]], when hgen[h] is the event's stamp gen.
	hkey, hpos [1 << dedupBits]int32
	hgen       [1 << dedupBits]uint32
	gen        uint32
	valid      bool // ss, tt, st are the current sums' (up to the error bounds)
	stale      bool // m.w lags behind the sums: rebuild before a dense score

	ss, tt, st    float64 // see above (plain: ss only), compensated sums:
	ssC, ttC, stC float64 // their compensations (the values are ss + ssC, …)
	eSS, eTT, eST float64 // bounds on their accumulated rounding errors
	since, every  int64   // labelled sparse events since the last exact pass, and its period
	exact         int64   // exact passes so far (tests, benchmarks)
}

// dedupBits sizes the open-addressing table in which distinct finds the
// duplicates of an event with at most 2^dedupBits/4 entries (12 KiB, in the
// L1 cache, where the dense accumulator acc costs a cache miss per entry).
const dedupBits = 10

// distinct sums the duplicates of (idx, val) in idx order (as
// x[idx[k]] += val[k] does) and returns the distinct entries in the
// order of their first occurrence (in sp's buffers). Entries whose sum is
// 0 may be kept (every use of an entry adds nothing for a zero value) or
// left out.
//
// Short events (the hashed ones: a few dozen entries) are checked against
// a 2048-bit filter of their indices' hashes, on the stack: an index whose
// bit is still clear is new, one whose bit is set is looked for among the
// entries so far (a duplicate, or a collision in the filter: one event in
// five with 30 entries). Up to 2^dedupBits/4 entries an open-addressing
// table finds the duplicates; beyond, the dense accumulator acc.
func (sp *mamSparse) distinct(idx []int32, val []float64) ([]int32, []float64) {
	si, sx := sp.si[:0], sp.sx[:0]
	switch {
	case len(idx) <= distinctFilterMax:
		var filt [32]uint64
		val = val[:len(idx)]
		for k, i := range idx {
			h := uint32(i) * 0x9E3779B1 >> (32 - 11)
			w, b := h>>6, uint64(1)<<(h&63)
			if filt[w&31]&b != 0 {
				if j := slices.Index(si, i); j >= 0 {
					sx[j] += val[k]
					continue
				}
			}
			filt[w&31] |= b
			si = append(si, i)
			sx = append(sx, val[k])
		}
	case len(idx) <= 1<<dedupBits/4:
		if sp.gen++; sp.gen == 0 { // stamps wrapped: forget them
			clear(sp.hgen[:])
			sp.gen = 1
		}
		gen := sp.gen
		const mask = 1<<dedupBits - 1
		for k, i := range idx {
			h := (uint32(i) * 0x9E3779B1) >> (32 - dedupBits)
			for {
				if sp.hgen[h] != gen {
					sp.hgen[h], sp.hkey[h], sp.hpos[h] = gen, i, int32(len(si))
					si = append(si, i)
					sx = append(sx, val[k])
					break
				}
				if sp.hkey[h] == i {
					sx[sp.hpos[h]] += val[k]
					break
				}
				h = (h + 1) & mask
			}
		}
		// drop the entries that summed to 0 (the dense pass adds nothing)
		j := 0
		for k, i := range si {
			if v := sx[k]; v != 0 {
				si[j], sx[j] = i, v
				j++
			}
		}
		si, sx = si[:j], sx[:j]
	default:
		// acc is left all zero again
		if sp.acc == nil {
			sp.acc = make([]float64, sp.dim)
		}
		acc := sp.acc
		for k, i := range idx {
			acc[i] += val[k]
		}
		for _, i := range idx {
			if xi := acc[i]; xi != 0 {
				si = append(si, i)
				sx = append(sx, xi)
				acc[i] = 0
			}
		}
	}
	sp.si, sp.sx = si, sx
	return si, sx[:len(si)]
}

// distinctFilterMax is the longest event distinct checks with its filter.
const distinctFilterMax = 64

// sparseTol is the largest error bound ObserveSparse lets the incremental
// scalars reach, relative to the quantity it affects (the squared
// normaliser 2(‖w‖² + b²), the offset against sqrt(‖w‖² + b²), the margin
// absolutely): far below the 1e-9 agreement with the dense path it
// promises, and the bound is a worst case.
const sparseTol = 1e-11

// roundoff is the unit roundoff 2⁻⁵³ with a little headroom.
const roundoff = 1.2e-16

// ObserveSparse is Observe on the dense x with x[idx[k]] += val[k] (see
// SparseModel), for the linear kernel without window or decay (Sparse must
// return nil; ObserveSparse panics with its error otherwise, and as
// Observe does for a bad label or len(idx) != len(val) or an index outside
// [0, Dim())). It costs O(len(idx)) amortised (see mamSparse) and does not
// allocate once warm; an unlabelled event changes no state that is
// encoded.
//
// The sums are updated exactly as by Observe on the densified x: the
// state differs only by the rounding of φ = x/‖x‖ (‖x‖² is summed over the
// distinct nonzero entries in their order of first occurrence). The score
// and the bound differ from Observe's by the rounding of the incremental
// norms, bounded as described at mamSparse: within 1e-9 relative
// (TestMAMSparseDenseEquivalence). After a sparse event the derived
// direction vector w is rebuilt lazily, by the next dense Observe (O(dim φ)
// once).
func (m *MAM) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) (p Prediction) {
	if err := m.Sparse(); err != nil {
		panic("online: MAM.ObserveSparse: " + err.Error())
	}
	if len(idx) != len(val) {
		panic("online: MAM.ObserveSparse: len(idx) != len(val)")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: MAM.Observe: label must be -1 or +1 (see Label)")
	}
	d := m.dim
	for _, i := range idx {
		if uint32(i) >= uint32(d) {
			panic(fmt.Sprintf("online: MAM.ObserveSparse: index %d outside [0, %d)", i, d))
		}
	}
	if m.sparseRFF() {
		m.observeSparseRFF(&p, idx, val, y, labelled) // mam_sparse_rff.go
		return p
	}
	sp := m.sp
	if sp == nil {
		sp = &mamSparse{dim: d, every: int64(max(4096, 2*d))} // acc: by its first use
		m.sp = sp
	}
	si, sx := sp.distinct(idx, val)

	p = Prediction{Delta: m.p.Delta, N: m.pn}
	// φ = x/‖x‖ = x·inv, as mapLinear (with its rescaling for a zero,
	// tiny, huge or non-finite x).
	inv, ok := unitScale(sx)
	if !ok {
		return p // neither scored nor learned
	}

	// φ in place, ‖φ‖², and the score with the touched coordinates of w
	// computed as derive computes them, in one pass.
	var z, sq float64
	if !m.p.Balance {
		s, c := m.s[:d], m.sC[:d]
		for k, i := range si {
			v := sx[k] * inv
			sx[k] = v
			sq += v * v
			z += (s[i] + c[i]) * v
		}
	} else {
		ip, in := m.classInverses()
		pos, posC, neg, negC := m.pos[:d], m.posC[:d], m.neg[:d], m.negC[:d]
		for k, i := range si {
			v := sx[k] * inv
			sx[k] = v
			sq += v * v
			z += ((pos[i]+posC[i])*ip - (neg[i]+negC[i])*in) * v
		}
	}
	f := (z + m.b) * m.k
	if f == 0 {
		f = 0 // no −0 on the wire
	}
	p.Score = f
	switch {
	case f > 0:
		p.Label = 1
	case f < 0:
		p.Label = -1
	}
	p.MistakeBound = boundAt(m.num, 1, math.Abs(f))
	p.HasBound = true
	if !labelled {
		return p
	}

	if !sp.valid {
		m.sparseExact()
	}
	m.n++
	if y > 0 {
		m.nPos++
	} else {
		m.nNeg++
	}
	m.tr, m.trC = twoSumAcc(m.tr, m.trC, sq)
	if !m.p.Balance {
		s, c := m.s[:d], m.sC[:d]
		var dss, e float64 // summed per event, as in the balanced case below
		for k, i := range si {
			v := y * sx[k]
			s0, ci := s[i], c[i]
			old := s0 + ci
			t := s0 + v
			bp := t - s0
			ci += (s0 - (t - bp)) + (v - bp)
			s[i], c[i] = t, ci
			nw := t + ci
			dl := (nw - old) * (nw + old)
			dss += dl
			e += math.Abs(dl)
		}
		sp.ss, sp.ssC = twoSumAcc(sp.ss, sp.ssC, dss)
		sp.eSS += roundoff * ((float64(len(si))+2)*e + math.Abs(sp.ssC))
	} else {
		t, tc, o, oc := m.pos[:d], m.posC[:d], m.neg[:d], m.negC[:d]
		if y < 0 {
			t, tc, o, oc = o, oc, t, tc
		}
		// The changes of ss, tt and st summed per event, then added to
		// the compensated sums once: the event's sum of n changes errs by
		// at most (n−1)u times the sum of their magnitudes, which the
		// bounds take in.
		var dss, dtt, dst, ess, ett, est float64
		for k, i := range si {
			xi := sx[k]
			ti, ci := t[i], tc[i]
			T0 := ti + ci
			s := ti + xi
			bp := s - ti
			ci += (ti - (s - bp)) + (xi - bp)
			t[i], tc[i] = s, ci
			T1 := s + ci
			O := o[i] + oc[i]
			// s_i = y·(T − O), t_i = T + O: ss and tt do not depend on the
			// sign, st changes with it.
			d0, d1 := T0-O, T1-O
			u0, u1 := T0+O, T1+O
			ds := (d1 - d0) * (d1 + d0)
			dt := (u1 - u0) * (u1 + u0)
			p0, p1 := d0*u0, d1*u1
			dss += ds
			dtt += dt
			dst += p1 - p0
			ess += math.Abs(ds)
			ett += math.Abs(dt)
			est += math.Abs(p0) + math.Abs(p1)
		}
		sp.ss, sp.ssC = twoSumAcc(sp.ss, sp.ssC, dss)
		sp.tt, sp.ttC = twoSumAcc(sp.tt, sp.ttC, dtt)
		sp.st, sp.stC = twoSumAcc(sp.st, sp.stC, y*dst)
		n := float64(len(si))
		sp.eSS += roundoff * ((n+2)*ess + math.Abs(sp.ssC))
		sp.eTT += roundoff * ((n+2)*ett + math.Abs(sp.ttC))
		sp.eST += roundoff * ((n+1)*est + math.Abs(sp.stC))
	}
	sp.since++
	if !m.sparseDerive() || sp.since >= sp.every {
		m.sparseExact()
		m.sparseDerive()
	}
	sp.stale = true
	return p
}

// classInverses returns 1/n₊ and 1/n₋ as derive computes them (1, 1 while
// a class is empty: the plain-sum fallback).
func (m *MAM) classInverses() (ip, in float64) {
	wp, wn := float64(m.nPos), float64(m.nNeg)
	if wp > 0 && wn > 0 {
		inv := 1 / (wp * wn)
		return wn * inv, wp * inv
	}
	return 1, 1
}

// sparseExact recomputes the scalars of mamSparse from the sums, O(dim φ).
func (m *MAM) sparseExact() {
	sp := m.sp
	if !m.p.Balance {
		var a0, a1 float64
		s, c := m.s, m.sC[:len(m.s)]
		i := 0
		for ; i+1 < len(s); i += 2 {
			v0, v1 := s[i]+c[i], s[i+1]+c[i+1]
			a0 += v0 * v0
			a1 += v1 * v1
		}
		if i < len(s) {
			v := s[i] + c[i]
			a0 += v * v
		}
		sp.ss = a0 + a1
	} else {
		var ss, tt, st float64
		pos, posC, neg, negC := m.pos, m.posC[:len(m.pos)], m.neg[:len(m.pos)], m.negC[:len(m.pos)]
		for i := range pos {
			P, N := pos[i]+posC[i], neg[i]+negC[i]
			s, t := P-N, P+N
			ss += s * s
			tt += t * t
			st += s * t
		}
		sp.ss, sp.tt, sp.st = ss, tt, st
	}
	sp.ssC, sp.ttC, sp.stC = 0, 0, 0
	sp.eSS, sp.eTT, sp.eST = 0, 0, 0
	sp.since = 0
	sp.valid = true
	sp.exact++
}

// sparseDerive sets the derived scalars (b, k, M̂, R̂, n, the bound's
// numerator) from the counts, tr Ω and the scalars of mamSparse, as derive
// does from its pass. It reports false when the error bounds of the
// scalars exceed sparseTol (the values are then set all the same).
func (m *MAM) sparseDerive() bool {
	sp := m.sp
	n := float64(m.n)
	m.pn = m.n
	invN := 1 / n
	tr := m.tr + m.trC
	ok := true
	ss, tt, st := max(sp.ss+sp.ssC, 0), sp.tt+sp.ttC, sp.st+sp.stC
	if !m.p.Balance {
		m.b, m.k = 0, 0
		if ss > 0 {
			m.k = 1 / math.Sqrt(ss)
		}
		m.margin = math.Sqrt(ss) * invN
		m.rad = 2 * invN * math.Sqrt(tr)
		ok = sp.eSS <= sparseTol*ss
	} else {
		wp, wn := float64(m.nPos), float64(m.nNeg)
		dn := wp - wn
		var ww, ws, eWW, eB, eWS float64
		if wp > 0 && wn > 0 {
			n2, d2, ad := n*n, dn*dn, math.Abs(dn)
			q := 4 * (wp * wn) * (wp * wn)
			ww = max((n2*ss-2*n*dn*st+d2*tt)/q, 0)
			ws = (n*ss - dn*st) / (2 * wp * wn)
			m.b = -((n2+d2)*st - n*dn*(ss+tt)) / (2 * q)
			eWW = (n2*sp.eSS + 2*n*ad*sp.eST + d2*sp.eTT) / q
			eB = ((n2+d2)*sp.eST + n*ad*(sp.eSS+sp.eTT)) / (2 * q)
			eWS = (n*sp.eSS + ad*sp.eST) / (2 * wp * wn)
		} else {
			ww, ws, m.b = ss, ss, dn
			eWW, eWS = sp.eSS, sp.eSS
		}
		den := ww + m.b*m.b
		m.k = 0
		if den > 0 {
			m.k = 1 / math.Sqrt(2*den)
		}
		m.margin = (ws + m.b*dn) * m.k * invN
		m.rad = 2 * invN * math.Sqrt((tr+n)/2)
		eDen := eWW + 2*math.Abs(m.b)*eB + eB*eB
		eMargin := (eWS + eB*math.Abs(dn)) * m.k * invN
		if den > 0 {
			eMargin += math.Abs(m.margin) * eDen / (2 * den)
		}
		ok = eDen <= sparseTol*den && eB <= sparseTol*math.Sqrt(den) && eMargin <= sparseTol
	}
	m.neff = n
	m.num = boundNumerator(1, m.margin, m.rad, n, m.lnTerm)
	return ok
}

// syncSparse rebuilds the dense derived state (w and the scalars) after
// sparse events, before a dense score: derive with x = 0 (acc, allocated
// here when no event was long enough to need it: a model fed only hashed
// events holds no such vector).
func (m *MAM) syncSparse() {
	sp := m.sp
	if sp.acc == nil {
		sp.acc = make([]float64, sp.dim)
	}
	m.update(sp.acc[:len(m.w)], 1)
}
