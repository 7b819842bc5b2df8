package calibrate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// slidingPairs returns n pairs with many tied scores (rounded to a grid),
// signed zeros, and now and then a non-finite score or residual.
func slidingPairs(rng *rand.Rand, n int) []Pair {
	ps := make([]Pair, n)
	for i := range ps {
		s := math.Round(rng.NormFloat64()*8) / 4
		switch r := rng.IntN(200); {
		case r == 0:
			s = math.NaN()
		case r == 1:
			s = math.Inf(1 - 2*rng.IntN(2))
		case r < 12:
			s = math.Copysign(0, float64(1-2*rng.IntN(2)))
		}
		y := float64(rng.IntN(2))
		if rng.IntN(3) == 0 { // a regression target, for the residuals
			y = math.Round(rng.NormFloat64()*6) / 2
		}
		ps[i] = Pair{Score: s, Y: y}
	}
	return ps
}

func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

func sameVennAbers(a, b *VennAbers) bool {
	return a.n == b.n && a.np == b.np && a.k == b.k && sameFloats(a.at, b.at) && sameFloats(a.pl, b.pl)
}

// TestProbabilityPath: Probability's one search of the thresholds gives,
// bit for bit, what the fit's runs give looked up directly (p1 = f1[the
// calibration scores < s], p0 = f0[those ≤ s], p = p1/(1 − p0 + p1)), at
// every calibration score, its neighbours, ±0, ±Inf and the largest
// floats, on tables with ties, signed zeros, scores one ulp apart and
// steps of p0 and p1 at one score.
func TestProbabilityPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	count := func(a []float64, in func(float64) bool) int {
		n := 0
		for _, x := range a {
			if in(x) {
				n++
			}
		}
		return n
	}
	for trial := range 400 {
		pairs := slidingPairs(rng, rng.IntN(300))
		if trial%4 == 0 { // scores spaced one ulp apart, and the largest
			for i := range pairs {
				pairs[i].Score = math.Nextafter(1, float64(rng.IntN(3)-1)*math.Inf(1))
				if rng.IntN(20) == 0 {
					pairs[i].Score = math.MaxFloat64 * float64(1-2*rng.IntN(2))
				}
			}
		}
		var f Fitter
		v := f.VennAbers(pairs)
		ds, f0, f1 := f.s, f.f0, f.f1 // the fit's distinct scores and runs
		tests := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64, 1, math.Nextafter(1, 2), math.Nextafter(1, 0)}
		for _, x := range ds {
			tests = append(tests, x, math.Nextafter(x, math.Inf(1)), math.Nextafter(x, math.Inf(-1)))
		}
		for _, s := range tests {
			upper := f1[count(ds, func(x float64) bool { return x < s })]
			lower := f0[count(ds, func(x float64) bool { return x <= s })]
			p := upper / (1 - lower + upper)
			gp, glo, ghi := v.Probability(s)
			if !sameFloats([]float64{gp, glo, ghi}, []float64{p, lower, upper}) {
				t.Fatalf("trial %d, s %v: (%v, %v, %v), the runs (%v, %v, %v)", trial, s, gp, glo, ghi, p, lower, upper)
			}
		}
	}
}

// TestFitterAtSameBits: VennAbersAt and ConformalAt on a window's recent
// pairs, refitted every K as the engine does (the window growing, then
// sliding), give the tables of FitVennAbers and FitConformal bit for bit,
// and the incremental update is what produced most of them. Windows of
// several sizes and refit periods, down to K = 1 and up to K = the window
// (where most refits sort afresh).
func TestFitterAtSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, c := range []struct{ size, every int }{{300, 17}, {2000, 100}, {150, 1}, {64, 64}, {500, 250}, {120, 7}} {
		win := NewWindow(c.size)
		var f, g Fitter
		fits, slid := 0, 0
		for _, p := range slidingPairs(rng, 6*c.size+c.every) {
			win.push(p) // every pair, non-finite ones too, to test the fits' filters
			if win.Added()%int64(c.every) != 0 {
				continue
			}
			pairs := win.CopyRecentTo(nil)
			first := win.Added() - int64(len(pairs))
			if _, _, ok := f.va.step(pairs, first); ok {
				slid++
			}
			fits++
			if got, want := f.VennAbersAt(pairs, first), FitVennAbers(pairs); !sameVennAbers(got, want) {
				t.Fatalf("window %d, every %d, fit %d (pairs %d..%d): VennAbersAt differs from FitVennAbers",
					c.size, c.every, fits, first, first+int64(len(pairs)))
			}
			if got, want := g.ConformalAt(pairs, first), FitConformal(pairs); !sameFloats(got.r, want.r) {
				t.Fatalf("window %d, every %d, fit %d: ConformalAt differs from FitConformal", c.size, c.every, fits)
			}
		}
		t.Logf("window %d, every %d: %d fits, %d of them incremental", c.size, c.every, fits, slid)
		if c.every <= c.size/4 && slid < fits*3/4 {
			t.Errorf("window %d, every %d: only %d of %d fits were incremental", c.size, c.every, slid, fits)
		}
	}
}

// TestFitterAtFallsBack: a step the last fit cannot be updated to — the
// stream moved back, the same indices with other pairs (a replaced
// window), a gap — and a plain VennAbers in between all sort afresh, and
// the tables are still FitVennAbers's.
func TestFitterAtFallsBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	a, b := slidingPairs(rng, 400), slidingPairs(rng, 400)
	var f Fitter
	steps := []struct {
		pairs []Pair
		first int64
		slide bool
	}{
		{a[0:300], 0, false},     // no previous fit
		{a[20:320], 20, true},    // slid by 20
		{a[10:310], 10, false},   // moved back
		{a[30:330], 30, true},    //
		{b[40:340], 40, false},   // other pairs at the same indices
		{b[60:360], 60, true},    //
		{a[390:400], 390, false}, // past the end of the last fit: a gap
		{a[100:400], 100, false}, // moved back
		{a[100:400], 100, true},  // the same pairs again
	}
	for i, s := range steps {
		if i == 7 {
			f.VennAbers(b[:50]) // a plain fit forgets the last At fit
		}
		_, _, ok := f.va.step(s.pairs, s.first)
		if ok != s.slide {
			t.Errorf("step %d: incremental %v, want %v", i, ok, s.slide)
		}
		if got, want := f.VennAbersAt(s.pairs, s.first), FitVennAbers(s.pairs); !sameVennAbers(got, want) {
			t.Fatalf("step %d: VennAbersAt differs from FitVennAbers", i)
		}
	}
}

// TestResorted: the merge against a sort, and a value to remove that is
// not there.
func TestResorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		all := make([]float64, rng.IntN(40))
		for i := range all {
			all[i] = float64(rng.IntN(8))
		}
		nOut := rng.IntN(len(all) + 1)
		out := slices.Clone(all[:nOut])
		kept := slices.Clone(all[nOut:])
		in := make([]float64, rng.IntN(10))
		for i := range in {
			in[i] = float64(rng.IntN(8))
		}
		sorted := slices.Sorted(slices.Values(all))
		slices.Sort(out)
		slices.Sort(in)
		want := slices.Sorted(slices.Values(append(kept, in...)))
		got, ok := resorted(nil, sorted, out, in)
		if !ok || !slices.Equal(got, want) {
			t.Fatalf("resorted(%v − %v + %v) = %v, %v; want %v", sorted, out, in, got, ok, want)
		}
		if _, ok := resorted(nil, sorted, append(out, 8), in); ok {
			t.Fatalf("resorted(%v − %v) accepted a value not there", sorted, append(out, 8))
		}
	}
}
