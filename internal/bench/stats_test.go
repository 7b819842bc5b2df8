package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBenchSchedule(t *testing.T) {
	got := Schedule(3, 7)
	want := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}, {0, 1, 2}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Schedule(3, 7) = %v, want %v", got, want)
	}
	for _, k := range []int{1, 2, 3, 4, 5} {
		rows := Schedule(k, 2*k)
		// Every row is a permutation; over 2k rounds each pipeline takes
		// each position exactly twice.
		count := make([][]int, k)
		for i := range count {
			count[i] = make([]int, k)
		}
		for _, row := range rows {
			seen := make([]bool, k)
			for pos, p := range row {
				if seen[p] {
					t.Fatalf("k=%d: row %v repeats %d", k, row, p)
				}
				seen[p] = true
				count[p][pos]++
			}
		}
		for p := range k {
			for pos := range k {
				if count[p][pos] != 2 {
					t.Errorf("k=%d: pipeline %d at position %d %d times over %d rounds, want 2", k, p, pos, count[p][pos], 2*k)
				}
			}
		}
		// Any number of rounds is near-balanced: a pipeline's counts in
		// the positions differ by at most 2.
		for n := 1; n <= 2*k; n++ {
			c := make([][]int, k)
			for i := range c {
				c[i] = make([]int, k)
			}
			for _, row := range Schedule(k, n) {
				for pos, p := range row {
					c[p][pos]++
				}
			}
			for p := range k {
				if lo, hi := slices.Min(c[p]), slices.Max(c[p]); hi-lo > 2 {
					t.Errorf("k=%d n=%d: pipeline %d positions %v", k, n, p, c[p])
				}
			}
		}
	}
	// k = 3 over 6 rounds: every order once.
	seen := map[[3]int]bool{}
	for _, row := range Schedule(3, 6) {
		seen[[3]int(row)] = true
	}
	if len(seen) != 6 {
		t.Errorf("Schedule(3, 6) has %d distinct orders, want 6", len(seen))
	}
}

func TestBenchQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {0.25, 1.75}, {0.5, 2.5}, {0.75, 3.25}, {1, 4}} {
		if got := Quantile(v, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", v, c.p, got, c.want)
		}
	}
	if got := Quantile([]float64{7}, 0.25); got != 7 {
		t.Errorf("Quantile([7], 0.25) = %v", got)
	}
	s := SpreadOf([]float64{5, 1, 3, 2, 4})
	if s != (Spread{N: 5, Median: 3, P25: 2, P75: 4, Min: 1, Max: 5}) {
		t.Errorf("SpreadOf = %+v", s)
	}
}

// round builds a measured round from events/s per pipeline (1 M events).
func round(n int, rates map[string]float64) Round {
	r := Round{Round: n}
	for _, m := range []string{ScoreSnapshot, PassThrough, Score} {
		if v, ok := rates[m]; ok {
			r.Order = append(r.Order, m)
			r.Results = append(r.Results, Result{Mode: m, Round: n, Events: 1_000_000,
				Elapsed: time.Duration(1e6 / v * float64(time.Second))})
		}
	}
	r.ratios()
	return r
}

func TestBenchSummarize(t *testing.T) {
	rounds := []Round{
		round(1, map[string]float64{PassThrough: 100e3, Score: 80e3, ScoreSnapshot: 76e3}),
		round(2, map[string]float64{PassThrough: 200e3, Score: 150e3, ScoreSnapshot: 150e3}),
		round(3, map[string]float64{PassThrough: 110e3, Score: 99e3, ScoreSnapshot: 99e3}),
	}
	s := Summarize(rounds, SpreadWarning)
	if len(s.Pipelines) != 3 || s.Pipelines[0].Pipeline != PassThrough || s.Pipelines[1].Pipeline != Score || s.Pipelines[2].Pipeline != ScoreSnapshot {
		t.Fatalf("pipelines %+v", s.Pipelines)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6*math.Abs(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	pt := s.Pipelines[0]
	near("pass-through median", pt.Median, 110e3)
	near("pass-through p25", pt.P25, 105e3)
	near("pass-through p75", pt.P75, 155e3)
	near("pass-through rel IQR", pt.RelIQR, 50e3/110e3)
	if len(s.Ratios) != 2 || s.Ratios[0].Ratio != "score/passthrough" || s.Ratios[1].Ratio != "score+snapshot/score" {
		t.Fatalf("ratios %+v", s.Ratios)
	}
	// Within-round ratios: 0.8, 0.75, 0.9 → median 0.8, not 99/110 or 80/100 of medians.
	r := s.Ratios[0]
	if len(r.PerRound) != 3 {
		t.Fatalf("per round %v", r.PerRound)
	}
	near("score/passthrough median", r.Median, 0.8)
	near("score/passthrough min", r.Min, 0.75)
	near("score/passthrough max", r.Max, 0.9)
	near("score+snapshot/score median", s.Ratios[1].Median, 1)
	near("score+snapshot/score min", s.Ratios[1].Min, 0.95)
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "passthrough 45%") || !strings.Contains(s.Warnings[0], "other load") ||
		!strings.Contains(s.Warnings[0], "too few events") {
		t.Errorf("warnings %q", s.Warnings)
	}

	// Steady rounds: no warning; without snapshots only one ratio.
	steady := []Round{
		round(1, map[string]float64{PassThrough: 100e3, Score: 80e3}),
		round(2, map[string]float64{PassThrough: 104e3, Score: 82e3}),
		round(3, map[string]float64{PassThrough: 98e3, Score: 81e3}),
	}
	s = Summarize(steady, SpreadWarning)
	if len(s.Warnings) != 0 || len(s.Ratios) != 1 || len(s.Pipelines) != 2 {
		t.Errorf("steady: %+v", s)
	}
	// No rounds: empty, not nil (JSON [] rather than null).
	s = Summarize(nil, SpreadWarning)
	if s.Pipelines == nil || s.Ratios == nil || s.Warnings == nil {
		t.Errorf("empty summary has nil slices: %+v", s)
	}
}
