package engine

import (
	"fmt"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

// Fallbacks. A key-scoped model's instance for a new key has no answer of
// its own at first: an empty classifier scores 0, an ordinal model has no
// level before its thresholds are fitted, a refitted model has no version
// before its first fit, a model that publishes values (fm) has none before
// it learns a label. With NamedModel.Fallback, such a key's record carries
// the answer of a global model listed before it instead — its score,
// prediction, probability, certainty and "expected", published for the
// same event — with "fallback" naming it. A fallback is of the same kind,
// or, for an ordinal model with label edges (NamedModel.Label), a
// regression model that publishes values: its value is binned by the
// edges into a level (and its interval into levels), and is the record's
// "expected". The model's prequential metrics judge what it published;
// its calibration window takes only its own decided pairs.

// decided reports whether p, the model's own prediction, is an answer
// rather than "no decision": a classifier's non-zero score or class, an
// ordinal model's level, a ranking or regression model's score once a
// refitted model has a version and a model that publishes values has one.
func (d *modelDef) decided(p *online.Prediction) bool {
	switch d.traits.Kind {
	case online.Classifier:
		return p.Label != 0 || p.Score != 0
	case online.Ordinal:
		return p.Label != 0
	}
	if d.traits.Value && !p.HasValue {
		return false
	}
	return !d.traits.Refitted || p.Version != 0
}

// published returns the prediction the model published when its own was
// p and the models' predictions for the event were preds: p, or when p is
// no decision the fallback's (binned into a level for an ordinal model
// falling back on a regression model's value).
func (d *modelDef) published(p online.Prediction, preds []online.Prediction) online.Prediction {
	if d.fallback < 0 || d.decided(&p) {
		return p
	}
	return d.fromFallback(preds[d.fallback])
}

// fromFallback is the fallback's prediction fp as the model publishes it:
// fp, or binned into a level for an ordinal model on a regression model's
// value.
func (d *modelDef) fromFallback(fp online.Prediction) online.Prediction {
	if d.fbBins == nil {
		return fp
	}
	level := 0
	if fp.HasValue {
		level = d.fbBins.Level(fp.Value)
	}
	return online.Prediction{Score: fp.Score, Label: level, N: fp.N, Version: fp.Version, Value: fp.Value, HasValue: fp.HasValue}
}

// rankFallback scores the candidates of request ev for key with the rank
// model's (d's) fallback, when the key's own instance has an answer for none of
// them (rk.preds): rk.own keeps the own predictions (the join buffer's),
// rk.preds and rk.score become the fallback's. It returns the fallback's
// name and version.
func (s *Shard) rankFallback(ev *wire.Event, key []byte, d *modelDef) (name string, version int64) {
	rk := s.rk
	fm := s.models[d.fallback]
	defer unlock(fm.lock(key)) // after the rank model's: the one order of the two
	inst := fm.h.Find(key)
	rk.own = append(rk.own[:0], rk.preds...)
	for i := range rk.preds {
		in, _ := s.candidate(ev, i, key, s.e.cfg.Hash != nil)
		var p online.Prediction
		p, version = fm.h.Peek(inst, fm.feed(in, nil, nil))
		p = d.fromFallback(p)
		rk.preds[i], rk.score[i] = p, p.Score
	}
	return fm.def.name, version
}

// undecided reports whether the rank model's own predictions rk.preds are
// all "no decision".
func (rk *rankScratch) undecided(d *modelDef) bool {
	for i := range rk.preds {
		if d.decided(&rk.preds[i]) {
			return false
		}
	}
	return true
}

// ownPred is the rank model's own prediction for candidate c.
func (rk *rankScratch) ownPred(c int) online.Prediction {
	if rk.fellBack {
		return rk.own[c]
	}
	return rk.preds[c]
}

// fallBack gives the record of each key-scoped model that has no
// decision for the event its fallback's answer (Shard.ApplyAt's phase
// after the calibration): the fallback is a global model, whose record
// is its own.
func (s *Shard) fallBack() {
	for i, m := range s.models {
		if d := m.def; !s.decided[i] && d.fallback >= 0 {
			d.fallbackRecord(&s.recs[i], &s.recs[d.fallback])
		}
	}
}

// fallbackRecord makes r, the record of key-scoped model d whose key has
// no answer yet, the fallback's record for the same event (fb, which the
// shard kept), marked with the fallback's name.
func (d *modelDef) fallbackRecord(r, fb *wire.Score) {
	*r = *fb
	r.Model, r.Fallback = d.name, fb.Model
	if d.fbBins == nil {
		return
	}
	// An ordinal model on a regression model's value: the level of the
	// value, which is the label expected; the interval's ends binned the
	// same way (a monotone map: a label inside the value's interval has
	// its level inside the levels').
	r.HasValue, r.Prediction, r.HasExpected = false, 0, false
	if !fb.HasValue {
		r.HasInterval = false
		return
	}
	r.Prediction = d.fbBins.Level(fb.Value)
	r.Expected, r.HasExpected = fb.Value, true
	if r.HasInterval {
		r.IntLower, r.IntUpper = float64(d.fbBins.Level(fb.IntLower)), float64(d.fbBins.Level(fb.IntUpper))
	}
}

// checkFallbacks resolves every model's Fallback to its index in models
// (-1: none): a global model before it, of its kind, or for an ordinal
// model with label edges a regression model that publishes values.
func checkFallbacks(models []NamedModel) ([]int, error) {
	idx := make([]int, len(models))
	for i, nm := range models {
		idx[i] = -1
		if nm.Residual && nm.Fallback == "" {
			return nil, fmt.Errorf("stream: model %s: residual needs a fallback", nm.Name)
		}
		if nm.Fallback == "" {
			continue
		}
		j := -1
		for k := range i {
			if models[k].Name == nm.Fallback {
				j = k
			}
		}
		switch {
		case nm.Factory == nil:
			return nil, fmt.Errorf("stream: model %s: a fallback needs a key-scoped model", nm.Name)
		case j < 0:
			return nil, fmt.Errorf("stream: model %s: fallback %q is not a model before it", nm.Name, nm.Fallback)
		case models[j].Factory != nil:
			return nil, fmt.Errorf("stream: model %s: fallback %s is key-scoped; it must be global", nm.Name, nm.Fallback)
		}
		tm, tf := kindOf(nm), kindOf(models[j])
		if nm.Residual && (tf.Kind != online.Regression || (tm.Kind != online.Regression && tm.Kind != online.Ranking)) {
			return nil, fmt.Errorf("stream: model %s (%s): residual: fallback %s is a %s model, want a ranking or regression model on a regression one", nm.Name, tm.Kind, nm.Fallback, tf.Kind)
		}
		switch {
		case tm.Kind == tf.Kind:
		case tm.Kind == online.Ordinal && nm.Label.Edges() != nil && tf.Kind == online.Regression && tf.Value:
		case tm.Kind == online.Ranking && tm.Levels == 0 && tf.Kind == online.Regression: // ordered by score alike
		default:
			return nil, fmt.Errorf("stream: model %s (%s): fallback %s is a %s model", nm.Name, tm.Kind, nm.Fallback, tf.Kind)
		}
		idx[i] = j
	}
	return idx, nil
}

// kindOf returns nm's traits with the zero kind read as the engine reads
// it: a classifier.
func kindOf(nm NamedModel) online.Traits {
	t := nm.Traits
	if t.Kind == 0 {
		t.Kind = online.Classifier
	}
	return t
}
