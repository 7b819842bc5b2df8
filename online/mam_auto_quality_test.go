package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// aqData is a data set of the gamma-auto quality protocol: rows x, labels
// y and its (train, test) splits: 10 stratified 70/30 splits (exSplit,
// seeds 0..9), or Ripley's given split.
type aqData struct {
	name   string
	x      [][]float64
	y      []float64
	splits [][2][]int
}

// aqLetterPath is the binary UCI letter data (A–M vs N–Z) of tests/svmbench.
const aqLetterPath = "../tests/svmbench/testdata/letter.csv"

// aqLoad reads a data set of the protocol; rows > 0 keeps the first rows
// rows only (letter).
func aqLoad(t testing.TB, name string, rows int) aqData {
	t.Helper()
	var x [][]float64
	var y []float64
	var splits [][2][]int
	switch name {
	case "ripley":
		trX, trY := readCSV(t, "testdata/ripley_train.csv")
		teX, teY := readCSV(t, "testdata/ripley_test.csv")
		x, y = append(trX, teX...), append(trY, teY...)
		var tr, te []int
		for i := range trX {
			tr = append(tr, i)
		}
		for i := range teX {
			te = append(te, len(trX)+i)
		}
		// The files are sorted by class: stream them in a fixed random
		// order (a class-sorted stream defeats any running
		// standardisation).
		for seed := range uint64(10) {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			tr, te := slices.Clone(tr), slices.Clone(te)
			r.Shuffle(len(tr), func(i, j int) { tr[i], tr[j] = tr[j], tr[i] })
			r.Shuffle(len(te), func(i, j int) { te[i], te[j] = te[j], te[i] })
			splits = append(splits, [2][]int{tr, te})
		}
	default:
		path := "testdata/" + name + ".csv"
		if strings.HasSuffix(name, ".csv") {
			path = name // a CSV of features and a last column of ±1 labels
		}
		if name == "letter" {
			path = aqLetterPath
		}
		x, y = readCSV(t, path)
		if rows > 0 && rows < len(x) {
			x, y = x[:rows], y[:rows]
		}
		for seed := range uint64(10) {
			tr, te := exSplit(y, seed)
			splits = append(splits, [2][]int{tr, te})
		}
	}
	return aqData{name: name, x: x, y: y, splits: splits}
}

// aqScale returns S = median‖x − x'‖²/2 over the pairs of the first (at
// most 1000) training rows standardised on the training split: the unit of
// the fixed grid c/S.
func aqScale(x [][]float64, train []int) float64 {
	xs := exStandardize(x, train)
	rows := train[:min(len(train), 1000)]
	var pairs []float64
	for i := range rows {
		for j := range i {
			var s float64
			for k, v := range xs[rows[i]] {
				e := v - xs[rows[j]][k]
				s += e * e
			}
			pairs = append(pairs, s)
		}
	}
	slices.Sort(pairs)
	n := len(pairs)
	return (pairs[(n-1)/2] + pairs[n/2]) / 4
}

// aqParams are the protocol's parameters: balanced, rbf, D = 1024, seed 1,
// gamma given (0 = auto).
func aqParams(gamma float64) MAMParams {
	return MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: gamma, Features: 1024, Seed: 1}, Balance: true, Delta: DefaultDelta}
}

// aqError streams the training rows once into a standardised MAM with
// parameters p, then returns its error on the test rows (no decision
// counts as an error) and the model.
func aqError(t testing.TB, p MAMParams, x [][]float64, y []float64, train, test []int) (float64, *MAM) {
	t.Helper()
	m, err := NewMAM(len(x[0]), p)
	if err != nil {
		t.Fatal(err)
	}
	return exTestError(Standardize(m), x, y, train, test), m
}

// aqParallel runs f(0..n−1) on GOMAXPROCS goroutines.
func aqParallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// aqGrid is the fixed grid's multipliers c = 2^k, k = −4..6.
func aqGrid() []float64 {
	var g []float64
	for k := -4; k <= 6; k++ {
		g = append(g, math.Ldexp(1, k))
	}
	return g
}

// aqResult is a data set's mean holdout errors (in %) over its splits.
type aqResult struct {
	auto     float64
	fixed    []float64 // per aqGrid multiplier
	dflt     float64   // gamma 10 (today's default)
	bestC    float64   // the best fixed multiplier
	best     float64   // its error
	autoPick []int     // per split: the heaviest width at the end
}

// aqEvaluate runs the protocol on d: per split, the gamma-auto MAM, the
// fixed grid c/S (S from the batch-standardised training split) and gamma
// 10, each standardised online (Standardize) and trained by streaming the
// training rows once.
func aqEvaluate(t *testing.T, d aqData) aqResult {
	grid := aqGrid()
	ns := len(d.splits)
	scale := make([]float64, ns)
	aqParallel(ns, func(s int) { scale[s] = aqScale(d.x, d.splits[s][0]) })
	errs := make([][]float64, ns) // [split][grid..., default, auto]
	picks := make([]int, ns)
	for s := range errs {
		errs[s] = make([]float64, len(grid)+2)
	}
	jobs := ns * (len(grid) + 2)
	aqParallel(jobs, func(i int) {
		s, g := i/(len(grid)+2), i%(len(grid)+2)
		tr, te := d.splits[s][0], d.splits[s][1]
		var p MAMParams
		switch {
		case g < len(grid):
			p = aqParams(grid[g] / scale[s])
		case g == len(grid):
			p = aqParams(10)
		default:
			p = aqParams(0)
		}
		var m *MAM
		errs[s][g], m = aqError(t, p, d.x, d.y, tr, te)
		if g == len(grid)+1 {
			picks[s], _ = m.Bandwidths()
		}
	})
	mean := func(g int) float64 {
		var v float64
		for s := range ns {
			v += errs[s][g]
		}
		return 100 * v / float64(ns)
	}
	r := aqResult{auto: mean(len(grid) + 1), dflt: mean(len(grid)), best: math.Inf(1), autoPick: picks}
	for g, c := range grid {
		r.fixed = append(r.fixed, mean(g))
		if r.fixed[g] < r.best {
			r.best, r.bestC = r.fixed[g], c
		}
	}
	return r
}

// aqLetterRows is the number of letter rows to use: all 20 000, or the
// first 4 000 with -short.
func aqLetterRows() int {
	if testing.Short() {
		return 4000
	}
	return 0
}

// TestMAMAutoQuality is "Done when" 1 of gamma auto: with no gamma given
// (auto, 6 widths), the balanced MAM with D = 1024 and running
// standardisation (Standardize) must reach a holdout error within 1 point
// of the best fixed gamma of the grid c/S, c = 2^k, k = −4..6 (S =
// median‖x − x'‖²/2 of the batch-standardised training rows, ≈ d), every
// model evaluated the same way: trained by streaming the training rows
// once, then scored on the test rows (no decision counts as an error).
// Errors are averaged over the protocol's splits: 10 stratified 70/30
// splits (exSplit, seeds 0..9) of breast_cancer, heart_scale and letter
// (tests/svmbench's binary A–M vs N–Z, all 20 000 rows; the first 4 000
// with -short), and Ripley's given split streamed in 10 random orders (its
// files are sorted by class). About 10 s on 2 cores (25 s with the scalar
// feature map), 3 s with -short.
//
// An auto that always used the widest width (c = 1/16) would fail on
// Ripley (12.4% against 9.3%) and letter (32.9% against 19.0%); one that
// always used c = 1 on breast_cancer (7.8% against 5.9%) and letter
// (29.6%).
// The table of the report (auto, best fixed, gamma 10) is logged.
//
// Six more binary sets from R's mlbench (not in the issue, so not tuned
// on) are held to 3 points (measured: 2.26 on Sonar, 2.45 on Ionosphere,
// ≤ 0.75 on the others; docs/math.md, "Gamma auto"): with 140–250 training
// rows the mixture has too few prequential mistakes to concentrate on the
// best width. Their files (online/testdata/mlbench_*.csv: numeric
// columns, rows with a missing value and constant columns dropped, the
// last column ±1) come from
//
//	library(mlbench)
//	w <- function(df, lab, pos, name) {
//	  y <- ifelse(df[[lab]] == pos, 1, -1)
//	  X <- df[, setdiff(names(df), lab), drop = FALSE]
//	  X <- data.frame(lapply(X, function(c) as.numeric(as.character(c))))
//	  ok <- complete.cases(X); X <- X[ok, , drop = FALSE]; y <- y[ok]
//	  X <- X[, sapply(X, function(c) sd(c) > 0), drop = FALSE]
//	  names(X) <- paste0("x", seq_len(ncol(X))); X$label <- y
//	  write.csv(X, paste0("online/testdata/mlbench_", name, ".csv"), row.names = FALSE, quote = FALSE)
//	}
//	data(Sonar); w(Sonar, "Class", "M", "sonar")
//	data(Ionosphere); w(Ionosphere, "Class", "good", "ionosphere")
//	data(PimaIndiansDiabetes); w(PimaIndiansDiabetes, "diabetes", "pos", "pima")
//	data(Vehicle); w(Vehicle, "Class", "van", "vehicle")
//	data(BreastCancer); w(BreastCancer[, -1], "Class", "malignant", "bcw")
//	data(Glass); g <- Glass; g$Type <- ifelse(g$Type %in% c("1", "2", "3"), "win", "no"); w(g, "Type", "win", "glass")
func TestMAMAutoQuality(t *testing.T) {
	sets := []struct {
		name string
		tol  float64 // points above the best fixed width
	}{{"breast_cancer", 1}, {"heart_scale", 1}, {"ripley", 1}, {"letter", 1},
		{"mlbench_sonar", 3}, {"mlbench_ionosphere", 3}, {"mlbench_pima", 3},
		{"mlbench_vehicle", 3}, {"mlbench_bcw", 3}, {"mlbench_glass", 3}}
	t.Log("| data | d | auto | best fixed (c) | gamma 10 | fixed grid c = 1/16 … 64 |")
	t.Log("|---|---|---|---|---|---|")
	for _, set := range sets {
		name := set.name
		t.Run(name, func(t *testing.T) {
			rows := 0
			if name == "letter" {
				rows = aqLetterRows()
			}
			d := aqLoad(t, name, rows)
			r := aqEvaluate(t, d)
			var grid strings.Builder
			for _, e := range r.fixed {
				fmt.Fprintf(&grid, " %.2f", e)
			}
			label := name
			if rows > 0 {
				label = fmt.Sprintf("%s (first %d rows)", name, rows)
			}
			t.Logf("| %s | %d | %.2f | %.2f (%g) | %.2f |%s | widths of largest weight per split: %v",
				label, len(d.x[0]), r.auto, r.best, r.bestC, r.dflt, grid.String(), r.autoPick)
			if r.auto > r.best+set.tol {
				t.Errorf("%s: gamma auto %.2f%% > best fixed gamma (c = %g) %.2f%% + %g", name, r.auto, r.bestC, r.best, set.tol)
			}
		})
	}
}
