package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the whole service configuration. Build it with [Default],
// [Load] or [Parse]; a Config built or changed in code is checked with
// [Config.Validate].
type Config struct {
	Kafka    Kafka    `yaml:"kafka"`
	HTTP     HTTP     `yaml:"http"`
	Log      Log      `yaml:"log"`
	Metrics  Metrics  `yaml:"metrics"`
	Labels   Labels   `yaml:"labels"`
	Snapshot Snapshot `yaml:"snapshot"`
	Models   []Model  `yaml:"models"`
}

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
	CommitInterval  time.Duration `yaml:"commit_interval"`
	SessionTimeout  time.Duration `yaml:"session_timeout"`
	Producer        Producer      `yaml:"producer"`
	TLS             TLS           `yaml:"tls"`
	SASL            SASL          `yaml:"sasl"`
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
}

// HTTP is the http section.
type HTTP struct {
	Listen       string        `yaml:"listen"`
	ReadTimeout  time.Duration `yaml:"read_timeout"`  // whole request, headers included
	WriteTimeout time.Duration `yaml:"write_timeout"` // from the end of the request headers to the end of the response
	IdleTimeout  time.Duration `yaml:"idle_timeout"`  // keep-alive connections
	PProf        bool          `yaml:"pprof"`         // serve net/http/pprof under /debug/pprof/
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

// Model is one entry of the models list. Keys that do not apply to the
// model's type are rejected; see the package doc for which apply where.
type Model struct {
	Name     string   `yaml:"name"`
	Type     string   `yaml:"type"`
	Kernel   Kernel   `yaml:"kernel"`
	Features Features `yaml:"features"`
	Balance  bool     `yaml:"balance"` // mam
	Delta    float64  `yaml:"delta"`   // mam

	Budget int    `yaml:"budget"` // mam: > 0 selects the exact-kernel mode over the last Budget examples
	Window Window `yaml:"window"` // mam, omam, lda
	Decay  Decay  `yaml:"decay"`  // mam, omam, lda

	Levels    int       `yaml:"levels"`    // omam
	Edges     []float64 `yaml:"edges"`     // omam
	Normalize bool      `yaml:"normalize"` // omam

	LearningRate float64 `yaml:"learning_rate"` // logistic
	L2           float64 `yaml:"l2"`            // logistic

	C     float64 `yaml:"C"`     // svm: box constraint (both classes)
	CPos  float64 `yaml:"C_pos"` // svm: C of class +1 (overrides C)
	CNeg  float64 `yaml:"C_neg"` // svm: C of class −1 (overrides C)
	Refit Refit   `yaml:"refit"` // svm

	Lambda  float64          `yaml:"lambda"`  // lsrrank, mlsrrank, krr: regularisation λ
	Kernels []WeightedKernel `yaml:"kernels"` // mlsrrank: kernels K_t with weights v_t
	Solver  string           `yaml:"solver"`  // lsrrank, mlsrrank, krr: exact | features

	Scope       string      `yaml:"scope"`       // "" or global (one model) | key (one instance per event key)
	MaxKeys     int         `yaml:"max_keys"`    // scope key: instances kept in memory (LRU)
	Probability Probability `yaml:"probability"` // svm
}

// WeightedKernel is one entry of models[i].kernels (mlsrrank): an RBF
// kernel and its weight v ≥ 1 (K̄ = Σ K_t / v_t).
type WeightedKernel struct {
	Type  string  `yaml:"type"`
	Gamma float64 `yaml:"gamma"`
	V     float64 `yaml:"v"`
}

// Refit is models[i].refit: when a heavy model is refitted from its window.
type Refit struct {
	EveryEvents int           `yaml:"every_events"` // after this many labelled events (0 = off)
	Every       time.Duration `yaml:"every"`        // this often (0 = off)
	Guard       float64       `yaml:"guard"`        // held-back fraction of the window judging a new model (0 = off)
	GuardSlack  float64       `yaml:"guard_slack"`  // accept when held-back error ≤ old + slack
}

// Probability is models[i].probability.
type Probability struct {
	Levels int `yaml:"levels"` // H: weighted SVMs at π = h/H; 0 = off
}

// Window is models[i].window: an exact sliding window.
type Window struct {
	Events int           `yaml:"events"` // labelled examples in the window; 0 = off
	Time   time.Duration `yaml:"time"`   // svm: also drop events older than this; 0 = off
}

// Decay is models[i].decay: exponential forgetting.
type Decay struct {
	HalfLife float64 `yaml:"half_life"` // in labelled examples; 0 = off
}

// Kernel is models[i].kernel. For Type "linear", Gamma, Features and Seed
// are zero.
type Kernel struct {
	Type     string  `yaml:"type"`
	Gamma    float64 `yaml:"gamma"`
	Features int     `yaml:"features"`
	Seed     uint64  `yaml:"seed"`
	Degree   int     `yaml:"degree"` // polynomial
	Coef0    float64 `yaml:"coef0"`  // polynomial
}

// Features is models[i].features: the input dimension and, optionally, the
// names that let events send features as a JSON object.
type Features struct {
	Dim         int      `yaml:"dim"`
	Names       []string `yaml:"names"`
	Standardize bool     `yaml:"standardize"` // running per-feature standardisation (Welford)
}

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

	ModelMAM      = "mam"
	ModelOMAM     = "omam"
	ModelLogistic = "logistic"
	ModelLDA      = "lda"
	ModelSVM      = "svm"
	ModelLSRRank  = "lsrrank"
	ModelMLSRRank = "mlsrrank"
	ModelKRR      = "krr"

	SolverExact    = "exact"
	SolverFeatures = "features"

	ScopeGlobal = "global"
	ScopeKey    = "key"

	KernelLinear     = "linear"
	KernelRBF        = "rbf"
	KernelLaplacian  = "laplacian"
	KernelPolynomial = "polynomial"
	KernelSigmoid    = "sigmoid"
)

// Defaults of the model keys that have one (see [DefaultModel]).
const (
	DefaultGamma        = 10.0
	DefaultRFFFeatures  = 1024
	DefaultSeed         = 1
	DefaultDelta        = 0.05
	DefaultLearningRate = 0.1   // logistic: AdaGrad base step
	DefaultL2           = 1e-4  // logistic: L2 penalty
	DefaultSVMWindow    = 2000  // svm: window.events
	DefaultMaxKeys      = 10000 // scope key: instances in memory
	DefaultLambda       = 1e-3  // lsrrank, mlsrrank, krr
	DefaultRefitEvery   = 1000  // svm: refit.every_events when neither refit key is set
	// MaxRFFFeatures is the largest models[i].kernel.features accepted.
	MaxRFFFeatures = 65536
)

// EnvPrefix starts every environment variable that overrides a key.
const EnvPrefix = "STREAMER_"

// EnvConfig is the one STREAMER_ variable that names no key: it is
// reserved for the path of the config file (read by cmd, not by [Load]).
const EnvConfig = "STREAMER_CONFIG"

// Default returns the default configuration. Its Models list is empty, so
// it does not validate until at least one model is added.
func Default() Config {
	return Config{
		Kafka: Kafka{
			Brokers:         []string{"localhost:9092"},
			Group:           "streamer",
			InputTopic:      "events",
			OutputTopic:     "scores",
			DLQTopic:        "events.dlq",
			ClientID:        "streamer",
			StartOffset:     StartEarliest,
			MaxMessageBytes: 1 << 20,
			CommitInterval:  time.Second,
			SessionTimeout:  10 * time.Second,
			Producer: Producer{
				BatchSize:    1000,
				BatchTimeout: 5 * time.Millisecond,
				RequiredAcks: AcksAll,
			},
		},
		HTTP:     HTTP{Listen: "127.0.0.1:9464", ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute},
		Log:      Log{Level: LevelInfo, Format: FormatText},
		Metrics:  Metrics{AccuracyWindow: 1000},
		Snapshot: Snapshot{Every: 5 * time.Second, Keep: 3, Scope: SnapshotScopeInstance, RemoteRefresh: time.Second},
	}
}

// DefaultModel returns a model with every default applied: an RBF kernel
// (gamma 10, 1024 random Fourier frequencies, seed 1), balance true and
// delta 0.05. Name, Type and Features.Dim have no default and are left
// empty.
func DefaultModel() Model {
	return Model{
		Kernel: Kernel{
			Type:     KernelRBF,
			Gamma:    DefaultGamma,
			Features: DefaultRFFFeatures,
			Seed:     DefaultSeed,
		},
		Balance: true,
		Delta:   DefaultDelta,
	}
}

// Load reads the YAML file at path and returns it as [Parse] does. env
// holds os.Environ-style "KEY=value" entries; nil means no overrides.
func Load(path string, env []string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(data, env)
}

// Parse decodes a YAML document: it starts from [Default], lets each key
// present in data replace its default, applies the STREAMER_* overrides
// found in env (os.Environ-style "KEY=value"; nil means none) and
// validates the result.
//
// Every error names the key at fault (with its line in the file, or the
// environment variable that set it). Errors are of type *[Error]; when
// there are several they are joined with [errors.Join].
func Parse(data []byte, env []string) (Config, error) {
	d := newDecoder()
	c := Default()
	d.document(&c, data)
	d.env(&c, env)
	if len(d.errs) > 0 {
		return Config{}, errors.Join(d.errs...)
	}
	if errs := validate(&c, d.src); len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// Validate checks c as [Parse] does after decoding. Use it on a Config
// built or changed in code (for instance after filling in brokers).
func (c Config) Validate() error {
	return errors.Join(validate(&c, nil)...)
}

// Fingerprint returns the hex SHA-256 of a canonical encoding of the models
// list (every field, in list order). Two configs with equal fingerprints
// configure the same models; state saved under one fingerprint must not be
// restored under another.
func (c Config) Fingerprint() string {
	return fingerprint("streamer/config models v1", c.Models)
}

// Fingerprint returns the hex SHA-256 of a canonical encoding of this one
// model (every field, name included). Unlike [Config.Fingerprint] it does
// not change when other models are added, removed or reordered.
func (m Model) Fingerprint() string {
	return fingerprint("streamer/config model v1", m)
}

// canonicalModel fixes the field names and order of the fingerprint
// encoding, independently of the Go struct.
type canonicalModel struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Kernel  string   `json:"kernel"`
	Gamma   string   `json:"gamma"`
	RFF     int      `json:"rff_features"`
	Seed    string   `json:"seed"`
	Dim     int      `json:"dim"`
	Names   []string `json:"names"`
	Balance bool     `json:"balance"`
	Delta   string   `json:"delta"`
	// Added with the model family; omitted when zero so that older
	// fingerprints are unchanged.
	Degree       int       `json:"degree,omitempty"`
	Coef0        string    `json:"coef0,omitempty"`
	Standardize  bool      `json:"standardize,omitempty"`
	Budget       int       `json:"budget,omitempty"`
	Window       int       `json:"window,omitempty"`
	HalfLife     string    `json:"half_life,omitempty"`
	Levels       int       `json:"levels,omitempty"`
	Edges        []float64 `json:"edges,omitempty"`
	Normalize    bool      `json:"normalize,omitempty"`
	LearningRate string    `json:"learning_rate,omitempty"`
	L2           string    `json:"l2,omitempty"`
	C            string    `json:"c,omitempty"`
	CPos         string    `json:"c_pos,omitempty"`
	CNeg         string    `json:"c_neg,omitempty"`
	WindowTime   string    `json:"window_time,omitempty"`
	ProbLevels   int       `json:"probability_levels,omitempty"`
	Scope        string    `json:"scope,omitempty"` // "" for global
	Lambda       string    `json:"lambda,omitempty"`
	Kernels      []string  `json:"kernels,omitempty"`
	Solver       string    `json:"solver,omitempty"`
}

func kernelStrings(ks []WeightedKernel) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Type+"/"+strconv.FormatFloat(k.Gamma, 'g', -1, 64)+"/"+strconv.FormatFloat(k.V, 'g', -1, 64))
	}
	return out
}

func fmtNonZero(x float64) string {
	if x == 0 {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func canonical(m Model) canonicalModel {
	names := m.Features.Names
	if names == nil {
		names = []string{}
	}
	return canonicalModel{
		Name:    m.Name,
		Type:    m.Type,
		Kernel:  m.Kernel.Type,
		Gamma:   strconv.FormatFloat(m.Kernel.Gamma, 'g', -1, 64),
		RFF:     m.Kernel.Features,
		Seed:    strconv.FormatUint(m.Kernel.Seed, 10),
		Dim:     m.Features.Dim,
		Names:   names,
		Balance: m.Balance,
		Delta:   strconv.FormatFloat(m.Delta, 'g', -1, 64),

		Degree:       m.Kernel.Degree,
		Coef0:        fmtNonZero(m.Kernel.Coef0),
		Standardize:  m.Features.Standardize,
		Budget:       m.Budget,
		Window:       m.Window.Events,
		HalfLife:     fmtNonZero(m.Decay.HalfLife),
		Levels:       m.Levels,
		Edges:        m.Edges,
		Normalize:    m.Normalize,
		LearningRate: fmtNonZero(m.LearningRate),
		L2:           fmtNonZero(m.L2),
		C:            fmtNonZero(m.C),
		CPos:         fmtNonZero(m.CPos),
		CNeg:         fmtNonZero(m.CNeg),
		WindowTime:   fmtNonZero(m.Window.Time.Seconds()),
		ProbLevels:   m.Probability.Levels,
		Scope:        map[string]string{ScopeKey: ScopeKey}[m.Scope],
		Lambda:       fmtNonZero(m.Lambda),
		Kernels:      kernelStrings(m.Kernels),
		Solver:       m.Solver,
	}
}

func fingerprint(domain string, v any) string {
	var enc any
	switch v := v.(type) {
	case Model:
		enc = canonical(v)
	case []Model:
		ms := make([]canonicalModel, len(v))
		for i, m := range v {
			ms[i] = canonical(m)
		}
		enc = ms
	}
	b, err := json.Marshal(enc)
	if err != nil {
		panic("config: fingerprint: " + err.Error()) // strings, ints and bools always encode
	}
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
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
