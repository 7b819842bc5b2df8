package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// profileRankConfig: item profiles (with the fm's factors) and user
// profiles; the hybrid's structure: a global fm corrected per user by a
// residual lsrrank on the items' profiles, which ranks.
const profileRankConfig = `
kafka:
  brokers: [%BROKERS%]
  group: profiles
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
snapshot:
  dir: %DIR%
  every: 500ms
rank:
  model: per_user
  response_topic: ranked
  explore: {policy: greedy}
profiles:
  - entity: item
    id: item.id
    candidates: true
    factors: rating
    values: [count, mean, bias, factors]
    prior: 3
  - entity: user
    id: key
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    features: {hash: {bits: 18, seed: 1}, namespaces: [user, item, item_profile, user_profile], max_features: 64, use: [user, item]}
  - name: per_user
    type: lsrrank
    scope: key
    fallback: rating
    residual: true
    kernel: {type: linear}
    lambda: 1
    window: {events: 300}
    refit: {on_score: true}
    features: {hash: {bits: 18, seed: 1}, namespaces: [user, item, item_profile, user_profile], max_features: 64, use: [item_profile]}
`

// profileResp is GET /v1/profiles' answer.
type profileResp struct {
	Known      bool
	Events     int64
	Labels     int64
	Mean       *float64
	Attributes json.RawMessage
	Features   json.RawMessage
}

func getProfile(t *testing.T, addr, path string) (int, profileResp, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pr profileResp
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &pr); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
	}
	return resp.StatusCode, pr, string(body)
}

// TestProfilesOverHTTP: with the real binary over Kafka, GET
// /v1/profiles/item/{id} shows an item's profile (its count of the
// stream's ratings, their mean, the namespace it came with, the values
// the service joins); POST /v1/rank with 100 candidates named by id alone
// answers exactly (items, order, scores) what the same request with each
// candidate's namespace and profile spelled out from those answers does,
// an unknown item included; and the endpoint's mistakes are JSON 4xx
// answers counted in streamer_profile_requests_refused_total.
func TestProfilesOverHTTP(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := startRankBroker(t)
	msgs, totals := ratingMessages(6000) // on items m0 … m79
	produce(t, b, "events", msgs)
	p := startStreamer(t, b, strings.ReplaceAll(profileRankConfig, "%DIR%", t.TempDir()))
	waitFor(t, 60*time.Second, "every rating learned", func() bool {
		return p.metric(t, "streamer_model_examples", `model="rating"`) == float64(len(msgs))
	})
	for _, id := range []string{"m0", "m41", "m79"} {
		code, pr, body := getProfile(t, p.http, "/v1/profiles/item/"+id)
		tot := totals["item/"+id]
		if code != 200 || !pr.Known || pr.Events != tot.n || pr.Mean == nil || *pr.Mean-tot.sum/float64(tot.n) > 1e-9 || tot.sum/float64(tot.n)-*pr.Mean > 1e-9 {
			t.Fatalf("GET /v1/profiles/item/%s: %d %s; want %d events of mean %v", id, code, body, tot.n, tot.sum/float64(tot.n))
		}
	}
	var idOnly, spelled bytes.Buffer
	idOnly.WriteString(`{"id":"q1","key":"u7","features":{"user":{"id":"u7"}},"candidates":[`)
	spelled.WriteString(`{"id":"q1","key":"u7","features":{"user":{"id":"u7"}},"candidates":[`)
	for i := range 100 { // m80 … m99 were never rated
		if i > 0 {
			idOnly.WriteByte(',')
			spelled.WriteByte(',')
		}
		id := fmt.Sprintf("m%d", i)
		fmt.Fprintf(&idOnly, `{"item":%q}`, id)
		_, pr, _ := getProfile(t, p.http, "/v1/profiles/item/"+id)
		attrs := []byte(`{"id":"` + id + `"}`)
		if pr.Known != (i < profileItems) {
			t.Fatalf("item %s: known %v", id, pr.Known)
		}
		if pr.Known {
			attrs = pr.Attributes
		}
		fmt.Fprintf(&spelled, `{"item":%q,"features":{"item":%s,%s}}`, id, attrs, bytes.TrimSuffix(bytes.TrimPrefix(pr.Features, []byte("{")), []byte("}")))
	}
	idOnly.WriteString(`]}`)
	spelled.WriteString(`]}`)
	client := &http.Client{Timeout: 10 * time.Second}
	rank := func(body []byte) []rankedItem {
		code, out := postRank(t, client, p.http, body)
		if code != 200 {
			t.Fatalf("POST /v1/rank: %d %s", code, out)
		}
		var r struct{ Ranked []rankedItem }
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		return r.Ranked
	}
	a, c := rank(idOnly.Bytes()), rank(spelled.Bytes())
	if len(a) != 100 || len(c) != 100 {
		t.Fatalf("%d and %d items ranked, want 100", len(a), len(c))
	}
	for i := range a {
		if a[i].Item != c[i].Item || a[i].Score != c[i].Score {
			t.Fatalf("position %d: id-only %+v, spelled out %+v", i, a[i], c[i])
		}
	}
	if a[0].Score == a[99].Score {
		t.Fatalf("every candidate scored %v", a[0].Score)
	}
	// The id-only request's 20 unknown items were joined cold (the
	// spelled-out one carries its own namespace: nothing to join).
	if v := p.metric(t, "streamer_profile_joins_total", `entity="item",outcome="cold"`); v < 20 {
		t.Errorf("streamer_profile_joins_total cold: %v, want ≥ 20", v)
	}
	if v := p.metric(t, "streamer_profile_events", `entity="item"`); v != float64(len(msgs)) {
		t.Errorf("streamer_profile_events of items: %v, want %d", v, len(msgs))
	}
	for _, tc := range []struct {
		path string
		code int
	}{{"/v1/profiles/shop/1", 404}, {"/v1/profiles/item", 400}} {
		code, _, body := getProfile(t, p.http, tc.path)
		if code != tc.code || !strings.Contains(body, `"reason"`) {
			t.Errorf("GET %s: %d %s, want %d with a JSON reason", tc.path, code, body, tc.code)
		}
	}
	if v := p.metric(t, "streamer_profile_requests_refused_total", `code="404",reason="unknown_entity"`); v != 1 {
		t.Errorf("streamer_profile_requests_refused_total 404: %v, want 1", v)
	}

	// Requests and profile reads while the partitions' appliers learn
	// more ratings into the same profiles and checkpoints run (for the
	// race detector: CI runs this test with the binary built with -race).
	done := make(chan struct{})
	go func() {
		defer close(done)
		produce(t, b, "events", msgs)
	}()
	for i := 0; ; i++ {
		if code, out := postRank(t, client, p.http, idOnly.Bytes()); code != 200 {
			t.Fatalf("POST /v1/rank during the stream: %d %s", code, out)
		}
		if code, _, body := getProfile(t, p.http, fmt.Sprintf("/v1/profiles/item/m%d", i%80)); code != 200 {
			t.Fatalf("GET /v1/profiles during the stream: %d %s", code, body)
		}
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	waitFor(t, 60*time.Second, "the second pass learned", func() bool {
		return p.metric(t, "streamer_model_examples", `model="rating"`) == float64(2*len(msgs))
	})
	if _, pr, _ := getProfile(t, p.http, "/v1/profiles/item/m5"); pr.Events != 2*totals["item/m5"].n {
		t.Errorf("item m5: %d events after the second pass, want %d", pr.Events, 2*totals["item/m5"].n)
	}
}
