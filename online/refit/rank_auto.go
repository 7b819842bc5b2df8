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
// agree, and the width follows the window as it moves. The random-feature
// solver builds its map once and keeps running sums of it, so it takes a
// number.

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
	g := rankAutoWidth / windowScale(d)
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

// AutoGamma returns, for a krr or lsrrank with gamma auto and solver
// exact, the rbf width its current fit was solved with (chosen from the
// window at that refit); ok is false before the first fit and for every
// other model.
func (m *Model) AutoGamma() (gamma float64, ok bool) {
	var ks []rank.Kernel
	switch t := m.tr.(type) {
	case *KRR:
		ks = t.Kernels
	case *LSRRank:
		ks = t.Kernels
	}
	if !slices.ContainsFunc(ks, isAuto) {
		return 0, false
	}
	if s := m.cur.Load(); s != nil {
		if f, isExact := s.fit.(exactFit); isExact {
			for _, k := range f.m.Kernels() {
				if k.Type == rank.RBF {
					return k.Gamma, true
				}
			}
		}
	}
	return 0, false
}
