package online

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
// record contradicts its example count is refused (warm-up inputs kept
// densely, or by their entries with generated frequencies).
func TestOMAMAutoBadEncodings(t *testing.T) {
	x, y := omamData(12, 100, 3, 4)
	for _, k := range []KernelSpec{omamAutoK, omamAutoS} {
		p := OMAMParams{Kernel: k, Levels: 4, Normalize: true}
		omamAutoBadEncodings(t, p, x, y)
	}
}

func omamAutoBadEncodings(t *testing.T, p OMAMParams, x [][]float64, y []float64) {
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
				t.Errorf("sparse %v, n %d, %s altered: restored", p.Kernel.Sparse, n, name)
			}
		}
		for cut := len(b) - 1; cut >= len(b)-o.autoSize(); cut-- {
			if _, err := testTypes.Restore(b[:cut]); err == nil {
				t.Fatalf("sparse %v, n %d: truncated to %d of %d bytes: restored", p.Kernel.Sparse, n, cut, len(b))
			}
		}
	}
}

// hashedOrdinal draws n hashed ordinal events in 2^bits indices: a user
// (of 30) and an item (of 30), each one categorical feature (its index and
// sign from a hash), and three context features of 24 categories that
// carry nothing. The level 1..5 is the quintile of
// b_u + b_i + M[cluster(u)][cluster(i)] + noise (biases and a 4×4
// interaction of hidden clusters, all standard normal, noise sd 0.5):
// an additive part and one the kernel must find in the user × item pairs.
func hashedOrdinal(seed uint64, n, bits int) []mamSparseEvent {
	rng := rand.New(rand.NewPCG(seed, 99))
	const users, items, clusters, context = 30, 30, 4, 3
	bu, bi := make([]float64, users), make([]float64, items)
	cu, ci := make([]int, users), make([]int, items)
	for k := range users {
		bu[k], cu[k] = rng.NormFloat64(), rng.IntN(clusters)
	}
	for k := range items {
		bi[k], ci[k] = rng.NormFloat64(), rng.IntN(clusters)
	}
	var inter [clusters][clusters]float64
	for a := range inter {
		for b := range inter[a] {
			inter[a][b] = rng.NormFloat64()
		}
	}
	feature := func(e *mamSparseEvent, field, value int) {
		h := fmix64(uint64(field)<<32 | uint64(value) + seed)
		e.idx = append(e.idx, int32(h&(1<<bits-1)))
		e.val = append(e.val, float64(1-2*int(h>>63)))
	}
	evs := make([]mamSparseEvent, n)
	f := make([]float64, n)
	for k := range evs {
		u, i := rng.IntN(users), rng.IntN(items)
		f[k] = 0.5*bu[u] + 0.5*bi[i] + inter[cu[u]][ci[i]] + 0.5*rng.NormFloat64()
		e := &evs[k]
		feature(e, 0, u)
		feature(e, 1, i)
		for c := range context {
			feature(e, 2+c, rng.IntN(24))
		}
		e.labelled = true
	}
	q := slices.Clone(f)
	slices.Sort(q)
	for k := range evs {
		evs[k].y = 1
		for l := 1; l < 5; l++ {
			if f[k] > q[l*n/5] {
				evs[k].y++
			}
		}
	}
	return evs
}

// hashedOrdinalTau streams tr once into an omam with parameters p
// (ObserveSparse) and returns Kendall's τ-b of its scores of te against
// their levels, and the width gamma auto settled on (0 for a fixed
// gamma). It runs on aqParallel's goroutines: no t.Fatal.
func hashedOrdinalTau(p OMAMParams, d int, tr, te []mamSparseEvent) (tau, scale float64, err error) {
	o, err := NewOMAM(d, p)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range tr {
		o.ObserveSparse(e.idx, e.val, e.y, true)
	}
	s, y := make([]float64, len(te)), make([]float64, len(te))
	for k, e := range te {
		s[k], y[k] = o.ObserveSparse(e.idx, e.val, 0, false).Score, e.y
	}
	_, scale, _ = o.AutoGamma()
	return KendallTauB(s, y), scale, nil
}

// TestOMAMSparseAutoQuality: on hashed ordinal events (hashedOrdinal,
// 2^16 indices, 3 000 to learn from and 1 000 to rank, 5 draws) the
// normalised rbf omam with generated frequencies (D = 1024) and gamma auto
// ranks (Kendall τ-b) within 0.03 of the best fixed width c/S on the grid
// c = 2^k, k = −4..6 (S from all pairs of the first 400 training events),
// and far above gamma 10, the default of hashed omam before auto.
// Measured: auto 0.408 (S = 5 on every draw: two events mostly share
// none of their five ±1 features, squared distance 2·5), best fixed 0.417
// (c = 1/2; c = 1/16 … 1/2: 0.412–0.417, c = 1: 0.408, c = 2: 0.325,
// c ≥ 4: ≤ 0.05, where the random features' error swamps the peaked
// kernel's small values), gamma 10 0.013.
func TestOMAMSparseAutoQuality(t *testing.T) {
	const bits, n, nTrain, scaleRows = 16, 4000, 3000, 400
	d := 1 << bits
	draws := 5
	if testing.Short() {
		draws = 2
	}
	grid := aqGrid()
	cols := len(grid) + 2 // the grid, gamma 10, auto
	tau := make([][]float64, cols)
	for c := range tau {
		tau[c] = make([]float64, draws)
	}
	scales := make([]float64, draws)
	aqParallel(draws*cols, func(job int) {
		seed, c := uint64(job/cols), job%cols
		evs := hashedOrdinal(seed, n, bits)
		tr, te := evs[:nTrain], evs[nTrain:]
		p := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Features: 1024, Seed: seed + 1, Sparse: true}, Levels: 5, Normalize: true}
		switch {
		case c < len(grid):
			w := newSparseWarm()
			for k, e := range tr[:scaleRows] {
				w.pi, w.pv = slices.Clone(e.idx), slices.Clone(e.val)
				sortEntries(w.pi, w.pv)
				w.keep(k, nil)
			}
			pairs := make([]float64, scaleRows*(scaleRows-1)/2)
			p.Kernel.Gamma = grid[c] / scaleOfPairs(pairs[:w.pairs(pairs, 0, scaleRows)])
		case c == len(grid):
			p.Kernel.Gamma = 10
		}
		tc, scale, err := hashedOrdinalTau(p, d, tr, te)
		if err != nil {
			t.Error(err)
		}
		tau[c][seed] = tc
		if c == cols-1 {
			scales[seed] = scale
		}
	})
	if t.Failed() {
		return
	}
	mean := func(v []float64) float64 { m, _ := omamMeanSD(v); return m }
	auto, g10 := mean(tau[cols-1]), mean(tau[len(grid)])
	best, bestC := math.Inf(-1), 0.0
	var line strings.Builder
	for c, mult := range grid {
		m := mean(tau[c])
		fmt.Fprintf(&line, " %g:%.3f", mult, m)
		if m > best {
			best, bestC = m, mult
		}
	}
	t.Logf("hashed ordinal, τ-b over %d draws: auto %.3f (S %v), best fixed %.3f (c = %g), gamma 10 %.3f; fixed c:%s",
		draws, auto, scales, best, bestC, g10, line.String())
	if auto < best-0.03 {
		t.Errorf("auto τ-b %.3f, want within 0.03 of the best fixed width's %.3f", auto, best)
	}
	if g10 > auto-0.3 {
		t.Errorf("gamma 10 τ-b %.3f is not far below auto's %.3f: the data no longer tests the width", g10, auto)
	}
}

// TestOMAMAutoDefaultHashed: with hashed features (SetHashed, then
// Complete) an omam with rbf or laplacian random features and no gamma
// gets gamma auto with generated frequencies, which validates at 2^20
// indices (its warm-up keeps entries, not 64 dense rows); a given gamma
// stays; the exact kernel mode refuses auto naming kernel.gamma.
func TestOMAMAutoDefaultHashed(t *testing.T) {
	const dim = 1 << 20
	none := func(string) bool { return false }
	for _, typ := range []string{KernelRBF, KernelLaplacian} {
		p := DefaultOMAMParams()
		p.Levels, p.Kernel.Type = 5, typ
		p.SetHashed()
		p.Complete(dim, none)
		if !p.Kernel.Sparse || !p.autoGamma() {
			t.Fatalf("%s: kernel %+v, want gamma auto with kernel.sparse", typ, p.Kernel)
		}
		if err := p.Validate(dim); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		g := p
		g.Kernel.Gamma = 0.5
		g.Complete(dim, func(k string) bool { return k == "kernel.gamma" })
		if g.Kernel.Gamma != 0.5 {
			t.Fatalf("%s: a given gamma became %v", typ, g.Kernel.Gamma)
		}
	}
	exact := OMAMParams{Kernel: KernelSpec{Type: KernelRBF}, Levels: 3, Budget: 10}
	var se *SpecError
	if err := exact.Validate(16); !errors.As(err, &se) || se.Field != "kernel.gamma" || !strings.Contains(err.Error(), "exact kernel mode") {
		t.Fatalf("auto with budget: %v", err)
	}
}
