package online

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
)

// standardizedTag is the model type string of a Standardized encoding. It is
// not a model type (New never sees it): Restore recognises it and restores
// the inner model from the bytes that follow the wrapper's state.
const standardizedTag = "std"

// stdVarFloor is the variance below which a feature is only centred, not
// scaled: a constant (or not yet varying) feature would otherwise be blown
// up by 1/sd.
const stdVarFloor = 1e-12

// maxStdInputSq bounds Σ(x_i − mean_i)² of an event that may enter the
// statistics: beyond it (a NaN or infinite entry, or entries near 1e154) the
// squares would overflow and poison the variances for good.
const maxStdInputSq = 1e300

// Standardized is the wrapper New returns when Spec.Standardize is true. It
// keeps running per-feature means and variances (Welford's algorithm) and
// passes z_i = (x_i − mean_i)/sd_i to the inner model, built from the same
// spec. A feature whose variance is below 1e-12 (constant so far) is passed
// centred only, z_i = x_i − mean_i; before the first event z = x.
//
// Order: each event is standardised with the statistics of the events before
// it (score first, as the inner model does), and then added to them.
//
// The statistics are updated on every observed event, labelled or not:
// standardisation is unsupervised, an unlabelled event tells as much about
// the input distribution as a labelled one, and a deployment whose labels
// arrive for a subset only then standardises the inputs it actually scores.
// An event with a non-finite entry (or squares that would overflow) is
// passed to the inner model, which rejects it, and is not added.
//
// The variance is the population one, M2/n. Mean and M2 are Neumaier-
// compensated sums of Welford's increments, so that 10⁹ updates do not
// drift. The statistics cover every event ever seen (no window or decay),
// so after a shift of the input distribution the standardisation adapts
// only as fast as a running mean (like 1/n), more slowly than an inner
// model with a window or half-life.
//
// Type, Dim, Label, Examples and Version are the inner model's. Observe does
// not allocate. An empty wrapper has the inner model's zero state and
// statistics n = 0.
type Standardized struct {
	spec  Spec // spec.Standardize is true
	inner Model

	n           int64     // events in the statistics
	mean, meanC []float64 // Welford mean and its compensation
	m2, m2C     []float64 // Welford M2 = Σ(x − mean)² and its compensation
	inv         []float64 // derived: 1/sd_i, or 1 when var_i < stdVarFloor
	z           []float64 // scratch: the standardised event
}

var (
	_ Model   = (*Standardized)(nil)
	_ Bounder = (*Standardized)(nil)
)

// newStandardized wraps an empty model of spec.Type built from spec.
func newStandardized(spec Spec) (*Standardized, error) {
	inner, err := modelTypes[spec.Type].new(spec)
	if err != nil {
		return nil, err
	}
	return wrapStandardized(spec, inner), nil
}

// newStandardizedModel is newStandardized for New (no typed nil on error).
func newStandardizedModel(spec Spec) (Model, error) {
	s, err := newStandardized(spec)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// restoreStandardizedModel is restoreStandardized for Restore.
func restoreStandardizedModel(b []byte) (Model, error) {
	s, err := restoreStandardized(b)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func wrapStandardized(spec Spec, inner Model) *Standardized {
	d := spec.Dim
	s := &Standardized{
		spec:  spec,
		inner: inner,
		mean:  make([]float64, d), meanC: make([]float64, d),
		m2: make([]float64, d), m2C: make([]float64, d),
		inv: make([]float64, d),
		z:   make([]float64, d),
	}
	for i := range s.inv {
		s.inv[i] = 1
	}
	return s
}

// Inner returns the wrapped model. Learning through it directly bypasses
// the standardisation.
func (s *Standardized) Inner() Model { return s.inner }

// Spec returns the spec the wrapper and its inner model were built from.
func (s *Standardized) Spec() Spec { return s.spec }

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
func (s *Standardized) Dim() int { return s.spec.Dim }

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
// passes the result to the inner model's Observe, and then adds x to the
// statistics (if finite). It panics if len(x) != Dim().
func (s *Standardized) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != len(s.z) {
		panic("online: Standardized.Observe: len(x) != Dim()")
	}
	z, mean, meanC, inv := s.z, s.mean[:len(x)], s.meanC[:len(x)], s.inv[:len(x)]
	var sq float64
	for i, xi := range x {
		d := xi - (mean[i] + meanC[i])
		sq += d * d
		z[i] = d * inv[i]
	}
	p := s.inner.Observe(z, y, labelled)
	if sq <= maxStdInputSq { // false for NaN
		s.add(x)
	}
	return p
}

// add adds x to the Welford statistics and recomputes 1/sd.
func (s *Standardized) add(x []float64) {
	s.n++
	invN := 1 / float64(s.n)
	mean, meanC := s.mean[:len(x)], s.meanC[:len(x)]
	m2, m2C, inv := s.m2[:len(x)], s.m2C[:len(x)], s.inv[:len(x)]
	for i, xi := range x {
		d := xi - (mean[i] + meanC[i])
		mi, mc := twoSumAcc(mean[i], meanC[i], d*invN)
		mean[i], meanC[i] = mi, mc
		qi, qc := twoSumAcc(m2[i], m2C[i], d*(xi-(mi+mc)))
		m2[i], m2C[i] = qi, qc
		inv[i] = stdInv((qi + qc) * invN)
	}
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

// Standardized encoding (format version 1): the shared header with model
// type "std", the spec (appendSpec; its type, which appendSpec does not
// write, is the inner model's), then
//
//	n int64; mean, comp(mean), M2, comp(M2) as d float64 each;
//	the inner model's complete encoding (the rest of the bytes).
//
// 1/sd is derived from M2 and n by the same code as after an update.

// AppendBinary appends the MarshalBinary encoding of s to dst
// (encoding.BinaryAppender).
func (s *Standardized) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, formatMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, formatVersion)
	dst = appendStr(dst, standardizedTag)
	dst = appendSpec(dst, s.spec)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.n))
	for _, v := range [][]float64{s.mean, s.meanC, s.m2, s.m2C} {
		for _, x := range v {
			dst = appendF64(dst, x)
		}
	}
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
}

// MarshalBinary encodes the wrapper's statistics followed by the inner
// model's encoding.
func (s *Standardized) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 128+32*s.spec.Dim))
}

// UnmarshalBinary replaces s's spec, statistics and inner model with the
// encoded ones. On error (wrapping ErrFormat) s is unchanged.
func (s *Standardized) UnmarshalBinary(b []byte) error {
	ns, err := restoreStandardized(b)
	if err != nil {
		return err
	}
	*s = *ns
	return nil
}

// restoreStandardized decodes a Standardized encoding.
func restoreStandardized(b []byte) (*Standardized, error) {
	r := reader{b: b}
	if typ := r.header(); r.err == nil && typ != standardizedTag {
		return nil, fmt.Errorf("%w: model type %q, want %q", ErrFormat, typ, standardizedTag)
	}
	spec := r.spec("")
	n := int64(r.u64())
	if r.err != nil {
		return nil, r.err
	}
	d := spec.Dim
	if d <= 0 || d > maxDim || len(r.b) < 32*d {
		return nil, fmt.Errorf("%w: truncated standardizer state (dim %d)", ErrFormat, d)
	}
	rest := r.b[32*d:]
	innerTag, err := peekType(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: inner model: %w", ErrFormat, err)
	}
	t, ok := modelTypes[innerTag]
	if !ok {
		return nil, fmt.Errorf("%w: inner model: unknown model type %q", ErrFormat, innerTag)
	}
	inner, err := t.restore(rest)
	if err != nil {
		if errors.Is(err, ErrFormat) {
			return nil, fmt.Errorf("standardized inner model: %w", err)
		}
		return nil, fmt.Errorf("%w: inner model: %w", ErrFormat, err)
	}
	// The spec's type is the inner model's type, not its encoding tag
	// (e.g. "mam" for an exact-kernel mam encoded as "mam_exact").
	spec.Type = inner.Type()
	if err := spec.Validate(); err != nil {
		var se *SpecError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w: spec: %s: %s", ErrFormat, se.Field, se.Problem)
		}
		return nil, fmt.Errorf("%w: spec: %w", ErrFormat, err)
	}
	if !spec.Standardize {
		return nil, fmt.Errorf("%w: standardizer with spec.standardize false", ErrFormat)
	}
	if is, ok := inner.(interface{ Spec() Spec }); ok {
		if !reflect.DeepEqual(is.Spec(), spec) {
			return nil, fmt.Errorf("%w: inner model spec %+v differs from the standardizer's %+v", ErrFormat, is.Spec(), spec)
		}
	} else if inner.Dim() != d {
		return nil, fmt.Errorf("%w: inner model dim %d, standardizer %d", ErrFormat, inner.Dim(), d)
	}
	s := wrapStandardized(spec, inner)
	s.n = n
	for _, v := range [][]float64{s.mean, s.meanC, s.m2, s.m2C} {
		for i := range v {
			v[i] = r.f64()
		}
	}
	if err := s.checkState(); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrFormat, err)
	}
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
