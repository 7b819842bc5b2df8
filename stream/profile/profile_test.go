package profile

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func testConfig() *Config {
	return &Config{Entity: "item", Namespace: "item", Name: "id", Out: "item_profile", Values: AllValues,
		HalfLife: time.Hour, Factors: "rating", K: 2, Reference: [][]byte{[]byte("a"), []byte("b"), []byte("c")}, MaxLabels: 10, Prior: 3}
}

// TestUpdate: counts, Welford's mean and variance against the direct
// formulas, the popularity's decay, first and last seen, the reference
// labels (latest per key, in key order), factors and attributes.
func TestUpdate(t *testing.T) {
	c := testConfig()
	var s State
	labels := []float64{4, 2.5, 5, 3.5}
	t0 := int64(1_000_000)
	for i, y := range labels {
		ev := &Event{At: t0 + int64(i)*time.Hour.Milliseconds(), Label: y, Labelled: true, Ref: -1}
		if i == 1 {
			ev.Ref = 2
		}
		if i == 3 {
			ev.Ref, ev.Factors, ev.Bias, ev.Attrs = 0, []float64{0.5, -1}, 0.25, []byte(`{"id":"m1"}`)
		}
		s.Update(c, ev)
	}
	s.Update(c, &Event{At: t0 + 4*time.Hour.Milliseconds(), Ref: 1}) // unlabelled: counted, no reference label
	mean, ss := 0.0, 0.0
	for _, y := range labels {
		mean += y / 4
	}
	for _, y := range labels {
		ss += (y - mean) * (y - mean)
	}
	switch {
	case s.Events != 5 || s.Labels != 4:
		t.Fatalf("counts %d %d", s.Events, s.Labels)
	case math.Abs(s.Mean-mean) > 1e-15 || math.Abs(s.Variance()-ss/4) > 1e-15:
		t.Fatalf("mean %v variance %v, want %v %v", s.Mean, s.Variance(), mean, ss/4)
	case s.First != t0 || s.Last != t0+4*time.Hour.Milliseconds():
		t.Fatalf("first %d last %d", s.First, s.Last)
	case math.Abs(s.Pop-(1+0.5+0.25+0.125+0.0625)) > 1e-12: // one event an hour, half-life an hour, as of the last
		t.Fatalf("popularity %v", s.Pop)
	case !slices.Equal(s.Ref, []RefLabel{{0, 3.5}, {2, 2.5}}):
		t.Fatalf("reference labels %v", s.Ref)
	case !slices.Equal(s.Factors, []float64{0.5, -1}) || s.Bias != 0.25 || string(s.Attrs) != `{"id":"m1"}`:
		t.Fatalf("factors %v bias %v attributes %s", s.Factors, s.Bias, s.Attrs)
	}
}

// TestRenderReadsBack: Render writes Names with Numbers, which read back
// through JSON as the same float64s, cold defaults included (the prior
// mean, every reference key's median, zero factors).
func TestRenderReadsBack(t *testing.T) {
	c := testConfig()
	median := NewMedians(3, 0)
	for j, m := range []float64{2, 4.5, 1.0 / 3} {
		median.Set(j, m)
	}
	s := &State{Events: 3, Labels: 2, Mean: 0.1 + 0.2, M2: 1e-300, Pop: math.Pi, Bias: -1.5, Factors: []float64{1e-17, 2}, Ref: []RefLabel{{1, 5}}}
	for _, st := range []*State{s, nil} {
		nums := c.Numbers(nil, st, median)
		var got map[string]map[string]float64
		if err := json.Unmarshal(append(append([]byte{'{'}, c.Render(nil, st, median)...), '}'), &got); err != nil {
			t.Fatal(err)
		}
		names := c.Names()
		if len(names) != len(nums) || len(got["item_profile"]) != len(names) || len(names) != 5+1+c.K+len(c.Reference) {
			t.Fatalf("%d names, %d numbers, %d rendered", len(names), len(nums), len(got["item_profile"]))
		}
		for k, name := range names {
			if got["item_profile"][name] != nums[k] {
				t.Fatalf("%s: rendered %v, want %v", name, got["item_profile"][name], nums[k])
			}
		}
	}
	cold := c.Numbers(nil, nil, median)
	want := []float64{0, 0, 3, 0, 0, 0, 0, 0, 2, 4.5, 1.0 / 3}
	if !slices.Equal(cold, want) {
		t.Fatalf("cold %v, want %v", cold, want)
	}
	warm := c.Numbers(nil, s, median)
	if warm[8] != 2 || warm[9] != 5 || warm[10] != 1.0/3 {
		t.Fatalf("reference %v: key 1 rated it 5, the others' medians", warm[8:])
	}
}

// TestStateEncoding: a state round-trips exactly; a truncated, extended,
// inconsistent or other-version encoding is refused and leaves the
// receiver as it was.
func TestStateEncoding(t *testing.T) {
	s := State{Events: 9, Labels: 7, Mean: 3.25, M2: 4, First: 1, Last: 99, Pop: 2.5, Bias: 0.5, Factors: []float64{1, 2},
		Ref: []RefLabel{{0, 1}, {5, 2}}, Attrs: []byte(`{"id":"x"}`)}
	b, _ := s.MarshalBinary()
	var got State
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	b2, _ := got.MarshalBinary()
	if string(b2) != string(b) || got.Mean != s.Mean || string(got.Attrs) != string(s.Attrs) {
		t.Fatalf("round trip: %+v", got)
	}
	bad := [][]byte{b[:len(b)-1], append(slices.Clone(b), 0), append([]byte{2}, b[1:]...)}
	inconsistent := s
	inconsistent.Labels = 10
	ib, _ := inconsistent.MarshalBinary()
	unordered := s
	unordered.Ref = []RefLabel{{5, 2}, {0, 1}}
	ub, _ := unordered.MarshalBinary()
	bad = append(bad, ib, ub)
	for i, x := range bad {
		keep := got
		err := got.UnmarshalBinary(x)
		if err == nil || !errors.Is(err, ErrFormat) {
			t.Fatalf("case %d: %v, want ErrFormat", i, err)
		}
		if got.Events != keep.Events || got.Mean != keep.Mean {
			t.Fatalf("case %d: the receiver changed", i)
		}
	}
}

// TestReference: a reference key's median over its labels kept (the
// mean of the two middle ones of an even count), at most max kept, every
// one counted; Median leaves its input alone; the encoding round-trips.
func TestReference(t *testing.T) {
	var r RefState
	for _, y := range []float64{4, 1, 3, 5, 2} {
		r.Add(y, 4)
	}
	if r.Median() != 3.5 || r.Seen != 5 || len(r.Sorted) != 4 { // the first four kept: 1 3 4 5
		t.Fatalf("median %v of %v, seen %d", r.Median(), r.Sorted, r.Seen)
	}
	xs := []float64{3, 1, 2}
	if Median(xs) != 2 || !slices.Equal(xs, []float64{3, 1, 2}) || !math.IsNaN(Median(nil)) {
		t.Fatal("Median")
	}
	b, _ := r.MarshalBinary()
	var got RefState
	if err := got.UnmarshalBinary(b); err != nil || !slices.Equal(got.Sorted, r.Sorted) || got.Seen != 5 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if err := got.UnmarshalBinary(b[:len(b)-3]); err == nil {
		t.Fatal("truncated accepted")
	}
}
