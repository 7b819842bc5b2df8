package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGoodRoundTrip(t *testing.T) {
	got, err := Load("testdata/good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"age", "price", "score"}
	want := Config{
		Kafka: Kafka{
			Brokers:         []string{"kafka-0.kafka:9092", "kafka-1.kafka:9093", "[::1]:9094"},
			Group:           "scoring",
			InputTopic:      "clicks",
			OutputTopic:     "click-scores",
			DLQTopic:        "clicks.dlq",
			ClientID:        "scorer-1",
			StartOffset:     "latest",
			MaxMessageBytes: 65536,
			CommitInterval:  250 * time.Millisecond,
			SessionTimeout:  10 * time.Second,
			Producer:        Producer{BatchSize: 500, BatchTimeout: 10 * time.Millisecond, RequiredAcks: "one"},
			TLS:             TLS{Enabled: true, ServerName: "kafka.internal"},
			SASL:            SASL{Mechanism: "scram-sha-512", Username: "scorer", Password: "pa55: word"},
		},
		HTTP:     HTTP{Listen: "127.0.0.1:9100", ReadTimeout: 5 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 30 * time.Second, PProf: true},
		Log:      Log{Level: "debug", Format: "json"},
		Metrics:  Metrics{AccuracyWindow: 5000},
		Snapshot: Snapshot{Every: 5 * time.Second, Keep: 3, Scope: SnapshotScopeInstance, RemoteRefresh: time.Second},
		Models: []Model{
			{
				Name:     "mam_rbf",
				Type:     "mam",
				Kernel:   Kernel{Type: "rbf", Gamma: 0.5, Features: 256, Seed: 18446744073709551615},
				Features: Features{Dim: 3, Names: names},
				Balance:  false,
				Delta:    0.01,
			},
			{
				Name:     "mam-linear_2",
				Type:     "mam",
				Kernel:   Kernel{Type: "linear"},
				Features: Features{Dim: 3, Names: names},
				Balance:  true,
				Delta:    0.05,
			},
			{
				Name:     "defaults",
				Type:     "mam",
				Kernel:   Kernel{Type: "rbf", Gamma: 10, Features: 1024, Seed: 1},
				Features: Features{Dim: 3, Names: names},
				Balance:  true,
				Delta:    0.05,
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load(good.yaml)\n got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("Validate of a loaded config: %v", err)
	}
}

func TestMinimal(t *testing.T) {
	got, err := Parse([]byte("models:\n  - {name: m, type: mam, features: {dim: 4}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	m := DefaultModel()
	m.Name, m.Type, m.Features.Dim = "m", "mam", 4
	want.Models = []Model{m}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestBad(t *testing.T) {
	// want is a fragment of the message; every case names the key at fault.
	cases := []struct{ file, want string }{
		{"unknown_top_level", `config: unknown key "logging" (line 3)`},
		{"unknown_nested_in_list", `config: unknown key "models[0].kernel.gama" (line 6)`},
		{"unknown_producer_key", `config: unknown key "kafka.producer.batch_bytes" (line 3)`},
		{"missing_brokers", `config: kafka.brokers: at least one broker (host:port) is required (line 2)`},
		{"portless_broker", `config: kafka.brokers[1]: "kafka-1" is not host:port (line 2)`},
		{"bad_duration", `config: kafka.commit_interval: "5 seconds" is not a duration`},
		{"bad_int", `config: kafka.producer.batch_size: "lots" is not an integer (line 3)`},
		{"zero_batch_size", `config: kafka.producer.batch_size: must be > 0, got 0 (line 3)`},
		{"bad_start_offset", `config: kafka.start_offset: "middle" is not one of earliest, latest (line 2)`},
		{"bad_acks", `config: kafka.producer.required_acks: "two" is not one of none, one, all`},
		{"same_topics", `config: kafka.output_topic: "events" is also kafka.input_topic`},
		{"bad_listen", `config: http.listen: "9464" is not host:port`},
		{"bad_log_level", `config: log.level: "verbose" is not one of debug, info, warn, error`},
		{"no_models", `config: models: at least one model is required`},
		{"missing_name", `config: models[0].name: required (line 2)`},
		{"delta_too_big", `config: models[0].delta: must be in (0, 1), got 1.5 (line 5)`},
		{"negative_gamma", `config: models[0].kernel.gamma: must be a finite number > 0, got -1 (line 4)`},
		{"gamma_on_linear", `config: models[0].kernel.gamma: not used by the linear kernel; remove it (line 6)`},
		{"too_many_rff", `config: models[0].kernel.features: must be in 1..65536, got 100000`},
		{"duplicate_names", `config: models[1].name: "m" is already the name of models[0]`},
		{"bad_name_chars", `config: models[0].name: "My.Model" must be 1 to 64 characters from [a-z0-9_-]`},
		{"unknown_model_type", `config: models[0].type: "rbm" is not a supported model type (supported: mam, omam, logistic, lda, svm, lsrrank, mlsrrank, krr)`},
		{"unknown_kernel_type", `config: models[0].kernel.type: "poly" is not one of linear, rbf`},
		{"names_len_ne_dim", `config: models[0].features.names: has 2 names but models[0].features.dim is 3`},
		{"duplicate_feature_names", `config: models[0].features.names[1]: "xs" repeats models[0].features.names[0]`},
		{"missing_dim", `config: models[0].features.dim: required`},
		{"mismatched_dims", `config: models[1].features.dim: 3 differs from models[0].features.dim 2`},
		{"mismatched_names", `config: models[1].features.names: [ys, xs] differs from models[0].features.names [xs, ys]`},
		{"bad_balance", `config: models[0].balance: "yes" is not a boolean`},
		{"repeated_key", `config: kafka.group: key repeated (first at line 2) (line 3)`},
		{"section_not_mapping", `config: kafka: must be a mapping of keys, got "localhost:9092" (line 1)`},
		{"two_documents", `config: a second YAML document starts at line`},
		{"syntax", `config: yaml:`},
		{"partition_scope_without_changelog", `config: snapshot.scope: "partition" needs snapshot.changelog_topic: the partitions' state moves between instances through it (line 2)`},
		{"unknown_snapshot_scope", `config: snapshot.scope: unknown "cluster" (one of instance, partition) (line 3)`},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.file+".yaml"] = true
		t.Run(tc.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", "bad", tc.file+".yaml"), nil)
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
	_, err := Load("testdata/bad/negative_gamma.yaml", nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a *config.Error", err)
	}
	if e.Key != "models[0].kernel.gamma" || e.Line != 4 || e.Env != "" {
		t.Fatalf("got %+v", e)
	}
}

func TestSeveralErrors(t *testing.T) {
	_, err := Parse([]byte("kafka: {start_offset: middle}\nlog: {format: xml}\n"), nil)
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
	got, err := Load("testdata/good.yaml", env)
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
	}
	for _, tc := range cases {
		t.Run(tc.env, func(t *testing.T) {
			_, err := Parse([]byte(minimal), []string{tc.env})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
}

// A broker list replaced by a variable is reported against the variable,
// not against the lines of the file's list.
func TestEnvOwnsList(t *testing.T) {
	_, err := Load("testdata/good.yaml", []string{"STREAMER_KAFKA_BROKERS=a:1,b:2,nope"})
	want := `config: kafka.brokers[2]: "nope" is not host:port (from STREAMER_KAFKA_BROKERS)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestEnvVarsCoverLeaves(t *testing.T) {
	vars := EnvVars()
	if len(vars) != len(leaves) || len(vars) != 40 {
		t.Fatalf("%d variables", len(vars))
	}
	for _, v := range vars {
		if _, err := Parse([]byte(minimal), []string{v.Name + "=" + "1"}); err != nil && strings.Contains(err.Error(), "unknown environment variable") {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
	if EnvName("kafka.producer.batch_size") != "STREAMER_KAFKA_PRODUCER_BATCH_SIZE" {
		t.Fatal(EnvName("kafka.producer.batch_size"))
	}
}

// The reference in doc.go names every key and variable.
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
	for _, k := range []string{"name", "type", "kernel.type", "kernel.gamma", "kernel.features", "kernel.seed", "features.dim", "features.names", "balance", "delta"} {
		if !regexp.MustCompile(`//\t` + regexp.QuoteMeta(k) + `\s`).Match(doc) {
			t.Errorf("doc.go does not list models[i].%s", k)
		}
	}
}

func TestShippedConfigs(t *testing.T) {
	ref, err := Load("../../configs/streamer.yaml", nil)
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
	m := DefaultModel()
	m.Name, m.Type = "mam", "mam"
	m.Features = Features{Dim: 2, Names: []string{"xs", "ys"}}
	if !reflect.DeepEqual(ref.Models, []Model{m}) {
		t.Errorf("configs/streamer.yaml models: %+v", ref.Models)
	}

	demo, err := Load("../../configs/demo.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(demo.Models) != 2 {
		t.Fatalf("demo models: %+v", demo.Models)
	}
	rbf, lin := demo.Models[0], demo.Models[1]
	if rbf.Name != "mam_rbf" || rbf.Kernel != (Kernel{Type: "rbf", Gamma: 10, Features: 1024, Seed: 1}) || !rbf.Balance {
		t.Errorf("demo mam_rbf: %+v", rbf)
	}
	if lin.Name != "mam_linear" || lin.Kernel != (Kernel{Type: "linear"}) || !lin.Balance {
		t.Errorf("demo mam_linear: %+v", lin)
	}
	for _, m := range demo.Models {
		if !slices.Equal(m.Features.Names, []string{"xs", "ys"}) || m.Features.Dim != 2 {
			t.Errorf("demo %s features: %+v", m.Name, m.Features)
		}
	}
	// The demo fills in its embedded broker, then validates.
	demo.Kafka.Brokers = []string{"127.0.0.1:40123"}
	if err := demo.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateInCode(t *testing.T) {
	c := Default()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "models: at least one model is required") {
		t.Fatalf("got %v", err)
	}
	m := DefaultModel()
	m.Name, m.Type, m.Features.Dim = "m", ModelMAM, 2
	m.Kernel = Kernel{Type: KernelLinear, Seed: 1}
	c.Models = []Model{m}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "config: models[0].kernel.seed: only for kernel type rbf") {
		t.Fatalf("got %v", err)
	}
	c.Models[0].Kernel.Seed = 0
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Models[0].Delta = 0
	if err := c.Validate(); err == nil || err.Error() != "config: models[0].delta: must be in (0, 1), got 0" {
		t.Fatalf("got %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	c, err := Load("testdata/good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	fp := c.Fingerprint()
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) {
		t.Fatalf("fingerprint %q", fp)
	}
	// Non-model keys do not matter.
	d, _ := Load("testdata/good.yaml", []string{"STREAMER_KAFKA_GROUP=other", "STREAMER_LOG_LEVEL=warn"})
	if d.Fingerprint() != fp {
		t.Error("fingerprint depends on non-model keys")
	}
	// Writing a default out does not matter either.
	a, _ := Parse([]byte("models: [{name: m, type: mam, features: {dim: 2}}]"), nil)
	b, _ := Parse([]byte("models: [{name: m, type: mam, kernel: {type: rbf, gamma: 10.0, features: 1024, seed: 1}, balance: true, delta: 0.05, features: {dim: 2}}]"), nil)
	if a.Fingerprint() != b.Fingerprint() || a.Models[0].Fingerprint() != b.Models[0].Fingerprint() {
		t.Error("explicit defaults change the fingerprint")
	}
	// Every model field does.
	changes := []func(*Model){
		func(m *Model) { m.Name = "n" },
		func(m *Model) { m.Type = "other" },
		func(m *Model) { m.Kernel.Type = "linear" },
		func(m *Model) { m.Kernel.Gamma = 10.000000001 },
		func(m *Model) { m.Kernel.Features = 1023 },
		func(m *Model) { m.Kernel.Seed = 2 },
		func(m *Model) { m.Features.Dim = 3 },
		func(m *Model) { m.Features.Names = []string{"x", "y"} },
		func(m *Model) { m.Balance = false },
		func(m *Model) { m.Delta = 0.1 },
	}
	base := a.Models[0]
	seen := map[string]int{base.Fingerprint(): -1}
	for i, change := range changes {
		m := base
		m.Features.Names = slices.Clone(base.Features.Names)
		change(&m)
		f := m.Fingerprint()
		if j, ok := seen[f]; ok {
			t.Errorf("change %d gives the fingerprint of %d", i, j)
		}
		seen[f] = i
		if (Config{Models: []Model{m}}).Fingerprint() == a.Fingerprint() {
			t.Errorf("change %d does not change Config.Fingerprint", i)
		}
	}
	// Order of models matters for the list, not for each model.
	two := Config{Models: []Model{c.Models[0], c.Models[1]}}
	swapped := Config{Models: []Model{c.Models[1], c.Models[0]}}
	if two.Fingerprint() == swapped.Fingerprint() {
		t.Error("model order does not change Config.Fingerprint")
	}
	// Golden value: the canonical encoding must not drift silently, or
	// saved state would be refused after an upgrade.
	const (
		goldenList  = "82e285059226c3b74dabcb50163998e8131d5013cabbb9704e475ece5300e9e2"
		goldenModel = "1aa1d99c6baed3e9fba99379b0bf4aa3e6753c224fded971ae08fcd64cc978e1"
	)
	if a.Fingerprint() != goldenList || a.Models[0].Fingerprint() != goldenModel {
		t.Errorf("fingerprints changed: %s %s; if on purpose, bump the version in the domain string", a.Fingerprint(), a.Models[0].Fingerprint())
	}
}

func TestEmptyAndNull(t *testing.T) {
	if _, err := Parse(nil, nil); err == nil || err.Error() != "config: models: at least one model is required" {
		t.Fatalf("empty file: %v", err)
	}
	// key: with no value keeps the default.
	c, err := Parse([]byte("kafka:\n  group:\n  brokers: ~\nhttp:\n"+minimal), nil)
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
	c, err := Parse([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Models[1].Features.Names, []string{"xs", "ys"}) {
		t.Fatalf("%+v", c.Models[1])
	}
}
