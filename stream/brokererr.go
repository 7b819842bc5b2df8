package stream

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// Errors the brokers return are either retriable — a coordinator moving, a
// leader not available, a network failure: the service retries and they
// go away — or permanent for this configuration: the brokers will keep
// returning them until the configuration (or the brokers' ACLs or
// settings) changes. A permanent one at start-up stops the service (exit
// status 1) with a message naming the key to fix; during operation it
// turns /readyz 503 with the reason, is logged once and counted in
// streamer_broker_refusals_total{error}, and the service keeps retrying
// (an operator may fix the ACLs or the broker setting meanwhile).

// permanentErrors are the broker error codes that do not go away by
// retrying with the same configuration, with the key they most likely
// concern (refined by where they happen) and what to do.
var permanentErrors = map[kafka.Error]struct{ key, fix string }{ // also in README.md's table
	kafka.InvalidSessionTimeout:      {"kafka.session_timeout", "set it within the broker's group.min.session.timeout.ms and group.max.session.timeout.ms"},
	kafka.GroupAuthorizationFailed:   {"kafka.group", "grant the client's principal READ and DESCRIBE on the consumer group, or use a group it may join"},
	kafka.TopicAuthorizationFailed:   {"kafka.input_topic", "grant the client's principal the access it needs to the topic (READ for the input and changelog, WRITE for the output, dead-letter and changelog topics, DESCRIBE on all)"},
	kafka.ClusterAuthorizationFailed: {"kafka.sasl.username", "grant the client's principal the cluster operation it needs (e.g. CREATE for the changelog topic) or create the topic yourself"},
	kafka.InvalidReplicationFactor:   {"snapshot.changelog_topic", "create the changelog topic yourself (compacted), or give the brokers enough replicas"},
	kafka.InvalidConfiguration:       {"snapshot.changelog_topic", "create the changelog topic yourself with cleanup.policy=compact"},
	kafka.PolicyViolation:            {"snapshot.changelog_topic", "create the changelog topic yourself, as the brokers' policy allows"},
	kafka.UnsupportedVersion:         {"kafka.brokers", "the brokers do not speak a protocol version this client needs: upgrade them (deploy/ runs Kafka 3.9)"},
	kafka.UnsupportedSASLMechanism:   {"kafka.sasl.mechanism", "use a mechanism the brokers enable (sasl.enabled.mechanisms)"},
	kafka.SASLAuthenticationFailed:   {"kafka.sasl.username", "check the username and the password"},
	// Scores and dead letters the brokers refuse for their size are not
	// refusals: the publisher sends them again one by one, and gives up on
	// (and counts) one refused alone. A snapshot record is.
	kafka.MessageSizeTooLarge: {"snapshot.changelog_topic", "raise the changelog topic's max.message.bytes above the largest snapshot record (streamer_snapshot_model_bytes)"},
	kafka.RecordListTooLarge:  {"snapshot.changelog_topic", "raise the changelog topic's max.message.bytes above the largest snapshot record (streamer_snapshot_model_bytes)"},
	kafka.InvalidTopic:        {"kafka.output_topic", "use a valid topic name"},
}

// BrokerRefusal is a permanent error of the brokers for this
// configuration: Key names the configuration key to fix.
type BrokerRefusal struct {
	Key  string      // e.g. "kafka.session_timeout"
	Code kafka.Error // the broker's error code
	Msg  string      // what is wrong and what to do
	Err  error       // the error as returned
}

func (e *BrokerRefusal) Error() string {
	return fmt.Sprintf("%s: %s (the brokers answered %s [%d])", e.Key, e.Msg, codeName(e.Code), int(e.Code))
}

func (e *BrokerRefusal) Unwrap() error { return e.Err }

// protocolNames are the Kafka protocol's names of the codes whose kafka-go
// title differs from it.
var protocolNames = map[kafka.Error]string{
	kafka.MessageSizeTooLarge:  "MESSAGE_TOO_LARGE",
	kafka.InvalidConfiguration: "INVALID_CONFIG",
	kafka.InvalidTopic:         "INVALID_TOPIC_EXCEPTION",
}

// codeName is the Kafka protocol name of an error code, e.g.
// INVALID_SESSION_TIMEOUT, as the brokers' logs and documentation say it.
func codeName(c kafka.Error) string {
	if n, ok := protocolNames[c]; ok {
		return n
	}
	if t := c.Title(); t != "" {
		return strings.ToUpper(strings.ReplaceAll(t, " ", "_"))
	}
	return fmt.Sprintf("ERROR_%d", int(c))
}

// brokerCode returns the broker error code err carries, if any (directly,
// wrapped, or in a kafka.WriteErrors).
func brokerCode(err error) (kafka.Error, bool) {
	var code kafka.Error
	if errors.As(err, &code) {
		return code, true
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && errors.As(e, &code) {
				return code, true
			}
		}
	}
	return 0, false
}

// refusal returns the BrokerRefusal err is, or nil when err is retriable.
// use, when not nil, is the topic the failing operation was on (e.g. the
// output topic for a produce): a topic-level error then names its key and
// the access it needs. principal names the client, as in its messages.
func refusal(err error, use *topicUse, principal string) *BrokerRefusal {
	if err == nil {
		return nil
	}
	if r, ok := errors.AsType[*BrokerRefusal](err); ok {
		return r
	}
	code, ok := brokerCode(err)
	if !ok {
		return nil
	}
	p, ok := permanentErrors[code]
	if !ok {
		return nil
	}
	r := &BrokerRefusal{Key: p.key, Code: code, Msg: p.fix, Err: err}
	if use == nil {
		return r
	}
	switch code {
	case kafka.TopicAuthorizationFailed:
		r.Key = cmp.Or(use.key, r.Key)
		r.Msg = fmt.Sprintf("the brokers do not let %s %s topic %q: grant it %s (and DESCRIBE) on the topic", principal, use.verb(), use.topic, use.needs)
		if use.needs == "CREATE" {
			r.Msg += ", or create the topic yourself (one partition, cleanup.policy=compact)"
		}
	case kafka.InvalidTopic:
		r.Key = cmp.Or(use.key, r.Key)
		r.Msg = fmt.Sprintf("%q is not a valid topic name", use.topic)
	case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge:
		r.Key = cmp.Or(use.key, r.Key)
		r.Msg = fmt.Sprintf("a record is larger than topic %q accepts (its max.message.bytes): %s", use.topic, p.fix)
	}
	return r
}

// BrokerHealth collects the brokers' errors by component (the consumer
// group, a partition's fetches, the publisher per topic). A permanent one
// (BrokerRefusal) stands until the component works again: /readyz is 503
// while any stands, and each distinct one is logged once. During start-up
// — the first StartupWindow of the service — a refusal on a component that
// has never worked is fatal: Fatal delivers it and the service stops with
// it (exit status 1). Safe for concurrent use; a nil *BrokerHealth ignores
// everything.
type BrokerHealth struct {
	log       *slog.Logger
	principal string // the client as the brokers see it, for messages
	refusals  *prometheus.CounterVec
	started   time.Time
	window    time.Duration
	fatal     chan *BrokerRefusal

	mu       sync.Mutex
	standing map[string]*BrokerRefusal // by component
	worked   map[string]bool           // components that have worked once
	retrying map[string]string         // last retriable error by component
	failing  map[string]time.Time      // since when, by component with a success signal (failed, OK)
}

// StartupWindow is how long after start a refusal on a component that has
// never worked stops the service.
const StartupWindow = 30 * time.Second

// NewBrokerHealth returns a BrokerHealth whose start-up begins now; it
// registers streamer_broker_refusals_total{error} on reg (nil: none).
func NewBrokerHealth(reg prometheus.Registerer, log *slog.Logger) *BrokerHealth {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &BrokerHealth{log: log, started: time.Now(), window: StartupWindow, fatal: make(chan *BrokerRefusal, 1),
		standing: map[string]*BrokerRefusal{}, worked: map[string]bool{}, retrying: map[string]string{}, failing: map[string]time.Time{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_broker_refusals_total",
			Help: "Permanent errors of the brokers for this configuration (they do not go away by retrying; /readyz says which), by error."}, []string{"error"})}
	for code := range permanentErrors { // at 0, so that increase() sees the first one
		h.refusals.WithLabelValues(codeName(code))
	}
	if reg != nil {
		reg.MustRegister(h.refusals, failingCollector{h})
	}
	return h
}

// Report records err met by component. A permanent error stands (logged
// the first time, counted every time) and, during start-up on a component
// that never worked, is also delivered by Fatal; a retriable one is left to
// the caller's retries. use, when not nil, is the topic the operation was
// on. It returns the refusal, nil for a retriable error.
func (h *BrokerHealth) Report(component string, err error, use *topicUse) *BrokerRefusal {
	principal := "the client"
	if h != nil && h.principal != "" {
		principal = h.principal
	}
	r := refusal(err, use, principal)
	if r == nil {
		h.failed(component, err.Error())
	}
	if r == nil || h == nil {
		return r
	}
	h.refusals.WithLabelValues(codeName(r.Code)).Inc()
	h.mu.Lock()
	prev := h.standing[component]
	h.standing[component] = r
	fatal := !h.worked[component] && time.Since(h.started) < h.window
	h.mu.Unlock()
	if fatal {
		select {
		case h.fatal <- r:
		default:
		}
		return r
	}
	if prev == nil || prev.Code != r.Code || prev.Key != r.Key {
		h.log.Error("the brokers refuse this configuration; retrying until it is fixed", "component", component, "err", r)
	}
	return r
}

// OK records that component works.
func (h *BrokerHealth) OK(component string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	prev := h.standing[component]
	delete(h.standing, component)
	delete(h.retrying, component)
	delete(h.failing, component)
	h.worked[component] = true
	h.mu.Unlock()
	if prev != nil {
		h.log.Info("the brokers accept "+component+" again", "was", prev)
	}
}

// Fatal delivers a refusal met during start-up.
func (h *BrokerHealth) Fatal() <-chan *BrokerRefusal { return h.fatal }

// Reason returns why the brokers refuse the service now, "" when nothing
// stands.
func (h *BrokerHealth) Reason() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return listed(h.standing, (*BrokerRefusal).Error)
}

// listed is "component: what; …" of m, sorted.
func listed[V any](m map[string]V, what func(V) string) string {
	out := make([]string, 0, len(m))
	for c, v := range m {
		out = append(out, c+": "+what(v))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// retry records the retriable error component met last.
func (h *BrokerHealth) retry(component, msg string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.retrying[component] = msg
	h.mu.Unlock()
}

// Retrying returns the retriable errors the components met last and are
// still retrying ("" when none), e.g. the brokers being unreachable.
func (h *BrokerHealth) Retrying() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return listed(h.retrying, func(msg string) string { return msg })
}

// repeats lets each message through once and then holds it back while it
// repeats within a minute, counting the repeats — so that clients retrying
// the same failures (on several partitions, in turns) twice a second log
// each once a minute. Safe for concurrent use.
type repeats struct {
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	at   time.Time // last let through
	held int       // held back since
}

// maxRepeats bounds the messages remembered (an error text carrying, say,
// an offset is new every time; forgetting only lets a message through
// again).
const maxRepeats = 256

// pass reports whether msg is to be logged, and how many times it was held
// back since it was last logged.
func (r *repeats) pass(msg string) (ok bool, heldBack int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	e := r.seen[msg]
	if e != nil && now.Sub(e.at) < time.Minute {
		e.held++
		return false, 0
	}
	if e == nil {
		if r.seen == nil || len(r.seen) >= maxRepeats {
			r.seen = map[string]*repeat{}
		}
		e = &repeat{}
		r.seen[msg] = e
	}
	n := e.held
	e.at, e.held = now, 0
	return true, n
}

// warn logs msg with args at Warn level unless key repeats.
func (r *repeats) warn(log *slog.Logger, key, msg string, args ...any) {
	ok, n := r.pass(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "repeated_since_last_logged", n)
	}
	log.Warn(msg, args...)
}

// dedupLogger is a kafka-go error logger that logs each message once while
// it repeats (see repeats). With h, the message is also what component is
// retrying (BrokerHealth.Retrying) until it works again.
func dedupLogger(log *slog.Logger, component string, h *BrokerHealth) kafka.LoggerFunc {
	var r repeats
	return func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		h.retry(component, msg)
		r.warn(log, msg, msg, "component", component)
	}
}

// failed records that component, which reports its successes with OK,
// failed with msg: it is retrying, and failing since its first failure
// after the last success (see Stalled).
func (h *BrokerHealth) failed(component, msg string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.retrying[component] = msg
	if _, ok := h.failing[component]; !ok {
		h.failing[component] = time.Now()
	}
	h.mu.Unlock()
}

// Stalled returns, for /readyz, the components that have been failing for
// at least after, with how long and their last error ("" when none): the
// brokers unreachable, publishing failing, a changelog not readable.
func (h *BrokerHealth) Stalled(after time.Duration) string {
	if h == nil {
		return ""
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for c, since := range h.failing {
		if d := now.Sub(since); d >= after {
			out = append(out, fmt.Sprintf("%s: failing for %s: %s", c, d.Round(time.Second), h.retrying[c]))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// failingCollector exports how long each failing component has been
// failing (streamer_broker_failing_seconds{component}); a component that
// works again drops out.
type failingCollector struct{ h *BrokerHealth }

var failingDesc = prometheus.NewDesc("streamer_broker_failing_seconds",
	"How long a component has been failing against the brokers without a success (the brokers unreachable, publishing to a topic, reading the changelog); absent when it works. Past kafka.unready_after, /readyz is 503.",
	[]string{"component"}, nil)

func (c failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }

func (c failingCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	for comp, since := range c.h.failing {
		ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, now.Sub(since).Seconds(), comp)
	}
}

// Forget drops what component reported: it is gone (a revoked
// partition's fetcher), neither failing nor retrying any more.
func (h *BrokerHealth) Forget(component string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	delete(h.retrying, component)
	delete(h.failing, component)
	h.mu.Unlock()
}
