package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/wire"
)

// POST /v1/rank: a ranking request over HTTP, answered from the live state
// of the shard that owns the request's key, under the shard's lock (as one
// more event of its stream: a consistent read that does not stop the
// stream). The body is the request event; the response the ranking record.

// RankHTTPConfig configures POST /v1/rank (Pipeline.ServeRank).
type RankHTTPConfig struct {
	// Partitioner maps a key to its input partition as the producers do:
	// "murmur2", "fnv1a" or "crc32".
	Partitioner string
	// Partitions returns the number of partitions of the input topic (from
	// the brokers' metadata). It is asked off the requests' path: when the
	// consumer group assigns partitions and every minute after
	// (refreshPartitions); a request asks it only while no answer is kept.
	Partitions func(ctx context.Context) (int, error)
	MaxBytes   int // the largest body
	// Registerer receives the metrics of the partitioner's check
	// (partguard.go); nil: none.
	Registerer prometheus.Registerer
	// Refused counts the requests refused, by code and reason
	// (NewRankRefused); nil: not counted.
	Refused *prometheus.CounterVec
	// LogTopic, when set, receives every request answered, as received
	// and keyed by its key, and the engine's response topic its response:
	// the exploration log of rank.log_topic.
	LogTopic string
}

// NewRankRefused returns streamer_rank_refused_total, the counter of the
// POST /v1/rank requests answered with an error, by HTTP status code and
// reason (the reasons of the dead-letter topic, and the service's own:
// not_ready, misdirected, ranking_off, method_not_allowed, read_error,
// internal). The codes and reasons a client's mistake gives start at 0.
func NewRankRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_rank_refused_total",
		Help: "POST /v1/rank requests answered with an error (4xx, 5xx; a JSON body names the reason), by HTTP status code and reason."},
		[]string{"code", "reason"})
	for _, r := range []wire.Reason{wire.ReasonNotJSON, wire.ReasonBadRequest, wire.ReasonWrongType, wire.ReasonWrongDimension,
		wire.ReasonMissingFeatures, wire.ReasonNonFinite, wire.ReasonOutOfRange, wire.ReasonTooManyFeatures} {
		c.WithLabelValues("400", string(r))
	}
	c.WithLabelValues("413", string(wire.ReasonTooLarge))
	c.WithLabelValues("503", reasonNotReady)
	return c
}

// The reasons of POST /v1/rank's errors beside the wire's.
const (
	reasonNotReady    = "not_ready"          // 503: start-up not done, or the group not joined
	reasonMisdirected = "misdirected"        // 421: another instance owns the key's partition
	reasonRankingOff  = "ranking_off"        // 404: no rank.model
	reasonMethod      = "method_not_allowed" // 405: not a POST
	reasonReadError   = "read_error"         // 400: the body could not be read
	reasonInternal    = "internal"           // 500
)

// rankHTTP is the pipeline's state for POST /v1/rank.
type rankHTTP struct {
	cfg      RankHTTPConfig
	balancer kafka.Balancer
	dec      *wire.Decoder
	pool     sync.Pool // *wire.Event
	bufs     sync.Pool // *rankBufs

	mu    sync.Mutex
	parts []int // 0..n−1 for the balancer
	keyed bool  // a model is key-scoped: its keys live where their partition is consumed

	guard *partitionGuard // checks Partitioner against the events consumed
}

// EnableRankHTTP makes ServeRank answer requests; without it (or without
// ranking requests configured) ServeRank answers 404.
func (p *Pipeline) EnableRankHTTP(cfg RankHTTPConfig) error {
	p.rankRefused = cfg.Refused // ranking off: its 404s are counted too
	e := p.engine
	if e == nil || !e.Ranks() {
		return nil
	}
	r := &rankHTTP{cfg: cfg}
	switch cfg.Partitioner {
	case "murmur2", "":
		r.balancer = kafka.Murmur2Balancer{Consistent: true}
	case "fnv1a":
		r.balancer = &kafka.Hash{}
	case "crc32":
		r.balancer = kafka.CRC32Balancer{Consistent: true}
	default:
		return fmt.Errorf("stream: partitioner %q", cfg.Partitioner)
	}
	name := cfg.Partitioner
	if name == "" {
		name = "murmur2"
	}
	r.guard = newPartitionGuard(name, r.balancer, cfg.Registerer, p.log)
	dec, err := e.RequestDecoder(cfg.MaxBytes)
	if err != nil {
		return err
	}
	r.dec = dec
	r.pool.New = func() any { return new(wire.Event) }
	r.bufs.New = func() any { return new(rankBufs) }
	r.keyed = e.KeyScoped()
	p.rank = r
	return nil
}

// rankError is an error answer of POST /v1/rank: its status code, and the
// reason and detail of its JSON body.
type rankError struct {
	status         int
	reason, detail string
}

func (e *rankError) Error() string { return e.reason + ": " + e.detail }

// WriteRankError answers a POST /v1/rank request with an error — status,
// and {"error": {"reason": reason, "detail": detail}} — counting it in
// refused (nil: not counted).
func WriteRankError(w http.ResponseWriter, refused *prometheus.CounterVec, status int, reason, detail string) {
	if refused != nil {
		refused.WithLabelValues(strconv.Itoa(status), reason).Inc()
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Cache-Control", "no-store")
	if status == http.StatusMethodNotAllowed && h.Get("Allow") == "" { // the API's endpoints take POST
		h.Set("Allow", http.MethodPost)
	}
	w.WriteHeader(status)
	_, _ = w.Write(errorJSON(reason, detail))
}

// errorJSON is the body of every error of the HTTP API, {"error":
// {"reason": reason, "detail": detail}} and a newline, with <, > and & as
// they are (a detail says `Bearer <token>`), not as encoding/json's \u003c
// escapes for HTML.
func errorJSON(reason, detail string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(rankErrorBody{Error: rankErrorFields{Reason: reason, Detail: detail}})
	return b.Bytes()
}

type rankErrorBody struct {
	Error rankErrorFields `json:"error"`
}

type rankErrorFields struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// ServeRank is the handler of POST /v1/rank.
func (p *Pipeline) ServeRank(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	r := p.rank
	if r == nil {
		WriteRankError(w, p.rankRefused, http.StatusNotFound, reasonRankingOff, "ranking requests are off: set rank.model")
		return
	}
	fail := func(status int, reason, detail string) { WriteRankError(w, r.cfg.Refused, status, reason, detail) }
	if req.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, reasonMethod, req.Method+" /v1/rank: send the request with POST")
		return
	}
	bufs := r.bufs.Get().(*rankBufs)
	defer r.bufs.Put(bufs)
	ctx := req.Context()
	reg := trace.StartRegion(ctx, "rank: read")
	body, err := readBody(bufs.body[:0], req.Body, req.ContentLength, r.cfg.MaxBytes+1)
	reg.End()
	bufs.body = body[:0]
	if err != nil {
		fail(http.StatusBadRequest, reasonReadError, "reading the request: "+err.Error())
		return
	}
	if len(body) > r.cfg.MaxBytes {
		fail(http.StatusRequestEntityTooLarge, string(wire.ReasonTooLarge), fmt.Sprintf("the request is over %d bytes (kafka.max_message_bytes)", r.cfg.MaxBytes))
		return
	}
	out, err := p.Rank(ctx, body, bufs.out[:0])
	if err != nil {
		var re *rankError
		if !errors.As(err, &re) {
			re = &rankError{http.StatusInternalServerError, reasonInternal, err.Error()}
		}
		fail(re.status, re.reason, re.detail)
		return
	}
	out = append(out, '\n')
	bufs.out = out[:0]
	w.Header()["Content-Type"] = jsonContentType
	reg = trace.StartRegion(ctx, "rank: write")
	_, _ = w.Write(out)
	reg.End()
	p.engine.RankServed(time.Since(start))
}

// jsonContentType is the Content-Type of the responses (shared, never
// modified: setting it allocates nothing).
var jsonContentType = []string{"application/json"}

// rankBufs are a request's body and response buffers, kept in a pool so
// that a request allocates neither (their size is bounded by
// kafka.max_message_bytes).
type rankBufs struct{ body, out []byte }

// readBody appends what rd yields to dst, up to limit bytes (more is not
// read: the caller tells a body over limit − 1 bytes by its length); n is
// the body's announced length (−1: unknown), which sizes dst once.
func readBody(dst []byte, rd io.Reader, n int64, limit int) ([]byte, error) {
	if n >= 0 && n < int64(limit) {
		dst = slices.Grow(dst, int(n)+1) // + 1: room for the read that sees EOF
	}
	for len(dst) < limit {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(len(dst), 4096), limit-len(dst)))
		}
		m, err := rd.Read(dst[len(dst):min(cap(dst), limit)])
		dst = dst[:len(dst)+m]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// Rank answers the ranking request body: the response record appended to
// dst, or a *rankError saying why not.
func (p *Pipeline) Rank(ctx context.Context, body, dst []byte) ([]byte, error) {
	r := p.rank
	ev := r.pool.Get().(*wire.Event)
	defer r.pool.Put(ev)
	reg := trace.StartRegion(ctx, "rank: decode")
	err := r.dec.Decode(body, ev)
	reg.End()
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			return nil, &rankError{http.StatusBadRequest, string(we.Reason), we.Detail}
		}
		return nil, &rankError{http.StatusBadRequest, string(wire.ReasonBadRequest), err.Error()}
	}
	if !ev.IsRequest {
		return nil, &rankError{http.StatusBadRequest, string(wire.ReasonBadRequest), "not a ranking request (no candidates)"}
	}
	if len(ev.Key) == 0 {
		return nil, &rankError{http.StatusBadRequest, string(wire.ReasonBadRequest),
			"key: missing: the key the candidates are ranked for, as the input topic's messages are keyed (e.g. the user's id)"}
	}
	if !p.Ready() {
		return nil, &rankError{http.StatusServiceUnavailable, reasonNotReady, "the consumer group is not joined"}
	}
	sh, err := p.rankShard(ctx, ev.Key)
	if err != nil {
		return nil, err
	}
	reg = trace.StartRegion(ctx, "rank: wait for the shard")
	wait := time.Now()
	sh.lock()
	defer sh.unlock()
	p.engine.RankWaited(time.Since(wait))
	reg.End()
	defer trace.StartRegion(ctx, "rank: rank").End()
	out := sh.st.Rank(dst, ev)
	if t := r.cfg.LogTopic; t != "" {
		// The request and its decision, as one read from Kafka would
		// leave them, stamped with the answer's time: a label the client
		// sends after the answer comes after them in time, whenever the
		// producer's batch goes out.
		// The key is copied: ev's buffers go back to the pool.
		now, key := time.Now(), bytes.Clone(ev.Key)
		p.pub.Publish(kafka.Message{Topic: t, Key: key, Value: append(p.pub.Buffer(), body...), Time: now})
		p.pub.Publish(kafka.Message{Topic: p.engine.ResponseTopic(), Key: key, Value: append(p.pub.Buffer(), out...), Time: now})
	}
	return out, nil
}

// rankShard returns the shard that owns key: in partition scope the key's
// partition's, in instance scope the instance's (when a model is
// key-scoped, only if the instance consumes the key's partition, where the
// key's state lives).
func (p *Pipeline) rankShard(ctx context.Context, key []byte) (*pshard, error) {
	r := p.rank
	if !p.partitioned && !r.keyed {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.shards[""], nil
	}
	part, err := r.partition(ctx, key)
	if err != nil {
		return nil, &rankError{http.StatusServiceUnavailable, reasonNotReady, "the input topic's partitions: " + err.Error()}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sh := p.shards[""]
	if p.partitioned {
		sh = p.shards[strconv.Itoa(part)]
	}
	if sh == nil || !p.owned[part] {
		owned := make([]int, 0, len(p.owned))
		for o := range p.owned {
			owned = append(owned, o)
		}
		slices.Sort(owned)
		list := make([]string, len(owned))
		for i, o := range owned {
			list[i] = strconv.Itoa(o)
		}
		return nil, &rankError{http.StatusMisdirectedRequest, reasonMisdirected, fmt.Sprintf(
			"key %q is in partition %d of the input topic (rank.partitioner %s), which another instance owns: this one owns [%s]; ask that instance",
			key, part, r.cfg.Partitioner, strings.Join(list, ", "))}
	}
	return sh, nil
}

// partition returns key's partition of the input topic.
func (r *rankHTTP) partition(ctx context.Context, key []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parts) == 0 { // not fetched yet: the request waits for it
		n, err := r.partitionCount(ctx)
		if err != nil {
			return 0, err
		}
		r.setParts(n)
	}
	return r.balancer.Balance(kafka.Message{Key: key}, r.parts...), nil
}

// partitionCount asks the brokers for the input topic's partition count.
func (r *rankHTTP) partitionCount(ctx context.Context) (int, error) {
	n, err := r.cfg.Partitions(ctx)
	if err == nil && n < 1 {
		err = errors.New("no partitions")
	}
	return n, err
}

// setParts keeps the partition count n (r.mu held); the partitioner's
// check starts with the first.
func (r *rankHTTP) setParts(n int) {
	r.parts = r.parts[:0]
	for i := range n {
		r.parts = append(r.parts, i)
	}
	r.guard.parts.Store(int32(n))
}

// RankWarning says what /readyz reports beside readiness: a
// rank.partitioner that does not map the keys consumed to the partitions
// they came on in the last 10 minutes (partguard.go); "" when none.
func (p *Pipeline) RankWarning() string {
	if p.rank == nil {
		return ""
	}
	return p.rank.guard.warning()
}

// refreshPartitions keeps the input topic's partition count for the
// requests until ctx ends (the consumer group's generation): asked now and
// every minute after, again after 5 s when the brokers did not answer
// (the count kept meanwhile). Each ask is a metadata round trip on a new
// connection to the brokers (with its TLS and SASL handshakes when
// configured), which a request would otherwise wait for: the first
// request after start-up waited 3–9 ms for it in TestRankLoad, where the
// median request takes 0.25 ms.
func (r *rankHTTP) refreshPartitions(ctx context.Context) {
	for {
		wait := time.Minute
		n, err := r.partitionCount(ctx)
		if err == nil {
			r.mu.Lock()
			r.setParts(n)
			r.mu.Unlock()
		} else {
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
