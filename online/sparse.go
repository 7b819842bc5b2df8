package online

import (
	"fmt"
	"math"
)

// SparseModel is a Model that also takes sparse input: x has Dim() entries,
// all zero but x[idx[k]] += val[k] (duplicate indices are summed, in the
// order given).
type SparseModel interface {
	Model
	// ObserveSparse is Observe on the x described by idx and val
	// (len(idx) == len(val), every index in [0, Dim()); it panics
	// otherwise): O(len(idx)) work, no allocation once warm.
	ObserveSparse(idx []int32, val []float64, y float64, labelled bool) Prediction
}

var _ SparseModel = (*Logistic)(nil)

// FieldModel is a SparseModel whose input entries can carry a field: the
// hashed namespace each entry came from, numbered from 1 in the order of
// features.namespaces (0: the top level, a namespace not listed, or a
// crossed feature of features.interactions). A model may use it (fm
// factorizes only the pairs of namespaces its factorize key names).
type FieldModel interface {
	SparseModel
	// ObserveFields is ObserveSparse with field[k] the field of entry k
	// (len(field) == len(idx)); nil fields mean every entry has field 0.
	ObserveFields(idx []int32, val []float64, field []uint8, y float64, labelled bool) Prediction
}

// MaxFields is the largest field number (features.namespaces lists at
// most MaxFields namespaces when a FieldModel reads them).
const MaxFields = 255

// SparseParams is implemented by the parameters of a model type that
// keeps its inputs — a refit window, support vectors, the exact kernel
// mode's budget of examples — and can keep them sparse when the features
// are hashed (features.hash: dimension 2^bits, at most
// features.max_features entries per event). With Spec.MaxFeatures > 0 the
// registry (and the configuration's validation) uses ValidateSparse and
// NewSparse in place of Validate and Type.New, so that nothing of size
// dim per stored row is allocated or bounded.
type SparseParams interface {
	Params
	// ValidateSparse is Validate for hashed inputs of dimension dim with
	// at most nnz entries each: the storage is bounded by nnz instead of
	// dim, and what has no sparse path is refused, naming the key (a type
	// that cannot take hashed features at all names features.hash).
	ValidateSparse(dim, nnz int) error
	// NewSparse builds an empty model for such inputs; the parameters have
	// passed ValidateSparse.
	NewSparse(dim, nnz int) (Model, error)
}

// MaxSparseDim is the largest dimension of hashed inputs (features.hash.bits
// 30).
const MaxSparseDim = 1 << 30

// MaxDenseDim is the largest input dimension Type.New builds a model for
// (2^20): of dense inputs, and of hashed ones for the types whose
// parameters are not SparseParams and the configurations whose
// ValidateSparse bounds the dimension as for dense inputs (state kept per
// input dimension, as logistic's weights or a linear mam's sums).
const MaxDenseDim = maxDim

// SparseSupport says whether m takes sparse input (hashed features): nil
// when it does, else an error naming its type and why not (a SparseModel
// whose configuration has no sparse path says so through a Sparse method).
func SparseSupport(m Model) error {
	s, ok := m.(SparseModel)
	if !ok {
		return fmt.Errorf("type %s does not take hashed (sparse) features yet; logistic, fm, mam (linear, rbf and laplacian random features, or budget > 0), omam, svm, krr, lsrrank and mlsrrank (solver exact) do", m.Type())
	}
	if c, ok := s.(interface{ Sparse() error }); ok {
		if err := c.Sparse(); err != nil {
			return fmt.Errorf("type %s does not take hashed (sparse) features in this configuration: %w", m.Type(), err)
		}
	}
	return nil
}

// PeekSparse returns m's prediction for the sparse x without changing m's
// state: ObserveSparse(idx, val, 0, false), which for every SparseModel
// leaves what the model learned as it was (a refitted model with
// refit.on_score may refit first, as Peek says). Like ObserveSparse it
// needs exclusive use of m (it uses m's scratch space) and does not
// allocate.
func PeekSparse(m SparseModel, idx []int32, val []float64) Prediction {
	return m.ObserveSparse(idx, val, 0, false)
}

// ObserveFields is m.ObserveFields(idx, val, field, y, labelled) when m
// reads the entries' fields (a FieldModel), and m.ObserveSparse(idx, val,
// y, labelled) otherwise: the caller that has the fields of hashed
// entries passes them, and the models that do not read them never see
// them. field is nil or as long as idx.
func ObserveFields(m SparseModel, idx []int32, val []float64, field []uint8, y float64, labelled bool) Prediction {
	if f, ok := m.(FieldModel); ok {
		return f.ObserveFields(idx, val, field, y, labelled)
	}
	return m.ObserveSparse(idx, val, y, labelled)
}

// PeekFields is PeekSparse with the entries' fields, for a model that
// reads them: ObserveFields(m, idx, val, field, 0, false), which leaves
// m's state as it was.
func PeekFields(m SparseModel, idx []int32, val []float64, field []uint8) Prediction {
	return ObserveFields(m, idx, val, field, 0, false)
}

// sparseState is the part of a Logistic only ObserveSparse uses.
//
// The dense update shrinks every weight at every labelled event through the
// L2 term: a coordinate i with x_i = 0 takes the step
//
//	g = L2·w_i,   G_i += g²,   w_i −= η·g/(sqrt(G_i) + 1e-8)
//
// which also grows its AdaGrad sum G_i, so it is no common scale factor
// (the shrink factor 1 − η·L2/(sqrt(G_i) + 1e-8) is per coordinate and
// changes with G_i). ObserveSparse defers these idle steps: coordinate i
// remembers the clock (the labelled-event count n) up to which its (w_i,
// G_i) are current, max(stamp[i], floor), and when an event touches it, or
// when the whole state is read (Observe, Weights, MarshalBinary: flush),
// catchUp applies the k skipped idle steps at once (see catchUp for how
// exactly). With L2 = 0 the idle step is the identity and nothing is
// deferred.
type sparseState struct {
	stamp []int64    // clock at which (w_i, G_i) were last made current by ObserveSparse
	floor int64      // clock at which every coordinate was current when dirty became true
	dirty bool       // some coordinates lag behind n: flush before a dense read
	dd    *mamSparse // the event's distinct entries (mamSparse.distinct; nil before the first sparse event)
}

// ObserveSparse is Observe on the dense x with x[idx[k]] += val[k]: the
// same score, prediction and step in O(len(idx)) (see sparseState for the
// deferred L2 steps). What differs from Observe on the densified x:
//
//   - <w, x> and ‖x‖² are summed over the distinct nonzero entries in the
//     order of their first occurrence in idx, in two sums by index parity
//     as the dense path's: bit for bit the dense sums when the indices are
//     ascending, otherwise different by rounding (a few ulps of the
//     score; the learning then differs by the rounding of its gradient,
//     which AdaGrad can amplify over a long stream to about 1e-8);
//   - an entry whose values sum to exactly 0 is left out, which is what the
//     dense step does with it (the idle step);
//   - the deferred idle L2 steps (L2 > 0): a coordinate last updated at the
//     previous event is replayed exactly (bit for bit the dense operations);
//     longer gaps are computed in closed form by blocks, to a relative
//     error of w below 1e-9 per unit of log-shrinkage ln(w_before/w_after)
//     and of G below 1e-9 (catchUp, TestLogisticCatchUp).
//
// With L2 = 0 and ascending indices the Prediction and the new state are
// bit for bit Observe's on the densified x. Cost: O(len(idx)); with L2 > 0
// every touched coordinate whose last update is two or more events old
// pays one closed-form catch-up, about 70 ns (three divisions, two square
// roots, at most one exp), which dominates the per-event time of hashed
// data (BenchmarkLogisticSparse30).
func (m *Logistic) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) Prediction {
	if len(idx) != len(val) {
		panic("online: Logistic.ObserveSparse: len(idx) != len(val)")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: Logistic.ObserveSparse: label must be -1 or +1 (see Label)")
	}
	d := len(m.w)
	for _, i := range idx {
		if uint32(i) >= uint32(d) {
			panic(fmt.Sprintf("online: Logistic.ObserveSparse: index %d outside [0, %d)", i, d))
		}
	}
	if m.dd == nil {
		// No dim-sized scratch for the hashed events (a few dozen entries):
		// distinct finds their duplicates in a small table.
		m.dd = &mamSparse{dim: d}
		if m.p.L2 > 0 {
			m.stamp = make([]int64, d)
		}
	}
	// Sum duplicates in idx order (as x[idx[k]] += val[k] does) and list the
	// distinct nonzero entries in the order of their first occurrence.
	si, sx := nonzeroEntries(m.dd.distinct(idx, val))

	p := Prediction{N: m.n}
	// <w, x> and ‖x‖² with dotSq's two accumulators, by index parity: for
	// ascending indices the very sums of the dense path.
	var z, xx [2]float64
	lazy := m.p.L2 > 0 && m.dirty
	w, g := m.w[:d], m.g[:d]
	if lazy {
		stamp := m.stamp[:d]
		for k, i := range si {
			wi := w[i]
			if from := max(stamp[i], m.floor); from < m.n && wi != 0 {
				var gi float64
				wi, gi = m.catchUp(wi, g[i], m.n-from)
				if labelled {
					w[i], g[i], stamp[i] = wi, gi, m.n
				}
			}
			xi := sx[k]
			z[i&1] += wi * xi
			xx[i&1] += xi * xi
		}
	} else {
		for k, i := range si {
			xi := sx[k]
			z[i&1] += w[i] * xi
			xx[i&1] += xi * xi
		}
	}
	if !(xx[0]+xx[1] <= maxInputSq) {
		return p
	}
	hi, lo := logitPrediction(&p, z[0]+z[1]+m.b)
	if !labelled {
		return p
	}
	s := hi
	if y*p.Score >= 0 {
		s = lo
	}
	gz := -y * s
	eta, l2 := m.p.LearningRate, m.p.L2
	for k, i := range si {
		// the dense step of learn for coordinate i, w_i current at m.n
		xi, wi := sx[k], w[i]
		gi := gz*xi + l2*wi
		t := g[i] + gi*gi
		g[i] = t
		w[i] = wi - eta*gi/(math.Sqrt(t)+adagradEps)
	}
	m.gb += gz * gz
	m.b -= eta * gz / (math.Sqrt(m.gb) + adagradEps)
	if l2 > 0 {
		if !m.dirty {
			m.floor, m.dirty = m.n, true
		}
		stamp := m.stamp[:d]
		for _, i := range si {
			stamp[i] = m.n + 1
		}
	}
	m.n++
	if y > 0 {
		m.nPos++
	} else {
		m.nNeg++
	}
	return p
}

// flush brings every coordinate up to the clock n (the deferred idle L2
// steps of ObserveSparse), so that w and G are the dense path's state.
func (m *Logistic) flush() {
	if !m.dirty {
		return
	}
	w, g, stamp := m.w, m.g[:len(m.w)], m.stamp[:len(m.w)]
	for i, wi := range w {
		if from := max(stamp[i], m.floor); from < m.n && wi != 0 {
			w[i], g[i] = m.catchUp(wi, g[i], m.n-from)
		}
	}
	m.dirty = false
}

// catchUpExact is the longest gap catchUp replays step by step (a replayed
// step costs about as much as a closed-form block).
const catchUpExact = 1

// catchUpTau bounds the relative growth of G within one closed-form block.
const catchUpTau = 5e-5

// catchUp returns (w, G) after k idle dense steps (x_i = 0) from (w, G):
//
//	G_j = G_{j−1} + (L2·w_{j−1})²,   w_j = w_{j−1}·(1 − r_j),   r_j = η·L2/(sqrt(G_j) + 1e-8).
//
// Up to catchUpExact remaining steps, or while a block would be shorter,
// or while r ≥ 1/2 (a G so small that the step overshoots), it replays the
// dense operations themselves, bit for bit (at most about 1100 such steps:
// with r ≥ 1/2, w halves per step unless G grows). Otherwise it takes a block of
// m steps in closed form, m as long as the block's growth of G stays
// within catchUpTau·G. G grows by (L2·w_j)², so within a block the factor
// 1 − r_j is nearly constant; with a constant factor f = 1 − r,
// G_j = G + (L2·w)²·S(j), S(j) = Σ_{i<j} f^{2i}, and the block uses the r
// of the mean of G_1..G_m (the mean of S(j) in closed form at r_1, then
// r at that mean):
//
//	w ← w·f^m,   G ← G + (L2·w)²·S(m).
//
// Using the mean G removes the first-order error of the varying r_j; what
// is left is second order in catchUpTau: TestLogisticCatchUp measures a
// relative error of w of at most 3.3e-10 per unit of log-shrinkage and of
// G of 8.3e-10 against the replay over gaps of up to 3·10⁵ steps. The
// number of blocks is about (G_end − G)/(catchUpTau·G) + 1 ≤
// L2·w²/(2η·catchUpTau·sqrt(G)) + 1, independent of k (10·w²/sqrt(G) + 1
// at the defaults, almost always 1).
func (m *Logistic) catchUp(w, G float64, k int64) (float64, float64) {
	eta, l2 := m.p.LearningRate, m.p.L2
	c := eta * l2
	for k > 0 && w != 0 {
		a := l2 * w
		a2 := a * a
		blk := k
		if lim := catchUpTau * G / a2; lim < float64(blk) {
			blk = int64(lim)
		}
		r := c / (math.Sqrt(G+a2) + adagradEps)
		if blk <= catchUpExact || r >= 0.5 {
			// exact replay of the dense step, at most catchUpExact steps
			n := min(k, catchUpExact)
			for j := n; j > 0; j-- {
				gi := l2 * w
				G += gi * gi
				w -= eta * gi / (math.Sqrt(G) + adagradEps)
			}
			k -= n
			continue
		}
		mf := float64(blk)
		// r = r_1; the mean of S(j) at r, with q^{m+1} from one exp when the
		// series do not do
		l := log1mr(r)
		n := mf + 1
		var fm float64 // (1 − r)^m, only when |n·ln q| ≥ 0.1
		big := math.Abs(2*n*l) >= 0.1
		if big {
			fm = math.Exp(mf * l)
		}
		r1 := c / (math.Sqrt(G+a2*meanGeomSum(r, 2*l, mf, fm*fm*(1-r)*(1-r))) + adagradEps)
		l1 := log1mr(r1)
		y := 2 * mf * l1 // ln f^{2m}, f = 1 − r1
		var e, F float64 // f^{2m} − 1, f^m
		switch {
		case math.Abs(y) < 0.1:
			e = expm1(y)
			F = math.Sqrt(1 + e)
		case big:
			// f^m = (1 − r)^m·e^δ, δ = m·(ln(1 − r1) − ln(1 − r)) small: r1
			// differs from r by at most catchUpTau/2 relative
			F = fm * expSmall(mf*(l1-l))
			e = F*F - 1
		default:
			F = math.Exp(y / 2)
			e = F*F - 1
		}
		G -= a2 * e / (r1 * (2 - r1))
		w *= F
		k -= blk
	}
	return w, G
}

// log1mr returns ln(1 − r), 0 ≤ r < 1 (a series for small r).
func log1mr(r float64) float64 {
	if r < 1e-3 {
		return -r * (1 + r*(1.0/2+r*(1.0/3+r*(1.0/4+r*(1.0/5+r/6)))))
	}
	return math.Log1p(-r)
}

// expm1 returns e^y − 1 for |y| < 0.1 (a series).
func expm1(y float64) float64 {
	return y * (1 + y*(1.0/2+y*(1.0/6+y*(1.0/24+y*(1.0/120+y*(1.0/720+y*(1.0/5040+y*(1.0/40320+y/362880))))))))
}

// expSmall returns e^d (a series for |d| < 0.01).
func expSmall(d float64) float64 {
	if math.Abs(d) < 0.01 {
		return 1 + d*(1+d*(1.0/2+d*(1.0/6+d*(1.0/24+d*(1.0/120+d/720)))))
	}
	return math.Exp(d)
}

// meanGeomSum returns (1/m)·Σ_{j=1..m} S(j), S(j) = Σ_{i<j} q^i, for
// q = (1 − r)² with L = ln q and qn = q^{m+1} (needed only when
// |(m+1)·L| ≥ 0.1): with u = 1 − q and n = m + 1 it is (n − S(n))/(u·m),
// and (n − S(n))/u = n·(u + L)/u² + n²·(L/u)²·(qⁿ − 1 − nL)/(nL)², each
// factor computed without cancellation.
func meanGeomSum(r, L, m, qn float64) float64 {
	u := r * (2 - r)
	if u == 0 {
		return (m + 1) / 2
	}
	n := m + 1
	var gq float64 // (u + L)/u²
	if u < 1e-3 {
		gq = -(1.0/2 + u*(1.0/3+u*(1.0/4+u*(1.0/5+u/6))))
	} else {
		gq = (u + L) / (u * u)
	}
	y := n * L
	var h float64 // (e^y − 1 − y)/y² = Σ yⁱ/(i+2)!
	if math.Abs(y) < 0.1 {
		h = 1.0/2 + y*(1.0/6+y*(1.0/24+y*(1.0/120+y*(1.0/720+y*(1.0/5040+y*(1.0/40320+y/362880))))))
	} else {
		h = (qn - 1 - y) / (y * y)
	}
	lu := L / u
	return (n*gq + n*n*lu*lu*h) / m
}
