package online

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// The experiment that chose the scoring rule of gamma auto (run with
// AUTO_EXPERIMENT=1, optionally AUTO_SETS=ripley,letter, AUTO_LETTER_ROWS=n;
// a set is a name in testdata or the path of a CSV ending in .csv): it records every width's prequential outcomes and
// test scores and replays selection rules and mixtures offline.

// aqRecord is what an auto run exposes for offline rules: per training
// event (post warm-up semantics) each bank's prequential correctness, and
// per test row each bank's score.
type aqRecord struct {
	correct [][]bool    // [event][bank]
	scores  [][]float64 // [test row][bank]
	prior   int
	margin  []float64 // per bank: M̂_b at the end of training
	testY   []float64
	actual  float64 // the model's own test error
}

func aqRecordAuto(t testing.TB, d aqData, train, test []int) aqRecord {
	m, err := NewMAM(len(d.x[0]), aqParams(0))
	if err != nil {
		t.Fatal(err)
	}
	s := Standardize(m)
	a := m.auto
	var rec aqRecord
	for b, c := range a.c { // the selection rule's start: the width nearest c = 1
		if math.Abs(math.Log2(c)) < math.Abs(math.Log2(a.c[rec.prior])) {
			rec.prior = b
		}
	}
	for _, i := range train {
		s.Observe(d.x[i], d.y[i], true)
		switch {
		case a.total == autoWarmup:
			for slot := range autoWarmup {
				row := make([]bool, len(a.banks))
				for b := range a.banks {
					row[b] = a.bits[b*a.words+slot/64]&(1<<(slot%64)) == 0
				}
				rec.correct = append(rec.correct, row)
			}
		case a.total > autoWarmup:
			row := make([]bool, len(a.banks))
			for b := range a.banks {
				row[b] = a.f[b]*d.y[i] > 0
			}
			rec.correct = append(rec.correct, row)
		}
	}
	for _, bk := range a.banks {
		rec.margin = append(rec.margin, bk.margin)
	}
	dim := len(d.x[0])
	mean, inv := make([]float64, dim), make([]float64, dim)
	z := make([]float64, dim)
	prep := make([]float64, a.nd+1)
	wrong := 0
	for _, i := range test {
		s.Transform(mean, inv)
		for j := range z {
			z[j] = (d.x[i][j] - mean[j]) * inv[j]
		}
		a.prepare(m, prep, z)
		a.mapAll(prep[:a.nd])
		rec.scores = append(rec.scores, slices.Clone(a.f))
		rec.testY = append(rec.testY, d.y[i])
		if p := s.Observe(d.x[i], 0, false); float64(p.Label) != d.y[i] {
			wrong++
		}
	}
	rec.actual = float64(wrong) / float64(len(test))
	return rec
}

// selectRule replays the selection rule with window w over the records and
// returns the final choice.
func (r aqRecord) selectRule(w int, tieCum bool) int {
	nb := len(r.correct[0])
	nerr, cum := make([]int, nb), make([]int, nb)
	chosen := r.prior
	for t, row := range r.correct {
		for b, ok := range row {
			if t >= w && !r.correct[t-w][b] {
				nerr[b]--
			}
			if !ok {
				nerr[b]++
				cum[b]++
			}
		}
		best := chosen
		for b := range nb {
			if nerr[b] < nerr[best] || (tieCum && nerr[b] == nerr[best] && cum[b] < cum[best]) {
				best = b
			}
		}
		chosen = best
	}
	return chosen
}

// selectGrow is selectRule with the window the last 1/div of the events,
// at most wmax, at least 16, ties broken by the cumulative count.
func (r aqRecord) selectGrow(wmax, div int) int {
	nb := len(r.correct[0])
	cum := make([]int, nb)
	nerr := make([]int, nb)
	chosen := r.prior
	for t, row := range r.correct {
		for b, ok := range row {
			if !ok {
				cum[b]++
			}
		}
		w := min(wmax, max(16, (t+1+div-1)/div))
		for b := range nb {
			nerr[b] = 0
			for u := max(0, t+1-w); u <= t; u++ {
				if !r.correct[u][b] {
					nerr[b]++
				}
			}
		}
		best := chosen
		for b := range nb {
			if nerr[b] < nerr[best] || (nerr[b] == nerr[best] && cum[b] < cum[best]) {
				best = b
			}
		}
		chosen = best
	}
	return chosen
}

// selectPenalty is selectRule (cum tie-break) on nerr_b + λ·|log4 c_b|.
func (r aqRecord) selectPenalty(w int, lam float64) int {
	nb := len(r.correct[0])
	nerr, cum := make([]int, nb), make([]int, nb)
	chosen := r.prior
	pen := func(b int) float64 { return lam * math.Abs(float64(b-r.prior)) * 10 / 2 / float64(nb-1) }
	for t, row := range r.correct {
		for b, ok := range row {
			if t >= w && !r.correct[t-w][b] {
				nerr[b]--
			}
			if !ok {
				nerr[b]++
				cum[b]++
			}
		}
		best := chosen
		for b := range nb {
			vb, vc := float64(nerr[b])+pen(b), float64(nerr[best])+pen(best)
			if vb < vc || (vb == vc && cum[b] < cum[best]) {
				best = b
			}
		}
		chosen = best
	}
	return chosen
}

func (r aqRecord) bankError(b int) float64 {
	wrong := 0
	for i, s := range r.scores {
		if !(s[b]*r.testY[i] > 0) {
			wrong++
		}
	}
	return float64(wrong) / float64(len(r.scores))
}

// mixNormError is mixError with each score divided by its width's M̂
// (widths with M̂ ≤ 0 left out).
func (r aqRecord) mixNormError(w int, eta float64) float64 {
	nb := len(r.correct[0])
	nerr := make([]int, nb)
	n := len(r.correct)
	for t := max(0, n-w); t < n; t++ {
		for b, ok := range r.correct[t] {
			if !ok {
				nerr[b]++
			}
		}
	}
	lo := slices.Min(nerr)
	pi := make([]float64, nb)
	for b := range pi {
		if r.margin[b] > 0 {
			pi[b] = math.Exp(-eta*float64(nerr[b]-lo)) / r.margin[b]
		}
	}
	wrong := 0
	for i, s := range r.scores {
		var f float64
		for b := range s {
			f += pi[b] * s[b]
		}
		if !(f*r.testY[i] > 0) {
			wrong++
		}
	}
	return float64(wrong) / float64(len(r.scores))
}

// mixError is the test error of Σ π_b f_b, π_b ∝ exp(−η·(mistakes of b in
// the last w events)).
func (r aqRecord) mixError(w int, eta float64) float64 {
	nb := len(r.correct[0])
	nerr := make([]int, nb)
	n := len(r.correct)
	for t := max(0, n-w); t < n; t++ {
		for b, ok := range r.correct[t] {
			if !ok {
				nerr[b]++
			}
		}
	}
	lo := slices.Min(nerr)
	pi := make([]float64, nb)
	for b := range pi {
		pi[b] = math.Exp(-eta * float64(nerr[b]-lo))
	}
	wrong := 0
	for i, s := range r.scores {
		var f float64
		for b := range s {
			f += pi[b] * s[b]
		}
		if !(f*r.testY[i] > 0) {
			wrong++
		}
	}
	return float64(wrong) / float64(len(r.scores))
}

func TestAutoExperiment(t *testing.T) {
	if os.Getenv("AUTO_EXPERIMENT") == "" {
		t.Skip("AUTO_EXPERIMENT not set")
	}
	rows := 0
	fmt.Sscan(os.Getenv("AUTO_LETTER_ROWS"), &rows)
	names := strings.Split(os.Getenv("AUTO_SETS"), ",")
	if names[0] == "" {
		names = []string{"breast_cancer", "heart_scale", "ripley", "letter"}
	}
	windows := []int{32, 64, 128, 256, 512, 1 << 30}
	etas := []float64{0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7, 1}
	grid := aqGrid()
	for _, name := range names {
		d := aqLoad(t, name, rows)
		ns := len(d.splits)
		fixed := make([][]float64, ns) // [split][grid] plus default at the end
		recs := make([]aqRecord, ns)
		type job struct{ split, g int } // g = len(grid): default, len+1: auto
		var jobs []job
		for s := range ns {
			fixed[s] = make([]float64, len(grid)+1)
			for g := range len(grid) + 2 {
				jobs = append(jobs, job{s, g})
			}
		}
		aqParallel(len(jobs), func(i int) {
			j := jobs[i]
			tr, te := d.splits[j.split][0], d.splits[j.split][1]
			switch {
			case j.g < len(grid):
				S := aqScale(d.x, tr)
				fixed[j.split][j.g], _ = aqError(t, aqParams(grid[j.g]/S), d.x, d.y, tr, te)
			case j.g == len(grid):
				fixed[j.split][j.g], _ = aqError(t, aqParams(10), d.x, d.y, tr, te)
			default:
				recs[j.split] = aqRecordAuto(t, d, tr, te)
			}
		})
		mean := func(f func(s int) float64) float64 {
			var v float64
			for s := range ns {
				v += f(s)
			}
			return 100 * v / float64(ns)
		}
		var line strings.Builder
		best := math.Inf(1)
		for g, c := range grid {
			e := mean(func(s int) float64 { return fixed[s][g] })
			best = min(best, e)
			fmt.Fprintf(&line, " c=%g:%.2f", c, e)
		}
		t.Logf("%s (N=%d): fixed%s | default gamma 10: %.2f | best fixed %.2f", name, autoWarmup, line.String(),
			mean(func(s int) float64 { return fixed[s][len(grid)] }), best)
		line.Reset()
		for b := range len(recs[0].scores[0]) {
			fmt.Fprintf(&line, " %.2f", mean(func(s int) float64 { return recs[s].bankError(b) }))
		}
		t.Logf("%s: auto banks%s | auto actual %.2f", name, line.String(), mean(func(s int) float64 { return recs[s].actual }))
		line.Reset()
		for _, w := range windows {
			for _, tc := range []bool{true, false} {
				fmt.Fprintf(&line, " W=%d/cum=%v:%.2f", w, tc, mean(func(s int) float64 { return recs[s].bankError(recs[s].selectRule(w, tc)) }))
			}
		}
		t.Logf("%s: select%s", name, line.String())
		line.Reset()
		for _, w := range []int{128, 256, 512} {
			for _, eta := range etas {
				fmt.Fprintf(&line, " W=%d/η=%g:%.2f", w, eta, mean(func(s int) float64 { return recs[s].mixError(w, eta) }))
			}
		}
		t.Logf("%s: mixture%s", name, line.String())
		line.Reset()
		for _, w := range []int{128, 256, 512} {
			for _, eta := range etas {
				fmt.Fprintf(&line, " W=%d/η=%g:%.2f", w, eta, mean(func(s int) float64 { return recs[s].mixNormError(w, eta) }))
			}
		}
		t.Logf("%s: normalised mixture%s", name, line.String())
		line.Reset()
		for _, w := range []int{48, 64, 96, 128, 160, 192, 256} { // Hedge's own rate for each W
			eta := math.Sqrt(8 * math.Log(float64(len(recs[0].margin))) / float64(w))
			fmt.Fprintf(&line, " W=%d:%.2f", w, mean(func(s int) float64 { return recs[s].mixNormError(w, eta) }))
		}
		t.Logf("%s: normalised mixture at Hedge's rate sqrt(8 ln B / W)%s", name, line.String())
		for s := range min(ns, 3) {
			r := recs[s]
			n := len(r.correct)
			var pl strings.Builder
			for _, frac := range []int{1, 2, 4} {
				fmt.Fprintf(&pl, " last %d:", n/frac)
				for b := range len(r.correct[0]) {
					e := 0
					for t := n - n/frac; t < n; t++ {
						if !r.correct[t][b] {
							e++
						}
					}
					fmt.Fprintf(&pl, " %d", e)
				}
			}
			t.Logf("%s split %d: prequential mistakes%s", name, s, pl.String())
		}
		line.Reset()
		for _, wmax := range []int{128, 256, 512, 1024, 1 << 30} {
			for _, div := range []int{1, 2, 3, 4} {
				fmt.Fprintf(&line, " max=%d/frac=1/%d:%.2f", wmax, div, mean(func(s int) float64 { return recs[s].bankError(recs[s].selectGrow(wmax, div)) }))
			}
		}
		t.Logf("%s: select growing%s", name, line.String())
		line.Reset()
		for _, w := range []int{256, 1 << 30} {
			for _, lam := range []float64{0, 0.5, 1, 2, 3} {
				fmt.Fprintf(&line, " W=%d/λ=%g:%.2f", w, lam, mean(func(s int) float64 { return recs[s].bankError(recs[s].selectPenalty(w, lam)) }))
			}
		}
		t.Logf("%s: select penalised%s", name, line.String())
		var picks strings.Builder
		for s := range ns {
			fmt.Fprintf(&picks, " %d", recs[s].selectRule(autoSelectWindow, true))
		}
		t.Logf("%s: picks (W=%d)%s", name, autoSelectWindow, picks.String())
	}
}
