package wire

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/streamer/streamer/internal/allocs"
)

var testNames = []string{"age", "clicks", "score"}

func TestDecodeRejects(t *testing.T) {
	dense := mustDecoder(t, 3, nil, 0)
	named := mustDecoder(t, 3, testNames, 0)
	small := mustDecoder(t, 3, nil, 64)
	bounded, boundedNamed := dense.WithMaxAbs(1e6), named.WithMaxAbs(1e6)
	for _, tc := range []struct {
		name   string
		d      *Decoder
		in     string
		reason Reason
		detail string // substring of Detail, if set
	}{
		{"oversize", small, `{"features":[1,2,3],"id":"` + strings.Repeat("x", 64) + `"}`, ReasonTooLarge, "limit 64"},

		{"huge finite feature", bounded, `{"features":[1,1.797e308,3]}`, ReasonOutOfRange, "features[1]: 1.797e+308 is beyond ±1e+06"},
		{"huge negative feature", bounded, `{"features":[1,2,-2e6]}`, ReasonOutOfRange, "features[2]"},
		{"huge named feature", boundedNamed, `{"features":{"age":1,"clicks":-5e300,"score":3}}`, ReasonOutOfRange, "features.clicks"},

		{"empty", dense, ``, ReasonNotJSON, "empty input"},
		{"blank", dense, " \n\t", ReasonNotJSON, "empty input"},
		{"plain text", dense, `hello`, ReasonNotJSON, `want a JSON object, found "hello"`},
		{"not null", dense, `nope`, ReasonNotJSON, `found "nope"`}, // not "null" for its first byte
		{"top-level array", dense, `[1,2]`, ReasonNotJSON, `found "[1,2]"`},
		{"top-level string", dense, `"features"`, ReasonNotJSON, `found "\"features\""`},
		{"top-level null", dense, `null`, ReasonNotJSON, `found "null"`},
		{"truncated", dense, `{"id":"e-1","features":[1,2,`, ReasonNotJSON, ""},
		{"truncated in string", dense, `{"id":"e-`, ReasonNotJSON, "unterminated string"},
		{"truncated after key", dense, `{"id"`, ReasonNotJSON, "':'"},
		{"unclosed object", dense, `{"features":[1,2,3]`, ReasonNotJSON, "unterminated object"},
		{"trailing garbage", dense, `{"features":[1,2,3]}x`, ReasonNotJSON, "trailing"},
		{"two objects", dense, `{"features":[1,2,3]}{}`, ReasonNotJSON, "trailing"},
		{"trailing comma", dense, `{"features":[1,2,3],}`, ReasonNotJSON, "object key"},
		{"trailing comma in array", dense, `{"features":[1,2,3,]}`, ReasonNotJSON, ""},
		{"single quotes", dense, `{'features':[1,2,3]}`, ReasonNotJSON, "object key"},
		{"unquoted key", dense, `{features:[1,2,3]}`, ReasonNotJSON, "object key"},
		{"NaN literal", dense, `{"features":[1,NaN,3]}`, ReasonNotJSON, ""},
		{"Infinity literal", dense, `{"features":[1,2,Infinity]}`, ReasonNotJSON, ""},
		{"leading zero", dense, `{"features":[01,2,3]}`, ReasonNotJSON, ""},
		{"leading plus", dense, `{"features":[+1,2,3]}`, ReasonNotJSON, ""},
		{"bare dot", dense, `{"features":[.5,2,3]}`, ReasonNotJSON, ""},
		{"dangling dot", dense, `{"features":[1.,2,3]}`, ReasonNotJSON, ""},
		{"dangling exponent", dense, `{"features":[1e,2,3]}`, ReasonNotJSON, ""},
		{"hex number", dense, `{"features":[0x10,2,3]}`, ReasonNotJSON, ""},
		{"lone minus", dense, `{"features":[-,2,3]}`, ReasonNotJSON, ""},
		{"bad escape", dense, `{"id":"a\x","features":[1,2,3]}`, ReasonNotJSON, "escape"},
		{"short unicode escape", dense, `{"id":"\u12","features":[1,2,3]}`, ReasonNotJSON, `\u`},
		{"raw newline in string", dense, "{\"id\":\"a\nb\",\"features\":[1,2,3]}", ReasonNotJSON, "control"},
		{"bad literal", dense, `{"label":tru,"features":[1,2,3]}`, ReasonNotJSON, "true"},
		{"bad nested unknown", dense, `{"x":{"a":[1,2},"features":[1,2,3]}`, ReasonNotJSON, ""},
		{"semantic error then truncation", dense, `{"features":"abc","id":`, ReasonNotJSON, ""},
		{"bad value after semantic error", dense, `{"features":[1,"a",3],"x":[}`, ReasonNotJSON, ""},
		{"wrong type then bad array", dense, `{"features":[1,"a",3,}`, ReasonNotJSON, ""},
		{"too deep", dense, `{"x":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `,"features":[1,2,3]}`, ReasonNotJSON, "deep"},

		{"features string", dense, `{"features":"1,2,3"}`, ReasonWrongType, "features: got string"},
		{"features number", dense, `{"features":1}`, ReasonWrongType, "features: got number"},
		{"features bool", dense, `{"features":true}`, ReasonWrongType, "features: got boolean"},
		{"features object unconfigured", dense, `{"features":{"a":1}}`, ReasonWrongType, "no feature names"},
		{"feature abc", dense, `{"features":[1,"abc",3]}`, ReasonWrongType, "features[1]: not a number (got string)"},
		{"feature null", dense, `{"features":[1,2,null]}`, ReasonWrongType, "features[2]"},
		{"feature nested array", dense, `{"features":[[1],2,3]}`, ReasonWrongType, "features[0]"},
		{"named feature string", named, `{"features":{"age":"3","clicks":1,"score":2}}`, ReasonWrongType, "features.age"},
		{"id number", dense, `{"id":17,"features":[1,2,3]}`, ReasonWrongType, "id: got number, want string"},
		{"key object", dense, `{"key":{},"features":[1,2,3]}`, ReasonWrongType, "key: got object"},
		{"ts number", dense, `{"ts":1732248000,"features":[1,2,3]}`, ReasonWrongType, "ts: got number"},
		{"label yes", dense, `{"features":[1,2,3],"label":"yes"}`, ReasonWrongType, "label: got string"},
		{"label array", dense, `{"features":[1,2,3],"label":[1]}`, ReasonWrongType, "label: got array"},
		{"first semantic error wins", dense, `{"id":1,"features":[1,2]}`, ReasonWrongType, "id"},

		{"no features", dense, `{"id":"e-1","label":1}`, ReasonMissingFeatures, "no features field"},
		{"empty object", dense, `{}`, ReasonMissingFeatures, ""},
		{"features null", dense, `{"features":null}`, ReasonMissingFeatures, "null"},
		{"features misspelt", dense, `{"Features":[1,2,3]}`, ReasonMissingFeatures, ""},
		{"named missing one", named, `{"features":{"age":1,"score":2}}`, ReasonMissingFeatures, `missing "clicks"`},
		{"named missing all", named, `{"features":{}}`, ReasonMissingFeatures, `missing "age" and 2 more`},

		{"too few", dense, `{"features":[1,2]}`, ReasonWrongDimension, "got 2 features, want 3"},
		{"too many", dense, `{"features":[1,2,3,4]}`, ReasonWrongDimension, "got 4 features, want 3"},
		{"empty array", dense, `{"features":[]}`, ReasonWrongDimension, "got 0 features, want 3"},
		{"named unknown", named, `{"features":{"age":1,"clicks":2,"score":3,"height":4}}`, ReasonWrongDimension, `unknown feature "height"`},

		{"NaN as 1e999", dense, `{"features":[1,1e999,3]}`, ReasonNonFinite, "features[1]: not finite"},
		{"-Inf as -1e400", dense, `{"features":[-1e400,2,3]}`, ReasonNonFinite, "features[0]"},
		{"named non-finite", named, `{"features":{"age":1,"clicks":2,"score":1E+309}}`, ReasonNonFinite, "features.score"},
		{"label overflow", dense, `{"features":[1,2,3],"label":-2e308}`, ReasonNonFinite, "label: not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			err := tc.d.Decode([]byte(tc.in), &ev)
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("Decode(%.80q) = %v, want *Error %s", tc.in, err, tc.reason)
			}
			if we.Reason != tc.reason || !strings.Contains(we.Detail, tc.detail) {
				t.Errorf("Decode(%.80q) = %v, want reason %s with detail containing %q", tc.in, err, tc.reason, tc.detail)
			}
			if !errors.Is(err, &Error{Reason: tc.reason}) || ReasonOf(err) != tc.reason {
				t.Errorf("errors.Is/ReasonOf do not match %s", tc.reason)
			}
			if want := "wire: " + string(tc.reason) + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	dense := mustDecoder(t, 3, nil, 0)
	named := mustDecoder(t, 3, testNames, 0)
	for _, tc := range []struct {
		name     string
		d        *Decoder
		in       string
		features []float64
		label    float64
		hasLabel bool
		id       string
		hasID    bool
		key, ts  string
	}{
		{name: "full", d: dense,
			in:       `{"id": "e-1", "key": "user-42", "ts": "2026-11-22T04:00:00Z", "features": [0.12, 3.4, -5e-3], "label": 1}`,
			features: []float64{0.12, 3.4, -5e-3}, label: 1, hasLabel: true, id: "e-1", hasID: true, key: "user-42", ts: "2026-11-22T04:00:00Z"},
		{name: "features only", d: dense, in: `{"features":[1,2,3]}`, features: []float64{1, 2, 3}},
		{name: "label true", d: dense, in: `{"features":[1,2,3],"label":true}`, features: []float64{1, 2, 3}, label: 1, hasLabel: true},
		{name: "label false", d: dense, in: `{"features":[1,2,3],"label":false}`, features: []float64{1, 2, 3}, label: 0, hasLabel: true},
		{name: "label null", d: dense, in: `{"features":[1,2,3],"label":null}`, features: []float64{1, 2, 3}},
		{name: "label minus one", d: dense, in: `{"label":-1,"features":[1,2,3]}`, features: []float64{1, 2, 3}, label: -1, hasLabel: true},
		{name: "label ordinal", d: dense, in: `{"label":4.0,"features":[1,2,3]}`, features: []float64{1, 2, 3}, label: 4, hasLabel: true},
		{name: "id null", d: dense, in: `{"id":null,"key":null,"ts":null,"features":[1,2,3]}`, features: []float64{1, 2, 3}},
		{name: "id empty", d: dense, in: `{"id":"","features":[1,2,3]}`, features: []float64{1, 2, 3}, hasID: true},
		{name: "whitespace everywhere", d: dense,
			in:       " \r\n\t{ \"id\" \t:\n\"a\" ,\r\n \"features\" : [ 1 , \t2\n,3 ] , \"label\" : true } \n",
			features: []float64{1, 2, 3}, label: 1, hasLabel: true, id: "a", hasID: true},
		{name: "unknown nested fields", d: dense,
			in:       `{"meta":{"a":[1,{"b":[[],{}]},"x\"}"],"c":null,"d":{"e":{"f":true}}},"features":[1,2,3],"tags":["x","y"],"n":-0.5e+10,"ok":false}`,
			features: []float64{1, 2, 3}},
		{name: "unknown field with brackets in string", d: dense, in: `{"s":"]}{[","features":[1,2,3]}`, features: []float64{1, 2, 3}},
		{name: "number forms", d: dense, in: `{"features":[-0,1E2,2.5e-3]}`, features: []float64{math.Copysign(0, -1), 100, 0.0025}},
		{name: "underflow is zero", d: dense, in: `{"features":[1e-400,5e-324,-1e-400]}`, features: []float64{0, 5e-324, math.Copysign(0, -1)}},
		{name: "max float", d: dense, in: `{"features":[1.7976931348623157e308,-1.7976931348623157e308,0]}`, features: []float64{math.MaxFloat64, -math.MaxFloat64, 0}},
		{name: "escaped field name", d: dense, in: `{"\u0069d":"x","feat\u0075res":[1,2,3]}`, features: []float64{1, 2, 3}, id: "x", hasID: true},
		{name: "duplicate features last wins", d: dense, in: `{"features":[1,2,3],"features":[4,5,6]}`, features: []float64{4, 5, 6}},
		{name: "named", d: named, in: `{"features":{"score":3,"age":1,"clicks":2}}`, features: []float64{1, 2, 3}},
		{name: "named escaped name", d: named, in: `{"features":{"sc\u006fre":3,"age":1,"clicks":2}}`, features: []float64{1, 2, 3}},
		{name: "named repeated last wins", d: named, in: `{"features":{"age":9,"clicks":2,"score":3,"age":1}}`, features: []float64{1, 2, 3}},
		{name: "named config accepts arrays", d: named, in: `{"features":[1,2,3]}`, features: []float64{1, 2, 3}},
		{name: "invalid utf8 kept", d: dense, in: "{\"key\":\"\xff\xfe\",\"features\":[1,2,3]}", features: []float64{1, 2, 3}, key: "\xff\xfe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := Event{ID: []byte("stale"), HasID: true, Label: 7, HasLabel: true, Key: []byte("stale"), TS: []byte("stale")}
			if err := tc.d.Decode([]byte(tc.in), &ev); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(ev.Features) != len(tc.features) {
				t.Fatalf("features = %v, want %v", ev.Features, tc.features)
			}
			for i, v := range tc.features {
				if math.Float64bits(ev.Features[i]) != math.Float64bits(v) {
					t.Errorf("features = %v, want %v", ev.Features, tc.features)
					break
				}
			}
			if ev.Label != tc.label || ev.HasLabel != tc.hasLabel {
				t.Errorf("label = %v,%v, want %v,%v", ev.Label, ev.HasLabel, tc.label, tc.hasLabel)
			}
			if string(ev.ID) != tc.id || ev.HasID != tc.hasID {
				t.Errorf("id = %q,%v, want %q,%v", ev.ID, ev.HasID, tc.id, tc.hasID)
			}
			if string(ev.Key) != tc.key || string(ev.TS) != tc.ts {
				t.Errorf("key, ts = %q, %q, want %q, %q", ev.Key, ev.TS, tc.key, tc.ts)
			}
		})
	}
}

func TestDecodeStringEscapes(t *testing.T) {
	d := mustDecoder(t, 1, nil, 0)
	for _, tc := range []struct{ in, want string }{
		{`plain`, "plain"},
		{`\"quoted\"`, `"quoted"`},
		{`back\\slash`, `back\slash`},
		{`a\/b`, "a/b"},
		{`\b\f\n\r\t`, "\b\f\n\r\t"},
		{`\u0041\u00e9\u20AC`, "Aé€"},
		{`\u0000`, "\x00"},
		{`\ud83d\ude00 grin`, "😀 grin"},
		{`\uD834\uDD1E`, "𝄞"},
		{`lone \ud83d high`, "lone \ufffd high"},
		{`lone \ude00 low`, "lone \ufffd low"},
		{`high then escape \ud83d\n`, "high then escape \ufffd\n"},
		{`two highs \ud83d\ud83d\ude00`, "two highs \ufffd😀"},
		{`raw ünïcödé 😀`, "raw ünïcödé 😀"},
		{``, ""},
	} {
		in := `{"id":"` + tc.in + `","key":"` + tc.in + `","ts":"` + tc.in + `","features":[0]}`
		var ev Event
		if err := d.Decode([]byte(in), &ev); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
			continue
		}
		var ref struct{ ID string }
		if err := json.Unmarshal([]byte(in), &ref); err != nil {
			t.Fatal(err)
		}
		if string(ev.ID) != tc.want || string(ev.Key) != tc.want || string(ev.TS) != tc.want || ref.ID != tc.want {
			t.Errorf("%s: id %q key %q ts %q encoding/json %q, want %q", tc.in, ev.ID, ev.Key, ev.TS, ref.ID, tc.want)
		}
	}
}

// TestDecodeReuse checks that decoding into the same Event resets it and that
// ID, Key and TS do not alias the source bytes.
func TestDecodeReuse(t *testing.T) {
	d := mustDecoder(t, 2, nil, 0)
	var ev Event
	src := []byte(`{"id":"first","key":"k1","ts":"t1","features":[1,2],"label":1}`)
	if err := d.Decode(src, &ev); err != nil {
		t.Fatal(err)
	}
	clear(src) // the caller may recycle the message buffer
	if string(ev.ID) != "first" || string(ev.Key) != "k1" || string(ev.TS) != "t1" {
		t.Fatalf("after clearing src: id %q key %q ts %q", ev.ID, ev.Key, ev.TS)
	}
	if err := d.Decode([]byte(`{"features":[3,4]}`), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.HasID || ev.ID != nil || ev.Key != nil || ev.TS != nil || ev.HasLabel || ev.Label != 0 {
		t.Fatalf("not reset: %+v", ev)
	}
	if ev.Features[0] != 3 || ev.Features[1] != 4 {
		t.Fatalf("features = %v", ev.Features)
	}
}

// TestNewDecoderErrors: bad construction arguments are errors naming the
// problem, not panics (an engine with dimension 0 fails to start).
func TestNewDecoderErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		dim   int
		names []string
		max   int
		want  string
	}{
		"zero dim":        {0, nil, 0, "dimension 0 < 1"},
		"negative max":    {1, nil, -1, "maximum message size -1 < 0"},
		"names count":     {2, []string{"a"}, 0, "1 feature names for dimension 2"},
		"duplicate names": {2, []string{"a", "a"}, 0, `duplicate feature name "a"`},
		"empty name":      {2, []string{"a", ""}, 0, "feature name 1 is empty"},
	} {
		d, err := NewDecoder(tc.dim, tc.names, tc.max)
		if d != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v; want an error containing %q", name, d, err, tc.want)
		}
	}
}

// mustDecoder is NewDecoder for valid arguments.
func mustDecoder(t testing.TB, dim int, names []string, maxBytes int) *Decoder {
	t.Helper()
	d, err := NewDecoder(dim, names, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// randNumber returns a random JSON number literal of the kinds seen in
// practice and at the edges: short decimals, long mantissas, exponents,
// subnormals and values near the overflow threshold.
func randNumber(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(2) == 0 {
		b.WriteByte('-')
	}
	switch r.IntN(6) {
	case 0: // shortest round-trip form of a random finite float64
		for {
			v := math.Float64frombits(r.Uint64())
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				return strconv.FormatFloat(math.Abs(v), 'g', -1, 64)
			}
		}
	case 1: // integer
		b.WriteString(strconv.FormatUint(r.Uint64()>>r.IntN(64), 10))
		return b.String()
	}
	// decimal with up to 25 significant digits and an optional exponent
	b.WriteByte(byte('1' + r.IntN(9)))
	if r.IntN(3) == 0 {
		b.Reset()
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		b.WriteByte('0')
	}
	if r.IntN(4) != 0 {
		b.WriteByte('.')
		for range 1 + r.IntN(25) {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
	}
	if r.IntN(2) == 0 {
		b.WriteByte("eE"[r.IntN(2)])
		if r.IntN(2) == 0 {
			b.WriteByte("+-"[r.IntN(2)])
		}
		if r.IntN(2) == 0 {
			b.WriteString(strconv.Itoa(r.IntN(30))) // around the fast path's limit
		} else {
			b.WriteString(strconv.Itoa(r.IntN(330)))
		}
	}
	return b.String()
}

// TestDecodeNumbersMatchStrconv checks that every feature is bit-for-bit what
// strconv.ParseFloat returns for its literal, or non_finite where strconv
// overflows.
func TestDecodeNumbersMatchStrconv(t *testing.T) {
	const dim = 16
	r := rand.New(rand.NewPCG(1, 2))
	d := mustDecoder(t, dim, nil, 0)
	var ev Event
	lits := make([]string, dim)
	for range 5000 {
		for i := range lits {
			lits[i] = randNumber(r)
		}
		in := `{"features":[` + strings.Join(lits, ",") + `]}`
		err := d.Decode([]byte(in), &ev)
		overflow := -1
		for i, l := range lits {
			if v, _ := strconv.ParseFloat(l, 64); math.IsInf(v, 0) {
				overflow = i
				break
			}
		}
		if overflow >= 0 {
			if want := "features[" + strconv.Itoa(overflow) + "]"; ReasonOf(err) != ReasonNonFinite || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: err %v, want non_finite at %s", in, err, want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		for i, l := range lits {
			want, _ := strconv.ParseFloat(l, 64)
			if math.Float64bits(ev.Features[i]) != math.Float64bits(want) {
				t.Fatalf("%s: features[%d] = %v, strconv %v", l, i, ev.Features[i], want)
			}
		}
	}
}

// TestDecodeFastPathEdges compares the number fast path with strconv around
// its limits: 2^53, 19 digits and exponents ±22.
func TestDecodeFastPathEdges(t *testing.T) {
	mants := []string{"0", "1", "9", "123456789", "9007199254740991", "9007199254740992",
		"9007199254740993", "18014398509481984", "1234567890123456789", "12345678901234567890",
		"9999999999999999999", "0.1", "0.3", "0.000001", "4.9406564584124654", "2.2250738585072014",
		"1.7976931348623157", "00001"[4:], "1.00000000000000000000000000001"}
	d := mustDecoder(t, 1, nil, 0)
	var ev Event
	for _, m := range mants {
		for e := -40; e <= 40; e++ {
			for _, sign := range []string{"", "-"} {
				lit := sign + m + "e" + strconv.Itoa(e)
				want, _ := strconv.ParseFloat(lit, 64)
				if err := d.Decode([]byte(`{"features":[`+lit+`]}`), &ev); err != nil {
					t.Fatalf("%s: %v", lit, err)
				}
				if math.Float64bits(ev.Features[0]) != math.Float64bits(want) {
					t.Fatalf("%s: got %v, strconv %v", lit, ev.Features[0], want)
				}
			}
		}
	}
}

type refEvent struct {
	ID       string    `json:"id"`
	Key      string    `json:"key,omitempty"`
	TS       string    `json:"ts,omitempty"`
	Features []float64 `json:"features"`
	Label    any       `json:"label,omitempty"`
	Extra    any       `json:"extra,omitempty"`
}

func randString(r *rand.Rand) string {
	const alphabet = "abcXYZ019 -_.:/\\\"'<>&\x00\x01\x1f\x7féü€😀\u2028"
	rs := []rune(alphabet)
	n := r.IntN(20)
	out := make([]rune, n)
	for i := range out {
		out[i] = rs[r.IntN(len(rs))]
	}
	return string(out)
}

// TestDecodeRoundTrip marshals random valid events with encoding/json and
// decodes them back.
func TestDecodeRoundTrip(t *testing.T) {
	const dim = 8
	r := rand.New(rand.NewPCG(3, 4))
	d := mustDecoder(t, dim, nil, 0)
	var ev Event
	for range 3000 {
		ref := refEvent{ID: randString(r), Key: randString(r), TS: randString(r), Features: make([]float64, dim)}
		for i := range ref.Features {
			switch r.IntN(3) {
			case 0:
				ref.Features[i] = r.NormFloat64()
			case 1:
				ref.Features[i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(600)-300))
			default:
				for {
					v := math.Float64frombits(r.Uint64())
					if !math.IsNaN(v) && !math.IsInf(v, 0) {
						ref.Features[i] = v
						break
					}
				}
			}
		}
		var wantLabel float64
		switch r.IntN(4) {
		case 0:
			ref.Label, wantLabel = true, 1
		case 1:
			ref.Label, wantLabel = false, 0
		case 2:
			wantLabel = float64(r.IntN(5) - 1)
			ref.Label = wantLabel
		}
		if r.IntN(2) == 0 {
			ref.Extra = map[string]any{"nested": []any{1.5, "x]}", nil, map[string]any{"y": true}}}
		}
		src, err := json.Marshal(ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Decode(src, &ev); err != nil {
			t.Fatalf("Decode(%s): %v", src, err)
		}
		if string(ev.ID) != ref.ID || !ev.HasID || string(ev.Key) != ref.Key || string(ev.TS) != ref.TS {
			t.Fatalf("%s: id %q key %q ts %q", src, ev.ID, ev.Key, ev.TS)
		}
		if ev.HasLabel != (ref.Label != nil) || ev.Label != wantLabel {
			t.Fatalf("%s: label %v,%v", src, ev.Label, ev.HasLabel)
		}
		for i, v := range ref.Features {
			if math.Float64bits(ev.Features[i]) != math.Float64bits(v) {
				t.Fatalf("%s: features[%d] = %v, want %v", src, i, ev.Features[i], v)
			}
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	dense := mustDecoder(t, 32, nil, 1<<20)
	src := benchEvent32()
	names := make([]string, 4)
	for i := range names {
		names[i] = "f" + strconv.Itoa(i)
	}
	named := mustDecoder(t, 4, names, 0)
	namedSrc := []byte(`{"id":"e\"1","key":"k","features":{"f2":3,"f0":1,"f\u0031":2,"f3":4},"label":false,"x":[{"y":null}]}`)
	var ev, nev Event
	if err := dense.Decode(src, &ev); err != nil {
		t.Fatal(err)
	}
	if err := named.Decode(namedSrc, &nev); err != nil {
		t.Fatal(err)
	}
	if n := allocs.PerRun(100, func() { _ = dense.Decode(src, &ev) }); n != 0 {
		t.Errorf("dense Decode: %v allocs/op, want 0", n)
	}
	if n := allocs.PerRun(100, func() { _ = named.Decode(namedSrc, &nev) }); n != 0 {
		t.Errorf("named Decode: %v allocs/op, want 0", n)
	}
}

func TestLabelOnly(t *testing.T) {
	plain := mustDecoder(t, 2, nil, 0)
	late := plain.WithLabelOnly()
	var ev Event
	if err := plain.Decode([]byte(`{"id":"a","label":1}`), &ev); ReasonOf(err) != ReasonMissingFeatures {
		t.Fatalf("without WithLabelOnly: %v", err)
	}
	if err := late.Decode([]byte(`{"id":"a","label":1}`), &ev); err != nil || ev.HasFeatures || !ev.HasLabel || string(ev.ID) != "a" {
		t.Fatalf("label-only event: err %v, %+v", err, ev)
	}
	for _, bad := range []string{`{"label":1}`, `{"id":"a"}`, `{"id":"a","label":null}`} {
		if err := late.Decode([]byte(bad), &ev); ReasonOf(err) != ReasonMissingFeatures {
			t.Errorf("%s: %v, want missing_features", bad, err)
		}
	}
	if err := late.Decode([]byte(`{"id":"b","features":[1,2],"label":0}`), &ev); err != nil || !ev.HasFeatures {
		t.Fatalf("full event: %v %+v", err, ev)
	}
}

// TestDecodeMatrix: with a shape, features may be nested arrays (row-major
// into the flat vector) or the flat array; any other shape is
// wrong_dimension naming both shapes; without a shape a nested array is a
// wrong type.
func TestDecodeMatrix(t *testing.T) {
	base, err := NewDecoder(6, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := base.WithShape(2).WithMaxAbs(100)
	var ev Event
	for _, src := range []string{`{"features":[[1,2,3],[4,5,6]]}`, `{"features":[1,2,3,4,5,6]}`, `{"features":[ [1, 2,3] , [4,5,6] ]}`} {
		if err := d.Decode([]byte(src), &ev); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if !slices.Equal(ev.Features, []float64{1, 2, 3, 4, 5, 6}) {
			t.Fatalf("%s: features %v, want 1..6 row-major", src, ev.Features)
		}
	}
	for _, c := range []struct{ src, reason, detail string }{
		{`{"features":[[1,2],[3,4],[5,6]]}`, "wrong_dimension", "got a matrix of 3 rows, want 2×3"},
		{`{"features":[[1,2,3],[4,5]]}`, "wrong_dimension", "row 1 has 2 numbers, want 2×3"},
		{`{"features":[[1,2,3]]}`, "wrong_dimension", "got a matrix of 1 rows, want 2×3"},
		{`{"features":[[1,2,3],4]}`, "wrong_type", "features[1]: got number, want an array (a row of the matrix)"},
		{`{"features":[[1,2,3],[4,5,"x"]]}`, "wrong_type", "features[1][2]: not a number"},
		{`{"features":[[1,2,3],[4,5,1e300]]}`, "out_of_range", "features[1][2]"},
		{`{"features":[[1,2,3],[4,5,6]}`, "not_json", ""},
	} {
		err := d.Decode([]byte(c.src), &ev)
		var we *Error
		if !errors.As(err, &we) || string(we.Reason) != c.reason || !strings.Contains(we.Detail, c.detail) {
			t.Errorf("%s: %v, want %s with %q", c.src, err, c.reason, c.detail)
		}
	}
	if err := base.Decode([]byte(`{"features":[[1,2,3],[4,5,6]]}`), &ev); err == nil {
		t.Error("a nested array without a shape was accepted")
	}
}

// TestDecodeShortFeatures decodes features written with fixed decimals,
// as many producers round them, mixed with other forms and spacing, as an
// array and as a matrix's rows: the
// values are strconv's, and a bound or a syntax error names the feature
// it stops at (a syntax error its offset), as for any other form.
func TestDecodeShortFeatures(t *testing.T) {
	const dim = 12
	r := rand.New(rand.NewPCG(5, 6))
	d := mustDecoder(t, dim, nil, 0).WithMaxAbs(5)
	m := d.WithShape(3) // 3×4, as nested arrays
	var ev Event
	for k := range 3000 {
		lits := make([]string, dim)
		for i := range lits {
			switch x := r.NormFloat64() * 2; r.IntN(5) {
			case 0: // any other form, finite
				for lits[i] = randNumber(r); ; lits[i] = randNumber(r) {
					if v, _ := strconv.ParseFloat(lits[i], 64); !math.IsInf(v, 0) {
						break
					}
				}
			case 1:
				lits[i] = " " + strconv.FormatFloat(x, 'f', 1+r.IntN(7), 64) + " "
			default:
				lits[i] = strconv.FormatFloat(x, 'f', 1+r.IntN(7), 64)
			}
		}
		in, dec := `{"features":[`+strings.Join(lits, ",")+`]}`, d
		if k%3 == 0 {
			in, dec = `{"features":[[`+strings.Join(lits[:4], ",")+`],[`+strings.Join(lits[4:8], ",")+`],[`+strings.Join(lits[8:], ",")+`]]}`, m
		}
		err := dec.Decode([]byte(in), &ev)
		bad := -1
		for i, l := range lits {
			if v, _ := strconv.ParseFloat(strings.TrimSpace(l), 64); math.Abs(v) > 5 {
				bad = i
				break
			}
		}
		if bad >= 0 {
			want := "features[" + strconv.Itoa(bad) + "]"
			if dec == m {
				want = "features[" + strconv.Itoa(bad/4) + "][" + strconv.Itoa(bad%4) + "]"
			}
			if ReasonOf(err) != ReasonOutOfRange || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: err %v, want out_of_range at %s", in, err, want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		for i, l := range lits {
			want, _ := strconv.ParseFloat(strings.TrimSpace(l), 64)
			if math.Float64bits(ev.Features[i]) != math.Float64bits(want) {
				t.Fatalf("%s: features[%d] = %v, strconv %v", in, i, ev.Features[i], want)
			}
		}
	}
	for in, want := range map[string]string{
		`{"features":[1.5,2.5,3.5,4.5,0.5,1.5,2.5,3.5,4.5,0.5,1.5,9.5]}`:      "features[11]",
		`{"features":[1.5,2.5,3.5,4.5,0.5,1.5,2.5,3.5,4.5,0.5,1.5,-4.5,2.5]}`: "got 13 features",
		`{"features":[1.5,2.5,3.5,4.5,0.5,1.5,2.5,3.5,4.5,0.5,1.5]}`:          "got 11 features",
		`{"features":[1.5,2.5,3.5,4.5,0.5,1.5,2.5,3.5,4.5,0.5,1.5,.5]}`:       "offset 57",
	} {
		if err := d.Decode([]byte(in), &ev); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one naming %q", in, err, want)
		}
	}
}
