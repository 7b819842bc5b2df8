package ratings

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// World is a synthetic rating world: rating(u, i) = Base + b_u + b_i +
// ⟨p_u, q_i⟩ + noise, with biases drawn N(0, BiasSD²), Factors latent factors
// per user and item drawn N(0, σ²) with σ = InteractionSD^½/Factors^¼ (so that
// ⟨p_u, q_i⟩ has standard deviation InteractionSD), and noise N(0, Noise²);
// rounded to a multiple of Step when Step > 0 (1: whole stars), and
// clipped to a rating scale [Min, Max] when Max > Min.
type World struct {
	Users, Items, Factors int
	Base                  float64 // 3
	BiasSD                float64 // 0.5
	InteractionSD         float64 // 1
	Noise                 float64 // 0.5
	Seed                  uint64
	Min, Max              float64 // the scale's ends (Max ≤ Min: none)
	// Popularity skews the items drawn: item i (from 0) with probability
	// ∝ 1/(i+1)^Popularity, a few items rated often and many seldom as on
	// a real catalogue; 0: uniform.
	Popularity float64
	Step       float64 // the ratings' granularity (0: real-valued)
}

// ParseWorld reads a world and a number of ratings from a list of
// key=value pairs separated by commas, e.g.
// "users=600,items=3000,ratings=100000,factors=0,noise=0.9,step=1,min=1,max=5".
// Keys: users, items, ratings, factors, base, bias (BiasSD), interaction
// (InteractionSD), noise, seed, min, max, popularity, step; those left out
// take the values of the example above with base 3, bias 0.5,
// interaction 1, seed 1 and popularity 0.
func ParseWorld(spec string) (World, int, error) {
	w := World{Users: 600, Items: 3000, Base: 3, BiasSD: 0.5, InteractionSD: 1, Noise: 0.9, Seed: 1, Min: 1, Max: 5, Step: 1}
	n := 100000
	ints := map[string]*int{"users": &w.Users, "items": &w.Items, "ratings": &n, "factors": &w.Factors}
	floats := map[string]*float64{"base": &w.Base, "bias": &w.BiasSD, "interaction": &w.InteractionSD, "noise": &w.Noise,
		"min": &w.Min, "max": &w.Max, "popularity": &w.Popularity, "step": &w.Step}
	for kv := range strings.SplitSeq(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		var err error
		switch {
		case !ok:
			return w, 0, fmt.Errorf("%q: want key=value", kv)
		case ints[k] != nil:
			*ints[k], err = strconv.Atoi(v)
		case floats[k] != nil:
			*floats[k], err = strconv.ParseFloat(v, 64)
		case k == "seed":
			w.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return w, 0, fmt.Errorf("%q: unknown key (users, items, ratings, factors, base, bias, interaction, noise, seed, min, max, popularity, step)", k)
		}
		if err != nil {
			return w, 0, fmt.Errorf("%s: %w", k, err)
		}
	}
	if w.Users < 1 || w.Items < 1 || n < 1 || w.Factors < 0 || w.Popularity < 0 || w.Step < 0 {
		return w, 0, fmt.Errorf("users, items and ratings must be ≥ 1, factors, popularity and step ≥ 0: %q", spec)
	}
	return w, n, nil
}

// WriteDat writes rs to dir/ratings.dat in the MovieLens 1M layout
// (user::item::rating::time, ids from 1), which the bench reads without a
// movies' file: items known by their ids alone.
func WriteDat(dir string, rs []Rating) error {
	var b bytes.Buffer
	for _, r := range rs {
		fmt.Fprintf(&b, "%d::%d::%s::%d\n", r.User+1, r.Item+1, strconv.FormatFloat(r.Value, 'g', -1, 64), r.Time)
	}
	return os.WriteFile(filepath.Join(dir, "ratings.dat"), b.Bytes(), 0o644)
}

// Ratings draws n ratings of random (user, item) pairs (pairs may repeat;
// users uniform, items uniform or by Popularity), with Time the rating's
// index. The same World gives the same ratings.
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
	var cum []float64 // with Popularity: the items' cumulative weights
	if w.Popularity > 0 {
		cum = make([]float64, w.Items)
		var s float64
		for i := range cum {
			s += math.Pow(float64(i+1), -w.Popularity)
			cum[i] = s
		}
	}
	out := make([]Rating, n)
	for t := range out {
		u, i := rng.IntN(w.Users), 0
		if cum != nil {
			i = min(sort.SearchFloat64s(cum, rng.Float64()*cum[len(cum)-1]), w.Items-1)
		} else {
			i = rng.IntN(w.Items)
		}
		y := w.Base + bu[u] + bi[i] + rng.NormFloat64()*w.Noise
		for k := range w.Factors {
			y += pu[u][k] * qi[i][k]
		}
		if w.Step > 0 {
			y = math.Round(y/w.Step) * w.Step
		}
		if w.Max > w.Min {
			y = min(w.Max, max(w.Min, y))
		}
		out[t] = Rating{User: u, Item: i, Value: y, Time: int64(t)}
	}
	return out
}
