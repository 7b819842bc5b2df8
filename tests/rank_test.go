package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const rankConfig = `
kafka:
  brokers: [%BROKERS%]
  group: rank
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
labels:
  join_window: {events: 10000, time: 1m}
snapshot:
  dir: %DIR%
  every: 100ms
rank:
  model: prefs
  response_topic: ranked
models:
  - name: prefs
    type: mam
    scope: key
    kernel: {type: linear}
    features: {dim: 4}
`

// apiError is the body of an error answer of the HTTP API.
type apiError struct {
	Error struct{ Reason, Detail string }
}

// rankResponse is the response record of a ranking request.
type rankResponse struct {
	ID, Key, Model string
	Version        int64
	Ranked         []struct {
		Item       string
		Score      float64
		Prediction int
		Certainty  struct {
			MistakeBound *float64 `json:"mistake_bound"`
			N            int64
		}
		Propensity float64
	}
}

// prefEvents is n labelled events of users u = i mod len(prefs): random
// features, labelled by the sign of their inner product with the user's
// preference; ids prefix-i.
func prefEvents(rng *rand.Rand, prefs [][]float64, n int, prefix string) []kafka.Message {
	out := make([]kafka.Message, 0, n)
	for i := range n {
		u := i % len(prefs)
		x := make([]float64, len(prefs[u]))
		var dot float64
		for j := range x {
			x[j] = rng.NormFloat64()
			dot += x[j] * prefs[u][j]
		}
		y := -1
		if dot > 0 {
			y = 1
		}
		out = append(out, kafka.Message{Key: []byte(fmt.Sprintf("u%d", u)), Value: eventJSON(fmt.Sprintf("%s-%d", prefix, i), x, &y)})
	}
	return out
}

// rankRequestJSON is a request for key with candidates c0… whose
// features are xs.
func rankRequestJSON(id, key string, xs [][]float64, k int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":%q,"key":%q,"k":%d,"candidates":[`, id, key, k)
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		fx, _ := json.Marshal(x)
		fmt.Fprintf(&b, `{"item":"c%d","features":%s}`, i, fx)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestRankRequests: per-user linear mam models learn hidden preferences
// from labelled events; a ranking request on the input topic gets one
// response record on rank.response_topic, its top k in the order of the
// user's model (best first: the candidate most aligned with the user's
// preference), greedy propensities 1; POST /v1/rank answers the same
// request identically from the live state; malformed requests get 400
// naming the problem; a label for (request id, item) joins, teaches the
// user's model and feeds the off-policy metrics; requests are never
// learned and get no score records.
func TestRankRequests(t *testing.T) {
	b := startRankBroker(t)
	p := startStreamer(t, b, strings.ReplaceAll(rankConfig, "%DIR%", t.TempDir()))
	rng := rand.New(rand.NewPCG(3, 4))
	const users, perUser, dim = 5, 200, 4
	prefs := make([][]float64, users)
	for u := range users {
		prefs[u] = make([]float64, dim)
		for j := range prefs[u] {
			prefs[u][j] = rng.NormFloat64()
		}
	}
	evs := prefEvents(rng, prefs, users*perUser, "e")
	produce(t, b, "events", evs)
	waitFor(t, 30*time.Second, "events learned", func() bool {
		return p.metric(t, "streamer_events_learned_total", `model="prefs"`) == users*perUser
	})

	// Candidates at angles π·(9 − i)/9 from user 0's preference (the
	// linear mam scores directions): c9 is the most aligned, c0 opposite.
	q := make([]float64, dim) // a direction orthogonal to the preference
	var pp, pq float64
	for j := range q {
		q[j] = rng.NormFloat64()
		pp += prefs[0][j] * prefs[0][j]
		pq += prefs[0][j] * q[j]
	}
	for j := range q {
		q[j] -= pq / pp * prefs[0][j]
	}
	xs := make([][]float64, 10)
	for i := range xs {
		th := math.Pi * float64(9-i) / 9
		xs[i] = make([]float64, dim)
		for j := range xs[i] {
			xs[i][j] = math.Cos(th)*prefs[0][j] + math.Sin(th)*q[j]
		}
	}
	req := rankRequestJSON("r-1", "u0", xs, 3)
	produce(t, b, "events", []kafka.Message{{Key: []byte("u0"), Value: req}})
	msgs := newConsumer(t, b, "ranked").read(t, 1, 30*time.Second)
	var viaKafka rankResponse
	if err := json.Unmarshal(msgs[0].Value, &viaKafka); err != nil {
		t.Fatalf("%s: %v", msgs[0].Value, err)
	}
	if string(msgs[0].Key) != "u0" || viaKafka.ID != "r-1" || viaKafka.Key != "u0" || viaKafka.Model != "prefs" || len(viaKafka.Ranked) != 3 {
		t.Fatalf("response %s", msgs[0].Value)
	}
	for i, want := range []string{"c9", "c8", "c7"} {
		r := viaKafka.Ranked[i]
		if r.Item != want || r.Propensity != 1 || r.Certainty.N != perUser || r.Certainty.MistakeBound == nil {
			t.Fatalf("ranked[%d] = %+v, want item %s, propensity 1, n %d: %s", i, r, want, perUser, msgs[0].Value)
		}
		if i > 0 && r.Score > viaKafka.Ranked[i-1].Score {
			t.Fatalf("not best first: %s", msgs[0].Value)
		}
	}

	// The same request over HTTP: the same answer from the live state.
	post := func(body []byte) (int, []byte) {
		resp, err := http.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	code, body := post(req)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/rank: %d %s", code, body)
	}
	var viaHTTP rankResponse
	if err := json.Unmarshal(body, &viaHTTP); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	for i := range viaKafka.Ranked {
		a, h := viaKafka.Ranked[i], viaHTTP.Ranked[i]
		if a.Item != h.Item || math.Float64bits(a.Score) != math.Float64bits(h.Score) {
			t.Fatalf("HTTP %s, Kafka %s", body, msgs[0].Value)
		}
	}
	// POST /v1/rank is as strict as the config: every refusal a 4xx with
	// a JSON body naming the reason (the dead-letter topic's) and the
	// problem, counted by code and reason.
	large := append([]byte(`{"key":"u0","id":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	large = append(large, `"}`...)
	for _, c := range []struct {
		body           string
		code           int
		reason, detail string
	}{
		{`{"key":"u0","candidates":[]}`, 400, "bad_request", "candidates: empty"},
		{`{"key":"u0","candidates":[{"item":"a","features":[1,2]}]}`, 400, "wrong_dimension", "candidates[0]: got 2 features, want 4"},
		{`{"key":"u0","features":[1,2,3,4]}`, 400, "bad_request", "not a ranking request"},
		{`{"key":"u0",`, 400, "not_json", ""},
		{`{"id":"r-2","candidates":[{"item":"a","features":[1,2,3,4]}]}`, 400, "bad_request", "key: missing"},
		{`{"id":"r-2","key":"","candidates":[{"item":"a","features":[1,2,3,4]}]}`, 400, "bad_request", "key: missing"},
		{`{"id":"r-2","key":"u0","top":3,"candidates":[{"item":"a","features":[1,2,3,4]}]}`, 400, "bad_request", `unknown field "top"`},
		{`{"id":"r-2","key":"u0","candidates":[{"item":"a","features":[1,2,3,4],"price":3}]}`, 400, "bad_request", `unknown field "candidates[0].price"`},
		{string(large), 413, "too_large", "over 1048576 bytes"},
	} {
		code, body := post([]byte(c.body))
		var e apiError
		if err := json.Unmarshal(body, &e); err != nil || code != c.code || e.Error.Reason != c.reason || !strings.Contains(e.Error.Detail, c.detail) {
			t.Errorf("%.80s: %d %s, want %d {\"error\":{\"reason\":%q,\"detail\":…%s…}}", c.body, code, body, c.code, c.reason, c.detail)
		}
	}
	resp, err := http.Get("http://" + p.http + "/v1/rank")
	if err != nil {
		t.Fatal(err)
	}
	getBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Allow") != "POST" ||
		!strings.Contains(string(getBody), `"reason":"method_not_allowed"`) {
		t.Errorf("GET /v1/rank: %d %v %s, want 405, Allow: POST and a JSON body", resp.StatusCode, resp.Header, getBody)
	}
	for _, c := range []struct {
		labels string
		want   float64
	}{
		{`code="400",reason="bad_request"`, 6},
		{`code="400",reason="wrong_dimension"`, 1},
		{`code="400",reason="not_json"`, 1},
		{`code="413",reason="too_large"`, 1},
		{`code="405",reason="method_not_allowed"`, 1},
		{`code="400",reason="non_finite"`, 0},
	} {
		if got := p.metric(t, "streamer_rank_refused_total", c.labels); got != c.want {
			t.Errorf("streamer_rank_refused_total{%s} = %v, want %v", c.labels, got, c.want)
		}
	}

	// A click on the first item: joined, learned by u0's model, counted by
	// the off-policy metrics. The requests taught nothing and made no score
	// records.
	produce(t, b, "events", []kafka.Message{{Key: []byte("u0"), Value: []byte(`{"id":"r-1","item":"c9","label":1}`)}})
	waitFor(t, 30*time.Second, "item label joined", func() bool {
		return p.metric(t, "streamer_labels_total", `outcome="joined"`) == 1
	})
	checks := []struct {
		name, labels string
		want         float64
	}{
		{"streamer_events_learned_total", `model="prefs"`, users*perUser + 1},
		{"streamer_ope_labels_total", "", 1},
		{"streamer_ope_value", `estimator="ips",policy="greedy"`, 1},
		{"streamer_rank_requests_total", "", 2},
		{"streamer_rank_candidates_total", "", 20},
		{"streamer_events_rejected_total", `reason="bad_request"`, 0},
	}
	for _, c := range checks {
		if got := p.metric(t, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if total := highWater(t, b, "scores"); total != users*perUser {
		t.Errorf("%d score records, want %d (the events', none for the request or the label)", total, users*perUser)
	}
	// Requests while the users' models learn and snapshots are written
	// every 100 ms: every one answered (the binary is built with -race in
	// CI's race step, where a data race fails the exit below).
	more := prefEvents(rng, prefs, 4000, "m")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < len(more); i += 200 {
			produce(t, b, "events", more[i:i+200])
		}
	}()
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 50 {
				body := rankRequestJSON(fmt.Sprintf("h-%d-%d", g, i), fmt.Sprintf("u%d", (g+i)%users), xs, 5)
				resp, err := http.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("request %d-%d: %d %s", g, i, resp.StatusCode, out)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	waitFor(t, 60*time.Second, "the concurrent events learned", func() bool {
		return p.metric(t, "streamer_events_learned_total", `model="prefs"`) == users*perUser+1+4000
	})

	// A malformed request on Kafka is dead-lettered bad_request.
	produce(t, b, "events", []kafka.Message{{Key: []byte("u1"), Value: []byte(`{"id":"r-2","candidates":[{"item":"a","features":[1,2,3,4]},{"item":"a","features":[1,2,3,4]}]}`)}})
	waitFor(t, 30*time.Second, "bad request dead-lettered", func() bool {
		return p.metric(t, "streamer_events_rejected_total", `reason="bad_request"`) == 1
	})
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestRankMisdirected: two instances of one group share the input's
// partitions; POST /v1/rank for a key of a key-scoped model answers 200 on
// the instance that owns the key's partition (murmur2, as the producers
// map it) and 421 naming the partition on the other.
func TestRankMisdirected(t *testing.T) {
	b := startBroker(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.CreateTopic(ctx, "ranked", 1); err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(strings.ReplaceAll(rankConfig, "group: rank", "group: rank2"), "%DIR%", "")
	cfg = strings.Replace(cfg, "snapshot:\n  dir: \n  every: 100ms\n", "", 1)
	a := startStreamer(t, b, cfg)
	c := startStreamer(t, b, cfg)
	waitFor(t, 30*time.Second, "the partitions shared", func() bool {
		return a.metric(t, "streamer_assigned_partitions", "") == 2 && c.metric(t, "streamer_assigned_partitions", "") == 2
	})
	xs := [][]float64{{1, 0, 0, 0}, {0, 1, 0, 0}}
	seen := map[int]bool{}
	for u := range 40 {
		body := rankRequestJSON("r", fmt.Sprintf("user-%d", u), xs, 1)
		codes := [2]int{}
		var msgs [2]string
		for i, p := range []*proc{a, c} {
			resp, err := http.Post("http://"+p.http+"/v1/rank", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[i], msgs[i] = resp.StatusCode, string(out)
			if resp.StatusCode != http.StatusOK { // the error's detail
				var e apiError
				if err := json.Unmarshal(out, &e); err != nil || e.Error.Reason != "misdirected" {
					t.Fatalf("user-%d: %d %s, want a JSON error body with reason misdirected", u, resp.StatusCode, out)
				}
				msgs[i] = e.Error.Detail
			}
		}
		ok, mis := 0, 1
		if codes[1] == http.StatusOK {
			ok, mis = 1, 0
		}
		if codes[ok] != http.StatusOK || codes[mis] != http.StatusMisdirectedRequest ||
			!strings.Contains(msgs[mis], fmt.Sprintf(`key "user-%d" is in partition`, u)) || !strings.Contains(msgs[mis], "this one owns [") {
			t.Fatalf("user-%d: %d %s / %d %s", u, codes[0], msgs[0], codes[1], msgs[1])
		}
		seen[ok] = true
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("one instance answered every key: %v", seen)
	}
	for _, p := range []*proc{a, c} {
		if err := p.stop(t); err != nil {
			t.Fatalf("exit: %v", err)
		}
	}
}
