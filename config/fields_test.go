package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/streamer/streamer/online"
)

// fieldParams are the parameters of a test type that reads the fields of
// hashed inputs (online.Namespaced), with a list of namespace pairs like
// fm's factorize.
type fieldParams struct {
	Factorize  [][]string `yaml:"factorize"`
	Namespaces []string   `yaml:"namespaces"` // set by SetNamespaces
	set        int        // SetNamespaces calls
}

func (p *fieldParams) SetNamespaces(ns []string) { p.Namespaces, p.set = ns, p.set+1 }

func (p *fieldParams) Validate(int) error {
	var errs []error
	for i, pair := range p.Factorize {
		if len(pair) != 2 {
			errs = append(errs, &online.SpecError{Field: "factorize", Problem: fmt.Sprintf("pair %d: want two namespaces, got %d", i, len(pair))})
		}
	}
	return errors.Join(errs...)
}

var _ online.Namespaced = (*fieldParams)(nil)

// typesWithFields is testTypes and the test type "fieldtest".
var typesWithFields = online.MustRegistry(append(testTypes.Types(), online.Define(online.Def[fieldParams]{
	Name:     "fieldtest",
	Doc:      "test: a model that reads the fields of hashed features",
	Defaults: func() fieldParams { return fieldParams{} },
	Traits:   func(*fieldParams) online.Traits { return online.Traits{Kind: online.Classifier} },
	New: func(int, *fieldParams) (online.Model, error) {
		return nil, errors.New("not built in this test")
	},
	Restore:  func([]byte) (online.Model, error) { return nil, online.ErrFormat },
	Examples: func() []fieldParams { return []fieldParams{{Factorize: [][]string{{"user", "item"}}}} },
}))...)

// TestNamespacedModel: a model key that is a list of lists of strings
// decodes from YAML (and enters the fingerprint); the parameters of a
// model that reads fields get features.namespaces through SetNamespaces
// when features.hash is set, and such a model without features.hash is
// refused; badly shaped lists name the key at fault.
func TestNamespacedModel(t *testing.T) {
	const doc = `
models:
  - name: fm
    type: fieldtest
    factorize: [[user, item], [item, ctx]]
    features:
      hash: {bits: 12}
      namespaces: [user, item, ctx]
`
	c, err := Parse([]byte(doc), nil, typesWithFields)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Models[0].Params.(*fieldParams)
	if want := [][]string{{"user", "item"}, {"item", "ctx"}}; !reflect.DeepEqual(p.Factorize, want) {
		t.Errorf("factorize %q, want %q", p.Factorize, want)
	}
	if want := []string{"user", "item", "ctx"}; p.set != 1 || !slices.Equal(p.Namespaces, want) {
		t.Errorf("SetNamespaces called %d times, namespaces %q, want once with %q", p.set, p.Namespaces, want)
	}
	other, err := Parse([]byte(strings.Replace(doc, "[item, ctx]", "[ctx, item]", 1)), nil, typesWithFields)
	if err != nil {
		t.Fatal(err)
	}
	if c.Models[0].Fingerprint() == other.Models[0].Fingerprint() {
		t.Error("factorize does not change the fingerprint")
	}
	// The flow style and the block style are the same list.
	block, err := Parse([]byte(strings.Replace(doc, "    factorize: [[user, item], [item, ctx]]\n",
		"    factorize:\n      - [user, item]\n      -\n        - item\n        - ctx\n", 1)), nil, typesWithFields)
	if err != nil {
		t.Fatal(err)
	}
	if block.Models[0].Fingerprint() != c.Models[0].Fingerprint() {
		t.Error("block and flow styles differ")
	}
	// No namespaces listed: SetNamespaces still called (with none).
	none, err := Parse([]byte("models:\n  - {name: fm, type: fieldtest, features: {hash: {bits: 12}}}\n"), nil, typesWithFields)
	if err != nil {
		t.Fatal(err)
	}
	if q := none.Models[0].Params.(*fieldParams); q.set != 1 || len(q.Namespaces) != 0 || q.Factorize != nil {
		t.Errorf("without namespaces: %+v", q)
	}
	many := make([]string, online.MaxFields+1)
	for i := range many {
		many[i] = fmt.Sprint("ns", i)
	}
	for _, tc := range []struct{ from, to, want string }{
		{"[[user, item], [item, ctx]]", "user", `models[0].factorize: must be a list of lists of strings, such as [[a, b]], got "user"`},
		{"[[user, item], [item, ctx]]", "{user: item}", "models[0].factorize: must be a list of lists of strings, such as [[a, b]], got a mapping"},
		{"[[user, item], [item, ctx]]", "[[user, item], ctx]", `models[0].factorize[1]: must be a list of strings, such as [a, b], got "ctx"`},
		{"[[user, item], [item, ctx]]", "[[user, item], ~]", "models[0].factorize[1]: must be a list of strings"},
		{"[[user, item], [item, ctx]]", "[[user, [item]]]", "models[0].factorize[0][1]: must be a string, got a list"},
		{"[[user, item], [item, ctx]]", "[[user, item], {a: b}]", "models[0].factorize[1]: must be a list of strings, such as [a, b], got a mapping"},
		{"[[user, item], [item, ctx]]", "[[user, item], [item]]", "models[0].factorize: pair 1: want two namespaces, got 1"},
		{"[user, item, ctx]", "[" + strings.Join(many, ", ") + "]", "models[0].features.namespaces: lists 256 namespaces, at most 255"},
	} {
		_, err := Parse([]byte(strings.Replace(doc, tc.from, tc.to, 1)), nil, typesWithFields)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.to, err, tc.want)
		}
	}
	// A model that does not read fields is not given them.
	if _, err := Parse([]byte(strings.Replace(doc, "    type: fieldtest\n    factorize: [[user, item], [item, ctx]]\n", "    type: logistic\n", 1)), nil, typesWithFields); err != nil {
		t.Errorf("logistic with namespaces: %v", err)
	}
}
