package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// The model versions over HTTP, the admin group of http.auth.protect
// (versions.go keeps them):
//
//	GET  /v1/models                        every configured model and its versions, newest first
//	GET  /v1/models/{model}                one model's
//	POST /v1/models/{model}/rollback       {"to": V}: roll the model back to version V
//
// Errors are JSON ({"error": {"reason", "detail"}}, as POST /v1/rank's),
// counted in streamer_models_requests_refused_total{code, reason}.

// The reasons of the /v1/models errors beside POST /v1/rank's.
const (
	reasonUnknownModel     = "unknown_model"        // 404
	reasonUnknownVersion   = "unknown_version"      // 404
	reasonNotFound         = "not_found"            // 404: no such endpoint under /v1/models
	reasonKeyScoped        = "key_scoped"           // 409
	reasonMismatch         = "fingerprint_mismatch" // 409
	reasonAdminUnprotected = "admin_unprotected"    // 403
	reasonVersionsOff      = "versions_off"         // 501
	reasonPartitionScope   = "partition_scope"      // 501
	reasonRefitting        = "refitting"            // 503
	reasonNotDurable       = "not_durable"          // 503: rolled back in memory, saved by a later checkpoint
	reasonVersionCorrupt   = "version_corrupt"      // 500
	reasonNotRecorded      = "version_not_recorded" // 500: rolled back and saved, its version not written
	reasonBadRequest       = "bad_request"          // 400
)

// NewModelsRefused returns the counter of /v1/models requests answered
// with an error, by HTTP status code and reason.
func NewModelsRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_models_requests_refused_total",
		Help: "GET /v1/models and POST /v1/models/{model}/rollback requests answered with an error (a JSON body names the reason), by HTTP status code and reason."},
		[]string{"code", "reason"})
	c.WithLabelValues("403", reasonAdminUnprotected)
	c.WithLabelValues("404", reasonUnknownVersion)
	c.WithLabelValues("409", reasonMismatch)
	return c
}

// writeModelsError answers with an error, counted in refused; allow is
// the method a 405 names.
func writeModelsError(w http.ResponseWriter, refused *prometheus.CounterVec, status int, reason, detail, allow string) {
	refused.WithLabelValues(strconv.Itoa(status), reason).Inc()
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Cache-Control", "no-store")
	if allow != "" {
		h.Set("Allow", allow)
	}
	w.WriteHeader(status)
	_, _ = w.Write(errorJSON(reason, detail))
}

// ModelsListing is the answer of GET /v1/models (and what `streamer
// models list --json` prints).
type ModelsListing struct {
	Keep   int            `json:"keep"` // snapshot.versions
	Models []ModelListing `json:"models"`
}

// ModelListing is one model's entry of a ModelsListing.
type ModelListing struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	KeyScoped bool   `json:"key_scoped"` // no versions: its state is its keys'
	// Configured is false for versions of a model no longer configured.
	Configured bool             `json:"configured"`
	Versions   []VersionListing `json:"versions"` // newest first
	// Corrupt lists the version files that do not read.
	Corrupt []CorruptVersion `json:"corrupt,omitempty"`
	// PendingRollback is a rollback requested with `streamer models
	// rollback` while the service was stopped, applied at its start.
	PendingRollback *uint64 `json:"pending_rollback,omitempty"`
}

// VersionListing describes a version.
type VersionListing struct {
	Version   uint64    `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	Seq       uint64    `json:"seq"`            // the snapshot that saved it
	N         *int64    `json:"n"`              // examples learned; null when unknown
	Origin    string    `json:"origin"`         // checkpoint | rollback
	From      uint64    `json:"from,omitempty"` // rollback: the version it copies
	Bytes     int       `json:"bytes"`
}

// CorruptVersion is a version file that does not read.
type CorruptVersion struct {
	Version uint64 `json:"version"`
	Error   string `json:"error"`
}

// ListModels lists models (those configured) and their versions in vs
// (nil: none), with the versions of models no longer configured after
// them; only (non-empty) keeps the model of that name.
func ListModels(vs *snapshot.VersionStore, models []engine.ModelInfo, only string) (ModelsListing, error) {
	var out ModelsListing
	var stored []string
	if vs != nil {
		out.Keep = vs.Keep()
		var err error
		if stored, err = vs.Models(); err != nil {
			return out, err
		}
	}
	entries := make([]ModelListing, 0, len(models))
	for _, m := range models {
		entries = append(entries, ModelListing{Name: m.Name, Type: m.Type, KeyScoped: m.KeyScoped, Configured: true, Versions: []VersionListing{}})
	}
	for _, name := range stored {
		if !slices.ContainsFunc(models, func(m engine.ModelInfo) bool { return m.Name == name }) {
			entries = append(entries, ModelListing{Name: name, Versions: []VersionListing{}})
		}
	}
	var pending []snapshot.PendingRollback
	if vs != nil {
		pending, _ = vs.PendingRollbacks() // a bad request file stops the next start, naming it
	}
	for i := range entries {
		e := &entries[i]
		if only != "" && e.Name != only {
			continue
		}
		if vs == nil || !slices.Contains(stored, e.Name) {
			continue
		}
		vers, bad, err := vs.List(e.Name)
		if err != nil {
			return out, err
		}
		for _, v := range vers {
			vl := VersionListing{Version: v.Version, CreatedAt: v.CreatedAt, Seq: v.Seq, Origin: v.Origin, From: v.From, Bytes: v.Bytes}
			if v.N >= 0 {
				n := v.N
				vl.N = &n
			}
			if e.Type == "" {
				e.Type = v.Type
			}
			e.Versions = append(e.Versions, vl)
		}
		for _, b := range bad {
			e.Corrupt = append(e.Corrupt, CorruptVersion{Version: b.Version, Error: b.Err.Error()})
		}
		for _, p := range pending {
			if p.Model == e.Name {
				to := p.To
				e.PendingRollback = &to
			}
		}
	}
	if only != "" {
		entries = slices.DeleteFunc(entries, func(e ModelListing) bool { return e.Name != only })
	}
	out.Models = entries
	return out, nil
}

// RollbackResponse is the answer of POST /v1/models/{model}/rollback.
type RollbackResponse struct {
	Model   string `json:"model"`
	Version uint64 `json:"version"` // the new version recording the rollback
	From    uint64 `json:"from"`    // the version whose state the model now has
	Seq     uint64 `json:"seq"`     // the snapshot that saved it
}

// rollbackRequest is the body of POST /v1/models/{model}/rollback.
type rollbackRequest struct {
	To uint64 `json:"to"`
}

// serveModels serves /v1/models and /v1/models/ on mux, answering once
// start-up is done (s.ranker).
func (s *Service) serveModels(mux *http.ServeMux) error {
	refused := NewModelsRefused()
	if err := s.reg.Register(refused); err != nil {
		return err
	}
	closed := rollbackClosed(s.cfg.HTTP)
	h := func(w http.ResponseWriter, r *http.Request) {
		p := s.ranker.Load()
		if p == nil {
			writeModelsError(w, refused, http.StatusServiceUnavailable, reasonNotReady, s.NotReady(), "")
			return
		}
		p.ServeModels(w, r, refused, closed)
	}
	mux.HandleFunc("/v1/models", h)
	mux.HandleFunc("/v1/models/", h)
	return nil
}

// rollbackClosed says why a rollback over HTTP is refused on the listener
// of h: "" when the admin group needs a token, or only the host itself
// reaches http.listen (a loopback address).
func rollbackClosed(h config.HTTP) string {
	if h.Auth.Enabled() && slices.Contains(h.Auth.Protect, config.GroupAdmin) {
		return ""
	}
	host, _, err := net.SplitHostPort(h.Listen)
	if ip := net.ParseIP(host); err == nil && (host == "localhost" || ip != nil && ip.IsLoopback()) {
		return ""
	}
	return "a rollback changes what every caller is served: it needs http.auth.tokens_file with admin in http.auth.protect (the default), " +
		"or http.listen on a loopback address (" + h.Listen + " is not)"
}

// ServeModels is the handler of /v1/models (the file's doc): closed says
// why rollbacks are refused ("" = they are not).
func (p *Pipeline) ServeModels(w http.ResponseWriter, req *http.Request, refused *prometheus.CounterVec, closed string) {
	fail := func(status int, reason, detail string) { writeModelsError(w, refused, status, reason, detail, "") }
	rest := strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, "/v1/models"), "/")
	model, action, _ := strings.Cut(rest, "/")
	switch {
	case action == "rollback":
		if req.Method != http.MethodPost {
			writeModelsError(w, refused, http.StatusMethodNotAllowed, reasonMethod, req.Method+" "+req.URL.Path+": use POST", http.MethodPost)
			return
		}
		p.serveRollback(w, req, model, closed, fail)
		return
	case action != "" || strings.Contains(rest, "//"):
		fail(http.StatusNotFound, reasonNotFound, "no endpoint "+req.URL.Path+": GET /v1/models, GET /v1/models/{model}, POST /v1/models/{model}/rollback")
		return
	case req.Method != http.MethodGet:
		writeModelsError(w, refused, http.StatusMethodNotAllowed, reasonMethod, req.Method+" "+req.URL.Path+": use GET", http.MethodGet)
		return
	}
	if status, reason, detail := p.versionsServed(); status != 0 {
		fail(status, reason, detail)
		return
	}
	k := p.versions
	if model != "" {
		if _, ok := k.model(model); !ok {
			fail(http.StatusNotFound, reasonUnknownModel, "no model "+model+" is configured")
			return
		}
	}
	list, err := ListModels(k.store, k.models, model)
	if err != nil {
		fail(http.StatusInternalServerError, reasonInternal, err.Error())
		return
	}
	var b []byte
	if model != "" {
		b, _ = json.Marshal(list.Models[0])
	} else {
		b, _ = json.Marshal(list)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// versionsServed says why the versions are not served (status 0: they
// are).
func (p *Pipeline) versionsServed() (status int, reason, detail string) {
	switch {
	case p.partitioned:
		return http.StatusNotImplemented, reasonPartitionScope, "in partition scope each partition keeps its own state of a model: model versions and rollback are kept in instance scope only"
	case !p.versions.on():
		return http.StatusNotImplemented, reasonVersionsOff, errVersionsOff.Error()
	}
	return 0, "", ""
}

// serveRollback rolls model back to the version the body names, and
// answers once the checkpoint that saves it is durable and its version
// recorded (200), or when it is not within the keeper's wait (503: rolled
// back in memory, saved by a later checkpoint).
func (p *Pipeline) serveRollback(w http.ResponseWriter, req *http.Request, model, closed string, fail func(int, string, string)) {
	if closed != "" {
		fail(http.StatusForbidden, reasonAdminUnprotected, closed)
		return
	}
	if status, reason, detail := p.versionsServed(); status != 0 {
		fail(status, reason, detail)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<10+1))
	if err != nil {
		fail(http.StatusBadRequest, reasonReadError, err.Error())
		return
	}
	var rr rollbackRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	switch err := dec.Decode(&rr); {
	case len(body) > 4<<10:
		fail(http.StatusBadRequest, reasonBadRequest, "the body is larger than 4 KiB: send {\"to\": VERSION}")
		return
	case err != nil:
		fail(http.StatusBadRequest, reasonBadRequest, "the body is not {\"to\": VERSION}: "+err.Error())
		return
	case rr.To == 0:
		fail(http.StatusBadRequest, reasonBadRequest, "\"to\" must be a version number ≥ 1 (GET /v1/models lists them)")
		return
	}
	if !p.Ready() {
		fail(http.StatusServiceUnavailable, reasonNotReady, "the consumer group is not joined: the checkpoint that saves a rollback cannot run")
		return
	}
	start := time.Now() // the answer within the keeper's wait, a refit waited for included
	rb, err := p.RollBack(req.Context(), model, rr.To, nil)
	var mismatch *engine.StateMismatchError
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrUnknownModel):
		fail(http.StatusNotFound, reasonUnknownModel, "no model "+model+" is configured")
		return
	case errors.Is(err, snapshot.ErrNoVersion):
		fail(http.StatusNotFound, reasonUnknownVersion, fmt.Sprintf("model %s has no version %d (GET /v1/models/%s lists those kept)", model, rr.To, model))
		return
	case errors.Is(err, engine.ErrKeyScopedModel):
		fail(http.StatusConflict, reasonKeyScoped, err.Error()+": key-scoped models have no versions")
		return
	case errors.As(err, &mismatch):
		fail(http.StatusConflict, reasonMismatch, fmt.Sprintf("version %d of model %s was written by another configuration of the model (type %s, fingerprint %s); "+
			"the model is configured now as type %s, fingerprint %s: roll back to a version written by this configuration", rr.To, model,
			mismatch.SavedType, mismatch.SavedFingerprint, mismatch.Type, mismatch.Fingerprint))
		return
	case errors.Is(err, snapshot.ErrCorrupt):
		fail(http.StatusInternalServerError, reasonVersionCorrupt, fmt.Sprintf("version %d of model %s does not read: %v", rr.To, model, err))
		return
	case errors.Is(err, engine.ErrRefitting):
		fail(http.StatusServiceUnavailable, reasonRefitting, err.Error()+" and did not finish within "+p.versions.wait.String()+": nothing changed; try again")
		return
	default:
		fail(http.StatusInternalServerError, reasonInternal, err.Error())
		return
	}
	wait := time.NewTimer(max(time.Millisecond, p.versions.wait-time.Since(start)))
	defer wait.Stop()
	select {
	case r := <-rb.done:
		if r.err != nil {
			fail(http.StatusInternalServerError, reasonNotRecorded, fmt.Sprintf("model %s is rolled back to the state of version %d and that state is saved, "+
				"but the version recording the rollback could not be written (the next checkpoint tries again): %v", model, rr.To, r.err))
			return
		}
		b, _ := json.Marshal(RollbackResponse{Model: model, Version: r.version.Version, From: rr.To, Seq: r.version.Seq})
		h := w.Header()
		h["Content-Type"] = jsonContentType
		h.Set("Cache-Control", "no-store")
		_, _ = w.Write(append(b, '\n'))
	case <-wait.C:
		fail(http.StatusServiceUnavailable, reasonNotDurable, fmt.Sprintf("model %s is rolled back in memory to the state of version %d and serves it, "+
			"but the checkpoint that saves it did not finish within %v: the next checkpoint saves it and records it as a new version (GET /v1/models/%s lists it then)",
			model, rr.To, p.versions.wait, model))
	case <-req.Context().Done():
	}
}
