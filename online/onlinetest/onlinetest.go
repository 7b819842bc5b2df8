// Package onlinetest is the conformance suite of model types: every type of
// a registry is checked, on each of its example configurations
// (online.Def.Examples) and with standardised inputs too, for the
// contracts of online.Model that the service relies on. A model type gets
// all of it by being registered: cmd/streamer runs Run over the service's
// registry, and a test of a new type runs it over a registry holding it.
//
// The checks, per type, example and standardisation:
//
//   - construction: New through the registry gives a model of the type's
//     name and dimension; a dimension ≤ 0 is an error; parameters with any
//     key set to a bad value (negative, zero, NaN, ±Inf, huge, an unknown
//     name) give an error or a working model, never a panic;
//   - labels: Label accepts exactly the kind's label set (online.Kind);
//   - predictions: finite scores, labels in the kind's range, a bound and a
//     probability exactly as the type's traits say;
//   - encoding: MarshalBinary restores through the registry and into a
//     freshly configured model bit-identically (the re-encoding equals the
//     encoding), and the restored model predicts and learns identically
//     afterwards; truncated at every byte (sampled for encodings over 64
//     KiB), it is refused by Restore and by UnmarshalBinary with an error
//     wrapping online.ErrFormat, and the receiver is left unchanged;
//   - online.Peek (a ranking request's score) predicts what an unlabelled
//     Observe would, bit for bit, and leaves the state as it was (the
//     encoding unchanged);
//   - Observe allocates nothing (a refitted model when it scores; its
//     labelled events copy the window for each refit), and panics on an
//     input of the wrong dimension;
//   - sparse input (hashed features): a model that takes it
//     (online.SparseSupport) gives through ObserveSparse, with every entry
//     split in two duplicates and the indices in reverse order, the
//     predictions of Observe on the dense input (scores within 1e-9
//     relative) and a state within 1e-9 of Observe's (online.StateClose),
//     without allocating.
//
// FuzzRestore is the matching fuzz body for Registry.Restore.
package onlinetest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// Dim is the input dimension the suite uses.
const Dim = 3

// events is the number of events each model is fed before its encoding is
// checked: enough for several refits of the examples' windows.
const events = 90

// Run runs the conformance suite over every type of reg.
func Run(t *testing.T, reg *online.Registry) {
	for _, typ := range reg.Types() {
		t.Run(typ.Name(), func(t *testing.T) { RunType(t, reg, typ) })
	}
}

// RunType runs the suite over one type of reg.
func RunType(t *testing.T, reg *online.Registry, typ *online.Type) {
	examples := typ.Examples()
	if len(examples) == 0 {
		t.Fatalf("type %s has no example configurations", typ.Name())
	}
	t.Run("bad-parameters", func(t *testing.T) { checkBadParams(t, reg, typ) })
	for i, p := range examples {
		for _, std := range []bool{false, true} {
			name := fmt.Sprintf("example%d", i)
			if std {
				name += "-standardized"
			}
			t.Run(name, func(t *testing.T) {
				c := &checker{reg: reg, typ: typ, spec: online.Spec{Type: typ.Name(), Dim: Dim, Standardize: std, Params: p}, traits: typ.Traits(p)}
				c.run(t)
			})
		}
	}
}

type checker struct {
	reg    *online.Registry
	typ    *online.Type
	spec   online.Spec
	traits online.Traits
}

// event is one input of the synthetic stream.
type event struct {
	x        []float64
	y        float64 // wire label
	labelled bool
}

// stream returns n events for a model of kind k: features on very
// different scales (so that standardisation matters), labels of the kind
// from a fixed function of the features, every fifth event unlabelled.
func stream(seed uint64, n int, t online.Traits) []event {
	rng := rand.New(rand.NewPCG(seed, 42))
	scale := []float64{1, 30, 0.05}
	out := make([]event, n)
	for i := range out {
		x := make([]float64, Dim)
		for j := range x {
			x[j] = scale[j%len(scale)] * rng.NormFloat64()
		}
		z := x[0] + x[1]/30 - 20*x[2] + 0.3*rng.NormFloat64()
		var y float64
		switch t.Kind {
		case online.Classifier:
			y = 1
			if z < 0 {
				y = -1
			}
		case online.Ordinal:
			m := max(t.Levels, 2)
			y = math.Floor((z + 2) / 4 * float64(m))
			y = 1 + min(max(y, 0), float64(m-1))
		default:
			y = z + 0.5*x[0]*x[0]
		}
		out[i] = event{x: x, y: y, labelled: i%5 != 4}
	}
	return out
}

func (c *checker) newModel(t *testing.T) online.Model {
	t.Helper()
	m, err := c.reg.New(c.spec)
	if err != nil {
		t.Fatalf("New(%+v): %v", c.spec, err)
	}
	return m
}

// feed observes evs on m and returns the predictions.
func (c *checker) feed(t *testing.T, m online.Model, evs []event) []online.Prediction {
	t.Helper()
	out := make([]online.Prediction, len(evs))
	for i, e := range evs {
		y := 0.0
		if e.labelled {
			var ok bool
			if y, ok = m.Label(e.y); !ok {
				t.Fatalf("event %d: label %v refused", i, e.y)
			}
		}
		out[i] = m.Observe(e.x, y, e.labelled)
	}
	return out
}

func (c *checker) run(t *testing.T) {
	m := c.newModel(t)
	if m.Type() != c.typ.Name() || m.Dim() != Dim {
		t.Fatalf("Type() %q, Dim() %d; want %q, %d", m.Type(), m.Dim(), c.typ.Name(), Dim)
	}
	if c.traits.Bound {
		if _, ok := m.(online.Bounder); !ok {
			t.Errorf("traits promise a bound, but %T is no online.Bounder", m)
		}
	}
	c.checkLabels(t, m)
	evs := stream(1, events, c.traits)
	preds := c.feed(t, m, evs)
	c.checkPredictions(t, preds)
	labelled := 0
	for _, e := range evs {
		if e.labelled {
			labelled++
		}
	}
	if m.Examples() != int64(labelled) {
		t.Errorf("Examples() = %d after %d labelled events", m.Examples(), labelled)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	c.checkRoundTrip(t, m, b)
	c.checkPeek(t, m)
	c.checkTruncation(t, b)
	c.checkAllocs(t, m)
	c.checkWrongDim(t, m)
	c.checkSparse(t)
}

// checkSparse feeds a model that takes sparse input the stream through
// ObserveSparse and a twin the same through Observe (see the package doc).
func (c *checker) checkSparse(t *testing.T) {
	t.Helper()
	m := c.newModel(t)
	sm, ok := m.(online.SparseModel)
	if !ok || online.SparseSupport(m) != nil {
		return
	}
	dense := c.newModel(t)
	idx := make([]int32, 0, 2*Dim)
	val := make([]float64, 0, 2*Dim)
	observe := func(e event) (online.Prediction, online.Prediction) {
		y := 0.0
		if e.labelled {
			y, _ = m.Label(e.y)
		}
		idx, val = idx[:0], val[:0]
		for j := Dim - 1; j >= 0; j-- {
			h := e.x[j] / 2 // x/2 + x/2 = x exactly
			idx = append(idx, int32(j), int32(j))
			val = append(val, h, e.x[j]-h)
		}
		return dense.Observe(e.x, y, e.labelled), sm.ObserveSparse(idx, val, y, e.labelled)
	}
	evs := stream(3, events, c.traits)
	for i, e := range evs {
		pd, ps := observe(e)
		if math.Abs(pd.Score-ps.Score) > 1e-9*max(math.Abs(pd.Score), 1e-6) || pd.N != ps.N || pd.HasBound != ps.HasBound ||
			pd.HasBound && math.Abs(pd.MistakeBound-ps.MistakeBound) > 1e-9*max(pd.MistakeBound, 1e-6) {
			t.Fatalf("event %d: Observe %+v, ObserveSparse %+v", i, pd, ps)
		}
	}
	if err := online.StateClose(dense, m, 1e-9); err != nil {
		t.Fatalf("ObserveSparse: %v", err)
	}
	i := 0
	if n := testing.AllocsPerRun(20, func() { observe(evs[i%len(evs)]); i++ }); n != 0 {
		t.Errorf("ObserveSparse: %v allocations per event", n)
	}
}

// checkPeek peeks at fresh inputs with m: each prediction is that of an
// unlabelled Observe on a copy restored from m's encoding, and after all
// of them m's encoding has not changed.
func (c *checker) checkPeek(t *testing.T, m online.Model) {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range stream(7, 8, c.traits) {
		p := online.Peek(m, e.x)
		twin, err := c.reg.Restore(b) // fresh: an unlabelled Observe may change its state
		if err != nil {
			t.Fatalf("Restore: %v", err)
		}
		if q := twin.Observe(e.x, 0, false); !samePrediction(p, q) {
			t.Fatalf("input %d: Peek %+v, unlabelled Observe %+v", i, p, q)
		}
	}
	after, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, b) {
		t.Fatalf("Peek changed the model's state (%d bytes before, %d after)", len(b), len(after))
	}
}

func (c *checker) checkLabels(t *testing.T, m online.Model) {
	type lc struct {
		v  float64
		ok bool
	}
	var cases []lc
	switch c.traits.Kind {
	case online.Classifier:
		cases = []lc{{1, true}, {-1, true}, {0, true}, {2, false}, {0.5, false}, {math.NaN(), false}, {math.Inf(1), false}}
	case online.Ordinal: // (a model may bin real targets into levels: 0 or 1.5 may be fine)
		lv := float64(c.traits.Levels)
		cases = []lc{{1, true}, {lv, true}, {math.NaN(), false}, {math.Inf(-1), false}}
	case online.Ranking, online.Regression:
		cases = []lc{{3.7, true}, {-1e6, true}, {0, true}, {math.NaN(), false}, {math.Inf(1), false}}
	default:
		t.Fatalf("traits have no kind: %+v", c.traits)
	}
	for _, tc := range cases {
		if _, ok := m.Label(tc.v); ok != tc.ok {
			t.Errorf("Label(%v) ok = %v, want %v (%v)", tc.v, ok, tc.ok, c.traits.Kind)
		}
	}
}

func (c *checker) checkPredictions(t *testing.T, preds []online.Prediction) {
	var bound, prob bool
	for i, p := range preds {
		if math.IsNaN(p.Score) || math.IsInf(p.Score, 0) {
			t.Fatalf("prediction %d: score %v", i, p.Score)
		}
		switch c.traits.Kind {
		case online.Classifier:
			if p.Label < -1 || p.Label > 1 {
				t.Fatalf("prediction %d: class %d", i, p.Label)
			}
		case online.Ordinal:
			if p.Label < 0 || p.Label > c.traits.Levels {
				t.Fatalf("prediction %d: level %d of %d", i, p.Label, c.traits.Levels)
			}
		default:
			if p.Label != 0 {
				t.Fatalf("prediction %d: label %d from a %v model", i, p.Label, c.traits.Kind)
			}
		}
		if p.HasBound {
			bound = true
			if !c.traits.Bound {
				t.Fatalf("prediction %d has a bound; the traits say none", i)
			}
			if !(p.MistakeBound >= 0 && p.MistakeBound <= 1) {
				t.Fatalf("prediction %d: bound %v", i, p.MistakeBound)
			}
		}
		if p.HasProbability {
			prob = true
			if !c.traits.Probability {
				t.Fatalf("prediction %d has a probability; the traits say none", i)
			}
			if !(p.Probability >= 0 && p.Probability <= 1) {
				t.Fatalf("prediction %d: probability %v", i, p.Probability)
			}
		}
	}
	if c.traits.Bound && !bound {
		t.Errorf("the traits promise a bound, no prediction had one")
	}
	if c.traits.Probability && !prob {
		t.Errorf("the traits promise a probability, no prediction had one")
	}
}

// checkRoundTrip restores b through the registry and into a freshly
// configured model, and checks both against m.
func (c *checker) checkRoundTrip(t *testing.T, m online.Model, b []byte) {
	r, err := c.reg.Restore(b)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	into := c.newModel(t)
	if err := into.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary into a configured model: %v", err)
	}
	for name, got := range map[string]online.Model{"Restore": r, "UnmarshalBinary": into} {
		if got.Type() != m.Type() || got.Dim() != m.Dim() || got.Examples() != m.Examples() || got.Version() != m.Version() {
			t.Errorf("%s: type %s dim %d n %d version %d; want %s %d %d %d", name, got.Type(), got.Dim(), got.Examples(), got.Version(),
				m.Type(), m.Dim(), m.Examples(), m.Version())
		}
	}
	more := stream(2, 40, c.traits)
	want := c.feed(t, m, more)
	for name, got := range map[string]online.Model{"Restore": r, "UnmarshalBinary": into} {
		b2, err := got.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b2, b) {
			t.Errorf("%s: re-encoding differs from the encoding (%d vs %d bytes)", name, len(b2), len(b))
		}
		preds := c.feed(t, got, more)
		for i := range preds {
			if !samePrediction(preds[i], want[i]) {
				t.Fatalf("%s: prediction %d after the restore %+v, the original %+v", name, i, preds[i], want[i])
			}
		}
	}
}

func samePrediction(a, b online.Prediction) bool {
	same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	return same(a.Score, b.Score) && a.Label == b.Label && same(a.MistakeBound, b.MistakeBound) && a.HasBound == b.HasBound &&
		same(a.Delta, b.Delta) && a.N == b.N && a.Version == b.Version && same(a.Probability, b.Probability) &&
		a.HasProbability == b.HasProbability
}

// checkTruncation cuts b at every byte (or at a sample of the cuts of a
// large encoding).
func (c *checker) checkTruncation(t *testing.T, b []byte) {
	target := c.newModel(t)
	c.feed(t, target, stream(3, 25, c.traits))
	before, err := target.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cuts(len(b)) {
		prefix := b[:n:n]
		if _, err := c.reg.Restore(prefix); !errors.Is(err, online.ErrFormat) {
			t.Fatalf("Restore of the first %d of %d bytes: %v, want an error wrapping online.ErrFormat", n, len(b), err)
		}
		if err := target.UnmarshalBinary(prefix); !errors.Is(err, online.ErrFormat) {
			t.Fatalf("UnmarshalBinary of the first %d of %d bytes: %v, want an error wrapping online.ErrFormat", n, len(b), err)
		}
	}
	after, err := target.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("failed UnmarshalBinary calls changed the receiver")
	}
}

// cuts lists the prefix lengths to try: all of [0, n) up to 64 KiB, else
// the first and last 4 KiB and 2 048 lengths spread in between.
func cuts(n int) []int {
	var out []int
	if n <= 64<<10 {
		for i := range n {
			out = append(out, i)
		}
		return out
	}
	for i := range 4 << 10 {
		out = append(out, i, n-1-i)
	}
	for k := range 2048 {
		out = append(out, 4<<10+k*(n-8<<10)/2048)
	}
	return out
}

// checkAllocs measures Observe's allocations.
func (c *checker) checkAllocs(t *testing.T, m online.Model) {
	evs := stream(4, 200, c.traits)
	labels := make([]float64, len(evs))
	for i, e := range evs {
		labels[i], _ = m.Label(e.y)
	}
	i := 0
	unlabelled := testing.AllocsPerRun(len(evs), func() {
		m.Observe(evs[i%len(evs)].x, 0, false)
		i++
	})
	if unlabelled != 0 {
		t.Errorf("Observe (unlabelled) allocates %v times per event", unlabelled)
	}
	i = 0
	labelled := testing.AllocsPerRun(len(evs), func() {
		m.Observe(evs[i%len(evs)].x, labels[i%len(evs)], true)
		i++
	})
	// A refitted model copies its window for each refit (and, not started,
	// fits inline): its labelled events between refits are checked by
	// online/refit's tests.
	if labelled != 0 && !c.traits.Refitted {
		t.Errorf("Observe (labelled) allocates %v times per event", labelled)
	}
}

func (c *checker) checkWrongDim(t *testing.T, m online.Model) {
	for _, d := range []int{Dim - 1, Dim + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Observe of %d features (dimension %d) did not panic", d, Dim)
				}
			}()
			m.Observe(make([]float64, d), 0, false)
		}()
	}
}

// checkBadParams sets every key of every example, one at a time, to bad
// values: New must return an error or a model that works, never panic.
func checkBadParams(t *testing.T, reg *online.Registry, typ *online.Type) {
	for _, d := range []int{0, -1} {
		if _, err := typ.New(d, typ.Examples()[0]); err == nil {
			t.Errorf("New with dimension %d: no error", d)
		}
	}
	if _, err := typ.New(Dim, nil); err == nil {
		t.Errorf("New with nil parameters: no error")
	}
	zero := reflect.New(typ.ParamsType()).Interface().(online.Params)
	tryNew(t, reg, typ, zero, "the zero parameters")
	for _, ex := range typ.Examples() {
		for _, path := range leaves(reflect.ValueOf(ex)) {
			for _, bad := range badValues(path.v.Type()) {
				p := cloneParams(ex)
				f := path.in(reflect.ValueOf(p))
				f.Set(bad)
				tryNew(t, reg, typ, p, fmt.Sprintf("%s = %v", path.key, bad))
			}
		}
	}
}

func tryNew(t *testing.T, reg *online.Registry, typ *online.Type, p online.Params, what string) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: panic: %v", what, r)
		}
	}()
	for _, std := range []bool{false, true} {
		m, err := reg.New(online.Spec{Type: typ.Name(), Dim: Dim, Standardize: std, Params: p})
		if err != nil {
			if !errors.Is(err, online.ErrSpec) {
				t.Errorf("%s: error %v does not name a key (online.SpecError)", what, err)
			}
			continue
		}
		tr := typ.Traits(p)
		for _, e := range stream(5, 30, tr) {
			y, ok := m.Label(e.y)
			m.Observe(e.x, y, ok && e.labelled)
		}
		if _, err := m.MarshalBinary(); err != nil {
			t.Errorf("%s: MarshalBinary: %v", what, err)
		}
	}
}

// leaf is a settable scalar key of a parameter struct.
type leaf struct {
	key   string
	index []int // field path from the struct (through pointer and inline structs)
	v     reflect.Value
}

// in returns the leaf's field in the struct p points to.
func (l leaf) in(p reflect.Value) reflect.Value {
	v := p.Elem()
	for _, i := range l.index {
		if v.Kind() == reflect.Slice {
			v = v.Index(i)
			continue
		}
		v = v.Field(i)
	}
	return v
}

// leaves lists the scalar keys of the parameters p points to, nested
// structs and the first item of lists of structs included.
func leaves(p reflect.Value) []leaf {
	var out []leaf
	var walk func(v reflect.Value, key string, index []int)
	walk = func(v reflect.Value, key string, index []int) {
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			idx := append(append([]int(nil), index...), i)
			name := sf.Tag.Get("yaml")
			if sf.Anonymous && fv.Kind() == reflect.Struct {
				walk(fv, key, idx)
				continue
			}
			k := name
			if key != "" {
				k = key + "." + name
			}
			switch {
			case fv.Kind() == reflect.Struct:
				walk(fv, k, idx)
			case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
				if fv.Len() > 0 {
					walk(fv.Index(0), k+"[0]", append(idx, 0))
				}
			case fv.Kind() == reflect.Slice:
				out = append(out, leaf{key: k, index: idx, v: fv})
			default:
				out = append(out, leaf{key: k, index: idx, v: fv})
			}
		}
	}
	walk(p.Elem(), "", nil)
	return out
}

// badValues are values a key of type t should be refused with (or at least
// survive).
func badValues(t reflect.Type) []reflect.Value {
	var vals []any
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		vals = []any{time.Duration(-1), time.Duration(0), time.Duration(math.MaxInt64)}
	case t.Kind() == reflect.Float64:
		vals = []any{-1.0, 0.0, math.NaN(), math.Inf(1), math.Inf(-1), 1e300}
	case t.Kind() == reflect.Int:
		vals = []any{-1, 0, 1 << 40, math.MinInt}
	case t.Kind() == reflect.Uint64:
		vals = []any{uint64(0), uint64(math.MaxUint64)}
	case t.Kind() == reflect.Bool:
		vals = []any{true, false}
	case t.Kind() == reflect.String:
		vals = []any{"", "bogus"}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Float64:
		vals = []any{[]float64{}, []float64{math.NaN()}, []float64{3, 1}, make([]float64, 100)}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		vals = []any{[]string{}, []string{""}}
	case t == reflect.TypeOf([][]string(nil)):
		vals = []any{[][]string{}, [][]string{{}}, [][]string{{"", ""}}, [][]string{{"a", "b", "c"}}, [][]string{{"a", "a"}, {"a", "a"}}}
	}
	out := make([]reflect.Value, len(vals))
	for i, v := range vals {
		out[i] = reflect.ValueOf(v).Convert(t)
	}
	return out
}

// cloneParams deep-copies parameters through their canonical encoding.
func cloneParams(p online.Params) online.Params {
	c := reflect.New(reflect.TypeOf(p).Elem()).Interface().(online.Params)
	r := codec.NewReader(codec.AppendParams(nil, p), nil)
	codec.ReadParams(r, c)
	if r.Err() != nil {
		panic(r.Err())
	}
	return c
}

// FuzzRestore is the body of a fuzz target over reg.Restore: seeded with
// the encodings of every type's examples (plain and standardised) after
// some events, it requires that no input panics and that whatever
// restores re-encodes to bytes that restore to the same encoding.
func FuzzRestore(f *testing.F, reg *online.Registry) {
	for _, typ := range reg.Types() {
		for _, p := range typ.Examples() {
			for _, std := range []bool{false, true} {
				m, err := reg.New(online.Spec{Type: typ.Name(), Dim: Dim, Standardize: std, Params: p})
				if err != nil {
					f.Fatal(err)
				}
				tr := typ.Traits(p)
				for _, e := range stream(6, 40, tr) {
					y, _ := m.Label(e.y)
					m.Observe(e.x, y, e.labelled)
				}
				b, err := m.MarshalBinary()
				if err != nil {
					f.Fatal(err)
				}
				if len(b) <= 64<<10 {
					f.Add(b)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := reg.Restore(b)
		if err != nil {
			return
		}
		b2, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of a restored model: %v", err)
		}
		m2, err := reg.Restore(b2)
		if err != nil {
			t.Fatalf("Restore of a re-encoding: %v", err)
		}
		b3, err := m2.MarshalBinary()
		if err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("re-encoding is not stable: %v", err)
		}
	})
}
