package eval

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestWilson checks the 95% Wilson score interval against the values
// published by Newcombe (1998, Statistics in Medicine 17, 857–872, table
// II, method 3) and checks that its ends are where the score test is at z.
func TestWilson(t *testing.T) {
	for _, tc := range []struct {
		k, n   int64
		lo, hi float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
		{5, 10, 0.2366, 0.7634},
		{10, 10, 0.7225, 1},
	} {
		iv, ok := Wilson(tc.k, tc.n, z95)
		if !ok || math.Abs(iv.Lo-tc.lo) > 5e-5 || math.Abs(iv.Hi-tc.hi) > 5e-5 {
			t.Errorf("Wilson(%d, %d) = %+v, %v; want [%.4f, %.4f]", tc.k, tc.n, iv, ok, tc.lo, tc.hi)
		}
		// |p̂ − p| = z·√(p(1−p)/n) at each end inside (0, 1).
		ph := float64(tc.k) / float64(tc.n)
		for _, p := range []float64{iv.Lo, iv.Hi} {
			if p <= 0 || p >= 1 {
				continue
			}
			if s := math.Abs(ph-p) / math.Sqrt(p*(1-p)/float64(tc.n)); math.Abs(s-z95) > 1e-9 {
				t.Errorf("Wilson(%d, %d): score statistic %v at %v, want %v", tc.k, tc.n, s, p, z95)
			}
		}
	}
	if _, ok := Wilson(0, 0, z95); ok {
		t.Errorf("Wilson(0, 0): defined")
	}
	if wilson95(0, 0) != nil {
		t.Errorf("wilson95(0, 0) not nil")
	}
}

// TestROCAUC: the mid-rank formula against a hand count with ties, against
// the O(n²) pair count on random scores with many ties, and undefined with
// one class.
func TestROCAUC(t *testing.T) {
	// Positives 0.4, 0.8, 0.8; negatives 0.1, 0.4, 0.2. Of the 9 pairs the
	// positive is above in 8 and tied (0.4, 0.4) in 1: (8 + ½)/9.
	scores := []float64{0.1, 0.4, 0.4, 0.8, 0.8, 0.2}
	truth := []float64{-1, 1, -1, 1, 1, -1}
	if got, want := ROCAUC(scores, truth), 8.5/9; math.Abs(got-want) > 1e-15 {
		t.Errorf("AUC = %v, want %v", got, want)
	}
	// All tied: ½. Reversed: 0.
	if got := ROCAUC([]float64{0, 0, 0, 0}, []float64{1, -1, 1, -1}); got != 0.5 {
		t.Errorf("all tied: AUC %v, want 0.5", got)
	}
	if got := ROCAUC([]float64{1, 2, 3}, []float64{1, -1, -1}); got != 0 {
		t.Errorf("reversed: AUC %v, want 0", got)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		n := 1 + rng.IntN(60)
		s, y := make([]float64, n), make([]float64, n)
		for i := range s {
			s[i] = float64(rng.IntN(5)) // many ties
			y[i] = float64(2*rng.IntN(2) - 1)
		}
		var pairs, wins float64
		for i := range s {
			for j := range s {
				if y[i] > 0 && y[j] < 0 {
					pairs++
					switch {
					case s[i] > s[j]:
						wins++
					case s[i] == s[j]:
						wins += 0.5
					}
				}
			}
		}
		got := ROCAUC(s, y)
		if pairs == 0 {
			if !math.IsNaN(got) {
				t.Errorf("one class: AUC %v, want NaN", got)
			}
			continue
		}
		if math.Abs(got-wins/pairs) > 1e-12 {
			t.Errorf("AUC %v, pair count %v (scores %v, labels %v)", got, wins/pairs, s, y)
		}
	}
	if got := ROCAUC([]float64{1, 2}, []float64{1, 1}); !math.IsNaN(got) {
		t.Errorf("positives only: AUC %v, want NaN", got)
	}
	// Undefined is null in JSON, not NaN (which encoding/json refuses).
	b, err := json.Marshal(struct {
		A *OptFloat `json:"a"`
		B *OptFloat `json:"b"`
		C *OptFloat `json:"c,omitempty"`
	}{optFloat(math.NaN()), optFloat(0.75), nil})
	if err != nil || string(b) != `{"a":null,"b":0.75}` {
		t.Errorf("OptFloat JSON: %s, %v", b, err)
	}
	var back struct{ A, B OptFloat }
	if err := json.Unmarshal(b, &back); err != nil || back.A.Valid || !back.B.Valid || back.B.Value != 0.75 {
		t.Errorf("OptFloat round trip: %+v, %v", back, err)
	}
}

func TestConfusionAndReliability(t *testing.T) {
	var c Confusion
	for _, e := range []struct {
		pred int
		y    float64
	}{{1, 1}, {1, 1}, {-1, 1}, {0, 1}, {1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {0, -1}, {0, -1}} {
		c.add(e.pred, e.y)
	}
	if want := (Confusion{TP: 2, FN: 1, AbstainPositive: 1, FP: 1, TN: 3, AbstainNegative: 2}); c != want {
		t.Errorf("confusion %+v, want %+v", c, want)
	}

	var r reliability
	if r.bins() != nil {
		t.Errorf("no probability: bins")
	}
	// 0.05 ×4 (1 positive), 0.95 ×2 (2 positives), 1.0 goes to the last
	// bin, 0.1 to the second.
	for _, e := range [][2]float64{{0.05, 1}, {0.05, -1}, {0.05, -1}, {0.05, -1}, {0.95, 1}, {1, 1}, {0.1, -1}} {
		r.add(e[0], e[1])
	}
	bins := r.bins()
	if len(bins) != ReliabilityBins {
		t.Fatalf("%d bins", len(bins))
	}
	check := func(b ReliabilityBin, n, pos int64, mean, obs float64) {
		t.Helper()
		if b.N != n || b.Positives != pos || b.MeanProbability == nil || math.Abs(*b.MeanProbability-mean) > 1e-12 ||
			b.Observed == nil || *b.Observed != obs || b.ObservedCI == nil || b.ObservedCI.Lo > obs || b.ObservedCI.Hi < obs {
			t.Errorf("bin [%v, %v): %+v; want n %d, positives %d, mean %v, observed %v", b.Lo, b.Hi, b, n, pos, mean, obs)
		}
	}
	check(bins[0], 4, 1, 0.05, 0.25)
	check(bins[1], 1, 0, 0.1, 0)
	check(bins[9], 2, 2, 0.975, 1)
	if b := bins[5]; b.N != 0 || b.Observed != nil || b.MeanProbability != nil || b.Lo != 0.5 || b.Hi != 0.6 {
		t.Errorf("empty bin %+v", b)
	}
}

// TestLabelOrder: the sorted-label rule on sequences whose changes are
// known.
func TestLabelOrder(t *testing.T) {
	seq := func(labels ...float64) *labelOrder {
		var l labelOrder
		for _, y := range labels {
			l.add(y)
		}
		return &l
	}
	l := seq(1, 1, -1, -1, -1, 1)
	// 2 changes; expected 5·(1 − (3·2 + 3·2)/(6·5)) = 3.
	if l.changes != 2 || math.Abs(l.expected()-3) > 1e-12 || l.looksSorted() {
		t.Errorf("changes %d, expected %v, sorted %v", l.changes, l.expected(), l.looksSorted())
	}
	sorted, alternating, few := make([]float64, 200), make([]float64, 200), make([]float64, 99)
	for i := range sorted {
		sorted[i] = float64(i * 3 / 200) // 3 groups: 2 changes of ≈ 132 expected
		alternating[i] = float64(i % 2)
	}
	if l := seq(sorted...); l.changes != 2 || !l.looksSorted() {
		t.Errorf("sorted: changes %d, expected %v, sorted %v", l.changes, l.expected(), l.looksSorted())
	}
	if l := seq(alternating...); l.looksSorted() {
		t.Errorf("alternating labels look sorted")
	}
	if l := seq(few...); l.looksSorted() { // one label, and < 100 rows
		t.Errorf("99 equal labels look sorted")
	}
	if l := seq(make([]float64, 500)...); l.looksSorted() || l.expected() != 0 {
		t.Errorf("one class: expected %v, sorted %v", l.expected(), l.looksSorted())
	}
}
