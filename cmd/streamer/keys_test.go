package main

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// The keys of a models entry besides the common ones belong to the model
// type. These tests check, over every registered type (a type added later
// is covered by being registered), that a key is refused, with an error
// naming it by its full path and line, wherever it does not apply: keys of
// other types, and keys of the type that do not apply in the configuration
// given.

// minimalKeys returns, for every registered type, the fewest keys of its
// first example configuration (online.Def.Examples) that a valid minimal
// config needs besides name, type and features.dim (omam: levels; mlsrrank:
// a kernel): derived from the type, so a type added later needs nothing
// here.
func minimalKeys(t *testing.T, reg *online.Registry) map[string][]keyEntry {
	t.Helper()
	out := map[string][]keyEntry{}
	for _, typ := range reg.Types() {
		keys := exampleEntries(typ)
		valid := func(es []keyEntry) bool {
			_, err := config.Parse([]byte(modelKeyDoc(typ.Name(), es...).yaml), nil, reg)
			return err == nil
		}
		if !valid(keys) {
			t.Fatalf("%s: its first example, as YAML, is not a valid config: %s", typ.Name(), modelKeyDoc(typ.Name(), keys...).yaml)
		}
		for i := len(keys) - 1; i >= 0; i-- { // drop every key it does not need
			rest := append(slices.Clone(keys[:i]), keys[i+1:]...)
			if valid(rest) {
				keys = rest
			}
		}
		out[typ.Name()] = keys
	}
	return out
}

// exampleEntries writes the leaves of a type's first example that differ
// from its defaults as key entries.
func exampleEntries(typ *online.Type) []keyEntry {
	var out []keyEntry
	var walk func(ex, def reflect.Value, prefix string)
	walk = func(ex, def reflect.Value, prefix string) {
		df := map[string]reflect.Value{}
		if def.IsValid() {
			for _, f := range codec.Fields(def) {
				df[f.Key] = f.Value
			}
		}
		for _, f := range codec.Fields(ex) {
			path, v, d := prefix+f.Key, f.Value, df[f.Key]
			switch {
			case v.Kind() == reflect.Struct && v.Type() != reflect.TypeOf(time.Duration(0)):
				walk(v, d, path+".")
			case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
				for i := range v.Len() {
					walk(v.Index(i), reflect.Value{}, fmt.Sprintf("%s[%d].", path, i))
				}
			case d.IsValid() && reflect.DeepEqual(v.Interface(), d.Interface()), !d.IsValid() && v.IsZero():
			case v.Kind() == reflect.Slice:
				var items []string
				for i := range v.Len() {
					items = append(items, fmt.Sprint(v.Index(i).Interface()))
				}
				out = append(out, keyEntry{path, "[" + strings.Join(items, ", ") + "]"})
			case v.Type() == reflect.TypeOf(time.Duration(0)):
				out = append(out, keyEntry{path, v.Interface().(time.Duration).String()})
			default:
				out = append(out, keyEntry{path, fmt.Sprint(v.Interface())})
			}
		}
	}
	walk(reflect.ValueOf(typ.Examples()[0]), reflect.ValueOf(typ.NewParams()), "")
	return out
}

// keyEntry is a key of a models entry (dotted, list items as "kernels[0].v")
// and its YAML value.
type keyEntry struct{ key, value string }

// paramKey is a key of some type's parameters.
type paramKey struct {
	path  string // "kernel.gamma", "kernels", "kernels[0].v"
	value string // a YAML value of the key's shape
}

// paramKeysOf lists the keys of the parameter struct v, recursively: a
// nested struct is its key and its keys ("kernel", "kernel.gamma"), a list
// of structs its key and its items' keys ("kernels", "kernels[0].gamma").
func paramKeysOf(t *testing.T, v reflect.Value, prefix string) []paramKey {
	t.Helper()
	var out []paramKey
	for _, f := range codec.Fields(v) {
		path := prefix + f.Key
		ft := f.Value.Type()
		switch {
		case ft == reflect.TypeOf(time.Duration(0)):
			out = append(out, paramKey{path, "1s"})
		case ft.Kind() == reflect.Struct:
			out = append(out, paramKey{path, "{}"})
			out = append(out, paramKeysOf(t, f.Value, path+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, paramKey{path, "[]"})
			out = append(out, paramKeysOf(t, reflect.New(ft.Elem()).Elem(), path+"[0].")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			out = append(out, paramKey{path, "[a, b]"})
		case ft == reflect.TypeOf([][]string(nil)):
			out = append(out, paramKey{path, "[[a, b]]"})
		case ft.Kind() == reflect.Slice:
			out = append(out, paramKey{path, "[1, 2]"})
		case ft.Kind() == reflect.Bool:
			out = append(out, paramKey{path, "true"})
		case ft.Kind() == reflect.String:
			out = append(out, paramKey{path, "x"})
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
			out = append(out, paramKey{path, "3"})
		case ft.Kind() == reflect.Float32 || ft.Kind() == reflect.Float64:
			out = append(out, paramKey{path, "0.5"})
		default:
			t.Fatalf("%s: no YAML value for %v", path, ft)
		}
	}
	return out
}

// keysByType returns the keys of every registered type, by type name, and
// their union in first-seen order.
func keysByType(t *testing.T, reg *online.Registry) (map[string]map[string]bool, []paramKey) {
	t.Helper()
	byType := map[string]map[string]bool{}
	var union []paramKey
	seen := map[string]bool{}
	for _, typ := range reg.Types() {
		p := typ.NewParams()
		if got := reflect.TypeOf(p); got != reflect.PointerTo(typ.ParamsType()) {
			t.Fatalf("%s: NewParams gives %v, ParamsType is %v", typ.Name(), got, typ.ParamsType())
		}
		keys := map[string]bool{}
		for _, k := range paramKeysOf(t, reflect.ValueOf(p), "") {
			if top, _, _ := strings.Cut(k.path, "."); slices.Contains([]string{"name", "type", "features", "scope", "max_keys"}, top) {
				t.Errorf("%s: parameter key %s is a key every model has", typ.Name(), k.path)
			}
			keys[k.path] = true
			if !seen[k.path] {
				seen[k.path] = true
				union = append(union, k)
			}
		}
		byType[typ.Name()] = keys
	}
	return byType, union
}

// keyNode is a key of the YAML document being built.
type keyNode struct {
	key      string
	value    string // a leaf's YAML value; "" for a mapping or a list
	children []*keyNode
	line     int
}

func (n *keyNode) child(key string) *keyNode {
	for _, c := range n.children {
		if c.key == key {
			return c
		}
	}
	c := &keyNode{key: key}
	n.children = append(n.children, c)
	return c
}

// keySegments splits "kernels[0].gamma" into kernels, [0], gamma.
func keySegments(path string) []string {
	var out []string
	for _, s := range strings.Split(path, ".") {
		if i := strings.Index(s, "["); i > 0 {
			out = append(out, s[:i], s[i:])
			continue
		}
		out = append(out, s)
	}
	return out
}

// keyDoc is a config with one model: its YAML and the line of each key.
type keyDoc struct {
	yaml  string
	lines map[string]int // key path under the model -> line
}

// modelKeyDoc writes a config whose one model has type typ, features.dim 2
// and the entries, in block style: every key on its own line.
func modelKeyDoc(typ string, entries ...keyEntry) keyDoc {
	root := &keyNode{}
	for _, e := range entries {
		n := root
		for _, s := range keySegments(e.key) {
			n = n.child(s)
		}
		n.value = e.value
	}
	lines := []string{"models:", "  - name: m", "    type: " + typ, "    features:", "      dim: 2"}
	var render func(n *keyNode, indent int)
	render = func(n *keyNode, indent int) {
		pad := strings.Repeat(" ", indent)
		for _, c := range n.children {
			lines = append(lines, pad+c.key+":")
			c.line = len(lines)
			switch {
			case c.value != "":
				lines[c.line-1] += " " + c.value
			case len(c.children) > 0 && strings.HasPrefix(c.children[0].key, "["):
				for _, item := range c.children {
					start := len(lines)
					render(item, indent+4)
					if len(lines) == start {
						lines = append(lines, pad+"    {}")
					}
					lines[start] = pad + "  - " + strings.TrimLeft(lines[start], " ")
					item.line = start + 1
				}
			default:
				render(c, indent+2)
			}
		}
	}
	render(root, 4)
	d := keyDoc{yaml: strings.Join(lines, "\n") + "\n", lines: map[string]int{}}
	var index func(n *keyNode, path string)
	index = func(n *keyNode, path string) {
		for _, c := range n.children {
			p := c.key
			switch {
			case strings.HasPrefix(c.key, "["):
				p = path + c.key
			case path != "":
				p = path + "." + c.key
			}
			d.lines[p] = c.line
			index(c, p)
		}
	}
	index(root, "")
	return d
}

// faultyKey returns the key an error about key must name for a type with
// keys: key's shortest prefix that is not one of them ("kernel" for
// "kernel.gamma" when the type has no kernel), "" if key is the type's.
func faultyKey(key string, keys map[string]bool) string {
	for i := 0; i < len(key); i++ {
		if i+1 == len(key) || key[i+1] == '.' || key[i+1] == '[' {
			p := key[:i+1]
			if strings.HasSuffix(p, "]") {
				continue
			}
			if !keys[p] {
				return p
			}
		}
	}
	return ""
}

// wantKeyError checks that parsing d fails with an error naming
// models[0].key at the line of key.
func wantKeyError(t *testing.T, reg *online.Registry, d keyDoc, key string) {
	t.Helper()
	line, ok := d.lines[key]
	if !ok {
		t.Fatalf("no line for %s in\n%s", key, d.yaml)
	}
	_, err := config.Parse([]byte(d.yaml), nil, reg)
	if err == nil {
		t.Fatalf("no error; want one naming models[0].%s (line %d) for\n%s", key, line, d.yaml)
	}
	named := regexp.MustCompile(`models\[0\]\.` + regexp.QuoteMeta(key) + `[":\s]`)
	at := fmt.Sprintf("(line %d)", line)
	for _, l := range strings.Split(err.Error(), "\n") {
		if named.MatchString(l) && strings.Contains(l, at) {
			return
		}
	}
	t.Fatalf("error\n  %v\ndoes not name models[0].%s %s; config:\n%s", err, key, at, d.yaml)
}

// wantValidKeys checks that d parses.
func wantValidKeys(t *testing.T, reg *online.Registry, d keyDoc) {
	t.Helper()
	if _, err := config.Parse([]byte(d.yaml), nil, reg); err != nil {
		t.Fatalf("a valid config is refused: %v\n%s", err, d.yaml)
	}
}

// TestModelKeysMinimal: each type's minimal config (name, type,
// features.dim and minimalKeys) is valid, the control of every case below.
func TestModelKeysMinimal(t *testing.T) {
	reg := newModelTypes()
	if len(reg.Types()) == 0 {
		t.Fatal("no model types registered")
	}
	minimal := minimalKeys(t, reg)
	for _, typ := range reg.Types() {
		t.Run(typ.Name(), func(t *testing.T) {
			wantValidKeys(t, reg, modelKeyDoc(typ.Name(), minimal[typ.Name()]...))
			t.Logf("minimal keys: %v", minimal[typ.Name()])
		})
	}
}

// TestModelKeysOfOtherTypes: every key of any registered type, set on a
// model of a type that does not have it, is an error naming the key (its
// shortest prefix the type does not have: "models[0].kernel" for
// kernel.gamma on a type without a kernel, "models[0].kernel.seed" on a
// kernel without a seed) and its line.
func TestModelKeysOfOtherTypes(t *testing.T) {
	reg := newModelTypes()
	minimal := minimalKeys(t, reg)
	byType, union := keysByType(t, reg)
	for _, k := range []string{"kernel", "kernel.gamma", "kernel.seed", "kernels", "kernels[0].v", "refit.guard", "window.events", "decay.half_life", "levels"} {
		if !slices.ContainsFunc(union, func(p paramKey) bool { return p.path == k }) {
			t.Errorf("the union of the types' keys lacks %s: the walk over the parameters is broken", k)
		}
	}
	cases := 0
	for _, typ := range reg.Types() {
		name, keys := typ.Name(), byType[typ.Name()]
		for _, k := range union {
			want := faultyKey(k.path, keys)
			if want == "" {
				continue
			}
			cases++
			t.Run(name+"/"+k.path, func(t *testing.T) {
				d := modelKeyDoc(name, append(slices.Clone(minimal[name]), keyEntry{k.path, k.value})...)
				wantKeyError(t, reg, d, want)
			})
		}
	}
	// The cases the brief spelled out are among them.
	for _, c := range []struct{ typ, key string }{{"svm", "kernel.seed"}, {"svm", "kernel.features"}, {"lsrrank", "refit.guard"}, {"logistic", "kernel"}} {
		if keys := byType[c.typ]; keys != nil && keys[c.key] {
			t.Errorf("%s is a key of %s", c.key, c.typ)
		}
	}
	if cases == 0 {
		t.Fatal("no cases")
	}
}

// TestModelKeysThatDoNotApply: keys of a type that must not be given in
// some configurations of it. Each case's config without the key is valid
// (the control); with it, it is an error naming the key and its line.
func TestModelKeysThatDoNotApply(t *testing.T) {
	reg := newModelTypes()
	minimal := minimalKeys(t, reg)
	byType, _ := keysByType(t, reg)
	type tcase struct {
		typ  string
		base []keyEntry // with minimalKeys: a valid config
		key  keyEntry   // the key that does not apply
	}
	var cases []tcase
	add := func(typ string, key keyEntry, base ...keyEntry) {
		if reg.Lookup(typ) == nil {
			return
		}
		cases = append(cases, tcase{typ, append(slices.Clone(minimal[typ]), base...), key})
	}
	// svm's kernel is exact (LIBSVM's): it has no random features.
	add("svm", keyEntry{"kernel.seed", "3"})
	add("svm", keyEntry{"kernel.features", "128"})
	add("svm", keyEntry{"kernel.seed", "3"}, keyEntry{"kernel.type", "rbf"})
	// lsrrank and krr: random features only with solver features.
	for _, typ := range []string{"lsrrank", "krr"} {
		add(typ, keyEntry{"kernel.features", "128"})
		add(typ, keyEntry{"kernel.seed", "3"})
		add(typ, keyEntry{"kernel.features", "128"}, keyEntry{"solver", "exact"})
		add(typ, keyEntry{"kernel.seed", "3"}, keyEntry{"solver", "exact"})
		add(typ, keyEntry{"kernel.features", "128"}, keyEntry{"solver", "features"}, keyEntry{"kernel.type", "linear"})
	}
	// The ranking types have no guard.
	for _, typ := range []string{"lsrrank", "krr", "mlsrrank"} {
		add(typ, keyEntry{"refit.guard", "0.1"})
	}
	// mam and omam: the polynomial kernel has no random-feature map (it
	// needs budget > 0), the exact kernel mode (budget > 0) no random
	// features or seed.
	for _, typ := range []string{online.MAMName, online.OMAMName} {
		add(typ, keyEntry{"kernel.type", "polynomial"})
		add(typ, keyEntry{"kernel.features", "128"}, keyEntry{"budget", "10"})
		add(typ, keyEntry{"kernel.seed", "3"}, keyEntry{"budget", "10"})
		add(typ, keyEntry{"kernel.features", "128"}, keyEntry{"budget", "10"}, keyEntry{"kernel.type", "laplacian"})
		add(typ, keyEntry{"kernel.seed", "3"}, keyEntry{"budget", "10"}, keyEntry{"kernel.type", "linear"})
	}
	for _, typ := range reg.Types() {
		name, keys := typ.Name(), byType[typ.Name()]
		// The linear kernel has no parameters: every type with a kernel
		// that can be linear refuses them.
		if keys["kernel.type"] {
			for _, k := range []keyEntry{{"kernel.gamma", "0.5"}, {"kernel.features", "128"}, {"kernel.seed", "3"}, {"kernel.degree", "3"}, {"kernel.coef0", "0.5"}} {
				if keys[k.key] {
					add(name, k, keyEntry{"kernel.type", "linear"})
				}
			}
		}
		// Window and decay are two ways of forgetting: one at a time.
		if keys["window.events"] && keys["decay.half_life"] {
			add(name, keyEntry{"decay.half_life", "50"}, keyEntry{"window.events", "100"})
		}
	}
	// Where the keys do apply, they are accepted: the conditions above are
	// the conditions.
	applies := map[string][][]keyEntry{
		online.MAMName: {
			{{"kernel.type", "polynomial"}, {"budget", "10"}},
			{{"kernel.type", "rbf"}, {"kernel.features", "128"}, {"kernel.seed", "3"}},
		},
		online.OMAMName: {{{"kernel.type", "polynomial"}, {"budget", "10"}}},
		"lsrrank":       {{{"solver", "features"}, {"kernel.features", "128"}, {"kernel.seed", "3"}}},
		"krr":           {{{"solver", "features"}, {"kernel.features", "128"}, {"kernel.seed", "3"}}},
		"svm":           {{{"refit.guard", "0.2"}}},
	}
	for _, typ := range reg.Types() {
		if keys := byType[typ.Name()]; keys["window.events"] && keys["decay.half_life"] {
			applies[typ.Name()] = append(applies[typ.Name()], []keyEntry{{"window.events", "100"}}, []keyEntry{{"decay.half_life", "50"}})
		}
	}
	for typ, configs := range applies {
		if reg.Lookup(typ) == nil {
			continue
		}
		for _, c := range configs {
			wantValidKeys(t, reg, modelKeyDoc(typ, append(slices.Clone(minimal[typ]), c...)...))
		}
	}

	for _, c := range cases {
		var base []string
		for _, e := range c.base {
			base = append(base, e.key+"="+e.value)
		}
		t.Run(fmt.Sprintf("%s/%s/%s", c.typ, strings.Join(base, ","), c.key.key), func(t *testing.T) {
			wantValidKeys(t, reg, modelKeyDoc(c.typ, c.base...))
			want := c.key.key
			if !byType[c.typ][want] {
				want = faultyKey(want, byType[c.typ]) // not a key of the type at all
			}
			wantKeyError(t, reg, modelKeyDoc(c.typ, append(slices.Clone(c.base), c.key)...), want)
		})
	}
}
