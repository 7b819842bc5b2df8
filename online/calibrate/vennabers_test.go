package calibrate_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamer/streamer/online/calibrate"
)

// isoAt is the brute-force reference: the isotonic (nondecreasing) least-
// squares regression of Y on Score over pairs plus the test pair (s, y),
// equal scores pooled into one block (weight = multiplicity), by the
// pool-adjacent-violators algorithm, evaluated at s.
func isoAt(pairs []calibrate.Pair, s, y float64) float64 {
	all := []calibrate.Pair{{Score: s, Y: y}}
	for _, p := range pairs {
		if !math.IsNaN(p.Score) && !math.IsInf(p.Score, 0) {
			yy := 0.0
			if p.Y > 0 {
				yy = 1
			}
			all = append(all, calibrate.Pair{Score: p.Score, Y: yy})
		}
	}
	slices.SortStableFunc(all, func(a, b calibrate.Pair) int {
		if a.Score < b.Score {
			return -1
		}
		if a.Score > b.Score {
			return 1
		}
		return 0
	})
	type block struct {
		lo, hi    float64 // score range covered
		sum, w    float64
		containsS bool
	}
	var st []block
	for i := 0; i < len(all); {
		b := block{lo: all[i].Score, hi: all[i].Score}
		j := i
		for j < len(all) && all[j].Score == all[i].Score {
			b.sum += all[j].Y
			b.w++
			j++
		}
		b.containsS = all[i].Score == s
		i = j
		st = append(st, b)
		// Pool while the previous block's mean exceeds the last one's.
		for len(st) > 1 {
			a, c := st[len(st)-2], st[len(st)-1]
			if a.sum*c.w <= c.sum*a.w {
				break
			}
			st = st[:len(st)-2]
			st = append(st, block{lo: a.lo, hi: c.hi, sum: a.sum + c.sum, w: a.w + c.w, containsS: a.containsS || c.containsS})
		}
	}
	for _, b := range st {
		if b.containsS {
			return b.sum / b.w
		}
	}
	panic("test score not found")
}

// TestVennAbersAgainstBruteForce compares the table's p0 and p1 with two
// PAV isotonic regressions per test score (pairs + (s, 0), pairs + (s, 1)),
// on random small calibration sets with many ties, skewed and one-class
// labels, and test scores below, between, equal to and above the
// calibration scores. Odd trials fit with one Fitter reused across trials
// of every size, even ones with FitVennAbers.
func TestVennAbersAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 1))
	checked := 0
	var fitter calibrate.Fitter
	for trial := range 3000 {
		n := r.IntN(40)
		levels := 1 + r.IntN(12) // few distinct scores: many ties
		pos := r.Float64()
		switch trial % 10 {
		case 0:
			pos = 0 // all negative
		case 1:
			pos = 1 // all positive
		}
		pairs := make([]calibrate.Pair, n)
		for i := range pairs {
			s := float64(r.IntN(levels))
			switch trial % 3 {
			case 0:
				s = r.NormFloat64() // continuous: no ties
			case 1:
				s -= float64(levels / 2) // negative levels too, and −0 for some 0s
				if s == 0 && r.IntN(2) == 0 {
					s = math.Copysign(0, -1)
				}
			}
			y := 0.0
			// Labels loosely increasing with the score, or not at all.
			if r.Float64() < pos*(0.5+s/float64(2*levels)) || (trial%5 == 2 && r.Float64() < pos) {
				y = 1
			}
			pairs[i] = calibrate.Pair{Score: s, Y: y}
		}
		if trial%7 == 3 && n > 0 {
			pairs[r.IntN(n)].Score = math.NaN() // skipped by both
		}
		v := calibrate.FitVennAbers(pairs)
		if trial%2 == 1 {
			v = fitter.VennAbers(pairs)
		}
		tests := []float64{-1e300, math.Inf(-1), math.Inf(1), 1e300, -0.5, float64(levels) + 0.5, 0, math.Copysign(0, -1)}
		for _, p := range pairs {
			tests = append(tests, p.Score, p.Score+0.5, p.Score-0.5, math.Nextafter(p.Score, math.Inf(1)))
		}
		for range 5 {
			tests = append(tests, r.Float64()*float64(levels+2)-1)
		}
		for _, s := range tests {
			if math.IsNaN(s) {
				continue
			}
			p, lo, hi := v.Probability(s)
			want0, want1 := isoAt(pairs, s, 0), isoAt(pairs, s, 1)
			if math.Abs(lo-want0) > 1e-12 || math.Abs(hi-want1) > 1e-12 {
				t.Fatalf("trial %d, n %d, s %v: (p0, p1) = (%v, %v), brute force (%v, %v); pairs %v", trial, n, s, lo, hi, want0, want1, pairs)
			}
			if !(lo <= hi) || lo < 0 || hi > 1 {
				t.Fatalf("trial %d, s %v: p0 %v, p1 %v", trial, s, lo, hi)
			}
			if wp := hi / (1 - lo + hi); math.Abs(p-wp) > 1e-15 || p < lo-1e-15 || p > hi+1e-15 {
				t.Fatalf("trial %d, s %v: merged p %v, want %v in [%v, %v]", trial, s, p, wp, lo, hi)
			}
			checked++
		}
	}
	t.Logf("%d test scores agree with the brute force to 1e-12", checked)
}

// TestVennAbersEdgeCases: no pairs, NaN, one class, a single score.
func TestVennAbersEdgeCases(t *testing.T) {
	check := func(name string, v *calibrate.VennAbers, s, wp, wlo, whi float64) {
		t.Helper()
		p, lo, hi := v.Probability(s)
		if math.Abs(p-wp) > 1e-15 || math.Abs(lo-wlo) > 1e-15 || math.Abs(hi-whi) > 1e-15 {
			t.Errorf("%s: Probability(%v) = (%v, %v, %v), want (%v, %v, %v)", name, s, p, lo, hi, wp, wlo, whi)
		}
	}
	empty := calibrate.FitVennAbers(nil)
	check("empty", empty, 0.3, 0.5, 0, 1)
	check("empty NaN", empty, math.NaN(), 0.5, 0, 1)
	if empty.N() != 0 {
		t.Errorf("empty N %d", empty.N())
	}
	onlyNaN := calibrate.FitVennAbers([]calibrate.Pair{{Score: math.NaN(), Y: 1}, {Score: math.Inf(1), Y: 0}})
	check("non-finite only", onlyNaN, 0, 0.5, 0, 1)

	// All negative, scores 0..8: p0 = 0 everywhere. (s, 1) above all
	// scores is alone at the top: p1 = 1. Below all, it pools with all 9:
	// p1 = 1/10. Tied with score 4, its block {4} (mean 1/2) pools with
	// 5..8: p1 = 1/6. Merged p = p1/(1 + p1).
	var neg []calibrate.Pair
	for i := range 9 {
		neg = append(neg, calibrate.Pair{Score: float64(i)})
	}
	v := calibrate.FitVennAbers(neg)
	check("all negative, above", v, 100, 0.5, 0, 1)
	check("all negative, below", v, -100, 0.1/1.1, 0, 0.1)
	check("all negative, at 4", v, 4, 1.0/7, 0, 1.0/6)
	check("all negative, NaN", v, math.NaN(), 0.5, 0, 1)

	// One score repeated 10 times, 3 positive. At the score the test pair
	// joins the block: p0 = 3/11, p1 = 4/11. Below it, (s, 0) at 0 is no
	// violation (p0 = 0) and (s, 1) pools with the block (p1 = 4/11).
	// Above it, (s, 0) pools (p0 = 3/11) and (s, 1) stands alone (p1 = 1).
	var tie []calibrate.Pair
	for i := range 10 {
		y := 0.0
		if i < 3 {
			y = 1
		}
		tie = append(tie, calibrate.Pair{Score: 2, Y: y})
	}
	v = calibrate.FitVennAbers(tie)
	check("tie at", v, 2, (4.0/11)/(1-3.0/11+4.0/11), 3.0/11, 4.0/11)
	check("tie below", v, 1, (4.0/11)/(1+4.0/11), 0, 4.0/11)
	check("tie above", v, 3, 1/(1-3.0/11+1), 3.0/11, 1)
	if v.N() != 10 || v.Positives() != 3 || v.Distinct() != 1 {
		t.Errorf("N %d, Positives %d, Distinct %d", v.N(), v.Positives(), v.Distinct())
	}
}
