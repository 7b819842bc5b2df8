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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/modeltypes"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

// rollbackConfig: a global linear mam that ranks, checkpoints every
// 200 ms, versions kept, every /v1 endpoint behind a token.
const rollbackConfig = `
kafka:
  brokers: [%BROKERS%]
  group: rollback
  commit_interval: 200ms
http:
  listen: "%HTTP%"
  auth: {tokens_file: %TOKENS%}
log:
  level: info
snapshot:
  dir: %DIR%
  every: 200ms
  versions: 50
  versions_every: 0s
rank:
  model: prefs
models:
  - name: prefs
    type: mam
    kernel: {type: linear}
    features: {dim: 4}
`

const rollbackToken = "rollback-test-token-0123456789"

// producer writes labelled events to the input topic continuously, in
// batches, until paused; ids e-0, e-1, ….
type producer struct {
	t      *testing.T
	w      *kafka.Writer
	rng    *rand.Rand
	pref   []float64
	mu     sync.Mutex
	sent   int
	paused bool
	pause  chan chan struct{} // a pause request: answered once the producer waits
	resume chan struct{}
	stop   chan struct{}
	done   chan struct{}
	err    error
}

func startProducer(t *testing.T, b *stream.Broker) *producer {
	p := &producer{t: t, rng: rand.New(rand.NewPCG(7, 8)), pref: []float64{1, -0.5, 0.25, 2},
		w: &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "events", Balancer: &kafka.Murmur2Balancer{},
			BatchTimeout: 2 * time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)},
		pause: make(chan chan struct{}), resume: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	t.Cleanup(func() {
		close(p.stop)
		<-p.done
		p.w.Close()
	})
	return p
}

func (p *producer) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case ack := <-p.pause:
			close(ack)
			select {
			case <-p.resume:
			case <-p.stop:
				return
			}
		default:
		}
		msgs := make([]kafka.Message, 25)
		for i := range msgs {
			x := make([]float64, 4)
			var dot float64
			for j := range x {
				x[j] = p.rng.NormFloat64()
				dot += x[j] * p.pref[j]
			}
			y := -1
			if dot > 0 {
				y = 1
			}
			msgs[i] = kafka.Message{Key: fmt.Appendf(nil, "u%d", (p.sent+i)%7), Value: eventJSON(fmt.Sprintf("e-%d", p.sent+i), x, &y)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.w.WriteMessages(ctx, msgs...)
		cancel()
		if err != nil {
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		p.sent += len(msgs)
		p.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// Pause stops the producer between batches and returns the events sent.
func (p *producer) Pause() int {
	ack := make(chan struct{})
	select {
	case p.pause <- ack:
		<-ack
	case <-p.done:
		p.t.Fatalf("the producer stopped: %v", p.err)
	}
	return p.Sent()
}

func (p *producer) Resume() { p.resume <- struct{}{} }

func (p *producer) Sent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// adminCall sends an authenticated request to the service and returns the
// status and body.
func adminCall(t *testing.T, addr, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rollbackToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func listVersions(t *testing.T, addr string) stream.ModelListing {
	t.Helper()
	code, body := adminCall(t, addr, "GET", "/v1/models/prefs", nil)
	var m stream.ModelListing
	if code != 200 || json.Unmarshal(body, &m) != nil {
		t.Fatalf("GET /v1/models/prefs: %d %s", code, body)
	}
	return m
}

// rankScores asks POST /v1/rank for every candidate and returns the
// scores by item.
func rankScores(t *testing.T, addr string, cands [][]float64) map[string]float64 {
	t.Helper()
	code, body := adminCall(t, addr, "POST", "/v1/rank", rankRequestJSON("q", "u1", cands, len(cands)))
	var resp rankResponse
	if code != 200 || json.Unmarshal(body, &resp) != nil || len(resp.Ranked) != len(cands) {
		t.Fatalf("POST /v1/rank: %d %s", code, body)
	}
	out := map[string]float64{}
	for _, r := range resp.Ranked {
		out[r.Item] = r.Score
	}
	return out
}

// TestRollbackUnderLoad is issue 39's "done when" for rollback: on the
// real binary with events streaming in, the operator lists the versions
// over HTTP (with a token) and rolls the ranking model back to an old one;
// (a) the very next ranking request is scored by exactly that version's
// state (the version's bytes, decoded, peeked on the same candidates);
// (b) no event is lost: the stream goes on, every event produced has its
// score record, and the model's examples are the version's plus every
// labelled event consumed after the rollback, no more, no fewer; (c) the
// rollback survives a SIGKILL: restarted on the same snapshot.dir the
// model has the same examples (the version's plus those after it: fewer,
// by what the rollback dropped, than without the rollback), scores the
// candidates as before the kill, and GET /v1/models lists the rollback's
// version.
func TestRollbackUnderLoad(t *testing.T) {
	b := startBroker(t, 3)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# the test\n"+rollbackToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgYAML := strings.NewReplacer("%DIR%", state, "%TOKENS%", tokens).Replace(rollbackConfig)
	svc := startStreamer(t, b, cfgYAML)
	prod := startProducer(t, b)
	examples := func(p *proc) float64 { return p.metric(t, "streamer_model_examples", `model="prefs"`) }

	// A few checkpoints' versions while the events stream in.
	var vers stream.ModelListing
	waitFor(t, 30*time.Second, "five versions of the model", func() bool {
		vers = listVersions(t, svc.http)
		return len(vers.Versions) >= 5 && prod.Sent() >= 2000
	})
	v := vers.Versions[len(vers.Versions)-2] // an old one
	if v.Origin != snapshot.OriginCheckpoint || v.N == nil || *v.N <= 0 {
		t.Fatalf("version %+v", v)
	}

	// The stream paused and caught up, so that the model's state is
	// exactly version v's after the rollback.
	sent := prod.Pause()
	waitFor(t, 30*time.Second, "every event sent learned", func() bool {
		return svc.metric(t, "streamer_events_consumed_total", "") == float64(sent) && examples(svc) == float64(sent)
	})
	before := examples(svc)
	code, body := adminCall(t, svc.http, "POST", "/v1/models/prefs/rollback", fmt.Appendf(nil, `{"to":%d}`, v.Version))
	var rb stream.RollbackResponse
	if code != 200 || json.Unmarshal(body, &rb) != nil || rb.Model != "prefs" || rb.From != v.Version || rb.Version <= vers.Versions[0].Version {
		t.Fatalf("POST /v1/models/prefs/rollback: %d %s", code, body)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cands := make([][]float64, 12)
	for i := range cands {
		cands[i] = []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	}
	got := rankScores(t, svc.http, cands) // the next request

	// (a) Version v's state, decoded from its file, scores the same.
	types := modeltypes.New()
	cfg, err := config.Parse([]byte(strings.NewReplacer("%BROKERS%", "127.0.0.1:1", "%HTTP%", "127.0.0.1:0").Replace(cfgYAML)), nil, types)
	if err != nil {
		t.Fatal(err)
	}
	models, err := engine.BuildModels(cfg, types)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := snapshot.ReadFile(filepath.Join(state, snapshot.VersionsDir, "prefs", snapshot.FileName(v.Version)))
	if err != nil {
		t.Fatal(err)
	}
	inst := models[0].Model
	if err := inst.UnmarshalBinary(saved.Model("prefs").Data); err != nil {
		t.Fatal(err)
	}
	if inst.Examples() != *v.N {
		t.Fatalf("version %d's state has %d examples, listed %d", v.Version, inst.Examples(), *v.N)
	}
	for i, x := range cands {
		item := fmt.Sprintf("c%d", i)
		want := online.Peek(inst, x).Score
		if d := math.Abs(got[item] - want); d > 1e-12*max(1, math.Abs(want)) {
			t.Errorf("after the rollback %s scores %v; version %d's state scores %v", item, got[item], v.Version, want)
		}
	}
	if n := examples(svc); n != float64(*v.N) || float64(*v.N) >= before {
		t.Fatalf("after the rollback the model has %v examples; version %d has %d, the model had %v", n, v.Version, *v.N, before)
	}
	t.Logf("rolled back from %v examples to version %d (%d examples) as version %d; %d events sent", before, v.Version, *v.N, rb.Version, sent)

	// (b) The stream goes on: learned on the version's state, nothing lost.
	prod.Resume()
	waitFor(t, 30*time.Second, "more events after the rollback", func() bool { return prod.Sent() >= sent+1500 })
	total := prod.Pause()
	want := float64(*v.N + int64(total-sent))
	waitFor(t, 30*time.Second, "every event learned", func() bool {
		return svc.metric(t, "streamer_events_consumed_total", "") == float64(total) && examples(svc) == want
	})
	seen := map[string]bool{}
	c := newConsumer(t, b, "scores")
	for len(seen) < total {
		for _, m := range c.read(t, total-len(seen), 60*time.Second) {
			var rec struct{ ID, Model string }
			if err := json.Unmarshal(m.Value, &rec); err != nil || rec.Model != "prefs" {
				t.Fatalf("score record %s: %v", m.Value, err)
			}
			seen[rec.ID] = true
		}
	}
	for i := range total {
		if !seen[fmt.Sprintf("e-%d", i)] {
			t.Fatalf("event e-%d has no score record", i)
		}
	}
	if n := svc.metric(t, "streamer_model_rollbacks_total", `model="prefs"`); n != 1 {
		t.Errorf("streamer_model_rollbacks_total %v", n)
	}
	beforeKill := rankScores(t, svc.http, cands)

	// (c) SIGKILL, restart on the same snapshot.dir: the state derives
	// from version v, the rollback is listed.
	if err := svc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-svc.done
	svc = startStreamer(t, b, cfgYAML)
	waitFor(t, 30*time.Second, "the state restored and the events after it replayed", func() bool { return examples(svc) == want })
	after := rankScores(t, svc.http, cands)
	for item, s := range beforeKill {
		// The lanes of the partitions apply in parallel: the replay's
		// order of the partitions' events may differ in the last bits.
		if d := math.Abs(after[item] - s); d > 1e-9*max(1, math.Abs(s)) {
			t.Errorf("after the restart %s scores %v, before the kill %v", item, after[item], s)
		}
	}
	listed := listVersions(t, svc.http)
	found := false
	for _, lv := range listed.Versions {
		if lv.Version == rb.Version {
			found = lv.Origin == snapshot.OriginRollback && lv.From == v.Version && lv.N != nil && *lv.N == *v.N
		}
	}
	if !found {
		t.Fatalf("after the restart GET /v1/models does not list version %d, the rollback to %d: %+v", rb.Version, v.Version, listed.Versions)
	}
	t.Logf("after the SIGKILL and restart: %v examples (%d + %d after the rollback), version %d listed", want, *v.N, total-sent, rb.Version)
}
