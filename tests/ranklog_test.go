package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestRankLogReplays: with rank.log_topic, every POST /v1/rank answered is
// logged (the request as received, keyed by its key; its response on
// rank.response_topic), so that `streamer eval --log` replays HTTP-served
// rankings as it replays requests read from Kafka: the dumps of the input
// topic and the log topic, merged by time, and of the response topic.
// Every request is replayed with its logged decision (its first item and
// that item's propensity: the replay ranks the other places itself, so a
// label of a later place may find its item not shown), every first
// item's label joins, and the labelled first items and the logged reward
// are the service's own (streamer_ope_*). A request the service refused
// (400) is not logged.
func TestRankLogReplays(t *testing.T) {
	useFastBinary(t)
	b := startRankBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.CreateTopic(ctx, "ranklog", 3); err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(hashRankConfig, "%DIR%", t.TempDir())
	cfg = strings.Replace(cfg, "  response_topic: ranked\n", "  response_topic: ranked\n  log_topic: ranklog\n", 1)
	p := startStreamer(t, b, cfg)
	const users, items, requests, cands, k = 10, 60, 300, 8, 3
	w := newCatWorld(users, items, 5)
	rng := rand.New(rand.NewPCG(5, 1))
	client := &http.Client{Timeout: 10 * time.Second}
	var labels []kafka.Message
	for r := range requests {
		u := rng.IntN(users)
		id := fmt.Sprintf("q%d", r)
		code, out := postRank(t, client, p.http, w.request(id, u, rng.Perm(items)[:cands], k))
		var resp struct{ Ranked []rankedItem }
		if code != http.StatusOK || json.Unmarshal(out, &resp) != nil || len(resp.Ranked) != k {
			t.Fatalf("request %d: %d %s", r, code, out)
		}
		clicks, _ := w.clicks(id, u, resp.Ranked, rng)
		labels = append(labels, clicks...)
		if len(labels) >= 60 {
			produce(t, b, "events", labels)
			labels = labels[:0]
		}
	}
	produce(t, b, "events", labels)
	if code, _ := postRank(t, client, p.http, []byte(`{"id":"bad","key":"u1"}`)); code != http.StatusBadRequest {
		t.Fatalf("a request without candidates: %d", code)
	}
	waitFor(t, 60*time.Second, "every label joined", func() bool {
		return p.metric(t, "streamer_labels_total", `outcome="joined"`) == requests*k
	})
	liveLabels := p.metric(t, "streamer_ope_labels_total", "")
	liveLogged := p.metric(t, "streamer_ope_value", `estimator="observed",policy="logged"`)

	// The dumps, as kcat writes them: the input topic and the log topic
	// merged by time (timed lines), the response topic's values.
	dir := t.TempDir()
	logged := newConsumer(t, b, "ranklog").read(t, requests, 30*time.Second)
	input := append(newConsumer(t, b, "events").read(t, requests*k, 30*time.Second), logged...)
	sort.SliceStable(input, func(i, j int) bool { return input[i].Time.Before(input[j].Time) })
	var in, resp strings.Builder
	for _, m := range input {
		fmt.Fprintf(&in, "%d\t%s\t%s\n", m.Time.UnixMilli(), m.Key, m.Value)
	}
	for _, m := range newConsumer(t, b, "ranked").read(t, requests, 30*time.Second) {
		fmt.Fprintf(&resp, "%s\n", m.Value)
	}
	for _, m := range logged {
		var req struct{ ID, Key string }
		if json.Unmarshal(m.Value, &req) != nil || req.ID == "bad" || req.Key != string(m.Key) {
			t.Fatalf("a logged request: key %q, %s", m.Key, m.Value)
		}
	}
	inPath, respPath, cfgPath := filepath.Join(dir, "input.log"), filepath.Join(dir, "responses.jsonl"), filepath.Join(dir, "config.yaml")
	for path, s := range map[string]string{inPath: in.String(), respPath: resp.String(),
		cfgPath: strings.NewReplacer("%BROKERS%", strings.Join(b.Addrs(), ","), "%HTTP%", "127.0.0.1:0").Replace(cfg)} {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	if o, err := exec.Command(binary, "eval", "-c", cfgPath, "--log", inPath, "--responses", respPath, "--log-format", "timed", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("streamer eval --log: %v\n%s", err, o)
	}
	raw, err := os.ReadFile(filepath.Join(out, "ope.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Counts struct {
			Requests       int64 `json:"requests"`
			RequestsLogged int64 `json:"requests_logged"`
			LabelsJoined   int64 `json:"labels_joined"`
			Skipped        int64 `json:"skipped"`
		} `json:"counts"`
		OPE struct {
			Labels int64    `json:"labels"`
			Logged *float64 `json:"logged"`
		} `json:"ope"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Counts
	t.Logf("replay: %+v; labelled first items %d (live %v), logged reward %v (live %v)", c, rep.OPE.Labels, liveLabels, *rep.OPE.Logged, liveLogged)
	if c.Requests != requests || c.RequestsLogged != requests || c.LabelsJoined < requests || c.Skipped != 0 {
		t.Errorf("replay counts %+v: want %d requests, each with its logged decision, at least their first items' labels joined, none skipped", c, requests)
	}
	if rep.OPE.Labels != requests || float64(rep.OPE.Labels) != liveLabels || rep.OPE.Logged == nil || math.Abs(*rep.OPE.Logged-liveLogged) > 1e-9 {
		t.Errorf("replay: %d labelled first items, logged reward %v; live %v, %v", rep.OPE.Labels, rep.OPE.Logged, liveLabels, liveLogged)
	}
}
