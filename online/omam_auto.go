package online

import (
	"fmt"
	"math"
	"slices"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/vmath"
)

// Gamma auto for omam: with kernel.gamma 0 (the default of the rbf and
// laplacian random features, hashed or not; not in the exact mode) the
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
//   - Hashed inputs (kernel.sparse: generated frequencies, which
//     features.hash sets). The kept inputs are their nonzero entries
//     (sparseWarm, as the MAM's gamma auto keeps them), not N·d floats:
//     S merges the entries of each pair (the nonzero terms of the dense
//     sum, in its order), the replays project the entries again, and
//     ObserveSparse projects an event's entries with the reference map
//     (O(D·nnz)) and goes on as Observe does. An event gives the same bits
//     through ObserveSparse as through Observe on its densified x, and the
//     same S as a model with the stored map on the densified inputs
//     (TestOMAMSparseAuto).
//
// Encoding: the fixed-gamma state (parameters with gamma 0), then S
// float64, the kept count uint32 (the labelled examples learned during
// the warm-up, 0 after it) and per kept example its level−1 uint32 and its
// input: d float64, or with kernel.sparse its entries (count uint32, the
// indices uint32, increasing, then the values float64, nonzero).

// omamAutoWidth is c, the width in units of 1/S.
const omamAutoWidth = 1

// omamAuto is an OMAM's gamma auto state.
type omamAuto struct {
	ref   *FeatureMap // the reference map (gamma autoRefGamma)
	nd    int         // D
	scale float64     // S (0 before the first labelled example)
	// Warm-up inputs (nil after the warm-up): autoWarmup×d floats, or
	// with kernel.sparse their entries.
	buf   []float64
	sw    *sparseWarm
	bufL  []int32   // warm-up levels (0-based)
	kept  int       // examples kept
	pairs []float64 // scratch: the squared distances of the kept pairs
	phi   []float64 // scratch: φ of the current event, 2D
	prep  []float64 // scratch: a replayed example's [z; ok]
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
		if !k.Sparse { // kernel.sparse keeps the warm-up inputs by their entries
			if err := checkAutoDim(dim); err != nil {
				return err
			}
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
	if a.ref.gen != nil {
		a.sw = newSparseWarm()
	} else {
		a.buf = make([]float64, autoWarmup*d)
	}
	a.bufL = make([]int32, autoWarmup)
	a.pairs = warmupPairs()
	a.kept = 0
}

// warming reports whether the width is still provisional (the warm-up
// keeps the labelled inputs).
func (a *omamAuto) warming() bool { return a.buf != nil || a.sw != nil }

// release drops the warm-up's inputs once the width is final.
func (a *omamAuto) release() {
	a.buf, a.sw, a.bufL, a.pairs, a.kept = nil, nil, nil, nil, 0
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
	return o.fm.Spec().Gamma, o.auto.scale, !o.auto.warming()
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

// observeSparseAuto is ObserveSparse under gamma auto with generated
// frequencies: the event's distinct nonzero entries si, sx (increasing
// indices, the order in which Observe's dense projection sums them) are
// projected with the reference map into prep, and observePrepared does
// the rest, with no x (only a window reads it, and Sparse refuses a
// window); the warm-up keeps the entries (keep).
func (o *OMAM) observeSparseAuto(pr *Prediction, prep []float64, si []int32, sx []float64, y float64, labelled bool) {
	a := o.auto
	z := prep[:a.nd:a.nd]
	a.ref.gen.projectSparse(z, si, sx)
	prep[a.nd] = 0
	if maxAbs(z) < autoZMax {
		prep[a.nd] = 1
	}
	if labelled && a.sw != nil {
		a.sw.pi, a.sw.pv = si, sx
	}
	o.observePrepared(pr, prep, nil, y, labelled)
	if a.sw != nil {
		a.sw.pi, a.sw.pv = nil, nil
	}
}

// keep records a labelled example of the warm-up (x, or the current
// sparse event's entries) and, when the k-th is a power of two or the
// last, re-estimates S and relearns the kept ones. It reports whether it
// relearned them (the example included).
func (o *OMAM) keep(x []float64, l int) bool {
	a := o.auto
	d := o.dim
	if a.sw != nil {
		a.sw.keep(a.kept, x)
	} else {
		copy(a.buf[a.kept*d:(a.kept+1)*d], x)
	}
	a.bufL[a.kept] = int32(l)
	a.kept++
	k := a.kept
	if !rebuildPoint(k) {
		return false
	}
	o.setScale(a.estimate(d, k))
	o.clearState()
	for i := range k {
		x := o.warmInput(i)
		phi := o.phiAuto(a.prep)
		o.learn(phi, x, int(a.bufL[i]), o.score(phi))
	}
	if k == autoWarmup {
		a.release()
	}
	return true
}

// estimate returns S from the first k kept inputs: the pairs of the last
// half of them (WarmupLo), merged from their entries with kernel.sparse.
func (a *omamAuto) estimate(d, k int) float64 {
	if a.sw != nil {
		return scaleOfPairs(a.pairs[:a.sw.pairs(a.pairs, WarmupLo(k), k)])
	}
	return warmupScale(a.pairs, a.buf, d, k)
}

// warmInput prepares the kept warm-up example i into a.prep (as Prepare
// would: its reference projection and ok) and returns its input as learn
// takes it: the kept x; with kernel.sparse the example densified when a
// window stores it (a dense Observe: Sparse refuses a window), else nil.
func (o *OMAM) warmInput(i int) []float64 {
	a := o.auto
	if a.sw == nil {
		x := a.buf[i*o.dim : (i+1)*o.dim]
		o.prepareAuto(a.prep, x)
		return x
	}
	w := a.sw
	z := a.prep[:a.nd:a.nd]
	w.project(a.ref.gen, z, i)
	a.prep[a.nd] = 0
	if maxAbs(z) < autoZMax {
		a.prep[a.nd] = 1
	}
	if o.par.Window.Events == 0 {
		return nil
	}
	if w.dense == nil {
		w.dense = make([]float64, o.dim)
	}
	clear(w.dense)
	si, sx := w.entries(i)
	addEntries(w.dense, si, sx)
	return w.dense
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
		if a.sw == nil {
			dst = codec.AppendF64s(dst, a.buf[i*d:(i+1)*d])
			continue
		}
		si, sx := a.sw.entries(i)
		dst = codec.AppendU32(dst, uint32(len(si)))
		for _, j := range si {
			dst = codec.AppendU32(dst, uint32(j))
		}
		dst = codec.AppendF64s(dst, sx)
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
	per := 4 + 8*d // level, input
	if a.sw != nil {
		per = 8 // level, entry count (and the entries, checked as they come)
	}
	if r.Err() != nil || !r.Need(kept*per) {
		return
	}
	for i := 0; i < kept && r.Err() == nil; i++ {
		l := r.U32()
		if r.Err() == nil && l >= uint32(o.m) {
			r.Failf("gamma auto: warm-up level %d out of range", int64(l)+1)
		}
		a.bufL[i] = int32(l)
		if a.sw != nil {
			decodeWarmEntries(r, a.sw, d)
			continue
		}
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
		a.release()
	}
	o.setScale(s)
}

// decodeWarmEntries reads the entries of the next warm-up example (count
// uint32, indices uint32 increasing below d, values float64 nonzero and
// finite) into w; failures are recorded in r.
func decodeWarmEntries(r *codec.Reader, w *sparseWarm, d int) {
	n := int(r.U32())
	if r.Err() != nil {
		return
	}
	if n > d || !r.Need(12*n) {
		r.Failf("gamma auto: warm-up example with %d entries in dimension %d (%d bytes left)", n, d, r.Len())
		return
	}
	base := len(w.idx)
	for q := range n {
		j := r.U32()
		if j >= uint32(d) || (q > 0 && int32(j) <= w.idx[len(w.idx)-1]) {
			r.Failf("gamma auto: warm-up example entries not increasing indices below %d", d)
			return
		}
		w.idx = append(w.idx, int32(j))
	}
	w.val = slices.Grow(w.val, n)[:base+n]
	r.F64s(w.val[base:])
	for _, v := range w.val[base:] {
		if (v == 0 || !isFinite(v)) && r.Err() == nil {
			r.Failf("gamma auto: warm-up entry %v (zero or not finite)", v)
		}
	}
	w.off = append(w.off, int32(len(w.idx)))
}

// autoSize is the encoded size of the gamma auto part.
func (o *OMAM) autoSize() int {
	a := o.auto
	switch {
	case a == nil:
		return 0
	case a.sw != nil:
		return 12 + 8*a.kept + 12*len(a.sw.idx)
	}
	return 12 + a.kept*(4+8*o.dim)
}

// omamAutoClose compares the gamma auto states of a and b (StateClose): S
// (within rtol) and the kept warm-up examples (exactly).
func omamAutoClose(a, b *OMAM, rtol float64) error {
	x, y := a.auto, b.auto
	switch {
	case x == nil && y == nil:
		return nil
	case x == nil || y == nil:
		return fmt.Errorf("online: gamma auto in one model only")
	case !sameOrClose(x.scale, y.scale, rtol) || x.kept != y.kept || x.warming() != y.warming():
		return fmt.Errorf("online: gamma auto: scale %v/%v, warm-up examples %d/%d", x.scale, y.scale, x.kept, y.kept)
	}
	k, d := x.kept, a.dim
	same := slices.Equal(x.bufL[:k], y.bufL[:k])
	switch {
	case (x.sw == nil) != (y.sw == nil):
		same = false
	case x.sw != nil:
		same = same && x.sw.equal(y.sw, k)
	default:
		same = same && slices.Equal(x.buf[:k*d], y.buf[:k*d])
	}
	if !same {
		return fmt.Errorf("online: gamma auto: warm-up examples differ")
	}
	return nil
}
