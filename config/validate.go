package config

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamer/streamer/online"
)

type validator struct {
	src  map[string]source
	errs []error
}

// errorf records an error on path, located by where the key (or, failing
// that, its nearest enclosing key) was set.
func (v *validator) errorf(path, format string, args ...any) {
	e := &Error{Key: path, Msg: fmt.Sprintf(format, args...)}
	for p := path; p != ""; p = parent(p) {
		if s, ok := v.src[p]; ok {
			e.Line, e.Env = s.line, s.env
			break
		}
	}
	v.errs = append(v.errs, e)
}

// parent strips the last ".key" or "[i]" of a path.
func parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func (v *validator) oneOf(path, got string, allowed ...string) {
	if got == "" {
		v.errorf(path, "required, one of %s", strings.Join(allowed, ", "))
	} else if !slices.Contains(allowed, got) {
		v.errorf(path, "%q is not one of %s", got, strings.Join(allowed, ", "))
	}
}

func (v *validator) positive(path string, got int64) {
	if got <= 0 {
		v.errorf(path, "must be > 0, got %d", got)
	}
}

var (
	modelNameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)
	topicRE     = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
)

// MaxModelName is the longest accepted models[i].name.
const MaxModelName = 64

// MaxSnapshotVersions is the largest accepted snapshot.versions.
const MaxSnapshotVersions = 1000

func validate(c *Config, src map[string]source, reg *online.Registry) []error {
	v := &validator{src: src}
	k := c.Kafka

	if c.ShutdownTimeout < time.Second || c.ShutdownTimeout > time.Hour {
		v.errorf("shutdown_timeout", "must be in [1s, 1h] (an orchestrator kills a pod that takes longer: Kubernetes' default grace is 30s), got %v", c.ShutdownTimeout)
	}
	if len(k.Brokers) == 0 {
		v.errorf("kafka.brokers", "at least one broker (host:port) is required")
	}
	for i, b := range k.Brokers {
		p := fmt.Sprintf("kafka.brokers[%d]", i)
		if err := checkHostPort(b, true); err != nil {
			v.errorf(p, "%v", err)
		}
	}
	if k.Group == "" {
		v.errorf("kafka.group", "required")
	}
	topics := []struct{ path, name string }{
		{"kafka.input_topic", k.InputTopic},
		{"kafka.output_topic", k.OutputTopic},
		{"kafka.dlq_topic", k.DLQTopic},
	}
	for i, t := range topics {
		switch {
		case t.name == "":
			v.errorf(t.path, "required")
		case len(t.name) > 249 || t.name == "." || t.name == ".." || !topicRE.MatchString(t.name):
			v.errorf(t.path, "%q is not a valid Kafka topic name (letters, digits, '.', '_', '-'; at most 249)", t.name)
		default:
			for _, u := range topics[:i] {
				if u.name == t.name {
					v.errorf(t.path, "%q is also %s; the input, output and dead-letter topics must differ", t.name, u.path)
				}
			}
		}
	}
	if k.ClientID == "" {
		v.errorf("kafka.client_id", "required")
	}
	v.oneOf("kafka.start_offset", k.StartOffset, StartEarliest, StartLatest)
	v.positive("kafka.max_message_bytes", int64(k.MaxMessageBytes))
	if !(k.MaxFeatureAbs > 0 && k.MaxFeatureAbs <= 1e100) { // NaN fails too
		v.errorf("kafka.max_feature_abs", "must be > 0 and ≤ 1e100 (larger values overflow the models' arithmetic), got %v", k.MaxFeatureAbs)
	}
	if k.CommitInterval <= 0 {
		v.errorf("kafka.commit_interval", "must be > 0, got %v", k.CommitInterval)
	}
	if k.UnreadyAfter < time.Second {
		v.errorf("kafka.unready_after", "must be ≥ 1s, got %v", k.UnreadyAfter)
	}
	if k.SessionTimeout < time.Second {
		v.errorf("kafka.session_timeout", "must be >= 1s, got %v", k.SessionTimeout)
	}
	v.positive("kafka.producer.batch_size", int64(k.Producer.BatchSize))
	v.positive("kafka.producer.buffer_bytes", int64(k.Producer.BufferBytes))
	if k.Producer.BatchTimeout <= 0 {
		v.errorf("kafka.producer.batch_timeout", "must be > 0, got %v", k.Producer.BatchTimeout)
	}
	v.oneOf("kafka.producer.required_acks", k.Producer.RequiredAcks, AcksNone, AcksOne, AcksAll)
	v.tls(k.TLS)
	v.sasl(k.SASL)

	if err := checkHostPort(c.HTTP.Listen, false); err != nil {
		v.errorf("http.listen", "%v", err)
	}
	for _, t := range []struct {
		key string
		d   time.Duration
	}{{"http.read_timeout", c.HTTP.ReadTimeout}, {"http.write_timeout", c.HTTP.WriteTimeout}, {"http.idle_timeout", c.HTTP.IdleTimeout}} {
		if t.d <= 0 {
			v.errorf(t.key, "must be > 0, got %v", t.d)
		}
	}
	v.http(c.HTTP)
	v.oneOf("log.level", c.Log.Level, LevelDebug, LevelInfo, LevelWarn, LevelError)
	v.oneOf("log.format", c.Log.Format, FormatText, FormatJSON)
	v.positive("metrics.accuracy_window", int64(c.Metrics.AccuracyWindow))
	if c.Labels.JoinWindow.Events < 0 {
		v.errorf("labels.join_window.events", "must be >= 0 (0 = no count limit), got %d", c.Labels.JoinWindow.Events)
	}
	if c.Labels.JoinWindow.Time < 0 {
		v.errorf("labels.join_window.time", "must be >= 0 (0 = no time limit), got %v", c.Labels.JoinWindow.Time)
	}
	if c.Labels.JoinWindow.PerKey < 0 {
		v.errorf("labels.join_window.per_key", "must be >= 0 (0 = no limit), got %d", c.Labels.JoinWindow.PerKey)
	}
	if c.Snapshot.Every <= 0 {
		v.errorf("snapshot.every", "must be > 0, got %v", c.Snapshot.Every)
	}
	if c.Snapshot.EveryEvents < 0 {
		v.errorf("snapshot.every_events", "must be >= 0 (0 = off), got %d", c.Snapshot.EveryEvents)
	}
	v.positive("snapshot.keep", int64(c.Snapshot.Keep))
	if n := c.Snapshot.Versions; n < 0 || n > MaxSnapshotVersions {
		v.errorf("snapshot.versions", "must be 0 (off) to %d, got %d", MaxSnapshotVersions, n)
	}
	if c.Snapshot.VersionsEvery < 0 {
		v.errorf("snapshot.versions_every", "must be >= 0 (0 = at every checkpoint where the model changed), got %v", c.Snapshot.VersionsEvery)
	}
	switch c.Snapshot.Scope {
	case SnapshotScopeInstance:
	case SnapshotScopePartition:
		if c.Snapshot.ChangelogTopic == "" {
			v.errorf("snapshot.scope", "%q needs snapshot.changelog_topic: the partitions' state moves between instances through it", c.Snapshot.Scope)
		}
	default:
		v.errorf("snapshot.scope", "unknown %q (one of %s, %s)", c.Snapshot.Scope, SnapshotScopeInstance, SnapshotScopePartition)
	}
	if c.Snapshot.RemoteRefresh <= 0 {
		v.errorf("snapshot.remote_refresh", "must be > 0, got %v", c.Snapshot.RemoteRefresh)
	}
	if t := c.Snapshot.ChangelogTopic; t != "" {
		for _, o := range []struct{ path, name string }{
			{"kafka.input_topic", k.InputTopic}, {"kafka.output_topic", k.OutputTopic}, {"kafka.dlq_topic", k.DLQTopic}} {
			if t == o.name {
				v.errorf("snapshot.changelog_topic", "%q is also %s; the changelog needs its own topic", t, o.path)
			}
		}
	}

	if len(c.Models) == 0 {
		v.errorf("models", "at least one model is required")
	}
	names := map[string]int{}
	for i, m := range c.Models {
		p := fmt.Sprintf("models[%d]", i)
		v.model(p, m, reg)
		if m.Name != "" {
			if j, ok := names[m.Name]; ok {
				v.errorf(p+".name", "%q is already the name of models[%d]; names must be unique", m.Name, j)
			} else {
				names[m.Name] = i
			}
		}
		if i > 0 {
			f0, f := c.Models[0].Features, m.Features
			if f.Dim != f0.Dim {
				v.errorf(p+".features.dim", "%d differs from models[0].features.dim %d; all models must currently share the same features", f.Dim, f0.Dim)
			}
			if !slices.Equal(f.Names, f0.Names) {
				v.errorf(p+".features.names", "%s differs from models[0].features.names %s; all models must currently share the same features", list(f.Names), list(f0.Names))
			}
			if (f.Hash == nil) != (f0.Hash == nil) || (f.Hash != nil && (*f.Hash != *f0.Hash || f.MaxFeatures != f0.MaxFeatures ||
				!slices.EqualFunc(f.Interactions, f0.Interactions, slices.Equal[[]string]))) {
				v.errorf(p+".features.hash", "differs from models[0]'s hashing (hash, interactions, max_features); all models must currently share the same features")
			}
			if !slices.Equal(f.Shape, f0.Shape) {
				v.errorf(p+".features.shape", "%v differs from models[0].features.shape %v; all models must currently share the same features", f.Shape, f0.Shape)
			}
		}
	}
	v.members(c.Models, reg)
	for i, m := range c.Models {
		v.label(fmt.Sprintf("models[%d]", i), m, reg)
	}
	v.fallbacks(c.Models, reg)
	v.rank(c, reg)
	v.profiles(c)
	for i, m := range c.Models {
		if o, ok := m.Params.(interface{ OnScoreOnly() bool }); ok && o.OnScoreOnly() && !m.KeyScoped() {
			v.errorf(fmt.Sprintf("models[%d].refit.on_score", i), "refits only before a score, which a global model (refitted in the background) never does: add refit.every_events or refit.every, or use scope: key")
		}
		for j, ns := range m.Features.Use {
			if m.Features.Hash == nil || !slices.Contains(m.Features.Namespaces, ns) {
				v.errorf(fmt.Sprintf("models[%d].features.use[%d]", i, j), "%q is not in features.namespaces (use picks namespaces of hashed features)", ns)
			}
		}
	}
	if cw := c.Calibration.Window; cw < 0 || cw > 1_000_000 {
		v.errorf("calibration.window", "must be in [0, 1000000] (0 = off), got %d", cw)
	}
	v.positive("calibration.every", int64(c.Calibration.Every))
	if d := c.Calibration.Delta; !(d > 0 && d < 1) {
		v.errorf("calibration.delta", "must be in (0, 1), got %v", d)
	}
	if d := c.Calibration.MinInterval; d < 0 || d > time.Hour {
		v.errorf("calibration.min_interval", "must be in [0s, 1h] (0 = refit every calibration.every pairs), got %v", d)
	}
	return v.errs
}

// The largest rank.join.events and rank.join.entries: the window's memory
// is allocated whole at start.
const (
	maxRankJoinEvents  = 100_000_000
	maxRankJoinEntries = 1 << 27
)

// maxExploreDim is the largest features.dim of a rank model whose policy
// keeps exploration statistics (stream's limit too).
const maxExploreDim = 256

// rank checks the rank section.
func (v *validator) rank(c *Config, reg *online.Registry) {
	r := c.Rank
	if r.MaxCandidates < 1 || r.MaxCandidates > 100000 {
		v.errorf("rank.max_candidates", "must be in [1, 100000], got %d", r.MaxCandidates)
	}
	v.oneOf("rank.partitioner", r.Partitioner, PartitionerMurmur2, PartitionerFNV1a, PartitionerCRC32)
	v.oneOf("rank.explore.policy", r.Explore.Policy, ExploreGreedy, ExploreEpsilon, ExploreUCB, ExploreThompson)
	if !(r.Explore.Epsilon >= 0 && r.Explore.Epsilon <= 1) {
		v.errorf("rank.explore.epsilon", "must be in [0, 1], got %v", r.Explore.Epsilon)
	}
	if a := r.Explore.Alpha; !(a >= 0) || math.IsInf(a, 0) {
		v.errorf("rank.explore.alpha", "must be a finite number ≥ 0, got %v", a)
	}
	if n := r.Explore.Samples; n < 1 || n > 100000 {
		v.errorf("rank.explore.samples", "must be in [1, 100000], got %d", n)
	}
	if n := r.Join.Events; n < 0 || n > maxRankJoinEvents {
		v.errorf("rank.join.events", "must be in [0, %d] (0 = shown items are not kept), got %d", maxRankJoinEvents, n)
	}
	if r.Join.Time < 0 {
		v.errorf("rank.join.time", "must be >= 0 (0 = labels.join_window.time), got %v", r.Join.Time)
	}
	if r.Join.PerKey < 0 {
		v.errorf("rank.join.per_key", "must be >= 0 (0 = no limit), got %d", r.Join.PerKey)
	}
	if f := r.Join.NewKeys; !(f >= 0 && f <= 1) {
		v.errorf("rank.join.new_keys", "must be in [0, 1] (the share of the window new keys' items may hold; 1 = no limit), got %v", f)
	}
	if n := r.Join.Entries; n < 0 || n > maxRankJoinEntries {
		v.errorf("rank.join.entries", "must be in [0, %d] (0 = 64 × rank.join.events), got %d", maxRankJoinEntries, n)
	}
	type topic struct{ key, name string }
	shared := []topic{{"kafka.input_topic", c.Kafka.InputTopic}, {"kafka.dlq_topic", c.Kafka.DLQTopic}, {"snapshot.changelog_topic", c.Snapshot.ChangelogTopic}}
	for _, t := range []struct {
		topic
		apart []topic // the topics it must not be, besides shared
	}{
		{topic{"rank.response_topic", r.ResponseTopic}, nil},
		{topic{"rank.log_topic", r.LogTopic}, []topic{{"kafka.output_topic", c.Kafka.OutputTopic}, {"rank.response_topic", r.ResponseTopic}}},
	} {
		if t.name == "" {
			continue
		}
		if len(t.name) > 249 || t.name == "." || t.name == ".." || !topicRE.MatchString(t.name) {
			v.errorf(t.key, "%q is not a valid Kafka topic name (letters, digits, '.', '_', '-'; at most 249)", t.name)
		}
		for _, o := range append(shared, t.apart...) {
			if t.name == o.name {
				v.errorf(t.key, "%q is also %s", t.name, o.key)
			}
		}
	}
	v.challenger(c, reg)
	if r.Model == "" {
		return
	}
	for _, m := range c.Models {
		if m.Name != r.Model {
			continue
		}
		if len(m.Members()) > 0 {
			v.errorf("rank.model", "%q aggregates other models' predictions (type %s); rank with a model that scores the features alone", r.Model, m.Type)
		}
		if f := m.Features; f.Hash != nil && r.Join.Entries > 0 && r.Join.Entries < f.MaxFeatures {
			v.errorf("rank.join.entries", "%d is fewer than features.max_features (%d) of rank.model %q: an item with that many hashed entries could never wait for its label", r.Join.Entries, f.MaxFeatures, r.Model)
		}
		if p := r.Explore.Policy; p == ExploreUCB || p == ExploreThompson {
			switch {
			case !m.KeyScoped():
				v.errorf("rank.explore.policy", "%s keeps exploration statistics per key: rank.model %q needs scope: key", p, r.Model)
			case m.Features.Hash != nil:
				v.errorf("rank.explore.policy", "%s needs dense features: rank.model %q has hashed ones (features.hash)", p, r.Model)
			case m.Features.Dim > maxExploreDim:
				v.errorf("rank.explore.policy", "%s keeps a (dim+1)² matrix per key: rank.model %q has features.dim %d, at most %d", p, r.Model, m.Features.Dim, maxExploreDim)
			}
		}
		return
	}
	names := make([]string, len(c.Models))
	for i, m := range c.Models {
		names[i] = m.Name
	}
	v.errorf("rank.model", "%q is not the name of a model of this config (%s)", r.Model, list(names))
}

// challenger checks rank.challenger: a model of the config other than
// rank.model, that ranks as it does (not an aggregate), of the same kind
// (their rewards are on one scale), with a policy that keeps no
// statistics of the rank model's own.
func (v *validator) challenger(c *Config, reg *online.Registry) {
	ch := c.Rank.Challenger
	v.oneOf("rank.challenger.promote", ch.Promote, PromoteManual, PromoteAuto)
	v.oneOf("rank.challenger.estimator", ch.Estimator, "dr", "ips")
	if !(ch.Confidence >= 0.5 && ch.Confidence < 1) {
		v.errorf("rank.challenger.confidence", "must be in [0.5, 1), got %v", ch.Confidence)
	}
	if ch.Hold < 100 || ch.Hold > 10_000_000 {
		v.errorf("rank.challenger.hold", "must be in [100, 10000000] labelled first items, got %d", ch.Hold)
	}
	if ch.Model == "" {
		return
	}
	r := c.Rank
	switch {
	case r.Model == "":
		v.errorf("rank.challenger.model", "%q challenges rank.model, which is not set", ch.Model)
		return
	case ch.Model == r.Model:
		v.errorf("rank.challenger.model", "%q is rank.model itself", ch.Model)
		return
	case r.Explore.Policy == ExploreUCB || r.Explore.Policy == ExploreThompson:
		v.errorf("rank.challenger.model", "rank.explore.policy %s keeps statistics of rank.model's own: a challenger needs greedy or epsilon", r.Explore.Policy)
	}
	var champ, chal *Model
	for i := range c.Models {
		switch c.Models[i].Name {
		case r.Model:
			champ = &c.Models[i]
		case ch.Model:
			chal = &c.Models[i]
		}
	}
	if chal == nil {
		names := make([]string, len(c.Models))
		for i, m := range c.Models {
			names[i] = m.Name
		}
		v.errorf("rank.challenger.model", "%q is not the name of a model of this config (%s)", ch.Model, list(names))
		return
	}
	if len(chal.Members()) > 0 {
		v.errorf("rank.challenger.model", "%q aggregates other models' predictions (type %s); challenge with a model that scores the features alone", ch.Model, chal.Type)
	}
	if champ == nil {
		return
	}
	kind := func(m *Model) (online.Kind, bool) {
		if t := reg.Lookup(m.Type); t != nil && m.Params != nil {
			return t.Traits(m.Params).Kind, true
		}
		return 0, false
	}
	a, okA := kind(champ)
	b, okB := kind(chal)
	if okA && okB && a != b {
		v.errorf("rank.challenger.model", "%q is of kind %s, rank.model %q of kind %s: their rewards must be on one scale", ch.Model, b, r.Model, a)
	}
}

// members checks the members of every aggregating model (adaboost): other
// classifiers of the config, listed before it (the engine scores the
// models in order, so that their predictions for an event are known when
// the aggregate scores it), global like it.
func (v *validator) members(models []Model, reg *online.Registry) {
	index := map[string]int{}
	for i, m := range models {
		index[m.Name] = i
	}
	for i, m := range models {
		p := fmt.Sprintf("models[%d]", i)
		for k, name := range m.Members() {
			kp := fmt.Sprintf("%s.members[%d]", p, k)
			j, ok := index[name]
			switch {
			case !ok:
				v.errorf(kp, "%q is not the name of a model of this config", name)
				continue
			case j == i:
				v.errorf(kp, "%q is the model itself", name)
				continue
			case j > i:
				v.errorf(kp, "%q is models[%d]: members must be listed before the model that aggregates them (models are scored in order)", name, j)
				continue
			}
			mm := models[j]
			if mm.KeyScoped() {
				v.errorf(kp, "%q has scope key; members must be global models", name)
			}
			if t := reg.Lookup(mm.Type); t != nil && mm.Params != nil && t.Traits(mm.Params).Kind != online.Classifier {
				v.errorf(kp, "%q is a %s model (type %s); members must be classifiers", name, t.Traits(mm.Params).Kind, mm.Type)
			}
		}
		if len(m.Members()) > 0 && m.KeyScoped() {
			v.errorf(p+".scope", "key does not apply to a model with members; it aggregates global models")
		}
	}
}

func list(s []string) string {
	if s == nil {
		return "(not set)"
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func (v *validator) model(p string, m Model, reg *online.Registry) {
	switch {
	case m.Name == "":
		v.errorf(p+".name", "required")
	case len(m.Name) > MaxModelName || !modelNameRE.MatchString(m.Name):
		v.errorf(p+".name", "%q must be 1 to %d characters from [a-z0-9_-] (it is a metric label)", m.Name, MaxModelName)
	}
	var t *online.Type
	switch {
	case reg == nil:
		v.errorf(p+".type", "no model types registered")
	case m.Type == "":
		v.errorf(p+".type", "required (supported: %s)", strings.Join(reg.Names(), ", "))
	default:
		if t = reg.Lookup(m.Type); t == nil {
			v.errorf(p+".type", "%q is not a supported model type (supported: %s)", m.Type, strings.Join(reg.Names(), ", "))
		}
	}
	if m.Scope != "" { // "" = global
		v.oneOf(p+".scope", m.Scope, ScopeGlobal, ScopeKey)
	}
	if m.Scope == ScopeKey && m.MaxKeys < 1 {
		v.errorf(p+".max_keys", "must be >= 1, got %d", m.MaxKeys)
	}
	if m.Scope != ScopeKey && m.MaxKeys != 0 {
		v.errorf(p+".max_keys", "only with scope: key")
	}

	fp := p + ".features"
	f := m.Features
	if len(f.Shape) > 0 {
		switch {
		case len(f.Shape) != 2 || f.Shape[0] < 1 || f.Shape[1] < 1:
			v.errorf(fp+".shape", "must be [rows, cols], two integers > 0, got %v", f.Shape)
		case f.Shape[0]*f.Shape[1] != f.Dim:
			v.errorf(fp+".shape", "%v has %d entries but %s.dim is %d (leave dim out: the shape gives it)", f.Shape, f.Shape[0]*f.Shape[1], fp, f.Dim)
		case f.Names != nil:
			v.errorf(fp+".shape", "does not go with %s.names: a matrix's entries are sent as nested arrays, not by name", fp)
		}
	}
	v.hashed(fp, m)
	dimOK := f.Dim > 0
	if f.Dim <= 0 && len(f.Shape) == 0 {
		if f.Dim == 0 {
			v.errorf(fp+".dim", "required, the input dimension (> 0)")
		} else {
			v.errorf(fp+".dim", "must be > 0, got %d", f.Dim)
		}
	}
	if f.Names != nil {
		if len(f.Names) != f.Dim {
			v.errorf(fp+".names", "has %d names but %s.dim is %d; give one name per dimension", len(f.Names), fp, f.Dim)
		}
		seen := map[string]int{}
		for i, n := range f.Names {
			np := fmt.Sprintf("%s.names[%d]", fp, i)
			if n == "" {
				v.errorf(np, "empty name")
				continue
			}
			if j, ok := seen[n]; ok {
				v.errorf(np, "%q repeats %s.names[%d]; names must be unique", n, fp, j)
				continue
			}
			seen[n] = i
		}
	}
	if t == nil || !dimOK {
		return
	}
	if m.Params == nil {
		v.errorf(p, "no parameters for model type %s", m.Type)
		return
	}
	if reflect.TypeOf(m.Params) != reflect.PointerTo(t.ParamsType()) {
		v.errorf(p, "parameters %T for model type %s, want *%v", m.Params, m.Type, t.ParamsType())
		return
	}
	if len(m.Members()) > 0 && f.Standardize {
		v.errorf(fp+".standardize", "does not apply to model type %s: its members' predictions are not features to rescale, and decision stumps do not depend on the features' scale", m.Type)
	}
	if sp, ok := m.Params.(online.SparseParams); ok && f.Hash != nil {
		v.params(p, &m, sp.ValidateSparse(m.InputDim(), f.MaxFeatures))
		return
	}
	// The registry builds every other model for a dense dimension
	// (online.Type.New), hashed or not: at most online.MaxDenseDim.
	if d := m.InputDim(); d > online.MaxDenseDim {
		v.dimError(p, m, fmt.Sprintf("must be in [1, %d], got %d", online.MaxDenseDim, d))
		v.params(p, nil, m.Params.Validate(m.InputDim())) // nil: its own dim errors say the same
		return
	}
	v.params(p, &m, m.Params.Validate(m.InputDim()))
}

// params records the errors of a model type's Validate, each on the key it
// names under the model p: "dim" is features.dim, or with hashed features
// features.hash.bits (dimError); m nil drops the "dim" errors.
func (v *validator) params(p string, m *Model, err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			v.params(p, m, e)
		}
		return
	}
	var se *online.SpecError
	if !errors.As(err, &se) {
		v.errorf(p, "%v", err)
		return
	}
	if se.Field == "dim" {
		if m != nil {
			v.dimError(p, *m, se.Problem)
		}
		return
	}
	v.errorf(p+"."+se.Field, "%s", se.Problem)
}

// dimError records a problem of model p's input dimension: on
// features.dim, or with hashed features on features.hash.bits, which sets
// the dimension (2^bits), saying what the type takes and why.
func (v *validator) dimError(p string, m Model, problem string) {
	f := m.Features
	if f.Hash == nil {
		v.errorf(p+".features.dim", "%s", problem)
		return
	}
	b := f.Hash.Bits
	max := bits.Len(uint(online.MaxDenseDim)) - 1
	v.errorf(p+".features.hash.bits", "%d gives 2^%d = %d hashed indices, more than model type %s takes in this configuration "+
		"(input dimension: %s). The types that keep state per input dimension (logistic's weights, a linear mam's or omam's sums: "+
		"16 bytes or more per index, in memory and in every snapshot, per key when key-scoped) and the stored random-feature maps are built for "+
		"at most 2^%d inputs, hashed or dense: set bits ≤ %d, or use a type that stores hashed examples sparsely "+
		"(svm, krr, lsrrank, mlsrrank, mam with budget > 0) or generates its random features (mam with the rbf or laplacian kernel): up to 30 bits; docs/models.md, \"Hashed features\")",
		b, b, 1<<b, m.Type, problem, max, max)
}

// checkHostPort accepts "host:port" with a numeric port; the host is
// required for brokers and may be empty (all interfaces) for listeners.
func checkHostPort(s string, needHost bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port", s)
	}
	if needHost && host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	n, err := strconv.Atoi(port)
	lo := 0
	if needHost {
		lo = 1
	}
	if err != nil || n < lo || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number in %d..65535", s, port, lo)
	}
	return nil
}

// tls checks the kafka.tls keys; the files must be readable now.
func (v *validator) tls(t TLS) {
	set := []struct {
		key string
		on  bool
	}{{"ca_file", t.CAFile != ""}, {"cert_file", t.CertFile != ""}, {"key_file", t.KeyFile != ""},
		{"server_name", t.ServerName != ""}, {"insecure_skip_verify", t.InsecureSkipVerify}}
	if !t.Enabled {
		for _, s := range set {
			if s.on {
				v.errorf("kafka.tls."+s.key, "set but kafka.tls.enabled is false: enable TLS or remove the key")
			}
		}
		return
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		v.errorf("kafka.tls.key_file", "required with kafka.tls.cert_file (the client certificate's private key)")
	case t.CertFile == "" && t.KeyFile != "":
		v.errorf("kafka.tls.cert_file", "required with kafka.tls.key_file (the client certificate)")
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		v.errorf("kafka.tls.insecure_skip_verify", "true makes kafka.tls.ca_file unused (no certificate is verified); remove one")
	}
	v.readable("kafka.tls.ca_file", t.CAFile)
	v.readable("kafka.tls.cert_file", t.CertFile)
	v.readable("kafka.tls.key_file", t.KeyFile)
}

// readable reports the key when the file at path ("" = unset) cannot be
// read. The content is never part of the message.
func (v *validator) readable(key, path string) {
	if path == "" {
		return
	}
	if _, err := os.ReadFile(path); err != nil {
		v.errorf(key, "%s", fileError(err))
	}
}

const saslMechanisms = SASLPlain + ", " + SASLScramSHA256 + ", " + SASLScramSHA512

// sasl checks the kafka.sasl keys. No message shows the password.
func (v *validator) sasl(s SASL) {
	switch s.Mechanism {
	case "":
		for _, o := range []struct {
			key string
			on  bool
		}{{"username", s.Username != ""}, {"password", s.Password != ""}, {"password_file", s.PasswordFile != ""}} {
			if o.on {
				v.errorf("kafka.sasl."+o.key, "set but kafka.sasl.mechanism is not (one of %s)", saslMechanisms)
			}
		}
		return
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		v.errorf("kafka.sasl.mechanism", "unknown %q (one of %s)", s.Mechanism, saslMechanisms)
	}
	if s.Username == "" {
		v.errorf("kafka.sasl.username", "required with kafka.sasl.mechanism %s", s.Mechanism)
	}
	switch {
	case s.Password != "" && s.PasswordFile != "":
		v.errorf("kafka.sasl.password", "set together with kafka.sasl.password_file; give only one")
	case s.Password == "" && s.PasswordFile == "":
		v.errorf("kafka.sasl.password", "required with kafka.sasl.mechanism %s: set kafka.sasl.password, %s or kafka.sasl.password_file",
			s.Mechanism, EnvName("kafka.sasl.password"))
	default:
		if _, err := s.ResolvePassword(); err != nil {
			var e *Error
			if errors.As(err, &e) {
				v.errorf(e.Key, "%s", e.Msg)
			} else {
				v.errorf("kafka.sasl.password_file", "%v", err)
			}
		}
	}
}

// hashed checks the hashing keys of a model's features.
func (v *validator) hashed(fp string, m Model) {
	f := m.Features
	h := f.Hash
	if h == nil {
		for key, set := range map[string]bool{"namespaces": f.Namespaces != nil, "interactions": f.Interactions != nil, "max_features": f.MaxFeatures != 0} {
			if set {
				v.errorf(fp+"."+key, "only with %s.hash (hashed categorical features)", fp)
			}
		}
		return
	}
	if h.Bits < 1 || h.Bits > 30 {
		v.errorf(fp+".hash.bits", "must be in [1, 30], got %d", h.Bits)
		return
	}
	if h.Seed < 0 {
		v.errorf(fp+".hash.seed", "must be >= 0, got %d", h.Seed)
	}

	if f.Dim != 1<<h.Bits {
		v.errorf(fp+".dim", "is %d but %s.hash.bits %d gives 2^%d = %d: leave dim out", f.Dim, fp, h.Bits, h.Bits, 1<<h.Bits)
	}
	switch {
	case f.Names != nil:
		v.errorf(fp+".names", "does not go with %s.hash: hashed events name their features themselves", fp)
	case len(f.Shape) > 0:
		v.errorf(fp+".shape", "does not go with %s.hash", fp)
	case f.Standardize:
		v.errorf(fp+".standardize", "does not go with %s.hash: running moments over 2^%d mostly-zero hashed coordinates would cost O(2^%d) per event and densify every input", fp, h.Bits, h.Bits)
	}
	if f.MaxFeatures < 1 || f.MaxFeatures > 1<<20 {
		v.errorf(fp+".max_features", "must be in [1, %d], got %d", 1<<20, f.MaxFeatures)
	}
	if len(f.Namespaces) > online.MaxFields {
		v.errorf(fp+".namespaces", "lists %d namespaces, at most %d (an event's hashed features carry their namespace's number as a byte)", len(f.Namespaces), online.MaxFields)
	}
	known := map[string]bool{}
	for i, ns := range f.Namespaces {
		if ns == "" || known[ns] {
			v.errorf(fmt.Sprintf("%s.namespaces[%d]", fp, i), "empty or repeated namespace %q", ns)
		}
		known[ns] = true
	}
	for i, pair := range f.Interactions {
		ip := fmt.Sprintf("%s.interactions[%d]", fp, i)
		if len(pair) != 2 {
			v.errorf(ip, "must be a pair [namespace, namespace], got %d names", len(pair))
			continue
		}
		for _, ns := range pair {
			if !known[ns] {
				v.errorf(ip, "namespace %q is not in %s.namespaces %s", ns, fp, list(f.Namespaces))
			}
		}
	}
}
