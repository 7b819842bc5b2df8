package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/streamer/streamer/online/codec"
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
	lp := LogisticParams{LearningRate: 0.1, L2: 1e-3}
	m := blNew(t, Spec{Type: LogisticName, Dim: 5, Standardize: true, Params: &lp})
	s, ok := m.(*Standardized)
	if !ok {
		t.Fatalf("New with Standardize returned %T", m)
	}
	ref, _ := NewLogistic(5, lp) // fed the standardised inputs by hand
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
	if m.Type() != LogisticName || m.Dim() != 5 || m.Examples() != ref.Examples() || m.Version() != 1 || s.Inner().Examples() != ref.Examples() {
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

// TestStandardizeCompensated: a long stream with a large offset keeps the
// mean and variance accurate.
func TestStandardizeCompensated(t *testing.T) {
	l, err := NewLDA(1, LDAParams{})
	if err != nil {
		t.Fatal(err)
	}
	s := Standardize(l)
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
	const d = 5
	spec := Spec{Type: LogisticName, Dim: d, Standardize: true, Params: &LogisticParams{LearningRate: 0.1}}
	m := blNew(t, spec)
	for i := range x {
		m.Observe(x[i], y[i], true)
	}
	good, _ := m.MarshalBinary()
	// After the envelope: n, mean, comp, M2, comp, then the inner model's
	// encoding, framed (u32 length).
	o := envelopeEnd(t, good)
	stats := o + 8 + 32*d
	inner := good[stats+4:]
	if typ, _ := PeekType(inner); typ != LogisticName {
		t.Fatalf("inner type %q", typ)
	}
	if typ, _ := PeekType(good); typ != standardizedTag {
		t.Fatalf("type %q", typ)
	}
	wrapped := func(innerBytes []byte) []byte {
		return codec.AppendBytes(bytes.Clone(good[:stats]), innerBytes)
	}
	if !bytes.Equal(wrapped(inner), good) {
		t.Fatal("the inner model is not the frame after the statistics")
	}
	small := blNew(t, Spec{Type: LogisticName, Dim: d - 1, Params: &LogisticParams{LearningRate: 0.1}})
	smallInner, _ := small.MarshalBinary()
	negN := bytes.Clone(good)
	binary.LittleEndian.PutUint64(negN[o:], uint64(1<<63))
	cases := map[string][]byte{
		"n < 0":           negN,
		"mean NaN":        putF64(good, o+8, math.NaN()),
		"M2 very < 0":     putF64(good, o+8+16*d, -1e6),
		"M2 comp inf":     putF64(good, o+8+24*d, math.Inf(1)),
		"no inner":        good[:stats],
		"empty inner":     wrapped(nil),
		"inner truncated": good[:len(good)-1],
		"inner trailing":  append(bytes.Clone(good), 1),
		"inner frame":     append(wrapped(inner[:len(inner)-1]), inner[len(inner)-1]),
		"inner corrupt":   wrapped(putF64(inner, envelopeEnd(t, inner)+24, math.NaN())),
		"inner dim":       wrapped(smallInner),
		"nested":          wrapped(good),
		"version 1 inner": wrapped(asVersion1(t, inner, LogisticName, legacySpec{Dim: d, LearningRate: 0.1, Standardize: true})),
		"dim":             withHeader(t, good, standardizedTag, &standardizedParams{}, d+1),
		"parameters":      withHeader(t, good, standardizedTag, &LDAParams{Window: Window{Events: 3}}, d),
		// Version 1: the wrapper's spec must say standardize.
		"version 1 spec not std": stdAsVersion1(t, good, spec, func(s *legacySpec) { s.Standardize = false }),
		"version 1 nested": func() []byte {
			v1 := stdAsVersion1(t, good, spec, nil)
			st := len(v1) - len(asVersion1(t, inner, LogisticName, legacySpec{Dim: d, LearningRate: 0.1, Standardize: true}))
			return append(bytes.Clone(v1[:st]), v1...)
		}(),
	}
	for i := range len(good) {
		blExpectRejected(t, "truncated", good[:i], blNew(t, spec))
	}
	for name, b := range cases {
		target := blNew(t, Spec{Type: LDAName, Dim: 2, Standardize: true, Params: &LDAParams{Window: Window{Events: 3}}})
		blExpectRejected(t, name, b, target)
		err := target.UnmarshalBinary(b)
		t.Logf("%s: %v", name, err)
	}
	// The wrapper carries no parameters of its own: it restores around
	// any inner model of its dimension, of another configuration or type
	// too; UnmarshalBinary into a wrapper needs the same inner type.
	for _, other := range []Spec{
		{Type: LogisticName, Dim: d, Params: &LogisticParams{LearningRate: 0.3}},
		{Type: LDAName, Dim: d},
	} {
		om, _ := blNew(t, other).MarshalBinary()
		b := wrapped(om)
		r, err := testTypes.Restore(b)
		if err != nil {
			t.Fatalf("std around %s: %v", other.Type, err)
		}
		if r.Type() != other.Type || !reflect.DeepEqual(modelParams(r), modelParams(blNew(t, other))) {
			t.Fatalf("std around %s: restored %s %+v", other.Type, r.Type(), modelParams(r))
		}
		target := blNew(t, spec)
		if err := target.UnmarshalBinary(b); (err == nil) != (other.Type == LogisticName) {
			t.Errorf("UnmarshalBinary of std around %s into std logistic: %v", other.Type, err)
		}
	}
	// The version-1 form of the same state restores to the same model.
	if r, err := testTypes.Restore(stdAsVersion1(t, good, spec, nil)); err != nil {
		t.Fatalf("version 1: %v", err)
	} else if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, good) {
		t.Fatal("version 1: restored state differs")
	}
	// A wrapper encoding is not an inner model's.
	if err := new(Logistic).UnmarshalBinary(good); !errors.Is(err, ErrFormat) {
		t.Errorf("Logistic.UnmarshalBinary(std): %v", err)
	}
	// An empty wrapper round-trips.
	e := blNew(t, spec)
	b, _ := e.MarshalBinary()
	if r, err := testTypes.Restore(b); err != nil || r.Examples() != 0 {
		t.Fatalf("empty: %v", err)
	}
}

// TestStandardizeWildValue: one event with a wild but finite feature
// (1e15, which kafka.max_feature_abs lets through), labelled or not, no
// longer takes over the statistics: a standardised linear mam (the demo's
// mam_linear) keeps its accuracy, where with the value in the statistics
// every later event standardised to about the same point and it fell to a
// coin's (0.53 in the demo). A real change of scale is still followed.
func TestStandardizeWildValue(t *testing.T) {
	x, y := randomData(5, 6000, 2, 0.5)
	newModel := func() Model {
		p := DefaultMAMParams()
		p.Kernel, p.Balance = KernelSpec{Type: "linear"}, true
		return blNew(t, Spec{Type: MAMName, Dim: 2, Standardize: true, Params: &p})
	}
	for _, labelled := range []bool{false, true} {
		clean, poisoned := newModel(), newModel()
		right := [2]int{}
		for k := range x {
			if k == 2000 {
				poisoned.Observe([]float64{1e15, -1e15}, 1, labelled)
			}
			for j, m := range []Model{clean, poisoned} {
				if p := m.Observe(x[k], y[k], true); k >= 5000 && float64(p.Label) == y[k] {
					right[j]++
				}
			}
		}
		acc, accP := float64(right[0])/1000, float64(right[1])/1000
		if acc < 0.7 || accP < acc-0.03 {
			t.Errorf("labelled %v: accuracy of the last 1000 events %.3f after a wild value, %.3f without", labelled, accP, acc)
		}
		mean, sd := make([]float64, 2), make([]float64, 2)
		poisoned.(*Standardized).Moments(mean, sd)
		if math.Abs(mean[0]) > 1 || sd[0] > 3 || math.Abs(mean[1]) > 1 || sd[1] > 3 {
			t.Errorf("labelled %v: moments after a wild value: mean %v sd %v", labelled, mean, sd)
		}
	}

	// Every feature ×1000 from event 500 on: within 2 000 events the sd is
	// of the new scale.
	s := newModel().(*Standardized)
	for k := range 2500 {
		v := []float64{x[k][0], x[k][1]}
		if k >= 500 {
			v[0], v[1] = 1000*v[0], 1000*v[1]
		}
		s.Observe(v, y[k], true)
	}
	sd := make([]float64, 2)
	s.Moments(nil, sd)
	if sd[0] < 500 || sd[1] < 500 {
		t.Errorf("after a change of scale ×1000: sd %v, want of the new scale (about 1000)", sd)
	}
}
