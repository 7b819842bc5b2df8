package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// hpair is one hashed feature.
type hpair struct {
	idx   int32
	val   float64
	field uint8 // not in String: compared by sameMultiset and ==
}

func (p hpair) String() string { return fmt.Sprintf("%d:%g", p.idx, p.val) }

// refFeatureHash is the documented hash of feature f (name or name=value)
// of namespace ns, written independently of hash.go.
func refFeatureHash(seed uint64, ns, f string) uint64 {
	b := binary.LittleEndian.AppendUint64(nil, seed)
	b = append(b, ns...)
	b = append(b, 0)
	b = append(b, f...)
	return xxhash.Sum64(b)
}

// refCrossHash is the documented hash of the interaction of hashes hi, hj.
func refCrossHash(hi, hj uint64) uint64 {
	b := binary.LittleEndian.AppendUint64(nil, hi)
	b = binary.LittleEndian.AppendUint64(b, hj)
	return xxhash.Sum64(b)
}

// refPair is the (index, signed value) of hash h and value v.
func refPair(bits int, h uint64, v float64) hpair {
	sign := 1.0
	if h>>63 == 1 {
		sign = -1
	}
	return hpair{idx: int32(h & (1<<bits - 1)), val: sign * v}
}

// refField is the documented field of a feature of namespace ns.
func refField(cfg HashConfig, ns string) uint8 {
	if ns == "" {
		return 0
	}
	return uint8(slices.Index(cfg.Namespaces, ns) + 1) // 0 when not listed
}

// refHashed walks a "features" value with encoding/json as the
// documentation of WithHashing describes it, returning the hashed
// features, or the reason and the detail's path of the first defect.
func refHashed(cfg HashConfig, maxAbs float64, raw []byte) ([]hpair, Reason, string) {
	type feat struct {
		ns string
		h  uint64
		v  float64
	}
	var feats []feat
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok := func() json.Token {
		t, err := dec.Token()
		if err != nil {
			panic(fmt.Sprintf("refHashed: %q: %v", raw, err)) // raw is valid JSON
		}
		return t
	}
	switch t := tok().(type) {
	case nil:
		return nil, ReasonMissingFeatures, "features"
	case json.Delim:
		if t != '{' {
			return nil, ReasonWrongType, "features"
		}
	default:
		return nil, ReasonWrongType, "features"
	}
	add := func(ns, f string, v float64) {
		feats = append(feats, feat{ns, refFeatureHash(cfg.Seed, ns, f), v})
	}
	var object func(ns string, top bool) (Reason, string)
	object = func(ns string, top bool) (Reason, string) {
		for dec.More() {
			name := tok().(string)
			path := "features." + name
			if !top {
				path = "features." + ns + "." + name
			}
			switch t := tok().(type) {
			case json.Number:
				v, err := strconv.ParseFloat(string(t), 64)
				if err != nil {
					return ReasonNonFinite, path
				}
				if maxAbs > 0 && math.Abs(v) > maxAbs {
					return ReasonOutOfRange, path
				}
				add(ns, name, v)
			case string:
				add(ns, name+"="+t, 1)
			case bool:
				if t {
					add(ns, name, 1)
				}
			case nil:
			case json.Delim:
				if t == '{' {
					if !top {
						return ReasonWrongType, path
					}
					if r, p := object(name, false); r != "" {
						return r, p
					}
					continue
				}
				for i := 0; dec.More(); i++ {
					s, ok := tok().(string)
					if !ok {
						return ReasonWrongType, path + "[" + strconv.Itoa(i) + "]"
					}
					add(ns, name+"="+s, 1)
				}
				tok() // ']'
			}
		}
		tok() // '}'
		return "", ""
	}
	if r, p := object("", true); r != "" {
		return nil, r, p
	}
	var out []hpair
	for _, f := range feats {
		p := refPair(cfg.Bits, f.h, f.v)
		p.field = refField(cfg, f.ns)
		out = append(out, p)
	}
	for _, in := range cfg.Interactions {
		for _, a := range feats {
			if a.ns != in[0] {
				continue
			}
			for _, b := range feats {
				if b.ns == in[1] {
					out = append(out, refPair(cfg.Bits, refCrossHash(a.h, b.h), a.v*b.v))
				}
			}
		}
	}
	if cfg.MaxFeatures > 0 && len(out) > cfg.MaxFeatures {
		return out, ReasonTooManyFeatures, ""
	}
	return out, "", ""
}

// pairsOf returns the hashed features of ev.
func pairsOf(ev *Event) []hpair {
	out := make([]hpair, len(ev.Idx))
	for i := range ev.Idx {
		out[i] = hpair{ev.Idx[i], ev.Val[i], ev.Field[i]}
	}
	return out
}

// sameMultiset reports whether a and b hold the same pairs, bit for bit,
// in any order.
func sameMultiset(a, b []hpair) bool {
	if len(a) != len(b) {
		return false
	}
	cmp := func(x, y hpair) int {
		if x.idx != y.idx {
			return int(x.idx - y.idx)
		}
		if x.field != y.field {
			return int(x.field) - int(y.field)
		}
		bx, by := math.Float64bits(x.val), math.Float64bits(y.val)
		switch {
		case bx < by:
			return -1
		case bx > by:
			return 1
		}
		return 0
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	for i := range a {
		if cmp(a[i], b[i]) != 0 {
			return false
		}
	}
	return true
}

var fuzzHashedConfig = HashConfig{
	Bits:         8, // small: collisions happen
	Seed:         7,
	Interactions: [][2]string{{"user", "item"}, {"", "user"}, {"item", "item"}},
	MaxFeatures:  64,
	Namespaces:   []string{"ctx", "user", "item"}, // not "other", "u", …: field 0
}

var fuzzHashedSeeds = []string{
	`{"id":"e-1","features":{"price":9.5,"color":"red","tags":["a","b"],"new":true,"old":false,"gone":null,"user":{"id":"u42","country":"fr","age":31},"item":{"id":"i7","cat":["x","y"]}},"label":1}`,
	`{"features":{}}`,
	`{"features":{"user":{}}}`,
	`{"features":{"a":1,"a":"b","a=b":1}}`,
	`{"features":{"user":{"x":1},"user":{"x":2}}}`,
	`{"features":{"\u0075ser":{"n\u00e9":"\ud83d\ude00"},"item":{"k":"\ud800"}}}`,
	`{"features":{"":{"z":2},"user":{"":""}}}`,
	`{"features":[1,2,3]}`,
	`{"features":null}`,
	`{"features":"x"}`,
	`{"features":{"user":{"deep":{"x":1}}}}`,
	`{"features":{"tags":["a",1]}}`,
	`{"features":{"tags":["a",["b"]]}}`,
	`{"features":{"x":1e999}}`,
	`{"features":{"x":-1e7}}`,
	`{"features":{"x":-0,"y":5e-324,"z":1.7976931348623157e308}}`,
	`{"features":{"user":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}}}`,
	`{"features":{"a":1},"features":{"b":2}}`,
	`{"features":{"a":1},"features":[1]}`,
	`{"features":{"a":[1,2],"b":x}}`,
	`{"features":{"a":"b"}`,
	"{\"features\":{\"a\":\"\xff\"}}",
	`{"label":true}`,
	"{\"features\":{\"a\":\t\"b\",\"c\":\n1,\"d\":\r[\"e\"] , \"u\" : { \"x\" :1 ,\"y\":\"z\"} }}",
	`{"features":{"a":"b\"c\\d","c\"d":["\u0000","\t"],"e":"\/"}}`,
	`{"features":{"abcdefghijklmnopqrstuvwxyz":"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789","u":{"é":"ü"}}}`,
	`{"features":{"ctx":{"d":"ios"},"other":{"x":1},"user":{"id":"u"},"ctx":{"h":["1","2"]},"t":true}}`,
}

// FuzzDecodeHashed checks a hashing Decoder against refHashed: whatever it
// accepts, encoding/json parses as an object whose "features" (the last
// one) gives the same multiset of (index, value) pairs; a rejection of the
// features has the reason and path refHashed finds; not_json only for
// what encoding/json finds invalid.
func FuzzDecodeHashed(f *testing.F) {
	for _, s := range fuzzHashedSeeds {
		f.Add([]byte(s))
	}
	base := mustDecoder(f, 1, nil, 0).WithMaxAbs(1e6)
	d, err := base.WithHashing(fuzzHashedConfig)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var ev Event
		err := d.Decode(in, &ev)
		var m map[string]json.RawMessage
		jsonErr := json.Unmarshal(in, &m)
		if err != nil {
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("%q: error %v is not *Error", in, err)
			}
			if we.Reason == ReasonNotJSON {
				if jsonErr == nil {
					t.Fatalf("%q: not_json (%v), but encoding/json parses an object", in, err)
				}
				return
			}
			if jsonErr != nil {
				t.Fatalf("%q: %v, but encoding/json: %v", in, err, jsonErr)
			}
			raw, ok := m["features"]
			if ok && we.Reason == ReasonTooManyFeatures && topLevelCount(in, "features") == 1 {
				want, reason, _ := refHashed(fuzzHashedConfig, 1e6, raw)
				if reason != ReasonTooManyFeatures || !strings.HasPrefix(we.Detail, fmt.Sprintf("%d features,", len(want))) {
					t.Fatalf("%q: %v, reference %d features, %q", in, err, len(want), reason)
				}
				return
			}
			if !ok || !strings.HasPrefix(we.Detail, "features") || topLevelCount(in, "features") != 1 {
				return // another field's defect, or a repeated features member
			}
			_, reason, path := refHashed(fuzzHashedConfig, 1e6, raw)
			if reason != we.Reason || !strings.HasPrefix(we.Detail, path) {
				if utf8.Valid(in) || reason != we.Reason {
					t.Fatalf("%q: %v, reference %s at %s", in, err, reason, path)
				}
			}
			return
		}
		if jsonErr != nil {
			t.Fatalf("Decode accepted %q, encoding/json: %v", in, jsonErr)
		}
		if len(ev.Features) != 0 {
			t.Fatalf("%q: dense features %v with hashing", in, ev.Features)
		}
		raw, ok := m["features"]
		if !ok {
			t.Fatalf("%q: accepted without features", in)
		}
		want, reason, path := refHashed(fuzzHashedConfig, 1e6, raw)
		if reason != "" {
			t.Fatalf("%q: accepted, reference %s at %s", in, reason, path)
		}
		if len(ev.Hash) != len(ev.Idx) || len(ev.Field) != len(ev.Idx) {
			t.Fatalf("%q: %d hashes and %d fields for %d indices", in, len(ev.Hash), len(ev.Field), len(ev.Idx))
		}
		for k, h := range ev.Hash {
			if int32(h&(1<<fuzzHashedConfig.Bits-1)) != ev.Idx[k] {
				t.Fatalf("%q: hash %d is %x, index %d", in, k, h, ev.Idx[k])
			}
		}
		got := pairsOf(&ev)
		if len(got) != len(want) {
			t.Fatalf("%q: %d features, reference %d", in, len(got), len(want))
		}
		// encoding/json replaces invalid UTF-8 by U+FFFD; Decode hashes the bytes.
		if utf8.Valid(in) && !sameMultiset(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", in, got, want)
		}
	})
}

// topLevelCount counts the members of the JSON object in that are named
// name (after unescaping).
func topLevelCount(in []byte, name string) int {
	dec := json.NewDecoder(bytes.NewReader(in))
	if _, err := dec.Token(); err != nil {
		return 0
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return 0
		}
		if k == name {
			n++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0
		}
	}
	return n
}
