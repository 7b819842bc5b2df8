package svm

import (
	"context"
	"fmt"

	"github.com/streamer/streamer/online/internal/sparse"
)

// ProbModel estimates p(x) = P(y = +1 | x) from H − 1 weighted SVMs (docs/math.md §7, seed 002 §2.2).
type ProbModel struct {
	H int
	// Models[h−1] is the SVM fitted with π_h = h/H, h = 1..H−1: box C_i = 2(1 − π_h)·C₊ for
	// y_i = +1 and 2π_h·C₋ for y_i = −1, so π = ½ is the unweighted SVM.
	Models []*Model
}

// TrainProbability fits the weighted SVMs of scheme S.1–S.3 for π_h = h/H, h = 1..H−1
// (H ≥ 2). The weighted hinge loss ω_π(y) = 1 − π (y = +1), π (y = −1) enters as per-example
// boxes C_i = 2ω_π(y_i)·C_{y_i}; f_π estimates sign(p(x) − π). Each fit is warm-started from the
// previous π's α, rescaled to the new box (α_i·C_i^new/C_i^old) and made feasible by
// ProjectFeasible.
func TrainProbability(ctx context.Context, X [][]float64, y []float64, p Params, H int) (*ProbModel, error) {
	return trainProbability(y, H, func(w, warm []float64) (*Model, error) {
		return TrainWeighted(ctx, X, y, w, p, warm)
	})
}

// TrainProbabilitySparse is TrainProbability on sparse rows of dimension
// dim (see TrainSparse).
func TrainProbabilitySparse(ctx context.Context, X []sparse.Row, dim int, y []float64, p Params, H int) (*ProbModel, error) {
	return trainProbability(y, H, func(w, warm []float64) (*Model, error) {
		return TrainWeightedSparse(ctx, X, dim, y, w, p, warm)
	})
}

func trainProbability(y []float64, H int, train func(w, warm []float64) (*Model, error)) (*ProbModel, error) {
	if H < 2 {
		return nil, fmt.Errorf("svm: TrainProbability needs H ≥ 2, have %d", H)
	}
	pm := &ProbModel{H: H, Models: make([]*Model, 0, H-1)}
	w := make([]float64, len(y))
	var warm []float64
	prevPi := 0.0
	for h := 1; h < H; h++ {
		pi := float64(h) / float64(H)
		for i, yi := range y {
			if yi > 0 {
				w[i] = 2 * (1 - pi)
			} else {
				w[i] = 2 * pi
			}
		}
		if warm != nil {
			// α_i·C_i^new/C_i^old: the weight ratio, since the class factor is unchanged.
			for i, yi := range y {
				if yi > 0 {
					warm[i] *= (1 - pi) / (1 - prevPi)
				} else {
					warm[i] *= pi / prevPi
				}
			}
		}
		m, err := train(w, warm)
		if err != nil {
			return nil, fmt.Errorf("svm: weighted fit π = %v: %w", pi, err)
		}
		pm.Models = append(pm.Models, m)
		warm = append(warm[:0], m.Alpha...)
		prevPi = pi
	}
	return pm, nil
}

// Prob returns p̂(x) ∈ (0, 1). With k = #{h : f_{π_h}(x) > 0}, p̂ = (k + ½)/H: the midpoint of
// [k/H, (k+1)/H), the interval scheme S.4 assigns when the signs flip once, between π_k and
// π_{k+1} (S.4 itself reports the lower end k/H). Counting instead of locating the flip makes
// p̂ monotone in every f_π by construction and fixes crossings: if the fitted level sets cross
// (f_π(x) > 0 for some π above one where f_π(x) ≤ 0), the count is what sorting the signs into
// a single flip would give. It does not allocate.
func (pm *ProbModel) Prob(x []float64) float64 {
	k := 0
	for _, m := range pm.Models {
		if m.Decision(x) > 0 {
			k++
		}
	}
	return (float64(k) + 0.5) / float64(pm.H)
}

// ProbSparse is Prob for a sparse x (see Model.DecisionSparse for buf).
func (pm *ProbModel) ProbSparse(x sparse.Row, buf []float64) float64 {
	k := 0
	for _, m := range pm.Models {
		if m.DecisionSparse(x, buf) > 0 {
			k++
		}
	}
	return (float64(k) + 0.5) / float64(pm.H)
}
