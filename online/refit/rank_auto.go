package refit

import (
	"slices"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/rank"
)

// Gamma auto for the exact ranking solvers (krr and lsrrank with solver
// exact and the rbf kernel; kernel.gamma omitted or auto, the default
// since 2026-11-27): every refit takes the kernel's width from the scale
// of the window it fits by the classic median heuristic, σ = the median
// distance between inputs and γ = 1/(2σ²): with S = median‖x − x'‖²/2
// (online.MedianScale over the pairs of the window's last rankAutoRows
// rows), γ = 1/(4S), c = 1/4 in the units of docs/math.md §3a (for
// standardised inputs γ ≈ 1/(4d)). On boston_ordinal that width ranks as
// well as the best of the grid c = 1/16 … 64 for krr and within 0.005 for
// lsrrank (TestRankAutoBoston); omam's normalised score prefers c = 1
// (online/omam_auto.go). The fitted model keeps the γ it was solved with
// (rank.Model encodes its kernels), so its scores and a restored fit
// agree, and the width follows the window as it moves.
//
// The random-feature solver (solver features) keeps running sums of one
// map, so its width cannot follow the window: it is fixed by a warm-up as
// omam's is (online/omam_auto.go). At its k-th labelled event for k = 1,
// 2, 4, … rankAutoRows the Model re-estimates S from the window's newest
// k − online.WarmupLo(k) rows (the later half of those seen, whose
// standardisation had the most data), redraws the map at γ = c/S with the
// same seed (the same directions, scaled) and re-adds the window to the
// emptied sums; after that the map stays. Its fits then approximate the
// exact solvers' kernel at that width. The state carries S.

// rankAutoWidth is c, the width in units of 1/S.
const rankAutoWidth = 0.25

// rankAutoRows is the number of the window's newest rows whose pairs set S.
const rankAutoRows = 64

// autoKernels returns ks with every rbf kernel of gamma 0 given the width
// of the window d; ks itself when none asks for auto.
func autoKernels(ks []rank.Kernel, d *Data) []rank.Kernel {
	if !slices.ContainsFunc(ks, isAuto) {
		return ks
	}
	return scaledKernels(ks, windowScale(d))
}

// scaledKernels returns a copy of ks with every rbf kernel of gamma 0
// given the width of the data scale S.
func scaledKernels(ks []rank.Kernel, S float64) []rank.Kernel {
	g := rankAutoWidth / S
	out := slices.Clone(ks)
	for i := range out {
		if isAuto(out[i]) {
			out[i].Gamma = g
		}
	}
	return out
}

// isAuto reports whether k asks for gamma auto: rbf with gamma 0.
func isAuto(k rank.Kernel) bool { return k.Type == rank.RBF && k.Gamma == 0 }

// windowScale returns S of the window's newest rankAutoRows rows.
func windowScale(d *Data) float64 {
	n := d.N()
	lo := max(0, n-rankAutoRows)
	if !d.Sparse() {
		return online.DenseScale(d.X[lo*d.D:n*d.D], d.D)
	}
	pairs := make([]float64, 0, (n-lo)*(n-lo-1)/2)
	for i := lo + 1; i < n; i++ {
		a := d.Rows[i]
		for _, b := range d.Rows[lo:i] {
			pairs = append(pairs, sparse.Dist2(sparse.Sq(a), sparse.Sq(b), sparse.Dot(a, b)))
		}
	}
	return online.MedianScale(pairs)
}

// AutoGamma returns, for a krr or lsrrank with gamma auto, the rbf width
// its current fit was solved with (solver exact: chosen from the window at
// that refit; solver features: the width of the map the fit used); ok is
// false before the first fit and for every other model. It is safe to
// call concurrently with Observe.
func (m *Model) AutoGamma() (gamma float64, ok bool) {
	var ks []rank.Kernel
	switch t := m.tr.(type) {
	case *KRR:
		ks = t.Kernels
	case *LSRRank:
		ks = t.Kernels
	case *RFRank:
		ks = t.Kernels
	}
	if !slices.ContainsFunc(ks, isAuto) {
		return 0, false
	}
	s := m.cur.Load()
	if s == nil {
		return 0, false
	}
	var fitted []rank.Kernel
	switch f := s.fit.(type) {
	case exactFit:
		fitted = f.m.Kernels()
	case featureFit:
		fitted = f.m.FeatureMap().Config().Kernels
	}
	for _, k := range fitted {
		if k.Type == rank.RBF {
			return k.Gamma, true
		}
	}
	return 0, false
}

// autoFeatures reports whether the trainer is the random-feature solver
// with gamma auto.
func autoFeatures(tr Trainer) bool {
	t, ok := tr.(*RFRank)
	return ok && slices.ContainsFunc(t.Kernels, isAuto)
}

// rescale is the warm-up step of the random-feature solver's gamma auto
// at the k-th labelled event (k = m.learned, a power of two ≤
// rankAutoRows): S from the window's newest k − WarmupLo(k) rows, the map
// redrawn at its width, the window re-added to the emptied sums. It
// allocates (warm-up only).
func (m *Model) rescale() {
	k, D, W := int(m.learned), m.cfg.Dim, m.cfg.Window
	n := min(m.size, k-online.WarmupLo(k))
	x := make([]float64, n*D)
	for j := range n {
		i := (m.head + m.size - n + j) % W
		copy(x[j*D:(j+1)*D], m.xs[i*D:(i+1)*D])
	}
	S := online.DenseScale(x, D)
	fm, err := m.tr.(*RFRank).featureMap(D, S)
	if err != nil {
		// Cannot happen: S is clamped to finite values > 0, and the rest
		// of the map's configuration made the first map. The map of the
		// last width stays.
		return
	}
	m.sums.Remap(fm)
	for j := range m.size {
		i := (m.head + j) % W
		m.sums.Add(m.xs[i*D:(i+1)*D], m.ys[i])
	}
	m.autoS = S
}

// rescalePoint reports whether the k-th labelled event re-estimates the
// random-feature solver's S: k a power of two ≤ rankAutoRows.
func rescalePoint(k int64) bool { return k <= rankAutoRows && k&(k-1) == 0 }
