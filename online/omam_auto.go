package online

import (
	"math"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/vmath"
)

// Gamma auto for omam: with kernel.gamma 0 (the default of the rbf and
// laplacian random features; not with kernel.sparse or the exact mode) the
// ordinal MAM takes its kernel width from the data's scale, as the MAM's
// gamma auto builds its grid (mam_auto.go), but with one width: c = 1, so
// rbf γ = 1/S and laplacian γ = sqrt(1/S), S = median‖x − x'‖²/2 of the
// first N = autoWarmup labelled inputs (the pairs of their last half, as
// the model receives them). For standardised inputs S ≈ d: γ ≈ 1/d, the
// median heuristic. One width and not the MAM's mixture: an ordinal score
// has no mistake to weigh widths by, and on boston_ordinal this width
// ranks as well as the best of the grid c = 2^k, k = −4..6
// (TestOMAMAutoBoston).
//
//   - One projection. The map is built with the reference gamma 1 (rbf:
//     ω ~ N(0, 2I); laplacian: ω = z/|u|); Prepare writes z = Ω x, and the
//     model maps φ(x) = sqrt(1/D)[cos(s z); sin(s z)], s = sqrt(c/S), which
//     is exactly the random-feature map of its gamma (up to the rounding of
//     one product), so Prepare never depends on the learned state.
//   - Warm-up. The first N labelled inputs and levels are kept. At the k-th
//     labelled example, k a power of two or k = N, S is re-estimated from
//     the k kept (the pairs of the last half; the last two for k < 4; 1
//     for k = 1) and the state (sums, counts, window, thresholds) is
//     rebuilt by learning them again: after the N-th the state is exactly
//     that of a model whose width was fixed beforehand, and the width never
//     changes afterwards. Before the first labelled example S is 0 and the
//     model is empty.
//
// Encoding: the fixed-gamma state (parameters with gamma 0), then S
// float64, the kept count uint32 (the labelled examples learned during
// the warm-up, 0 after it) and per kept example its level−1 uint32 and its
// input (d float64).

// omamAutoWidth is c, the width in units of 1/S.
const omamAutoWidth = 1

// omamAuto is an OMAM's gamma auto state.
type omamAuto struct {
	ref   *FeatureMap // the reference map (gamma autoRefGamma)
	nd    int         // D
	scale float64     // S (0 before the first labelled example)
	buf   []float64   // warm-up inputs, autoWarmup×d (nil after the warm-up)
	bufL  []int32     // warm-up levels (0-based)
	kept  int         // examples in buf
	pairs []float64   // scratch: the squared distances of the kept pairs
	phi   []float64   // scratch: φ of the current event, 2D
	prep  []float64   // scratch: a replayed example's [z; ok]
}

// autoGamma reports whether p asks for gamma auto: rbf or laplacian random
// features with gamma 0.
func (p *OMAMParams) autoGamma() bool {
	return p.Budget == 0 && p.Kernel.Gamma == 0 && (p.Kernel.Type == KernelRBF || p.Kernel.Type == KernelLaplacian)
}

// AutoKeys: kernel.gamma takes auto (0), the default for rbf and
// laplacian random features.
func (p *OMAMParams) AutoKeys() []string { return []string{"kernel.gamma"} }

// validateOMAMKernel checks the kernel of the random-feature mode, gamma
// 0 being auto for rbf and laplacian.
func validateOMAMKernel(p *OMAMParams, dim int) error {
	k := p.Kernel
	if p.autoGamma() {
		if k.Sparse {
			return specErrorf("kernel.gamma", "auto is not available for omam with hashed features (kernel.sparse): give a number")
		}
		if err := checkAutoDim(dim); err != nil {
			return err
		}
		k.Gamma = autoRefGamma
	}
	return validateKernel(k, dim)
}

// newOMAMAuto builds o's gamma auto state and its reference map; o.fm is
// the map of the provisional width (S = 1 until the first example).
func newOMAMAuto(o *OMAM) error {
	k := o.par.Kernel
	k.Gamma = autoRefGamma
	ref, err := NewFeatureMap(k, o.dim)
	if err != nil {
		return err
	}
	a := &omamAuto{ref: ref, nd: k.Features}
	a.phi = make([]float64, 2*a.nd)
	a.prep = make([]float64, a.nd+1)
	a.allocWarmup(o.dim)
	o.auto = a
	o.setScale(0)
	return nil
}

func (a *omamAuto) allocWarmup(d int) {
	a.buf = make([]float64, autoWarmup*d)
	a.bufL = make([]int32, autoWarmup)
	a.pairs = warmupPairs()
	a.kept = 0
}

// setScale fixes S (0: none yet, the reference width) and the map.
func (o *OMAM) setScale(s float64) {
	a := o.auto
	a.scale = s
	mult, gamma := 1.0, float64(autoRefGamma)
	if s > 0 {
		r := omamAutoWidth / s
		mult, gamma = math.Sqrt(r), r
		if o.par.Kernel.Type == KernelLaplacian {
			gamma = mult
		}
	}
	o.fm = scaledMap(a.ref, mult, gamma)
}

// AutoGamma returns, under gamma auto, the width in use (the reference 1
// before the first labelled example), S and whether the width is final
// (the warm-up is over); 0, 0, false for a fixed gamma.
func (o *OMAM) AutoGamma() (gamma, scale float64, final bool) {
	if o.auto == nil {
		return 0, 0, false
	}
	return o.fm.Spec().Gamma, o.auto.scale, o.auto.buf == nil
}

// prepareAuto is Prepare under gamma auto: dst = [z; ok], z = Ω x with the
// reference map, ok = 1 when every |z_k| < autoZMax (so x was finite).
func (o *OMAM) prepareAuto(dst, x []float64) {
	a := o.auto
	z := dst[:a.nd:a.nd]
	a.ref.project(z, x)
	dst[a.nd] = 0
	if maxAbs(z) < autoZMax {
		dst[a.nd] = 1
	}
}

// phiAuto maps the prepared projection prep[:D] to φ with the current
// width, into a.phi.
func (o *OMAM) phiAuto(prep []float64) []float64 {
	a := o.auto
	vmath.SincosScaledRFF(a.phi, prep[:a.nd], o.fm.zmult, o.fm.scale) // the products rounded as project rounds them
	return a.phi
}

// keep records a labelled example of the warm-up and, when the k-th is a
// power of two or the last, re-estimates S and relearns the kept ones. It
// reports whether it relearned them (the example included).
func (o *OMAM) keep(x []float64, l int) bool {
	a := o.auto
	d := o.dim
	copy(a.buf[a.kept*d:(a.kept+1)*d], x)
	a.bufL[a.kept] = int32(l)
	a.kept++
	k := a.kept
	if !rebuildPoint(k) {
		return false
	}
	o.setScale(warmupScale(a.pairs, a.buf, d, k))
	o.clearState()
	for i := range k {
		x := a.buf[i*d : (i+1)*d]
		o.prepareAuto(a.prep, x)
		phi := o.phiAuto(a.prep)
		o.learn(phi, x, int(a.bufL[i]), o.score(phi))
	}
	if k == autoWarmup {
		a.buf, a.bufL, a.pairs, a.kept = nil, nil, nil, 0
	}
	return true
}

// clearState empties the learned state: counts, sums, window, thresholds.
func (o *OMAM) clearState() {
	o.n = 0
	clear(o.cnt)
	clear(o.cntC)
	o.sqw, o.sqwC = 0, 0
	clear(o.sum)
	clear(o.sumC)
	o.winNext, o.winFill = 0, 0
	o.omamThresholds = newOMAMThresholds(o.m)
	o.refresh()
}

// appendAuto appends the gamma auto part of the encoding.
func (o *OMAM) appendAuto(dst []byte) []byte {
	a := o.auto
	dst = codec.AppendF64(dst, a.scale)
	dst = codec.AppendU32(dst, uint32(a.kept))
	d := o.dim
	for i := range a.kept {
		dst = codec.AppendU32(dst, uint32(a.bufL[i]))
		dst = codec.AppendF64s(dst, a.buf[i*d:(i+1)*d])
	}
	return dst
}

// decodeAuto reads the gamma auto part of the encoding of a model that has
// learned n examples (o holds the decoded fixed-gamma state).
func (o *OMAM) decodeAuto(r *codec.Reader) {
	a := o.auto
	s := r.F64()
	kept := int(r.U32())
	if r.Err() != nil {
		return
	}
	n := o.n
	switch {
	case n == 0 && s != 0:
		r.Failf("gamma auto: scale %v before the first example", s)
	case n > 0 && !(s >= autoScaleMin && s <= autoScaleMax):
		r.Failf("gamma auto: scale %v out of [%g, %g]", s, autoScaleMin, autoScaleMax)
	case n < autoWarmup && int64(kept) != n, n >= autoWarmup && kept != 0:
		r.Failf("gamma auto: %d warm-up examples kept after %d learned", kept, n)
	}
	d := o.dim
	if r.Err() != nil || !r.Need(kept*(4+8*d)) {
		return
	}
	for i := 0; i < kept && r.Err() == nil; i++ {
		l := r.U32()
		if r.Err() == nil && l >= uint32(o.m) {
			r.Failf("gamma auto: warm-up level %d out of range", int64(l)+1)
		}
		a.bufL[i] = int32(l)
		x := a.buf[i*d : (i+1)*d]
		r.F64s(x)
		for _, v := range x {
			if !isFinite(v) && r.Err() == nil {
				r.Failf("gamma auto: a non-finite warm-up input")
			}
		}
	}
	a.kept = kept
	if n >= autoWarmup {
		a.buf, a.bufL, a.pairs = nil, nil, nil
	}
	o.setScale(s)
}

// autoSize is the encoded size of the gamma auto part.
func (o *OMAM) autoSize() int {
	if o.auto == nil {
		return 0
	}
	return 12 + o.auto.kept*(4+8*o.dim)
}
