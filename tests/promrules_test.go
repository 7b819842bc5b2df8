package tests

// Checks of deploy/: the alert rules with promtool, the YAML and JSON files
// parse and reference what exists, every metric name the dashboard and the
// alerts use is one the service exports, and the configs and environment of
// the compose file and the Kubernetes manifests are accepted by the real
// binary.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"gopkg.in/yaml.v3"

	"github.com/streamer/streamer/stream"
)

const deployDir = "../deploy"

// TestPromtoolRules runs `promtool check rules`, `promtool test rules` on
// the alert rules and `promtool check config` on the compose stack's
// Prometheus config.
func TestPromtoolRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (Debian package prometheus): alert rules not checked")
	}
	dir := filepath.Join(deployDir, "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if args[0] == "check" && args[1] == "config" {
			cmd.Dir = promConfigDir(t) // with the secrets the compose stack mounts
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// readYAMLDocs reads every document of a multi-document YAML file.
func readYAMLDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var v map[string]any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
}

// dig walks nested maps and lists: keys are map keys, ints list indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func exists(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestDeployYAML parses every YAML file under deploy/ and checks that the
// compose file, the Prometheus and Grafana provisioning and the Kubernetes
// manifests fit together and reference files that exist.
func TestDeployYAML(t *testing.T) {
	var files []string
	err := filepath.WalkDir(deployDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".yaml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d YAML files under deploy/: %v", len(files), files)
	}
	for _, f := range files {
		if docs := readYAMLDocs(t, f); len(docs) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
	}

	t.Run("compose", func(t *testing.T) { checkCompose(t) })
	t.Run("k8s", func(t *testing.T) { checkK8s(t) })
}

func checkCompose(t *testing.T) {
	c := readYAML(t, filepath.Join(deployDir, "docker-compose.yml"))
	services, _ := c["services"].(map[string]any)
	for _, s := range []string{"kafka", "kafka-init", "streamer", "prometheus", "grafana"} {
		if services[s] == nil {
			t.Errorf("compose: no service %q", s)
		}
	}
	// Every host path mounted exists.
	for name, svc := range services {
		vols, _ := dig(svc, "volumes").([]any)
		for _, v := range vols {
			src, _, _ := strings.Cut(str(v), ":")
			if strings.HasPrefix(src, ".") {
				exists(t, filepath.Join(deployDir, src), "compose: "+name+" mounts "+src)
			}
		}
	}
	// Kafka: the official image, KRaft (no ZooKeeper).
	if img := str(dig(services, "kafka", "image")); !strings.HasPrefix(img, "apache/kafka:") {
		t.Errorf("compose: kafka image %q, want apache/kafka", img)
	}
	env := func(svc string) map[string]string {
		out := map[string]string{}
		switch e := dig(services, svc, "environment").(type) {
		case map[string]any:
			for k, v := range e {
				out[k] = str(v)
			}
		case []any:
			for _, kv := range e {
				k, v, _ := strings.Cut(str(kv), "=")
				out[k] = v
			}
		}
		return out
	}
	kenv := env("kafka")
	if !strings.Contains(kenv["KAFKA_PROCESS_ROLES"], "controller") || kenv["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "" {
		t.Errorf("compose: kafka is not in KRaft mode: %v", kenv)
	}
	if !strings.Contains(kenv["KAFKA_ADVERTISED_LISTENERS"], "//kafka:9092") {
		t.Errorf("compose: kafka does not advertise kafka:9092 to the compose network: %q", kenv["KAFKA_ADVERTISED_LISTENERS"])
	}
	// Topics: created once with the right partition counts and policies.
	script := str(dig(services, "kafka-init", "command"))
	if l, ok := dig(services, "kafka-init", "command").([]any); ok {
		var parts []string
		for _, p := range l {
			parts = append(parts, str(p))
		}
		script = strings.Join(parts, " ")
	}
	script = strings.ReplaceAll(script, "\\\n", " ")
	topics := map[string]string{}
	for _, line := range strings.Split(script, "\n") {
		if m := regexp.MustCompile(`--create .*--topic (\S+)\s+--partitions (\d+)`).FindStringSubmatch(line); m != nil {
			topics[m[1]] = m[2]
			if m[1] == "streamer.state" && !strings.Contains(line, "cleanup.policy=compact") {
				t.Errorf("compose: streamer.state is not compacted: %s", line)
			}
		}
	}
	want := map[string]string{"events": "6", "scores": "6", "events.dlq": "1", "streamer.state": "1"}
	if !maps.Equal(topics, want) {
		t.Errorf("compose: kafka-init creates %v, want %v", topics, want)
	}
	// The streamer: built from deploy/Dockerfile, configured by environment.
	ctx := str(dig(services, "streamer", "build", "context"))
	df := str(dig(services, "streamer", "build", "dockerfile"))
	exists(t, filepath.Join(deployDir, ctx, df), "compose: streamer build "+ctx+" "+df)
	exists(t, filepath.Join(deployDir, ctx, "go.mod"), "compose: streamer build context is not the module root")
	senv := env("streamer")
	for k, v := range map[string]string{
		"STREAMER_KAFKA_BROKERS":            "kafka:9092",
		"STREAMER_HTTP_LISTEN":              "0.0.0.0:9464",
		"STREAMER_SNAPSHOT_CHANGELOG_TOPIC": "streamer.state",
	} {
		if senv[k] != v {
			t.Errorf("compose: streamer %s=%q, want %q", k, senv[k], v)
		}
	}
	if !strings.Contains(str(dig(services, "streamer", "depends_on")), "service_completed_successfully") {
		t.Errorf("compose: streamer does not wait for kafka-init")
	}

	// Prometheus: rule files exist next to the config, the target is the
	// streamer service.
	pcfg := readYAML(t, filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	rules, _ := pcfg["rule_files"].([]any)
	if len(rules) == 0 {
		t.Errorf("prometheus.yml: no rule_files")
	}
	for _, r := range rules {
		exists(t, filepath.Join(deployDir, "prometheus", str(r)), "prometheus.yml: rule file")
		mounted := false
		for _, v := range dig(services, "prometheus", "volumes").([]any) {
			mounted = mounted || strings.Contains(str(v), ":/etc/prometheus/"+str(r))
		}
		if !mounted {
			t.Errorf("compose: rule file %s is not mounted next to prometheus.yml", r)
		}
	}
	if s := str(pcfg["scrape_configs"]); !strings.Contains(s, "streamer") || !strings.Contains(s, "9464") {
		t.Errorf("prometheus.yml does not scrape streamer:9464: %s", s)
	}

	// Grafana: the data source points at the prometheus service, the
	// dashboard provider at a mounted directory holding streamer.json.
	ds := readYAML(t, filepath.Join(deployDir, "grafana", "provisioning", "datasources", "prometheus.yml"))
	if u := str(dig(ds, "datasources", 0, "url")); u != "http://prometheus:9090" {
		t.Errorf("grafana data source url %q", u)
	}
	prov := readYAML(t, filepath.Join(deployDir, "grafana", "provisioning", "dashboards", "streamer.yml"))
	path := str(dig(prov, "providers", 0, "options", "path"))
	found := false
	for _, v := range dig(services, "grafana", "volumes").([]any) {
		src, rest, _ := strings.Cut(str(v), ":")
		dst, _, _ := strings.Cut(rest, ":")
		if dst == path {
			found = true
			exists(t, filepath.Join(deployDir, src, "streamer.json"), "grafana: dashboard directory")
		}
	}
	if !found {
		t.Errorf("grafana: dashboard provider path %q is not mounted", path)
	}
}

// mebibytes reads a quantity like "920MiB" (GOMEMLIMIT) or "1Gi"
// (Kubernetes); 0 when it is neither.
func mebibytes(q string) float64 {
	for suffix, mul := range map[string]float64{"GiB": 1024, "MiB": 1, "Gi": 1024, "Mi": 1} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			if v, err := strconv.ParseFloat(n, 64); err == nil {
				return v * mul
			}
		}
	}
	return 0
}

func checkK8s(t *testing.T) {
	dir := filepath.Join(deployDir, "k8s")
	kust := readYAML(t, filepath.Join(dir, "kustomization.yaml"))
	byKind := map[string]map[string]any{}
	for _, r := range kust["resources"].([]any) {
		for _, d := range readYAMLDocs(t, filepath.Join(dir, str(r))) {
			byKind[str(d["kind"])] = d
		}
	}
	for _, k := range []string{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} {
		if byKind[k] == nil {
			t.Fatalf("k8s: no %s among the kustomization's resources", k)
		}
	}
	dep := byKind["Deployment"]
	labels := dig(dep, "spec", "template", "metadata", "labels").(map[string]any)
	matches := func(sel any, what string) {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("k8s: %s has no selector", what)
		}
		for k, v := range m {
			if str(labels[k]) != str(v) {
				t.Errorf("k8s: %s selects %s=%v, pods have %v", what, k, v, labels[k])
			}
		}
	}
	matches(dig(dep, "spec", "selector", "matchLabels"), "Deployment")
	matches(dig(byKind["Service"], "spec", "selector"), "Service")
	matches(dig(byKind["PodDisruptionBudget"], "spec", "selector", "matchLabels"), "PodDisruptionBudget")

	pod := dig(dep, "spec", "template", "spec")
	c := dig(pod, "containers", 0)
	// The update strategy: the manifest, its own comment and deploy/README.md
	// say the same (state per partition moves through rebalances, so pods
	// are replaced one at a time, never fewer than the replicas).
	strategy := str(dig(dep, "spec", "strategy", "type"))
	if strategy != "RollingUpdate" || str(dig(dep, "spec", "strategy", "rollingUpdate", "maxUnavailable")) != "0" {
		t.Errorf("k8s: strategy %s %v, want RollingUpdate with maxUnavailable 0", strategy, dig(dep, "spec", "strategy"))
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, "deployment.yaml"))
	readme, _ := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if !strings.Contains(string(manifest), "# Strategy "+strategy) || !strings.Contains(string(readme), "`strategy: "+strategy+"`") {
		t.Errorf("k8s: the manifest's comment or deploy/README.md does not say strategy %s", strategy)
	}
	// GOMEMLIMIT leaves headroom below the memory limit (85–95% of it).
	var memLimit string
	for _, e := range dig(c, "env").([]any) {
		if str(dig(e, "name")) == "GOMEMLIMIT" {
			memLimit = str(dig(e, "value"))
		}
	}
	limit := str(dig(c, "resources", "limits", "memory"))
	if g, l := mebibytes(memLimit), mebibytes(limit); g <= 0 || l <= 0 || g < 0.85*l || g > 0.95*l {
		t.Errorf("k8s: GOMEMLIMIT %q against a memory limit of %q: want 85–95%% of it", memLimit, limit)
	}
	if p := str(dig(c, "livenessProbe", "httpGet", "path")); p != "/healthz" {
		t.Errorf("k8s: liveness probe %q, want /healthz", p)
	}
	if p := str(dig(c, "readinessProbe", "httpGet", "path")); p != "/readyz" {
		t.Errorf("k8s: readiness probe %q, want /readyz", p)
	}
	if str(dig(c, "ports", 0, "containerPort")) != "9464" || str(dig(c, "ports", 0, "name")) != str(dig(byKind["Service"], "spec", "ports", 0, "targetPort")) {
		t.Errorf("k8s: container port %v and Service targetPort %v do not match", dig(c, "ports"), dig(byKind["Service"], "spec", "ports"))
	}
	for _, r := range []string{"requests", "limits"} {
		if dig(c, "resources", r, "cpu") == nil || dig(c, "resources", r, "memory") == nil {
			t.Errorf("k8s: no cpu/memory %s", r)
		}
	}
	if dig(c, "securityContext", "readOnlyRootFilesystem") != true || dig(pod, "securityContext", "runAsNonRoot") != true {
		t.Errorf("k8s: want runAsNonRoot and readOnlyRootFilesystem")
	}
	// The state directory (the image's WORKDIR, where snapshot.dir is) is
	// an emptyDir; the config is the ConfigMap, where --config says.
	mounts := map[string]string{}
	for _, m := range dig(c, "volumeMounts").([]any) {
		mounts[str(dig(m, "name"))] = str(dig(m, "mountPath"))
	}
	for _, v := range dig(pod, "volumes").([]any) {
		name := str(dig(v, "name"))
		switch {
		case dig(v, "emptyDir") != nil && mounts[name] == "/var/lib/streamer":
			mounts["state"] = "ok"
		case str(dig(v, "configMap", "name")) == str(dig(byKind["ConfigMap"], "metadata", "name")):
			want := mounts[name] + "/streamer.yaml"
			if !strings.Contains(str(dig(c, "args")), want) {
				t.Errorf("k8s: args %v do not read the ConfigMap at %s", dig(c, "args"), want)
			}
		}
	}
	if mounts["state"] != "ok" {
		t.Errorf("k8s: /var/lib/streamer is not an emptyDir")
	}
}

// metricRef finds metric names in PromQL and Grafana queries.
var metricRef = regexp.MustCompile(`\b(?:streamer|process|go)_[a-z0-9_]+\b`)

// sourceMetrics returns the streamer_* names registered in ../stream/*.go,
// the engine's and the holders' (../stream/engine, ../stream/holder) and
// ../cmd/streamer/*.go (non-test files).
func sourceMetrics(t *testing.T) map[string]bool {
	t.Helper()
	var files []string
	for _, g := range []string{"../stream/*.go", "../stream/engine/*.go", "../stream/holder/*.go", "../cmd/streamer/*.go"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	names := map[string]bool{}
	lit := regexp.MustCompile(`"(streamer_[a-z0-9_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllSubmatch(data, -1) {
			names[string(m[1])] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metric names found in the sources: %v", len(names), names)
	}
	return names
}

// knownName says whether a name (or, for a histogram series, its base) is
// in names.
func knownName(names map[string]bool, n string) bool {
	if names[n] {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(n, suf); ok && names[b] {
			return true
		}
	}
	return false
}

type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	UID           string
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
}

type dashPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// readDashboard parses the dashboard and returns it with its PromQL
// expressions (panels and annotations) and its variable queries.
func readDashboard(t *testing.T) (d dashboard, exprs, varQueries []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "dashboards", "streamer.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("streamer.json: %v", err)
	}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			exprs = append(exprs, a.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			varQueries = append(varQueries, v.Definition)
		}
	}
	return d, exprs, varQueries
}

// alertExprs returns the expressions of deploy/prometheus/alerts.yml.
func alertExprs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, g := range readYAML(t, filepath.Join(deployDir, "prometheus", "alerts.yml"))["groups"].([]any) {
		for _, r := range dig(g, "rules").([]any) {
			out = append(out, str(dig(r, "expr")))
		}
	}
	return out
}

// TestDashboard checks that the Grafana dashboard parses, is a current
// schema, has unique panel ids and a query in every panel, and that the
// dashboard and the alert rules use only metric names the sources register.
func TestDashboard(t *testing.T) {
	d, exprs, vars := readDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d < 36", d.SchemaVersion)
	}
	ids := map[int]string{}
	var check func([]dashPanel)
	check = func(ps []dashPanel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			check(p.Panels)
		}
	}
	check(d.Panels)
	if len(exprs) < 30 {
		t.Errorf("only %d expressions in the dashboard", len(exprs))
	}
	src := sourceMetrics(t)
	used := map[string]bool{}
	for _, e := range append(append(append([]string{}, exprs...), vars...), alertExprs(t)...) {
		for _, n := range metricRef.FindAllString(e, -1) {
			used[n] = true
			if strings.HasPrefix(n, "streamer_") && !knownName(src, n) {
				t.Errorf("%s (in %s) is not a metric of ../stream (engine, holder) or ../cmd", n, e)
			}
		}
	}
	// The brief of the dashboard: these must all be on it.
	for _, n := range []string{"streamer_events_consumed_total", "streamer_events_scored_total", "streamer_consumer_lag",
		"streamer_event_processing_seconds_bucket", "streamer_model_accuracy", "streamer_model_version_accuracy",
		"streamer_model_kendall_tau", "streamer_model_mae", "streamer_model_version", "streamer_bound_observed",
		"streamer_bound_limit", "streamer_bound_violations_total", "streamer_refits_total",
		"streamer_refit_duration_seconds_bucket", "streamer_events_rejected_total",
		"streamer_snapshot_last_timestamp_seconds", "streamer_publish_errors_total", "streamer_publish_pending"} {
		if !used[n] {
			t.Errorf("the dashboard and alerts do not use %s", n)
		}
	}
}

// observedConfig runs two models: the MAM (bound monitor, prequential
// accuracy; it ranks) and an SVM refitted every 100 labelled events (refit
// metrics; it challenges the MAM), with snapshots on (snapshot metrics).
const observedConfig = `
kafka:
  brokers: [%BROKERS%]
  group: observed
http:
  listen: "%HTTP%"
log:
  level: warn
snapshot:
  dir: %STATE%
  every: 500ms
labels:
  join_window: {events: 1000, time: 1m}
rank:
  model: mam
  challenger: {model: svm}
models:
  - name: mam
    type: mam
    kernel: {type: rbf, gamma: 10, features: 256}
    features: {dim: 2, names: [xs, ys]}
  - name: svm
    type: svm
    kernel: {type: rbf, gamma: 0.5}
    C: 1
    window: {events: 200}
    refit: {every_events: 100, guard: 0}
    features: {dim: 2, names: [xs, ys]}
`

// observed is a running streamer that has processed a known set of events.
type observed struct {
	p                           *proc
	consumed, labelled, invalid int
	unscored                    int // the ranking request and its label: consumed, not scored
}

// startObserved starts the streamer with observedConfig and feeds it
// Ripley's training set (labelled), 50 test rows (unlabelled) and 3
// malformed events, waiting until all are consumed and a refit is in.
func startObserved(t *testing.T) *observed {
	t.Helper()
	b := startBroker(t, 3)
	cfg := strings.ReplaceAll(observedConfig, "%STATE%", filepath.Join(t.TempDir(), "snapshots"))
	p := startStreamer(t, b, cfg)
	train := readCSV(t, "testdata/ripley_train.csv")
	test := readCSV(t, "testdata/ripley_test.csv")[:50]
	var msgs []kafka.Message
	for i, r := range train {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%5), Value: eventJSON(fmt.Sprintf("l-%d", i), r.x, &r.label)})
	}
	for i, r := range test {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i%5), Value: eventJSON(fmt.Sprintf("u-%d", i), r.x, nil)})
	}
	for i, v := range []string{`{"id":`, `[1,2]`, `{"features":[1,2,3],"label":1}`} {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "bad%d", i), Value: []byte(v)})
	}
	// A ranking request and a label for the item it put first: the
	// off-policy metrics.
	msgs = append(msgs, kafka.Message{Key: []byte("k0"), Value: []byte(`{"id":"r-1","candidates":[{"item":"a","features":[0.5,0.5]},{"item":"b","features":[-0.5,0.1]}]}`)},
		kafka.Message{Key: []byte("k0"), Value: []byte(`{"id":"r-1","item":"a","label":1}`)})
	produce(t, b, "events", msgs)
	o := &observed{p: p, consumed: len(msgs), labelled: len(train) + 1, invalid: 3, unscored: 2}
	waitFor(t, 30*time.Second, "all events consumed and a refit accepted", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") == float64(o.consumed) &&
			p.metric(t, "streamer_model_examples", `model="mam"`) == float64(o.labelled) &&
			scrape(t, p)["streamer_refits_total"] && scrape(t, p)["streamer_snapshot_last_timestamp_seconds"]
	})
	return o
}

// scrape returns the metric names on the process's /metrics (histograms
// with their _bucket, _sum and _count series).
func scrape(t *testing.T, p *proc) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, line := range strings.Split(p.metrics(t), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
		for _, suf := range []string{"_bucket", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok {
				names[b] = true
			}
		}
	}
	return names
}

// TestDashboardMetricsLive scrapes the real binary and checks that every
// metric the dashboard and the alerts use is on its /metrics, except the
// ordinal models' (an ordinal model needs level labels, which the
// classifiers here would dead-letter; TestDashboard checks those names
// against the sources).
func TestDashboardMetricsLive(t *testing.T) {
	o := startObserved(t)
	live := scrape(t, o.p)
	live["up"] = true // made by Prometheus
	ordinal := map[string]bool{"streamer_model_kendall_tau": true, "streamer_model_mae": true, "streamer_model_zero_one": true,
		"streamer_calibration_coverage": true} // coverage: ranking, ordinal and regression models
	_, exprs, vars := readDashboard(t)
	for _, e := range append(append(exprs, vars...), alertExprs(t)...) {
		for _, n := range metricRef.FindAllString(e, -1) {
			if !live[n] && !ordinal[n] {
				t.Errorf("%s (in %s) is not on the streamer's /metrics", n, e)
			}
		}
	}
}

// runDeployed runs the binary as a deployment would: the given config file,
// the given environment (brokers and listen address replaced by the test's),
// in an empty working directory like the image's /var/lib/streamer. It
// waits for /readyz, then stops it with SIGTERM and wants exit status 0.
func runDeployed(t *testing.T, b *stream.Broker, cfgPath string, env map[string]string) {
	t.Helper()
	addr := freeAddr(t)
	env["STREAMER_KAFKA_BROKERS"] = strings.Join(b.Addrs(), ",")
	env["STREAMER_HTTP_LISTEN"] = addr
	sec := deploySecrets(t, &cfgPath, env) // test files for the mounted TLS and token files (deploysec_test.go)
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", abs)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STREAMER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("streamer log:\n%s", logs.String())
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if sec.get(addr, "/readyz", false) == http.StatusOK {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("streamer exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatal("streamer not ready after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	sec.checkProtected(t, addr)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("streamer exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("streamer did not stop within 30s of SIGTERM")
	}
}

// TestComposeStreamerConfig: the image's config (configs/streamer.yaml)
// with the compose file's STREAMER_* environment starts, gets ready and
// stops cleanly.
func TestComposeStreamerConfig(t *testing.T) {
	c := readYAML(t, filepath.Join(deployDir, "docker-compose.yml"))
	env := map[string]string{}
	for k, v := range dig(c, "services", "streamer", "environment").(map[string]any) {
		env[k] = str(v)
	}
	b := startBroker(t, 6)
	runDeployed(t, b, "../configs/streamer.yaml", env)
}

// TestK8sStreamerConfig: the ConfigMap's config with the Deployment's
// STREAMER_* environment starts, gets ready and stops cleanly.
func TestK8sStreamerConfig(t *testing.T) {
	cm := readYAMLDocs(t, filepath.Join(deployDir, "k8s", "configmap.yaml"))[0]
	path := filepath.Join(t.TempDir(), "streamer.yaml")
	if err := os.WriteFile(path, []byte(str(dig(cm, "data", "streamer.yaml"))), 0o644); err != nil {
		t.Fatal(err)
	}
	dep := readYAMLDocs(t, filepath.Join(deployDir, "k8s", "deployment.yaml"))[0]
	env := map[string]string{}
	for _, e := range dig(dep, "spec", "template", "spec", "containers", 0, "env").([]any) {
		if k := str(dig(e, "name")); strings.HasPrefix(k, "STREAMER_") {
			env[k] = strings.ReplaceAll(str(dig(e, "value")), "$(POD_NAME)", "streamer-7d9c-x2x4q")
		}
	}
	b := startBroker(t, 6)
	runDeployed(t, b, path, env)
}
