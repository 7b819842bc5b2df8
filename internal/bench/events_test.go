package bench

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/streamer/streamer/stream/wire"
)

// TestPlacement: the user's and the item's features go into the
// namespaces user and item when listed, else into the first other
// namespaces listed, else to the top level.
func TestPlacement(t *testing.T) {
	for _, c := range []struct {
		namespaces []string
		user, item string
	}{
		{nil, "", ""},
		{[]string{"user", "item"}, "user", "item"},
		{[]string{"item", "ctx", "user"}, "user", "item"},
		{[]string{"a", "b", "c"}, "a", "b"},
		{[]string{"item", "x"}, "x", "item"},
		{[]string{"user"}, "user", ""},
		{[]string{"a"}, "a", ""},
	} {
		if u, i := placement(c.namespaces); u != c.user || i != c.item {
			t.Errorf("%q: user %q, item %q; want %q, %q", c.namespaces, u, i, c.user, c.item)
		}
	}
}

// TestHashedEvents reads the hashed rating events back as JSON: keyed by
// the user's id, every item with the same 1–3 genres each time, ratings in
// half stars from 0.5 to 5 that follow the user's and the item's biases,
// and the distinct users and items the input reports.
func TestHashedEvents(t *testing.T) {
	h := wire.HashConfig{Bits: 18, Seed: 1, MaxFeatures: 64, Namespaces: []string{"user", "item"}}
	s, err := newHashedSource(h, (&Models{Ratings: true}).labeler())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50_000
	type event struct {
		ID       string `json:"id"`
		Features struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
			Item struct {
				ID     string   `json:"id"`
				Genres []string `json:"genres"`
			} `json:"item"`
		} `json:"features"`
		Label float64 `json:"label"`
	}
	users, items := map[int]bool{}, map[int]bool{}
	genres := map[int][]string{}
	var sum, sxy, sxx, syy, sx float64
	for i := range n {
		key, v, err := s.next(i)
		if err != nil {
			t.Fatal(err)
		}
		var ev event
		if err := json.Unmarshal(v, &ev); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, v)
		}
		f := ev.Features
		u, err1 := strconv.Atoi(f.User.ID[1:])
		it, err2 := strconv.Atoi(f.Item.ID[1:])
		if ev.ID != "b-"+strconv.Itoa(i) || string(key) != f.User.ID || f.User.ID[0] != 'u' || f.Item.ID[0] != 'i' ||
			err1 != nil || err2 != nil || u >= hashedUsers || it >= hashedItems {
			t.Fatalf("event %d: key %q, %s", i, key, v)
		}
		if g, ok := genres[it]; ok && !slices.Equal(g, f.Item.Genres) || len(f.Item.Genres) < 1 || len(f.Item.Genres) > 3 {
			t.Fatalf("event %d: item %d has genres %v (before: %v)", i, it, f.Item.Genres, g)
		}
		genres[it] = f.Item.Genres
		if y := ev.Label; y < minRating || y > maxRating || y != math.Round(2*y)/2 {
			t.Fatalf("event %d: label %v is not a rating", i, y)
		}
		users[u], items[it] = true, true
		x := s.userBias[u] + s.itemBias[it]
		sum += ev.Label
		sx += x
		sxy += x * ev.Label
		sxx += x * x
		syy += ev.Label * ev.Label
	}
	mean := sum / n
	corr := (sxy/n - sx/n*mean) / math.Sqrt((sxx/n-sx*sx/n/n)*(syy/n-mean*mean))
	// The biases carry 55% of the latent score's variance (correlation
	// about 0.74 before rounding and clipping).
	if mean < 3.3 || mean > 3.7 || corr < 0.65 {
		t.Errorf("mean rating %.3f (want about 3.5), correlation with the biases %.3f (want about 0.74)", mean, corr)
	}
	in := s.input()
	if in.Kind != hashedKind || in.Users != len(users) || in.Items != len(items) || in.Bits != 18 ||
		!slices.Equal(in.Features, []string{"user.id", "item.id", "item.genres"}) || in.EntriesPerEvent < 3.9 || in.EntriesPerEvent > 4.1 {
		t.Errorf("input %+v; want %d users, %d items, about 4 entries per event", in, len(users), len(items))
	}
}

// TestHashedEventsRefused: an event the configuration's decoder refuses
// (more hashed features than max_features) stops the preload with the
// decoder's reason, before any run.
func TestHashedEventsRefused(t *testing.T) {
	s, err := newHashedSource(wire.HashConfig{Bits: 10, MaxFeatures: 3}, (&Models{}).labeler())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, _, err = s.next(i); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "too_many_features") {
		t.Errorf("err %v, want too_many_features", err)
	}
}
