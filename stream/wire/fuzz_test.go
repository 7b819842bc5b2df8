package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{"id": "e-1", "key": "user-42", "ts": "2026-11-22T04:00:00Z", "features": [0.12, 3.4, -5e-3], "label": 1}`,
	`{"features":[1,2,3]}`,
	`{"features":{"a":1,"b":2,"c":3},"label":true}`,
	`{"features":{"c":1e308,"a":-0,"b":5e-324},"label":null}`,
	`{"features":[1,2,3],"label":false,"x":{"y":[null,true,"\"]}"]}}`,
	`{"\u0069d":"\ud83d\ude00\n","features":[0.1,0.2,0.3]}`,
	`{"id":"\ud800","features":[1,2,3]}`,
	` {"features" : [ 1 , 2 , 3 ] } `,
	`{"features":[1,2]}`,
	`{"features":[1,2,3,4]}`,
	`{"features":[1,1e999,3]}`,
	`{"features":"1,2,3"}`,
	`{"features":null}`,
	`{"features":[1,2,3],"label":"yes"}`,
	`{"features":[1,2,3]}x`,
	`{"features":[1,2,`,
	`[1,2]`,
	`{"features":[01,2,3]}`,
	`{"id":"a\x","features":[1,2,3]}`,
	`{"features":[1,2,3],"features":{"a":1,"b":2,"c":3}}`,
	`{"a":[[[[[[[[[[]]]]]]]]]],"features":[1.5e+1,2E-1,3]}`,
	"{\"key\":\"\xff\",\"features\":[1,2,3]}",
	``,
	// Short decimals (their own path, shortRun), in arrays and a matrix's rows.
	`{"features":[0.125,-2.5,3.75]}`,
	`{"features":[0.125,-2.5,3.75,10.0,-0.000001,7.5]}`,
	`{"features":[[0.125,-2.5,3.75],[10.0,-0.1,7.5]]}`,
	`{"features":[[0.125,-2.5,3.75] , [ 1e1,-0.1,7.5 ]]}`,
	`{"features":[[0.125,-2.5],[3.75,10.0,-0.1,7.5]]}`,
	`{"features":[[0.125,-2.5,3.75],[10.0,-0.1,7.5],[]]}`,
	`{"features":[[0.125,-2.5,3.75],[10.0,-0.1,7.5,]]}`,
	`{"features":[1.5,7.25,-3.25]}`, // beyond the bound of 5, on the short path
	`{"features":[1.5,-4.99,3.25]}`,
	`{"features":[[1.5,-4.9,3.25],[5.0,-5.5,7.5]]}`,
}

// FuzzDecode checks that Decode never panics, that what it accepts
// encoding/json accepts too as an object with the same features, label and
// strings, and that whatever encoding/json finds valid as an object Decode
// does not call not_json: for a flat array or named features, a 2×3 matrix
// (WithShape) and a bound on the features (WithMaxAbs).
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	dense := mustDecoder(f, 3, nil, 0)
	named := mustDecoder(f, 3, []string{"a", "b", "c"}, 0)
	matrix := mustDecoder(f, 6, nil, 0).WithShape(2)
	bounded := mustDecoder(f, 3, nil, 0).WithMaxAbs(5)
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, d := range []*Decoder{dense, named, matrix, bounded} {
			var ev Event
			err := d.Decode(in, &ev)
			if err != nil {
				var we *Error
				if !errors.As(err, &we) {
					t.Fatalf("%q: error %v is not *Error", in, err)
				}
				if we.Reason == ReasonNotJSON && json.Valid(in) {
					if trimmed := bytes.TrimLeft(in, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
						t.Fatalf("%q: not_json (%v), but encoding/json finds it valid", in, err)
					}
				}
				continue
			}
			checkAgainstEncodingJSON(t, d, in, &ev)
		}
	})
}

func checkAgainstEncodingJSON(t *testing.T, d *Decoder, in []byte, ev *Event) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(in, &m); err != nil {
		t.Fatalf("Decode accepted %q, encoding/json: %v", in, err)
	}
	if len(ev.Features) != d.Dim() {
		t.Fatalf("%q: %d features, want %d", in, len(ev.Features), d.Dim())
	}
	raw := bytes.TrimLeft(m["features"], " \t\r\n")
	var want []float64
	switch {
	case len(raw) > 0 && raw[0] == '[' && d.rows > 0 && bytes.HasPrefix(bytes.TrimLeft(raw[1:], " \t\r\n"), []byte("[")):
		var rows [][]float64
		if err := json.Unmarshal(raw, &rows); err != nil {
			t.Fatalf("%q: features: %v", in, err)
		}
		if len(rows) != d.rows {
			t.Fatalf("%q: accepted %d rows, want %d", in, len(rows), d.rows)
		}
		for _, r := range rows {
			if len(r) != d.dim/d.rows {
				t.Fatalf("%q: accepted a row of %d numbers, want %d", in, len(r), d.dim/d.rows)
			}
			want = append(want, r...)
		}
	case len(raw) > 0 && raw[0] == '[':
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("%q: features: %v", in, err)
		}
	case len(raw) > 0 && raw[0] == '{':
		var byName map[string]float64
		if err := json.Unmarshal(raw, &byName); err != nil {
			t.Fatalf("%q: features: %v", in, err)
		}
		for _, n := range d.names {
			want = append(want, byName[n])
		}
		if len(byName) != len(d.names) {
			t.Fatalf("%q: accepted features %v for names %v", in, byName, d.names)
		}
	default:
		t.Fatalf("%q: accepted features %s", in, raw)
	}
	if len(want) != len(ev.Features) {
		t.Fatalf("%q: features %v, encoding/json %v", in, ev.Features, want)
	}
	for i := range want {
		if math.Float64bits(want[i]) != math.Float64bits(ev.Features[i]) {
			t.Fatalf("%q: features %v, encoding/json %v", in, ev.Features, want)
		}
		if d.maxAbs > 0 && math.Abs(want[i]) > d.maxAbs {
			t.Fatalf("%q: accepted features[%d] = %v beyond ±%v", in, i, want[i], d.maxAbs)
		}
	}

	var label any
	if raw, ok := m["label"]; ok {
		if err := json.Unmarshal(raw, &label); err != nil {
			t.Fatal(err)
		}
	}
	switch l := label.(type) {
	case nil:
		if ev.HasLabel {
			t.Fatalf("%q: label %v, encoding/json null", in, ev.Label)
		}
	case bool:
		if !ev.HasLabel || (ev.Label == 1) != l {
			t.Fatalf("%q: label %v, encoding/json %v", in, ev.Label, l)
		}
	case float64:
		if !ev.HasLabel || ev.Label != l {
			t.Fatalf("%q: label %v, encoding/json %v", in, ev.Label, l)
		}
	default:
		t.Fatalf("%q: accepted label %T", in, l)
	}

	for _, f := range []struct {
		name string
		got  []byte
	}{{"id", ev.ID}, {"key", ev.Key}, {"ts", ev.TS}} {
		var s *string
		if raw, ok := m[f.name]; ok {
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("%q: %s: %v", in, f.name, err)
			}
		}
		if s == nil {
			if f.got != nil || (f.name == "id" && ev.HasID) {
				t.Fatalf("%q: %s = %q, encoding/json null", in, f.name, f.got)
			}
			continue
		}
		// encoding/json replaces invalid UTF-8 by U+FFFD; Decode keeps the bytes.
		if utf8.Valid(f.got) && string(f.got) != *s {
			t.Fatalf("%q: %s = %q, encoding/json %q", in, f.name, f.got, *s)
		}
		if f.name == "id" && !ev.HasID {
			t.Fatalf("%q: HasID false", in)
		}
	}
}
