package online

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ModelOMAM is the type of the ordinal MAM ranker.
const ModelOMAM = "omam"

// Sizes of the threshold fit of OMAM (part of the model format).
const (
	omamThresholdBuffer = 1024 // T: (score, level) pairs of the last labelled events
	omamRefitEvery      = 64   // labelled events between threshold refits
	omamMaxLevels       = 1 << 16
)

func init() {
	registerModel(ModelOMAM, modelType{
		validate: validateOMAM,
		new:      func(s Spec) (Model, error) { return NewOMAM(s) },
		restore: func(b []byte) (Model, error) {
			m := new(OMAM)
			if err := m.UnmarshalBinary(b); err != nil {
				return nil, err
			}
			return m, nil
		},
	})
}

// validateOMAM checks an omam spec. Standardize is handled by a wrapper and
// accepted as is.
func validateOMAM(s Spec) error {
	if err := validateKernel(s.Kernel, s.Dim); err != nil {
		return err
	}
	const unsupported = "not supported by omam"
	switch {
	case s.Kernel.Degree != 0:
		return specErrorf("kernel.degree", unsupported)
	case s.Kernel.Coef0 != 0:
		return specErrorf("kernel.coef0", unsupported)
	case s.Delta != 0:
		return specErrorf("delta", "%s (no certainty bound for a ranking score): must be 0, got %v", unsupported, s.Delta)
	case s.Budget != 0:
		return specErrorf("budget", unsupported)
	case s.Balance:
		return specErrorf("balance", unsupported)
	case s.LearningRate != 0:
		return specErrorf("learningrate", unsupported)
	case s.L2 != 0:
		return specErrorf("l2", unsupported)
	}
	if s.Levels < 2 || s.Levels > omamMaxLevels {
		return specErrorf("levels", "must be in [2, %d], got %d", omamMaxLevels, s.Levels)
	}
	if p := omamFeatureDim(s); p*s.Levels > maxOmega {
		return specErrorf("levels", "levels×dim φ must be ≤ %d, got %d×%d", maxOmega, s.Levels, p)
	}
	if len(s.Edges) != 0 {
		if len(s.Edges) != s.Levels-1 {
			return specErrorf("edges", "want levels−1 = %d edges, got %d", s.Levels-1, len(s.Edges))
		}
		for i, e := range s.Edges {
			if !isFinite(e) {
				return specErrorf("edges", "edge %d is %v", i, e)
			}
			if i > 0 && !(e > s.Edges[i-1]) {
				return specErrorf("edges", "must be strictly increasing: %v after %v", e, s.Edges[i-1])
			}
		}
	}
	if s.Window < 0 || s.Window > maxOmega/s.Dim {
		return specErrorf("window", "must be in [0, %d] (window×dim ≤ %d), got %d", maxOmega/s.Dim, maxOmega, s.Window)
	}
	if !(s.HalfLife >= 0) || math.IsInf(s.HalfLife, 0) {
		return specErrorf("halflife", "must be ≥ 0 and finite, got %v", s.HalfLife)
	}
	if s.Window > 0 && s.HalfLife > 0 {
		return specErrorf("halflife", "at most one of window and halflife may be set")
	}
	return nil
}

// omamFeatureDim returns dim φ of a valid spec's map: 2·Features for the
// random-feature maps, d for linear.
func omamFeatureDim(s Spec) int {
	if s.Kernel.Features > 0 {
		return 2 * s.Kernel.Features
	}
	return s.Dim
}

// OMAM is the ordinal maximal-average-margin ranker of MATH.md §2 ("oMAM")
// on an explicit feature map φ (FeatureMap: linear or rbf random features).
//
// Labels are levels 1..m (Spec.Levels = m ≥ 2). With Spec.Edges (m−1
// strictly increasing values) Label bins a real-valued target y into level
// 1 + #{e ≤ y}; without edges Label accepts only the integers 1..m.
//
// Example i gets the centred rank c_i = #{j : y_j < y_i} − #{j : y_j > y_i}
// and the score direction is w = Σ_i c_i φ(x_i). Per level ℓ the model keeps
// the compensated (Neumaier) sum S_ℓ = Σ_{y_i = ℓ} φ(x_i) and the count N_ℓ,
// so that c(ℓ) = N_{<ℓ} − N_{>ℓ} and w = Σ_ℓ c(ℓ) S_ℓ. Each labelled event
// costs O(m·dim φ), independent of n: it adds φ(x) to S_ℓ₀, and one pass over
// the sums recomputes w = Σ_ℓ c(ℓ) S_ℓ and T = Σ_ℓ S_ℓ from the updated
// counts. The pass costs the same as the incremental form of MATH.md §2
// (w += Σ_{ℓ>ℓ₀} S_ℓ − Σ_{ℓ<ℓ₀} S_ℓ + c(ℓ₀) φ(x)), which the tests check it
// against, but w does not accumulate rounding error over time and a
// restored model rebuilds it bit-identically from the stored sums.
//
// Scores (Prediction.Score), larger meaning a higher level:
//
//   - raw (Spec.Normalize false): m(x) = <w, φ(x)>/‖w‖ = Σ_i c_i K(x_i, x)/‖Σ_i c_i φ(x_i)‖;
//   - normalised (Spec.Normalize true, the better ranker; Nadaraya–Watson on
//     the centred ranks): <w, φ(x)> / (W·<T, φ(x)>) = Σ_i (c_i/W) K(x_i, x) / Σ_i K(x_i, x),
//     with W = Σ_ℓ N_ℓ the number (total weight) of examples held. The
//     factor 1/W does not change the ranking at a given state; it keeps the
//     score on the scale of c_i/W ∈ (−1, 1) as the model grows, so that
//     thresholds fitted on past scores stay valid. The score is 0 when
//     |<T, φ(x)>| < 1e-12·W (no kernel mass near x).
//
// Levels (Prediction.Label) come from thresholds θ₁ ≤ … ≤ θ_{m−1} on the
// score: level = 1 + #{k : score > θ_k}. The model keeps a ring buffer of the
// last T = 1024 (score before learning, level) pairs of labelled events and,
// every 64 labelled events, refits the thresholds so that the predicted
// level frequencies on the buffer match the observed ones: with the buffer's
// scores sorted, s₍₁₎ ≤ … ≤ s₍ₜ₎, and r_k the number of its events at levels
// ≤ k, θ_k = (s₍r_k₎ + s₍r_k+1₎)/2 (−∞ when r_k = 0, +∞ when r_k = t), the
// score quantile at the cumulative proportion r_k/t. Until the first fit
// Label is 0 (no decision); RefitThresholds fits them on demand. A refit
// sorts the buffer, O(T log T), about 15 µs, amortised over 64 events.
//
// There is no certainty bound (HasBound false, Delta 0): Theorem 2 bounds
// P(Y f(X) ≤ −ρ) for a binary label Y ∈ {−1, +1} and a classifier's margin;
// an ordinal ranking score has no such margin, so no bound is published.
//
// Forgetting: Spec.Window > 0 keeps an exact sliding window of the last
// Window labelled examples (their inputs x in a ring; when one leaves,
// φ(x_old) is subtracted from its S_ℓ in the same pass that adds the new
// one). Spec.HalfLife = h > 0 multiplies every S_ℓ and N_ℓ by 2^(−1/h)
// before adding each new example. Prediction.N is the number of examples
// held: n without forgetting, the window's fill, or n_eff = (Σ w_i)²/Σ w_i²
// (rounded) under decay; Examples counts every labelled example learned.
//
// Inputs with a NaN or infinite entry are neither scored nor learned
// (Score 0, Label 0).
type OMAM struct {
	spec  Spec
	fm    *FeatureMap
	m, p  int       // levels, dim φ
	phi   []float64 // scratch: φ(x) of the current event
	phiO  []float64 // scratch: φ(x) of the event leaving the window
	decay float64   // 2^(−1/HalfLife); 1 without decay

	n         int64     // labelled examples learned
	cnt, cntC []float64 // N_ℓ and compensation (ℓ = 0..m−1 for levels 1..m)
	sqw, sqwC float64   // decay: Σ w_i² (for n_eff) and compensation
	sum, sumC []float64 // S_ℓ and compensation, i-major: sum[i*m+ℓ] = S_ℓ[i]
	winX      []float64 // window: inputs, Window×d ring
	winL      []int32   // window: levels (0-based)
	winNext   int       // window: slot of the next example
	winFill   int       // window: examples held
	bufScore  []float64 // threshold buffer: scores (ring of T)
	bufLevel  []int32   // threshold buffer: levels (0-based)
	bufNext   int
	bufFill   int
	bufCount  []int     // threshold buffer: events per level (derived)
	theta     []float64 // thresholds θ₁..θ_{m−1}
	fitted    bool
	sortBuf   []float64 // scratch for the refit
	coef      []float64 // derived: c(ℓ)
	w, tot    []float64 // derived: w = Σ c(ℓ) S_ℓ, T = Σ S_ℓ
	total     float64   // derived: W = Σ N_ℓ
	k         float64   // derived: 1/‖w‖ (0 when w = 0)
	held      int64     // derived: Prediction.N
}

var _ Model = (*OMAM)(nil)

// NewOMAM builds an empty ordinal MAM; spec.Type must be "omam".
func NewOMAM(spec Spec) (*OMAM, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Type != ModelOMAM {
		return nil, specErrorf("type", "want %q, got %q", ModelOMAM, spec.Type)
	}
	fm, err := NewFeatureMap(spec.Kernel, spec.Dim)
	if err != nil {
		return nil, err
	}
	spec.Edges = slices.Clone(spec.Edges)
	o := &OMAM{spec: spec, fm: fm, m: spec.Levels, p: fm.Dim(), decay: 1}
	if spec.HalfLife > 0 {
		o.decay = math.Exp2(-1 / spec.HalfLife)
	}
	m, p := o.m, o.p
	o.phi, o.phiO = make([]float64, p), make([]float64, p)
	o.cnt, o.cntC = make([]float64, m), make([]float64, m)
	o.sum, o.sumC = make([]float64, m*p), make([]float64, m*p)
	if spec.Window > 0 {
		o.winX = make([]float64, spec.Window*spec.Dim)
		o.winL = make([]int32, spec.Window)
	}
	o.bufScore = make([]float64, omamThresholdBuffer)
	o.bufLevel = make([]int32, omamThresholdBuffer)
	o.bufCount = make([]int, m)
	o.theta = make([]float64, m-1)
	o.sortBuf = make([]float64, omamThresholdBuffer)
	o.coef = make([]float64, m)
	o.w, o.tot = make([]float64, p), make([]float64, p)
	o.refresh()
	return o, nil
}

// Type returns "omam".
func (o *OMAM) Type() string { return ModelOMAM }

// Dim returns the input dimension d.
func (o *OMAM) Dim() int { return o.spec.Dim }

// Spec returns the model's spec.
func (o *OMAM) Spec() Spec {
	s := o.spec
	s.Edges = slices.Clone(s.Edges)
	return s
}

// FeatureMap returns the model's feature map.
func (o *OMAM) FeatureMap() *FeatureMap { return o.fm }

// Levels returns m.
func (o *OMAM) Levels() int { return o.m }

// Examples returns the number of labelled examples learned (forgotten ones
// included).
func (o *OMAM) Examples() int64 { return o.n }

// Version returns 1.
func (o *OMAM) Version() int64 { return 1 }

// LevelCount returns N_ℓ for level ℓ in 1..m (a weight under decay).
func (o *OMAM) LevelCount(level int) float64 {
	return o.cnt[level-1] + o.cntC[level-1]
}

// Thresholds appends θ₁..θ_{m−1} to dst; ok is false (and nothing is
// appended) before the first fit.
func (o *OMAM) Thresholds(dst []float64) (_ []float64, ok bool) {
	if !o.fitted {
		return dst, false
	}
	return append(dst, o.theta...), true
}

// Label maps a wire label to a level: with Spec.Edges, a finite y goes to
// level 1 + #{e ≤ y}; without, y must be an integer in 1..m.
func (o *OMAM) Label(v float64) (float64, bool) {
	if !isFinite(v) {
		return 0, false
	}
	if e := o.spec.Edges; len(e) > 0 {
		lo, hi := 0, len(e) // count of edges ≤ v by bisection
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if e[mid] <= v {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return float64(1 + lo), true
	}
	if v != math.Trunc(v) || v < 1 || v > float64(o.m) {
		return 0, false
	}
	return v, true
}

// score maps x into o.phi and returns its score with the current state;
// ok is false when x has a non-finite entry.
func (o *OMAM) score(x []float64) (float64, bool) {
	if _, ok := o.fm.Map(o.phi, x); !ok {
		return 0, false
	}
	num := dot(o.w, o.phi)
	var s float64
	if o.spec.Normalize {
		den := dot(o.tot, o.phi)
		if o.total > 0 && math.Abs(den) >= 1e-12*o.total {
			s = num / (o.total * den)
		}
	} else {
		s = num * o.k
	}
	if s == 0 || !isFinite(s) {
		s = 0 // no −0 on the wire
	}
	return s, true
}

// Observe scores x, then learns (x, y) if labelled. It panics if
// len(x) != Dim() or if labelled and y is not a level 1..m (see Label).
func (o *OMAM) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != o.spec.Dim {
		panic("online: OMAM.Observe: len(x) != Dim()")
	}
	if labelled && (y != math.Trunc(y) || y < 1 || y > float64(o.m)) {
		panic("online: OMAM.Observe: label must be a level 1..m (see Label)")
	}
	pr := Prediction{N: o.held}
	s, ok := o.score(x)
	if !ok {
		return pr
	}
	pr.Score = s
	if o.fitted {
		pr.Label = 1 + o.levelIndex(s)
	}
	if labelled {
		o.learn(x, int(y)-1, s)
	}
	return pr
}

// levelIndex returns #{k : s > θ_k}.
func (o *OMAM) levelIndex(s float64) int {
	lo, hi := 0, len(o.theta)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if o.theta[mid] < s {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// learn adds φ(x) = o.phi at 0-based level l; s is x's score before.
func (o *OMAM) learn(x []float64, l int, s float64) {
	o.n++
	// Window: the oldest example leaves when the window is full.
	lo := -1
	if o.spec.Window > 0 {
		d := o.spec.Dim
		slot := o.winX[o.winNext*d : (o.winNext+1)*d]
		if o.winFill == o.spec.Window {
			lo = int(o.winL[o.winNext])
			o.fm.Map(o.phiO, slot) // finite: it was learned
			o.cnt[lo], o.cntC[lo] = twoSumAcc(o.cnt[lo], o.cntC[lo], -1)
		} else {
			o.winFill++
		}
		copy(slot, x)
		o.winL[o.winNext] = int32(l)
		if o.winNext++; o.winNext == o.spec.Window {
			o.winNext = 0
		}
	}
	if o.decay != 1 {
		a := o.decay
		for i := range o.cnt {
			o.cnt[i] *= a
			o.cntC[i] *= a
		}
		o.sqw, o.sqwC = twoSumAcc(o.sqw*a*a, o.sqwC*a*a, 1)
		scaleVec(o.sum, a)
		scaleVec(o.sumC, a)
	}
	o.cnt[l], o.cntC[l] = twoSumAcc(o.cnt[l], o.cntC[l], 1)
	o.derive()
	if lo >= 0 {
		omamPass(o.w, o.tot, o.sum, o.sumC, o.coef, o.phi, l, o.phiO, lo)
	} else {
		omamPass(o.w, o.tot, o.sum, o.sumC, o.coef, o.phi, l, nil, 0)
	}
	o.normalise()

	// Threshold buffer.
	if o.bufFill == omamThresholdBuffer {
		o.bufCount[o.bufLevel[o.bufNext]]--
	} else {
		o.bufFill++
	}
	o.bufScore[o.bufNext], o.bufLevel[o.bufNext] = s, int32(l)
	o.bufCount[l]++
	if o.bufNext++; o.bufNext == omamThresholdBuffer {
		o.bufNext = 0
	}
	if o.n%omamRefitEvery == 0 {
		o.RefitThresholds()
	}
}

// derive sets the coefficients c(ℓ) = N_{<ℓ} − N_{>ℓ}, W and the published
// example count from the counts.
func (o *OMAM) derive() {
	var W float64
	for i := range o.cnt {
		W += o.cnt[i] + o.cntC[i]
	}
	o.total = W
	var below float64
	for i := range o.cnt {
		v := o.cnt[i] + o.cntC[i]
		o.coef[i] = below - (W - below - v)
		below += v
	}
	switch {
	case o.decay != 1:
		o.held = 0
		if q := o.sqw + o.sqwC; q > 0 {
			o.held = int64(math.Round(W * W / q))
		}
	case o.spec.Window > 0:
		o.held = int64(o.winFill)
	default:
		o.held = o.n
	}
}

// normalise sets k = 1/‖w‖ (0 when w = 0).
func (o *OMAM) normalise() {
	ww := dot(o.w, o.w)
	o.k = 0
	if ww > 0 && !math.IsInf(ww, 0) {
		o.k = 1 / math.Sqrt(ww)
	}
}

// refresh recomputes the derived state from counts and sums (new or
// restored model) with the same code as an update, adding nothing.
func (o *OMAM) refresh() {
	o.derive()
	clear(o.phi)
	omamPass(o.w, o.tot, o.sum, o.sumC, o.coef, o.phi, 0, nil, 0)
	o.normalise()
	clear(o.bufCount)
	for i := range o.bufFill {
		o.bufCount[o.bufLevel[i]]++
	}
}

// omamPass adds add to level la and subtracts sub (if not nil) from level
// ls of the compensated sums (i-major, m = len(coef) levels), and sets
// w = Σ_ℓ coef[ℓ]·S_ℓ and tot = Σ_ℓ S_ℓ with S_ℓ = sum + sumC.
func omamPass(w, tot, sum, sumC, coef, add []float64, la int, sub []float64, ls int) {
	m, p := len(coef), len(w)
	sum, sumC, tot = sum[:p*m], sumC[:p*m], tot[:p]
	omamTwoSumStrided(sum, sumC, add[:p], la, m, 1)
	if sub != nil {
		omamTwoSumStrided(sum, sumC, sub[:p], ls, m, -1)
	}
	for i := range w {
		row := sum[i*m : i*m+m]
		rowC := sumC[i*m : i*m+m]
		rowC = rowC[:len(row)]
		c := coef[:len(row)]
		var wi, ti float64
		for l, s := range row {
			v := s + rowC[l]
			wi += c[l] * v
			ti += v
		}
		w[i], tot[i] = wi, ti
	}
}

// omamTwoSumStrided adds sgn·x[i] (sgn = ±1, exact) to the compensated sum
// (sum, sumC) at index i·m + l, as twoSumAcc does.
func omamTwoSumStrided(sum, sumC, x []float64, l, m int, sgn float64) {
	for i, v := range x {
		v *= sgn
		j := i*m + l
		s := sum[j]
		t := s + v
		bp := t - s
		sumC[j] += (s - (t - bp)) + (v - bp)
		sum[j] = t
	}
}

// scaleVec multiplies x by a.
func scaleVec(x []float64, a float64) {
	for i := range x {
		x[i] *= a
	}
}

// RefitThresholds fits the thresholds on the buffer of recent (score,
// level) pairs now (Observe does so every 64 labelled events); it does
// nothing while the buffer is empty. It does not allocate.
func (o *OMAM) RefitThresholds() {
	t := o.bufFill
	if t == 0 {
		return
	}
	s := o.sortBuf[:t]
	copy(s, o.bufScore[:t])
	slices.Sort(s)
	r := 0
	for k := range o.theta {
		r += o.bufCount[k]
		switch {
		case r == 0:
			o.theta[k] = math.Inf(-1)
		case r == t:
			o.theta[k] = math.Inf(1)
		default:
			o.theta[k] = s[r-1]/2 + s[r]/2
		}
	}
	o.fitted = true
}

// Serialised state of an OMAM (after the shared header and spec, see
// codec.go), little-endian:
//
//	n int64 (labelled examples learned); p = dim φ uint32;
//	counts: m × (N_ℓ, comp) float64;
//	Σ w_i² and its compensation float64 (0, 0 without decay);
//	sums S and comp(S), each m·p float64, i-major (S_ℓ[i] at i·m + ℓ);
//	window (Window > 0): fill uint32, then per example, oldest first:
//	    level−1 uint32, x (d float64);
//	threshold buffer: fill uint32, then per event, oldest first:
//	    score float64, level−1 uint32;
//	fitted uint8, θ₁..θ_{m−1} float64.
//
// w, T, ‖w‖ and the buffer's level counts are rebuilt by the update code,
// so a restored model predicts bit-identically and stays identical under
// further learning.

// AppendBinary appends the MarshalBinary encoding of o to dst
// (encoding.BinaryAppender).
func (o *OMAM) AppendBinary(dst []byte) ([]byte, error) {
	le := binary.LittleEndian
	dst = append(dst, formatMagic...)
	dst = le.AppendUint16(dst, formatVersion)
	dst = appendStr(dst, ModelOMAM)
	dst = appendSpec(dst, o.spec)
	dst = le.AppendUint64(dst, uint64(o.n))
	dst = le.AppendUint32(dst, uint32(o.p))
	for i := range o.cnt {
		dst = appendF64(dst, o.cnt[i])
		dst = appendF64(dst, o.cntC[i])
	}
	dst = appendF64(dst, o.sqw)
	dst = appendF64(dst, o.sqwC)
	for _, v := range [][]float64{o.sum, o.sumC} {
		for _, x := range v {
			dst = appendF64(dst, x)
		}
	}
	if W := o.spec.Window; W > 0 {
		d := o.spec.Dim
		dst = le.AppendUint32(dst, uint32(o.winFill))
		for j := range o.winFill {
			slot := (o.winNext - o.winFill + j + W) % W
			dst = le.AppendUint32(dst, uint32(o.winL[slot]))
			for _, x := range o.winX[slot*d : (slot+1)*d] {
				dst = appendF64(dst, x)
			}
		}
	}
	dst = le.AppendUint32(dst, uint32(o.bufFill))
	for j := range o.bufFill {
		slot := (o.bufNext - o.bufFill + j + omamThresholdBuffer) % omamThresholdBuffer
		dst = appendF64(dst, o.bufScore[slot])
		dst = le.AppendUint32(dst, uint32(o.bufLevel[slot]))
	}
	dst = append(dst, boolByte(o.fitted))
	for _, x := range o.theta {
		dst = appendF64(dst, x)
	}
	return dst, nil
}

// MarshalBinary encodes the complete state of o (see the format above).
func (o *OMAM) MarshalBinary() ([]byte, error) {
	size := 128 + len(o.spec.Kernel.Type) + 8*len(o.spec.Edges) + 16*o.m*(o.p+1) +
		o.winFill*(4+8*o.spec.Dim) + 12*o.bufFill + 8*o.m
	return o.AppendBinary(make([]byte, 0, size))
}

// UnmarshalBinary replaces o's spec and state with the encoded ones. On
// error (wrapping ErrFormat) o is unchanged.
func (o *OMAM) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	typ := r.header()
	if r.err == nil && typ != ModelOMAM {
		return fmt.Errorf("%w: model type %q, want %q", ErrFormat, typ, ModelOMAM)
	}
	spec := r.spec(typ)
	n := int64(r.u64())
	p := int(r.u32())
	if r.err != nil {
		return r.err
	}
	if n < 0 {
		return fmt.Errorf("%w: negative example count %d", ErrFormat, n)
	}
	if err := spec.Validate(); err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			return fmt.Errorf("%w: spec: %s: %s", ErrFormat, se.Field, se.Problem)
		}
		return fmt.Errorf("%w: spec: %w", ErrFormat, err)
	}
	if want := omamFeatureDim(spec); p != want {
		return fmt.Errorf("%w: feature dimension %d, spec gives %d", ErrFormat, p, want)
	}
	// The fixed-size part must be there before anything is allocated.
	if fixed := 16*spec.Levels + 16 + 16*spec.Levels*p; len(r.b) < fixed {
		return fmt.Errorf("%w: truncated", ErrFormat)
	}
	no, err := NewOMAM(spec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	no.n = n
	for i := range no.cnt {
		no.cnt[i], no.cntC[i] = r.f64(), r.f64()
	}
	no.sqw, no.sqwC = r.f64(), r.f64()
	for _, v := range [][]float64{no.sum, no.sumC} {
		for i := range v {
			v[i] = r.f64()
		}
	}
	m := no.m
	badLevel := func(l uint32) bool {
		if l >= uint32(m) && r.err == nil {
			r.err = fmt.Errorf("%w: level %d out of range", ErrFormat, int64(l)+1)
		}
		return r.err != nil
	}
	if W := spec.Window; W > 0 {
		fill := int(r.u32())
		if r.err == nil && (fill > W || int64(fill) != min(n, int64(W))) {
			return fmt.Errorf("%w: window holds %d of %d examples after %d", ErrFormat, fill, W, n)
		}
		if r.err == nil && len(r.b) < fill*(4+8*spec.Dim) {
			return fmt.Errorf("%w: truncated", ErrFormat)
		}
		d := spec.Dim
		for j := 0; j < fill && r.err == nil; j++ {
			l := r.u32()
			if badLevel(l) {
				break
			}
			no.winL[j] = int32(l)
			for i := range d {
				no.winX[j*d+i] = r.f64()
			}
		}
		no.winFill, no.winNext = fill, fill%W
	}
	fill := int(r.u32())
	if r.err == nil && (fill > omamThresholdBuffer || int64(fill) != min(n, omamThresholdBuffer)) {
		return fmt.Errorf("%w: threshold buffer holds %d events after %d", ErrFormat, fill, n)
	}
	for j := 0; j < fill && r.err == nil; j++ {
		no.bufScore[j] = r.f64()
		l := r.u32()
		if badLevel(l) {
			break
		}
		no.bufLevel[j] = int32(l)
	}
	no.bufFill, no.bufNext = fill, fill%omamThresholdBuffer
	no.fitted = r.boolean("fitted")
	for k := range no.theta {
		no.theta[k] = r.f64()
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) > 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrFormat, len(r.b))
	}
	if err := no.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	no.refresh()
	*o = *no
	return nil
}

// checkState rejects decoded states that no sequence of updates produces.
func (o *OMAM) checkState() error {
	const tol = 1e-9
	if o.n < 0 {
		return fmt.Errorf("negative example count %d", o.n)
	}
	// Counts: integers summing to the examples held, or decayed weights.
	var W float64
	for l := range o.cnt {
		v := o.cnt[l] + o.cntC[l]
		if !isFinite(o.cnt[l]) || !isFinite(o.cntC[l]) || !(v >= -tol) {
			return fmt.Errorf("level %d count %v", l+1, v)
		}
		if o.decay == 1 && (o.cntC[l] != 0 || o.cnt[l] != math.Trunc(o.cnt[l])) {
			return fmt.Errorf("level %d count %v is not an integer", l+1, v)
		}
		W += v
	}
	switch {
	case o.decay != 1:
		q := o.sqw + o.sqwC
		lim := math.Min(float64(o.n), 1/(1-o.decay))*(1+tol) + tol
		if !isFinite(o.sqw) || !isFinite(o.sqwC) || W > lim || !(q >= -tol) || q > W*(1+tol)+tol || (o.n > 0) != (q > 0) {
			return fmt.Errorf("decayed weights: Σw = %v, Σw² = %v after %d examples", W, q, o.n)
		}
	case o.sqw != 0 || o.sqwC != 0:
		return fmt.Errorf("Σw² = %v without decay", o.sqw+o.sqwC)
	case o.spec.Window > 0:
		per := make([]float64, o.m)
		for j := range o.winFill {
			per[o.winL[j]]++
			for _, x := range o.winX[j*o.spec.Dim : (j+1)*o.spec.Dim] {
				if !isFinite(x) {
					return fmt.Errorf("non-finite input in the window")
				}
			}
		}
		for l := range per {
			if per[l] != o.cnt[l] {
				return fmt.Errorf("level %d count %v, window holds %v", l+1, o.cnt[l], per[l])
			}
		}
	case W != float64(o.n):
		return fmt.Errorf("level counts sum to %v, want n = %d", W, o.n)
	}
	// ‖S_ℓ‖ ≤ N_ℓ since ‖φ‖ ≤ 1.
	ss := make([]float64, o.m)
	for i := range o.sum {
		if !isFinite(o.sum[i]) || !isFinite(o.sumC[i]) {
			return fmt.Errorf("non-finite sum")
		}
		v := o.sum[i] + o.sumC[i]
		ss[i%o.m] += v * v
	}
	for l, v := range ss {
		if c := o.cnt[l] + o.cntC[l]; math.Sqrt(v) > c*(1+tol)+tol {
			return fmt.Errorf("‖S_%d‖ = %v exceeds its count %v", l+1, math.Sqrt(v), c)
		}
	}
	for _, s := range o.bufScore[:o.bufFill] {
		if !isFinite(s) {
			return fmt.Errorf("non-finite score in the threshold buffer")
		}
	}
	switch {
	case o.fitted && o.bufFill == 0, !o.fitted && o.n >= omamRefitEvery:
		return fmt.Errorf("thresholds fitted = %v with %d events", o.fitted, o.n)
	}
	for k, th := range o.theta {
		if !o.fitted && th != 0 || math.IsNaN(th) || k > 0 && th < o.theta[k-1] {
			return fmt.Errorf("thresholds %v (fitted %v)", o.theta, o.fitted)
		}
	}
	return nil
}
