package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"gopkg.in/yaml.v3"
)

// A leaf is a scalar (or string list) key outside models. The table drives
// both YAML decoding and the STREAMER_* overrides, so the two cannot drift.
type leaf struct {
	path string
	ptr  func(*Config) any // *string, *Secret, *bool, *int, *time.Duration or *[]string
}

var leaves = []leaf{
	{"shutdown_timeout", func(c *Config) any { return &c.ShutdownTimeout }},
	{"kafka.brokers", func(c *Config) any { return &c.Kafka.Brokers }},
	{"kafka.group", func(c *Config) any { return &c.Kafka.Group }},
	{"kafka.input_topic", func(c *Config) any { return &c.Kafka.InputTopic }},
	{"kafka.output_topic", func(c *Config) any { return &c.Kafka.OutputTopic }},
	{"kafka.dlq_topic", func(c *Config) any { return &c.Kafka.DLQTopic }},
	{"kafka.client_id", func(c *Config) any { return &c.Kafka.ClientID }},
	{"kafka.start_offset", func(c *Config) any { return &c.Kafka.StartOffset }},
	{"kafka.max_message_bytes", func(c *Config) any { return &c.Kafka.MaxMessageBytes }},
	{"kafka.max_feature_abs", func(c *Config) any { return &c.Kafka.MaxFeatureAbs }},
	{"kafka.commit_interval", func(c *Config) any { return &c.Kafka.CommitInterval }},
	{"kafka.unready_after", func(c *Config) any { return &c.Kafka.UnreadyAfter }},
	{"kafka.session_timeout", func(c *Config) any { return &c.Kafka.SessionTimeout }},
	{"kafka.producer.batch_size", func(c *Config) any { return &c.Kafka.Producer.BatchSize }},
	{"kafka.producer.batch_timeout", func(c *Config) any { return &c.Kafka.Producer.BatchTimeout }},
	{"kafka.producer.required_acks", func(c *Config) any { return &c.Kafka.Producer.RequiredAcks }},
	{"kafka.producer.buffer_bytes", func(c *Config) any { return &c.Kafka.Producer.BufferBytes }},
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
	{"http.tls.cert_file", func(c *Config) any { return &c.HTTP.TLS.CertFile }},
	{"http.tls.key_file", func(c *Config) any { return &c.HTTP.TLS.KeyFile }},
	{"http.tls.client_ca_file", func(c *Config) any { return &c.HTTP.TLS.ClientCAFile }},
	{"http.auth.tokens_file", func(c *Config) any { return &c.HTTP.Auth.TokensFile }},
	{"http.auth.protect", func(c *Config) any { return &c.HTTP.Auth.Protect }},
	{"log.level", func(c *Config) any { return &c.Log.Level }},
	{"log.format", func(c *Config) any { return &c.Log.Format }},
	{"metrics.accuracy_window", func(c *Config) any { return &c.Metrics.AccuracyWindow }},
	{"labels.join_window.events", func(c *Config) any { return &c.Labels.JoinWindow.Events }},
	{"labels.join_window.time", func(c *Config) any { return &c.Labels.JoinWindow.Time }},
	{"labels.join_window.per_key", func(c *Config) any { return &c.Labels.JoinWindow.PerKey }},
	{"snapshot.dir", func(c *Config) any { return &c.Snapshot.Dir }},
	{"snapshot.every", func(c *Config) any { return &c.Snapshot.Every }},
	{"snapshot.every_events", func(c *Config) any { return &c.Snapshot.EveryEvents }},
	{"snapshot.keep", func(c *Config) any { return &c.Snapshot.Keep }},
	{"snapshot.versions", func(c *Config) any { return &c.Snapshot.Versions }},
	{"snapshot.versions_every", func(c *Config) any { return &c.Snapshot.VersionsEvery }},
	{"snapshot.changelog_topic", func(c *Config) any { return &c.Snapshot.ChangelogTopic }},
	{"snapshot.scope", func(c *Config) any { return &c.Snapshot.Scope }},
	{"snapshot.remote_refresh", func(c *Config) any { return &c.Snapshot.RemoteRefresh }},
	{"rank.model", func(c *Config) any { return &c.Rank.Model }},
	{"rank.max_candidates", func(c *Config) any { return &c.Rank.MaxCandidates }},
	{"rank.response_topic", func(c *Config) any { return &c.Rank.ResponseTopic }},
	{"rank.log_topic", func(c *Config) any { return &c.Rank.LogTopic }},
	{"rank.partitioner", func(c *Config) any { return &c.Rank.Partitioner }},
	{"rank.explore.policy", func(c *Config) any { return &c.Rank.Explore.Policy }},
	{"rank.explore.epsilon", func(c *Config) any { return &c.Rank.Explore.Epsilon }},
	{"rank.explore.alpha", func(c *Config) any { return &c.Rank.Explore.Alpha }},
	{"rank.explore.samples", func(c *Config) any { return &c.Rank.Explore.Samples }},
	{"rank.explore.seed", func(c *Config) any { return &c.Rank.Explore.Seed }},
	{"rank.join.events", func(c *Config) any { return &c.Rank.Join.Events }},
	{"rank.join.time", func(c *Config) any { return &c.Rank.Join.Time }},
	{"rank.join.per_key", func(c *Config) any { return &c.Rank.Join.PerKey }},
	{"rank.join.entries", func(c *Config) any { return &c.Rank.Join.Entries }},
	{"rank.join.new_keys", func(c *Config) any { return &c.Rank.Join.NewKeys }},
	{"rank.challenger.model", func(c *Config) any { return &c.Rank.Challenger.Model }},
	{"rank.challenger.promote", func(c *Config) any { return &c.Rank.Challenger.Promote }},
	{"rank.challenger.estimator", func(c *Config) any { return &c.Rank.Challenger.Estimator }},
	{"rank.challenger.confidence", func(c *Config) any { return &c.Rank.Challenger.Confidence }},
	{"rank.challenger.hold", func(c *Config) any { return &c.Rank.Challenger.Hold }},
	{"calibration.window", func(c *Config) any { return &c.Calibration.Window }},
	{"calibration.every", func(c *Config) any { return &c.Calibration.Every }},
	{"calibration.delta", func(c *Config) any { return &c.Calibration.Delta }},
	{"calibration.min_interval", func(c *Config) any { return &c.Calibration.MinInterval }},
}

// sections are the mappings outside models that hold leaves.
var sections = map[string]bool{
	"kafka": true, "kafka.producer": true, "kafka.tls": true, "kafka.sasl": true, "http": true, "http.tls": true, "http.auth": true, "log": true, "metrics": true, "snapshot": true, "labels": true, "labels.join_window": true, "rank": true, "rank.explore": true, "rank.join": true, "rank.challenger": true, "calibration": true,
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
	reg  *online.Registry
	errs []error
	src  map[string]source // dotted path -> where it was set
	auto map[string]bool   // dotted paths of number keys that also take "auto" (online.AutoKeys)
}

func newDecoder(reg *online.Registry) *decoder {
	return &decoder{reg: reg, src: make(map[string]source)}
}

func (d *decoder) errorf(path string, n *yaml.Node, format string, args ...any) {
	e := &Error{Key: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) unknown(path string, key *yaml.Node) {
	d.errs = append(d.errs, &Error{Key: path, Line: key.Line, kind: errUnknownKey})
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
			if n.Kind == yaml.ScalarNode {
				// Not echoed: a file that is not a configuration (a
				// secret's, set as STREAMER_CONFIG by mistake) would go
				// to the logs.
				d.errorf(name, n, "must be a mapping of keys, got one text value of %d bytes: not a configuration file?", len(n.Value))
				return
			}
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
		case full == "profiles":
			d.set(full, k)
			d.profiles(c, v)
		case sections[full]:
			d.set(full, k)
			d.section(c, v, full)
		default:
			l, ok := leafByPath[full]
			if !ok {
				d.errs = append(d.errs, &Error{Key: full, Line: k.Line, kind: errUnknownKey, Msg: sectionTakes(path)})
				return
			}
			d.leaf(l.ptr(c), v, full)
		}
	})
}

// sectionTakes says which keys the section at path ("" = the top level)
// takes, in the order of the leaves table: "(http takes: listen, …)".
func sectionTakes(path string) string {
	prefix, name := path+".", path
	if path == "" {
		prefix, name = "", "the top level"
	}
	var keys []string
	for _, l := range leaves {
		if rest, ok := strings.CutPrefix(l.path, prefix); ok {
			if k, _, _ := strings.Cut(rest, "."); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if path == "" {
		keys = append(keys, "profiles", "models")
	}
	return "(" + name + " takes: " + strings.Join(keys, ", ") + ")"
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
	case *float64:
		d.float(v, path, p)
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
	decodeScalar(d, v, path, "an integer", "an integer", p, "!!int")
}

func (d *decoder) uint64(v *yaml.Node, path string, p *uint64) {
	decodeScalar(d, v, path, "an unsigned integer", "an unsigned 64-bit integer", p, "!!int")
}

func (d *decoder) float(v *yaml.Node, path string, p *float64) {
	decodeScalar(d, v, path, "a number", "a number", p, "!!int", "!!float")
}

// decodeScalar decodes the scalar v, which must carry one of tags and fit
// a T, into *p: otherwise an error says v "is not <notA>".
func decodeScalar[T any](d *decoder, v *yaml.Node, path, want, notA string, p *T, tags ...string) {
	v, ok := d.scalar(v, path, want)
	if !ok {
		return
	}
	var x T
	if !slices.Contains(tags, v.ShortTag()) || v.Decode(&x) != nil {
		d.errorf(path, v, "%q is not %s", v.Value, notA)
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

func (d *decoder) ints(v *yaml.Node, path string, p *[]int) {
	v = resolve(v)
	if isNull(v) {
		return
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(path, v, "must be a list, got %s", kindName(v))
		return
	}
	out := make([]int, len(v.Content))
	for i, item := range v.Content {
		d.integer(item, fmt.Sprintf("%s[%d]", path, i), &out[i])
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

// stringLists decodes a list of lists of strings, such as [[user, item],
// [user, ctx]] (how long each list must be is the model's to check).
func (d *decoder) stringLists(v *yaml.Node, path string, p *[][]string) {
	v = resolve(v)
	if isNull(v) {
		return
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(path, v, "must be a list of lists of strings, such as [[a, b]], got %s", kindName(v))
		return
	}
	out := make([][]string, len(v.Content))
	ok := true
	for i, item := range v.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if r := resolve(item); isNull(r) || r.Kind != yaml.SequenceNode {
			d.errorf(ip, r, "must be a list of strings, such as [a, b], got %s", kindName(r))
			ok = false
			continue
		}
		before := len(d.errs)
		d.strings(item, ip, &out[i])
		ok = ok && len(d.errs) == before
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

// commonKeys are the keys of every model; the others are the type's own.
var commonKeys = []string{"name", "type", "features", "scope", "max_keys", "label", "fallback", "residual"}

// model decodes one models entry: the common keys, then the type's keys
// into the type's parameter struct (its defaults first, completed after).
func (d *decoder) model(n *yaml.Node, path string) Model {
	var m Model
	d.set(path, n)
	type entry struct{ k, v *yaml.Node }
	var own []entry
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		p := join(path, key)
		switch key {
		case "name":
			d.str(v, p, &m.Name)
		case "type":
			d.str(v, p, &m.Type)
		case "features":
			d.set(p, k)
			d.features(v, p, &m.Features)
		case "scope":
			d.str(v, p, &m.Scope)
		case "max_keys":
			d.integer(v, p, &m.MaxKeys)
		case "label":
			d.set(p, k)
			d.label(v, p, &m.Label)
		case "fallback":
			d.str(v, p, &m.Fallback)
		case "residual":
			d.boolean(v, p, &m.Residual)
		default:
			own = append(own, entry{k, v})
		}
	})
	if !d.has(join(path, "max_keys")) && m.Scope == ScopeKey {
		m.MaxKeys = DefaultMaxKeys
	}
	if m.Type == "" || d.reg == nil {
		return m // the validator reports the missing type
	}
	t := d.reg.Lookup(m.Type)
	if t == nil {
		return m // the validator reports the unknown type
	}
	params := t.NewParams()
	d.auto = map[string]bool{}
	if a, ok := params.(online.AutoKeys); ok {
		for _, k := range a.AutoKeys() {
			d.auto[join(path, k)] = true
		}
	}
	fields := codec.Fields(reflect.ValueOf(params))
	for _, e := range own {
		key := e.k.Value
		p := join(path, key)
		i := slices.IndexFunc(fields, func(f codec.Field) bool { return f.Key == key })
		if i < 0 {
			takes := strings.Join(keyList(commonKeys, fields), ", ")
			if !d.anyTypeKey(key) { // a typo rather than another type's key
				d.errs = append(d.errs, &Error{Key: p, Line: e.k.Line, kind: errUnknownKey,
					Msg: fmt.Sprintf("(model type %s takes: %s)", m.Type, takes)})
				continue
			}
			d.errs = append(d.errs, &Error{Key: p, Line: e.k.Line,
				Msg: fmt.Sprintf("does not apply to model type %s (it takes: %s)", m.Type, takes)})
			continue
		}
		d.value(fields[i].Value, e.k, e.v, p, "model type "+m.Type)
	}
	if f := &m.Features; f.Hash != nil && f.Hash.Bits >= 1 && f.Hash.Bits <= 30 {
		if f.Dim == 0 { // features.hash gives the dimension
			f.Dim = 1 << f.Hash.Bits
		}
		if f.MaxFeatures == 0 {
			f.MaxFeatures = DefaultMaxFeatures
		}
		if h, ok := params.(online.Hashed); ok {
			h.SetHashed() // e.g. mam's random features generate their frequencies (kernel.sparse)
		}
		if ns, ok := params.(online.Namespaced); ok {
			ns.SetNamespaces(slices.Clone(f.Namespaces)) // fm: field i+1 is namespaces[i]
		}
	}
	if f := &m.Features; len(f.Shape) == 2 && f.Shape[0] > 0 && f.Shape[1] > 0 {
		if f.Dim == 0 { // features.shape gives the dimension
			f.Dim = f.Shape[0] * f.Shape[1]
		}
		if s, ok := params.(online.Shaped); ok {
			s.SetShape(f.Shape[0], f.Shape[1])
		}
	}
	m.Params = params
	if c, ok := params.(online.Completer); ok {
		c.Complete(m.InputDim(), func(key string) bool { return d.has(join(path, key)) })
	}
	return m
}

// anyTypeKey reports whether key is a (top-level) key of some registered
// model type.
func (d *decoder) anyTypeKey(key string) bool {
	for _, t := range d.reg.Types() {
		if slices.ContainsFunc(codec.Fields(reflect.New(t.ParamsType())), func(f codec.Field) bool { return f.Key == key }) {
			return true
		}
	}
	return false
}

// keyList lists the keys of fields after extra.
func keyList(extra []string, fields []codec.Field) []string {
	out := slices.Clone(extra)
	for _, f := range fields {
		out = append(out, f.Key)
	}
	return out
}

// value decodes the YAML value v of key k (at path) into the parameter
// field f, by its type: numbers, booleans, strings, durations, lists of
// numbers or strings, lists of lists of strings, nested mappings and lists
// of mappings. owner names
// what the enclosing keys belong to, for the message of a key that does not
// apply.
func (d *decoder) value(f reflect.Value, k, v *yaml.Node, path, owner string) {
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d.duration(v, path, f.Addr().Interface().(*time.Duration))
	case f.Kind() == reflect.Struct:
		d.set(path, k)
		d.structValue(f, v, path)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
		d.set(path, k)
		d.structList(f, v, path)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Float64:
		d.floats(v, path, f.Addr().Interface().(*[]float64))
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		d.strings(v, path, f.Addr().Interface().(*[]string))
	case f.Type() == reflect.TypeOf([][]string(nil)):
		d.stringLists(v, path, f.Addr().Interface().(*[][]string))
	case f.Kind() == reflect.Float64:
		if r := resolve(v); d.auto[path] && r.Kind == yaml.ScalarNode && r.Value == "auto" {
			f.SetFloat(0) // the model chooses
			d.set(path, v)
			return
		}
		d.float(v, path, f.Addr().Interface().(*float64))
	case f.Kind() == reflect.Int:
		d.integer(v, path, f.Addr().Interface().(*int))
	case f.Kind() == reflect.Uint64:
		d.uint64(v, path, f.Addr().Interface().(*uint64))
	case f.Kind() == reflect.Bool:
		d.boolean(v, path, f.Addr().Interface().(*bool))
	case f.Kind() == reflect.String:
		d.str(v, path, f.Addr().Interface().(*string))
	default:
		panic(fmt.Sprintf("config: %s (%s): unsupported parameter type %v", path, owner, f.Type()))
	}
}

// structValue decodes the mapping v into the struct f: each key into its
// field; the fields not given keep their values (the defaults).
func (d *decoder) structValue(f reflect.Value, v *yaml.Node, path string) {
	fields := codec.Fields(f)
	d.mapping(v, path, func(key string, k, vn *yaml.Node) {
		p := join(path, key)
		i := slices.IndexFunc(fields, func(fl codec.Field) bool { return fl.Key == key })
		if i < 0 {
			d.errs = append(d.errs, &Error{Key: p, Line: k.Line, kind: errUnknownKey,
				Msg: fmt.Sprintf("(%s takes: %s)", path, strings.Join(keyList(nil, fields), ", "))})
			return
		}
		d.value(fields[i].Value, k, vn, p, path)
	})
}

// structList decodes the list v of mappings into the slice of structs f,
// each item from the zero value.
func (d *decoder) structList(f reflect.Value, v *yaml.Node, path string) {
	v = resolve(v)
	if isNull(v) {
		return
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(path, v, "must be a list, got %s", kindName(v))
		return
	}
	s := reflect.MakeSlice(f.Type(), len(v.Content), len(v.Content))
	for i, item := range v.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		d.set(ip, item)
		d.structValue(s.Index(i), item, ip)
	}
	f.Set(s)
}

func (d *decoder) features(n *yaml.Node, path string, f *Features) {
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		p := join(path, key)
		switch key {
		case "dim":
			d.integer(v, p, &f.Dim)
		case "names":
			d.strings(v, p, &f.Names)
		case "shape":
			d.ints(v, p, &f.Shape)
		case "standardize":
			d.boolean(v, p, &f.Standardize)
		case "hash":
			f.Hash = &Hash{}
			d.set(p, v)
			d.mapping(v, p, func(key string, k, v *yaml.Node) {
				hp := join(p, key)
				switch key {
				case "bits":
					d.integer(v, hp, &f.Hash.Bits)
				case "seed":
					d.integer(v, hp, &f.Hash.Seed)
				default:
					d.unknown(hp, k)
				}
			})
		case "namespaces":
			d.strings(v, p, &f.Namespaces)
		case "use":
			d.strings(v, p, &f.Use)
		case "interactions":
			v = resolve(v)
			if isNull(v) {
				return
			}
			if v.Kind != yaml.SequenceNode {
				d.errorf(p, v, "must be a list of [namespace, namespace] pairs, got %s", kindName(v))
				return
			}
			f.Interactions = make([][]string, len(v.Content))
			for i, item := range v.Content {
				d.strings(item, fmt.Sprintf("%s[%d]", p, i), &f.Interactions[i])
			}
			d.set(p, v)
		case "max_features":
			d.integer(v, p, &f.MaxFeatures)
		default:
			d.unknown(p, k)
		}
	})
}

// label decodes models[i].label.
func (d *decoder) label(n *yaml.Node, path string, l *Label) {
	d.mapping(n, path, func(key string, k, v *yaml.Node) {
		p := join(path, key)
		switch key {
		case "positive":
			d.str(v, p, &l.Positive)
		case "edges":
			d.floats(v, p, &l.Edges)
		case "min":
			l.Min = new(float64)
			d.float(v, p, l.Min)
		case "max":
			l.Max = new(float64)
			d.float(v, p, l.Max)
		default:
			d.errs = append(d.errs, &Error{Key: p, Line: k.Line, kind: errUnknownKey, Msg: "(label takes: positive, edges, min, max)"})
		}
	})
}
