package main

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

const referencePath = "../../configs/streamer.yaml"

// refYAMLKeys lists the dotted keys of a YAML mapping node (list items of
// mappings as "key[].sub"), with their value nodes.
func refYAMLKeys(n *yaml.Node, prefix string, out map[string]*yaml.Node) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		out[path] = v
		switch v.Kind {
		case yaml.MappingNode:
			refYAMLKeys(v, path, out)
		case yaml.SequenceNode:
			for _, item := range v.Content {
				if item.Kind == yaml.MappingNode {
					refYAMLKeys(item, path+"[]", out)
				}
			}
		}
	}
}

// refParamKeys lists the dotted keys of a parameter struct type (items of
// lists of structs as "key[].sub").
func refParamKeys(t reflect.Type, prefix string) []string {
	var out []string
	for _, f := range codec.Fields(reflect.New(t)) {
		k := f.Key
		if prefix != "" {
			k = prefix + "." + k
		}
		out = append(out, k)
		ft := f.Type.Type
		switch {
		case ft.Kind() == reflect.Struct && ft.String() != "time.Duration":
			out = append(out, refParamKeys(ft, k)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, refParamKeys(ft.Elem(), k+"[]")...)
		}
	}
	return out
}

// refParamValue returns the value of the dotted key (no list items) in the
// parameter struct p points to.
func refParamValue(p reflect.Value, key string) (reflect.Value, bool) {
	v := p
	for _, part := range strings.Split(key, ".") {
		i := slices.IndexFunc(codec.Fields(v), func(f codec.Field) bool { return f.Key == part })
		if i < 0 {
			return reflect.Value{}, false
		}
		v = codec.Fields(v)[i].Value
	}
	return v, true
}

// TestReferenceConfig checks configs/streamer.yaml, the reference, against
// the config decoder and the model registry, so that it cannot go stale:
// it loads; every key outside models is in it with its default (but
// snapshot.dir, which it sets); every registered model type has a model in
// it, the models of a type together show every key of the type, and the
// first model of each type shows every key that has a default with that
// default.
func TestReferenceConfig(t *testing.T) {
	types := newModelTypes()
	cfg, err := config.Load(referencePath, nil, types)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	top := map[string]*yaml.Node{}
	refYAMLKeys(doc.Content[0], "", top)

	// Keys outside models, with their defaults.
	def := config.Default()
	for _, ev := range config.EnvVars() {
		if _, ok := top[ev.Key]; !ok {
			t.Errorf("%s: key %s is missing", referencePath, ev.Key)
		}
	}
	got, want := cfg, def
	got.Models, want.Models = nil, nil
	got.Snapshot.Dir = ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: keys outside models differ from the defaults:\n got %+v\nwant %+v", referencePath, got, want)
	}

	// Models: per type, every key, and the defaults in the first model.
	var items []*yaml.Node
	if n := top["models"]; n != nil {
		items = n.Content
	}
	if len(items) != len(cfg.Models) {
		t.Fatalf("%d model nodes, %d models", len(items), len(cfg.Models))
	}
	common := []string{"name", "type", "features", "features.dim", "features.names", "features.standardize", "scope", "max_keys"}
	seen := map[string]map[string]bool{} // type → keys shown
	first := map[string]bool{}
	for i, mc := range cfg.Models {
		keys := map[string]*yaml.Node{}
		refYAMLKeys(items[i], "", keys)
		if seen[mc.Type] == nil {
			seen[mc.Type] = map[string]bool{}
		}
		for k := range keys {
			seen[mc.Type][k] = true
		}
		if i == 0 {
			for _, k := range common {
				if keys[k] == nil {
					t.Errorf("models[0] does not show the common key %s", k)
				}
			}
		}
		if first[mc.Type] {
			continue
		}
		first[mc.Type] = true
		typ := types.Lookup(mc.Type)
		defaults := typ.NewParams()
		if c, ok := defaults.(online.Completer); ok {
			c.Complete(mc.Features.Dim, func(k string) bool { return keys[k] != nil })
		}
		for _, k := range refParamKeys(typ.ParamsType(), "") {
			if strings.Contains(k, "[]") {
				continue
			}
			dv, ok := refParamValue(reflect.ValueOf(defaults), k)
			if !ok || dv.Kind() == reflect.Struct || dv.IsZero() {
				continue // a section, or a key without a default (required or optional)
			}
			gv, _ := refParamValue(reflect.ValueOf(mc.Params), k)
			if !reflect.DeepEqual(gv.Interface(), dv.Interface()) {
				t.Errorf("%s: models[%d] (%s, the first of its type) shows %s = %v; its default is %v", referencePath, i, mc.Name, k, gv, dv)
			}
		}
	}
	for _, typ := range types.Types() {
		shown := seen[typ.Name()]
		if shown == nil {
			t.Errorf("%s: no model of type %s", referencePath, typ.Name())
			continue
		}
		for _, k := range refParamKeys(typ.ParamsType(), "") {
			if !shown[k] {
				t.Errorf("%s: no model of type %s shows its key %s", referencePath, typ.Name(), k)
			}
		}
	}
}
