package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/stream/profile"
	"github.com/streamer/streamer/stream/wire"
)

// profilesYAML keeps a profile of items (named by features.item.id, with
// an fm's factors and three reference users' ratings) and of users (the
// message key); a global fm rates, and a per-user fm ranks on the items'
// profiles alone (features.use).
const profilesYAML = `
kafka: {brokers: ["127.0.0.1:9092"], group: g, input_topic: in, output_topic: out, dlq_topic: dlq}
rank: {model: per_user}
profiles:
  - entity: item
    id: item.id
    candidates: true
    factors: rating
    half_life: 1h
    prior: 3
    reference: {keys: [u0, u1, u2]}
  - entity: user
    id: key
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item, item_profile, user_profile], max_features: 64}
  - name: per_user
    type: fm
    loss: squared
    factors: 0
    scope: key
    max_keys: 8
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item, item_profile, user_profile], max_features: 64, use: [item_profile]}
`

// profileEngine builds profilesYAML's engine over the key store keys.
func profileEngine(t testing.TB, keys *keystore.DB) *Engine {
	return configEngine(t, keys, profilesYAML)
}

// configEngine builds the engine of a service configuration (yaml, its
// profiles included) over the key store keys (nil: an in-memory one).
func configEngine(t testing.TB, keys *keystore.DB, yaml string) *Engine {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	models, err := BuildModels(cfg, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	ecfg := ConfigFrom(cfg)
	ecfg.KeyStore = keys
	if ecfg.Profiles, err = ProfilesFrom(cfg); err != nil {
		t.Fatal(err)
	}
	e, err := New(ecfg, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

var genres = []string{"Comedy", "Drama", "Action", "Horror"}

// ratingEvents are n ratings of 30 users on 40 items (genres by item),
// half stars, one a minute, keyed by user.
func ratingEvents(n int) []kafka.Message { return ratingEventsOf(n, 40) }

// ratingEventsOf is ratingEvents on items items.
func ratingEventsOf(n, items int) []kafka.Message {
	rng := rand.New(rand.NewPCG(7, 8))
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	out := make([]kafka.Message, n)
	for i := range out {
		u, m := rng.IntN(30), rng.IntN(items)
		y := math.Round(2*(3+math.Sin(float64(u*m))+rng.NormFloat64()*0.5)) / 2
		y = min(5, max(0.5, y))
		v := fmt.Sprintf(`{"id":"r%d","features":{"user":{"id":"u%d"},"item":{"id":"m%d","genres":["%s"]}},"label":%g}`, i, u, m, genres[m%4], y)
		out[i] = kafka.Message{Key: []byte(fmt.Sprintf("u%d", u)), Value: []byte(v), Offset: int64(i), Time: t0.Add(time.Duration(i) * time.Minute)}
	}
	return out
}

// profileStates is every item's and user's profile, encoded.
func profileStates(t *testing.T, s *Shard) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ent := range []string{"item", "user"} {
		n := 40
		prefix := "m"
		if ent == "user" {
			n, prefix = 30, "u"
		}
		for i := range n {
			id := fmt.Sprintf("%s%d", prefix, i)
			st, _, ok := s.Profile(ent, []byte(id))
			if !ok {
				t.Fatalf("no entity %s", ent)
			}
			if st == nil {
				continue
			}
			b, _ := st.MarshalBinary()
			out[ent+"/"+id] = string(b)
		}
	}
	return out
}

// TestProfilesKeepTheStream: a profile's counts, mean and variance are
// the stream's (against a direct computation), its reference vector holds
// the reference users' ratings, the rest their medians, its factors are
// the fm's, and the namespace a profile is kept under is the one the
// event last had.
func TestProfilesKeepTheStream(t *testing.T) {
	e := profileEngine(t, nil)
	s := instanceShard(t, e)
	events := ratingEvents(3000)
	sink := &memSink{Keep: true}
	type acc struct {
		n          int
		sum, sumSq float64
		ref        map[int]float64
	}
	items := map[string]*acc{}
	refLabels := map[int][]float64{}
	var ev wire.Event
	dec := e.NewWorker().dec
	for i := range events {
		s.Process(&events[i], sink)
		if err := dec.Decode(events[i].Value, &ev); err != nil {
			t.Fatal(err)
		}
		id := string(ev.Ent[0])
		a := items[id]
		if a == nil {
			a = &acc{ref: map[int]float64{}}
			items[id] = a
		}
		a.n++
		a.sum += ev.Label
		a.sumSq += ev.Label * ev.Label
		if j := strings.TrimPrefix(string(events[i].Key), "u"); j == "0" || j == "1" || j == "2" {
			r := int(j[0] - '0')
			a.ref[r] = ev.Label
			refLabels[r] = append(refLabels[r], ev.Label)
		}
	}
	for _, m := range sink.Msgs {
		if m.Topic == "dlq" {
			t.Fatalf("event rejected: %s: %s", m.Headers[1].Value, m.Value)
		}
	}
	for id, a := range items {
		st, values, _ := s.Profile("item", []byte(id))
		if st == nil || st.Events != int64(a.n) || st.Labels != int64(a.n) {
			t.Fatalf("item %s: profile %+v, want %d events", id, st, a.n)
		}
		mean := a.sum / float64(a.n)
		if math.Abs(st.Mean-mean) > 1e-12 || math.Abs(st.Variance()-(a.sumSq/float64(a.n)-mean*mean)) > 1e-9 {
			t.Fatalf("item %s: mean %v variance %v, want %v", id, st.Mean, st.Variance(), mean)
		}
		m := strings.TrimPrefix(id, "m")
		if want := `{"id":"` + id + `","genres":["` + genres[atoi(m)%4] + `"]}`; string(st.Attrs) != want {
			t.Fatalf("item %s: namespace kept %s, want %s", id, st.Attrs, want)
		}
		for r := range 3 {
			want := profile.Median(refLabels[r])
			if y, ok := a.ref[r]; ok {
				want = y
			}
			if !bytes.Contains(values, fmt.Appendf(nil, `"r%d":%v`, r, want)) {
				t.Fatalf("item %s: reference %d: want %v in %s", id, r, want, values)
			}
		}
		if len(st.Factors) != 4 || st.Factors[0] == 0 {
			t.Fatalf("item %s: factors %v", id, st.Factors)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = 10*n + int(c-'0')
	}
	return n
}

// TestProfilesRestartAtCheckpoint: a shard restored from a checkpoint
// and fed the rest of the stream keeps every profile (and reference key)
// exactly as a shard that never stopped, and so does the per-user model
// that learns on the joined profiles.
func TestProfilesRestartAtCheckpoint(t *testing.T) {
	events := ratingEvents(2000)
	sink := &memSink{}
	feed := func(s *Shard, msgs []kafka.Message) {
		for i := range msgs {
			s.Process(&msgs[i], sink)
		}
	}
	ref := instanceShard(t, profileEngine(t, nil))
	feed(ref, events)

	keys, err := keystore.Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	a := instanceShard(t, profileEngine(t, keys))
	feed(a, events[:900])
	saved := checkpointShard(t, a)
	feed(a, events[900:1300]) // lost in the crash
	b, err := profileEngine(t, keys).NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Restore(saved, nil); err != nil {
		t.Fatal(err)
	}
	feed(b, events[900:])
	got, want := profileStates(t, b), profileStates(t, ref)
	if len(want) != 70 {
		t.Fatalf("%d profiles in the reference, want 70", len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("profile %s differs after the restart", k)
		}
	}
	for u := range 30 {
		key := []byte(fmt.Sprintf("u%d", u))
		bw, _ := ref.models[1].h.Find(key).MarshalBinary()
		bg, _ := b.models[1].h.Find(key).MarshalBinary()
		if !bytes.Equal(bw, bg) {
			t.Fatalf("per-user model of %s differs after the restart", key)
		}
	}
}

// TestProfilesIDOnlyCandidates: a ranking request whose candidates name
// only their item gets, bit for bit, the scores and order of the same
// request with every candidate's item namespace and profile spelled out
// (as GET /v1/profiles shows them), and an unknown item is scored with
// the cold defaults.
func TestProfilesIDOnlyCandidates(t *testing.T) {
	e := profileEngine(t, nil)
	s := instanceShard(t, e)
	events := ratingEvents(3000)
	sink := &memSink{}
	for i := range events {
		s.Process(&events[i], sink)
	}
	waitCalibrationIdle(e) // no refit lands between the two requests
	dec, err := e.RequestDecoder(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	idOnly, spelled := rankBodies(t, s, 41) // m40 was never rated
	rank := func(body []byte) string {
		var ev wire.Event
		if err := dec.Decode(body, &ev); err != nil {
			t.Fatal(err)
		}
		out := s.Rank(nil, &ev)
		return strings.ReplaceAll(string(out), `"scored_at"`, "\n")[:bytes.Index(out, []byte(`"scored_at"`))]
	}
	a, b := rank(idOnly), rank(spelled)
	if a != b {
		t.Fatalf("id-only candidates ranked\n%s\nspelled out\n%s", a, b)
	}
	if !strings.Contains(a, `"item":"m40"`) {
		t.Fatalf("the unknown item is missing: %s", a)
	}
}

// rankBodies are a request of n candidates m0 … m(n−1) of user u5 by id
// only, and the same request with each candidate's item namespace and
// profile spelled out as GET /v1/profiles shows them (an item without a
// profile: {"id": …} and the cold defaults).
func rankBodies(t testing.TB, s *Shard, n int) (idOnly, spelled []byte) {
	t.Helper()
	var a, b bytes.Buffer
	a.WriteString(`{"id":"q1","key":"u5","features":{"user":{"id":"u5"}},"candidates":[`)
	b.WriteString(`{"id":"q1","key":"u5","features":{"user":{"id":"u5"}},"candidates":[`)
	for i := range n {
		if i > 0 {
			a.WriteByte(',')
			b.WriteByte(',')
		}
		id := fmt.Sprintf("m%d", i)
		fmt.Fprintf(&a, `{"item":%q}`, id)
		st, values, ok := s.Profile("item", []byte(id))
		if !ok {
			t.Fatal("no item profiles")
		}
		obj := []byte(`{"id":"` + id + `"}`)
		if st != nil {
			obj = st.Attrs
		}
		fmt.Fprintf(&b, `{"item":%q,"features":{"item":%s,%s}}`, id, obj, values[1:len(values)-1])
	}
	a.WriteString(`]}`)
	b.WriteString(`]}`)
	return a.Bytes(), b.Bytes()
}

// BenchmarkRankProfiles: a ranking request of 100 candidates decoded and
// ranked (a per-user fm on the items' profiles: 4 factors, 3 reference
// users' labels and five statistics each), the candidates named by id
// (their item namespace and profile joined by the service) or spelled
// out. p50 and p99 are of the requests' times.
func BenchmarkRankProfiles(b *testing.B) {
	e := profileEngine(b, nil)
	s := instanceShard(b, e)
	events := ratingEventsOf(5000, 100)
	sink := &memSink{}
	for i := range events {
		s.Process(&events[i], sink)
	}
	dec, err := e.RequestDecoder(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	idOnly, spelled := rankBodies(b, s, 100)
	for _, bc := range []struct {
		name string
		body []byte
	}{{"id-only", idOnly}, {"spelled-out", spelled}} {
		b.Run(bc.name, func(b *testing.B) {
			var ev wire.Event
			var out []byte
			times := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				t0 := time.Now()
				if err := dec.Decode(bc.body, &ev); err != nil {
					b.Fatal(err)
				}
				out = s.Rank(out[:0], &ev)
				times = append(times, time.Since(t0))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkApplyProfiles: a rating event through a shard that joins its
// item's and user's profiles and learns them (profilesYAML: a global fm,
// a per-user fm on the item profile, every user's in memory), once every
// entity has a profile.
func BenchmarkApplyProfiles(b *testing.B) {
	s := instanceShard(b, configEngine(b, nil, strings.Replace(profilesYAML, "max_keys: 8", "max_keys: 100", 1)))
	events := ratingEvents(3000)
	sink := &memSink{}
	for i := range events {
		s.Process(&events[i], sink)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Process(&events[i%len(events)], sink)
		i++
	}
}

// TestProfileTimeNotAhead: a profile takes an event's time from its Kafka
// timestamp, but never more than maxClockSkew past the service's clock.
// On a live stream (each event stamped when it is applied, a minute
// apart), one rating of item m5 stamped in the year 9000 leaves m5's
// profile as the same rating stamped maxClockSkew ahead would: its
// popularity keeps decaying (half_life 1h), where the future timestamp
// would make it the item's last event and stop the decay for good.
func TestProfileTimeNotAhead(t *testing.T) {
	run := func(stamp func(now time.Time) time.Time) *profile.State {
		e := profileEngine(t, nil)
		s := instanceShard(t, e)
		w := e.NewWorker()
		sink := &memSink{}
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		events := ratingEventsOf(600, 10)
		for i := range events {
			now := t0.Add(time.Duration(i) * time.Minute)
			msg := events[i]
			msg.Time = now
			if i == 100 {
				msg.Value = []byte(`{"id":"late","features":{"user":{"id":"u1"},"item":{"id":"m5","genres":["Drama"]}},"label":4}`)
				msg.Time = stamp(now)
			}
			w.Prepare(&msg)
			s.ApplyAt(w, &msg, sink, now)
		}
		st, _, _ := s.Profile("item", []byte("m5"))
		if st == nil {
			t.Fatal("no profile of m5")
		}
		return st
	}
	want := run(func(now time.Time) time.Time { return now.Add(maxClockSkew) })
	got := run(func(time.Time) time.Time { return time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC) })
	if got.Last != want.Last || math.Float64bits(got.Pop) != math.Float64bits(want.Pop) {
		t.Errorf("m5 with a rating stamped in the year 9000: last %d, popularity %v; stamped %v ahead: %d, %v", got.Last, got.Pop, maxClockSkew, want.Last, want.Pop)
	}
	if float64(want.Events) < 2*want.Pop {
		t.Errorf("m5: %d events, popularity %v: the stream does not decay it enough to show a stop", want.Events, want.Pop)
	}
}

// TestProfileWithoutValues: a profile kept for its attributes alone
// (values: [], as the ratings config's item profile) shows no numbers,
// an empty features object, not one namespace named "".
func TestProfileWithoutValues(t *testing.T) {
	e := configEngine(t, nil, `
kafka: {brokers: ["127.0.0.1:9092"], group: g, input_topic: in, output_topic: out, dlq_topic: dlq}
rank: {model: rating}
profiles:
  - entity: item
    id: item.id
    candidates: true
    values: []
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item], max_features: 64}
`)
	s := instanceShard(t, e)
	sink := &memSink{}
	for _, m := range ratingEventsOf(200, 5) {
		s.Process(&m, sink)
	}
	st, values, ok := s.Profile("item", []byte("m1"))
	if !ok || st == nil || st.Events == 0 || string(values) != "{}" {
		t.Fatalf("Profile(item, m1) = %+v, %s, %v; want a known item with features {}", st, values, ok)
	}
}
