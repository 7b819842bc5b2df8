package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/streamer/streamer/internal/allocs"
)

var reqHashConfig = HashConfig{Bits: 10, Seed: 3, Interactions: [][2]string{{"user", "item"}, {"item", "item"}, {"", "item"}}, MaxFeatures: 64,
	Namespaces: []string{"item", "user"}}

func hashedRequestDecoder(t testing.TB, h HashConfig) *Decoder {
	t.Helper()
	d, err := mustDecoder(t, 1, nil, 0).WithMaxAbs(1e6).WithRequests(100).WithLabelOnly().WithHashing(h)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// combined is the single event whose features object holds the members of
// the objects parts, in order: what a candidate of a hashed request is
// scored as.
func combined(parts ...string) string {
	var in []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p = strings.TrimSpace(p[1 : len(p)-1]); p != "" {
			in = append(in, p)
		}
	}
	return `{"features":{` + strings.Join(in, ",") + `}}`
}

// sameHashed reports whether candidate i of req has exactly (in order, bit
// for bit) the features ev has, fields included.
func sameHashed(req *Event, i int, ev *Event) error {
	idx, val, hash, field := req.CandidateHashed(i)
	if !slices.Equal(idx, ev.Idx) || !slices.Equal(hash, ev.Hash) || len(val) != len(ev.Val) {
		return fmt.Errorf("candidate %d: idx %v hash %v, want %v %v", i, idx, hash, ev.Idx, ev.Hash)
	}
	if !slices.Equal(field, ev.Field) || len(field) != len(idx) {
		return fmt.Errorf("candidate %d: fields %v, want %v", i, field, ev.Field)
	}
	for k := range val {
		if math.Float64bits(val[k]) != math.Float64bits(ev.Val[k]) {
			return fmt.Errorf("candidate %d: val %v, want %v", i, val, ev.Val)
		}
	}
	return nil
}

// TestHashedRequest: a candidate of a hashed ranking request has exactly
// the features of the event whose features object is the request's
// followed by the candidate's, whether the request's features come before
// or after the candidates, with or without them, with a namespace in both.
func TestHashedRequest(t *testing.T) {
	d := hashedRequestDecoder(t, reqHashConfig)
	plain, err := mustDecoder(t, 1, nil, 0).WithMaxAbs(1e6).WithHashing(reqHashConfig)
	if err != nil {
		t.Fatal(err)
	}
	shared := `{"user":{"id":"u42","country":"fr","age":31},"hour":14,"item":{"seen":["a"]}}`
	cands := []string{
		`{"item":{"id":"i1","tags":["sale","new"]}}`,
		`{"item":{"id":"i2","price":9.5},"promo":"x"}`,
		`{}`,
		`{"user":{"segment":"s1"},"item":{"id":"i3"}}`,
	}
	var list []string
	for i, c := range cands {
		list = append(list, fmt.Sprintf(`{"item":"c%d","features":%s}`, i, c))
	}
	candJSON := `[` + strings.Join(list, ",") + `]`
	for _, c := range []struct {
		in         string
		withShared bool
	}{
		{`{"id":"r","key":"u42","features":` + shared + `,"k":2,"candidates":` + candJSON + `}`, true},
		{`{"id":"r","candidates":` + candJSON + `,"features":` + shared + `,"k":2,"key":"u42"}`, true},
		{`{"id":"r","candidates":` + candJSON + `}`, false},
	} {
		in, withShared := c.in, c.withShared
		var ev Event
		if err := d.Decode([]byte(in), &ev); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !ev.IsRequest || len(ev.Cands) != len(cands) {
			t.Fatalf("%s: request %v, %d candidates", in, ev.IsRequest, len(ev.Cands))
		}
		total := 0
		for i, c := range cands {
			if string(ev.Cands[i].Item) != fmt.Sprintf("c%d", i) {
				t.Errorf("candidate %d: item %q", i, ev.Cands[i].Item)
			}
			src := combined(c)
			if withShared {
				src = combined(shared, c)
			}
			var want Event
			if err := plain.Decode([]byte(src), &want); err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			if err := sameHashed(&ev, i, &want); err != nil {
				t.Errorf("%s: %v", in, err)
			}
			total += len(want.Idx)
		}
		if len(ev.Idx) != total {
			t.Errorf("%s: %d entries in Idx, want %d", in, len(ev.Idx), total)
		}
	}
	// The interaction [user, item] crosses the request's user with the
	// candidate's item: candidate 0 has u42 × i1.
	var ev Event
	if err := d.Decode([]byte(`{"features":{"user":{"id":"u42"}},"candidates":[{"item":"a","features":{"item":{"id":"i1"}}}]}`), &ev); err != nil {
		t.Fatal(err)
	}
	idx, val, _, field := ev.CandidateHashed(0)
	got := make([]hpair, len(idx))
	for k := range idx {
		got[k] = hpair{idx[k], val[k], field[k]}
	}
	h := reqHashConfig
	want := []hpair{feat(h, "user", "id=u42", 1), feat(h, "item", "id=i1", 1),
		cross(h, "user", "id=u42", 1, "item", "id=i1", 1), cross(h, "item", "id=i1", 1, "item", "id=i1", 1)}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Without hashing, a request's own features stay a bad request.
	var dense Event
	err = requestDecoder(t, 5).Decode([]byte(`{"features":{"a":1,"b":2},"candidates":[{"item":"x","features":[1,2]}]}`), &dense)
	if err == nil || !strings.Contains(err.Error(), "bad_request") {
		t.Errorf("dense request with features: %v", err)
	}
}

func TestHashedRequestErrors(t *testing.T) {
	d := hashedRequestDecoder(t, HashConfig{Bits: 10, Interactions: [][2]string{{"user", "item"}}, MaxFeatures: 6})
	for _, c := range []struct{ in, want string }{
		{`{"candidates":[{"item":"a","features":[1,2]}]}`, "wrong_type: candidates[0].features: got array, want object (feature hashing is on: {name: value, …})"},
		{`{"candidates":[{"item":"a","features":null}]}`, "missing_features: candidates[0].features is null"},
		{`{"candidates":[{"item":"a","features":"x"}]}`, "wrong_type: candidates[0].features: got string, want object"},
		{`{"candidates":[{"item":"a","features":{"x":1}},{"item":"b","features":{"u":{"v":{}}}}]}`, "wrong_type: candidates[1].features.u.v: got object, want number, string, boolean, null or array of strings (namespaces do not nest)"},
		{`{"candidates":[{"item":"a","features":{"x":1e999}}]}`, "non_finite: candidates[0].features.x: not finite"},
		{`{"candidates":[{"item":"a"}]}`, "missing_features: candidates[0]: no features"},
		{`{"candidates":[{"item":"a","features":{"t":["1","2","3","4","5","6","7"]}}]}`, "too_many_features: candidates[0].features: 7 features, limit 6"},
		// 2 + 2 first-order features and 2 × 2 crossed: 8 > 6.
		{`{"features":{"user":{"a":"1","b":"2"}},"candidates":[{"item":"a","features":{"item":{"c":"3"}}},{"item":"b","features":{"item":{"c":"3","d":"4"}}}]}`,
			"too_many_features: candidates[1]: 8 features with the request's (interactions included), limit 6"},
		// The request's own features beyond the limit.
		{`{"features":{"t":["1","2","3","4","5","6","7"]},"candidates":[{"item":"a","features":{}}]}`, "too_many_features: 7 features, limit 6"},
		{`{"features":{"x":"1"},"label":1,"candidates":[{"item":"a","features":{}}]}`, "bad_request: a ranking request has no label (label its items later, by id and item)"},
	} {
		var ev Event
		err := d.Decode([]byte(c.in), &ev)
		if err == nil || err.Error() != "wire: "+c.want {
			t.Errorf("%s:\n got %v\nwant wire: %s", c.in, err, c.want)
		}
	}
	// Events and label-only events decode as before with the same decoder.
	var ev Event
	if err := d.Decode([]byte(`{"features":{"user":{"a":"1"},"item":{"b":"2"}}}`), &ev); err != nil || ev.IsRequest || len(ev.Idx) != 3 {
		t.Errorf("event: %v %v %v", err, ev.IsRequest, ev.Idx)
	}
	if err := d.Decode([]byte(`{"id":"r","item":"a","label":1}`), &ev); err != nil || ev.HasFeatures || string(ev.Item) != "a" {
		t.Errorf("label-only: %v", err)
	}
}

// hashedRequest100 is a request of n candidates, each an item with an id,
// a category and two tags, for a user with three features.
func hashedRequest100(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":"req-000123","key":"user-42","features":{"user":{"id":"user-42","country":"fr","device":"ios"},"hour":14},"k":10,"candidates":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"item":"item-%d","features":{"item":{"id":"item-%d","category":"c%d","tags":["t%d","t%d"]}}}`, i, i, i%17, i%5, i%11)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestHashedRequestAllocs(t *testing.T) {
	d := hashedRequestDecoder(t, HashConfig{Bits: 18, Seed: 1, Interactions: [][2]string{{"user", "item"}}, MaxFeatures: 64})
	src := hashedRequest100(100)
	var ev Event
	if err := d.Decode(src, &ev); err != nil {
		t.Fatal(err)
	}
	if idx, _, _, _ := ev.CandidateHashed(99); len(idx) != 4+4+3*4 {
		t.Fatalf("%d features, want 20", len(idx))
	}
	if n := allocs.PerRun(50, func() { _ = d.Decode(src, &ev) }); n != 0 {
		t.Errorf("%v allocations per warm Decode, want 0", n)
	}
}

// BenchmarkDecodeHashedRequest100 decodes a ranking request of 100 hashed
// candidates (user namespace shared, item namespace per candidate, the
// user × item interaction: 20 features each, 8 of them hashed strings).
// Target: ≤ 1 µs per candidate, 0 allocations.
func BenchmarkDecodeHashedRequest100(b *testing.B) {
	d := hashedRequestDecoder(b, HashConfig{Bits: 18, Seed: 1, Interactions: [][2]string{{"user", "item"}}, MaxFeatures: 64})
	src := hashedRequest100(100)
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := d.Decode(src, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeHashedRequest checks a hashing request decoder against the
// combination rule: whatever request it accepts, encoding/json parses, and
// every candidate has exactly the features that a hashing decoder gives
// the event whose features object holds the request's "features" members
// then the candidate's (the last member of each name, as encoding/json
// keeps it); a candidate rejected as too_many_features is one whose
// combined event is.
func FuzzDecodeHashedRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"r","features":{"user":{"id":"u1"},"x":2},"candidates":[{"item":"a","features":{"item":{"id":"i1","t":["p","q"]}}},{"item":"b","features":{"item":{"id":"i2"},"user":{"s":1}}}]}`,
		`{"candidates":[{"item":"a","features":{"":{"z":1},"item":{"k":true}}}],"features":{"user":{}}}`,
		`{"candidates":[{"item":"a","features":{"a":1},"features":{"b":2}}],"k":1}`,
		`{"features":{"item":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8"}},"candidates":[{"item":"a","features":{"item":{"i":"9"}}}]}`,
		`{"candidates":[{"item":"a","features":{"user":{"x":1e999}}}]}`,
		`{"candidates":[{"item":"a","features":{}}],"candidates":[{"item":"b","features":{"item":{"q":"1"}}}]}`,
		`{"candidates":[{"item":"a","features":{"ctx":{"d":"x"},"other":{"o":1}}}],"features":{"ctx":{"h":2},"user":{"u":["1"]}}}`,
	} {
		f.Add([]byte(s))
	}
	d := hashedRequestDecoder(f, fuzzHashedConfig)
	plain, err := mustDecoder(f, 1, nil, 0).WithMaxAbs(1e6).WithHashing(fuzzHashedConfig)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var ev Event
		err := d.Decode(in, &ev)
		var m map[string]json.RawMessage
		if json.Unmarshal(in, &m) != nil {
			if err == nil {
				t.Fatalf("Decode accepted %q, not JSON", in)
			}
			return
		}
		var cands []map[string]json.RawMessage
		if json.Unmarshal(m["candidates"], &cands) != nil {
			return // not a request the fuzzer can compare (or not a request)
		}
		shared := "{}"
		if raw, ok := m["features"]; ok && len(raw) > 0 && raw[0] == '{' {
			shared = string(raw)
		}
		if err != nil {
			var we *Error
			if !errors.As(err, &we) || we.Reason != ReasonTooManyFeatures {
				return
			}
			var i int
			if _, e := fmt.Sscanf(we.Detail, "candidates[%d]: ", &i); e != nil || i >= len(cands) {
				return // the request's own or one candidate's features alone
			}
			var want Event
			if err := plain.Decode([]byte(combined(shared, string(cands[i]["features"]))), &want); err == nil ||
				!strings.Contains(err.Error(), string(ReasonTooManyFeatures)) {
				t.Fatalf("%q: %v, but the combined event of candidate %d: %v", in, we, i, err)
			}
			return
		}
		if !ev.IsRequest || len(ev.Cands) != len(cands) {
			t.Fatalf("%q: request %v with %d candidates, encoding/json %d", in, ev.IsRequest, len(ev.Cands), len(cands))
		}
		for i, c := range cands {
			src := combined(shared, string(c["features"]))
			var want Event
			if err := plain.Decode([]byte(src), &want); err != nil {
				t.Fatalf("%q: candidate %d accepted, but %s: %v", in, i, src, err)
			}
			if err := sameHashed(&ev, i, &want); err != nil {
				t.Fatalf("%q: %v", in, err)
			}
		}
	})
}
