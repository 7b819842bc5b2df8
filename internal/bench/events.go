package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/streamer/streamer/stream/wire"
)

// source generates the events Run and ScaleOut preload: denseSource
// (arrays of Models.Dim numbers) or hashedSource (users rating items, for
// a configuration with features.hash). newSource picks one per bench.
type source interface {
	// next returns event i's message key (nil: none) and value, each in
	// new memory.
	next(i int) (key, value []byte, err error)
	// input describes the events returned so far.
	input() Input
}

func newSource(m *Models) (source, error) {
	if m.Hash != nil {
		return newHashedSource(*m.Hash, m.labeler())
	}
	s := newDenseSource(m.Dim, m.labeler())
	s.keys = m.Keys
	return s, nil
}

// Input describes the preloaded events (Setup.Input).
type Input struct {
	Kind string `json:"kind"` // "dense" (arrays of dim numbers) or "hashed" (categorical events)
	// Keys is the number of distinct message keys dense events were drawn
	// from (0: they have none).
	Keys int `json:"keys,omitempty"`

	// Hashed events, users rating items: Features are the features of an
	// event (namespace.name; a top-level feature by its name alone), Users
	// and Items the distinct ids drawn (of UserIDs and ItemIDs), each item
	// with 1..3 of Genres genres, and EntriesPerEvent the mean number of
	// hashed entries of an event, interactions included, as the service's
	// decoder counts them.
	Bits            int      `json:"bits,omitempty"`
	Features        []string `json:"features,omitempty"`
	Users           int      `json:"users,omitempty"`
	UserIDs         int      `json:"user_ids,omitempty"`
	Items           int      `json:"items,omitempty"`
	ItemIDs         int      `json:"item_ids,omitempty"`
	Genres          int      `json:"genres,omitempty"`
	EntriesPerEvent float64  `json:"entries_per_event,omitempty"`
}

// Describe is the report's words for the input: "d=32", or the hashed
// events' features, ids and entries.
func (in Input) Describe(dim int) string {
	if in.Kind != hashedKind {
		if in.Keys > 0 {
			return fmt.Sprintf("d=%d, keys drawn from %d", dim, in.Keys)
		}
		return fmt.Sprintf("d=%d", dim)
	}
	return fmt.Sprintf("hashed events in 2^%d (%s; %d of %d users, %d of %d items, 1–3 of %d genres each; %.2f entries per event)",
		in.Bits, strings.Join(in.Features, ", "), in.Users, in.UserIDs, in.Items, in.ItemIDs, in.Genres, in.EntriesPerEvent)
}

const (
	denseKind  = "dense"
	hashedKind = "hashed"
)

// labeler appends the label of an event whose latent score is z
// (standard normal) to dst.
type labeler func(dst []byte, z float64) []byte

// labeler returns the labels of m's events: a rating, a level (equally
// likely bins of z) or the sign of z.
func (m *Models) labeler() labeler {
	switch {
	case m.Ratings:
		return func(dst []byte, z float64) []byte { return strconv.AppendFloat(dst, rating(z), 'f', -1, 64) }
	case m.Levels > 0:
		levels := m.Levels
		return func(dst []byte, z float64) []byte {
			u := 0.5 * math.Erfc(-z/math.Sqrt2) // P(Z ≤ z)
			return strconv.AppendInt(dst, int64(min(levels, 1+int(u*float64(levels)))), 10)
		}
	}
	return func(dst []byte, z float64) []byte {
		if z < 0 {
			return append(dst, "-1"...)
		}
		return append(dst, '1')
	}
}

// Ratings: the latent score plus meanRating, rounded to half stars and
// clipped to [minRating, maxRating].
const (
	meanRating = 3.5
	minRating  = 0.5
	maxRating  = 5.0
)

func rating(z float64) float64 {
	return min(maxRating, max(minRating, math.Round(2*(meanRating+z))/2))
}

// ratingValues are the ratings an event can carry: 0.5, 1, …, 5.
func ratingValues() []float64 {
	var out []float64
	for r := minRating; r <= maxRating; r += 0.5 {
		out = append(out, r)
	}
	return out
}

// denseSource generates arrays of dim standard normal features; the
// latent score is their projection on a fixed random unit direction.
type denseSource struct {
	rng   *rand.Rand
	dir   []float64
	norm  float64
	label labeler
	keys  int // > 0: each event's key is one of keys, drawn with krng
	krng  *rand.Rand
}

func newDenseSource(dim int, label labeler) *denseSource {
	s := &denseSource{rng: rand.New(rand.NewPCG(7, 11)), krng: rand.New(rand.NewPCG(13, 17)), dir: make([]float64, dim), label: label}
	for i := range s.dir {
		s.dir[i] = s.rng.NormFloat64()
		s.norm += s.dir[i] * s.dir[i]
	}
	s.norm = math.Sqrt(s.norm)
	return s
}

func (s *denseSource) next(i int) (key, value []byte, err error) {
	v := make([]byte, 0, 24*len(s.dir)+96)
	v = append(v, `{"id":"b-`...)
	v = strconv.AppendInt(v, int64(i), 10)
	v = append(v, `","features":[`...)
	var dot float64
	for j := range s.dir {
		x := s.rng.NormFloat64()
		dot += x * s.dir[j]
		if j > 0 {
			v = append(v, ',')
		}
		v = strconv.AppendFloat(v, x, 'f', 6, 64)
	}
	v = append(v, `],"label":`...)
	v = s.label(v, dot/s.norm)
	if s.keys > 0 {
		key = strconv.AppendInt([]byte("k"), int64(s.krng.IntN(s.keys)), 10)
	}
	return key, append(v, '}'), nil
}

func (s *denseSource) input() Input { return Input{Kind: denseKind, Keys: s.keys} }

// The hashed events' population: user and item ids drawn from Zipf
// distributions (P(k) ∝ (v + k)^−s; the most frequent user about 0.3% of
// the events, the most frequent item about 0.9%), each item with 1..3
// distinct genres.
const (
	hashedUsers  = 10_000
	hashedItems  = 50_000
	hashedGenres = 20
	zipfS        = 1.1
	zipfUserV    = 100
	zipfItemV    = 20
)

// The latent score of a rating is the user's bias plus the item's plus
// noise, with these variances (their sum is 1).
const (
	userBiasVar = 0.2
	itemBiasVar = 0.35
	noiseVar    = 0.45
)

// hashedSource generates rating events:
//
//	{"id":"b-1","features":{"user":{"id":"u42"},"item":{"id":"i7","genres":["g3","g11"]}},"label":4.5}
//
// keyed by the user's id, with the user's and the item's features in the
// namespaces user and item when features.namespaces lists them, else in
// its first namespaces, else at the top level ("user":"u42","item":"i7",
// "genres":[…]). Every event is decoded as the service decodes it, to
// count its hashed entries and to fail early on what the configuration
// refuses (a max_features too small).
type hashedSource struct {
	rng          *rand.Rand
	users, items *rand.Zipf
	userBias     []float64
	itemBias     []float64
	genres       [][]uint8 // per item
	label        labeler

	// The JSON around the ids: userOpen id userClose, itemOpen id
	// itemGenres genre, … itemClose.
	userOpen, userClose, itemOpen, itemGenres, itemClose []byte

	dec             *wire.Decoder
	ev              wire.Event
	seenU, seenI    []bool // ids drawn so far
	in              Input
	events, entries int // events generated, their hashed entries
}

func newHashedSource(h wire.HashConfig, label labeler) (*hashedSource, error) {
	d, err := wire.NewDecoder(1, nil, 0)
	if err == nil {
		d, err = d.WithHashing(h)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rng := rand.New(rand.NewPCG(7, 13))
	s := &hashedSource{
		rng:      rng,
		users:    rand.NewZipf(rng, zipfS, zipfUserV, hashedUsers-1),
		items:    rand.NewZipf(rng, zipfS, zipfItemV, hashedItems-1),
		userBias: make([]float64, hashedUsers),
		itemBias: make([]float64, hashedItems),
		genres:   make([][]uint8, hashedItems),
		label:    label,
		dec:      d,
		seenU:    make([]bool, hashedUsers),
		seenI:    make([]bool, hashedItems),
	}
	for u := range s.userBias {
		s.userBias[u] = math.Sqrt(userBiasVar) * rng.NormFloat64()
	}
	for i := range s.itemBias {
		s.itemBias[i] = math.Sqrt(itemBiasVar) * rng.NormFloat64()
		g := make([]uint8, 0, 3)
		for n := 1 + rng.IntN(3); len(g) < n; {
			if x := uint8(rng.IntN(hashedGenres)); !slices.Contains(g, x) {
				g = append(g, x)
			}
		}
		s.genres[i] = g
	}
	user, item := placement(h.Namespaces)
	s.in = Input{Kind: hashedKind, Bits: h.Bits, UserIDs: hashedUsers, ItemIDs: hashedItems, Genres: hashedGenres}
	quote := func(name string) string { b, _ := json.Marshal(name); return string(b) }
	if user != "" {
		s.userOpen, s.userClose = []byte(quote(user)+`:{"id":"`), []byte(`"}`)
		s.in.Features = append(s.in.Features, user+".id")
	} else {
		s.userOpen, s.userClose = []byte(`"user":"`), []byte(`"`)
		s.in.Features = append(s.in.Features, "user")
	}
	if item != "" {
		s.itemOpen, s.itemGenres, s.itemClose = []byte(quote(item)+`:{"id":"`), []byte(`","genres":[`), []byte(`]}`)
		s.in.Features = append(s.in.Features, item+".id", item+".genres")
	} else {
		s.itemOpen, s.itemGenres, s.itemClose = []byte(`"item":"`), []byte(`","genres":[`), []byte(`]`)
		s.in.Features = append(s.in.Features, "item", "genres")
	}
	return s, nil
}

// placement returns the namespaces of the user's and the item's features:
// user and item when listed, else the first other namespaces listed, else
// "" (the top level).
func placement(namespaces []string) (user, item string) {
	rest := slices.DeleteFunc(slices.Clone(namespaces), func(ns string) bool { return ns == "" || ns == "user" || ns == "item" })
	pick := func(role string) string {
		switch {
		case slices.Contains(namespaces, role):
			return role
		case len(rest) > 0:
			ns := rest[0]
			rest = rest[1:]
			return ns
		}
		return ""
	}
	user = pick("user")
	return user, pick("item")
}

func (s *hashedSource) next(i int) (key, value []byte, err error) {
	u, it := int(s.users.Uint64()), int(s.items.Uint64())
	z := s.userBias[u] + s.itemBias[it] + math.Sqrt(noiseVar)*s.rng.NormFloat64()
	key = strconv.AppendInt([]byte{'u'}, int64(u), 10)
	v := make([]byte, 0, 160)
	v = append(v, `{"id":"b-`...)
	v = strconv.AppendInt(v, int64(i), 10)
	v = append(v, `","features":{`...)
	v = append(v, s.userOpen...)
	v = append(v, key...)
	v = append(v, s.userClose...)
	v = append(v, ',')
	v = append(v, s.itemOpen...)
	v = append(v, 'i')
	v = strconv.AppendInt(v, int64(it), 10)
	v = append(v, s.itemGenres...)
	for k, g := range s.genres[it] {
		if k > 0 {
			v = append(v, ',')
		}
		v = append(v, `"g`...)
		v = strconv.AppendInt(v, int64(g), 10)
		v = append(v, '"')
	}
	v = append(v, s.itemClose...)
	v = append(v, `},"label":`...)
	v = s.label(v, z)
	v = append(v, '}')
	if err := s.dec.Decode(v, &s.ev); err != nil {
		return nil, nil, fmt.Errorf("bench: the configuration refuses the bench's hashed events (%s): %w", v, err)
	}
	s.events++
	s.entries += len(s.ev.Idx)
	if !s.seenU[u] {
		s.seenU[u] = true
		s.in.Users++
	}
	if !s.seenI[it] {
		s.seenI[it] = true
		s.in.Items++
	}
	return key, v, nil
}

func (s *hashedSource) input() Input {
	in := s.in
	in.Features = slices.Clone(in.Features)
	if s.events > 0 {
		in.EntriesPerEvent = float64(s.entries) / float64(s.events)
	}
	return in
}
