// Package banditsim is the simulated world of the ranking tests: users
// with hidden preference vectors and items with features, where user u
// clicks item v shown first with probability σ(uᵀv). The tests of the
// exploration policies, the off-policy estimates, the challenger and the
// replay of a logged stream rank its items and draw its clicks.
package banditsim

import (
	"math"
	"math/rand/v2"
)

// World is the simulator: Users[u] is user u's preference vector, Items[v]
// item v's features.
type World struct {
	Users, Items [][]float64
}

// New returns a world of users and items of dimension dim drawn from
// seed: the items' features standard normal, the users' preferences
// normal with standard deviation 3/√dim (a user's clicks then range from
// rare to near certain).
func New(users, items, dim int, seed uint64) *World {
	rng := rand.New(rand.NewPCG(seed, 1))
	vec := func(scale float64) []float64 {
		v := make([]float64, dim)
		for j := range v {
			v[j] = scale * rng.NormFloat64()
		}
		return v
	}
	w := &World{}
	for range users {
		w.Users = append(w.Users, vec(3/math.Sqrt(float64(dim))))
	}
	for range items {
		w.Items = append(w.Items, vec(1))
	}
	return w
}

// ClickProb is the probability that user u clicks item v shown first.
func (w *World) ClickProb(u, v int) float64 {
	var s float64
	for j, x := range w.Users[u] {
		s += x * w.Items[v][j]
	}
	return 1 / (1 + math.Exp(-s))
}
