package seed001

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// The experiment's sizes.
const (
	// MaxRefs is the most reference users a trial draws from its group.
	MaxRefs = 300
	// MaxTests is the most test users a trial draws.
	MaxTests = 300
	// TestMin and TestMax bound, inclusive, the number of ratings of a
	// test user.
	TestMin, TestMax = 50, 300
	// Reps is the number of repetitions per group.
	Reps = 10
)

// Group is a reference group: the users with at least Lo and fewer than Hi
// ratings. The paper's "20–40, 40–60, 60–80 movies" are read as these
// half-open intervals, so that no user is in two groups.
type Group struct{ Lo, Hi int }

// Groups are the paper's reference groups.
var Groups = []Group{{20, 40}, {40, 60}, {60, 80}}

// Contains reports whether a user with n ratings is in the group.
func (g Group) Contains(n int) bool { return g.Lo <= n && n < g.Hi }

// String returns "[Lo,Hi)".
func (g Group) String() string { return fmt.Sprintf("[%d,%d)", g.Lo, g.Hi) }

// TestUser is a test user's ratings split in two: the model learns Train
// and is judged on Test.
type TestUser struct {
	User        int
	Train, Test []Rating
}

// Trial is one repetition of the experiment for one reference group.
type Trial struct {
	Group Group
	Rep   int
	// Refs are the reference users, ascending: component j of a movie's
	// input is about Refs[j].
	Refs []int
	// Medians[j] is the median of all of Refs[j]'s ratings.
	Medians []float64
	// Tests are the test users, ascending by user.
	Tests []TestUser
	// rated maps a movie to the reference users' ratings of it, ascending
	// by index in Refs.
	rated map[int][]refRating
}

// refRating is reference user Refs[ref]'s rating of a movie, and that
// rating less the reference user's median.
type refRating struct {
	ref          int
	value, delta float64
}

// Trial draws repetition rep of the experiment for group g:
//
//   - reference users: min(maxRefs, |group|) users drawn without
//     replacement from the users whose rating count g contains (all of
//     them when the group is smaller);
//   - test users: min(maxTests, |pool|) users drawn without replacement
//     from the pool of users with TestMin to TestMax ratings (inclusive)
//     who are not among the trial's reference users, so that no test
//     user's ratings are part of the inputs;
//   - each test user's ratings (sorted by movie) are shuffled; Train is the
//     first ⌊n/2⌋ of them in shuffled order, Test the rest.
//
// The draws come from a math/rand/v2 PCG seeded with (seed,
// Lo<<48 | Hi<<32 | rep), in this order: the reference users, the test
// users, then each test user's shuffle in ascending order of user. The same
// arguments give the same trial.
func (d *Data) Trial(g Group, rep int, seed uint64, maxRefs, maxTests int) *Trial {
	rng := rand.New(rand.NewPCG(seed, uint64(g.Lo)<<48|uint64(g.Hi)<<32|uint64(uint32(rep))))
	var members, pool []int
	for _, u := range d.users {
		if g.Contains(len(d.byUser[u])) {
			members = append(members, u)
		}
	}
	t := &Trial{Group: g, Rep: rep, Refs: sample(rng, members, maxRefs), rated: map[int][]refRating{}}
	for _, u := range d.users {
		if n := len(d.byUser[u]); TestMin <= n && n <= TestMax && !slices.Contains(t.Refs, u) {
			pool = append(pool, u)
		}
	}
	for j, u := range t.Refs {
		own := d.byUser[u]
		vs := make([]float64, len(own))
		for i, r := range own {
			vs[i] = r.Value
		}
		med := Median(vs)
		t.Medians = append(t.Medians, med)
		for _, r := range own {
			t.rated[r.Movie] = append(t.rated[r.Movie], refRating{j, r.Value, r.Value - med})
		}
	}
	for _, u := range sample(rng, pool, maxTests) {
		rs := slices.Clone(d.byUser[u])
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		h := len(rs) / 2
		t.Tests = append(t.Tests, TestUser{User: u, Train: rs[:h:h], Test: rs[h:]})
	}
	return t
}

// sample returns min(k, len(xs)) elements of xs drawn without replacement
// (a partial Fisher–Yates shuffle of their indices), sorted ascending.
func sample(rng *rand.Rand, xs []int, k int) []int {
	k = max(0, min(k, len(xs)))
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	out := make([]int, k)
	for i := range k {
		j := i + rng.IntN(len(idx)-i)
		idx[i], idx[j] = idx[j], idx[i]
		out[i] = xs[idx[i]]
	}
	slices.Sort(out)
	return out
}

// Input returns a movie's input vector, one component per reference user
// in the order of Refs: the rating Refs[j] gave the movie, or Medians[j]
// where Refs[j] did not rate it.
func (t *Trial) Input(movie int) []float64 {
	x := slices.Clone(t.Medians)
	for _, e := range t.rated[movie] {
		x[e.ref] = e.value
	}
	return x
}

// dist2 is ‖Input(a) − Input(b)‖² computed from the movies' sparse
// differences from the medians, in the order of Refs. With ratings in half
// stars the medians are multiples of ¼, the differences are exact and this
// is bit for bit the dense computation.
func (t *Trial) dist2(a, b int) float64 {
	x, y := t.rated[a], t.rated[b]
	s := 0.0
	for len(x) > 0 && len(y) > 0 {
		var d float64
		switch {
		case x[0].ref == y[0].ref:
			d = x[0].delta - y[0].delta
			x, y = x[1:], y[1:]
		case x[0].ref < y[0].ref:
			d = x[0].delta
			x = x[1:]
		default:
			d = y[0].delta
			y = y[1:]
		}
		s += d * d
	}
	for _, e := range x {
		s += e.delta * e.delta
	}
	for _, e := range y {
		s += e.delta * e.delta
	}
	return s
}

// Median returns the median of xs (NaN for none): the middle value of the
// sorted values, or the mean of the two middle values for an even count.
// xs is not modified.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
