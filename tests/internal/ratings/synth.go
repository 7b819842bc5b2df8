package ratings

import (
	"math"
	"math/rand/v2"
)

// World is a synthetic rating world: rating(u, i) = Base + b_u + b_i +
// ⟨p_u, q_i⟩ + noise, with biases drawn N(0, BiasSD²), Factors latent factors
// per user and item drawn N(0, σ²) with σ = InteractionSD^½/Factors^¼ (so that
// ⟨p_u, q_i⟩ has standard deviation InteractionSD), and noise N(0, Noise²);
// clipped to a rating scale [Min, Max] when Max > Min.
type World struct {
	Users, Items, Factors int
	Base                  float64 // 3
	BiasSD                float64 // 0.5
	InteractionSD         float64 // 1
	Noise                 float64 // 0.5
	Seed                  uint64
	Min, Max              float64 // the scale's ends (Max ≤ Min: none)
}

// Ratings draws n ratings of uniformly random (user, item) pairs (pairs
// may repeat), real-valued, with Time the rating's index. The same World
// gives the same ratings.
func (w World) Ratings(n int) []Rating {
	rng := rand.New(rand.NewPCG(w.Seed, 0x7261746e))
	sigma := math.Sqrt(w.InteractionSD) / math.Pow(float64(w.Factors), 0.25)
	draw := func(m int) ([]float64, [][]float64) {
		b := make([]float64, m)
		f := make([][]float64, m)
		for j := range m {
			b[j] = rng.NormFloat64() * w.BiasSD
			f[j] = make([]float64, w.Factors)
			for k := range f[j] {
				f[j][k] = rng.NormFloat64() * sigma
			}
		}
		return b, f
	}
	bu, pu := draw(w.Users)
	bi, qi := draw(w.Items)
	out := make([]Rating, n)
	for t := range out {
		u, i := rng.IntN(w.Users), rng.IntN(w.Items)
		y := w.Base + bu[u] + bi[i] + rng.NormFloat64()*w.Noise
		for k := range w.Factors {
			y += pu[u][k] * qi[i][k]
		}
		if w.Max > w.Min {
			y = min(w.Max, max(w.Min, y))
		}
		out[t] = Rating{User: u, Item: i, Value: y, Time: int64(t)}
	}
	return out
}
