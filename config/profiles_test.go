package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// profileModels are hashed models that the profiles below fit.
const profileModels = `
models:
  - {name: rating, type: fm, factors: 4, features: {hash: {bits: 16}, namespaces: [user, item, item_profile, user_profile]}}
  - {name: per_user, type: fm, factors: 0, scope: key, fallback: rating, residual: true, features: {hash: {bits: 16}, namespaces: [user, item, item_profile, user_profile], use: [item_profile]}}
`

// TestProfilesSection: a valid section decodes with its defaults (the
// namespace, the values, max_keys) and the reference keys of keys and
// keys_file.
func TestProfilesSection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "refs.txt")
	if err := os.WriteFile(file, []byte("# reference users\nu3\n\nu4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(`
profiles:
  - {entity: item, id: item.id, candidates: true, factors: rating, reference: {keys: [u1, u2], keys_file: `+file+`}}
  - {entity: user, id: key, values: [count, mean], half_life: 1h}
`+profileModels), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	item, user := c.Profiles[0], c.Profiles[1]
	keys, err := item.Reference.AllKeys()
	if err != nil || !slices.Equal(keys, []string{"u1", "u2", "u3", "u4"}) {
		t.Fatalf("reference keys %v %v", keys, err)
	}
	ns, name := item.IDParts()
	switch {
	case item.Out() != "item_profile" || ns != "item" || name != "id" || item.MaxKeys != DefaultProfileKeys:
		t.Fatalf("item profile %+v", item)
	case !slices.Equal(item.PublishedValues(), []string{"count", "labels", "mean", "variance", "popularity", "factors", "reference"}):
		t.Fatalf("item values %v", item.PublishedValues())
	case user.ID != "key" || !slices.Equal(user.PublishedValues(), []string{"count", "mean"}) || user.HalfLife.Hours() != 1:
		t.Fatalf("user profile %+v", user)
	case !c.Models[1].Residual || !slices.Equal(c.Models[1].Features.Use, []string{"item_profile"}):
		t.Fatalf("per_user %+v", c.Models[1])
	}
}

// TestProfilesBad: every mistake in the profiles section, features.use
// and residual is an error naming its key.
func TestProfilesBad(t *testing.T) {
	cases := []struct{ yaml, key, want string }{
		{`profiles: [{entity: "It em", id: item.id}]`, "profiles[0].entity", "must match"},
		{`profiles: [{entity: item, id: item}]`, "profiles[0].id", `must be "key" (the message key) or <namespace>.<name>`},
		{`profiles: [{entity: item, id: item.id}, {entity: item, id: key}]`, "profiles[1].entity", `"item" is also profiles[0]'s entity`},
		{`profiles: [{entity: item, id: item.id}, {entity: other, id: item.sku}]`, "profiles[1].id", `namespace "item" also names profiles[0]'s entity`},
		{`profiles: [{entity: shop, id: shop.id}]`, "profiles[0].namespace", `"shop_profile" must be listed in models[0].features.namespaces`},
		{`profiles: [{entity: item, id: item.id, values: [count, size]}]`, "profiles[0].values[1]", `unknown "size"`},
		{`profiles: [{entity: item, id: item.id, values: [factors]}]`, "profiles[0].values", "publishes the fm's factors or bias, but factors names no fm model"},
		{`profiles: [{entity: item, id: item.id, values: [reference]}]`, "profiles[0].values", "publishes reference, but reference names no keys"},
		{`profiles: [{entity: item, id: item.id, factors: nope}]`, "profiles[0].factors", `no model "nope"`},
		{`profiles: [{entity: item, id: item.id, factors: per_user}]`, "profiles[0].factors", `model "per_user" is not a global fm`},
		{`profiles: [{entity: user, id: key, factors: rating}]`, "profiles[0].factors", "needs the entity's id feature"},
		{`profiles: [{entity: item, id: item.id, reference: {keys_file: /nonexistent/refs}}]`, "profiles[0].reference.keys_file", "no such file"},
		{`profiles: [{entity: item, id: item.id, half_life: -1s}]`, "profiles[0].half_life", "must be ≥ 0"},
		{`profiles: [{entity: item, id: item.id, max_keys: 0}]`, "profiles[0].max_keys", "must be in [1, 100000000]"},
		{`profiles: [{entity: user, id: key, candidates: true}]`, "profiles[0].candidates", "not a message key"},
		{`profiles: [{entity: item, id: item.id, candidates: true}, {entity: user, id: user.id, candidates: true}]`, "profiles[1].candidates", "profiles[0] already names the candidates"},
		{`profiles: [{entity: item, id: item.id, colour: red}]`, "profiles[0].colour", "unknown key"},
		{`profiles: {entity: item}`, "profiles", "must be a list of profiles"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml+"\n"+profileModels), nil, testTypes)
		checkKeyError(t, tc.yaml, err, tc.key, tc.want)
	}
	for _, tc := range []struct{ models, key, want string }{
		{`[{name: g, type: fm, features: {hash: {bits: 8}, namespaces: [a]}}, {name: k, type: fm, scope: key, residual: true, features: {hash: {bits: 8}, namespaces: [a]}}]`,
			"models[1].residual", "needs a fallback"},
		{`[{name: g, type: logistic, features: {hash: {bits: 8}, namespaces: [a]}}, {name: k, type: logistic, scope: key, fallback: g, residual: true, features: {hash: {bits: 8}, namespaces: [a]}}]`,
			"models[1].residual", "a residual model is a ranking or regression model that corrects a regression model's prediction"},
		{`[{name: g, type: fm, features: {hash: {bits: 8}, namespaces: [a], use: [b]}}]`,
			"models[0].features.use[0]", `"b" is not in features.namespaces`},
		{`[{name: r, type: lsrrank, refit: {on_score: true}, features: {dim: 2}}]`,
			"models[0].refit.on_score", "a global model (refitted in the background) never does"},
	} {
		_, err := Parse([]byte("models: "+tc.models+"\n"), nil, testTypes)
		checkKeyError(t, tc.models, err, tc.key, tc.want)
	}
	// Profiles need hashed features.
	_, err := Parse([]byte("profiles: [{entity: item, id: key}]\nmodels: [{name: m, type: mam, features: {dim: 2}}]\n"), nil, testTypes)
	checkKeyError(t, "dense features", err, "profiles", "need hashed features")
}

// checkKeyError fails unless err holds a *Error on key containing want.
func checkKeyError(t *testing.T, what string, err error, key, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, e := range unjoin(err) {
		var ce *Error
		if errors.As(e, &ce) && ce.Key == key && strings.Contains(ce.Error(), want) {
			return
		}
	}
	t.Errorf("%s:\n got %v\nwant an error on %s containing %q", what, err, key, want)
}
