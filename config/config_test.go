package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// mamParams returns the mam defaults changed by edit.
func mamParams(edit func(p *online.MAMParams)) *online.MAMParams {
	p := online.DefaultMAMParams()
	if edit != nil {
		edit(&p)
	}
	return &p
}

func TestGoodRoundTrip(t *testing.T) {
	got, err := Load("testdata/good.yaml", nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"age", "price", "score"}
	want := Config{
		ShutdownTimeout: 25 * time.Second,
		Kafka: Kafka{
			Brokers:         []string{"kafka-0.kafka:9092", "kafka-1.kafka:9093", "[::1]:9094"},
			Group:           "scoring",
			InputTopic:      "clicks",
			OutputTopic:     "click-scores",
			DLQTopic:        "clicks.dlq",
			ClientID:        "scorer-1",
			StartOffset:     "latest",
			MaxMessageBytes: 65536,
			MaxFeatureAbs:   DefaultMaxFeatureAbs,
			CommitInterval:  250 * time.Millisecond,
			UnreadyAfter:    15 * time.Second,
			SessionTimeout:  10 * time.Second,
			Producer:        Producer{BatchSize: 500, BatchTimeout: 10 * time.Millisecond, RequiredAcks: "one", BufferBytes: 128 << 20},
			TLS:             TLS{Enabled: true, ServerName: "kafka.internal"},
			SASL:            SASL{Mechanism: "scram-sha-512", Username: "scorer", Password: "pa55: word"},
		},
		HTTP: HTTP{Listen: "127.0.0.1:9100", ReadTimeout: 5 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 30 * time.Second, PProf: true,
			Auth: HTTPAuth{Protect: DefaultProtect()}},
		Log:         Log{Level: "debug", Format: "json"},
		Metrics:     Metrics{AccuracyWindow: 5000},
		Snapshot:    Snapshot{Every: 5 * time.Second, Keep: 3, Versions: 5, VersionsEvery: 10 * time.Minute, Scope: SnapshotScopeInstance, RemoteRefresh: time.Second},
		Calibration: Calibration{Window: 2000, Every: 100, Delta: 0.1, MinInterval: 10 * time.Millisecond},
		Rank: Rank{MaxCandidates: 1000, Partitioner: PartitionerMurmur2, Explore: Explore{Policy: ExploreGreedy, Epsilon: 0.05, Alpha: DefaultAlphaUCB, Samples: 100, Seed: 1},
			Join:       RankJoin{Events: DefaultRankJoinEvents, PerKey: DefaultRankJoinPerKey, NewKeys: DefaultRankJoinNewKeys},
			Challenger: Challenger{Promote: PromoteManual, Estimator: "dr", Confidence: 0.95, Hold: DefaultChallengerHold}},
		Models: []Model{
			{
				Name:     "mam_rbf",
				Type:     "mam",
				Features: Features{Dim: 3, Names: names},
				Params: mamParams(func(p *online.MAMParams) {
					p.Kernel = online.KernelSpec{Type: "rbf", Gamma: 0.5, Features: 256, Seed: 18446744073709551615}
					p.Balance = false
					p.Delta = 0.01
				}),
			},
			{
				Name:     "mam-linear_2",
				Type:     "mam",
				Features: Features{Dim: 3, Names: names},
				// The linear kernel has no gamma, features or seed.
				Params: mamParams(func(p *online.MAMParams) { p.Kernel = online.KernelSpec{Type: "linear"} }),
			},
			{
				Name:     "defaults",
				Type:     "mam",
				Features: Features{Dim: 3, Names: names},
				Params:   mamParams(nil),
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load(good.yaml)\n got %+v\nwant %+v", got, want)
	}
	for i, m := range got.Models {
		if w := want.Models[i].Params.(*online.MAMParams); !reflect.DeepEqual(m.Params, w) {
			t.Errorf("models[%d] params\n got %+v\nwant %+v", i, m.Params, w)
		}
	}
	// The default mam kernel is the documented one.
	if k := online.DefaultMAMParams().Kernel; k != (online.KernelSpec{Type: "rbf", Gamma: 0, Features: 1024, Seed: 1}) { // gamma 0: auto
		t.Errorf("default mam kernel %+v", k)
	}
	if err := got.Validate(testTypes); err != nil {
		t.Fatalf("Validate of a loaded config: %v", err)
	}
}

func TestMinimal(t *testing.T) {
	got, err := Parse([]byte("models:\n  - {name: m, type: mam, features: {dim: 4}}\n"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Models = []Model{{Name: "m", Type: "mam", Features: Features{Dim: 4}, Params: mamParams(nil)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// The spec the registry builds the model from.
	if s := got.Models[0].Spec(); s.Type != "mam" || s.Dim != 4 || s.Standardize || s.Params != got.Models[0].Params {
		t.Fatalf("spec %+v", s)
	}
	if _, err := testTypes.New(got.Models[0].Spec()); err != nil {
		t.Fatal(err)
	}
}

// TestMembers: an aggregator's input is its members' predictions, then
// the features.
func TestMembers(t *testing.T) {
	got, err := Parse([]byte("models:\n  - {name: a, type: mam, features: {dim: 3}}\n  - {name: b, type: logistic, features: {dim: 3}}\n  - {name: boost, type: adaboost, features: {dim: 3}, members: [a, b], stumps: true}\n"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Models[2]; !slices.Equal(m.Members(), []string{"a", "b"}) || m.InputDim() != 5 || m.Spec().Dim != 5 {
		t.Fatalf("members %v, input dim %d, spec dim %d; want [a b], 5, 5", m.Members(), m.InputDim(), m.Spec().Dim)
	}
	if _, err := testTypes.New(got.Models[2].Spec()); err != nil {
		t.Fatal(err)
	}
}

// TestShape: features.shape gives the dimension, rows·cols.
func TestShape(t *testing.T) {
	got, err := Parse([]byte("models:\n  - {name: m, type: mam, features: {shape: [4, 5]}}\n"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if f := got.Models[0].Features; f.Dim != 20 || !slices.Equal(f.Shape, []int{4, 5}) || got.Models[0].InputDim() != 20 {
		t.Fatalf("features %+v, input dim %d; want dim 20, shape [4 5]", f, got.Models[0].InputDim())
	}
}

func TestBad(t *testing.T) {
	// want is a fragment of the message; every case names the key at fault.
	cases := []struct{ file, want string }{
		{"unknown_top_level", `config: unknown key "logging" (line 3)`},
		{"unknown_nested_in_list", `config: unknown key "models[0].kernel.gama" (line 6) (models[0].kernel takes: type, gamma, features, seed, degree, coef0, orthogonal, sparse)`},
		{"unknown_producer_key", `config: unknown key "kafka.producer.batch_bytes" (line 3)`},
		{"missing_brokers", `config: kafka.brokers: at least one broker (host:port) is required (line 2)`},
		{"portless_broker", `config: kafka.brokers[1]: "kafka-1" is not host:port (line 2)`},
		{"bad_duration", `config: kafka.commit_interval: "5 seconds" is not a duration`},
		{"bad_int", `config: kafka.producer.batch_size: "lots" is not an integer (line 3)`},
		{"zero_batch_size", `config: kafka.producer.batch_size: must be > 0, got 0 (line 3)`},
		{"negative_buffer_bytes", `config: kafka.producer.buffer_bytes: must be > 0, got -1 (line 3)`},
		{"bad_start_offset", `config: kafka.start_offset: "middle" is not one of earliest, latest (line 2)`},
		{"bad_acks", `config: kafka.producer.required_acks: "two" is not one of none, one, all`},
		{"same_topics", `config: kafka.output_topic: "events" is also kafka.input_topic`},
		{"bad_listen", `config: http.listen: "9464" is not host:port`},
		{"bad_log_level", `config: log.level: "verbose" is not one of debug, info, warn, error`},
		{"no_models", `config: models: at least one model is required`},
		{"missing_name", `config: models[0].name: required (line 2)`},
		{"delta_too_big", `config: models[0].delta: must be in (0, 1), got 1.5 (line 5)`},
		{"negative_gamma", `config: models[0].kernel.gamma: must be > 0 and finite, got -1 (line 4)`},
		{"gamma_on_linear", `config: models[0].kernel.gamma: not used by the linear kernel: must be 0, got 2 (line 6)`},
		{"too_many_rff", `config: models[0].kernel.features: must be in [1, 65536], got 100000 (line 4)`},
		{"duplicate_names", `config: models[1].name: "m" is already the name of models[0]`},
		{"bad_name_chars", `config: models[0].name: "My.Model" must be 1 to 64 characters from [a-z0-9_-]`},
		{"unknown_model_type", `config: models[0].type: "rbm" is not a supported model type (supported: mam, omam, logistic, lda, fm, svm, lsrrank, mlsrrank, krr, lowrank, adaboost)`},
		{"unknown_kernel_type", `config: models[0].kernel.type: unknown kernel "poly" (want "linear", "rbf", "laplacian", or "polynomial" with budget > 0) (line 2)`},
		{"names_len_ne_dim", `config: models[0].features.names: has 2 names but models[0].features.dim is 3`},
		{"duplicate_feature_names", `config: models[0].features.names[1]: "xs" repeats models[0].features.names[0]`},
		{"missing_dim", `config: models[0].features.dim: required`},
		{"mismatched_dims", `config: models[1].features.dim: 3 differs from models[0].features.dim 2`},
		{"mismatched_names", `config: models[1].features.names: [ys, xs] differs from models[0].features.names [xs, ys]`},
		{"bad_balance", `config: models[0].balance: "yes" is not a boolean (true or false) (line 2)`},
		{"repeated_key", `config: kafka.group: key repeated (first at line 2) (line 3)`},
		{"section_not_mapping", `config: kafka: must be a mapping of keys, got "localhost:9092" (line 1)`},
		{"not_a_config", `config: (top level): must be a mapping of keys, got one text value of 20 bytes: not a configuration file? (line 1)`},
		{"two_documents", `config: a second YAML document starts at line`},
		{"syntax", `config: yaml:`},
		{"partition_scope_without_changelog", `config: snapshot.scope: "partition" needs snapshot.changelog_topic: the partitions' state moves between instances through it (line 2)`},
		{"unknown_snapshot_scope", `config: snapshot.scope: unknown "cluster" (one of instance, partition) (line 3)`},
		{"bad_shape", `config: models[0].features.shape: must be [rows, cols], two integers > 0, got [2 0]`},
		{"shape_ne_dim", `config: models[0].features.shape: [2 3] has 6 entries but models[0].features.dim is 5`},
		{"shape_with_names", `config: models[0].features.shape: does not go with models[0].features.names`},
		{"mismatched_shape", `config: models[1].features.shape: [] differs from models[0].features.shape [2 3]`},
		{"member_unknown", `config: models[0].members[0]: "nope" is not the name of a model of this config`},
		{"member_after", `config: models[0].members[0]: "m" is models[1]: members must be listed before the model that aggregates them`},
		{"member_not_classifier", `config: models[1].members[0]: "r" is a regression model (type krr); members must be classifiers`},
		{"member_key_scoped", `config: models[1].members[0]: "m" has scope key; members must be global models`},
		{"rank_unknown_model", `config: rank.model: "nope" is not the name of a model of this config ([m]) (line 2)`},
		{"rank_bad_policy", `config: rank.explore.policy: "softmax" is not one of greedy, epsilon, ucb, thompson (line 3)`},
		{"rank_ucb_global", `config: rank.explore.policy: ucb keeps exploration statistics per key: rank.model "m" needs scope: key (line 3)`},
		{"rank_bad_alpha", `config: rank.explore.alpha: must be a finite number ≥ 0, got -1 (line 3)`},
		{"rank_bad_samples", `config: rank.explore.samples: must be in [1, 100000], got 0 (line 3)`},
		{"rank_aggregator", `config: rank.model: "boost" aggregates other models' predictions (type adaboost)`},
		{"rank_join_negative", `config: rank.join.events: must be in [0, 100000000] (0 = shown items are not kept), got -1 (line 3)`},
		{"rank_join_entries", `config: rank.join.entries: 100 is fewer than features.max_features (256) of rank.model "m": an item with that many hashed entries could never wait for its label (line 3)`},
		{"aggregator_standardized", `config: models[1].features.standardize: does not apply to model type adaboost`},
		{"hash_bits_logistic", `config: models[0].features.hash.bits: 22 gives 2^22 = 4194304 hashed indices, more than model type logistic takes in this configuration (input dimension: must be in [1, 1048576], got 4194304). The types that keep state per input dimension`},
		{"hash_bits_mam", `config: models[0].features.hash.bits: 24 gives 2^24 = 16777216 hashed indices, more than model type mam takes in this configuration (input dimension: must be in [1, 1048576], got 16777216)`},
		{"dim_too_big", `config: models[0].features.dim: must be in [1, 1048576], got 2000000 (line 4)`},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.file+".yaml"] = true
		t.Run(tc.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", "bad", tc.file+".yaml"), nil, testTypes)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
	files, err := os.ReadDir("testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !covered[f.Name()] {
			t.Errorf("testdata/bad/%s has no case in TestBad", f.Name())
		}
	}
}

func TestErrorType(t *testing.T) {
	_, err := Load("testdata/bad/negative_gamma.yaml", nil, testTypes)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a *config.Error", err)
	}
	if e.Key != "models[0].kernel.gamma" || e.Line != 4 || e.Env != "" {
		t.Fatalf("got %+v", e)
	}
}

func TestSeveralErrors(t *testing.T) {
	_, err := Parse([]byte("kafka: {start_offset: middle}\nlog: {format: xml}\n"), nil, testTypes)
	for _, want := range []string{"kafka.start_offset", "log.format", "models: at least one model"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

const minimal = "models:\n  - {name: m, type: mam, features: {dim: 2}}\n"

func TestEnvOverrides(t *testing.T) {
	env := []string{
		"PATH=/usr/bin",
		"STREAMER_CONFIG=/etc/streamer.yaml",
		"STREAMER_KAFKA_BROKERS=host1:9092, host2:9092",
		"STREAMER_KAFKA_GROUP=g2",
		"STREAMER_HTTP_LISTEN=:9999",
		"STREAMER_KAFKA_COMMIT_INTERVAL=3s",
		"STREAMER_KAFKA_PRODUCER_BATCH_SIZE=42",
		"STREAMER_KAFKA_PRODUCER_BATCH_TIMEOUT=20ms",
		"STREAMER_METRICS_ACCURACY_WINDOW=7",
		"STREAMER_LOG_LEVEL=debug",
		"no-equals-sign",
	}
	got, err := Load("testdata/good.yaml", env, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	k := got.Kafka
	if !slices.Equal(k.Brokers, []string{"host1:9092", "host2:9092"}) ||
		k.Group != "g2" || got.HTTP.Listen != ":9999" || k.CommitInterval != 3*time.Second ||
		k.Producer.BatchSize != 42 || k.Producer.BatchTimeout != 20*time.Millisecond ||
		got.Metrics.AccuracyWindow != 7 || got.Log.Level != "debug" {
		t.Fatalf("overrides not applied: %+v", got)
	}
	// Keys without a variable keep the file's value.
	if k.InputTopic != "clicks" || k.Producer.RequiredAcks != "one" {
		t.Fatalf("file values lost: %+v", k)
	}
}

func TestEnvErrors(t *testing.T) {
	cases := []struct{ env, want string }{
		{"STREAMER_KAFKA_COMMIT_INTERVAL=5 seconds", `config: kafka.commit_interval: "5 seconds" is not a duration (write e.g. 1s, 250ms, 1m30s) (from STREAMER_KAFKA_COMMIT_INTERVAL)`},
		{"STREAMER_KAFKA_PRODUCER_BATCH_SIZE=1k", `config: kafka.producer.batch_size: "1k" is not an integer (from STREAMER_KAFKA_PRODUCER_BATCH_SIZE)`},
		{"STREAMER_KAFKA_START_OFFSET=middle", `config: kafka.start_offset: "middle" is not one of earliest, latest (from STREAMER_KAFKA_START_OFFSET)`},
		{"STREAMER_KAFKA_BROKERS=host1:9092,host2", `config: kafka.brokers[1]: "host2" is not host:port (from STREAMER_KAFKA_BROKERS)`},
		{"STREAMER_KAFKA_BROKERS=", `config: kafka.brokers: at least one broker (host:port) is required (from STREAMER_KAFKA_BROKERS)`},
		{"STREAMER_KAFKA_GROUP=", `config: kafka.group: required (from STREAMER_KAFKA_GROUP)`},
		{"STREAMER_KAFKA_GRUOP=x", `config: unknown environment variable STREAMER_KAFKA_GRUOP`},
		{"STREAMER_MODELS=x", `config: unknown environment variable STREAMER_MODELS`},
		{"STREAMER_KAFKA_MAX_FEATURE_ABS=big", `config: kafka.max_feature_abs: "big" is not a number (from STREAMER_KAFKA_MAX_FEATURE_ABS)`},
		{"STREAMER_KAFKA_MAX_FEATURE_ABS=0", `config: kafka.max_feature_abs: must be > 0 and ≤ 1e100`},
		{"STREAMER_KAFKA_MAX_FEATURE_ABS=1e200", `config: kafka.max_feature_abs: must be > 0 and ≤ 1e100`},
		{"STREAMER_KAFKA_MAX_FEATURE_ABS=NaN", `config: kafka.max_feature_abs: must be > 0 and ≤ 1e100`},
		{"STREAMER_CALIBRATION_MIN_INTERVAL=-1ms", `config: calibration.min_interval: must be in [0s, 1h] (0 = refit every calibration.every pairs), got -1ms`},
		{"STREAMER_CALIBRATION_MIN_INTERVAL=2h", `config: calibration.min_interval: must be in [0s, 1h]`},
		{"STREAMER_LABELS_JOIN_WINDOW_PER_KEY=-1", `config: labels.join_window.per_key: must be >= 0 (0 = no limit), got -1`},
		{"STREAMER_SHUTDOWN_TIMEOUT=1000h", `config: shutdown_timeout: must be in [1s, 1h]`},
		{"STREAMER_RANK_LOG_TOPIC=events", `config: rank.log_topic: "events" is also kafka.input_topic`},
		{"STREAMER_RANK_LOG_TOPIC=scores", `config: rank.log_topic: "scores" is also kafka.output_topic`},
	}
	for _, tc := range cases {
		t.Run(tc.env, func(t *testing.T) {
			_, err := Parse([]byte(minimal), []string{tc.env}, testTypes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
}

// A broker list replaced by a variable is reported against the variable,
// not against the lines of the file's list.
func TestEnvOwnsList(t *testing.T) {
	_, err := Load("testdata/good.yaml", []string{"STREAMER_KAFKA_BROKERS=a:1,b:2,nope"}, testTypes)
	want := `config: kafka.brokers[2]: "nope" is not host:port (from STREAMER_KAFKA_BROKERS)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestEnvVarsCoverLeaves(t *testing.T) {
	vars := EnvVars()
	if len(vars) != len(leaves) || len(vars) != 76 {
		t.Fatalf("%d variables", len(vars))
	}
	for _, v := range vars {
		if _, err := Parse([]byte(minimal), []string{v.Name + "=" + "1"}, testTypes); err != nil && strings.Contains(err.Error(), "unknown environment variable") {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
	if EnvName("kafka.producer.batch_size") != "STREAMER_KAFKA_PRODUCER_BATCH_SIZE" {
		t.Fatal(EnvName("kafka.producer.batch_size"))
	}
}

// The reference in doc.go names every key and variable: every key outside
// models, and the keys every model has; it sends the reader to
// configs/streamer.yaml for the model types' own keys.
func TestDocListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range EnvVars() {
		if !regexp.MustCompile(`//\t` + regexp.QuoteMeta(v.Key) + `\s`).Match(doc) {
			t.Errorf("doc.go does not list key %s", v.Key)
		}
		if !strings.Contains(string(doc), "//\t"+v.Name) {
			t.Errorf("doc.go does not list variable %s", v.Name)
		}
	}
	for _, k := range []string{"name", "type", "features.dim", "features.names", "features.standardize", "scope", "max_keys"} {
		if !regexp.MustCompile(`//\t` + regexp.QuoteMeta(k) + `\s`).Match(doc) {
			t.Errorf("doc.go does not list models[i].%s", k)
		}
	}
	// The common keys are the ones the decoder handles itself.
	for _, k := range commonKeys {
		if !regexp.MustCompile(`//\t` + regexp.QuoteMeta(k) + `[\s.]`).Match(doc) {
			t.Errorf("doc.go does not list the common model key %s", k)
		}
	}
	if !strings.Contains(string(doc), "configs/streamer.yaml") {
		t.Error("doc.go does not point to configs/streamer.yaml for the model types' keys")
	}
	if strings.Contains(string(doc), "DefaultModel") {
		t.Error("doc.go mentions DefaultModel, which is gone")
	}
}

func TestShippedConfigs(t *testing.T) {
	ref, err := Load("../configs/streamer.yaml", nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	// The reference file spells out the defaults: only models differ.
	def := Default()
	def.Models = ref.Models
	def.Snapshot.Dir = "state/snapshots" // the one non-default: durable state on
	if !reflect.DeepEqual(ref, def) {
		t.Errorf("configs/streamer.yaml does not hold the defaults:\n got %+v\nwant %+v", ref, def)
	}
	// Its first mam model spells out the mam defaults (cmd/streamer's
	// TestReferenceConfig checks every type's keys).
	i := slices.IndexFunc(ref.Models, func(m Model) bool { return m.Type == online.MAMName })
	if i < 0 {
		t.Fatalf("configs/streamer.yaml has no mam model: %+v", ref.Models)
	}
	if m := ref.Models[i]; !reflect.DeepEqual(m.Params, mamParams(nil)) || m.Features.Dim != 2 || !slices.Equal(m.Features.Names, []string{"xs", "ys"}) {
		t.Errorf("configs/streamer.yaml models[%d]: %+v %+v", i, m, m.Params)
	}

	demo, err := Load("../configs/demo.yaml", nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if len(demo.Models) != 2 {
		t.Fatalf("demo models: %+v", demo.Models)
	}
	rbf, lin := demo.Models[0], demo.Models[1]
	if p, ok := rbf.Params.(*online.MAMParams); rbf.Name != "mam_rbf" || !ok ||
		p.Kernel != (online.KernelSpec{Type: "rbf", Gamma: 10, Features: 1024, Seed: 1}) || !p.Balance {
		t.Errorf("demo mam_rbf: %+v %+v", rbf, rbf.Params)
	}
	if p, ok := lin.Params.(*online.MAMParams); lin.Name != "mam_linear" || !ok ||
		p.Kernel != (online.KernelSpec{Type: "linear"}) || !p.Balance {
		t.Errorf("demo mam_linear: %+v %+v", lin, lin.Params)
	}
	for _, m := range demo.Models {
		if !slices.Equal(m.Features.Names, []string{"xs", "ys"}) || m.Features.Dim != 2 {
			t.Errorf("demo %s features: %+v", m.Name, m.Features)
		}
	}
	// The demo fills in its embedded broker, then validates.
	demo.Kafka.Brokers = []string{"127.0.0.1:40123"}
	if err := demo.Validate(testTypes); err != nil {
		t.Fatal(err)
	}
}

func TestValidateInCode(t *testing.T) {
	c := Default()
	if err := c.Validate(testTypes); err == nil || !strings.Contains(err.Error(), "models: at least one model is required") {
		t.Fatalf("got %v", err)
	}
	p := mamParams(func(p *online.MAMParams) { p.Kernel = online.KernelSpec{Type: online.KernelLinear, Seed: 1} })
	c.Models = []Model{{Name: "m", Type: online.MAMName, Features: Features{Dim: 2}, Params: p}}
	if err := c.Validate(testTypes); err == nil || err.Error() != "config: models[0].kernel.seed: not used by the linear kernel: must be 0, got 1" {
		t.Fatalf("got %v", err)
	}
	p.Kernel.Seed = 0
	if err := c.Validate(testTypes); err != nil {
		t.Fatal(err)
	}
	p.Delta = 0
	if err := c.Validate(testTypes); err == nil || err.Error() != "config: models[0].delta: must be in (0, 1), got 0" {
		t.Fatalf("got %v", err)
	}
	p.Delta = online.DefaultDelta

	// A model built in code needs its type's parameters.
	for _, tc := range []struct {
		params online.Params
		want   string
	}{
		{nil, "config: models[0]: no parameters for model type mam"},
		{&online.OMAMParams{}, "config: models[0]: parameters *online.OMAMParams for model type mam, want *online.MAMParams"},
	} {
		c.Models[0].Params = tc.params
		if err := c.Validate(testTypes); err == nil || err.Error() != tc.want {
			t.Errorf("params %T: got %v, want %s", tc.params, err, tc.want)
		}
	}
	c.Models[0].Params = p
	if err := c.Validate(nil); err == nil || !strings.Contains(err.Error(), "config: models[0].type: no model types registered") {
		t.Fatalf("nil registry: got %v", err)
	}
	if _, err := Parse([]byte(minimal), nil, nil); err == nil || !strings.Contains(err.Error(), "config: models[0].type: no model types registered (line 2)") {
		t.Fatalf("Parse with a nil registry: got %v", err)
	}
}

// perturb calls fn once for every key under the parameter struct v (an
// addressable struct), dotted from prefix, with a function that changes
// that key's value in place and one that restores it. A list of structs is
// changed by adding an item; the keys of its items are changed in a list
// of one item, which perturb adds (and removes again) around them.
func perturb(t *testing.T, v reflect.Value, prefix string, fn func(key string, change func())) {
	t.Helper()
	for _, f := range codec.Fields(v) {
		key := prefix + f.Key
		fv := f.Value
		old := reflect.New(fv.Type()).Elem()
		old.Set(fv)
		restore := func() { fv.Set(old) }
		switch {
		case fv.Type() == reflect.TypeOf(time.Duration(0)):
			fn(key, func() { fv.SetInt(fv.Int() + int64(time.Second)) })
		case fv.Kind() == reflect.Struct:
			perturb(t, fv, key+".", fn)
			continue
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			fn(key, func() { fv.Set(reflect.Append(fv, reflect.Zero(fv.Type().Elem()))) })
			restore()
			fv.Set(reflect.Append(fv, reflect.Zero(fv.Type().Elem())))
			perturb(t, fv.Index(fv.Len()-1), fmt.Sprintf("%s[%d].", key, fv.Len()-1), fn)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Float64:
			fn(key, func() { fv.Set(reflect.Append(fv, reflect.ValueOf(1.5))) })
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Slice && fv.Type().Elem().Elem().Kind() == reflect.String:
			fn(key, func() { fv.Set(reflect.Append(fv, reflect.ValueOf([]string{"a", "b"}))) })
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			fn(key, func() { fv.Set(reflect.Append(fv, reflect.ValueOf("x"))) })
		case fv.Kind() == reflect.Bool:
			fn(key, func() { fv.SetBool(!fv.Bool()) })
		case fv.Kind() == reflect.Int:
			fn(key, func() { fv.SetInt(fv.Int() + 1) })
		case fv.Kind() == reflect.Uint64:
			fn(key, func() { fv.SetUint(fv.Uint() + 1) })
		case fv.Kind() == reflect.Float64:
			fn(key, func() {
				if x := fv.Float(); x != 0 {
					fv.SetFloat(x * (1 + 1e-9)) // the smallest of changes counts
				} else {
					fv.SetFloat(0.5)
				}
			})
		case fv.Kind() == reflect.String:
			fn(key, func() { fv.SetString(fv.String() + "x") })
		default:
			t.Fatalf("%s: no perturbation for %v", key, fv.Type())
		}
		restore()
	}
}

func TestFingerprint(t *testing.T) {
	c, err := Load("testdata/good.yaml", nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	fp := c.Fingerprint()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) {
		t.Fatalf("fingerprint %q", fp)
	}
	// Non-model keys do not matter.
	d, _ := Load("testdata/good.yaml", []string{"STREAMER_KAFKA_GROUP=other", "STREAMER_LOG_LEVEL=warn"}, testTypes)
	if d.Fingerprint() != fp {
		t.Error("fingerprint depends on non-model keys")
	}
	// Writing a default out does not matter either.
	a, err := Parse([]byte("models: [{name: m, type: mam, features: {dim: 2}}]"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte("models: [{name: m, type: mam, kernel: {type: rbf, gamma: auto, features: 1024, seed: 1}, bandwidths: 0, balance: true, delta: 0.05, budget: 0, window: {events: 0}, decay: {half_life: 0}, scope: global, features: {dim: 2, standardize: false}}]"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() || a.Models[0].Fingerprint() != b.Models[0].Fingerprint() {
		t.Error("explicit defaults change the fingerprint")
	}

	// Every model field does: the common keys, and every key of every
	// model type's parameters.
	type change struct {
		what string
		m    Model
	}
	base := a.Models[0]
	changes := []change{}
	common := func(what string, edit func(m *Model)) {
		m := base
		m.Features.Names = slices.Clone(base.Features.Names)
		edit(&m)
		changes = append(changes, change{what, m})
	}
	common("name", func(m *Model) { m.Name = "n" })
	common("type", func(m *Model) { m.Type = "other" })
	common("features.dim", func(m *Model) { m.Features.Dim = 3 })
	common("features.names", func(m *Model) { m.Features.Names = []string{"x", "y"} })
	common("features.names empty", func(m *Model) { m.Features.Names = []string{} })
	common("features.standardize", func(m *Model) { m.Features.Standardize = true })
	common("scope", func(m *Model) { m.Scope = ScopeKey })
	common("max_keys", func(m *Model) { m.MaxKeys = 5 })
	common("no params", func(m *Model) { m.Params = nil })
	// The keys the old Model had, spelled out.
	mam := func(what string, edit func(p *online.MAMParams)) {
		common("mam "+what, func(m *Model) { m.Params = mamParams(edit) })
	}
	mam("kernel.type", func(p *online.MAMParams) { p.Kernel.Type = "linear" })
	mam("kernel.gamma", func(p *online.MAMParams) { p.Kernel.Gamma = 10.000000001 })
	mam("kernel.features", func(p *online.MAMParams) { p.Kernel.Features = 1023 })
	mam("kernel.seed", func(p *online.MAMParams) { p.Kernel.Seed = 2 })
	mam("balance", func(p *online.MAMParams) { p.Balance = false })
	mam("delta", func(p *online.MAMParams) { p.Delta = 0.1 })
	// Every key of every type, from the type's defaults.
	for _, typ := range testTypes.Types() {
		m := base
		m.Type = typ.Name()
		m.Params = typ.NewParams()
		if typ.Name() != base.Type {
			changes = append(changes, change{typ.Name() + " defaults", m})
		}
		pv := reflect.ValueOf(m.Params).Elem()
		keys := 0
		perturb(t, pv, "", func(key string, edit func()) {
			keys++
			before := Model{Name: m.Name, Type: m.Type, Features: m.Features, Params: clone(m.Params)}
			edit()
			changed := Model{Name: m.Name, Type: m.Type, Features: m.Features, Params: clone(m.Params)}
			if before.Fingerprint() == changed.Fingerprint() {
				t.Errorf("%s: changing %s (%+v to %+v) does not change the fingerprint", typ.Name(), key, before.Params, changed.Params)
			}
			changes = append(changes, change{typ.Name() + " " + key, changed})
		})
		if top := len(codec.Fields(pv)); keys < top {
			t.Errorf("%s: %d keys changed, fewer than its %d top-level keys", typ.Name(), keys, top)
		}
		if !reflect.DeepEqual(m.Params, typ.NewParams()) {
			t.Errorf("%s: perturb did not restore the defaults: %+v", typ.Name(), m.Params)
		}
	}
	seen := map[string]change{base.Fingerprint(): {"base", base}}
	for _, ch := range changes {
		f := ch.m.Fingerprint()
		// Two changes give one fingerprint only if they make one model
		// (the walk repeats some of the spelled-out mam changes).
		if prev, ok := seen[f]; ok && !reflect.DeepEqual(prev.m, ch.m) {
			t.Errorf("change %q gives the fingerprint of %q", ch.what, prev.what)
		}
		seen[f] = ch
		if (Config{Models: []Model{ch.m}}).Fingerprint() == a.Fingerprint() {
			t.Errorf("change %q does not change Config.Fingerprint", ch.what)
		}
	}
	// Scope global is the default scope.
	g := base
	g.Scope = ScopeGlobal
	if g.Fingerprint() != base.Fingerprint() {
		t.Error("scope: global changes the fingerprint")
	}
	// Order of models matters for the list, not for each model.
	two := Config{Models: []Model{c.Models[0], c.Models[1]}}
	swapped := Config{Models: []Model{c.Models[1], c.Models[0]}}
	if two.Fingerprint() == swapped.Fingerprint() {
		t.Error("model order does not change Config.Fingerprint")
	}
	// Golden value: the canonical encoding must not drift silently, or
	// saved state would be refused after an upgrade.
	// The default mam (gamma auto since the bandwidths were learned) has
	// its own; the former default, gamma 10 now written out, keeps the one
	// it had, so that its saved state restores after the upgrade.
	const (
		goldenList   = "f330cfebb49f2b36bd687c4ba585daf9c683dd51c2a90500c44a1ddf7699781e"
		goldenModel  = "b61260965e54c378f4945440baa0d48f2789be9bea59d33f1d4498ef570eaa76"
		gamma10List  = "6506985fd777a8ec839267151db64a52a65efc96103188b230f8b52b26e9bb60"
		gamma10Model = "2e37439d1ef60d61ba67e146135165da0f3b9694e8be1c6e6c646068648a42bf"
	)
	if a.Fingerprint() != goldenList || a.Models[0].Fingerprint() != goldenModel {
		t.Errorf("fingerprints changed: %s %s; if on purpose, bump the version in the domain string", a.Fingerprint(), a.Models[0].Fingerprint())
	}
	g10, err := Parse([]byte("models: [{name: m, type: mam, kernel: {type: rbf, gamma: 10}, features: {dim: 2}}]"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if g10.Fingerprint() != gamma10List || g10.Models[0].Fingerprint() != gamma10Model {
		t.Errorf("gamma 10's fingerprints changed: %s %s; its saved state would no longer restore", g10.Fingerprint(), g10.Models[0].Fingerprint())
	}
}

// clone returns a deep copy of the parameter struct p points to (through
// its canonical encoding, which is what the fingerprint sees).
func clone(p online.Params) online.Params {
	q := reflect.New(reflect.TypeOf(p).Elem())
	r := codec.NewReader(codec.AppendParams(nil, p), errors.New("clone"))
	codec.ReadParams(r, q.Interface())
	if r.Err() != nil {
		panic(r.Err())
	}
	return q.Interface().(online.Params)
}

func TestEmptyAndNull(t *testing.T) {
	if _, err := Parse(nil, nil, testTypes); err == nil || err.Error() != "config: models: at least one model is required" {
		t.Fatalf("empty file: %v", err)
	}
	// key: with no value keeps the default.
	c, err := Parse([]byte("kafka:\n  group:\n  brokers: ~\nhttp:\n"+minimal), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.Group != "streamer" || !slices.Equal(c.Kafka.Brokers, []string{"localhost:9092"}) {
		t.Fatalf("%+v", c.Kafka)
	}
}

func TestAnchors(t *testing.T) {
	src := `
models:
  - name: a
    type: mam
    features: &f {dim: 2, names: [xs, ys]}
  - name: b
    type: mam
    kernel: {type: linear}
    features: *f
`
	c, err := Parse([]byte(src), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Models[1].Features.Names, []string{"xs", "ys"}) {
		t.Fatalf("%+v", c.Models[1])
	}
	// Merge keys are unknown keys, in a model too.
	for _, tc := range []struct{ yaml, want string }{
		{"<<: {log: {level: debug}}\n" + minimal, `config: unknown key "<<" (line 1)`},
		{"models: [{<<: {balance: false}, name: m, type: mam, features: {dim: 2}}]", `config: unknown key "models[0].<<" (line 1)`},
	} {
		if _, err := Parse([]byte(tc.yaml), nil, testTypes); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %s", tc.yaml, err, tc.want)
		}
	}
}

// rank.explore.alpha's default depends on the policy: 1 for ucb, 0.1 for
// thompson; a value from the file or the environment is kept, 0 included.
func TestExploreAlphaDefault(t *testing.T) {
	const base = "kafka: {brokers: [\"k:9092\"]}\nmodels:\n  - {name: m, type: mam, features: {dim: 2}, scope: key}\nrank:\n  model: m\n"
	for _, c := range []struct {
		explore string
		env     []string
		want    float64
	}{
		{"  explore: {policy: ucb}\n", nil, 1},
		{"  explore: {policy: thompson}\n", nil, 0.1},
		{"  explore: {policy: greedy}\n", nil, 1},
		{"  explore: {policy: thompson, alpha: 0.7}\n", nil, 0.7},
		{"  explore: {policy: thompson, alpha: 0}\n", nil, 0},
		{"  explore: {policy: thompson, alpha: null}\n", nil, 0.1},
		{"  explore: {policy: ucb, alpha: 0.25}\n", nil, 0.25},
		{"  explore: {policy: thompson}\n", []string{"STREAMER_RANK_EXPLORE_ALPHA=2"}, 2},
		{"", []string{"STREAMER_RANK_EXPLORE_POLICY=thompson"}, 0.1},
	} {
		cfg, err := Parse([]byte(base+c.explore), c.env, testTypes)
		if err != nil {
			t.Fatalf("%q %v: %v", c.explore, c.env, err)
		}
		if got := cfg.Rank.Explore.Alpha; got != c.want {
			t.Errorf("%q %v: alpha %v, want %v", c.explore, c.env, got, c.want)
		}
	}
}

// A file that is not a configuration is refused without its text: set as
// STREAMER_CONFIG by mistake, a secret's file would go to the logs.
func TestNotAConfigNotEchoed(t *testing.T) {
	_, err := Load("testdata/bad/not_a_config.yaml", nil, testTypes)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("%v: want an error without the file's text", err)
	}
}
