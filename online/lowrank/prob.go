package lowrank

import (
	"context"
	"fmt"
)

// ProbModel estimates p(X) = P(y = +1 | X) from H − 1 weighted low-rank
// classifiers (seed 002 §2.2; the scheme of svm.ProbModel).
type ProbModel struct {
	H int
	// Models[h−1] is fitted with π_h = h/H, h = 1..H−1: box
	// C_i = 2(1 − π_h)·C for y_i = +1 and 2π_h·C for y_i = −1, so π = ½ is
	// the unweighted classifier.
	Models []*Model
}

// TrainProbability fits the weighted classifiers at π_h = h/H, h = 1..H−1
// (H ≥ 2). base is the unweighted fit on the same data (π = ½): every
// weighted fit starts from its V and from its α rescaled to the new boxes
// (α_i·C_i^new/C_i^old = α_i·w_i), which is close to the weighted optimum
// for π near ½ and ties all H − 1 fits to the same stationary point
// neighbourhood instead of letting each find its own.
func TrainProbability(ctx context.Context, X [][]float64, y []float64, p Params, H int, base *Model) (*ProbModel, error) {
	if H < 2 {
		return nil, fmt.Errorf("lowrank: TrainProbability needs H ≥ 2, have %d", H)
	}
	if base == nil || base.Rows != p.Rows || base.Cols != p.Cols || base.Rank != p.Rank {
		return nil, fmt.Errorf("lowrank: TrainProbability needs the unweighted fit of the same shape and rank")
	}
	pm := &ProbModel{H: H, Models: make([]*Model, 0, H-1)}
	w := make([]float64, len(y))
	for h := 1; h < H; h++ {
		pi := float64(h) / float64(H)
		for i, yi := range y {
			if yi > 0 {
				w[i] = 2 * (1 - pi)
			} else {
				w[i] = 2 * pi
			}
		}
		start := &Start{V: base.V}
		if len(base.AlphaU) == len(y) && len(base.AlphaV) == len(y) {
			start.AlphaU, start.AlphaV = scaled(base.AlphaU, w), scaled(base.AlphaV, w)
		}
		m, err := TrainWeighted(ctx, X, y, w, p, start)
		if err != nil {
			return nil, fmt.Errorf("lowrank: weighted fit π = %v: %w", pi, err)
		}
		m.AlphaU, m.AlphaV, m.History = nil, nil, nil // not needed: keep the fit small
		pm.Models = append(pm.Models, m)
	}
	return pm, nil
}

func scaled(a, w []float64) []float64 {
	out := make([]float64, len(a))
	for i, v := range a {
		out[i] = v * w[i]
	}
	return out
}

// Prob returns p̂(X) = (k + ½)/H with k = #{h : f_{π_h}(X) > 0}, as
// svm.ProbModel.Prob. It does not allocate.
func (pm *ProbModel) Prob(x []float64) float64 {
	k := 0
	for _, m := range pm.Models {
		if m.Decision(x) > 0 {
			k++
		}
	}
	return (float64(k) + 0.5) / float64(pm.H)
}
