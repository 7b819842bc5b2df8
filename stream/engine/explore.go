package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// Exploration statistics of the policies ucb and thompson (rank.explore):
// per key of the rank model, the matrix
//
//	A = I + Σ z(x_i) z(x_i)ᵀ,   z(x) = [x/‖x‖; 1]/√2   (z(0) = [0; 1]/√2)
//
// over the inputs x_i the key's model learned (labelled, accepted
// events), d + 1 square for inputs of dimension d. z is the linear mam's
// own feature vector (docs/math.md §1, "Variants": the unit-normalised
// input with the balanced model's constant coordinate), so for that model
// A is exactly the design matrix of LinUCB (Li et al. 2010) over the
// features its score is linear in; for other models it measures how much
// of a candidate's direction the key has been shown. The width of a
// candidate,
//
//	u(x) = sqrt(z(x)ᵀ A⁻¹ z(x))   (in (0, 1]),
//
// is 1 for a key that has learned nothing and shrinks like 1/sqrt(m) with
// the m examples the key learned near x's direction. ucb ranks by the
// score plus alpha·u(x); thompson by the score plus alpha·ξᵀz(x) with
// ξ ~ N(0, A⁻¹) drawn once per request (a sample of the linear posterior
// around the model's direction; the same draw orders every candidate).
//
// The statistics are key state like the model's: explored wraps the key's
// model, so they are kept, evicted, checkpointed, written to the key store
// and the changelog and restored with it, in one encoding (below). A key
// whose stored state has none (written before the policy was on) restores
// with A = I (the key explores as if new); with the policy off again the
// statistics are dropped when the key's state is read (restoreKeyState).

// maxExploreDim bounds the input dimension d of the exploration
// statistics: (d + 1)(d + 2)/2 floats per key (265 KiB at 256).
const maxExploreDim = 256

// explored is a key's rank model with its exploration statistics. Every
// online.Model method is the model's, except that learning an example
// also adds it to A, and the encoding carries A.
type explored struct {
	online.Model
	d int       // input dimension
	a []float64 // A's upper triangle, packed by rows: (d+1)(d+2)/2
	z []float64 // scratch: z(x)
}

var _ online.Preparer = (*explored)(nil)

// Wrapped is the key's model (holder.Wrapper: peeks score with it).
func (ex *explored) Wrapped() online.Model { return ex.Model }

// newExplored wraps m (inputs of dimension d) with A = I.
func newExplored(m online.Model, d int) *explored {
	e := &explored{Model: m, d: d, a: make([]float64, packedLen(d+1)), z: make([]float64, d+1)}
	e.reset()
	return e
}

// exploreFactory returns a factory of explored key models.
func exploreFactory(factory func() (online.Model, error), d int) func() (online.Model, error) {
	return func() (online.Model, error) {
		m, err := factory()
		if err != nil {
			return nil, err
		}
		return newExplored(m, d), nil
	}
}

// packedLen is the length of the packed upper triangle of an n×n matrix.
func packedLen(n int) int { return n * (n + 1) / 2 }

// reset sets A = I.
func (e *explored) reset() {
	clear(e.a)
	n := e.d + 1
	for i, at := 0, 0; i < n; i++ {
		e.a[at] = 1
		at += n - i
	}
}

// unitInput writes z(x) into z (len(x) + 1).
func unitInput(z, x []float64) {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 0.0
	if ss > 0 && !math.IsInf(ss, 0) {
		inv = 1 / math.Sqrt(2*ss)
	}
	for i, v := range x {
		z[i] = v * inv
	}
	z[len(x)] = 1 / math.Sqrt2
}

// learned adds x to A (the model learned it).
func (e *explored) learned(x []float64) {
	z := e.z
	unitInput(z, x)
	n := len(z)
	at := 0
	for i := range n {
		zi := z[i]
		row := e.a[at : at+n-i]
		for j := range row {
			row[j] += zi * z[i+j]
		}
		at += n - i
	}
}

// Observe is the model's Observe; a labelled example the model learned is
// added to A.
func (e *explored) Observe(x []float64, y float64, labelled bool) online.Prediction {
	before := e.Model.Examples()
	p := e.Model.Observe(x, y, labelled)
	if labelled && e.Model.Examples() > before {
		e.learned(x)
	}
	return p
}

// ObservePrepared is the model's (the engine calls it only for a model
// that prepares); a labelled example the model learned is added to A.
func (e *explored) ObservePrepared(prep, x []float64, y float64, labelled bool) online.Prediction {
	before := e.Model.Examples()
	p := e.Model.(online.Preparer).ObservePrepared(prep, x, y, labelled)
	if labelled && e.Model.Examples() > before {
		e.learned(x)
	}
	return p
}

// Prepare and PreparedLen are the model's (see ObservePrepared).
func (e *explored) Prepare(dst, x []float64) { e.Model.(online.Preparer).Prepare(dst, x) }
func (e *explored) PreparedLen() int         { return e.Model.(online.Preparer).PreparedLen() }

// Inner returns the key's model (online.Unwrap looks through explored).
func (e *explored) Inner() online.Model { return e.Model }

// Encoding of a key's state with exploration statistics (online/codec's
// conventions): magic "XPLR", u16 version (1), u32 d, the model's
// encoding as bytes (u32 length + bytes), then A's packed upper triangle,
// (d+1)(d+2)/2 f64.
const (
	exploreMagic   = "XPLR"
	exploreVersion = 1
)

// MarshalBinary encodes the model and A.
func (e *explored) MarshalBinary() ([]byte, error) {
	inner, err := e.Model.MarshalBinary()
	if err != nil {
		return nil, err
	}
	dst := make([]byte, 0, len(exploreMagic)+2+4+4+len(inner)+8*len(e.a))
	dst = append(dst, exploreMagic...)
	dst = codec.AppendU16(dst, exploreVersion)
	dst = codec.AppendU32(dst, uint32(e.d))
	dst = codec.AppendBytes(dst, inner)
	return codec.AppendF64s(dst, e.a), nil
}

// UnmarshalBinary restores an encoding of MarshalBinary, or the model's own
// encoding (a state written without exploration statistics: A = I).
// Errors wrap online.ErrFormat; on error e is unchanged.
func (e *explored) UnmarshalBinary(b []byte) error {
	inner, a, err := splitExplored(b, e.d)
	if err != nil {
		return err
	}
	if err := e.Model.UnmarshalBinary(inner); err != nil {
		return err
	}
	if a == nil {
		e.reset()
		return nil
	}
	copy(e.a, a)
	return nil
}

// splitExplored splits a key's state into the model's encoding and A (nil
// when b is the model's encoding alone). d is the input dimension A must
// have (d < 0: any).
func splitExplored(b []byte, d int) (inner []byte, a []float64, err error) {
	if !bytes.HasPrefix(b, []byte(exploreMagic)) {
		return b, nil, nil
	}
	r := codec.NewReader(b[len(exploreMagic):], online.ErrFormat)
	if v := r.U16(); r.Err() == nil && v != exploreVersion {
		r.Failf("exploration statistics: version %d, want %d", v, exploreVersion)
	}
	got := int(r.U32())
	if r.Err() == nil && (got > maxExploreDim || (d >= 0 && got != d)) {
		r.Failf("exploration statistics of dimension %d, want %d", got, d)
	}
	inner = r.Bytes()
	if r.Err() == nil {
		a = make([]float64, packedLen(got+1))
		r.F64s(a)
	}
	if err := r.End(); err != nil {
		return nil, nil, fmt.Errorf("exploration statistics: %w", err)
	}
	for i, at := 0, 0; i <= got; i++ {
		if !(a[at] >= 1) || math.IsInf(a[at], 0) {
			return nil, nil, fmt.Errorf("%w: exploration statistics: diagonal %v", online.ErrFormat, a[at])
		}
		at += got + 1 - i
	}
	for _, v := range a {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("%w: exploration statistics: non-finite entry", online.ErrFormat)
		}
	}
	return inner, a, nil
}

// KeyModelState returns the model's own encoding in a key's stored state
// (the state less its exploration statistics, when it has them), for
// tools that decode it with the model registry (streamer snapshot).
func KeyModelState(b []byte) ([]byte, error) {
	inner, _, err := splitExplored(b, -1)
	return inner, err
}

// DecodeKeyState decodes b, a key's state in table table of the key store
// or of a snapshot, as a restore at start-up would: an entity's profile
// (the tables profile.<entity>…), or a key-scoped model's state through
// the registry types, less its exploration statistics. The tools that
// check saved state read every key with it.
func DecodeKeyState(types *online.Registry, table string, b []byte) (online.Model, error) {
	if strings.HasPrefix(table, profileTablePrefix) {
		return profileState(table, b)
	}
	inner, err := KeyModelState(b)
	if err != nil {
		return nil, err
	}
	return types.Restore(inner)
}

// restoreKeyState restores a key's stored state b into m, a fresh instance
// of the key's model: an explored instance takes the state with or
// without statistics; a plain one drops the statistics of a state written
// while a policy that keeps them was on.
func restoreKeyState(m online.Model, b []byte) error {
	if _, ok := m.(*explored); ok {
		return m.UnmarshalBinary(b)
	}
	inner, _, err := splitExplored(b, -1)
	if err != nil {
		return err
	}
	return m.UnmarshalBinary(inner)
}

// explorer is a request's use of a key's exploration statistics: the
// Cholesky factor of A and each candidate's whitened z, L⁻¹z(x) (whose
// norm is the width u(x)). Scratch of the shard (rankScratch).
type explorer struct {
	n   int       // d + 1
	l   []float64 // L, n×n row-major, lower triangle (A = L Lᵀ)
	y   []float64 // per candidate: L⁻¹ z(x), n each
	z   []float64 // scratch
	g   []float64 // a draw of N(0, I_n)
	ind []float64 // per candidate: the policy's index
}

// errNotPositive is a factorisation failure: A lost positive definiteness
// (not possible for A = I + Σ zzᵀ in exact arithmetic).
var errNotPositive = errors.New("stream: exploration statistics are not positive definite")

// factor computes the Cholesky factor of e's A.
func (ex *explorer) factor(e *explored) error {
	n := e.d + 1
	ex.n = n
	if cap(ex.l) < n*n {
		ex.l = make([]float64, n*n)
	}
	l := ex.l[:n*n]
	// Unpack A's upper triangle into the lower one of l (A symmetric).
	for i, at := 0, 0; i < n; i++ {
		for j := i; j < n; j++ {
			l[j*n+i] = e.a[at]
			at++
		}
	}
	for j := range n {
		s := l[j*n+j]
		for k := range j {
			s -= l[j*n+k] * l[j*n+k]
		}
		if !(s > 0) {
			return errNotPositive
		}
		d := math.Sqrt(s)
		l[j*n+j] = d
		for i := j + 1; i < n; i++ {
			t := l[i*n+j]
			for k := range j {
				t -= l[i*n+k] * l[j*n+k]
			}
			l[i*n+j] = t / d
		}
	}
	return nil
}

// whiten sets candidate c's L⁻¹ z(x) (forward substitution) and returns
// its width, the norm.
func (ex *explorer) whiten(c int, x []float64) float64 {
	n := ex.n
	if cap(ex.z) < n {
		ex.z = make([]float64, n)
	}
	z := ex.z[:n]
	unitInput(z, x)
	if need := (c + 1) * n; cap(ex.y) < need {
		ex.y = append(ex.y[:cap(ex.y)], make([]float64, need-cap(ex.y))...)
	}
	y := ex.y[c*n : (c+1)*n]
	l := ex.l
	var ss float64
	for i := range n {
		t := z[i]
		row := l[i*n : i*n+i]
		for k, v := range row {
			t -= v * y[k]
		}
		t /= l[i*n+i]
		y[i] = t
		ss += t * t
	}
	return math.Sqrt(ss)
}

// perturbation is gᵀ L⁻¹ z(x) of candidate c for the draw in g: ξᵀz(x)
// with ξ = L⁻ᵀ g ~ N(0, A⁻¹).
func (ex *explorer) perturbation(c int) float64 {
	n := ex.n
	y := ex.y[c*n : (c+1)*n]
	var s float64
	for i, v := range y {
		s += v * ex.g[i]
	}
	return s
}

// drawNormal draws g ~ N(0, I_n).
func (ex *explorer) drawNormal(rng *rand.Rand) {
	if cap(ex.g) < ex.n {
		ex.g = make([]float64, ex.n)
	}
	ex.g = ex.g[:ex.n]
	for i := range ex.g {
		ex.g[i] = rng.NormFloat64()
	}
}
