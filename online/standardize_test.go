package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// stdTwoPass returns the population mean and variance of x[:n] per feature.
func stdTwoPass(x [][]float64, n int) (mean, variance []float64) {
	d := len(x[0])
	mean, variance = make([]float64, d), make([]float64, d)
	if n == 0 {
		return mean, variance
	}
	for _, v := range x[:n] {
		for i := range v {
			mean[i] += v[i]
		}
	}
	for i := range mean {
		mean[i] /= float64(n)
	}
	for _, v := range x[:n] {
		for i := range v {
			variance[i] += (v[i] - mean[i]) * (v[i] - mean[i])
		}
	}
	for i := range variance {
		variance[i] /= float64(n)
	}
	return mean, variance
}

// stdData is randomData with features on very different scales and
// offsets, one constant feature and one that is constant for a while.
func stdData(n int) (x [][]float64, y []float64) {
	x, y = randomData(51, n, 5, 0.4)
	for i, v := range x {
		v[0] = 1e4 + 300*v[0]
		v[1] *= 1e-3
		v[2] = 7 // constant: centred only
		if i < 10 {
			v[3] = -2 // constant at first
		}
	}
	return x, y
}

// TestStandardizeMatchesTwoPass: the wrapper passes the inner model
// (x − mean)/sd with the statistics of the events before it (score first),
// labelled and unlabelled events alike, and its moments match a two-pass
// computation.
func TestStandardizeMatchesTwoPass(t *testing.T) {
	x, y := stdData(500)
	spec := Spec{Type: ModelLogistic, Dim: 5, LearningRate: 0.1, L2: 1e-3, Standardize: true}
	m := blNew(t, spec)
	s, ok := m.(*Standardized)
	if !ok {
		t.Fatalf("New with Standardize returned %T", m)
	}
	ref, _ := NewLogistic(spec) // fed the standardised inputs by hand
	z := make([]float64, 5)
	for k := range x {
		mean, variance := stdTwoPass(x, k)
		for i := range z {
			z[i] = x[k][i] - mean[i]
			if variance[i] >= stdVarFloor {
				z[i] /= math.Sqrt(variance[i])
			}
		}
		if k == 0 && !bytes.Equal(f64Bytes(z), f64Bytes(x[0])) {
			t.Fatal("first event not passed as is")
		}
		labelled := k%3 != 2
		p := m.Observe(x[k], y[k], labelled)
		q := ref.Observe(z, y[k], labelled)
		if math.Abs(p.Score-q.Score) > 1e-9*(1+math.Abs(q.Score)) || p.Label != q.Label || p.N != q.N {
			t.Fatalf("event %d: %+v, by hand %+v", k, p, q)
		}
	}
	mean, sd := make([]float64, 5), make([]float64, 5)
	if n := s.Moments(mean, sd); n != 500 {
		t.Fatalf("moments over %d events", n)
	}
	wm, wv := stdTwoPass(x, 500)
	for i := range mean {
		if !relClose(mean[i], wm[i], 1e-13) || math.Abs(sd[i]-math.Sqrt(wv[i])) > 1e-12*(1+math.Sqrt(wv[i])) {
			t.Errorf("feature %d: mean %v sd %v, two-pass %v %v", i, mean[i], sd[i], wm[i], math.Sqrt(wv[i]))
		}
	}
	if sd[2] != 0 || s.inv[2] != 1 {
		t.Errorf("constant feature: sd %v, 1/sd %v", sd[2], s.inv[2])
	}
	// Delegation.
	if m.Type() != ModelLogistic || m.Dim() != 5 || m.Examples() != ref.Examples() || m.Version() != 1 || s.Inner().Examples() != ref.Examples() {
		t.Errorf("delegation: %s %d %d %d", m.Type(), m.Dim(), m.Examples(), m.Version())
	}
	if v, ok := m.Label(0); !ok || v != -1 {
		t.Errorf("Label(0) = %v, %v", v, ok)
	}
	if _, ok := m.Label(3); ok {
		t.Error("Label(3) accepted")
	}
	// Non-finite and overflowing inputs are not added.
	for _, bad := range [][]float64{{math.NaN(), 0, 0, 0, 0}, {0, math.Inf(1), 0, 0, 0}, {1e200, 0, 0, 0, 0}} {
		before, _ := m.MarshalBinary()
		p := m.Observe(bad, 1, true)
		if after, _ := m.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("%v changed the state", bad)
		}
		if p.Label != 0 || p.HasProbability {
			t.Errorf("%v: %+v", bad, p)
		}
	}
}

func f64Bytes(v []float64) []byte {
	var b []byte
	for _, x := range v {
		b = appendF64(b, x)
	}
	return b
}

// TestStandardizeCompensated: a long stream with a large offset keeps the
// mean and variance accurate.
func TestStandardizeCompensated(t *testing.T) {
	m := blNew(t, Spec{Type: ModelLDA, Dim: 1, Standardize: true})
	s := m.(*Standardized)
	// x = 1e8 + (−1)^k·0.5: mean 1e8, variance 0.25.
	const n = 1_000_000
	x := []float64{0}
	for k := range n {
		x[0] = 1e8 + 0.5 - float64(k&1)
		s.add(x) // the statistics only: the inner model is not the point here
	}
	mean, sd := make([]float64, 1), make([]float64, 1)
	s.Moments(mean, sd)
	if math.Abs(mean[0]-1e8) > 1e-8 || math.Abs(sd[0]-0.5) > 1e-12 {
		t.Fatalf("mean %v (want 1e8), sd %.17g (want 0.5)", mean[0], sd[0])
	}
}

func TestStandardizeUnmarshalErrors(t *testing.T) {
	x, y := stdData(60)
	spec := Spec{Type: ModelLogistic, Dim: 5, LearningRate: 0.1, Standardize: true}
	m := blNew(t, spec)
	for i := range x {
		m.Observe(x[i], y[i], true)
	}
	good, _ := m.MarshalBinary()
	o := blStateOffset(standardizedTag) // n, mean, comp, M2, comp, inner…
	d := 5
	inner := good[o+8+32*d:]
	if typ, _ := peekType(inner); typ != ModelLogistic {
		t.Fatalf("inner type %q", typ)
	}
	putF := func(b []byte, off int, v float64) []byte {
		b = bytes.Clone(b)
		copy(b[off:], appendF64(nil, v))
		return b
	}
	wrapped := func(innerBytes []byte) []byte {
		return append(bytes.Clone(good[:o+8+32*d]), innerBytes...)
	}
	other, _ := New(Spec{Type: ModelLogistic, Dim: 5, LearningRate: 0.3, Standardize: true})
	otherInner, _ := other.(*Standardized).Inner().MarshalBinary()
	unstd, _ := New(Spec{Type: ModelLogistic, Dim: 5, LearningRate: 0.1})
	unstdBytes, _ := unstd.MarshalBinary()
	lda, _ := New(Spec{Type: ModelLDA, Dim: 5, Standardize: true})
	ldaInner, _ := lda.(*Standardized).Inner().MarshalBinary()
	negN := bytes.Clone(good)
	binary.LittleEndian.PutUint64(negN[o:], uint64(1<<63))
	noStd := bytes.Clone(good)
	noStd[o-8-8-1-4-4-1] = 0 // the standardize flag in the spec
	cases := map[string][]byte{
		"n < 0":           negN,
		"mean NaN":        putF(good, o+8, math.NaN()),
		"M2 very < 0":     putF(good, o+8+16*d, -1e6),
		"M2 comp inf":     putF(good, o+8+24*d, math.Inf(1)),
		"no inner":        good[:o+8+32*d],
		"inner truncated": good[:len(good)-1],
		"inner trailing":  append(bytes.Clone(good), 1),
		"inner spec":      wrapped(otherInner),
		"inner not std":   wrapped(unstdBytes),
		"inner type":      wrapped(ldaInner),
		"nested":          wrapped(good),
		"spec not std":    noStd,
	}
	for i := range o + 8 + 32*d {
		blExpectRejected(t, "truncated", good[:i], blNew(t, spec))
	}
	for name, b := range cases {
		target := blNew(t, Spec{Type: ModelLDA, Dim: 2, Window: 3, Standardize: true})
		blExpectRejected(t, name, b, target)
		err := target.UnmarshalBinary(b)
		t.Logf("%s: %v", name, err)
	}
	// A wrapper encoding is not an inner model's.
	if err := new(Logistic).UnmarshalBinary(good); !errors.Is(err, ErrFormat) {
		t.Errorf("Logistic.UnmarshalBinary(std): %v", err)
	}
	// An empty wrapper round-trips.
	e, _ := New(spec)
	b, _ := e.MarshalBinary()
	if r, err := Restore(b); err != nil || r.Examples() != 0 {
		t.Fatalf("empty: %v", err)
	}
}
