package online

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/vmath"
)

// standardizedTag is the type tag of a Standardized encoding. It is not a
// model type: Registry.Restore recognises it and restores the inner model
// from the frame that follows the wrapper's state.
const standardizedTag = "std"

// stdVarFloor is the variance below which a feature is only centred, not
// scaled: a constant (or not yet varying) feature would otherwise be blown
// up by 1/sd.
const stdVarFloor = 1e-12

// From the stdRobustFrom-th event on, a feature that has varied enters the
// statistics clipped to mean ± stdClip·sd: one wild value (a producer's
// 1e15) then adds at most 100²·sd²/n to the variance, diluted as
// the events go on, where it would otherwise set the mean and sd of every
// later standardisation for good. Legitimate values come that far out
// rarely: on the data sets of the tests, fed in file order and reversed,
// the largest |x − mean|/sd against the running statistics from the 30th
// event on is 45 (glass, a mostly-zero feature), 34 (Boston), 20 and
// below elsewhere; those stay exactly scikit-learn's StandardScaler.
const (
	stdRobustFrom = 30
	stdClip       = 100
)

// maxStdInputSq bounds Σ(x_i − mean_i)² of an event that may enter the
// statistics: beyond it (a NaN or infinite entry, or entries near 1e154) the
// squares would overflow and poison the variances for good.
const maxStdInputSq = 1e300

// Standardized is the wrapper of a model whose inputs are standardised
// (features.standardize: true; Standardize builds it, for a model of any
// type). It keeps running per-feature means and variances (Welford's
// algorithm) over every observed event, labelled or not.
//
// An online model gets z_i = (x_i − mean_i)/sd_i, computed with the
// statistics of the events before it (score first, as the inner model
// does), and the event is then added to them. A feature whose variance is
// below 1e-12 (constant so far) is passed centred only, z_i = x_i − mean_i;
// before the first event z = x.
//
// A model that standardises its inputs itself (RawInput: the refitted
// models, whose window keeps raw events) gets x unchanged and the wrapper's
// statistics (StandardizeWith): each refit standardises the window with
// the statistics as of that refit and the fitted version scores with the
// same ones, so that every version is trained and scored with one
// transform.
//
// The statistics are updated on every observed event, labelled or not:
// standardisation is unsupervised, an unlabelled event tells as much about
// the input distribution as a labelled one, and a deployment whose labels
// arrive for a subset only then standardises the inputs it actually scores.
// An event with a non-finite entry (or squares that would overflow) is
// passed to the inner model, which rejects it, and is not added. From the
// 30th event on, a feature whose variance is above the floor enters the
// statistics clipped to mean ± 100 sd (the inner model still gets its z
// unclipped): a single wild value, labelled or not, cannot take over the
// standardisation of every later event; a real change of scale is still
// followed, each event moving the mean by up to 100 sd / n.
//
// The variance is the population one, M2/n (scikit-learn's
// StandardScaler). Mean and M2 are Neumaier-compensated sums of Welford's
// increments, so that 10⁹ updates do not drift. The statistics cover every
// event ever seen (no window or decay), so after a shift of the input
// distribution the standardisation adapts only as fast as a running mean
// (like 1/n), more slowly than an inner model with a window or half-life.
//
// Type, Dim, Label, Examples and Version are the inner model's. Observe does
// not allocate. An empty wrapper has the inner model's zero state and
// statistics n = 0.
type Standardized struct {
	inner Model
	raw   RawInput // inner, when it standardises itself

	n           int64     // events in the statistics
	mean, meanC []float64 // Welford mean and its compensation
	m2, m2C     []float64 // Welford M2 = Σ(x − mean)² and its compensation
	inv         []float64 // derived: 1/sd_i, or 1 when var_i < stdVarFloor
	z           []float64 // scratch: the standardised event
}

// Not a Preparer: what it passes on depends on statistics every event updates.
var (
	_ Model   = (*Standardized)(nil)
	_ Bounder = (*Standardized)(nil)
	_ Scaling = (*Standardized)(nil)
)

// RawInput is implemented by models that standardise their inputs
// themselves, with statistics handed to them (the refitted models). A
// Standardized wrapper passes them raw inputs and calls StandardizeWith
// with itself once, before the first event.
type RawInput interface {
	Model
	StandardizeWith(s Scaling)
}

// Scaling is a source of standardisation statistics.
type Scaling interface {
	// Transform writes the current mean and 1/sd of each feature (z =
	// (x − mean)·inv; inv is 1 for a feature whose variance is below
	// 1e-12, and before the first event) and returns the number of events
	// they summarise. It must be called from the goroutine that observes.
	Transform(mean, inv []float64) int64
}

// Standardize wraps m so that its inputs are standardised (see
// Standardized). m should be empty: its state is kept as is.
func Standardize(m Model) *Standardized {
	d := m.Dim()
	s := &Standardized{
		inner: m,
		mean:  make([]float64, d), meanC: make([]float64, d),
		m2: make([]float64, d), m2C: make([]float64, d),
		inv: make([]float64, d),
		z:   make([]float64, d),
	}
	for i := range s.inv {
		s.inv[i] = 1
	}
	if r, ok := m.(RawInput); ok {
		s.raw = r
		r.StandardizeWith(s)
	}
	return s
}

// Inner returns the wrapped model. Learning through it directly bypasses
// the standardisation.
func (s *Standardized) Inner() Model { return s.inner }

// Transform implements Scaling.
func (s *Standardized) Transform(mean, inv []float64) int64 {
	for i := range mean {
		mean[i] = s.mean[i] + s.meanC[i]
	}
	copy(inv, s.inv)
	return s.n
}

// Moments writes the current per-feature means and standard deviations
// (population, sqrt(M2/n); 0 before any event) into mean and sd and
// returns the number of events they summarise. Either slice may be nil.
func (s *Standardized) Moments(mean, sd []float64) int64 {
	for i := range mean {
		mean[i] = s.mean[i] + s.meanC[i]
	}
	for i := range sd {
		if s.n > 0 {
			sd[i] = math.Sqrt(max(0, (s.m2[i]+s.m2C[i])/float64(s.n)))
		} else {
			sd[i] = 0
		}
	}
	return s.n
}

// Type returns the inner model's type.
func (s *Standardized) Type() string { return s.inner.Type() }

// Dim returns the input dimension d.
func (s *Standardized) Dim() int { return len(s.z) }

// Label is the inner model's.
func (s *Standardized) Label(v float64) (float64, bool) { return s.inner.Label(v) }

// Examples returns the inner model's number of examples learned.
func (s *Standardized) Examples() int64 { return s.inner.Examples() }

// Version is the inner model's.
func (s *Standardized) Version() int64 { return s.inner.Version() }

// HasBound reports whether the inner model publishes a certainty bound:
// it is a Bounder and, if it says so itself (HasBound), has one.
func (s *Standardized) HasBound() bool {
	if _, ok := s.inner.(Bounder); !ok {
		return false
	}
	if hb, ok := s.inner.(interface{ HasBound() bool }); ok {
		return hb.HasBound()
	}
	return true
}

// Bound returns the inner model's certainty bound at margin rho (it bounds
// the same margins y·f: the wrapper only transforms the inputs), 1 when the
// inner model has none.
func (s *Standardized) Bound(rho float64) float64 {
	if b, ok := s.inner.(Bounder); ok {
		return b.Bound(rho)
	}
	return 1
}

// Observe standardises x with the statistics of the events before it,
// passes the result (x itself to a RawInput) to the inner model's Observe,
// and then adds x to the statistics (if finite). It panics if
// len(x) != Dim().
func (s *Standardized) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != len(s.z) {
		panic("online: Standardized.Observe: len(x) != Dim()")
	}
	z, mean, meanC, inv := s.z, s.mean[:len(x)], s.meanC[:len(x)], s.inv[:len(x)]
	var sq float64
	wild := false
	for i, xi := range x {
		d := xi - (mean[i] + meanC[i])
		sq += d * d
		z[i] = d * inv[i]
		wild = wild || math.Abs(z[i]) > stdClip // false for NaN
	}
	if s.raw != nil {
		z = x
	}
	p := s.inner.Observe(z, y, labelled)
	if sq > maxStdInputSq || sq != sq { // NaN
		return p
	}
	if wild && s.n >= stdRobustFrom {
		s.add(s.clipped(x)) // the inner model is done with s.z
	} else {
		s.add(x)
	}
	return p
}

// clipped writes x into s.z with each feature whose variance is above the
// floor clipped to mean ± stdClip·sd, and returns it.
func (s *Standardized) clipped(x []float64) []float64 {
	c := s.z[:len(x)]
	invN := 1 / float64(s.n)
	for i, xi := range x {
		c[i] = xi
		if (s.m2[i]+s.m2C[i])*invN < stdVarFloor {
			continue // constant so far: its first variation is its scale
		}
		m, r := s.mean[i]+s.meanC[i], stdClip/s.inv[i]
		c[i] = min(max(xi, m-r), m+r)
	}
	return c
}

// add adds x to the Welford statistics and recomputes 1/sd.
func (s *Standardized) add(x []float64) {
	s.n++
	// vmath.WelfordAdd: this loop, eight features at a time.
	//	d := x_i − (mean_i + meanC_i); (mean_i, meanC_i) += d/n (TwoSum);
	//	(m2_i, m2C_i) += d·(x_i − (mean_i + meanC_i)); inv_i = stdInv((m2_i + m2C_i)/n)
	vmath.WelfordAdd(s.mean, s.meanC, s.m2, s.m2C, s.inv, x, 1/float64(s.n), stdVarFloor)
}

// stdInv is 1/sqrt(v), or 1 (centre only) when v < stdVarFloor.
func stdInv(v float64) float64 {
	if v < stdVarFloor {
		return 1
	}
	return 1 / math.Sqrt(v)
}

// refresh recomputes the derived 1/sd from the statistics, exactly as add
// does.
func (s *Standardized) refresh() {
	if s.n == 0 {
		for i := range s.inv {
			s.inv[i] = 1
		}
		return
	}
	invN := 1 / float64(s.n)
	for i := range s.inv {
		s.inv[i] = stdInv((s.m2[i] + s.m2C[i]) * invN)
	}
}

// Standardized encoding, after the envelope (header.go) with the type
// tag "std", no parameters and the input dimension d:
//
//	n int64; mean, comp(mean), M2, comp(M2) as d float64 each;
//	the inner model's complete encoding, framed (uint32 length).
//
// 1/sd is derived from M2 and n by the same code as after an update. In
// format version 1 the envelope held the inner model's version-1 spec and
// the inner encoding took the rest of the bytes, unframed.

// standardizedParams are the (no) parameters of the wrapper's envelope.
type standardizedParams struct{}

func (*standardizedParams) Validate(int) error { return nil }

// AppendBinary appends the MarshalBinary encoding of s to dst
// (encoding.BinaryAppender).
func (s *Standardized) AppendBinary(dst []byte) ([]byte, error) {
	dst = AppendHeader(dst, standardizedTag, &standardizedParams{}, s.Dim())
	dst = codec.AppendI64(dst, s.n)
	for _, v := range [][]float64{s.mean, s.meanC, s.m2, s.m2C} {
		dst = codec.AppendF64s(dst, v)
	}
	return codec.AppendFrame(dst, func(dst []byte) ([]byte, error) {
		if a, ok := s.inner.(interface {
			AppendBinary([]byte) ([]byte, error)
		}); ok {
			return a.AppendBinary(dst)
		}
		b, err := s.inner.MarshalBinary()
		if err != nil {
			return nil, err
		}
		return append(dst, b...), nil
	})
}

// MarshalBinary encodes the wrapper's statistics followed by the inner
// model's encoding.
func (s *Standardized) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 128+32*s.Dim()))
}

// UnmarshalBinary replaces s's statistics and inner state with the encoded
// ones; the inner model's state is restored into the inner model (its
// UnmarshalBinary, last, so that it is left unchanged when anything else
// is wrong). On error (wrapping ErrFormat) s is unchanged.
func (s *Standardized) UnmarshalBinary(b []byte) error {
	ns, err := decodeStandardized(b, func(inner []byte) (Model, error) {
		if err := s.inner.UnmarshalBinary(inner); err != nil {
			return nil, err
		}
		return s.inner, nil
	})
	if err != nil {
		return err
	}
	*s = *ns
	return nil
}

// restoreStandardized decodes a Standardized encoding whose inner model is
// restored through reg.
func restoreStandardized(b []byte, reg *Registry) (Model, error) {
	s, err := decodeStandardized(b, func(inner []byte) (Model, error) {
		// The inner model is a registered type's: wrappers do not nest (the
		// registry never builds such a model, and version 1 refused it).
		if tag, err := PeekType(inner); err == nil && tag == standardizedTag {
			return nil, fmt.Errorf("%w: a standardized model inside another", ErrFormat)
		}
		return reg.Restore(inner)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// decodeStandardized decodes a Standardized encoding, the inner model's
// bytes through restore.
func decodeStandardized(b []byte, restore func([]byte) (Model, error)) (*Standardized, error) {
	var (
		d      int
		r      *codec.Reader
		legacy bool
	)
	var empty standardizedParams
	d, r = ReadHeader(b, standardizedTag, &empty, func(tag string, ls legacySpec) error {
		if !ls.Standardize {
			return errors.New("standardizer with spec.standardize false")
		}
		legacy = true
		return nil
	})
	n := r.I64()
	if err := r.Err(); err != nil {
		return nil, err
	}
	if d <= 0 || d > maxDim || !r.Need(32*d) {
		return nil, fmt.Errorf("%w: truncated standardizer state (dim %d)", ErrFormat, d)
	}
	stats := make([][]float64, 4)
	for i := range stats {
		stats[i] = make([]float64, d)
		r.F64s(stats[i])
	}
	var innerBytes []byte
	if legacy {
		innerBytes = r.Take(r.Len())
	} else {
		innerBytes = r.Bytes()
		// The inner model is written in the wrapper's format version, so
		// that an encoding that restores re-encodes to the same bytes.
		if IsVersion1(innerBytes) {
			r.Failf("inner model of format version %d in a version %d standardizer", legacyVersion1, formatVersion)
		}
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	stat := &Standardized{n: n, mean: stats[0], meanC: stats[1], m2: stats[2], m2C: stats[3]}
	if err := stat.checkState(); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrFormat, err)
	}
	inner, err := restore(innerBytes)
	if err != nil {
		if errors.Is(err, ErrFormat) {
			return nil, fmt.Errorf("standardized inner model: %w", err)
		}
		return nil, fmt.Errorf("%w: inner model: %w", ErrFormat, err)
	}
	if inner.Dim() != d {
		return nil, fmt.Errorf("%w: inner model dim %d, standardizer %d", ErrFormat, inner.Dim(), d)
	}
	s := Standardize(inner)
	s.n = n
	s.mean, s.meanC, s.m2, s.m2C = stats[0], stats[1], stats[2], stats[3]
	s.refresh()
	return s, nil
}

// checkState rejects statistics that no sequence of updates produces.
func (s *Standardized) checkState() error {
	if s.n < 0 {
		return fmt.Errorf("negative standardizer count %d", s.n)
	}
	for i := range s.mean {
		vals := [4]float64{s.mean[i], s.meanC[i], s.m2[i], s.m2C[i]}
		for _, v := range vals {
			if !isFinite(v) {
				return fmt.Errorf("non-finite standardizer statistics for feature %d", i)
			}
			if s.n == 0 && v != 0 {
				return fmt.Errorf("standardizer statistics without events for feature %d", i)
			}
		}
		// M2 ≥ 0 up to rounding: an increment d·(x − mean') can come out
		// negative only when |d| is within rounding of |mean|·n·ε.
		mu := s.mean[i] + s.meanC[i]
		if m := s.m2[i] + s.m2C[i]; m < -1e-9*(1+float64(s.n)*mu*mu) {
			return fmt.Errorf("negative M2 %v for feature %d", m, i)
		}
	}
	return nil
}
