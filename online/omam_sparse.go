package online

import (
	"errors"
	"fmt"
	"math"
)

// Hashed (sparse) features for omam.
//
//   - Linear kernel, normalised form (the default): the score
//     <w, φ>/(W·<T, φ>) needs w = Σ_ℓ c(ℓ) S_ℓ and T = Σ_ℓ S_ℓ only at the
//     event's nonzero coordinates, and learning adds φ to S_ℓ₀ at those
//     coordinates: O(m·nnz) per event. The derived w and T of the dense
//     path (every coordinate of w changes with the counts) are rebuilt
//     lazily, by the next dense Observe (syncDense), and not allocated
//     before it: a model fed only hashed events holds its sums and
//     nothing else of size dim.
//   - rbf and laplacian random features with generated frequencies
//     (kernel.sparse, which features.hash sets): the event's projection in
//     O(D·nnz) (featuremap_hashed.go), then the dense model's own code on
//     φ (ObservePrepared), O(m·D); fixed gamma or auto (the projection with
//     the reference map, the warm-up's inputs kept by their entries:
//     omam_auto.go).
//
// Not (Sparse says why): the raw linear form (its normaliser ‖w‖ changes
// in every coordinate at every event), a window (it stores inputs densely),
// decay with the linear kernel (it scales all m·dim sums per event).

var _ SparseModel = (*OMAM)(nil)

// SetHashed tells the parameters that the model's input is hashed
// (features.hash, online.Hashed): the rbf and laplacian random features
// generate their frequencies (kernel.sparse). Complete clears it for the
// linear kernel and the exact kernel mode.
func (p *OMAMParams) SetHashed() { p.Kernel.Sparse = true }

var _ Hashed = (*OMAMParams)(nil)

// Sparse reports whether o takes sparse input (ObserveSparse): nil for the
// normalised linear form without window or decay and for the random
// features with generated frequencies (kernel.sparse) without window;
// otherwise an error saying why not.
func (o *OMAM) Sparse() error {
	lin := o.par.Kernel.Type == KernelLinear
	switch {
	case !lin && o.fm.gen == nil:
		return fmt.Errorf("kernel %s: the stored frequency matrix has a column per input dimension; set kernel.sparse: true (features.hash sets it) to generate the columns an event needs", o.par.Kernel.Type)
	case o.par.Window.Events > 0:
		return errors.New("window: the window stores every input densely and maps the leaving one again, O(dim) per event (not implemented)")
	case lin && o.par.Decay.HalfLife > 0:
		return errors.New("decay with the linear kernel: every event scales all levels×dim sums (a lazy common scale is not implemented)")
	case lin && !o.par.Normalize:
		return errors.New("normalize false with the linear kernel: the raw score's normaliser ‖Σ c_ℓ S_ℓ‖ changes in every coordinate at every event (not implemented; the normalised form, the default, needs none)")
	}
	return nil
}

// ObserveSparse is Observe on the dense x with x[idx[k]] += val[k] (see
// SparseModel), in O(levels·nnz) for the normalised linear form and
// O(D·nnz + levels·D) for random features with generated frequencies
// (Sparse must return nil; it panics with its error otherwise, and as
// Observe does for a bad label, len(idx) != len(val) or an index outside
// [0, Dim())). It does not allocate once warm; an unlabelled event changes
// no state that is encoded.
//
// With random features the Prediction and the state are those of Observe
// on the densified x, to the bit. With the linear kernel the sums are
// updated as Observe updates them; φ = x/‖x‖ and the score differ by the
// rounding of ‖x‖² and of the sparse dot products (summed over the
// distinct nonzero entries in their order of first occurrence), a few
// ulps (TestOMAMSparse).
func (o *OMAM) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) (pr Prediction) {
	if err := o.Sparse(); err != nil {
		panic("online: OMAM.ObserveSparse: " + err.Error())
	}
	if len(idx) != len(val) {
		panic("online: OMAM.ObserveSparse: len(idx) != len(val)")
	}
	if labelled && !omamIsLevel(y, o.m) {
		panic("online: OMAM.Observe: label must be a level 1..m (see Label)")
	}
	d := o.dim
	for _, i := range idx {
		if uint32(i) >= uint32(d) {
			panic(fmt.Sprintf("online: OMAM.ObserveSparse: index %d outside [0, %d)", i, d))
		}
	}
	sp := o.sp
	if sp == nil {
		sp = &mamSparse{dim: d} // acc (dim floats) only for events of more than 2^dedupBits/4 entries
		o.sp = sp
	}
	si, sx := sp.distinct(idx, val)
	if gen := o.fm.gen; gen != nil {
		si, sx = nonzeroEntries(si, sx)
		sortEntries(si, sx)
		prep := o.prepBuf()
		if o.auto != nil {
			o.observeSparseAuto(&pr, prep, si, sx, y, labelled) // omam_auto.go
			return pr
		}
		np := o.p
		gen.projectSparse(prep[np/2:np], si, sx)
		prep[np] = 0
		if sq := sincosRFF(prep[:np], o.fm.scale); !math.IsNaN(sq) {
			prep[np] = 1
		}
		o.observePrepared(&pr, prep, nil, y, labelled) // no x: only a window reads it
		return pr
	}

	pr = Prediction{N: o.held}
	inv, ok := unitScale(sx)
	if !ok {
		return pr // neither scored nor learned, as Observe
	}
	// φ in place, and <w, φ>, <T, φ> with w and T at the touched
	// coordinates computed as pass computes them.
	stL, stI := o.strides()
	var num, den float64
	for k, i := range si {
		v := sx[k] * inv
		sx[k] = v
		var wi, ti float64
		if stL == 1 { // i-major: the coordinate's levels in a row
			j := int(i) * stI
			row, rowC := o.sum[j:j+len(o.coef)], o.sumC[j:j+len(o.coef)]
			for l, c := range o.coef {
				u := row[l] + rowC[l]
				wi += float64(c * u)
				ti += u
			}
		} else {
			for l, c := range o.coef {
				j := l*stL + int(i)
				u := o.sum[j] + o.sumC[j]
				wi += float64(c * u)
				ti += u
			}
		}
		num += wi * v
		den += ti * v
	}
	var s float64
	if o.total > 0 && math.Abs(den) >= 1e-12*o.total {
		s = num / (o.total * den)
	}
	if s == 0 || !isFinite(s) {
		s = 0 // no −0 on the wire
	}
	pr.Score = s
	pr.Label = o.predict(s)
	if !labelled {
		return pr
	}
	l := int(y) - 1
	o.n++
	o.cnt[l], o.cntC[l] = twoSumAcc(o.cnt[l], o.cntC[l], 1)
	o.derive()
	for k, i := range si {
		j := l*stL + int(i)*stI
		v := sx[k]
		t := o.sum[j]
		u := t + v
		bp := u - t
		o.sumC[j] += (t - (u - bp)) + (v - bp)
		o.sum[j] = u
	}
	o.stale = true // w and T: rebuilt by the next dense score (syncDense)
	o.record(s, l, o.n)
	return pr
}

// nonzeroEntries drops the entries whose value is 0.
func nonzeroEntries(si []int32, sx []float64) ([]int32, []float64) {
	j := 0
	for k, i := range si {
		if v := sx[k]; v != 0 {
			si[j], sx[j] = i, v
			j++
		}
	}
	return si[:j], sx[:j]
}

// unitScale returns the factor inv with which φ = x·inv = x/‖x‖ for the
// sparse x with entries sx, as mapLinear computes it: a zero, tiny, huge
// or non-finite x is first rescaled in place by a power of two (ok false
// when some entry is not finite); inv is 0 for x = 0.
func unitScale(sx []float64) (inv float64, ok bool) {
	var xx float64
	for _, v := range sx {
		xx += v * v
	}
	if !(xx > 0x1p-900 && xx < 0x1p900) {
		var mx float64
		for _, v := range sx {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, false
			}
			mx = max(mx, math.Abs(v))
		}
		xx = 0
		if mx > 0 {
			_, e := math.Frexp(mx)
			for k, v := range sx {
				v = math.Ldexp(v, -e)
				sx[k] = v
				xx += v * v
			}
		}
	}
	if xx > 0 {
		inv = 1 / math.Sqrt(xx)
	}
	return inv, true
}
