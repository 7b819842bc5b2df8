// Package seed001 reproduces, as a batch computation, the recommendation
// experiment of seed 001 (§IV-C, Table III): LSRRank and MLSRRank, kernel
// least-squares ranking models, learn one test user's ratings of movies
// described by the ratings a set of reference users gave them, and are
// judged on the user's held-out ratings by the mean squared and mean
// absolute error over all pairs of rating differences (MSD, M1D).
//
// A Trial is one repetition for one reference group: the reference users,
// the test users and each test user's train/test split, all drawn from a
// seed. Trial.Evaluate fits a model per test user and measures it;
// Trial.Select evaluates a whole grid of parameters (LSRRankGrid,
// MLSRRankGrid) and picks the best. The same trials and the exported
// pieces (Median, Trial.Input, Fit, Measure, TestUser.Measure) let a
// streaming service's predictions be compared with the batch solution user
// by user.
package seed001

import (
	"cmp"
	"slices"

	"github.com/streamer/streamer/tests/internal/ratings"
)

// Rating is one user's rating of one movie (MovieLens: 0.5 to 5 in half
// stars).
type Rating struct {
	User, Movie int
	Value       float64
}

// Data holds ratings by user: each user's ratings sorted by movie, one per
// movie.
type Data struct {
	users  []int
	byUser map[int][]Rating
}

// Load reads the ratings of a MovieLens set in dir, in any of GroupLens'
// layouts (ratings.ReadMovieLensRatings; dir is a flag of the command: the
// data is never in the repository); the time column is not used here.
func Load(dir string) (*Data, error) {
	all, err := ratings.ReadMovieLensRatings(dir)
	if err != nil {
		return nil, err
	}
	rs := make([]Rating, len(all))
	for i, r := range all {
		rs[i] = Rating{User: r.User, Movie: r.Item, Value: r.Value}
	}
	return FromRatings(rs), nil
}

// FromRatings groups rs by user. Where a user rated a movie more than once,
// the last of those ratings in rs is kept. rs is not modified.
func FromRatings(rs []Rating) *Data {
	d := &Data{byUser: map[int][]Rating{}}
	for _, r := range rs {
		d.byUser[r.User] = append(d.byUser[r.User], r)
	}
	for u, own := range d.byUser {
		// Stable by movie, so the last of a movie's ratings ends its run.
		slices.SortStableFunc(own, func(a, b Rating) int { return cmp.Compare(a.Movie, b.Movie) })
		kept := own[:0]
		for i, r := range own {
			if i+1 < len(own) && own[i+1].Movie == r.Movie {
				continue
			}
			kept = append(kept, r)
		}
		d.byUser[u] = kept
		d.users = append(d.users, u)
	}
	slices.Sort(d.users)
	return d
}

// Users returns the users in ascending order. The slice is the Data's own:
// do not modify it.
func (d *Data) Users() []int { return d.users }

// Ratings returns the user's ratings sorted by movie (nil for an unknown
// user). The slice is the Data's own: do not modify it.
func (d *Data) Ratings(user int) []Rating { return d.byUser[user] }
