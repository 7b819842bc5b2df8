package online

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestOMAMAutoBoston: omam with no gamma (auto) against the fixed widths
// c/S, c = 2^k, k = −4..6 (S of the batch-standardised training split, as
// TestMAMAutoQuality's grid) and the former default gamma 10, on
// boston_ordinal (TestOMAMBoston's protocol: 10 stratified 70/30 splits,
// inputs standardised on the training split, normalised omam, rbf random
// features D = 1024, the training rows streamed once). Auto must rank
// (Kendall τ-b) within 0.02 of the best fixed width; gamma 10 must fall
// far below (a test that auto matters here). Measured: auto 0.655 (gamma
// 0.084–0.097, about 1/d), best fixed 0.653 (c = 1), gamma 10 0.032.
func TestOMAMAutoBoston(t *testing.T) {
	x, y := readCSV(t, "testdata/boston_ordinal.csv")
	grid := aqGrid()
	const D, splits = 1024, 10
	tauAuto := make([]float64, splits)
	tau10 := make([]float64, splits)
	tauFixed := make([][]float64, len(grid))
	for g := range tauFixed {
		tauFixed[g] = make([]float64, splits)
	}
	var gammas []float64
	aqParallel(splits*(len(grid)+2), func(i int) {
		seed, g := uint64(i/(len(grid)+2)), i%(len(grid)+2)
		tr, te := omamSplit(y, 0.3, seed)
		trX, teX := omamStandardise(x, tr, tr), omamStandardise(x, tr, te)
		trY, teY := omamPick(y, tr), omamPick(y, te)
		p := OMAMParams{Levels: 5, Normalize: true, Kernel: KernelSpec{Type: KernelRBF, Features: D, Seed: seed}}
		switch {
		case g < len(grid):
			all := make([]int, len(trX))
			for k := range all {
				all[k] = k
			}
			p.Kernel.Gamma = grid[g] / aqScale(trX, all)
			tauFixed[g][seed], _, _ = omamHoldout(t, p, trX, trY, teX, teY)
		case g == len(grid):
			p.Kernel.Gamma = 10
			tau10[seed], _, _ = omamHoldout(t, p, trX, trY, teX, teY)
		default:
			tauAuto[seed], _, _ = omamHoldout(t, p, trX, trY, teX, teY)
		}
	})
	for seed := range uint64(3) { // the widths auto settles on
		tr, _ := omamSplit(y, 0.3, seed)
		trX, trY := omamStandardise(x, tr, tr), omamPick(y, tr)
		o := newOMAM(t, len(trX[0]), OMAMParams{Levels: 5, Normalize: true, Kernel: KernelSpec{Type: KernelRBF, Features: D, Seed: seed}})
		for i := range trX {
			o.Observe(trX[i], trY[i], true)
		}
		g, _, final := o.AutoGamma()
		if !final {
			t.Fatal("the warm-up is not over after the training split")
		}
		gammas = append(gammas, g)
	}
	auto, _ := omamMeanSD(tauAuto)
	g10, _ := omamMeanSD(tau10)
	best, bestC := math.Inf(-1), 0.0
	var line strings.Builder
	for g, c := range grid {
		m, _ := omamMeanSD(tauFixed[g])
		fmt.Fprintf(&line, " %g:%.3f", c, m)
		if m > best {
			best, bestC = m, c
		}
	}
	t.Logf("boston_ordinal, τ-b over %d splits: auto %.3f (gamma of the first splits %.4f), best fixed %.3f (c = %g), gamma 10 %.3f; fixed c:%s",
		splits, auto, gammas, best, bestC, g10, line.String())
	if auto < best-0.02 {
		t.Errorf("auto τ-b %.3f, want within 0.02 of the best fixed width's %.3f", auto, best)
	}
	if g10 > auto-0.3 {
		t.Errorf("gamma 10 τ-b %.3f is not far below auto's %.3f: the data set no longer tests the width", g10, auto)
	}
}

// TestOMAMAutoMatchesFixed: after the warm-up an auto omam is the
// fixed-gamma omam of its width (the map of the scaled reference
// frequencies) that learned the same examples, to the bit, and stays so;
// before the first example it is empty; its width is that of S from the
// last half of the first autoWarmup inputs.
func TestOMAMAutoMatchesFixed(t *testing.T) {
	for _, k := range []KernelSpec{omamAutoK, omamAutoL} {
		for _, extra := range []OMAMParams{{}, {Window: Window{Events: 40}}, {Decay: Decay{HalfLife: 30}}} {
			p := extra
			p.Kernel, p.Levels, p.Normalize = k, 4, true
			x, y := omamData(11, 400, 3, 4)
			o := newOMAM(t, 3, p)
			if pr := o.Observe(x[0], 0, false); pr.Score != 0 || pr.Label != 0 {
				t.Fatalf("empty auto model predicted %+v", pr)
			}
			for i := range autoWarmup {
				o.Observe(x[i], y[i], true)
			}
			g, s, final := o.AutoGamma()
			a := o.auto
			buf := make([]float64, 0, autoWarmup*3)
			for i := range autoWarmup {
				buf = append(buf, x[i]...)
			}
			pairs := make([]float64, autoWarmup*autoWarmup)
			np := densePairs(pairs, buf, 3, autoWarmup/2, autoWarmup)
			if want := scaleOfPairs(pairs[:np]); !final || s != want {
				t.Fatalf("%s: S %v (final %v), want %v", k.Type, s, final, want)
			}
			wantG := 1 / s
			if k.Type == KernelLaplacian {
				wantG = math.Sqrt(1 / s)
			}
			if math.Abs(g-wantG) > 1e-15*wantG {
				t.Fatalf("%s: gamma %v, want %v", k.Type, g, wantG)
			}
			fp := p
			fp.Kernel.Gamma = g
			f := newOMAM(t, 3, fp)
			f.fm = scaledMap(a.ref, math.Sqrt(1/s), g)
			for i := range autoWarmup {
				f.Observe(x[i], y[i], true)
			}
			for i := autoWarmup; i < len(x); i++ {
				po, pf := o.Observe(x[i], y[i], i%3 != 0), f.Observe(x[i], y[i], i%3 != 0)
				if po != pf {
					t.Fatalf("%s %+v, event %d: auto %+v, fixed %+v", k.Type, extra, i, po, pf)
				}
			}
		}
	}
}

// TestOMAMAutoBadEncodings: a gamma-auto state whose scale or warm-up
// record contradicts its example count is refused.
func TestOMAMAutoBadEncodings(t *testing.T) {
	x, y := omamData(12, 100, 3, 4)
	p := OMAMParams{Kernel: omamAutoK, Levels: 4, Normalize: true}
	for _, n := range []int{0, 5, 80} {
		o, b := trainedOMAM(t, 3, p, x[:n], y[:n])
		tail := len(b) - o.autoSize() // the auto part: S, kept, kept examples
		for name, mut := range map[string]func(c []byte){
			"scale": func(c []byte) {
				v := math.Float64bits(1e300)
				if n == 0 {
					v = math.Float64bits(2)
				}
				for i := range 8 {
					c[tail+i] = byte(v >> (8 * i))
				}
			},
			"kept": func(c []byte) { c[tail+8]++ },
		} {
			c := append([]byte(nil), b...)
			mut(c)
			if _, err := testTypes.Restore(c); err == nil {
				t.Errorf("n %d, %s altered: restored", n, name)
			}
		}
		for cut := len(b) - 1; cut >= len(b)-o.autoSize(); cut-- {
			if _, err := testTypes.Restore(b[:cut]); err == nil {
				t.Fatalf("n %d: truncated to %d of %d bytes: restored", n, cut, len(b))
			}
		}
	}
}
