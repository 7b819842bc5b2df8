package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// Model versions and rollback (snapshot.versions; docs/operations.md,
// "Model versions and rollback").
//
// After every instance-scope checkpoint whose snapshot is durable, each
// global model whose state differs from its newest version (and, with
// snapshot.versions_every, whose newest version is at least that old) is
// recorded as a new version in snapshot.dir/versions
// (snapshot.VersionStore), on the
// checkpoint's goroutine, after the saves: never on the event path. A
// version that cannot be written is logged and counted; the checkpoint
// goes on.
//
// A rollback (Pipeline.RollBack: POST /v1/models/{model}/rollback, or a
// request written by `streamer models rollback` while the service was
// stopped, applied at start) sets one global model's state to a version's
// with the shard paused (engine.Shard.SetModel), so that the next event
// and the next ranking request see it; the stream is not rewound. The
// shard then counts a change (pshard.change), which makes the next
// checkpoint capture it even when no event arrived, and the checkpoint
// is asked for at once. Once a checkpoint holding the change is durable,
// the rollback is recorded as a new version (origin rollback, from the
// version it copies): history is never rewritten.
//
// Metrics:
//
//	streamer_model_rollbacks_total{model}            rollbacks applied
//	streamer_model_saved_version{model}              the newest version recorded
//	streamer_model_version_errors_total              versions not written (logged; the next checkpoint tries again)
//	streamer_models_requests_refused_total{code, reason}   /v1/models requests answered with an error (versionshttp.go)

// errVersionsOff: snapshot.versions is 0, or there is no snapshot.dir.
var errVersionsOff = errors.New("model versions are off: they need snapshot.dir and snapshot.versions > 0")

// versionKeeper records the versions of the global models and the
// rollbacks (nil store: versions off).
type versionKeeper struct {
	store  *snapshot.VersionStore
	models []engine.ModelInfo
	log    *slog.Logger
	logged repeats
	wait   time.Duration // how long a rollback waits for the checkpoint that makes it durable
	every  time.Duration // snapshot.versions_every

	rollbacks *prometheus.CounterVec
	newest    *prometheus.GaugeVec
	errs      prometheus.Counter

	busy    sync.Mutex // serialises rollbacks
	mu      sync.Mutex // guards pending
	pending []*rollback
}

// rollback is one rollback applied to the live state, waiting to be
// recorded as a version once a checkpoint holding it is durable.
type rollback struct {
	model  string
	from   snapshot.Version // the version whose state was set
	state  snapshot.Model
	change uint64                    // the shard's change count that set it
	file   *snapshot.PendingRollback // a request applied at start: removed once recorded
	done   chan rollbackResult       // buffered: told once
	told   bool                      // guarded by versionKeeper.mu
}

// rollbackResult is what became of a rollback applied: the version that
// records it, or why it is not recorded (yet: the state is durable, the
// version is written with a later checkpoint).
type rollbackResult struct {
	version snapshot.Version
	err     error
}

// openVersions opens snapshot.dir/versions when snapshot.versions > 0 and
// snapshot.dir is set (instance scope: in partition scope the service
// keeps none), registers the metrics on reg (always) and gives the keeper
// to the pipeline.
func openVersions(cfg config.Config, p *Pipeline, eng *engine.Engine, reg prometheus.Registerer, log *slog.Logger) error {
	k := &versionKeeper{models: eng.ModelInfos(), log: log, every: cfg.Snapshot.VersionsEvery,
		wait: min(20*time.Second, max(time.Second, cfg.HTTP.WriteTimeout*3/4)),
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_model_rollbacks_total",
			Help: "Rollbacks of a model's state to one of its versions (POST /v1/models/{model}/rollback, or requested with streamer models rollback and applied at start)."}, []string{"model"}),
		newest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamer_model_saved_version",
			Help: "The number of the newest version of the model's state recorded in snapshot.dir/versions (snapshot.versions)."}, []string{"model"}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamer_model_version_errors_total",
			Help: "Model versions that could not be written to snapshot.dir/versions (logged; the checkpoint is not affected, the next one tries again)."}),
	}
	if reg != nil {
		if err := errors.Join(reg.Register(k.rollbacks), reg.Register(k.newest), reg.Register(k.errs)); err != nil {
			return err
		}
	}
	p.versions = k
	if cfg.Snapshot.Dir == "" || cfg.Snapshot.Versions <= 0 || cfg.Snapshot.Partitioned() {
		return nil
	}
	vs, err := snapshot.OpenVersionStore(filepath.Join(cfg.Snapshot.Dir, snapshot.VersionsDir), cfg.Snapshot.Versions)
	if err != nil {
		return fmt.Errorf("snapshot.versions: %w", err)
	}
	k.store = vs
	for _, m := range k.models {
		if m.KeyScoped {
			continue
		}
		if n, err := vs.Newest(m.Name); err == nil && n > 0 {
			k.newest.WithLabelValues(m.Name).Set(float64(n))
		}
	}
	return nil
}

// on reports whether versions are kept.
func (k *versionKeeper) on() bool { return k != nil && k.store != nil }

// model describes the configured model name (ok false: none).
func (k *versionKeeper) model(name string) (engine.ModelInfo, bool) {
	i := slices.IndexFunc(k.models, func(m engine.ModelInfo) bool { return m.Name == name })
	if i < 0 {
		return engine.ModelInfo{}, false
	}
	return k.models[i], true
}

// failed logs (at most once a minute per message) and counts a version
// that could not be written.
func (k *versionKeeper) failed(msg string, args ...any) {
	k.errs.Inc()
	if ok, n := k.logged.pass(msg + fmt.Sprint(args[:min(2, len(args))]...)); ok {
		if n > 0 {
			args = append(args, "repeated_since_last_logged", n)
		}
		k.log.Error(msg, args...)
	}
}

// checkpointed records the versions of a durable checkpoint of the
// instance-scope shard (on the checkpoint's goroutine, once its snapshot
// seq, made at, is durable): first the rollbacks its capture holds (change:
// the shard's change count captured), then every global model whose state
// differs from its newest version. models are the capture's states,
// examples the models' counts at the capture (by the configuration's
// order).
func (k *versionKeeper) checkpointed(models []snapshot.Model, examples []int64, seq uint64, at time.Time, offsets []snapshot.Offset, change uint64) {
	if !k.on() {
		return
	}
	k.mu.Lock()
	var due []*rollback
	for _, rb := range k.pending {
		if rb.change <= change {
			due = append(due, rb)
		}
	}
	k.mu.Unlock()
	for _, rb := range due {
		v, err := k.store.Add(rb.state, snapshot.Version{Seq: seq, N: rb.from.N, Origin: snapshot.OriginRollback, From: rb.from.Version,
			Request: requestID(rb.file), CreatedAt: at, Offsets: offsets})
		k.mu.Lock()
		if err != nil {
			k.failed("model versions: the rollback is saved, but its version could not be written (the next checkpoint tries again)", "model", rb.model, "to_version", rb.from.Version, "err", err)
			k.tell(rb, rollbackResult{err: err})
			k.mu.Unlock()
			continue
		}
		k.pending = slices.DeleteFunc(k.pending, func(o *rollback) bool { return o == rb })
		k.tell(rb, rollbackResult{version: v})
		k.mu.Unlock()
		k.newest.WithLabelValues(rb.model).Set(float64(v.Version))
		k.log.Info("model rollback saved", "model", rb.model, "version", v.Version, "from_version", rb.from.Version, "seq", seq)
		if rb.file != nil {
			if err := k.store.ClearRollback(*rb.file); err != nil {
				k.log.Warn("model versions: the rollback requested at start is applied and saved, but its request file could not be removed (applied again at the next start)", "model", rb.model, "err", err)
			}
		}
	}
	for i, m := range models {
		info, ok := k.model(m.Name)
		if !ok || info.KeyScoped {
			continue // profiles' tables, key-scoped models
		}
		n := int64(-1)
		if i < len(examples) {
			n = examples[i]
		}
		v, added, err := k.store.AddIfChanged(m, snapshot.Version{Seq: seq, N: n, Origin: snapshot.OriginCheckpoint, CreatedAt: at, Offsets: offsets}, k.every)
		switch {
		case err != nil:
			k.failed("model versions: a version could not be written (the checkpoint is durable; the next one tries again)", "model", m.Name, "err", err)
		case added:
			k.newest.WithLabelValues(m.Name).Set(float64(v.Version))
		}
	}
}

// tell hands rb's waiter its result, once (k.mu held).
func (k *versionKeeper) tell(rb *rollback, r rollbackResult) {
	if !rb.told {
		rb.told = true
		rb.done <- r
	}
}

func requestID(p *snapshot.PendingRollback) string {
	if p == nil {
		return ""
	}
	return p.ID
}

// versionOffsets are a capture's offsets of topic, by partition.
func versionOffsets(topic string, offsets map[int]int64) []snapshot.Offset {
	out := make([]snapshot.Offset, 0, len(offsets))
	for _, part := range slices.Sorted(maps.Keys(offsets)) {
		out = append(out, snapshot.Offset{Topic: topic, Partition: int32(part), Offset: offsets[part]})
	}
	return out
}

// RollBack sets the state of the global model named model to that of its
// version to, in the live instance-scope shard, paused: the next event
// and the next ranking request see it. It returns once the state is set
// (the rollback is then durable, and recorded as a version, once the
// checkpoint it asks for is: wait on the result). A refit of the model
// running meanwhile is waited for (up to the keeper's wait). file is the
// request applied at start (nil over HTTP).
func (p *Pipeline) RollBack(ctx context.Context, model string, to uint64, file *snapshot.PendingRollback) (*rollback, error) {
	k := p.versions
	switch {
	case p.partitioned:
		return nil, engine.ErrPartitionScope
	case !k.on():
		return nil, errVersionsOff
	}
	info, ok := k.model(model)
	switch {
	case !ok:
		return nil, fmt.Errorf("model %s: %w", model, engine.ErrUnknownModel)
	case info.KeyScoped:
		return nil, fmt.Errorf("model %s: %w", model, engine.ErrKeyScopedModel)
	}
	state, ver, err := k.store.Load(model, to)
	if err != nil {
		return nil, err
	}
	if err := p.engine.CheckState(*state); err != nil {
		return nil, err
	}
	p.mu.Lock()
	sh := p.shards[""]
	p.mu.Unlock()
	if sh == nil || sh.st == nil {
		return nil, errors.New("stream: no state to roll back yet")
	}
	k.busy.Lock()
	defer k.busy.Unlock()
	before, _ := k.store.Newest(model)
	rb := &rollback{model: model, from: ver, state: *state, file: file, done: make(chan rollbackResult, 1)}
	deadline := time.Now().Add(k.wait)
	for {
		sh.lock()
		err = sh.st.SetModel(*state)
		if err == nil {
			sh.change++
			rb.change = sh.change
			k.mu.Lock()
			k.pending = append(k.pending, rb)
			k.mu.Unlock()
		}
		sh.unlock()
		if !errors.Is(err, engine.ErrRefitting) || time.Now().After(deadline) {
			break
		}
		select { // the refit's result is swapped in by its own goroutine: wait for it
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, err
	}
	k.rollbacks.WithLabelValues(model).Inc()
	how := "over HTTP"
	if file != nil {
		how = "at start (streamer models rollback)"
	}
	k.log.Info("model rolled back", "model", model, "to_version", to, "newest_version", before, "examples", ver.N, "requested", how)
	select { // a checkpoint now, which makes it durable
	case p.kick <- struct{}{}:
	default:
	}
	return rb, nil
}

// applyPendingRollbacks applies the rollbacks requested while the service
// was stopped (streamer models rollback), right after the state is
// restored and before anything is consumed; each request file is removed
// once the first checkpoint after it is durable and its version recorded.
// A request whose version is already recorded (the service stopped after
// that checkpoint, before the file was removed) is only removed. A request
// that cannot be applied stops start-up, naming it.
func (p *Pipeline) applyPendingRollbacks(ctx context.Context) error {
	k := p.versions
	if !k.on() {
		return nil
	}
	reqs, err := k.store.PendingRollbacks()
	if err != nil {
		return err
	}
	for _, req := range reqs {
		vs, _, err := k.store.List(req.Model)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(vs, func(v snapshot.Version) bool { return v.Request == req.ID }) {
			if err := k.store.ClearRollback(req); err != nil {
				return fmt.Errorf("snapshot.dir/versions: remove the rollback request of model %s, already applied: %w", req.Model, err)
			}
			continue
		}
		if _, err := p.RollBack(ctx, req.Model, req.To, &req); err != nil {
			return fmt.Errorf("the rollback of model %s to version %d requested with streamer models rollback (%s) cannot be applied: %w; "+
				"remove the request to start without it, or request another version",
				req.Model, req.To, filepath.Join(k.store.Dir(), req.Model, snapshot.PendingRollbackFile), err)
		}
	}
	return nil
}

// LastSeq is the seq of the last snapshot saved or loaded (instance
// scope).
func (s *StateStore) LastSeq() uint64 { return s.seq }
