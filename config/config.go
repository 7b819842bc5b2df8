package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// Config is the whole service configuration. Build it with [Default],
// [Load] or [Parse]; a Config built or changed in code is checked with
// [Config.Validate].
type Config struct {
	// ShutdownTimeout bounds a stop (SIGTERM): past it the service gives
	// up flushing and checkpointing, says what was not delivered and exits
	// non-zero. Keep it below the orchestrator's grace period.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	Kafka       Kafka       `yaml:"kafka"`
	HTTP        HTTP        `yaml:"http"`
	Log         Log         `yaml:"log"`
	Metrics     Metrics     `yaml:"metrics"`
	Labels      Labels      `yaml:"labels"`
	Snapshot    Snapshot    `yaml:"snapshot"`
	Rank        Rank        `yaml:"rank"`
	Calibration Calibration `yaml:"calibration"`
	Profiles    []Profile   `yaml:"profiles"`
	Models      []Model     `yaml:"models"`
}

// Calibration is the calibration section: the calibrated certainty every
// model's scores carry, fitted on a window of the model's own prequential
// (score, label) pairs.
type Calibration struct {
	Window int     `yaml:"window"` // pairs per model; 0 = off
	Every  int     `yaml:"every"`  // labelled pairs between refits of the table
	Delta  float64 `yaml:"delta"`  // conformal intervals' level is 1 − delta
	// MinInterval is the least time between the starts of two refits
	// (0: none); a refit due sooner starts once it has passed.
	MinInterval time.Duration `yaml:"min_interval"`
}

// Rank is the rank section: ranking requests, which ask the model Model
// to order a set of candidates for a key (an event with "candidates" on
// the input topic, or POST /v1/rank). Model "" = requests off (an event
// with candidates is then an event without features).
type Rank struct {
	Model         string `yaml:"model"`          // the name of the model that ranks
	MaxCandidates int    `yaml:"max_candidates"` // a request with more is bad_request
	// ResponseTopic receives one response record per request read from
	// Kafka; "" = kafka.output_topic.
	ResponseTopic string `yaml:"response_topic"`
	// LogTopic, when set, receives every POST /v1/rank request answered,
	// as received and keyed by its key, and ResponseTopic its response,
	// as for a request read from Kafka: the exploration log that
	// `streamer eval --log` replays. "" = HTTP requests are not logged.
	LogTopic string `yaml:"log_topic"`
	// Partitioner is how the producers of the input topic map a key to a
	// partition, so that POST /v1/rank can tell whether this instance owns
	// the key's partition: murmur2 (the Java client's default, kafka-go's
	// Murmur2Balancer), fnv1a (kafka-go's Hash) or crc32 (librdkafka's
	// consistent, kafka-go's CRC32Balancer). The service checks it
	// against the keyed events it consumes (stream/partguard.go).
	Partitioner string     `yaml:"partitioner"`
	Explore     Explore    `yaml:"explore"`
	Join        RankJoin   `yaml:"join"`
	Challenger  Challenger `yaml:"challenger"`
}

// Challenger is rank.challenger: a second model that ranks every request
// in shadow (its order is not served). Its greedy policy's value and the
// difference to the rank model's (the champion's) are estimated off-policy
// from the champion's exploration log, per labelled first item; with
// promote auto the two swap once the lower bound of (challenger −
// champion) has stayed above 0 for Hold labelled first items.
type Challenger struct {
	Model   string `yaml:"model"`   // "" = none
	Promote string `yaml:"promote"` // manual (report only) | auto
	// Estimator is the difference's: dr (doubly robust, the champion's
	// predicted reward as the direct method) or ips.
	Estimator string `yaml:"estimator"`
	// Confidence is the level of the difference's confidence sequence
	// over the labelled first items since the last promotion (an interval
	// valid at every look at once).
	Confidence float64 `yaml:"confidence"`
	// Hold is the number of labelled first items over which the interval's
	// lower bound must stay above 0, checked every 100, before auto
	// promotes.
	Hold int `yaml:"hold"`
}

// RankJoin is rank.join: with delayed labels on, the join window of the
// items ranking requests show (each waits under (request id, item) for
// its label), per shard like labels.join_window and apart from it, so
// that requests never push the stream's impressions out.
type RankJoin struct {
	// Events bounds the items kept (the oldest leaves first); 0 = none
	// (their labels count as unknown ids).
	Events int `yaml:"events"`
	// Time is the longest an item waits; 0 = labels.join_window.time.
	Time time.Duration `yaml:"time"`
	// PerKey bounds the items of one key kept; an item whose key has
	// PerKey waiting is not kept. 0 = no limit.
	PerKey int `yaml:"per_key"`
	// Entries, with hashed features, bounds the hashed entries the items
	// keep, all together (13 bytes each); 0 = 64 × Events.
	Entries int `yaml:"entries"`
	// NewKeys is the share of the window that items of keys no label has
	// joined for yet may hold: once they do, one more takes the oldest's
	// slot if that is such a key's item, or is not kept, so that requests
	// for made-up keys cannot push out the labelling users' items. 1 = no
	// such limit (one queue).
	NewKeys float64 `yaml:"new_keys"`
}

// DefaultChallengerHold is rank.challenger.hold's default.
const DefaultChallengerHold = 2000

// The defaults of rank.join.
const (
	DefaultRankJoinEvents = 100_000
	DefaultRankJoinPerKey = 10_000
	// DefaultRankJoinNewKeys is rank.join.new_keys' default.
	DefaultRankJoinNewKeys = 0.5
)

// Explore is rank.explore: the policy that orders the top k.
type Explore struct {
	Policy  string  `yaml:"policy"`  // greedy | epsilon | ucb | thompson
	Epsilon float64 `yaml:"epsilon"` // epsilon: the probability of a random pick at each position
	// Alpha scales ucb's uncertainty width and thompson's perturbation
	// (docs/models.md, "Exploration"). Its default depends on the policy:
	// DefaultAlphaUCB, which Default holds, or DefaultAlphaThompson, which
	// Parse sets when the policy is thompson and neither the file nor the
	// environment sets alpha. Samples is the number of thompson draws that
	// estimate its propensities.
	Alpha   float64 `yaml:"alpha"`
	Samples int     `yaml:"samples"`
	Seed    int     `yaml:"seed"` // the policy's random draws (per shard, seeded with this and the shard)
}

// Enabled reports whether ranking requests are served.
func (r Rank) Enabled() bool { return r.Model != "" }

// Partitioners and exploration policies.
const (
	PartitionerMurmur2 = "murmur2"
	PartitionerFNV1a   = "fnv1a"
	PartitionerCRC32   = "crc32"

	PromoteManual = "manual"
	PromoteAuto   = "auto"

	ExploreGreedy   = "greedy"
	ExploreEpsilon  = "epsilon"
	ExploreUCB      = "ucb"
	ExploreThompson = "thompson"
)

// The defaults of rank.explore.alpha, per policy: the values that lose
// nothing against greedy when every request brings fresh random candidates
// and gain most when a key's candidates repeat (docs/models.md,
// "Exploration").
const (
	DefaultAlphaUCB      = 1.0
	DefaultAlphaThompson = 0.1
)

// Kafka is the kafka section: where events come from and where scores and
// rejected events go.
type Kafka struct {
	Brokers         []string      `yaml:"brokers"`
	Group           string        `yaml:"group"`
	InputTopic      string        `yaml:"input_topic"`
	OutputTopic     string        `yaml:"output_topic"`
	DLQTopic        string        `yaml:"dlq_topic"`
	ClientID        string        `yaml:"client_id"`
	StartOffset     string        `yaml:"start_offset"`
	MaxMessageBytes int           `yaml:"max_message_bytes"`
	MaxFeatureAbs   float64       `yaml:"max_feature_abs"` // features beyond ±this are dead-lettered (out_of_range)
	CommitInterval  time.Duration `yaml:"commit_interval"`
	// UnreadyAfter is how long the brokers may be unreachable, or
	// publishing may keep failing, before /readyz turns 503.
	UnreadyAfter   time.Duration `yaml:"unready_after"`
	SessionTimeout time.Duration `yaml:"session_timeout"`
	Producer       Producer      `yaml:"producer"`
	TLS            TLS           `yaml:"tls"`
	SASL           SASL          `yaml:"sasl"`
}

// TLS is the kafka.tls section: TLS on every broker connection. Paths
// are read when the config is loaded (relative paths from the working
// directory).
type TLS struct {
	Enabled            bool   `yaml:"enabled"`
	CAFile             string `yaml:"ca_file"`              // PEM CA bundle; "" = the system roots
	CertFile           string `yaml:"cert_file"`            // client certificate (mutual TLS), with KeyFile
	KeyFile            string `yaml:"key_file"`             // its private key
	ServerName         string `yaml:"server_name"`          // "" = the broker's host name
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"` // testing only: accept any server certificate
}

// SASL is the kafka.sasl section: SASL authentication on every broker
// connection. The password comes from Password (the file or
// STREAMER_KAFKA_SASL_PASSWORD) or from PasswordFile, never both; read it
// with [SASL.ResolvePassword].
type SASL struct {
	Mechanism    string `yaml:"mechanism"` // "" = off | plain | scram-sha-256 | scram-sha-512
	Username     string `yaml:"username"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"` // file holding the password; one trailing newline is dropped
}

// Enabled reports whether SASL authentication is configured.
func (s SASL) Enabled() bool { return s.Mechanism != "" }

// ResolvePassword returns the password: Password, or the content of
// PasswordFile without its trailing newline. Errors name the key, never the
// password.
func (s SASL) ResolvePassword() (string, error) {
	if s.PasswordFile == "" {
		return s.Password.Reveal(), nil
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", &Error{Key: "kafka.sasl.password_file", Msg: fileError(err)}
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", &Error{Key: "kafka.sasl.password_file", Msg: fmt.Sprintf("%s is empty", s.PasswordFile)}
	}
	return pw, nil
}

// fileError describes a failed read without repeating Go's "open" prefix.
func fileError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("cannot read %s: %v", pe.Path, pe.Err)
	}
	return err.Error()
}

// Secret is a string that never prints: fmt (every verb, also inside
// structs printed with %v or %+v), JSON, YAML and text encodings all give
// "[redacted]" (or "" when empty). Reveal returns the value.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) shown() string {
	if s == "" {
		return ""
	}
	return redacted
}

// String returns "[redacted]" ("" for an empty secret).
func (s Secret) String() string { return s.shown() }

// GoString is String, for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.shown()) }

// Format writes "[redacted]" whatever the verb.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.shown())
}

// MarshalText, MarshalJSON and MarshalYAML write "[redacted]".
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

// MarshalJSON writes "[redacted]" as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.shown())), nil }

// MarshalYAML writes "[redacted]".
func (s Secret) MarshalYAML() (any, error) { return s.shown(), nil }

// Producer is the kafka.producer section: batching of the score and
// dead-letter producers.
type Producer struct {
	BatchSize    int           `yaml:"batch_size"`
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	RequiredAcks string        `yaml:"required_acks"`
	BufferBytes  int           `yaml:"buffer_bytes"` // records published, not yet acknowledged: past it, consumption waits
}

// HTTP is the http section.
type HTTP struct {
	Listen       string        `yaml:"listen"`
	ReadTimeout  time.Duration `yaml:"read_timeout"`  // whole request, headers included
	WriteTimeout time.Duration `yaml:"write_timeout"` // from the end of the request headers to the end of the response
	IdleTimeout  time.Duration `yaml:"idle_timeout"`  // keep-alive connections
	PProf        bool          `yaml:"pprof"`         // serve net/http/pprof under /debug/pprof/
	TLS          HTTPTLS       `yaml:"tls"`           // HTTPS, mutual TLS (config/http.go)
	Auth         HTTPAuth      `yaml:"auth"`          // bearer tokens per endpoint group
}

// Log is the log section.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Metrics is the metrics section.
type Metrics struct {
	AccuracyWindow int `yaml:"accuracy_window"`
}

// Labels is the labels section: delayed labels. An event with an id and a
// label but no features is a label for an earlier unlabelled event (an
// impression) with that id; the impression's features are kept for
// join_window and the models learn when the label arrives.
type Labels struct {
	JoinWindow JoinWindow `yaml:"join_window"`
}

// JoinWindow bounds the impressions kept waiting for their label. Both 0 =
// delayed labels off (label-only events are dead-lettered).
type JoinWindow struct {
	Events int           `yaml:"events"` // most impressions kept (the oldest is dropped first)
	Time   time.Duration `yaml:"time"`   // longest an impression waits
	// PerKey bounds the impressions of one message key kept; an impression
	// whose key has PerKey waiting is not kept, so that one key cannot push
	// the others' out. 0 = no limit.
	PerKey int `yaml:"per_key"`
}

// Enabled reports whether delayed labels are joined.
func (j JoinWindow) Enabled() bool { return j.Events > 0 || j.Time > 0 }

// Snapshot is the snapshot section: durable model state bound to the input
// offsets it includes. With neither Dir nor ChangelogTopic set, state is not
// durable (it is lost on restart) and offsets are committed every
// kafka.commit_interval once the scores before them are delivered.
type Snapshot struct {
	Dir            string        `yaml:"dir"`             // directory of snapshot files; "" = no file store
	Every          time.Duration `yaml:"every"`           // snapshot period
	EveryEvents    int           `yaml:"every_events"`    // also snapshot after this many events (0 = off)
	Keep           int           `yaml:"keep"`            // snapshot files kept
	ChangelogTopic string        `yaml:"changelog_topic"` // compacted topic holding the same state; "" = off

	// Versions is how many versions of each global model are kept in
	// Dir/versions (the model's state as checkpoints saved it, for listing
	// and rollback); 0 = off. Needs Dir. VersionsEvery is the least time
	// between two versions a checkpoint records of a model (0: at every
	// checkpoint where the model changed).
	Versions      int           `yaml:"versions"`
	VersionsEvery time.Duration `yaml:"versions_every"`

	// Scope "partition" keeps model state per input partition in the
	// changelog, so that several instances of the consumer group share the
	// input (scale-out): a partition's state moves with the partition, and
	// mergeable models score with the merge of every partition's statistics,
	// the other instances' read from the changelog every RemoteRefresh.
	// "instance" (the default) keeps one state per instance.
	Scope         string        `yaml:"scope"`
	RemoteRefresh time.Duration `yaml:"remote_refresh"`
}

// Snapshot scopes.
const (
	SnapshotScopeInstance  = "instance"
	SnapshotScopePartition = "partition"
)

// Partitioned reports whether state is kept per input partition.
func (s Snapshot) Partitioned() bool { return s.Scope == SnapshotScopePartition }

// Enabled reports whether state is made durable at all.
func (s Snapshot) Enabled() bool { return s.Dir != "" || s.ChangelogTopic != "" }

// Model is one entry of the models list: the keys every model has, and
// Params, the model type's own keys.
type Model struct {
	Name     string   `yaml:"name"`
	Type     string   `yaml:"type"` // a registered model type
	Features Features `yaml:"features"`
	Scope    string   `yaml:"scope"`    // "" or global (one model) | key (one instance per event key)
	MaxKeys  int      `yaml:"max_keys"` // scope key: instances kept in memory (a second-chance sweep evicts)
	// Label maps the wire label before the model reads it (LabelMap):
	// label.positive for classifiers, label.edges for ordinal models, and
	// label.min and label.max for every model. The zero value maps nothing.
	Label Label `yaml:"label"`
	// Fallback names a global model listed before this key-scoped one:
	// until a key's own instance decides, the key's records carry the
	// fallback's answer. "" = none.
	Fallback string `yaml:"fallback"`
	// Residual (with a fallback): the key's instance learns the label
	// less the fallback's prediction, and publishes the fallback's
	// prediction plus its own (a global model with a per-key correction).
	Residual bool `yaml:"residual"`

	// Params holds every other key of the entry, decoded into the type's
	// parameter struct (online.Type.NewParams: its defaults, then the keys
	// given, then online.Completer's defaults that depend on other keys).
	Params online.Params `yaml:"-"`
}

// Spec returns what the model registry builds the model from (with
// features.hash: hashed inputs of at most features.max_features entries).
func (m Model) Spec() online.Spec {
	s := online.Spec{Type: m.Type, Dim: m.InputDim(), Standardize: m.Features.Standardize, Params: m.Params}
	if m.Features.Hash != nil {
		s.MaxFeatures = m.Features.MaxFeatures
	}
	return s
}

// Members returns the names of the models whose predictions this one
// aggregates (online.Aggregator: adaboost's members), nil for others.
func (m Model) Members() []string {
	if a, ok := m.Params.(online.Aggregator); ok {
		return a.MemberNames()
	}
	return nil
}

// InputDim is the length of the model's input: the features, after the
// members' predictions for an aggregator.
func (m Model) InputDim() int { return len(m.Members()) + m.Features.Dim }

// KeyScoped reports whether the model has one instance per event key.
func (m Model) KeyScoped() bool { return m.Scope == ScopeKey }

// Label is models[i].label: how the model reads the wire's label, so that
// one stream of labels (say ratings 0.5..5) feeds models of every kind.
// At most one key applies, by the model's kind.
type Label struct {
	// Positive is a classifier's condition on the wire label for class +1,
	// an operator (>=, >, <=, <, ==) and a finite number: ">= 4". The
	// label is −1 where it does not hold.
	Positive string `yaml:"positive"`
	// Edges bin an ordinal model's wire labels into its levels 1..m: m−1
	// strictly increasing finite numbers, level = 1 + #{edges ≤ label}.
	Edges []float64 `yaml:"edges"`
	// Min and Max (nil: no bound), for any model, bound the wire labels it
	// reads: an event whose label is outside [Min, Max] is dead-lettered
	// bad_label, before any model learns it. They are finite, Min ≤ Max.
	Min *float64 `yaml:"min"`
	Max *float64 `yaml:"max"`
}

// IsZero reports whether no key of the label section is set.
func (l Label) IsZero() bool { return !l.maps() && l.Min == nil && l.Max == nil }

// maps reports whether l changes the label a model reads (positive or
// edges; a range only keeps labels out).
func (l Label) maps() bool { return l.Positive != "" || l.Edges != nil }

// Map returns the label map of l: nil when no key is set, an error when a
// key does not parse (the validator reports it on its key).
func (l Label) Map() (*online.LabelMap, error) {
	var m *online.LabelMap
	var err error
	switch {
	case l.Positive != "":
		m, err = online.PositiveWhen(l.Positive)
	case l.Edges != nil:
		m, err = online.BinnedBy(l.Edges)
	}
	if err != nil || l.Min == nil && l.Max == nil {
		return m, err
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if l.Min != nil {
		lo = *l.Min
	}
	if l.Max != nil {
		hi = *l.Max
	}
	return m.WithRange(lo, hi)
}

// LabelMap returns the model's label map (nil: none) of a validated
// configuration.
func (m Model) LabelMap() *online.LabelMap {
	l, err := m.Label.Map()
	if err != nil {
		return nil
	}
	return l
}

// Features is models[i].features: the input dimension and, optionally, the
// names that let events send features as a JSON object.
type Features struct {
	Dim         int      `yaml:"dim"`
	Names       []string `yaml:"names"`
	Shape       []int    `yaml:"shape"`       // [rows, cols]: events may send a rows × cols matrix (dim = rows·cols)
	Standardize bool     `yaml:"standardize"` // running per-feature standardisation (Welford), for every model type

	// Hash turns on hashed categorical features: features is then an
	// object of numbers, strings (categories), arrays of strings (bags)
	// and namespaces (nested objects), each (namespace, name, value)
	// hashed to one of 2^bits indices with a sign; dim is 2^bits.
	Hash *Hash `yaml:"hash"`
	// Namespaces names the namespaces events may use (hashing; optional
	// unless Interactions is set).
	Namespaces []string `yaml:"namespaces"`
	// Interactions lists pairs of namespaces whose features are crossed
	// (hashing).
	Interactions [][]string `yaml:"interactions"`
	// MaxFeatures bounds an event's hashed features (interactions
	// included); beyond it the event is dead-lettered too_many_features.
	MaxFeatures int `yaml:"max_features"`
	// Use names the namespaces of the hashed features this model takes
	// (each listed in Namespaces); empty: all. The one part of features
	// that may differ between models.
	Use []string `yaml:"use"`
}

// Hash is models[i].features.hash.
type Hash struct {
	Bits int `yaml:"bits"` // the hashed space has 2^bits indices, 1..30
	Seed int `yaml:"seed"` // ≥ 0
}

// DefaultMaxFeatures is features.max_features under hashing.
const DefaultMaxFeatures = 4096

// Accepted values of the enumerated keys.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"

	AcksNone = "none"
	AcksOne  = "one"
	AcksAll  = "all"

	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"

	FormatText = "text"
	FormatJSON = "json"

	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"

	ScopeGlobal = "global"
	ScopeKey    = "key"
)

// DefaultProducerBufferBytes is kafka.producer.buffer_bytes' default.
const DefaultProducerBufferBytes = 128 << 20

// DefaultMaxFeatureAbs is the default kafka.max_feature_abs: far beyond
// any sane feature, far below where the models' arithmetic overflows
// (squared norms overflow near 1e154).
const DefaultMaxFeatureAbs = 1e15

// DefaultMaxKeys is the default max_keys of a key-scoped model.
const DefaultMaxKeys = 10000

// EnvPrefix starts every environment variable that overrides a key.
const EnvPrefix = "STREAMER_"

// EnvConfig is the one STREAMER_ variable that names no key: it is
// reserved for the path of the config file (read by cmd, not by [Load]).
const EnvConfig = "STREAMER_CONFIG"

// Default returns the default configuration. Its Models list is empty, so
// it does not validate until at least one model is added.
func Default() Config {
	return Config{
		ShutdownTimeout: 25 * time.Second,
		Kafka: Kafka{
			Brokers:         []string{"localhost:9092"},
			Group:           "streamer",
			InputTopic:      "events",
			OutputTopic:     "scores",
			DLQTopic:        "events.dlq",
			ClientID:        "streamer",
			StartOffset:     StartEarliest,
			MaxMessageBytes: 1 << 20,
			MaxFeatureAbs:   DefaultMaxFeatureAbs,
			CommitInterval:  time.Second,
			UnreadyAfter:    15 * time.Second,
			SessionTimeout:  10 * time.Second,
			Producer: Producer{
				BatchSize:    1000,
				BatchTimeout: 5 * time.Millisecond,
				RequiredAcks: AcksAll,
				BufferBytes:  DefaultProducerBufferBytes,
			},
		},
		HTTP: HTTP{Listen: "127.0.0.1:9464", ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
			Auth: HTTPAuth{Protect: DefaultProtect()}},
		Log:         Log{Level: LevelInfo, Format: FormatText},
		Metrics:     Metrics{AccuracyWindow: 1000},
		Snapshot:    Snapshot{Every: 5 * time.Second, Keep: 3, Versions: 5, VersionsEvery: 10 * time.Minute, Scope: SnapshotScopeInstance, RemoteRefresh: time.Second},
		Calibration: Calibration{Window: 2000, Every: 100, Delta: 0.1, MinInterval: 10 * time.Millisecond},
		Rank: Rank{MaxCandidates: 1000, Partitioner: PartitionerMurmur2,
			Explore:    Explore{Policy: ExploreGreedy, Epsilon: 0.05, Alpha: DefaultAlphaUCB, Samples: 100, Seed: 1},
			Join:       RankJoin{Events: DefaultRankJoinEvents, PerKey: DefaultRankJoinPerKey, NewKeys: DefaultRankJoinNewKeys},
			Challenger: Challenger{Promote: PromoteManual, Estimator: "dr", Confidence: 0.95, Hold: DefaultChallengerHold}},
	}
}

// Load reads the YAML file at path and returns it as [Parse] does. env
// holds os.Environ-style "KEY=value" entries; nil means no overrides.
func Load(path string, env []string, reg *online.Registry) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(data, env, reg)
}

// Parse decodes a YAML document: it starts from [Default], lets each key
// present in data replace its default, applies the STREAMER_* overrides
// found in env (os.Environ-style "KEY=value"; nil means none) and
// validates the result. reg holds the model types the models list may
// name; each model's keys besides name, type, features, scope and max_keys
// are decoded into its type's parameter struct.
//
// Every error names the key at fault (with its line in the file, or the
// environment variable that set it). Errors are of type *[Error]; when
// there are several they are joined with [errors.Join].
func Parse(data []byte, env []string, reg *online.Registry) (Config, error) {
	d := newDecoder(reg)
	c := Default()
	d.document(&c, data)
	d.env(&c, env)
	if len(d.errs) > 0 {
		return Config{}, errors.Join(d.errs...)
	}
	if c.Rank.Explore.Policy == ExploreThompson && !d.has("rank.explore.alpha") {
		c.Rank.Explore.Alpha = DefaultAlphaThompson
	}
	if errs := validate(&c, d.src, reg); len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// Validate checks c as [Parse] does after decoding, its models against the
// types of reg. Use it on a Config built or changed in code (for instance
// after filling in brokers); every model needs Params of its type.
func (c Config) Validate(reg *online.Registry) error {
	return errors.Join(validate(&c, nil, reg)...)
}

// Fingerprint returns the hex SHA-256 of the models' fingerprints in list
// order. Two configs with equal fingerprints configure the same models.
func (c Config) Fingerprint() string {
	h := sha256.New()
	h.Write([]byte("streamer/config models v2\x00"))
	for _, m := range c.Models {
		h.Write([]byte(m.Fingerprint()))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Fingerprint returns the hex SHA-256 of a canonical encoding of this one
// model: name, type, features, scope, max_keys, the canonical encoding
// of its parameters (online/codec: by key, zero values left out, so a key
// added later whose zero value keeps the old behaviour changes no
// fingerprint) and, when set, the label section (what the model learned
// depends on it; fallback does not change the model's state and is left
// out). State saved under one fingerprint is restored only into a
// model with the same one. Unlike [Config.Fingerprint] it does not change
// when other models are added, removed or reordered.
func (m Model) Fingerprint() string {
	b := []byte("streamer/config model v2\x00")
	b = codec.AppendBytes(b, []byte(m.Name))
	b = codec.AppendBytes(b, []byte(m.Type))
	b = codec.AppendU64(b, uint64(m.Features.Dim))
	b = codec.AppendBool(b, m.Features.Names != nil)
	b = codec.AppendU32(b, uint32(len(m.Features.Names)))
	for _, n := range m.Features.Names {
		b = codec.AppendBytes(b, []byte(n))
	}
	b = codec.AppendBool(b, m.Features.Standardize)
	if h := m.Features.Hash; h != nil { // absent before hashing existed: old fingerprints unchanged
		b = append(b, "hash\x00"...)
		b = codec.AppendU32(b, uint32(h.Bits))
		b = codec.AppendU64(b, uint64(h.Seed))
		b = codec.AppendU32(b, uint32(len(m.Features.Interactions)))
		for _, pair := range m.Features.Interactions {
			for _, ns := range pair {
				b = codec.AppendBytes(b, []byte(ns))
			}
		}
		// A model that reads an entry's namespace by its position in
		// features.namespaces (online.Namespaced: fm) learned under that
		// numbering; other types' fingerprints are unchanged.
		if _, ok := m.Params.(online.Namespaced); ok {
			b = append(b, "namespaces\x00"...)
			b = codec.AppendU32(b, uint32(len(m.Features.Namespaces)))
			for _, ns := range m.Features.Namespaces {
				b = codec.AppendBytes(b, []byte(ns))
			}
		}
	}
	scope := m.Scope
	if scope == ScopeGlobal {
		scope = ""
	}
	b = codec.AppendBytes(b, []byte(scope))
	b = codec.AppendU64(b, uint64(m.MaxKeys))
	b, at := codec.BeginFrame(b)
	if m.Params != nil {
		b = codec.AppendParams(b, m.Params)
	}
	b = codec.EndFrame(b, at)
	// The label's range (label.min, label.max) is left out: it keeps labels
	// from the model, and a model's state learned without it is its state
	// with it (a range added to a running service keeps the state).
	if m.Label.maps() { // absent before label mapping existed: old fingerprints unchanged
		b = append(b, "label\x00"...)
		if l, err := m.Label.Map(); err == nil {
			op, x := l.Condition()
			b = codec.AppendBytes(b, []byte(op))
			b = codec.AppendU64(b, math.Float64bits(x))
			b = codec.AppendU32(b, uint32(len(l.Edges())))
			for _, e := range l.Edges() {
				b = codec.AppendU64(b, math.Float64bits(e))
			}
		} else { // not a valid configuration: only distinct
			b = codec.AppendBytes(b, []byte(m.Label.Positive))
		}
	}
	if m.Residual { // a residual model learns other targets (absent otherwise: old fingerprints unchanged)
		b = append(b, "residual\x00"...)
		b = codec.AppendBytes(b, []byte(m.Fallback))
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Error is a configuration error. Key is the dotted path of the key at
// fault with list indices ("models[0].kernel.gamma"); Line is its line in
// the file (0 if unknown) and Env the environment variable that set it, if
// any.
type Error struct {
	Key  string
	Line int
	Env  string
	Msg  string
	kind errKind
}

type errKind int

const (
	errValue errKind = iota
	errUnknownKey
	errUnknownEnv
)

func (e *Error) Error() string {
	switch e.kind {
	case errUnknownKey:
		if e.Msg != "" {
			return fmt.Sprintf("config: unknown key %q (line %d) %s", e.Key, e.Line, e.Msg)
		}
		return fmt.Sprintf("config: unknown key %q (line %d)", e.Key, e.Line)
	case errUnknownEnv:
		return fmt.Sprintf("config: unknown environment variable %s: %s", e.Env, e.Msg)
	}
	s := "config: " + e.Key + ": " + e.Msg
	switch {
	case e.Env != "":
		s += " (from " + e.Env + ")"
	case e.Line > 0:
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}
