package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// traitsOf returns the traits of model m (ok false when its type or
// parameters are not known: the validator reports those elsewhere).
func traitsOf(m Model, reg *online.Registry) (online.Traits, bool) {
	if reg == nil || m.Params == nil {
		return online.Traits{}, false
	}
	t := reg.Lookup(m.Type)
	if t == nil || reflect.TypeOf(m.Params) != reflect.PointerTo(t.ParamsType()) {
		return online.Traits{}, false
	}
	return t.Traits(m.Params), true
}

// label checks models[i].label (at p, the model's path) against the
// model's kind: positive for classifiers, edges for ordinal models, m − 1
// of them for m levels; min and max finite, min ≤ max, for any model.
func (v *validator) label(p string, m Model, reg *online.Registry) {
	l := m.Label
	if l.IsZero() {
		return
	}
	for _, b := range []struct {
		key string
		x   *float64
	}{{"min", l.Min}, {"max", l.Max}} {
		if b.x != nil && (math.IsNaN(*b.x) || math.IsInf(*b.x, 0)) {
			v.errorf(p+".label."+b.key, "must be a finite number, got %v", *b.x)
		}
	}
	if l.Min != nil && l.Max != nil && !(*l.Min <= *l.Max) {
		v.errorf(p+".label.max", "is %v, below label.min %v: the labels a model reads are in [min, max]", *l.Max, *l.Min)
	}
	tr, ok := traitsOf(m, reg)
	if !ok {
		return
	}
	if l.Positive != "" {
		if tr.Kind != online.Classifier {
			hint := ""
			if tr.Kind == online.Ordinal {
				hint = "; an ordinal model bins labels with label.edges"
			}
			v.errorf(p+".label.positive", "applies to classifiers; model type %s here is %s model, which reads the label as it is%s", m.Type, aKind(tr.Kind), hint)
		} else if _, err := online.PositiveWhen(l.Positive); err != nil {
			v.errorf(p+".label.positive", "%v (quote it in YAML: positive: \">= 4\")", err)
		}
	}
	if l.Edges == nil {
		return
	}
	ep := p + ".label.edges"
	if tr.Kind != online.Ordinal {
		hint := ""
		if tr.Kind == online.Classifier {
			hint = "; a classifier takes label.positive"
		}
		v.errorf(ep, "applies to ordinal models (omam; lsrrank and mlsrrank with levels); model type %s here is %s model%s", m.Type, aKind(tr.Kind), hint)
		return
	}
	if own := ownEdges(m.Params); len(own) > 0 {
		v.errorf(ep, "does not go with %s.edges (the type's own binning of the labels): give one of them", p)
		return
	}
	if tr.Levels > 0 && len(l.Edges) != tr.Levels-1 {
		v.errorf(ep, "has %d edges; levels %d needs levels − 1 = %d", len(l.Edges), tr.Levels, tr.Levels-1)
		return
	}
	if _, err := online.BinnedBy(l.Edges); err != nil {
		v.errorf(ep, "%v", err)
	}
}

// ownEdges returns the value of the type's own "edges" key (omam's), nil
// when it has none.
func ownEdges(params online.Params) []float64 {
	for _, f := range codec.Fields(reflect.ValueOf(params)) {
		if f.Key == "edges" && f.Value.Kind() == reflect.Slice && f.Value.Type().Elem().Kind() == reflect.Float64 {
			return f.Value.Interface().([]float64)
		}
	}
	return nil
}

// fallbacks checks every models[i].fallback: only with scope key, the name
// of a global model listed before it (models are scored in order, so its
// answer for the event is known), of the same kind and reading labels the
// same way, or, for an ordinal model with label.edges, a regression model
// that publishes values (its value is binned by the edges).
func (v *validator) fallbacks(models []Model, reg *online.Registry) {
	for i, m := range models {
		if m.Residual && m.Fallback == "" {
			v.errorf(fmt.Sprintf("models[%d].residual", i), "needs a fallback: the global model whose prediction this one corrects")
		}
		if m.Fallback == "" {
			continue
		}
		p := fmt.Sprintf("models[%d].fallback", i)
		if !m.KeyScoped() {
			v.errorf(p, "only with scope: key (a global model answers from its own state from the first event)")
			continue
		}
		j := slices.IndexFunc(models, func(o Model) bool { return o.Name == m.Fallback })
		switch {
		case j < 0:
			names := make([]string, len(models))
			for k, o := range models {
				names[k] = o.Name
			}
			v.errorf(p, "%q is not the name of a model of this config (%s)", m.Fallback, list(names))
			continue
		case j == i:
			v.errorf(p, "%q is the model itself", m.Fallback)
			continue
		case j > i:
			v.errorf(p, "%q is models[%d]: a fallback must be listed before the model that falls back on it (models are scored in order)", m.Fallback, j)
			continue
		}
		fb := models[j]
		if fb.KeyScoped() {
			v.errorf(p, "%q has scope key; a fallback must be a global model", m.Fallback)
			continue
		}
		tm, ok1 := traitsOf(m, reg)
		tf, ok2 := traitsOf(fb, reg)
		if !ok1 || !ok2 {
			continue
		}
		if m.Residual && (tf.Kind != online.Regression || (tm.Kind != online.Regression && tm.Kind != online.Ranking)) {
			v.errorf(fmt.Sprintf("models[%d].residual", i), "a residual model is a ranking or regression model that corrects a regression model's prediction; %q is %s model and this one %s model",
				m.Fallback, aKind(tf.Kind), aKind(tm.Kind))
			continue
		}
		switch {
		case tm.Kind == tf.Kind:
			if tm.Kind == online.Ordinal && tm.Levels != tf.Levels {
				v.errorf(p, "%q has %d levels, this model %d; a fallback's levels must be this model's", m.Fallback, tf.Levels, tm.Levels)
			} else if !slices.Equal(m.Label.Edges, fb.Label.Edges) || m.Label.Positive != fb.Label.Positive {
				v.errorf(p, "%q reads labels differently (label: %s; this model's: %s); a fallback must predict what this model predicts",
					m.Fallback, describeLabel(fb.Label), describeLabel(m.Label))
			}
		case tm.Kind == online.Ordinal && m.Label.Edges != nil && tf.Kind == online.Regression && tf.Value:
			// The fallback's value is binned by this model's label.edges.
		case tm.Kind == online.Ranking && tm.Levels == 0 && tf.Kind == online.Regression:
			// A ranker orders by its score; a regression model's score
			// orders the same candidates.
		default:
			v.errorf(p, "%q is %s model (type %s) and this one %s model: a fallback must be of the same kind, or, for an ordinal model with label.edges, a regression model that publishes values (such as fm with the squared loss), whose value the edges bin into a level, or, for a ranking model without levels, a regression model",
				m.Fallback, aKind(tf.Kind), fb.Type, aKind(tm.Kind))
		}
	}
}

// describeLabel writes l for a message.
func describeLabel(l Label) string {
	switch {
	case l.Positive != "":
		return fmt.Sprintf("{positive: %q}", l.Positive)
	case l.Edges != nil:
		return fmt.Sprintf("{edges: %v}", l.Edges)
	}
	return "(not set)"
}

// aKind is the kind's name after "a" or "an".
func aKind(k online.Kind) string {
	if k == online.Ordinal {
		return "an " + k.String()
	}
	return "a " + k.String()
}
