package stream

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// NewProfileRefused returns the counter of GET /v1/profiles requests
// answered with an error, by HTTP status code and reason.
func NewProfileRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_profile_requests_refused_total",
		Help: "GET /v1/profiles requests answered with an error (a JSON body names the reason), by HTTP status code and reason."},
		[]string{"code", "reason"})
	c.WithLabelValues("400", "bad_request")
	c.WithLabelValues("404", "unknown_entity")
	return c
}

// GET /v1/profiles/{entity}/{id}: an entity's profile as the service
// keeps it (stream/profile), and the values it joins to the events and
// candidates that name the entity — what a client spells out to send a
// candidate with its features instead of its id.

// profileResponse is the answer of GET /v1/profiles/{entity}/{id}.
type profileResponse struct {
	Entity string `json:"entity"`
	ID     string `json:"id"`
	// Known is false for an id the service has no profile of: the values
	// are then the cold defaults.
	Known  bool     `json:"known"`
	Events int64    `json:"events"`
	Labels int64    `json:"labels"`
	Mean   *float64 `json:"mean,omitempty"`
	// FirstSeen and LastSeen are unix milliseconds of the events' times.
	FirstSeen *int64 `json:"first_seen,omitempty"`
	LastSeen  *int64 `json:"last_seen,omitempty"`
	// Attributes is the entity's namespace as its last event carried it.
	Attributes json.RawMessage `json:"attributes,omitempty"`
	// Features are the members of a features object the service joins.
	Features json.RawMessage `json:"features"`
}

// ServeProfile is the handler of GET /v1/profiles/{entity}/{id}. In
// partition scope an item's profile is its partition's part: the handler
// answers in instance scope only.
// Its errors are counted in refused (NewProfileRefused).
func (p *Pipeline) ServeProfile(w http.ResponseWriter, req *http.Request, refused *prometheus.CounterVec) {
	fail := func(status int, reason, detail string) { WriteRankError(w, refused, status, reason, detail) }
	if req.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		fail(http.StatusMethodNotAllowed, reasonMethod, req.Method+" "+req.URL.Path+": use GET")
		return
	}
	entity, id, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v1/profiles/"), "/")
	if !ok || entity == "" || id == "" {
		fail(http.StatusBadRequest, "bad_request", "want /v1/profiles/{entity}/{id}")
		return
	}
	if p.partitioned {
		fail(http.StatusNotImplemented, "partition_scope", "in partition scope each partition keeps its part of a profile; GET /v1/profiles answers in instance scope")
		return
	}
	if !p.Ready() {
		fail(http.StatusServiceUnavailable, reasonNotReady, "the consumer group is not joined")
		return
	}
	p.mu.Lock()
	sh := p.shards[""]
	p.mu.Unlock()
	if sh == nil || sh.st == nil {
		fail(http.StatusServiceUnavailable, reasonNotReady, "no state yet")
		return
	}
	sh.lock()
	st, values, found := sh.st.Profile(entity, []byte(id))
	resp := profileResponse{Entity: entity, ID: id, Features: values}
	if st != nil && st.Events > 0 {
		resp.Known, resp.Events, resp.Labels = true, st.Events, st.Labels
		first, last := st.First, st.Last
		resp.FirstSeen, resp.LastSeen = &first, &last
		if st.Labels > 0 {
			m := st.Mean
			resp.Mean = &m
		}
		if len(st.Attrs) > 0 {
			resp.Attributes = append(json.RawMessage(nil), st.Attrs...)
		}
	}
	sh.unlock()
	if !found {
		fail(http.StatusNotFound, "unknown_entity", "no profile of entity "+entity+" is configured (profiles[].entity)")
		return
	}
	b, _ := json.Marshal(resp)
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(append(b, '\n'))
}
