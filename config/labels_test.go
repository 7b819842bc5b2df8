package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/streamer/streamer/online"
)

// valueParams are the parameters of a test type: a regression model that
// publishes values (Traits.Value), like fm with the squared loss.
type valueParams struct {
	Rate float64 `yaml:"rate"`
}

func (*valueParams) Validate(int) error { return nil }

// typesWithValue is testTypes and a regression type that publishes values.
var typesWithValue = online.MustRegistry(append(testTypes.Types(), online.Define(online.Def[valueParams]{
	Name:     "valuereg",
	Doc:      "test: a regression model that publishes values",
	Defaults: func() valueParams { return valueParams{} },
	Traits:   func(*valueParams) online.Traits { return online.Traits{Kind: online.Regression, Value: true} },
	New: func(int, *valueParams) (online.Model, error) {
		return nil, errors.New("not built in this test")
	},
	Restore:  func([]byte) (online.Model, error) { return nil, online.ErrFormat },
	Examples: func() []valueParams { return []valueParams{{}} },
}))...)

// TestLabel: label.positive and label.edges decode, map as documented and
// enter the fingerprint only when set.
func TestLabel(t *testing.T) {
	c, err := Parse([]byte(`models:
  - {name: r, type: krr, features: {dim: 4}}
  - {name: like, type: logistic, features: {dim: 4}, label: {positive: ">= 4"}}
  - {name: o, type: omam, levels: 5, features: {dim: 4}, label: {edges: [1.5, 2.5, 3.5, 4.5]}}
  - {name: lt, type: mam, features: {dim: 4}, label: {positive: "<0.5"}}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Models[0].LabelMap() != nil {
		t.Error("a model without label has a label map")
	}
	like := c.Models[1].LabelMap()
	for _, tc := range []struct{ v, want float64 }{{0.5, -1}, {3.5, -1}, {4, 1}, {5, 1}} {
		if got := like.Map(tc.v); got != tc.want {
			t.Errorf(">= 4: %v maps to %v, want %v", tc.v, got, tc.want)
		}
	}
	o := c.Models[2].LabelMap()
	for _, tc := range []struct{ v, want float64 }{{0.5, 1}, {1.5, 2}, {2, 2}, {3.5, 4}, {4.5, 5}, {5, 5}} {
		if got := o.Map(tc.v); got != tc.want {
			t.Errorf("edges: %v maps to %v, want %v", tc.v, got, tc.want)
		}
	}
	if got := c.Models[3].LabelMap().Map(0.5); got != -1 {
		t.Errorf("< 0.5: 0.5 maps to %v", got)
	}
	// The fingerprint: unchanged without label, changed by it, and by the
	// condition's meaning rather than its spelling.
	noLabel := c.Models[1]
	noLabel.Label = Label{}
	plain, err := Parse([]byte("models:\n  - {name: like, type: logistic, features: {dim: 4}}\n"), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if noLabel.Fingerprint() != plain.Models[0].Fingerprint() {
		t.Error("clearing label does not give the fingerprint of a model without it")
	}
	if c.Models[1].Fingerprint() == plain.Models[0].Fingerprint() {
		t.Error("label.positive does not change the fingerprint")
	}
	spelled := c.Models[1]
	spelled.Label.Positive = " >=4.0 "
	if spelled.Fingerprint() != c.Models[1].Fingerprint() {
		t.Error(`">= 4" and " >=4.0 " have different fingerprints`)
	}
	other := c.Models[1]
	other.Label.Positive = "> 4"
	if other.Fingerprint() == c.Models[1].Fingerprint() {
		t.Error(`">= 4" and "> 4" have the same fingerprint`)
	}
	fb := c.Models[2]
	fb.Fallback = "o2"
	if fb.Fingerprint() != c.Models[2].Fingerprint() {
		t.Error("fallback changes the fingerprint")
	}
}

// TestLabelRange: label.min and label.max decode for any kind of model,
// alone or with positive or edges, into a map that reads only the labels
// in [min, max]; they leave the fingerprint as it is (a range added to a
// running service keeps the models' state). A bad bound is an error
// naming its key (TestLabelFallbackBad).
func TestLabelRange(t *testing.T) {
	c, err := Parse([]byte(`models:
  - {name: r, type: krr, features: {dim: 4}, label: {min: 0.5, max: 5}}
  - {name: like, type: logistic, features: {dim: 4}, label: {positive: ">= 4", min: 0.5, max: 5}}
  - {name: o, type: omam, levels: 3, features: {dim: 4}, label: {edges: [2, 4], max: 5}}
  - {name: lo, type: krr, features: {dim: 4}, label: {min: 0}}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model int
		v     float64
		want  float64
		ok    bool
	}{
		{0, 0.5, 0.5, true}, {0, 5, 5, true}, {0, 5.5, 0, false}, {0, 1e12, 0, false}, {0, 0.4, 0, false},
		{1, 4, 1, true}, {1, 3.5, -1, true}, {1, 9, 0, false},
		{2, -7, 1, true}, {2, 4.5, 3, true}, {2, 5.5, 0, false},
		{3, 0, 0, true}, {3, 1e12, 1e12, true}, {3, -0.5, 0, false},
	} {
		y, ok := c.Models[tc.model].LabelMap().Read(tc.v)
		if ok != tc.ok || ok && y != tc.want {
			t.Errorf("%s: Read(%v) = %v, %v; want %v, %v", c.Models[tc.model].Name, tc.v, y, ok, tc.want, tc.ok)
		}
	}
	plain, err := Parse([]byte(`models:
  - {name: r, type: krr, features: {dim: 4}}
  - {name: like, type: logistic, features: {dim: 4}, label: {positive: ">= 4"}}
  - {name: o, type: omam, levels: 3, features: {dim: 4}, label: {edges: [2, 4]}}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range plain.Models {
		if c.Models[i].Fingerprint() != m.Fingerprint() {
			t.Errorf("%s: the range changes the fingerprint", m.Name)
		}
	}
}

// TestFallback: a key-scoped model's fallback is a global model listed
// before it, of its kind; an ordinal model with label.edges may fall back
// on a regression model that publishes values.
func TestFallback(t *testing.T) {
	good := []string{
		`[{name: g, type: omam, levels: 3, features: {dim: 2}}, {name: k, type: omam, levels: 3, scope: key, fallback: g, features: {dim: 2}}]`,
		`[{name: g, type: logistic, label: {positive: ">= 4"}, features: {dim: 2}}, {name: k, type: mam, scope: key, fallback: g, label: {positive: ">= 4"}, features: {dim: 2}}]`,
		`[{name: g, type: lsrrank, features: {dim: 2}}, {name: k, type: lsrrank, scope: key, fallback: g, features: {dim: 2}}]`,
		`[{name: g, type: krr, features: {dim: 2}}, {name: k, type: krr, scope: key, fallback: g, features: {dim: 2}}]`,
		`[{name: g, type: valuereg, features: {dim: 2}}, {name: k, type: omam, levels: 3, label: {edges: [2, 4]}, scope: key, fallback: g, features: {dim: 2}}]`,
		`[{name: g, type: omam, levels: 3, label: {edges: [2, 4]}, features: {dim: 2}}, {name: k, type: lsrrank, levels: 3, label: {edges: [2, 4]}, scope: key, fallback: g, features: {dim: 2}}]`,
	}
	for _, models := range good {
		if _, err := Parse([]byte("models: "+models+"\n"), nil, typesWithValue); err != nil {
			t.Errorf("%s: %v", models, err)
		}
	}
}

// TestLabelFallbackBad: every mistake is a *Error naming its key.
func TestLabelFallbackBad(t *testing.T) {
	cases := []struct{ models, key, want string }{
		{`[{name: o, type: omam, levels: 3, label: {positive: ">= 4"}, features: {dim: 2}}]`,
			"models[0].label.positive", "applies to classifiers; model type omam here is an ordinal model, which reads the label as it is; an ordinal model bins labels with label.edges"},
		{`[{name: r, type: krr, label: {positive: ">= 4"}, features: {dim: 2}}]`,
			"models[0].label.positive", "applies to classifiers; model type krr here is a regression model"},
		{`[{name: l, type: logistic, label: {positive: "4"}, features: {dim: 2}}]`,
			"models[0].label.positive", `"4" is not a condition: want an operator (>=, >, <=, <, ==) and a number, e.g. ">= 4"`},
		{`[{name: l, type: logistic, label: {positive: ">= four"}, features: {dim: 2}}]`,
			"models[0].label.positive", `">= four" is not a condition: "four" is not a finite number`},
		{`[{name: l, type: logistic, label: {positive: "> inf"}, features: {dim: 2}}]`,
			"models[0].label.positive", `is not a finite number`},
		{`[{name: l, type: logistic, label: {edges: [1, 2]}, features: {dim: 2}}]`,
			"models[0].label.edges", "applies to ordinal models (omam; lsrrank and mlsrrank with levels); model type logistic here is a classifier model; a classifier takes label.positive"},
		{`[{name: r, type: lsrrank, label: {edges: [1, 2]}, features: {dim: 2}}]`,
			"models[0].label.edges", "model type lsrrank here is a ranking model"},
		{`[{name: o, type: omam, levels: 5, label: {edges: [1, 2]}, features: {dim: 2}}]`,
			"models[0].label.edges", "has 2 edges; levels 5 needs levels − 1 = 4"},
		{`[{name: o, type: omam, levels: 3, label: {edges: [2, 1]}, features: {dim: 2}}]`,
			"models[0].label.edges", "edges must be strictly increasing: 1 after 2"},
		{`[{name: o, type: omam, levels: 3, label: {edges: []}, features: {dim: 2}}]`,
			"models[0].label.edges", "has 0 edges; levels 3 needs levels − 1 = 2"},
		{`[{name: o, type: omam, levels: 3, edges: [1, 2], label: {edges: [1, 2]}, features: {dim: 2}}]`,
			"models[0].label.edges", "does not go with models[0].edges (the type's own binning of the labels): give one of them"},
		{`[{name: o, type: omam, levels: 3, label: {bins: [1, 2]}, features: {dim: 2}}]`,
			"models[0].label.bins", "(label takes: positive, edges, min, max)"},
		{`[{name: r, type: krr, label: {min: 5, max: 0.5}, features: {dim: 2}}]`, "models[0].label.max", "is 0.5, below label.min 5"},
		{`[{name: r, type: krr, label: {min: .nan}, features: {dim: 2}}]`, "models[0].label.min", "must be a finite number"},
		{`[{name: r, type: krr, label: {max: .inf}, features: {dim: 2}}]`, "models[0].label.max", "must be a finite number"},
		{`[{name: r, type: krr, label: {max: five}, features: {dim: 2}}]`, "models[0].label.max", `"five" is not a number`},
		{`[{name: g, type: omam, levels: 3, features: {dim: 2}}, {name: k, type: omam, levels: 3, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", "only with scope: key"},
		{`[{name: k, type: omam, levels: 3, scope: key, fallback: nope, features: {dim: 2}}]`,
			"models[0].fallback", `"nope" is not the name of a model of this config ([k])`},
		{`[{name: k, type: omam, levels: 3, scope: key, fallback: k, features: {dim: 2}}]`,
			"models[0].fallback", `"k" is the model itself`},
		{`[{name: k, type: omam, levels: 3, scope: key, fallback: g, features: {dim: 2}}, {name: g, type: omam, levels: 3, features: {dim: 2}}]`,
			"models[0].fallback", `"g" is models[1]: a fallback must be listed before the model that falls back on it`},
		{`[{name: g, type: omam, levels: 3, scope: key, features: {dim: 2}}, {name: k, type: omam, levels: 3, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" has scope key; a fallback must be a global model`},
		{`[{name: g, type: omam, levels: 4, features: {dim: 2}}, {name: k, type: omam, levels: 3, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" has 4 levels, this model 3`},
		{`[{name: g, type: logistic, features: {dim: 2}}, {name: k, type: logistic, scope: key, fallback: g, label: {positive: ">= 4"}, features: {dim: 2}}]`,
			"models[1].fallback", `"g" reads labels differently (label: (not set); this model's: {positive: ">= 4"})`},
		{`[{name: g, type: logistic, features: {dim: 2}}, {name: k, type: omam, levels: 3, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" is a classifier model (type logistic) and this one an ordinal model: a fallback must be of the same kind`},
		{`[{name: g, type: krr, features: {dim: 2}}, {name: k, type: omam, levels: 3, label: {edges: [2, 4]}, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" is a regression model (type krr) and this one an ordinal model`},
		{`[{name: g, type: logistic, features: {dim: 2}}, {name: k, type: lsrrank, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" is a classifier model (type logistic) and this one a ranking model`},
		{`[{name: g, type: krr, features: {dim: 2}}, {name: k, type: lsrrank, levels: 3, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" is a regression model (type krr) and this one an ordinal model`},
		{`[{name: g, type: valuereg, features: {dim: 2}}, {name: k, type: omam, levels: 3, scope: key, fallback: g, features: {dim: 2}}]`,
			"models[1].fallback", `"g" is a regression model (type valuereg) and this one an ordinal model`},
	}
	for _, tc := range cases {
		_, err := Parse([]byte("models: "+tc.models+"\n"), nil, typesWithValue)
		if err == nil {
			t.Errorf("%s: no error", tc.models)
			continue
		}
		var found bool
		for _, e := range unjoin(err) {
			var ce *Error
			if errors.As(e, &ce) && ce.Key == tc.key && strings.Contains(ce.Error(), tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s:\n got %v\nwant an error on %s containing %q", tc.models, err, tc.key, tc.want)
		}
	}
}

// unjoin returns the errors err joins (err itself if it joins none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestRankingFallsBackOnRegression: a ranking model without levels may
// fall back on a regression model (both order candidates by score).
func TestRankingFallsBackOnRegression(t *testing.T) {
	if _, err := Parse([]byte("models: [{name: g, type: krr, features: {dim: 2}}, {name: k, type: lsrrank, scope: key, fallback: g, features: {dim: 2}}]\n"), nil, typesWithValue); err != nil {
		t.Fatal(err)
	}
}
