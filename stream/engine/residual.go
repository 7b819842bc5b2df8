package engine

import "github.com/streamer/streamer/online"

// Residual models (NamedModel.Residual): a key-scoped model that corrects
// its fallback, a global regression model, per key — the global model's
// prediction plus the key's own model of what it misses (a global fixed
// effect and per-key random effects, as GLMix has them). The key's
// instance learns y − f(x), f the fallback's prediction published for the
// same event (before the fallback learned it); every prediction of the
// model, published or ranked, is f(x) + its own score. Not its own value:
// an fm clips that to the labels it learned, here the residuals, which do
// not bound the next residual (after one, the clipped value is that
// residual whatever the model says). An instance with no answer yet (an
// empty fm, a refitted model before its first fit) adds 0.

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

// residualSum makes p, model d's own prediction for an event (or an item
// a request shows), the one d publishes: for a residual model with an
// answer, p plus its fallback's prediction for the same input (in preds,
// every model's, indexed as the engine's models); otherwise p as it is.
func (d *modelDef) residualSum(p *online.Prediction, preds []online.Prediction) {
	if d.residual && d.decided(p) {
		addFallback(p, preds[d.fallback])
	}
}

// addFallback adds the fallback's prediction fb to p, a residual model's
// own: the sum of fb's value and p's score is p's score and value.
func addFallback(p *online.Prediction, fb online.Prediction) {
	f := fallbackValue(fb)
	p.Score += f
	if p.HasValue || fb.HasValue {
		p.Value, p.HasValue = p.Score, true
	}
}
