package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A leaf is a scalar (or string list) key outside models. The table drives
// both YAML decoding and the STREAMER_* overrides, so the two cannot drift.
type leaf struct {
	path string
	ptr  func(*Config) any // *string, *Secret, *bool, *int, *time.Duration or *[]string
}

var leaves = []leaf{
	{"kafka.brokers", func(c *Config) any { return &c.Kafka.Brokers }},
	{"kafka.group", func(c *Config) any { return &c.Kafka.Group }},
	{"kafka.input_topic", func(c *Config) any { return &c.Kafka.InputTopic }},
	{"kafka.output_topic", func(c *Config) any { return &c.Kafka.OutputTopic }},
	{"kafka.dlq_topic", func(c *Config) any { return &c.Kafka.DLQTopic }},
	{"kafka.client_id", func(c *Config) any { return &c.Kafka.ClientID }},
	{"kafka.start_offset", func(c *Config) any { return &c.Kafka.StartOffset }},
	{"kafka.max_message_bytes", func(c *Config) any { return &c.Kafka.MaxMessageBytes }},
	{"kafka.commit_interval", func(c *Config) any { return &c.Kafka.CommitInterval }},
	{"kafka.session_timeout", func(c *Config) any { return &c.Kafka.SessionTimeout }},
	{"kafka.producer.batch_size", func(c *Config) any { return &c.Kafka.Producer.BatchSize }},
	{"kafka.producer.batch_timeout", func(c *Config) any { return &c.Kafka.Producer.BatchTimeout }},
	{"kafka.producer.required_acks", func(c *Config) any { return &c.Kafka.Producer.RequiredAcks }},
	{"kafka.tls.enabled", func(c *Config) any { return &c.Kafka.TLS.Enabled }},
	{"kafka.tls.ca_file", func(c *Config) any { return &c.Kafka.TLS.CAFile }},
	{"kafka.tls.cert_file", func(c *Config) any { return &c.Kafka.TLS.CertFile }},
	{"kafka.tls.key_file", func(c *Config) any { return &c.Kafka.TLS.KeyFile }},
	{"kafka.tls.server_name", func(c *Config) any { return &c.Kafka.TLS.ServerName }},
	{"kafka.tls.insecure_skip_verify", func(c *Config) any { return &c.Kafka.TLS.InsecureSkipVerify }},
	{"kafka.sasl.mechanism", func(c *Config) any { return &c.Kafka.SASL.Mechanism }},
	{"kafka.sasl.username", func(c *Config) any { return &c.Kafka.SASL.Username }},
	{"kafka.sasl.password", func(c *Config) any { return &c.Kafka.SASL.Password }},
	{"kafka.sasl.password_file", func(c *Config) any { return &c.Kafka.SASL.PasswordFile }},
	{"http.listen", func(c *Config) any { return &c.HTTP.Listen }},
	{"http.read_timeout", func(c *Config) any { return &c.HTTP.ReadTimeout }},
	{"http.write_timeout", func(c *Config) any { return &c.HTTP.WriteTimeout }},
	{"http.idle_timeout", func(c *Config) any { return &c.HTTP.IdleTimeout }},
	{"http.pprof", func(c *Config) any { return &c.HTTP.PProf }},
	{"log.level", func(c *Config) any { return &c.Log.Level }},
	{"log.format", func(c *Config) any { return &c.Log.Format }},
	{"metrics.accuracy_window", func(c *Config) any { return &c.Metrics.AccuracyWindow }},
	{"labels.join_window.events", func(c *Config) any { return &c.Labels.JoinWindow.Events }},
	{"labels.join_window.time", func(c *Config) any { return &c.Labels.JoinWindow.Time }},
	{"snapshot.dir", func(c *Config) any { return &c.Snapshot.Dir }},
	{"snapshot.every", func(c *Config) any { return &c.Snapshot.Every }},
	{"snapshot.every_events", func(c *Config) any { return &c.Snapshot.EveryEvents }},
	{"snapshot.keep", func(c *Config) any { return &c.Snapshot.Keep }},
	{"snapshot.changelog_topic", func(c *Config) any { return &c.Snapshot.ChangelogTopic }},
	{"snapshot.scope", func(c *Config) any { return &c.Snapshot.Scope }},
	{"snapshot.remote_refresh", func(c *Config) any { return &c.Snapshot.RemoteRefresh }},
}

// sections are the mappings outside models that hold leaves.
var sections = map[string]bool{
	"kafka": true, "kafka.producer": true, "kafka.tls": true, "kafka.sasl": true, "http": true, "log": true, "metrics": true, "snapshot": true, "labels": true, "labels.join_window": true,
}

var leafByPath = func() map[string]leaf {
	m := make(map[string]leaf, len(leaves))
	for _, l := range leaves {
		m[l.path] = l
	}
	return m
}()

// source says where a key's value came from: a line of the file or an
// environment variable.
type source struct {
	line int
	env  string
}

type decoder struct {
	errs []error
	src  map[string]source // dotted path -> where it was set
}

func newDecoder() *decoder { return &decoder{src: make(map[string]source)} }

func (d *decoder) errorf(path string, n *yaml.Node, format string, args ...any) {
	e := &Error{Key: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) unknown(path string, key *yaml.Node) {
	d.errs = append(d.errs, &Error{Key: path, Line: key.Line, Msg: "unknown key", kind: errUnknownKey})
}

func (d *decoder) set(path string, n *yaml.Node) { d.src[path] = source{line: n.Line} }

func (d *decoder) has(path string) bool { _, ok := d.src[path]; return ok }

func (d *decoder) document(c *Config, data []byte) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // empty file: all defaults
		}
		d.errs = append(d.errs, fmt.Errorf("config: %w", err))
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			d.errs = append(d.errs, fmt.Errorf("config: %w", err))
			return
		}
		d.errs = append(d.errs, fmt.Errorf("config: a second YAML document starts at line %d; the file must hold one", line))
		return
	}
	if len(doc.Content) == 0 {
		return
	}
	d.section(c, doc.Content[0], "")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "empty"
}

// mapping calls fn for every key of the mapping n at path. A null n (an
// absent or empty value) has no keys. Duplicate keys are errors.
func (d *decoder) mapping(n *yaml.Node, path string, fn func(key string, k, v *yaml.Node)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		name := path
		if name == "" {
			name = "(top level)"
		}
		d.errorf(name, n, "must be a mapping of keys, got %s", kindName(n))
		return
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(join(path, "?"), k, "keys must be plain strings")
			continue
		}
		if first, ok := seen[k.Value]; ok {
			d.errorf(join(path, k.Value), k, "key repeated (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		fn(k.Value, k, v)
	}
}

// section decodes a mapping outside models; path "" is the top level.
func (d *decoder) section(c *Config, n *yaml.Node, path string) {
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		full := join(path, key)
		switch {
		case full == "models":
			d.set(full, k)
			d.models(c, v)
		case sections[full]:
			d.set(full, k)
			d.section(c, v, full)
		default:
			l, ok := leafByPath[full]
			if !ok {
				d.unknown(full, k)
				return
			}
			d.leaf(l.ptr(c), v, full)
		}
	})
}

// leaf decodes one YAML value into p. A null value keeps the default.
func (d *decoder) leaf(p any, v *yaml.Node, path string) {
	switch p := p.(type) {
	case *string:
		d.str(v, path, p)
	case *Secret:
		d.str(v, path, (*string)(p))
	case *bool:
		d.boolean(v, path, p)
	case *int:
		d.integer(v, path, p)
	case *time.Duration:
		d.duration(v, path, p)
	case *[]string:
		d.strings(v, path, p)
	default:
		panic("config: leaf " + path + " has an unsupported type")
	}
}

func (d *decoder) scalar(v *yaml.Node, path, want string) (*yaml.Node, bool) {
	v = resolve(v)
	if isNull(v) {
		return nil, false
	}
	if v.Kind != yaml.ScalarNode {
		d.errorf(path, v, "must be %s, got %s", want, kindName(v))
		return nil, false
	}
	return v, true
}

func (d *decoder) str(v *yaml.Node, path string, p *string) {
	if v, ok := d.scalar(v, path, "a string"); ok {
		*p = v.Value
		d.set(path, v)
	}
}

func (d *decoder) integer(v *yaml.Node, path string, p *int) {
	v, ok := d.scalar(v, path, "an integer")
	if !ok {
		return
	}
	var x int
	if v.ShortTag() != "!!int" || v.Decode(&x) != nil {
		d.errorf(path, v, "%q is not an integer", v.Value)
		return
	}
	*p = x
	d.set(path, v)
}

func (d *decoder) uint64(v *yaml.Node, path string, p *uint64) {
	v, ok := d.scalar(v, path, "an unsigned integer")
	if !ok {
		return
	}
	var x uint64
	if v.ShortTag() != "!!int" || v.Decode(&x) != nil {
		d.errorf(path, v, "%q is not an unsigned 64-bit integer", v.Value)
		return
	}
	*p = x
	d.set(path, v)
}

func (d *decoder) float(v *yaml.Node, path string, p *float64) {
	v, ok := d.scalar(v, path, "a number")
	if !ok {
		return
	}
	var x float64
	if t := v.ShortTag(); (t != "!!int" && t != "!!float") || v.Decode(&x) != nil {
		d.errorf(path, v, "%q is not a number", v.Value)
		return
	}
	*p = x
	d.set(path, v)
}

func (d *decoder) boolean(v *yaml.Node, path string, p *bool) {
	v, ok := d.scalar(v, path, "true or false")
	if !ok {
		return
	}
	x, err := strconv.ParseBool(v.Value)
	if v.ShortTag() != "!!bool" || err != nil {
		d.errorf(path, v, "%q is not a boolean (true or false)", v.Value)
		return
	}
	*p = x
	d.set(path, v)
}

func (d *decoder) duration(v *yaml.Node, path string, p *time.Duration) {
	v, ok := d.scalar(v, path, "a duration")
	if !ok {
		return
	}
	x, err := parseDuration(v.Value)
	if err != nil {
		d.errorf(path, v, "%v", err)
		return
	}
	*p = x
	d.set(path, v)
}

func parseDuration(s string) (time.Duration, error) {
	x, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write e.g. 1s, 250ms, 1m30s)", s)
	}
	return x, nil
}

func (d *decoder) weightedKernels(v *yaml.Node, path string, p *[]WeightedKernel) {
	v = resolve(v)
	if isNull(v) {
		return
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(path, v, "must be a list of kernels, got %s", kindName(v))
		return
	}
	for i, item := range v.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		k := WeightedKernel{Type: KernelRBF, V: 1}
		d.mapping(item, ip, func(key string, kn, vn *yaml.Node) {
			switch key {
			case "type":
				d.str(vn, join(ip, key), &k.Type)
			case "gamma":
				d.float(vn, join(ip, key), &k.Gamma)
			case "v":
				d.float(vn, join(ip, key), &k.V)
			default:
				d.unknown(join(ip, key), kn)
			}
		})
		*p = append(*p, k)
	}
}

func (d *decoder) floats(v *yaml.Node, path string, p *[]float64) {
	v = resolve(v)
	if isNull(v) {
		return
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(path, v, "must be a list of numbers, got %s", kindName(v))
		return
	}
	out := make([]float64, len(v.Content))
	for i, item := range v.Content {
		d.float(item, fmt.Sprintf("%s[%d]", path, i), &out[i])
	}
	*p = out
	d.set(path, v)
}

func (d *decoder) strings(v *yaml.Node, path string, p *[]string) {
	v = resolve(v)
	if isNull(v) {
		return
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(path, v, "must be a list, got %s", kindName(v))
		return
	}
	out := make([]string, 0, len(v.Content))
	ok := true
	for i, item := range v.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		item = resolve(item)
		if isNull(item) || item.Kind != yaml.ScalarNode {
			d.errorf(ip, item, "must be a string, got %s", kindName(item))
			ok = false
			continue
		}
		out = append(out, item.Value)
		d.set(ip, item)
	}
	if ok {
		*p = out
		d.set(path, v)
	}
}

func (d *decoder) models(c *Config, n *yaml.Node) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf("models", n, "must be a list of models, got %s", kindName(n))
		return
	}
	c.Models = make([]Model, 0, len(n.Content))
	for i, item := range n.Content {
		c.Models = append(c.Models, d.model(item, fmt.Sprintf("models[%d]", i)))
	}
}

func (d *decoder) model(n *yaml.Node, path string) Model {
	m := DefaultModel()
	d.set(path, n)
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		p := join(path, key)
		switch key {
		case "name":
			d.str(v, p, &m.Name)
		case "type":
			d.str(v, p, &m.Type)
		case "kernel":
			d.set(p, k)
			m.Kernel = d.kernel(v, p)
		case "features":
			d.set(p, k)
			d.features(v, p, &m.Features)
		case "balance":
			d.boolean(v, p, &m.Balance)
		case "delta":
			d.float(v, p, &m.Delta)
		case "budget":
			d.integer(v, p, &m.Budget)
		case "window":
			d.set(p, k)
			d.mapping(v, p, func(key string, k2, v2 *yaml.Node) {
				switch key {
				case "events":
					d.integer(v2, join(p, key), &m.Window.Events)
				case "time":
					d.duration(v2, join(p, key), &m.Window.Time)
				default:
					d.unknown(join(p, key), k2)
				}
			})
		case "refit":
			d.set(p, k)
			d.mapping(v, p, func(key string, k2, v2 *yaml.Node) {
				switch key {
				case "every_events":
					d.integer(v2, join(p, key), &m.Refit.EveryEvents)
				case "every":
					d.duration(v2, join(p, key), &m.Refit.Every)
				case "guard":
					d.float(v2, join(p, key), &m.Refit.Guard)
				case "guard_slack":
					d.float(v2, join(p, key), &m.Refit.GuardSlack)
				default:
					d.unknown(join(p, key), k2)
				}
			})
		case "probability":
			d.set(p, k)
			d.mapping(v, p, func(key string, k2, v2 *yaml.Node) {
				if key != "levels" {
					d.unknown(join(p, key), k2)
					return
				}
				d.integer(v2, join(p, key), &m.Probability.Levels)
			})
		case "lambda":
			d.float(v, p, &m.Lambda)
		case "solver":
			d.str(v, p, &m.Solver)
		case "kernels":
			d.set(p, k)
			d.weightedKernels(v, p, &m.Kernels)
		case "scope":
			d.str(v, p, &m.Scope)
		case "max_keys":
			d.integer(v, p, &m.MaxKeys)
		case "C":
			d.float(v, p, &m.C)
		case "C_pos":
			d.float(v, p, &m.CPos)
		case "C_neg":
			d.float(v, p, &m.CNeg)
		case "decay":
			d.set(p, k)
			d.mapping(v, p, func(key string, k2, v2 *yaml.Node) {
				if key != "half_life" {
					d.unknown(join(p, key), k2)
					return
				}
				d.float(v2, join(p, key), &m.Decay.HalfLife)
			})
		case "levels":
			d.integer(v, p, &m.Levels)
		case "edges":
			d.floats(v, p, &m.Edges)
		case "normalize":
			d.boolean(v, p, &m.Normalize)
		case "learning_rate":
			d.float(v, p, &m.LearningRate)
		case "l2":
			d.float(v, p, &m.L2)
		default:
			d.unknown(p, k)
		}
	})
	d.typeDefaults(path, &m)
	if !d.has(join(path, "max_keys")) && m.Scope == ScopeKey {
		m.MaxKeys = DefaultMaxKeys
	}
	return m
}

// typeKeys lists, per model type, the model keys (besides name, type and
// features) that apply to it.
var typeKeys = map[string][]string{
	ModelMAM:      {"kernel", "balance", "delta", "budget", "window", "decay"},
	ModelOMAM:     {"kernel", "budget", "window", "decay", "levels", "edges", "normalize"},
	ModelLogistic: {"learning_rate", "l2"},
	ModelLDA:      {"window", "decay"},
	ModelSVM:      {"kernel", "delta", "window", "C", "C_pos", "C_neg", "refit", "probability"},
	ModelLSRRank:  {"kernel", "lambda", "window", "refit", "solver", "levels"},
	ModelKRR:      {"kernel", "lambda", "window", "refit", "solver"},
	ModelMLSRRank: {"kernels", "lambda", "window", "refit", "solver", "levels"},
}

var allTypeKeys = []string{"kernel", "balance", "delta", "budget", "window", "decay", "levels", "edges", "normalize",
	"learning_rate", "l2", "C", "C_pos", "C_neg", "refit", "probability", "lambda", "kernels", "solver"}

// typeDefaults rejects keys that do not apply to the model's type and
// applies the type's defaults to keys left out.
func (d *decoder) typeDefaults(path string, m *Model) {
	keys, ok := typeKeys[m.Type]
	if !ok {
		return // the validator reports the type
	}
	for _, key := range allTypeKeys {
		if !slices.Contains(keys, key) && d.has(join(path, key)) {
			d.errs = append(d.errs, &Error{Key: join(path, key), Line: d.src[join(path, key)].line,
				Msg: fmt.Sprintf("does not apply to model type %s (it takes: %s)", m.Type, strings.Join(keys, ", "))})
		}
	}
	if !slices.Contains(keys, "kernel") {
		m.Kernel = Kernel{}
	}
	if !slices.Contains(keys, "balance") {
		m.Balance = false
	}
	if !slices.Contains(keys, "delta") {
		m.Delta = 0
	}
	if (m.Type == ModelMAM || m.Type == ModelOMAM) && m.Budget > 0 { // exact kernel: no random features
		for _, key := range []string{"features", "seed"} {
			if d.has(join(path, "kernel."+key)) {
				d.errs = append(d.errs, &Error{Key: join(path, "kernel."+key), Line: d.src[join(path, "kernel."+key)].line,
					Msg: "not used in the exact-kernel mode (budget > 0); remove it"})
			}
		}
		m.Kernel.Features, m.Kernel.Seed = 0, 0
	}
	switch m.Type {
	case ModelOMAM:
		if !d.has(join(path, "normalize")) {
			m.Normalize = true
		}
	case ModelLSRRank, ModelKRR, ModelMLSRRank:
		if !d.has(join(path, "lambda")) {
			m.Lambda = DefaultLambda
		}
		if !d.has(join(path, "solver")) {
			m.Solver = SolverExact
		}
		if m.Solver == SolverExact && !d.has(join(path, "kernel.features")) {
			m.Kernel.Features = 0
		}
		if !d.has(join(path, "window.events")) {
			m.Window.Events = DefaultSVMWindow
		}
		if !d.has(join(path, "refit.every_events")) && !d.has(join(path, "refit.every")) {
			m.Refit.EveryEvents = DefaultRefitEvery
		}
	case ModelSVM:
		// LIBSVM's default width, gamma = 1/dim, unless set.
		if !d.has(join(path, "kernel.gamma")) && m.Kernel.Type != KernelLinear && m.Features.Dim > 0 {
			m.Kernel.Gamma = 1 / float64(m.Features.Dim)
		}
		// Exact kernel: no random features.
		if !d.has(join(path, "kernel.features")) {
			m.Kernel.Features = 0
		}
		if !d.has(join(path, "kernel.seed")) {
			m.Kernel.Seed = 0
		}
		if !d.has(join(path, "C")) {
			m.C = 1
		}
		if !d.has(join(path, "window.events")) {
			m.Window.Events = DefaultSVMWindow
		}
		if !d.has(join(path, "refit.every_events")) && !d.has(join(path, "refit.every")) {
			m.Refit.EveryEvents = DefaultRefitEvery
		}
		if !d.has(join(path, "refit.guard")) {
			m.Refit.Guard = 0.1
		}
		if !d.has(join(path, "refit.guard_slack")) {
			m.Refit.GuardSlack = 0.02
		}
	case ModelLogistic:
		if !d.has(join(path, "learning_rate")) {
			m.LearningRate = DefaultLearningRate
		}
		if !d.has(join(path, "l2")) {
			m.L2 = DefaultL2
		}
	}
}

// kernelRBFOnly are the kernel keys that only an rbf kernel takes.
var kernelRBFOnly = []string{"gamma", "features", "seed"}

func (d *decoder) kernel(n *yaml.Node, path string) Kernel {
	var k Kernel
	keys := map[string]*yaml.Node{}
	d.mapping(n, path, func(key string, kn, v *yaml.Node) {
		p := join(path, key)
		switch key {
		case "type":
			d.str(v, p, &k.Type)
		case "gamma":
			d.float(v, p, &k.Gamma)
		case "features":
			d.integer(v, p, &k.Features)
		case "seed":
			d.uint64(v, p, &k.Seed)
		case "degree":
			d.integer(v, p, &k.Degree)
		case "coef0":
			d.float(v, p, &k.Coef0)
		default:
			d.unknown(p, kn)
			return
		}
		keys[key] = kn
	})
	if !d.has(join(path, "type")) {
		k.Type = KernelRBF
	}
	switch k.Type {
	case KernelRBF, KernelLaplacian:
		if !d.has(join(path, "gamma")) {
			k.Gamma = DefaultGamma
		}
		if !d.has(join(path, "features")) {
			k.Features = DefaultRFFFeatures
		}
		if !d.has(join(path, "seed")) {
			k.Seed = DefaultSeed
		}
		for _, key := range []string{"degree", "coef0"} {
			if kn, ok := keys[key]; ok {
				d.errorf(join(path, key), kn, "only for kernel type polynomial; remove it (%s is %s)", join(path, "type"), k.Type)
			}
		}
	case KernelLinear:
		for _, key := range append(kernelRBFOnly, "degree", "coef0") {
			if kn, ok := keys[key]; ok {
				d.errorf(join(path, key), kn, "not used by the linear kernel; remove it")
			}
		}
	case KernelPolynomial, KernelSigmoid:
		for _, key := range []string{"features", "seed"} {
			if kn, ok := keys[key]; ok {
				d.errorf(join(path, key), kn, "not used by the %s kernel; remove it", k.Type)
			}
		}
		if kn, ok := keys["degree"]; ok && k.Type == KernelSigmoid {
			d.errorf(join(path, "degree"), kn, "not used by the sigmoid kernel; remove it")
		}
		if !d.has(join(path, "degree")) {
			k.Degree = 2
		}
		if !d.has(join(path, "coef0")) {
			k.Coef0 = 1
		}
	}
	return k
}

func (d *decoder) features(n *yaml.Node, path string, f *Features) {
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		p := join(path, key)
		switch key {
		case "dim":
			d.integer(v, p, &f.Dim)
		case "names":
			d.strings(v, p, &f.Names)
		case "standardize":
			d.boolean(v, p, &f.Standardize)
		default:
			d.unknown(p, k)
		}
	})
}
