package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/wire"
)

const hashRankConfig = `
kafka:
  brokers: [%BROKERS%]
  group: hashrank
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
labels:
  join_window: {events: 100000, time: 10m}
snapshot:
  dir: %DIR%
  every: 500ms
rank:
  model: prefs
  response_topic: ranked
  explore: {policy: epsilon, epsilon: 0.1, seed: 3}
models:
  # Per user: what each user clicks, from the items' categorical features.
  - name: prefs
    type: mam
    scope: key
    kernel: {type: linear}
    features: &hashed
      hash: {bits: 12, seed: 1}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
  # One model for all users: the user × item interaction carries it.
  - name: ctr
    type: logistic
    features: *hashed
`

// catWorld is a recommendation world of categorical data: items with an
// id, one of 6 categories and two of 20 tags; each user clicks an item of
// one of its 2 liked categories with probability 0.8, any other with 0.1.
type catWorld struct {
	liked [][2]int
	cat   []int
	tags  [][2]int
}

func newCatWorld(users, items int, seed uint64) *catWorld {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := &catWorld{}
	for range users {
		a := rng.IntN(6)
		w.liked = append(w.liked, [2]int{a, (a + 1 + rng.IntN(5)) % 6})
	}
	for range items {
		w.cat = append(w.cat, rng.IntN(6))
		w.tags = append(w.tags, [2]int{rng.IntN(20), rng.IntN(20)})
	}
	return w
}

func (w *catWorld) clickProb(u, i int) float64 {
	if c := w.cat[i]; c == w.liked[u][0] || c == w.liked[u][1] {
		return 0.8
	}
	return 0.1
}

// clicks are user u's clicks on the items ranked for request id, drawn
// with rng (one draw per item, in order), as delayed labels keyed by the
// user; and the click probability of the first item.
func (w *catWorld) clicks(id string, u int, ranked []rankedItem, rng *rand.Rand) (labels []kafka.Message, first float64) {
	for j, it := range ranked {
		var i int
		fmt.Sscanf(it.Item, "i%d", &i)
		pc := w.clickProb(u, i)
		if j == 0 {
			first = pc
		}
		y := -1
		if rng.Float64() < pc {
			y = 1
		}
		labels = append(labels, kafka.Message{Key: fmt.Appendf(nil, "u%d", u),
			Value: fmt.Appendf(nil, `{"id":%q,"item":%q,"label":%d}`, id, it.Item, y)})
	}
	return labels, first
}

// request is a ranking request of user u: the user's namespace in the
// request's own features, each candidate's item namespace in its own.
func (w *catWorld) request(id string, u int, items []int, k int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%q,"key":"u%d","k":%d,"features":{"user":{"id":"u%d","country":"c%d"}},"candidates":[`, id, u, k, u, u%4)
	for j, i := range items {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"item":"i%d","features":{"item":{"id":"i%d","cat":"k%d","tags":["t%d","t%d"]}}}`, i, i, w.cat[i], w.tags[i][0], w.tags[i][1])
	}
	b.WriteString("]}")
	return b.Bytes()
}

type rankedItem struct {
	Item       string
	Score      float64
	Propensity float64
}

func postRank(t *testing.T, client *http.Client, addr string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := client.Post("http://"+addr+"/v1/rank", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, out
}

// TestHashedRankOverKafka: the recommendation loop on categorical events,
// with the real binary over Kafka. Users' requests carry the user's
// namespace; candidates their item's (id, category, tags); POST /v1/rank
// ranks them with the user's hashed model (epsilon-greedy, 3 shown); the
// clicks on the shown items come back over Kafka as delayed labels by
// (request, item), and teach both the per-user model and a global
// logistic regression on the user × item interaction. The per-user model
// learns from them: the first item's click rate rises from what a random
// pick gets (0.33) at the start of the run to near the best (0.8) at its
// end. Every label joins; the off-policy estimate of the greedy policy is
// not below the logged click rate (greedy is the better policy here); a
// request on the input topic is answered on rank.response_topic with the
// same scores as over HTTP; a malformed candidate is a 400 naming it, and
// a request over max_features is dead-lettered naming the candidate.
func TestHashedRankOverKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 2 400 ranking requests and their clicks through the broker; go test ./... runs it")
	}
	useFastBinary(t)
	b := startRankBroker(t)
	p := startStreamer(t, b, strings.ReplaceAll(hashRankConfig, "%DIR%", t.TempDir()))
	const users, items, requests, cands, k = 30, 300, 2400, 15, 3
	w := newCatWorld(users, items, 21)
	rng := rand.New(rand.NewPCG(22, 1))
	clickRng := rand.New(rand.NewPCG(22, 2))
	client := &http.Client{Timeout: 10 * time.Second}
	var labels []kafka.Message
	firstClickP := make([]float64, requests) // expected click rate of the first item shown
	for r := range requests {
		u := rng.IntN(users)
		perm := rng.Perm(items)[:cands]
		id := fmt.Sprintf("q%d", r)
		code, out := postRank(t, client, p.http, w.request(id, u, perm, k))
		var resp struct {
			Model  string
			Ranked []rankedItem
		}
		if code != http.StatusOK || json.Unmarshal(out, &resp) != nil || resp.Model != "prefs" || len(resp.Ranked) != k {
			t.Fatalf("request %d: %d %s", r, code, out)
		}
		clicks, pc := w.clicks(id, u, resp.Ranked, clickRng)
		labels, firstClickP[r] = append(labels, clicks...), pc
		if len(labels) >= 300 {
			produce(t, b, "events", labels)
			labels = labels[:0]
		}
	}
	produce(t, b, "events", labels)
	waitFor(t, 60*time.Second, "every label joined", func() bool {
		return p.metric(t, "streamer_labels_total", `outcome="joined"`) == requests*k
	})
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	early, late := mean(firstClickP[:requests/20]), mean(firstClickP[requests*3/4:])
	t.Logf("first item's click probability: %.3f over the first 5%% of the requests, %.3f over the last quarter (random 0.33, best 0.8, epsilon 0.1 costs ≈ 0.05)", early, late)
	if late < 0.7 || late < early+0.2 {
		t.Errorf("first item's click probability %.3f at the start, %.3f at the end: the per-user hashed model did not learn (want ≥ 0.7 and 0.2 more)", early, late)
	}
	if n := p.metric(t, "streamer_model_examples", `model="ctr"`); n != requests*k {
		t.Errorf("the global model learned %v labels, want %d", n, requests*k)
	}
	if n := p.metric(t, "streamer_model_examples", `model="prefs"`); n != requests*k {
		t.Errorf("the per-user models learned %v labels, want %d", n, requests*k)
	}
	opeN := p.metric(t, "streamer_ope_labels_total", "")
	logged := p.metric(t, "streamer_ope_value", `estimator="observed",policy="logged"`)
	ips := p.metric(t, "streamer_ope_value", `estimator="ips",policy="greedy"`)
	ci := p.metric(t, "streamer_ope_ci95", "")
	t.Logf("off-policy: %v labels of first items; logged click rate %.3f, greedy's IPS estimate %.3f ± %.3f", opeN, logged, ips, ci)
	if opeN != requests || !(ips > logged-ci) || ips > 1 {
		t.Errorf("off-policy: %v samples (want %d), logged %.3f, greedy's IPS %.3f ± %.3f", opeN, requests, logged, ips, ci)
	}
	if d := p.metric(t, "streamer_features_hashed_distinct", ""); d < float64(items) {
		t.Errorf("%v distinct hashed features estimated, want more than the %d items", d, items)
	}

	// A request on the input topic: its response on the response topic
	// scores the items as POST /v1/rank does (no learning in between).
	perm := rng.Perm(items)[:cands]
	code, out := postRank(t, client, p.http, w.request("h-last", 4, perm, cands))
	var viaHTTP, viaTopic struct{ Ranked []rankedItem }
	if code != http.StatusOK || json.Unmarshal(out, &viaHTTP) != nil {
		t.Fatalf("%d %s", code, out)
	}
	produce(t, b, "events", []kafka.Message{{Key: []byte("u4"), Value: w.request("k-last", 4, perm, cands)}})
	rec := newConsumer(t, b, "ranked").read(t, 1, 30*time.Second)[0]
	if err := json.Unmarshal(rec.Value, &viaTopic); err != nil || len(viaTopic.Ranked) != cands {
		t.Fatalf("response record %s: %v", rec.Value, err)
	}
	scores := map[string]float64{}
	for _, it := range viaHTTP.Ranked {
		scores[it.Item] = it.Score
	}
	for _, it := range viaTopic.Ranked {
		if s, ok := scores[it.Item]; !ok || s != it.Score {
			t.Errorf("item %s: score %v on the topic, %v over HTTP", it.Item, it.Score, s)
		}
	}

	// Bad requests name the candidate and the feature.
	code, out = postRank(t, client, p.http, []byte(`{"key":"u1","features":{"user":{"id":"u1"}},"candidates":[{"item":"a","features":{"item":{"tags":["x",7]}}}]}`))
	if code != http.StatusBadRequest || !strings.Contains(string(out), `{"reason":"wrong_type","detail":"candidates[0].features.item.tags[1]: got number, want string"}`) {
		t.Errorf("malformed candidate: %d %s", code, out)
	}
	tags := make([]string, 40)
	for i := range tags {
		tags[i] = fmt.Sprintf(`"t%d"`, i)
	}
	big := `{"id":"big","key":"u1","features":{"user":{"id":"u1"}},"candidates":[{"item":"a","features":{"item":{"id":"a"}}},{"item":"b","features":{"item":{"tags":[` + strings.Join(tags, ",") + `]}}}]}`
	produce(t, b, "events", []kafka.Message{{Key: []byte("u1"), Value: []byte(big)}})
	dl := newConsumer(t, b, "events.dlq").read(t, 1, 30*time.Second)[0]
	reason, detail := "", ""
	for _, h := range dl.Headers {
		switch h.Key {
		case "streamer.reason":
			reason = string(h.Value)
		case "streamer.detail":
			detail = string(h.Value)
		}
	}
	if reason != "too_many_features" || !strings.HasPrefix(detail, "candidates[1]: 81 features with the request's") {
		t.Errorf("a request over max_features: dead letter %q %q", reason, detail)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

const hashPartConfig = `
kafka:
  brokers: [%BROKERS%]
  group: hashpart
  session_timeout: 1s
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  every: 300ms
  changelog_topic: state.hashed
  scope: partition
  remote_refresh: 200ms
models:
  - name: mam_rbf
    type: mam
    kernel: {type: rbf, gamma: 0.25, features: 128, seed: 3}
    balance: true
    features: &hashed
      hash: {bits: 14, seed: 2}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
  - name: per_user
    type: logistic
    scope: key
    max_keys: 1000
    features: *hashed
`

// TestHashedPartitionScope: hashed features in partition scope, over six
// partitions shared by two instances: a mergeable mam (the rbf kernel, its
// frequencies generated per hashed index) keeps each partition's
// statistics and scores with the merge of all of them, per-user logistic
// models live in their partition's key table; both travel through the
// changelog. The merge of the partitions' statistics in the changelog is
// the model a single pass over every event builds (to 1e-9), both
// instances merge every partition, and every user's model is in its
// partition's key records with the user's count.
func TestHashedPartitionScope(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two instances over six partitions and a changelog restore; go test ./... runs it")
	}
	useFastBinary(t)
	b, err := stream.StartBrokerWith(stream.BrokerConfig{
		MinSessionTimeout: 500 * time.Millisecond,
		Topics: []stream.TopicSpec{{Name: "events", Partitions: scalePartitions}, {Name: "scores", Partitions: scalePartitions},
			{Name: "events.dlq", Partitions: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	const n, users = 6000, 40
	rng := rand.New(rand.NewPCG(31, 1))
	var msgs []kafka.Message
	counts := map[string]int64{}
	for i := range n {
		u, it := rng.IntN(users), rng.IntN(200)
		y := -1
		if (u+it)%3 == 0 {
			y = 1
		}
		key := fmt.Sprintf("u%d", u)
		counts[key]++
		msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil,
			`{"id":"e%d","features":{"user":{"id":"u%d","g":"g%d"},"item":{"id":"i%d","g":"h%d"}},"label":%d}`, i, u, u%3, it, it%3, y)})
	}
	cfg := hashPartConfig
	procs := []*proc{startStreamer(t, b, cfg), startStreamer(t, b, cfg)}
	produce(t, b, "events", msgs)
	waitState(t, b, "state.hashed", n, 120*time.Second)
	for i, p := range procs {
		waitFor(t, 30*time.Second, fmt.Sprintf("instance %d's mam to merge every partition", i), func() bool {
			return p.metric(t, "streamer_model_examples", `model="mam_rbf"`) == n
		})
	}
	for _, p := range procs {
		if err := p.stop(t); err != nil {
			t.Fatalf("exit: %v", err)
		}
	}
	// The reference: one pass over every event, hashed as the service
	// hashes them.
	spec := online.MAMParams{}
	states := partitionStates(t, b, "state.hashed")
	var parts []*online.MAM
	for part := range scalePartitions {
		m, err := testTypes.Restore(modelData(t, states[part], "mam_rbf"))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, m.(*online.MAM))
		spec = parts[0].Params()
	}
	ref, err := online.NewMAM(1<<14, spec)
	if err != nil {
		t.Fatal(err)
	}
	merged, _ := online.NewMAM(1<<14, spec)
	if err := merged.MergeAll(parts...); err != nil {
		t.Fatal(err)
	}
	dec, _ := wire.NewDecoder(1<<14, nil, 0)
	dec, _ = dec.WithHashing(wire.HashConfig{Bits: 14, Seed: 2, MaxFeatures: 64, Interactions: [][2]string{{"user", "item"}}})
	var ev wire.Event
	for _, m := range msgs {
		if err := dec.Decode(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		ref.ObserveSparse(ev.Idx, ev.Val, ev.Label, true)
	}
	if merged.Examples() != n {
		t.Fatalf("merged examples %d, want %d", merged.Examples(), n)
	}
	if err := online.StateClose(merged, ref, 1e-9); err != nil {
		t.Fatalf("the partitions' merged statistics differ from one pass over the events: %v", err)
	}
	perKey := keysInPartitions(t, durableKeyStates(t, b, "state.hashed", "per_user", scalePartitions), scalePartitions)
	for key, m := range perKey {
		if m.Examples() != counts[key] {
			t.Errorf("key %s: %d examples, want %d", key, m.Examples(), counts[key])
		}
	}
	if len(perKey) != len(counts) {
		t.Errorf("%d keys in the changelog's durable key states, want %d", len(perKey), len(counts))
	}
}
