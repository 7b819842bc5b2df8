package svm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// GridPoint is one (C, gamma) candidate for Select.
type GridPoint struct{ C, Gamma float64 }

// GridScore is a candidate's k-fold cross-validation error.
type GridScore struct {
	GridPoint
	CVError float64 // fraction of misclassified held-out rows over all folds
}

// Selection is Select's answer.
type Selection struct {
	Best GridPoint
	// Scores holds the candidates evaluated on every fold, in evaluation order (by gamma as
	// first listed, then C ascending).
	Scores []GridScore
	// Complete is false when the budget ran out before every candidate was evaluated; Best is
	// then the best of Scores.
	Complete bool
}

// Select picks (C, gamma) from grid by stratified k-fold cross-validation error (ties: the
// earlier evaluated point). p supplies the kernel type and the other parameters; each point
// overrides p.C (CPos, CNeg keep their ratio to C if set) and p.Kernel.Gamma. Candidates
// sharing a gamma are run with C ascending and each fold is warm-started from the previous C's
// α on that fold, scaled by C_new/C_old. Folds are assigned round-robin within each class in row
// order, so the result is deterministic. Select stops at the budget (0 = none) or when ctx
// ends: it returns what was completed, or the context's error when nothing was.
func Select(ctx context.Context, X [][]float64, y []float64, grid []GridPoint, k int, budget time.Duration, p Params) (*Selection, error) {
	if len(grid) == 0 {
		return nil, errors.New("svm: Select needs a non-empty grid")
	}
	if k < 2 || k > len(y) {
		return nil, fmt.Errorf("svm: Select needs 2 ≤ k ≤ %d folds, have %d", len(y), k)
	}
	if len(X) != len(y) {
		return nil, fmt.Errorf("svm: %d rows but %d labels", len(X), len(y))
	}
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	fold := make([]int, len(y))
	var np, nn int
	for i, yi := range y {
		if yi > 0 {
			fold[i] = np % k
			np++
		} else {
			fold[i] = nn % k
			nn++
		}
	}
	type split struct {
		trX, teX [][]float64
		trY, teY []float64
	}
	splits := make([]split, k)
	for i := range y {
		s := &splits[fold[i]]
		s.teX, s.teY = append(s.teX, X[i]), append(s.teY, y[i])
		for f := range splits {
			if f != fold[i] {
				splits[f].trX, splits[f].trY = append(splits[f].trX, X[i]), append(splits[f].trY, y[i])
			}
		}
	}

	// Order: gammas in first-listed order, C ascending within each.
	order := make([]GridPoint, len(grid))
	copy(order, grid)
	gammaRank := map[float64]int{}
	for _, g := range grid {
		if _, ok := gammaRank[g.Gamma]; !ok {
			gammaRank[g.Gamma] = len(gammaRank)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := gammaRank[order[a].Gamma], gammaRank[order[b].Gamma]
		if ra != rb {
			return ra < rb
		}
		return order[a].C < order[b].C
	})

	base := p.withDefaults()
	posRatio, negRatio := base.CPos/base.C, base.CNeg/base.C
	sel := &Selection{Complete: true}
	warm := make([][]float64, k)
	prev := GridPoint{Gamma: -1}
	for _, gp := range order {
		q := base
		q.C, q.CPos, q.CNeg = gp.C, gp.C*posRatio, gp.C*negRatio
		q.Kernel.Gamma = gp.Gamma
		sameGamma := gp.Gamma == prev.Gamma
		wrong := 0
		var err error
		for f := range splits {
			s := &splits[f]
			var w []float64
			if sameGamma && warm[f] != nil {
				w = warm[f]
				for i := range w {
					w[i] *= gp.C / prev.C
				}
			}
			var m *Model
			if m, err = Train(ctx, s.trX, s.trY, q, w); err != nil {
				break
			}
			warm[f] = m.Alpha
			for i, x := range s.teX {
				if m.Predict(x) != s.teY[i] {
					wrong++
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				sel.Complete = false
				break
			}
			return nil, fmt.Errorf("svm: Select at C=%v gamma=%v: %w", gp.C, gp.Gamma, err)
		}
		sc := GridScore{GridPoint: gp, CVError: float64(wrong) / float64(len(y))}
		if len(sel.Scores) == 0 || sc.CVError < bestErr(sel) {
			sel.Best = gp
		}
		sel.Scores = append(sel.Scores, sc)
		prev = gp
	}
	if len(sel.Scores) == 0 {
		return nil, ctx.Err()
	}
	return sel, nil
}

func bestErr(s *Selection) float64 {
	for _, sc := range s.Scores {
		if sc.GridPoint == s.Best {
			return sc.CVError
		}
	}
	return 1
}
