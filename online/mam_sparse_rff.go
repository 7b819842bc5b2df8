package online

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/streamer/streamer/online/codec"
)

// Random features on sparse input: the rbf and laplacian MAM with the
// generated map (kernel.sparse, featuremap_hashed.go) takes hashed
// (sparse) features through ObserveSparse. The event's projection
// z = Σ_k val_k·ω(:, idx_k) costs O(D·nnz); everything after it — sin/cos,
// the scores, the sums over φ, gamma auto's bandwidths and mixture — is the
// dense model's own code on the prepared buffer (Prepare's format), so an
// event gives the same bits through ObserveSparse as through Observe on
// its densified x.
//
// Gamma auto keeps its warm-up inputs (the first autoWarmup labelled ones,
// which fix the grid's scale S) as their nonzero entries (sparseWarm), not
// as dim floats each: S = median‖x − x'‖²/2 is computed by merging the
// entries, and the warm-up's replays project them again. The encoding
// during the warm-up holds them the same way (see sparseWarm.append).

// SetHashed tells the parameters that the model's input is hashed
// (features.hash, online.Hashed): the rbf and laplacian random features
// generate their frequencies (kernel.sparse) instead of storing a
// Features × 2^bits matrix. The configuration calls it before Complete,
// which clears it for the kernels without random features.
func (p *MAMParams) SetHashed() { p.Kernel.Sparse = true }

var _ Hashed = (*MAMParams)(nil)

// sparseKernelChecks refuses kernel.sparse where there are no random
// features to generate: the exact kernel mode (budget > 0).
func (c *checks) sparseKernel(k KernelSpec, budget int) {
	if k.Sparse && budget > 0 {
		c.add("kernel.sparse", "only for the random features of rbf and laplacian (budget 0): the exact kernel mode has no frequencies")
	}
}

// sparseRFF reports whether ObserveSparse takes the random-feature path.
func (m *MAM) sparseRFF() bool { return m.fm.gen != nil }

// observeSparseRFF is ObserveSparse for the generated random-feature map
// (fixed gamma or auto): the distinct nonzero entries, in increasing index
// (the order Observe's dense projection sums them in), are projected into
// the model's prepared buffer, and ObservePrepared does the rest, with no
// x (nil: only a window reads x, and Sparse refuses a window; gamma auto's
// warm-up keeps the entries, sparseWarm). Nothing of size dim is
// allocated but for an event of more than 2^dedupBits/4 entries.
func (m *MAM) observeSparseRFF(p *Prediction, idx []int32, val []float64, y float64, labelled bool) {
	sp := m.sp
	if sp == nil {
		sp = &mamSparse{dim: m.dim}
		m.sp = sp
	}
	si, sx := sp.distinct(idx, val)
	j := 0 // drop the entries that summed to 0, as the dense map skips zeros
	for k, i := range si {
		if v := sx[k]; v != 0 {
			si[j], sx[j] = i, v
			j++
		}
	}
	si, sx = si[:j], sx[:j]
	sortEntries(si, sx)
	prep := m.prep
	gen := m.fm.gen
	if a := m.auto; a != nil {
		z := prep[:a.nd:a.nd]
		gen.projectSparse(z, si, sx)
		prep[a.nd] = 0
		if maxAbs(z) < autoZMax {
			prep[a.nd] = 1
		}
		if labelled && a.sw != nil {
			a.sw.pi, a.sw.pv = si, sx // the warm-up keeps them (keepWarm)
		}
		m.observePrepared(p, prep, nil, y, labelled)
		if a.sw != nil {
			a.sw.pi, a.sw.pv = nil, nil
		}
		return
	}
	np := len(m.phi)
	gen.projectSparse(prep[np/2:np], si, sx)
	sq := sincosRFF(prep[:np], m.fm.scale)
	prep[np], prep[np+1] = sq, 1
	if math.IsNaN(sq) {
		prep[np], prep[np+1] = 0, 0
	}
	m.observePrepared(p, prep, nil, y, labelled)
}

// maxAbs returns max |z_k| (NaN when some z_k is NaN).
func maxAbs(z []float64) float64 {
	var m0, m1, m2, m3 float64
	i := 0
	for ; i+4 <= len(z); i += 4 {
		m0 = max(m0, math.Abs(z[i]))
		m1 = max(m1, math.Abs(z[i+1]))
		m2 = max(m2, math.Abs(z[i+2]))
		m3 = max(m3, math.Abs(z[i+3]))
	}
	for ; i < len(z); i++ {
		m0 = max(m0, math.Abs(z[i]))
	}
	return max(m0, m1, m2, m3)
}

// sortEntries sorts the distinct indices si increasingly, with sx.
func sortEntries(si []int32, sx []float64) {
	sx = sx[:len(si)]
	if len(si) <= 64 {
		for i := 1; i < len(si); i++ {
			k, v := si[i], sx[i]
			j := i
			for ; j > 0 && si[j-1] > k; j-- {
				si[j], sx[j] = si[j-1], sx[j-1]
			}
			si[j], sx[j] = k, v
		}
		return
	}
	// Heap sort: no allocation for any length.
	n := len(si)
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && si[c+1] > si[c] {
				c++
			}
			if si[i] >= si[c] {
				return
			}
			si[i], si[c] = si[c], si[i]
			sx[i], sx[c] = sx[c], sx[i]
			i = c
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i, n)
	}
	for e := n - 1; e > 0; e-- {
		si[0], si[e] = si[e], si[0]
		sx[0], sx[e] = sx[e], sx[0]
		down(0, e)
	}
}

// sparseWarm holds gamma auto's warm-up inputs by their nonzero entries,
// for the models with the generated map (kernel.sparse): example i's
// entries, increasing in index, are idx[off[i]:off[i+1]] and val[…].
type sparseWarm struct {
	off []int32
	idx []int32
	val []float64
	// The current event's entries when it came through ObserveSparse
	// (nil: take the nonzero entries of the dense x).
	pi []int32
	pv []float64
	// dense is scratch for an example densified (a window's replay).
	dense []float64
}

func newSparseWarm() *sparseWarm { return &sparseWarm{off: []int32{0}} }

// len returns the number of examples kept.
func (w *sparseWarm) len() int { return len(w.off) - 1 }

// entries returns example i's entries.
func (w *sparseWarm) entries(i int) ([]int32, []float64) {
	a, b := w.off[i], w.off[i+1]
	return w.idx[a:b], w.val[a:b]
}

// keep adds the k-th example (k = len()): the current sparse event's
// entries, or the nonzero entries of x.
func (w *sparseWarm) keep(k int, x []float64) {
	if k != w.len() {
		panic(fmt.Sprintf("online: gamma auto: warm-up example %d kept after %d", k, w.len()))
	}
	if w.pi != nil {
		w.idx = append(w.idx, w.pi...)
		w.val = append(w.val, w.pv[:len(w.pi)]...)
	} else {
		for j, v := range x {
			if v != 0 {
				w.idx = append(w.idx, int32(j))
				w.val = append(w.val, v)
			}
		}
	}
	w.off = append(w.off, int32(len(w.idx)))
}

// pairs writes into dst the squared distances ‖x_i − x_j‖² of the kept
// examples lo ≤ j < i < k, in estimate's order, and returns their number.
// Each sums the squared differences over the union of the two examples'
// indices in increasing order: the nonzero terms of the dense sum, in its
// order.
func (w *sparseWarm) pairs(dst []float64, lo, k int) int {
	np := 0
	for i := lo + 1; i < k; i++ {
		ai, av := w.entries(i)
		for j := lo; j < i; j++ {
			bi, bv := w.entries(j)
			var s float64
			p, q := 0, 0
			for p < len(ai) || q < len(bi) {
				var e float64
				switch {
				case q == len(bi) || (p < len(ai) && ai[p] < bi[q]):
					e = av[p]
					p++
				case p == len(ai) || bi[q] < ai[p]:
					e = -bv[q]
					q++
				default:
					e = av[p] - bv[q]
					p++
					q++
				}
				s += float64(e * e)
			}
			dst[np] = s
			np++
		}
	}
	return np
}

// project writes the projection of example i into z.
func (w *sparseWarm) project(g *genMap, z []float64, i int) {
	si, sx := w.entries(i)
	g.projectSparse(z, si, sx)
}

// append appends the first k examples: per example its entry count
// uint32, then its indices uint32 and values float64.
func (w *sparseWarm) append(dst []byte, k int) []byte {
	for i := range k {
		si, sx := w.entries(i)
		dst = codec.AppendU32(dst, uint32(len(si)))
		for _, j := range si {
			dst = codec.AppendU32(dst, uint32(j))
		}
		dst = codec.AppendF64s(dst, sx)
	}
	return dst
}

// equal reports whether the first k examples of w and o are the same.
func (w *sparseWarm) equal(o *sparseWarm, k int) bool {
	for i := range k {
		ai, av := w.entries(i)
		bi, bv := o.entries(i)
		if !slices.Equal(ai, bi) || !slices.Equal(av, bv) {
			return false
		}
	}
	return true
}

// unmarshalWarmupSparse decodes the state of a gamma-auto MAM with the
// generated map during its warm-up, after k labelled examples: r holds
// the state after the example count, the state of a model of the same
// parameters (autoStateSize) followed by the k labels and the k examples'
// entries (sparseWarm.append). The examples are learned again into a new
// model, whose state must encode to the same bytes; on success m is that
// model.
func (m *MAM) unmarshalWarmupSparse(r *codec.Reader, d int, p MAMParams, k int) error {
	raw := r.Rest()
	fixed := autoStateSize(p, d, int64(k)) - 8
	if len(raw) < fixed+k {
		return fmt.Errorf("%w: %d bytes of gamma-auto state, want at least %d", ErrFormat, len(raw), fixed+k)
	}
	nm, err := newAutoMAM(d, p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	a := nm.auto
	tail := codec.NewReader(raw[fixed:], ErrFormat)
	ys := make([]int8, k)
	for i := range ys {
		ys[i] = -1
		if tail.Bool("warm-up label") {
			ys[i] = 1
		}
	}
	w := newSparseWarm()
	for range k {
		n := int(tail.U32())
		if tail.Err() == nil && (n > d || tail.Len() < 12*n) {
			tail.Failf("warm-up example with %d entries in dimension %d (%d bytes left)", n, d, tail.Len())
		}
		if tail.Err() != nil {
			return tail.Err()
		}
		for q := range n {
			j := tail.U32()
			if j >= uint32(d) || (q > 0 && int32(j) <= w.idx[len(w.idx)-1]) {
				return fmt.Errorf("%w: warm-up example entries not increasing indices below %d", ErrFormat, d)
			}
			w.idx = append(w.idx, int32(j))
		}
		start := len(w.val)
		w.val = append(w.val, make([]float64, n)...)
		tail.F64s(w.val[start:])
		for _, v := range w.val[start:] {
			if v == 0 || !(math.Abs(v) <= math.MaxFloat64) {
				return fmt.Errorf("%w: warm-up entry %v (zero or not finite)", ErrFormat, v)
			}
		}
		w.off = append(w.off, int32(len(w.idx)))
	}
	if err := tail.End(); err != nil {
		return err
	}
	// Learn them again, as ObserveSparse did (or Observe, with a window,
	// which stores x: then x is the example densified).
	var x []float64
	if a.ring != nil {
		x = make([]float64, d)
	}
	prep := nm.prep
	for i, y := range ys {
		si, sx := w.entries(i)
		z := prep[:a.nd:a.nd]
		nm.fm.gen.projectSparse(z, si, sx)
		if !(maxAbs(z) < autoZMax) {
			return fmt.Errorf("%w: warm-up input %d out of range", ErrFormat, i)
		}
		prep[a.nd] = 1
		if a.sw != nil {
			a.sw.pi, a.sw.pv = si, sx
		}
		a.mapAll(z)
		if x != nil {
			addEntries(x, si, sx)
		}
		a.learn(nm, x, float64(y))
		if x != nil {
			for _, j := range si {
				x[j] = 0
			}
		}
	}
	if a.sw != nil {
		a.sw.pi, a.sw.pv = nil, nil
	}
	if !bytes.Equal(a.appendState(nm, make([]byte, 0, 8+len(raw)))[8:], raw) {
		return fmt.Errorf("%w: the warm-up state is not that of its examples", ErrFormat)
	}
	*m = *nm
	return nil
}

// keepWarm keeps the k-th warm-up input x (or the current sparse event).
func (a *mamAuto) keepWarm(k int, x []float64) {
	if a.sw != nil {
		a.sw.keep(k, x)
		return
	}
	copy(a.buf[k*a.d:(k+1)*a.d], x)
}

// warmInput projects the kept warm-up example i into a.z and returns its
// input as step takes it: the kept x, or with kernel.sparse the example
// densified when a window stores it, else nil (step reads x only for a
// window).
func (a *mamAuto) warmInput(m *MAM, i int) []float64 {
	if a.sw == nil {
		x := a.buf[i*a.d : (i+1)*a.d]
		m.fm.project(a.z, x)
		return x
	}
	w := a.sw
	w.project(m.fm.gen, a.z, i)
	if a.ring == nil {
		return nil
	}
	if w.dense == nil {
		w.dense = make([]float64, a.d)
	}
	clear(w.dense)
	si, sx := w.entries(i)
	for k, j := range si {
		w.dense[j] = sx[k]
	}
	return w.dense
}

// warmEqual reports whether the first k kept warm-up inputs of a and b are
// the same.
func (a *mamAuto) warmEqual(b *mamAuto, k int) bool {
	if (a.sw == nil) != (b.sw == nil) {
		return false
	}
	if a.sw != nil {
		return a.sw.equal(b.sw, k)
	}
	return slices.Equal(a.buf[:k*a.d], b.buf[:k*a.d])
}

// addEntries adds the entries (idx, val) into x.
func addEntries(x []float64, idx []int32, val []float64) {
	for k, i := range idx {
		x[i] += val[k]
	}
}
