package online

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/streamer/streamer/online/codec"
)

// TestLevelThresholdsAreOMAMs: fed the (score before learning, level)
// pairs of an omam's labelled events, LevelThresholds fits the very
// thresholds the omam does and predicts the same levels, and its threshold
// section is byte for byte omam's.
func TestLevelThresholdsAreOMAMs(t *testing.T) {
	const m = 5
	x, y := omamData(3, 3000, 4, m)
	o := newOMAM(t, 4, OMAMParams{Kernel: omamRBF, Levels: m, Normalize: true})
	lt, err := NewLevelThresholds(m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		p := o.Observe(x[i], y[i], true)
		if got := lt.Level(p.Score); got != p.Label {
			t.Fatalf("event %d: level %d, omam %d", i, got, p.Label)
		}
		lt.Record(p.Score, int(y[i]))
		a, okA := o.Thresholds(nil)
		b, okB := lt.Thresholds(nil)
		if okA != okB || !slices.Equal(a, b) {
			t.Fatalf("event %d: thresholds %v (%v), omam %v (%v)", i, b, okB, a, okA)
		}
	}
	if lt.Recorded() != int64(len(x)) || lt.Levels() != m {
		t.Fatalf("recorded %d, levels %d", lt.Recorded(), lt.Levels())
	}
	enc, _ := lt.AppendBinary(nil)
	want := o.omamThresholds.appendBinary(nil)
	if !slices.Equal(enc[12:], want) {
		t.Fatal("threshold section differs from omam's")
	}
}

func TestLevelThresholdsRoundTrip(t *testing.T) {
	for _, n := range []int{0, 10, 64, 1500} {
		lt, _ := NewLevelThresholds(4)
		for i := range n {
			lt.Record(math.Sin(float64(i)), 1+i%4)
		}
		enc, _ := lt.AppendBinary([]byte("x"))
		enc = append(enc, "tail"...)
		got, _ := NewLevelThresholds(4)
		r := codec.NewReader(enc[1:], ErrFormat)
		got.Decode(r)
		if err, rest := r.Err(), r.Rest(); err != nil || string(rest) != "tail" {
			t.Fatalf("n = %d: rest %q, %v", n, r.Rest(), r.Err())
		}
		re, _ := got.AppendBinary([]byte("x"))
		if !slices.Equal(re, enc[:len(enc)-4]) {
			t.Fatalf("n = %d: re-encoding differs", n)
		}
		for _, s := range []float64{-2, -0.5, 0, 0.3, 0.99, 2} {
			if got.Level(s) != lt.Level(s) {
				t.Fatalf("n = %d: level of %v differs", n, s)
			}
		}
		// The restored thresholds continue identically.
		for i := range 200 {
			s := math.Cos(float64(i))
			lt.Record(s, 1+i%3)
			got.Record(s, 1+i%3)
		}
		a, _ := lt.Thresholds(nil)
		b, _ := got.Thresholds(nil)
		if !slices.Equal(a, b) {
			t.Fatalf("n = %d: thresholds diverge after restore: %v vs %v", n, a, b)
		}
		body := enc[1 : len(enc)-4]
		before, _ := got.AppendBinary(nil)
		for i := range len(body) {
			r := codec.NewReader(body[:i], ErrFormat)
			if got.Decode(r); !errors.Is(r.Err(), ErrFormat) {
				t.Fatalf("n = %d: truncated to %d bytes: %v", n, i, r.Err())
			}
			if after, _ := got.AppendBinary(nil); !slices.Equal(before, after) {
				t.Fatalf("n = %d: truncated to %d bytes: receiver changed", n, i)
			}
		}
		other, _ := NewLevelThresholds(5)
		r = codec.NewReader(body, ErrFormat)
		if other.Decode(r); !errors.Is(r.Err(), ErrFormat) {
			t.Fatalf("decoded into 5 levels: %v", r.Err())
		}
	}
}

func TestLevelThresholdsErrors(t *testing.T) {
	for _, m := range []int{-1, 0, 1, omamMaxLevels + 1} {
		if _, err := NewLevelThresholds(m); err == nil {
			t.Errorf("levels %d accepted", m)
		}
	}
	lt, _ := NewLevelThresholds(3)
	for _, v := range []float64{0, 4, 1.5, math.NaN()} {
		if _, ok := lt.Label(v); ok {
			t.Errorf("label %v accepted", v)
		}
	}
	lt.Record(math.NaN(), 1)
	if lt.Recorded() != 0 {
		t.Error("non-finite score recorded")
	}
	defer func() {
		if recover() == nil {
			t.Error("level 4 of 3 recorded without a panic")
		}
	}()
	lt.Record(0, 4)
}

// BenchmarkLevelThresholds is the per-event cost of levels for a scorer:
// Level and Record, with the refit every 64 pairs amortised (target: ≤ 1 µs
// per event, no allocation).
func BenchmarkLevelThresholds(b *testing.B) {
	lt, _ := NewLevelThresholds(5)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := math.Sin(float64(i))
		_ = lt.Level(s)
		lt.Record(s, 1+i%5)
		i++
	}
}
