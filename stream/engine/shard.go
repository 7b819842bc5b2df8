package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/wire"
)

// Shard is one unit of state: every model's state for a set of input
// partitions (all of an instance's in instance scope, one in partition
// scope), with the scratch of its per-event path. A shard is applied to by
// one goroutine at a time; an instance-scope shard's lanes (lane) apply to
// its state in parallel, and Capture, Restore, Settle and Close need every
// lane paused (the pipeline holds the shard's lock exclusively). Different
// shards run in parallel.
type Shard struct {
	e       *Engine
	scope   string // "" instance scope; the partition number in partition scope
	part    int    // partition scope: the partition (-1 in instance scope)
	models  []*shardModel
	labels  []float64
	preds   []online.Prediction
	recs    []wire.Score // per model: its record for the event being applied
	decided []bool       // per model: whether its prediction for the event is a decision (modelDef.decided)
	idBuf   []byte
	join    *joinBuffer  // the stream's impressions (nil: delayed labels off)
	shown   *joinBuffer  // the items ranking requests showed (nil: delayed labels or requests off, or rank JoinEvents < 0)
	jmu     *sync.Mutex  // guards join and shown, which an instance-scope shard's lanes share
	in      holder.Input // the event's features as the models take them (shardModel.feed)
	rk      *rankScratch // ranking requests' scratch (nil until the first)
	stream  uint64       // the exploration draws' stream (rankScratch)
	runs    bool         // an applier's (lane or partition shard; applies): judged and scores wait for EndRun
	judged  []judgement  // the run's labelled events' predictions
	scores  []int        // per model: the run's published predictions
	w       *Worker      // Process's
	closed  bool

	profiles []*shardProfile // the entities' profiles (profiles.go), shared by the lanes
	ps       profileScratch
}

// Holder is the holder of the state of the engine's model i (in the
// configuration's order) in the shard: for tests and tools, with the
// shard paused.
func (s *Shard) Holder(i int) holder.Holder { return s.models[i].h }

// NewShard returns an empty shard for scope: "" (instance scope: every
// partition of the instance) or an input partition's number (partition
// scope). Call Restore before processing, with the saved state or nil.
func (e *Engine) NewShard(scope string) (*Shard, error) {
	s := &Shard{e: e, scope: scope, part: -1, jmu: new(sync.Mutex)}
	s.scratch()
	if scope != "" {
		p, err := strconv.Atoi(scope)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("stream: shard scope %q is not a partition", scope)
		}
		s.part = p
		s.stream = uint64(p + 1)
	}
	if e.cfg.JoinEvents > 0 {
		s.join = newJoinBuffer(e.joinConfig(srcImpressions))
		if e.rankIdx >= 0 && e.cfg.Rank.JoinEvents > 0 {
			s.shown = newJoinBuffer(e.joinConfig(srcRequests))
		}
	}
	e.mu.Lock()
	first := e.built == 0
	if err := e.bindLocked(scope != ""); err != nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("stream: shard scope %q: %w", scope, err)
	}
	e.built++
	e.mu.Unlock()
	models, err := e.buildModels(s, first)
	if err != nil {
		return nil, err
	}
	if scope == "" {
		// Instance scope: the partitions' lanes share the holders, and the
		// judge reads the first shard's instances' bounds (the configured
		// models themselves) behind the same locks.
		for _, m := range models {
			m.h.Share()
			if d, mu := m.def, m.h.Mutex(nil); first && d.bound != nil && d.merged == nil && mu != nil {
				d.bound = &lockedBounder{mu: mu, b: d.bound}
			}
		}
	}
	s.models = models
	if s.profiles, err = e.newShardProfiles(s); err != nil {
		return nil, err
	}
	s.w = e.NewWorker()
	return s, nil
}

// scratch makes the shard's per-model scratch of the event being
// applied (labels, preds, recs, decided).
func (s *Shard) scratch() {
	n := len(s.e.defs)
	s.labels, s.preds, s.recs, s.decided = make([]float64, n), make([]online.Prediction, n), make([]wire.Score, n), make([]bool, n)
}

// lockedBounder is a model's bound read behind the lock its holder's
// users take (holder.mutex).
type lockedBounder struct {
	mu *sync.Mutex
	b  online.Bounder
}

func (l *lockedBounder) Bound(rho float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Bound(rho)
}

// Lane returns a lane of s, an instance-scope shard, for the applier of
// input partition part: a shard that applies events to s's state (its
// holders and join buffers, each behind its own lock) with scratch of its
// own, so that the instance's partitions apply their events in parallel.
// Each model takes one event at a time, in the order its lanes bring them:
// a partition's events in offset order, as in a shard of its own; a
// key-scoped model's keys live in one partition each, so every key's
// instance sees exactly the events it would see applied serially. Capture,
// Restore, Durable, Settle and Close are s's: the pipeline calls them with
// every lane paused.
func (s *Shard) Lane(part int) *Shard {
	e := s.e
	l := &Shard{e: e, scope: s.scope, part: s.part, join: s.join, shown: s.shown, jmu: s.jmu, stream: uint64(part + 1), profiles: s.profiles}
	l.scratch()
	l.models = make([]*shardModel, len(s.models))
	for i, m := range s.models {
		lm := &shardModel{def: m.def, h: holder.ForLane(m.h)}
		if m.in != nil {
			lm.in = make([]float64, len(m.in))
		}
		l.models[i] = lm
	}
	return l
}

// Idle tells the lane's holders that its applier found no event waiting
// (the shard's lock held shared): a lane's statistics of a mergeable
// global model are published (holder.Lane).
func (l *Shard) Idle() { l.eachLane(holder.Lane.Idle) }

// Waited tells the lane's holders that its applier then waited d for its
// next event.
func (l *Shard) Waited(d time.Duration) { l.eachLane(func(lh holder.Lane) { lh.Waited(d) }) }

// Leave ends lane l (the shard's lock held exclusively): what its
// partition's events taught a mergeable global model goes into the
// shard's state (holder.Lane).
func (l *Shard) Leave() { l.eachLane(holder.Lane.Leave) }

// eachLane calls fn with each of the lane's holders of its own (a
// mergeable global model's, holder.Lane).
func (l *Shard) eachLane(fn func(holder.Lane)) {
	for _, m := range l.models {
		if lh, ok := m.h.(holder.Lane); ok {
			fn(lh)
		}
	}
}

// buildModels makes empty instances of every model for shard s.
func (e *Engine) buildModels(s *Shard, first bool) ([]*shardModel, error) {
	out := make([]*shardModel, len(e.defs))
	for i, d := range e.defs {
		sm := &shardModel{def: d}
		if len(d.members) > 0 {
			sm.in = make([]float64, len(d.members)+e.cfg.Dim)
		}
		h, err := e.newHolder(s, d, first, &sm.Figures)
		if err != nil {
			return nil, fmt.Errorf("stream: model %s: %w", d.name, err)
		}
		sm.h = h
		if r := refitOf(h.Instance()); r != nil {
			r.OnRefit(d.onRefit)
		}
		out[i] = sm
	}
	return out, nil
}

// newHolder builds model d's holder in shard s (first: the engine's first
// shard): key-scoped, merged, or one plain instance.
func (e *Engine) newHolder(s *Shard, d *modelDef, first bool, fig *holder.Figures) (holder.Holder, error) {
	spec := &holder.Spec{Name: d.name, Factory: d.keyFactory, Version: d.met.version, KeyErrors: d.met.keyErrors, Prepared: d.prep != nil, RestoreKey: restoreKeyState}
	if d.keyFactory != nil {
		c := holder.KeyedConfig{Table: e.keys.Table(s.scope, d.name), MaxKeys: d.maxKeys, Stripes: 1, Hold: e.cfg.KeyHold, Want: &e.wantCkpt, Log: e.cfg.Log}
		if s.scope == "" {
			c.Stripes = holder.KeyStripes(d.maxKeys) // the lanes share it
		}
		if dir := e.cfg.LegacyKeyDir; dir != "" {
			c.Legacy = filepath.Join(dir, d.name)
			if s.scope != "" {
				c.Legacy = filepath.Join(c.Legacy, "p"+s.scope)
			}
		}
		return holder.NewKeyed(spec, fig, c)
	}
	var m online.Model
	if first && s.scope == "" {
		m = d.proto // instance scope: the configured instance itself
		if g, ok := m.(*online.MAM); ok && g.Mergeable() && e.mergeLanes() {
			return holder.NewMerging(spec, fig, g), nil // learned by the lanes in parallel
		}
	} else {
		var err error
		if m, err = d.newInst(); err != nil {
			return nil, err
		}
	}
	if d.merged != nil { // partition scope
		own, ok := m.(*online.MAM)
		if !ok {
			return nil, fmt.Errorf("partition instance is a %T, want *online.MAM", m)
		}
		return holder.NewMerged(spec, fig, own, d.merged), nil
	}
	return holder.NewPlain(spec, fig, m), nil
}

func (s *Shard) start() {
	for _, m := range s.models {
		if r := refitOf(m.h.Instance()); r != nil {
			r.Start()
		}
	}
}

func (s *Shard) stop() {
	for _, m := range s.models {
		if r := refitOf(m.h.Instance()); r != nil {
			_ = r.Close()
		}
	}
}

// Close releases the shard (its partition was revoked, after its final
// checkpoint): refits stop, and a mergeable model keeps the partition's
// statistics as its remote state until a newer one arrives. The key store
// keeps the shard's table (the partition may come back).
func (s *Shard) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.stop()
	if s.join != nil {
		s.e.joinMoved(srcImpressions, -s.join.pending())
	}
	if s.shown != nil {
		s.e.joinMoved(srcRequests, -s.shown.pending())
	}
	for _, m := range s.models {
		m.h.Detach(s.part)
		m.Examples.Store(0)
		m.Hot.Store(0)
		m.Stored.Store(0)
	}
	s.e.mu.Lock()
	delete(s.e.shards, s)
	s.e.relist()
	s.e.mu.Unlock()
}

// Process decodes msg and applies it (Worker.Prepare, then Apply) with the
// shard's own worker.
func (s *Shard) Process(msg *kafka.Message, out Sink) {
	s.w.Prepare(msg)
	s.Apply(s.w, msg, out)
}

// Apply scores, publishes and learns the event w prepared from msg: the
// part of the per-event work that reads and changes the shard's state.
func (s *Shard) Apply(w *Worker, msg *kafka.Message, pub Sink) {
	s.ApplyAt(w, msg, pub, s.e.now())
}

// ApplyAt is Apply at time now (scored_at, the delayed labels' clock),
// for a caller that has just read the clock anyway (the pipeline's
// applier, timing its events).
func (s *Shard) ApplyAt(w *Worker, msg *kafka.Message, pub Sink, now time.Time) {
	if err := w.err; err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			s.e.reject(msg, pub, we.Reason, we.Detail)
		} else {
			s.e.reject(msg, pub, wire.ReasonNotJSON, err.Error())
		}
		return
	}
	ev := &w.ev
	if ev.HasLabel {
		for i, d := range s.e.defs {
			v, in := d.label.Read(ev.Label)
			if !in {
				lo, hi, _ := d.label.Range()
				s.e.reject(msg, pub, wire.ReasonBadLabel,
					fmt.Sprintf("label %v is outside model %s's label range [%v, %v] (label.min, label.max)", ev.Label, d.name, lo, hi))
				return
			}
			y, ok := d.proto.Label(v)
			if !ok {
				s.e.reject(msg, pub, wire.ReasonBadLabel,
					fmt.Sprintf("label %v is not in model %s's label set", ev.Label, d.name))
				return
			}
			s.labels[i] = y
		}
		if s.shown != nil && s.shown.protect {
			s.jmu.Lock()
			s.shown.labelledKey(msg.Key)
			s.jmu.Unlock()
		}
	}
	if !ev.HasFeatures {
		// A label: for an impression, or (with an item) for an item a
		// ranking request showed, kept apart.
		id, src := ev.ID, srcImpressions
		if ev.Item != nil {
			s.idBuf = itemID(s.idBuf[:0], ev.ID, ev.Item)
			id, src = s.idBuf, srcRequests
		}
		s.lateLabel(src, id, msg.Key, ev.Label, now.UnixNano())
		return
	}
	id := ev.ID
	if !ev.HasID {
		// No id in the event: its position in the log is a unique id.
		s.idBuf = append(s.idBuf[:0], msg.Topic...)
		s.idBuf = append(s.idBuf, ':')
		s.idBuf = strconv.AppendInt(s.idBuf, int64(msg.Partition), 10)
		s.idBuf = append(s.idBuf, ':')
		s.idBuf = strconv.AppendInt(s.idBuf, msg.Offset, 10)
		id = s.idBuf
	}
	if ev.IsRequest {
		s.request(ev, msg, id, pub, now)
		return
	}
	key := msg.Key
	if len(key) == 0 {
		key = ev.Key
	}
	ob, _ := pub.(*Outbox) // the pipeline's: its records are encoded off this goroutine
	in := &s.in
	switch {
	case s.e.cfg.Hash != nil:
		s.e.hashed.add(ev.Hash, ev.Idx)
		s.joinProfiles(in, ev.Idx, ev.Val, ev.Field, ev, key, nil, false) // as they are without profiles
	default:
		in.SetDense(ev.Features)
	}
	// The event passes the models in phases, each over every model in the
	// models' order: score and learn (each model's holder; an aggregator
	// takes the predictions of the models before it), its calibrated
	// certainty (calibration.go), a fallback's answer where a key-scoped
	// model has none yet (fallback.go), the records (outbox.go), and the
	// counts and judging.
	for i, m := range s.models {
		var prep []float64
		if w.prepared {
			prep = w.prep[i]
		}
		d := m.def
		y := s.labels[i]
		if d.residual {
			y = residualTarget(y, s.preds[d.fallback])
		}
		p, version := m.observe(msg.Key, m.feed(in, prep, s.preds), y, ev.HasLabel)
		d.residualSum(&p, s.preds)
		s.recs[i] = wire.Score{
			ID: id, Key: key, Model: d.name, Version: version,
			Score: p.Score, Prediction: p.Label, Probability: p.Probability, HasProbability: p.HasProbability,
			HasBound: p.HasBound, MistakeBound: p.MistakeBound, Delta: p.Delta, N: p.N,
			EventTS: ev.TS, ScoredAt: now,
		}
		if d.traits.Kind == online.Regression && p.HasValue {
			s.recs[i].Value, s.recs[i].HasValue = p.Value, true
		}
		s.decided[i] = d.decided(&p)
		s.preds[i] = p
	}
	s.certify()
	s.fallBack()
	s.publishScores(pub, ob, msg.Key)
	for i, m := range s.models {
		s.scored(m, i, s.preds[i])
		if !ev.HasLabel {
			continue
		}
		var cal *wire.Calibrated
		if s.decided[i] {
			// The certainty published (a decision's own: no fallback
			// took its place) goes to the calibration's live check.
			cal = &s.recs[i].Calibrated
		}
		s.judge(i, s.preds[i], s.labels[i], ev.Label, s.preds, cal)
	}
	if len(s.profiles) > 0 {
		// The event's Kafka timestamp, but never beyond the service's clock
		// by more than maxClockSkew: a producer's timestamp far ahead (year
		// 9000) would otherwise become the entity's last event, and its
		// popularity would stop decaying until the clock got there. Within
		// the skew the timestamp is kept, so that a replay after a crash
		// (a later clock) gives the same profiles.
		at := now.UnixMilli()
		if !msg.Time.IsZero() {
			at = min(msg.Time.UnixMilli(), now.Add(maxClockSkew).UnixMilli())
		}
		s.learnProfiles(ev, key, at)
	}
	if !ev.HasLabel && ev.HasID && s.join != nil {
		s.jmu.Lock()
		defer s.jmu.Unlock()
		before := s.join.pending()
		var d joinDrops
		if s.e.cfg.Hash != nil {
			_, d = s.join.putSparse(ev.ID, key, ev.Idx, ev.Val, ev.Field, s.preds, now.UnixNano())
		} else {
			_, d = s.join.put(ev.ID, key, ev.Features, s.preds, now.UnixNano())
		}
		s.e.joinDropped(srcImpressions, d)
		s.e.joinMoved(srcImpressions, s.join.pending()-before)
	}
}

// judgement is model i's prediction p for a labelled event (label y, raw
// on the wire; pub the prediction published), waiting in an applier's
// shard for EndRun.
type judgement struct {
	model  int
	p, pub online.Prediction
	y, raw float64
	cal    wire.Calibrated // the certainty published (if hasCal)
	hasCal bool
}

// calibrateRun gives model d (the i-th) its decisions among the run's
// judgements js for its calibration window, under one hold of the
// window's lock.
func (d *modelDef) calibrateRun(i int, js []judgement) {
	c, locked := d.cal, false
	if c == nil {
		return
	}
	for k := range js {
		j := &js[k]
		if j.model != i || !d.decided(&j.p) {
			continue
		}
		if !locked {
			c.mu.Lock()
			locked = true
		}
		var cal *wire.Calibrated
		if j.hasCal {
			cal = &j.cal
		}
		c.add(j.p, j.y, j.raw, cal)
	}
	if locked {
		c.mu.Unlock()
	}
}

// judge judges model i's prediction p for an event (its label y, raw on
// the wire; preds every model's predictions for it; cal the calibrated
// certainty published with p, nil when p was not published or the event
// is judged later) with modelDef.judge, or in an applier's shard keeps it
// for EndRun.
func (s *Shard) judge(i int, p online.Prediction, y, raw float64, preds []online.Prediction, cal *wire.Calibrated) {
	d := s.models[i].def
	if !s.runs {
		d.judge(p, y, raw, preds, cal)
		return
	}
	j := judgement{model: i, p: p, pub: d.published(p, preds), y: y, raw: raw}
	if cal != nil {
		j.cal, j.hasCal = *cal, true
	}
	s.judged = append(s.judged, j)
}

// Applies makes s the shard (or lane) input partition part's applier
// applies events to: it counts and judges them a run at a time (EndRun),
// and observes the bounds it publishes into the partition's shard of the
// histogram.
func (s *Shard) Applies(part int) {
	s.runs = true
	s.scores = make([]int, len(s.models))
	for _, m := range s.models {
		m.bound = s.e.met.bound.Shard(m.def.name, part).Run()
	}
}

// scored records model m's (the i-th) published prediction p: at once
// (modelDef.scored), or in an applier's run, counted for EndRun and its
// bound observed into the partition's shard.
func (s *Shard) scored(m *shardModel, i int, p online.Prediction) {
	if !s.runs {
		m.def.scored(p)
		return
	}
	s.scores[i]++
	if p.HasBound {
		m.bound.Observe(p.MistakeBound)
	}
}

// EndRun ends the run of events an applier applied: the models' counts
// of published predictions move once, their published mistake bounds go
// into the partition's shard of the histogram (HistRun), and the
// predictions it kept (judge) are judged: each model's calibration pairs
// under one hold of the calibration's lock, then its quality under one
// hold of its judge's lock.
// The appliers of an instance's partitions share every model's judge (its
// prequential quality and calibration window) and counters, and would
// otherwise queue at the lock, and contend for the counters' cache
// lines, once per event.
func (s *Shard) EndRun() {
	for i, n := range s.scores {
		if n > 0 {
			m := s.models[i]
			m.def.met.scored.Add(float64(n))
			s.scores[i] = 0
			m.bound.Flush()
		}
	}
	if len(s.judged) == 0 {
		return
	}
	for i, m := range s.models {
		d, n := m.def, 0
		d.calibrateRun(i, s.judged)
		b := d.bound
		if lh, ok := m.h.(holder.Lane); ok && b != nil {
			b = lh.Bounder() // a lane's view of a mergeable mam
		}
		for k := range s.judged {
			if j := &s.judged[k]; j.model == i {
				if n == 0 {
					d.judgeMu.Lock()
				}
				d.judgeLocked(j.p, j.pub, j.y, j.raw, b)
				n++
			}
		}
		if n > 0 {
			d.judged() // the quality gauges once per run
			d.judgeMu.Unlock()
			d.met.learned.Add(float64(n))
		}
	}
	s.judged = s.judged[:0]
}

// lateLabel learns from the event a label-only event labels (src: an
// impression, or an item a ranking request showed; raw: the wire label),
// judging the predictions published when it was scored.
func (s *Shard) lateLabel(src joinSource, id, key []byte, raw float64, now int64) {
	j := s.join // the decoder only accepts label-only events with one
	if src == srcRequests {
		j = s.shown
	}
	if j == nil { // shown items are not kept
		s.e.met.labelsUnknown.Inc()
		return
	}
	// Held until the models learned: the slot taken is free to the
	// other lanes' events once it is let go.
	s.jmu.Lock()
	defer s.jmu.Unlock()
	before := j.pending()
	sl, status, dropped := j.take(id, now)
	s.e.joinDropped(src, joinDrops{expired: dropped})
	s.e.joinMoved(src, j.pending()-before)
	switch status {
	case unknownID:
		s.e.met.labelsUnknown.Inc()
		return
	case tooLate:
		s.e.met.labelsLate.Inc()
		return
	}
	s.e.met.labelsJoined.Inc()
	in := &s.in
	if s.e.cfg.Hash != nil {
		in.SetHashed(sl.idx, sl.val, sl.field)
	} else {
		in.SetDense(sl.x)
	}
	for i, m := range s.models {
		y := s.labels[i]
		if m.def.residual {
			y = residualTarget(y, sl.preds[m.def.fallback])
		}
		m.observe(key, m.feed(in, nil, sl.preds), y, true)
		s.judge(i, sl.preds[i], s.labels[i], raw, sl.preds, nil)
	}
	if sl.ope.first {
		s.e.ope.add(sl.ope, s.e.reward(s.labels[s.e.champ.Load()], raw))
	}
}

func (e *Engine) reject(msg *kafka.Message, pub Sink, reason wire.Reason, detail string) {
	c, ok := e.met.rejectedBy[reason]
	if !ok {
		c = e.met.rejected.WithLabelValues(string(reason))
	}
	c.Inc()
	pub.Publish(kafka.Message{
		Topic: e.cfg.DLQTopic,
		Key:   msg.Key,
		Value: msg.Value,
		Headers: []kafka.Header{
			{Key: HeaderReason, Value: []byte(reason)},
			{Key: HeaderDetail, Value: []byte(detail)},
			{Key: HeaderTopic, Value: []byte(msg.Topic)},
			{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(msg.Partition), 10)},
			{Key: HeaderOffset, Value: strconv.AppendInt(nil, msg.Offset, 10)},
		},
	})
}
