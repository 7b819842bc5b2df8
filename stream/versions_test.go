package stream

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// modelsCall is one request to /v1/models and its answer.
type modelsCall struct {
	code  int
	body  []byte
	allow string
}

// errorReason is the reason of an error answer ("" when it is not one).
func (c modelsCall) errorReason(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct{ Reason, Detail string }
	}
	if err := json.Unmarshal(c.body, &e); err != nil {
		t.Fatalf("%d: the body is not JSON: %q", c.code, c.body)
	}
	return e.Error.Reason
}

// modelsClient gives up on an answer after a minute: a request that hangs
// fails its test instead of the package's timeout.
var modelsClient = &http.Client{Timeout: time.Minute}

func callModels(t *testing.T, addr, method, path, body string) modelsCall {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := modelsClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return modelsCall{code: resp.StatusCode, body: b, allow: resp.Header.Get("Allow")}
}

// refusedCount reads streamer_models_requests_refused_total{code, reason}.
func refusedCount(t *testing.T, reg prometheus.Gatherer, code, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "streamer_models_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if metricLabels(m)["code"] == code && metricLabels(m)["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func metricLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestModelsHTTP: every answer of /v1/models on a running service (in
// process, on an in-process broker): the listing, each error with its
// JSON body, status and reason, counted in
// streamer_models_requests_refused_total; a rollback whose checkpoint
// cannot be saved in time (the snapshot disk hangs) answers 503 saying the
// model is rolled back in memory, and is recorded as a version once the
// disk answers again; one that can, 200 with the new version.
func TestModelsHTTP(t *testing.T) {
	r := newDiskFullRig(t, 64<<20)
	r.cfg.HTTP.WriteTimeout = 2 * time.Second // a rollback waits 1.5 s for its checkpoint
	r.cfg.Snapshot.Versions = 10
	r.cfg.Snapshot.VersionsEvery = 0 // a version at every checkpoint
	run := r.start()
	addr, reg := run.s.Addr(), run.s.Registry()
	versions := filepath.Join(r.dir, snapshot.VersionsDir)
	for range 3 {
		r.produce(300)
		waitFor(t, 30*time.Second, "the events saved and committed", func() bool { return r.caughtUp(run.s) })
	}
	var list ModelsListing
	waitFor(t, 10*time.Second, "versions of the global model", func() bool {
		c := callModels(t, addr, "GET", "/v1/models", "")
		if c.code != 200 {
			t.Fatalf("GET /v1/models: %d %s", c.code, c.body)
		}
		if err := json.Unmarshal(c.body, &list); err != nil {
			t.Fatal(err)
		}
		// The last checkpoint's version recorded: nothing is written
		// meanwhile below.
		vers := list.Models[1].Versions
		return len(vers) >= 2 && vers[0].N != nil && *vers[0].N == int64(r.n)
	})
	keyed, global := list.Models[0], list.Models[1]
	if list.Keep != 10 || keyed.Name != "key_rbf" || !keyed.KeyScoped || len(keyed.Versions) != 0 || global.Name != "global" || global.KeyScoped ||
		global.Type != "mam" || !global.Configured {
		t.Fatalf("GET /v1/models: %+v", list)
	}
	for i, v := range global.Versions {
		if v.Origin != snapshot.OriginCheckpoint || v.N == nil || *v.N <= 0 || v.Seq == 0 || v.Bytes == 0 || v.CreatedAt.IsZero() ||
			i > 0 && (v.Version >= global.Versions[i-1].Version || *v.N >= *global.Versions[i-1].N) {
			t.Fatalf("versions of global, newest first: %+v", global.Versions)
		}
	}
	oldest := global.Versions[len(global.Versions)-1]
	var one ModelListing
	if c := callModels(t, addr, "GET", "/v1/models/global", ""); c.code != 200 || json.Unmarshal(c.body, &one) != nil || len(one.Versions) != len(global.Versions) {
		t.Fatalf("GET /v1/models/global: %d %s", c.code, c.body)
	}

	// A version written by another configuration of the model, and one
	// that does not read.
	vs, err := snapshot.OpenVersionStore(versions, 10)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := vs.Load("global", oldest.Version)
	if err != nil {
		t.Fatal(err)
	}
	m.Fingerprint = "0123456789abcdef"
	foreign, err := vs.Add(*m, snapshot.Version{Origin: snapshot.OriginCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	m.Fingerprint = "fedcba" // any: the file is damaged below
	bad, err := vs.Add(*m, snapshot.Version{Origin: snapshot.OriginCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(versions, "global", snapshot.FileName(bad.Version))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-40] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The rollbacks go to the second newest version: the oldest is pushed
	// out of the newest ten by the versions added below (under load ten
	// checkpoints may have been recorded already), and would answer 404
	// the second time.
	target := global.Versions[1]
	from, _, err := vs.Load("global", target.Version)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		method, path, body string
		code               int
		reason, allow      string
	}{
		{"PUT", "/v1/models", "", 405, "method_not_allowed", "GET"},
		{"GET", "/v1/models/global/rollback", "", 405, "method_not_allowed", "POST"},
		{"GET", "/v1/models/global/other", "", 404, "not_found", ""},
		{"GET", "/v1/models/nope", "", 404, "unknown_model", ""},
		{"POST", "/v1/models/nope/rollback", `{"to":1}`, 404, "unknown_model", ""},
		{"POST", "/v1/models/global/rollback", `{"to":999}`, 404, "unknown_version", ""},
		{"POST", "/v1/models/global/rollback", `nonsense`, 400, "bad_request", ""},
		{"POST", "/v1/models/global/rollback", `{"to":0}`, 400, "bad_request", ""},
		{"POST", "/v1/models/global/rollback", `{"to":1,"at":"now"}`, 400, "bad_request", ""},
		{"POST", "/v1/models/key_rbf/rollback", `{"to":1}`, 409, "key_scoped", ""},
		{"POST", "/v1/models/global/rollback", `{"to":` + itoa(foreign.Version) + `}`, 409, "fingerprint_mismatch", ""},
		{"POST", "/v1/models/global/rollback", `{"to":` + itoa(bad.Version) + `}`, 500, "version_corrupt", ""},
	} {
		before := refusedCount(t, reg, itoa(uint64(c.code)), c.reason)
		got := callModels(t, addr, c.method, c.path, c.body)
		if got.code != c.code || got.errorReason(t) != c.reason || got.allow != c.allow {
			t.Errorf("%s %s %s: %d %s (Allow %q), want %d %s (Allow %q)", c.method, c.path, c.body, got.code, got.body, got.allow, c.code, c.reason, c.allow)
		}
		if after := refusedCount(t, reg, itoa(uint64(c.code)), c.reason); after != before+1 {
			t.Errorf("%s %s: streamer_models_requests_refused_total{code=%d,reason=%s} went from %v to %v", c.method, c.path, c.code, c.reason, before, after)
		}
		if c.reason == "fingerprint_mismatch" && !strings.Contains(string(got.body), "0123456789abcdef") {
			t.Errorf("the mismatch does not name the version's fingerprint: %s", got.body)
		}
	}

	// The checkpoint that would save the rollback hangs: 503, rolled back
	// in memory; recorded once the disk answers.
	r.vol.Hang()
	c := callModels(t, addr, "POST", "/v1/models/global/rollback", `{"to":`+itoa(target.Version)+`}`)
	if c.code != 503 || c.errorReason(t) != "not_durable" || !strings.Contains(string(c.body), "rolled back in memory") {
		t.Errorf("rollback while the disk hangs: %d %s", c.code, c.body)
	}
	r.vol.Release()
	waitFor(t, 20*time.Second, "the rollback recorded as a version", func() bool {
		vers, _, _ := vs.List("global")
		return len(vers) > 0 && vers[0].Origin == snapshot.OriginRollback && vers[0].From == target.Version
	})
	if got := refusedCount(t, reg, "503", "not_durable"); got != 1 {
		t.Errorf("not_durable counted %v times", got)
	}

	// Now saved in time: 200 with the new version, which copies the one
	// asked for.
	c = callModels(t, addr, "POST", "/v1/models/global/rollback", `{"to":`+itoa(target.Version)+`}`)
	var rb RollbackResponse
	if c.code != 200 || json.Unmarshal(c.body, &rb) != nil || rb.Model != "global" || rb.From != target.Version || rb.Seq == 0 {
		t.Fatalf("rollback: %d %s", c.code, c.body)
	}
	vers, _, _ := vs.List("global")
	if vers[0].Version != rb.Version || vers[0].Origin != snapshot.OriginRollback || vers[0].From != target.Version || vers[0].N != *target.N {
		t.Fatalf("the rollback's version: %+v, answered %+v", vers[0], rb)
	}
	data, _, err := vs.Load("global", rb.Version)
	if err != nil {
		t.Fatal(err)
	}
	if string(data.Data) != string(from.Data) {
		t.Fatal("the rollback's version does not hold the state of the version it copies")
	}
	if _, err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func httpListen(addr string) config.HTTP { return config.HTTP{Listen: addr} }

// TestModelsHTTPRefusals: the answers that need no running service: a
// rollback on a listener open to others without a protected admin group
// (403), versions off and partition scope (501), and a rollback before the
// consumer group is joined (503), each a JSON error counted.
func TestModelsHTTPRefusals(t *testing.T) {
	refused := NewModelsRefused()
	vs, err := snapshot.OpenVersionStore(t.TempDir(), 2)
	if err != nil {
		t.Fatal(err)
	}
	on := &versionKeeper{store: vs, models: []engine.ModelInfo{{Name: "m", Type: "mam"}}, wait: time.Second}
	for _, c := range []struct {
		name           string
		p              *Pipeline
		closed         string
		method, path   string
		code           int
		reason, detail string
	}{
		{"admin open to others", &Pipeline{versions: on}, rollbackClosed(httpListen("0.0.0.0:9464")), "POST", "/v1/models/m/rollback", 403, "admin_unprotected", "http.auth.tokens_file"},
		{"versions off", &Pipeline{versions: &versionKeeper{}}, "", "GET", "/v1/models", 501, "versions_off", "snapshot.versions"},
		{"versions off, rollback", &Pipeline{versions: &versionKeeper{}}, "", "POST", "/v1/models/m/rollback", 501, "versions_off", "snapshot.dir"},
		{"partition scope", &Pipeline{partitioned: true, versions: on}, "", "GET", "/v1/models", 501, "partition_scope", "instance scope"},
		{"partition scope, rollback", &Pipeline{partitioned: true, versions: on}, "", "POST", "/v1/models/m/rollback", 501, "partition_scope", "instance scope"},
		{"not joined", &Pipeline{versions: on}, "", "POST", "/v1/models/m/rollback", 503, "not_ready", "not joined"},
	} {
		w := httptest.NewRecorder()
		c.p.ServeModels(w, httptest.NewRequest(c.method, c.path, strings.NewReader(`{"to":1}`)), refused, c.closed)
		got := modelsCall{code: w.Code, body: w.Body.Bytes()}
		if got.code != c.code || got.errorReason(t) != c.reason || !strings.Contains(string(got.body), c.detail) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s, want %d %s naming %s", c.name, got.code, got.body, c.code, c.reason, c.detail)
		}
		if n := counterValue(t, refused, itoa(uint64(c.code)), c.reason); n < 1 {
			t.Errorf("%s: not counted", c.name)
		}
	}
	for listen, open := range map[string]bool{"127.0.0.1:9464": true, "[::1]:9464": true, "localhost:9464": true, ":9464": false, "10.0.0.1:9464": false} {
		if got := rollbackClosed(httpListen(listen)) == ""; got != open {
			t.Errorf("listen %s without tokens: rollback open %v, want %v", listen, got, open)
		}
	}
	h := httpListen("0.0.0.0:9464")
	h.Auth.TokensFile, h.Auth.Protect = "tokens", []string{"rank", "admin"}
	if rollbackClosed(h) != "" {
		t.Error("admin protected with tokens: rollback refused")
	}
	h.Auth.Protect = []string{"rank"}
	if rollbackClosed(h) == "" {
		t.Error("admin not protected on a listener open to others: rollback allowed")
	}
}

func counterValue(t *testing.T, c *prometheus.CounterVec, code, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.WithLabelValues(code, reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// modelMetric reads the value of metric name with label model=model (0 when
// absent).
func modelMetric(t *testing.T, reg prometheus.Gatherer, name, model string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if metricLabels(m)["model"] == model {
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestPendingRollbackAtStart: a rollback requested while the service is
// stopped (streamer models rollback --config) is applied at start, before
// anything is consumed: the model has the version's state (its examples);
// it is recorded as a new version by the first checkpoint, and its request
// removed, so that the next start does not apply it again. A request whose
// version is already recorded (the service stopped before removing it)
// is only removed.
func TestPendingRollbackAtStart(t *testing.T) {
	r := newDiskFullRig(t, 64<<20)
	r.cfg.Snapshot.Versions = 50 // none pruned
	r.cfg.Snapshot.VersionsEvery = 0
	run := r.start()
	for range 3 {
		r.produce(200)
		waitFor(t, 30*time.Second, "the events saved and committed", func() bool { return r.caughtUp(run.s) })
	}
	if _, err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	vs, err := snapshot.OpenVersionStore(filepath.Join(r.dir, snapshot.VersionsDir), r.cfg.Snapshot.Versions)
	if err != nil {
		t.Fatal(err)
	}
	vers, _, err := vs.List("global")
	if err != nil || len(vers) < 2 {
		t.Fatalf("versions: %+v %v", vers, err)
	}
	target := vers[len(vers)-1]
	req, err := vs.RequestRollback("global", target.Version)
	if err != nil {
		t.Fatal(err)
	}

	run = r.start()
	reg := run.s.Registry()
	if n := modelMetric(t, reg, "streamer_model_examples", "global"); n != float64(target.N) {
		t.Fatalf("after the start the model has %v examples, version %d has %d", n, target.Version, target.N)
	}
	if n := modelMetric(t, reg, "streamer_model_rollbacks_total", "global"); n != 1 {
		t.Fatalf("streamer_model_rollbacks_total %v", n)
	}
	waitFor(t, 20*time.Second, "the rollback recorded and its request removed", func() bool {
		ps, _ := vs.PendingRollbacks()
		vers, _, _ := vs.List("global")
		return len(ps) == 0 && vers[0].Origin == snapshot.OriginRollback && vers[0].Request == req.ID && vers[0].From == target.Version
	})
	if _, err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	run = r.start()
	if n := modelMetric(t, run.s.Registry(), "streamer_model_rollbacks_total", "global"); n != 0 {
		t.Fatalf("the rollback applied again at the next start")
	}
	if n := modelMetric(t, run.s.Registry(), "streamer_model_examples", "global"); n != float64(target.N) {
		t.Fatalf("after a restart the model has %v examples, want %d", n, target.N)
	}
	if _, err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// Recorded, not removed: removed at start, not applied.
	req, err = vs.RequestRollback("global", target.Version)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := vs.Load("global", target.Version)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vs.Add(*m, snapshot.Version{Origin: snapshot.OriginRollback, From: target.Version, N: target.N, Request: req.ID}); err != nil {
		t.Fatal(err)
	}
	r.produce(100)
	run = r.start()
	if ps, _ := vs.PendingRollbacks(); len(ps) != 0 {
		t.Fatalf("the request of a rollback already recorded is still there: %+v", ps)
	}
	if n := modelMetric(t, run.s.Registry(), "streamer_model_rollbacks_total", "global"); n != 0 {
		t.Fatal("a rollback already recorded applied again")
	}
	waitFor(t, 30*time.Second, "the events saved and committed", func() bool { return r.caughtUp(run.s) })
	if n := modelMetric(t, run.s.Registry(), "streamer_model_examples", "global"); n != float64(target.N+100) {
		t.Fatalf("the model has %v examples, want %d", n, target.N+100)
	}
	if _, err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}
