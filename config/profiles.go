package config

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Profile is one entry of the profiles section: an entity the service
// keeps a profile of from the stream (stream/profile), and joins to the
// events and ranking candidates that name it.
type Profile struct {
	Entity string `yaml:"entity"` // its name, e.g. item
	// ID is where an event names the entity: "key" (the message key) or
	// "<namespace>.<name>" of the hashed features, e.g. item.id.
	ID string `yaml:"id"`
	// Namespace is the namespace the profile's values are published in
	// (joined to events and candidates); default <entity>_profile. It
	// must be listed in the features' namespaces.
	Namespace string `yaml:"namespace"`
	// Values are what is published, of count, labels, mean, variance,
	// popularity, bias, factors, reference; default: the first five, and
	// factors and reference when configured.
	Values []string `yaml:"values"`
	// HalfLife decays the popularity (0: a plain count).
	HalfLife time.Duration `yaml:"half_life"`
	// Factors names a global fm model whose factors for the id feature
	// the profile keeps.
	Factors   string           `yaml:"factors"`
	Reference ProfileReference `yaml:"reference"`
	Prior     float64          `yaml:"prior"`    // the mean (and reference median) of an entity with no label
	MaxKeys   int              `yaml:"max_keys"` // profiles in memory per shard; default 100000
	// Candidates: ranking candidates' "item" is this entity's id, and a
	// candidate may come with its id only.
	Candidates bool `yaml:"candidates"`
}

// ProfileReference is profiles[i].reference: the keys whose labels make
// an entity's reference vector (seed 001's reference reviewers).
type ProfileReference struct {
	Keys      []string `yaml:"keys"`
	KeysFile  string   `yaml:"keys_file"`  // one key per line (blank lines and # comments skipped), after keys
	MaxLabels int      `yaml:"max_labels"` // labels kept per reference key for its median; default 1000
}

// Enabled reports whether reference keys are configured.
func (r ProfileReference) Enabled() bool { return len(r.Keys) > 0 || r.KeysFile != "" }

// AllKeys is keys followed by keys_file's.
func (r ProfileReference) AllKeys() ([]string, error) {
	out := slices.Clone(r.Keys)
	if r.KeysFile == "" {
		return out, nil
	}
	f, err := os.Open(r.KeysFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

// IDParts is the namespace and name of a feature id ("", "" for key).
func (p Profile) IDParts() (ns, name string) {
	ns, name, _ = strings.Cut(p.ID, ".")
	return ns, name
}

// Out is the namespace of the profile's values ("" when it publishes
// none).
func (p Profile) Out() string {
	if len(p.PublishedValues()) == 0 {
		return ""
	}
	if p.Namespace != "" {
		return p.Namespace
	}
	return p.Entity + "_profile"
}

// PublishedValues are the values published (Values or the default).
func (p Profile) PublishedValues() []string {
	if p.Values != nil {
		return p.Values
	}
	v := []string{"count", "labels", "mean", "variance", "popularity"}
	if p.Factors != "" {
		v = append(v, "factors")
	}
	if p.Reference.Enabled() {
		v = append(v, "reference")
	}
	return v
}

// profileValues are the values a profile can publish, in their order.
var profileValues = []string{"count", "labels", "mean", "variance", "popularity", "bias", "factors", "reference"}

// DefaultProfileKeys is profiles[i].max_keys's default.
const DefaultProfileKeys = 100_000

func (d *decoder) profiles(c *Config, n *yaml.Node) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf("profiles", n, "must be a list of profiles, got %s", kindName(n))
		return
	}
	for i, item := range n.Content {
		path := fmt.Sprintf("profiles[%d]", i)
		p := Profile{MaxKeys: DefaultProfileKeys}
		d.set(path, item)
		d.mapping(item, path, func(key string, k, v *yaml.Node) {
			kp := join(path, key)
			switch key {
			case "entity":
				d.str(v, kp, &p.Entity)
			case "id":
				d.str(v, kp, &p.ID)
			case "namespace":
				d.str(v, kp, &p.Namespace)
			case "values":
				d.strings(v, kp, &p.Values)
			case "half_life":
				d.duration(v, kp, &p.HalfLife)
			case "factors":
				d.str(v, kp, &p.Factors)
			case "prior":
				d.float(v, kp, &p.Prior)
			case "max_keys":
				d.integer(v, kp, &p.MaxKeys)
			case "candidates":
				d.boolean(v, kp, &p.Candidates)
			case "reference":
				d.set(kp, k)
				d.mapping(v, kp, func(key string, k, v *yaml.Node) {
					rp := join(kp, key)
					switch key {
					case "keys":
						d.strings(v, rp, &p.Reference.Keys)
					case "keys_file":
						d.str(v, rp, &p.Reference.KeysFile)
					case "max_labels":
						d.integer(v, rp, &p.Reference.MaxLabels)
					default:
						d.errorf(rp, k, "unknown key (reference takes: keys, keys_file, max_labels)")
					}
				})
			default:
				d.errorf(kp, k, "unknown key (a profile takes: entity, id, namespace, values, half_life, factors, reference, prior, max_keys, candidates)")
			}
		})
		c.Profiles = append(c.Profiles, p)
	}
}

// profiles checks the profiles section against the models' features.
func (v *validator) profiles(c *Config) {
	if len(c.Profiles) == 0 {
		return
	}
	if len(c.Models) == 0 {
		return
	}
	f0 := c.Models[0].Features
	if f0.Hash == nil {
		v.errorf("profiles", "need hashed features (models[].features.hash): a profile is joined as a namespace of them")
		return
	}
	listed := func(ns string) bool { return slices.Contains(f0.Namespaces, ns) }
	inInteraction := func(ns string) bool {
		return slices.ContainsFunc(f0.Interactions, func(p []string) bool { return slices.Contains(p, ns) })
	}
	entities, outs, idNS := map[string]int{}, map[string]int{}, map[string]int{}
	cands := -1
	for i, p := range c.Profiles {
		path := fmt.Sprintf("profiles[%d]", i)
		switch {
		case !modelNameRE.MatchString(p.Entity):
			v.errorf(path+".entity", "must match %s, got %q", modelNameRE, p.Entity)
		default:
			if j, ok := entities[p.Entity]; ok {
				v.errorf(path+".entity", "%q is also profiles[%d]'s entity", p.Entity, j)
			}
			entities[p.Entity] = i
		}
		ns, name := p.IDParts()
		switch {
		case p.ID == "key":
		case ns == "" || name == "":
			v.errorf(path+".id", `must be "key" (the message key) or <namespace>.<name> of the hashed features (e.g. item.id), got %q`, p.ID)
		default:
			if j, ok := idNS[ns]; ok {
				v.errorf(path+".id", "namespace %q also names profiles[%d]'s entity", ns, j)
			}
			idNS[ns] = i
		}
		if out := p.Out(); len(p.PublishedValues()) > 0 { // values: [] publishes none (a namespace kept for id-only candidates only)
			if j, ok := outs[out]; ok {
				v.errorf(path+".namespace", "%q is also profiles[%d]'s namespace", out, j)
			}
			outs[out] = i
			if !listed(out) {
				v.errorf(path+".namespace", "%q must be listed in models[0].features.namespaces (models take it, or not, by features.use)", out)
			}
			if inInteraction(out) {
				v.errorf(path+".namespace", "%q is in features.interactions: a profile's values join the event after its interactions are crossed", out)
			}
		}
		for j, val := range p.Values {
			if !slices.Contains(profileValues, val) {
				v.errorf(fmt.Sprintf("%s.values[%d]", path, j), "unknown %q (one of %s)", val, strings.Join(profileValues, ", "))
			}
		}
		vals := p.PublishedValues()
		if (slices.Contains(vals, "factors") || slices.Contains(vals, "bias")) && p.Factors == "" {
			v.errorf(path+".values", "publishes the fm's factors or bias, but factors names no fm model")
		}
		if slices.Contains(vals, "reference") && !p.Reference.Enabled() {
			v.errorf(path+".values", "publishes reference, but reference names no keys")
		}
		if p.Factors != "" {
			j := slices.IndexFunc(c.Models, func(m Model) bool { return m.Name == p.Factors })
			switch {
			case j < 0:
				v.errorf(path+".factors", "no model %q", p.Factors)
			case c.Models[j].Type != "fm" || c.Models[j].KeyScoped():
				v.errorf(path+".factors", "model %q is not a global fm", p.Factors)
			case p.ID == "key":
				v.errorf(path+".factors", "needs the entity's id feature (id: <namespace>.<name>), not the message key")
			}
		}
		if p.Reference.Enabled() {
			keys, err := p.Reference.AllKeys()
			switch {
			case err != nil:
				v.errorf(path+".reference.keys_file", "%s", fileError(err))
			case len(keys) == 0:
				v.errorf(path+".reference", "names no keys")
			case len(keys) > 100_000:
				v.errorf(path+".reference", "%d keys, at most 100000", len(keys))
			}
		}
		if p.Reference.MaxLabels < 0 {
			v.errorf(path+".reference.max_labels", "must be ≥ 0 (0 = 1000), got %d", p.Reference.MaxLabels)
		}
		if p.HalfLife < 0 {
			v.errorf(path+".half_life", "must be ≥ 0 (0 = no decay), got %v", p.HalfLife)
		}
		if p.MaxKeys < 1 || p.MaxKeys > 100_000_000 {
			v.errorf(path+".max_keys", "must be in [1, 100000000], got %d", p.MaxKeys)
		}
		if p.Candidates {
			if cands >= 0 {
				v.errorf(path+".candidates", "profiles[%d] already names the candidates", cands)
			}
			cands = i
			if p.ID == "key" {
				v.errorf(path+".candidates", "a candidate's item is an id of the features (id: <namespace>.<name>), not a message key")
			} else if inInteraction(ns) {
				v.errorf(path+".candidates", "namespace %q is in features.interactions: an id-only candidate's namespace joins after the request's interactions are crossed", ns)
			} else if !listed(ns) {
				v.errorf(path+".id", "namespace %q must be listed in models[0].features.namespaces for id-only candidates", ns)
			}
		}
	}
}
