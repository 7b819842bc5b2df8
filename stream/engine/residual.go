package engine

import (
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

// Residual models (NamedModel.Residual): a key-scoped model that corrects
// its fallback, a global regression model, per key — the global model's
// prediction plus the key's own model of what it misses (a global fixed
// effect and per-key random effects, as GLMix has them). The key's
// instance learns y − f(x), f the fallback's prediction published for the
// same event (before the fallback learned it); every prediction of the
// model, published or ranked, is f(x) + its own. An instance with no
// answer yet (an empty fm, a refitted model before its first fit) adds 0.

// fallbackValue is the value of the fallback's prediction p: its value
// when it has one, else its score.
func fallbackValue(p online.Prediction) float64 {
	if p.HasValue {
		return p.Value
	}
	return p.Score
}

// residualTarget is label y of a residual model as its instance learns
// it, given the fallback's prediction fb for the event.
func residualTarget(y float64, fb online.Prediction) float64 { return y - fallbackValue(fb) }

// addFallback adds the fallback's prediction fb to p, a residual model's
// own.
func addFallback(p *online.Prediction, fb online.Prediction) {
	f := fallbackValue(fb)
	p.Score += f
	if p.HasValue {
		p.Value += f
	} else if fb.HasValue {
		p.Value, p.HasValue = p.Score, true
	}
}

// rankResidual adds to the rank model's own predictions of the request's
// candidates (rk.preds, a residual model's) the fallback's, as
// rankFallback scores them.
func (s *Shard) rankResidual(ev *wire.Event, key []byte) {
	rk := s.rk
	d := s.models[s.e.rankIdx].def
	fm := s.models[d.fallback]
	defer unlock(fm.lock(key)) // after the rank model's: the one order of the two
	inst := fm.h.Find(key)
	for i := range rk.preds {
		if !d.decided(&rk.preds[i]) {
			continue
		}
		in, _ := s.candidate(ev, i, key, s.e.cfg.Hash != nil)
		fp, _ := fm.h.Peek(inst, fm.feed(in, nil, nil))
		addFallback(&rk.preds[i], fp)
		rk.score[i] = rk.preds[i].Score
	}
}
