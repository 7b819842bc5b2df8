// Package ratings holds what a replay of ratings through the service needs
// besides Kafka: MovieLens-format files or a seeded synthetic world, the
// wire events and ranking requests built from them, the baselines a
// practitioner tries first (a running mean; a running mean with user and
// item biases learned by SGD; item means for ranking), RMSE, classifier
// measures, NDCG and mean intervals. tests/ratingsbench and the end-to-end
// tests in tests/ drive the service with it.
//
// It knows no model type by name: what a model publishes (a rating
// prediction, an ordinal model's expected rating, a class) is read from its
// score records (Collector).
package ratings

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Rating is one rating of an item by a user at a time.
type Rating struct {
	User, Item int
	Value      float64
	Time       int64
}

// Genres maps an item to its genres (none: absent or empty).
type Genres map[int][]string

// NoGenres is MovieLens' "(no genres listed)".
const NoGenres = "(no genres listed)"

// ReadRatings reads a ratings CSV: a header row (skipped), then per row a
// user id, an item id, a rating and a Unix time.
func ReadRatings(r io.Reader) ([]Rating, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	if _, err := cr.Read(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var out []Rating
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		x, err := parseRating(rec)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", len(out)+2, err)
		}
		out = append(out, x)
	}
}

// ReadMovies reads a movies CSV: a header row (skipped), then per row an
// item id, a title and its genres joined by '|' (NoGenres is none).
func ReadMovies(r io.Reader) (Genres, error) {
	cr := csv.NewReader(r)
	if _, err := cr.Read(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	out := Genres{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("line %d: %d fields, want 3", line, len(rec))
		}
		id, err := strconv.Atoi(rec[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out[id] = splitGenres(rec[2])
	}
}

// SortByTime sorts rs by (time, user, item): the replay's order.
func SortByTime(rs []Rating) {
	slices.SortStableFunc(rs, func(a, b Rating) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.User, b.User), cmp.Compare(a.Item, b.Item))
	})
}

// AppendKey appends the message key of r's event: the user id.
func AppendKey(dst []byte, r Rating) []byte { return strconv.AppendInt(dst, int64(r.User), 10) }

// AppendEvent appends the wire event of rating r with id "<id>":
//
//	{"id":"7","features":{"user":{"id":"<user>"},"item":{"id":"<item>","genres":[…]}},"label":<rating>}
//
// "genres" is left out when the item has none.
func AppendEvent(dst []byte, id int, r Rating, g Genres) []byte {
	dst = append(dst, `{"id":"`...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, `","features":{"user":{"id":"`...)
	dst = strconv.AppendInt(dst, int64(r.User), 10)
	dst = append(dst, `"},"item":`...)
	dst = appendItem(dst, r.Item, g)
	dst = append(dst, `},"label":`...)
	dst = strconv.AppendFloat(dst, r.Value, 'g', -1, 64)
	return append(dst, '}')
}

// appendItem appends the item namespace {"id":"<item>","genres":[…]}.
func appendItem(dst []byte, item int, g Genres) []byte {
	dst = append(dst, `{"id":"`...)
	dst = strconv.AppendInt(dst, int64(item), 10)
	dst = append(dst, '"')
	if gs := g[item]; len(gs) > 0 {
		dst = append(dst, `,"genres":[`...)
		for i, s := range gs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// AppendRequest appends a ranking request with hashed features (docs/wire.md,
// "Ranking requests with hashed features") asking for the order of all of
// items for user: the request's features hold the user's namespace, each
// candidate its item's.
//
//	{"id":"<id>","key":"<user>","k":<len(items)>,"features":{"user":{"id":"<user>"}},
//	 "candidates":[{"item":"<item>","features":{"item":{"id":"<item>","genres":[…]}}},…]}
func AppendRequest(dst []byte, id string, user int, items []int, g Genres) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"key":"`...)
	dst = strconv.AppendInt(dst, int64(user), 10)
	dst = append(dst, `","k":`...)
	dst = strconv.AppendInt(dst, int64(len(items)), 10)
	dst = append(dst, `,"features":{"user":{"id":"`...)
	dst = strconv.AppendInt(dst, int64(user), 10)
	dst = append(dst, `"}},"candidates":[`...)
	for j, it := range items {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"item":"`...)
		dst = strconv.AppendInt(dst, int64(it), 10)
		dst = append(dst, `","features":{"item":`...)
		dst = appendItem(dst, it, g)
		dst = append(dst, `}}`...)
	}
	return append(dst, `]}`...)
}

func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}
