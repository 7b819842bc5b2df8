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
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// Load reads dir/ratings.csv in MovieLens' format: a header row, then
// userId,movieId,rating,timestamp (the timestamp is not used).
func Load(dir string) (*Data, error) {
	f, err := os.Open(filepath.Join(dir, "ratings.csv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs, err := readRatings(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return FromRatings(rs), nil
}

// readRatings reads a ratings CSV with a header row.
func readRatings(r io.Reader) ([]Rating, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	if _, err := cr.Read(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var out []Rating
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 3", line, len(rec))
		}
		var x Rating
		var e1, e2, e3 error
		x.User, e1 = strconv.Atoi(rec[0])
		x.Movie, e2 = strconv.Atoi(rec[1])
		x.Value, e3 = strconv.ParseFloat(rec[2], 64)
		if err := errors.Join(e1, e2, e3); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, x)
	}
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
