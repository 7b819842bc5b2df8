package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/internal/allocs"
)

func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestAppendScoreFields(t *testing.T) {
	at := time.Date(2026, 11, 22, 5, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		s    Score
		want map[string]any
	}{
		{
			name: "with bound",
			s: Score{ID: []byte("e-1"), Key: []byte("user-42"), Model: "mam", Version: 17, Score: 0.42, Prediction: 1,
				HasBound: true, MistakeBound: 0.31, Delta: 0.05, N: 120000, EventTS: []byte("2026-11-22T04:00:00Z"), ScoredAt: at},
			want: map[string]any{"id": "e-1", "key": "user-42", "model": "mam", "version": json.Number("17"),
				"score": json.Number("0.42"), "prediction": json.Number("1"),
				"certainty": map[string]any{"mistake_bound": json.Number("0.31"), "delta": json.Number("0.05"), "n": json.Number("120000")},
				"event_ts":  "2026-11-22T04:00:00Z",
				"scored_at": "2026-11-22T04:00:00.123456789Z"},
		},
		{
			name: "no bound, no event ts",
			s:    Score{ID: []byte("e-2"), Key: nil, Model: "ordinal", Version: 0, Score: -3.5e-7, Prediction: 4, N: 0, ScoredAt: at.Truncate(time.Second)},
			want: map[string]any{"id": "e-2", "key": "", "model": "ordinal", "version": json.Number("0"),
				"score": json.Number("-3.5e-07"), "prediction": json.Number("4"),
				"certainty": map[string]any{"mistake_bound": nil, "delta": nil, "n": json.Number("0")},
				"scored_at": "2026-11-22T04:00:00Z"},
		},
		{
			name: "non-finite floats become null",
			s: Score{ID: []byte("e-3"), Key: []byte("k"), Model: "svm", Version: -1, Score: math.NaN(), Prediction: -1,
				HasBound: true, MistakeBound: math.Inf(1), Delta: math.Inf(-1), N: math.MaxInt64, ScoredAt: at},
			want: map[string]any{"id": "e-3", "key": "k", "model": "svm", "version": json.Number("-1"),
				"score": nil, "prediction": json.Number("-1"),
				"certainty": map[string]any{"mistake_bound": nil, "delta": nil, "n": json.Number("9223372036854775807")},
				"scored_at": "2026-11-22T04:00:00.123456789Z"},
		},
		{
			name: "large and tiny floats",
			s:    Score{Model: "m", Score: 1e300, HasBound: true, MistakeBound: 5e-324, Delta: 1, ScoredAt: at},
			want: map[string]any{"id": "", "key": "", "model": "m", "version": json.Number("0"),
				"score": json.Number("1e+300"), "prediction": json.Number("0"),
				"certainty": map[string]any{"mistake_bound": json.Number("5e-324"), "delta": json.Number("1"), "n": json.Number("0")},
				"scored_at": "2026-11-22T04:00:00.123456789Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := AppendScore([]byte("prefix"), &tc.s)
			if !bytes.HasPrefix(out, []byte("prefix{")) {
				t.Fatalf("did not append: %s", out)
			}
			got := decodeMap(t, out[len("prefix"):])
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v\njson %s", got, tc.want, out)
			}
		})
	}
}

func TestAppendScoreFieldOrder(t *testing.T) {
	s := benchScore()
	got := string(AppendScore(nil, s))
	want := `{"id":"evt-000000012345","key":"user-42","model":"mam","version":17,"score":0.4213371337,"prediction":1,` +
		`"certainty":{"mistake_bound":0.3125,"delta":0.05,"n":120000},"event_ts":"2026-11-22T04:00:00.123Z",` +
		`"scored_at":"2026-11-22T04:00:00.123456789Z"}`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestAppendScoreAdditions: a regression model's value is a float
// "prediction"; "expected" and "fallback" follow "prediction" and
// "probability", in that order, and only when set.
func TestAppendScoreAdditions(t *testing.T) {
	at := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    Score
		want string
	}{
		{"value", Score{Model: "fm", Version: 1, Score: 3.71, Value: 3.71, HasValue: true, ScoredAt: at},
			`{"id":"","key":"","model":"fm","version":1,"score":3.71,"prediction":3.71,"certainty":{"mistake_bound":null,"delta":null,"n":0},"scored_at":"2026-11-22T04:00:00Z"}`},
		{"whole value", Score{Model: "fm", Version: 1, Score: 4, Value: 4, HasValue: true, Prediction: 7, ScoredAt: at},
			`{"id":"","key":"","model":"fm","version":1,"score":4,"prediction":4,"certainty":{"mistake_bound":null,"delta":null,"n":0},"scored_at":"2026-11-22T04:00:00Z"}`},
		{"expected", Score{Model: "o", Version: 1, Score: 0.2, Prediction: 4, Expected: 3.625, HasExpected: true, ScoredAt: at},
			`{"id":"","key":"","model":"o","version":1,"score":0.2,"prediction":4,"expected":3.625,"certainty":{"mistake_bound":null,"delta":null,"n":0},"scored_at":"2026-11-22T04:00:00Z"}`},
		{"fallback with probability", Score{Model: "k", Version: 1, Score: 0.5, Prediction: 1, Probability: 0.62, HasProbability: true, Fallback: "global", ScoredAt: at},
			`{"id":"","key":"","model":"k","version":1,"score":0.5,"prediction":1,"probability":0.62,"fallback":"global","certainty":{"mistake_bound":null,"delta":null,"n":0},"scored_at":"2026-11-22T04:00:00Z"}`},
		{"expected and fallback", Score{Model: "k", Version: 1, Score: 3.2, Prediction: 3, Expected: 3.2, HasExpected: true, Fallback: "fm", ScoredAt: at},
			`{"id":"","key":"","model":"k","version":1,"score":3.2,"prediction":3,"expected":3.2,"fallback":"fm","certainty":{"mistake_bound":null,"delta":null,"n":0},"scored_at":"2026-11-22T04:00:00Z"}`},
		{"non-finite value", Score{Model: "fm", Score: 1, Value: math.Inf(1), HasValue: true, ScoredAt: at},
			`{"id":"","key":"","model":"fm","version":0,"score":1,"prediction":null,"certainty":{"mistake_bound":null,"delta":null,"n":0},"scored_at":"2026-11-22T04:00:00Z"}`},
	} {
		if got := string(AppendScore(nil, &tc.s)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if !json.Valid([]byte(tc.want)) {
			t.Errorf("%s: invalid JSON", tc.name)
		}
	}
	s := benchScore()
	s.HasValue, s.Value, s.HasExpected, s.Expected, s.Fallback = true, 3.5, true, 3.25, "global"
	buf := AppendScore(nil, s)
	if n := allocs.PerRun(100, func() { buf = AppendScore(buf[:0], s) }); n != 0 {
		t.Errorf("AppendScore with value, expected and fallback: %v allocs/op, want 0", n)
	}
}

func TestAppendScoreEscaping(t *testing.T) {
	for _, key := range []string{
		``,
		`plain`,
		`"quoted"`,
		`back\slash`,
		"new\nline\r\ttab\b\f",
		"\x00\x01\x1f\x7f",
		"ünïcödé 😀 €",
		"\u2028\u2029",
		"<script>&amp;</script>",
		"\xff\xfe invalid",
		"truncated \xe2\x82",
		"surrogate half \xed\xa0\x80",
		"\xc0\xaf overlong",
		`{"id":"injected"}`,
	} {
		s := Score{ID: []byte(key), Key: []byte(key), Model: key, EventTS: []byte(key + "x")}
		out := AppendScore(nil, &s)
		m := decodeMap(t, out)
		// encoding/json's own round trip is the reference: it maps invalid UTF-8 to U+FFFD.
		ref, _ := json.Marshal(key)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if m["id"] != want || m["key"] != want || m["model"] != want || m["event_ts"] != want+"x" {
			t.Errorf("%q: got id %q key %q model %q event_ts %q, want %q; json %s", key, m["id"], m["key"], m["model"], m["event_ts"], want, out)
		}
		for _, c := range out {
			if c < 0x20 {
				t.Errorf("%q: raw control character %#x in %q", key, c, out)
			}
		}
		if strings.Contains(string(out), "\u2028") || strings.Contains(string(out), "\u2029") {
			t.Errorf("%q: unescaped line separator in %q", key, out)
		}
	}
}

// TestAppendStringWords checks AppendString, which skips eight plain bytes
// at a time, against the same loop a byte at a time (appendString without
// words):
// random strings of plain ASCII with, at random places, each byte that
// stops the words ('"', '\\', control characters, DEL, bytes from 0x80
// up: valid and invalid UTF-8, U+2028), and every byte value alone in a
// word of plain ones.
func TestAppendStringWords(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	special := []string{`"`, `\`, "\x00", "\x1f", "\n", "\x7f", "é", "€", "😀", "\u2028", "\xff", "\xe2\x82"}
	var b []byte
	for range 50000 {
		b = b[:0]
		for n := r.IntN(40); n > 0; n-- {
			if r.IntN(6) == 0 {
				b = append(b, special[r.IntN(len(special))]...)
			} else {
				b = append(b, byte(0x20+r.IntN(0x5f)))
			}
		}
		if got, want := AppendString(nil, b), appendString(nil, b, false); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", b, got, want)
		}
	}
	for c := range 256 {
		for at := range 9 {
			b := []byte("abcdefghijklmnopq")
			b[at] = byte(c)
			if got, want := AppendString(nil, b), appendString(nil, b, false); !bytes.Equal(got, want) {
				t.Fatalf("AppendString(%q) = %s, want %s", b, got, want)
			}
		}
	}
}

func TestAppendScoreAllocs(t *testing.T) {
	s := benchScore()
	buf := AppendScore(nil, s)
	s.ScoredAt = s.ScoredAt.In(time.FixedZone("X", -7200)) // UTC conversion must not allocate either
	if n := allocs.PerRun(100, func() { buf = AppendScore(buf[:0], s) }); n != 0 {
		t.Errorf("AppendScore: %v allocs/op, want 0", n)
	}
	s.HasBound, s.EventTS = false, nil
	if n := allocs.PerRun(100, func() { buf = AppendScore(buf[:0], s) }); n != 0 {
		t.Errorf("AppendScore without bound: %v allocs/op, want 0", n)
	}
}

// FuzzAppendScore checks that any bytes as id/key/model give valid JSON that
// reads back like encoding/json's own encoding of the same string.
func FuzzAppendScore(f *testing.F) {
	for _, s := range []string{"", "k", "\"\\", "\x00\x1f", "\xff", "😀", "\u2028", "\xed\xa0\x80"} {
		f.Add([]byte(s), 0.5)
	}
	f.Fuzz(func(t *testing.T, key []byte, score float64) {
		s := Score{ID: key, Key: key, Model: string(key), Score: score, HasBound: true, MistakeBound: score, Delta: score, EventTS: key}
		out := AppendScore(nil, &s)
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("invalid JSON %q: %v", out, err)
		}
		ref, _ := json.Marshal(string(key))
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if m["id"] != want || m["key"] != want || m["model"] != want {
			t.Fatalf("%q: got %q, want %q", key, m["id"], want)
		}
		if _, ok := m["event_ts"]; ok != (len(key) > 0) {
			t.Fatalf("event_ts presence %v for %q", ok, key)
		}
		if f, ok := m["score"].(float64); ok && f != score {
			t.Fatalf("score %v read back as %v", score, f)
		} else if !ok && !math.IsNaN(score) && !math.IsInf(score, 0) {
			t.Fatalf("finite score %v written as %v", score, m["score"])
		}
	})
}

// TestAppendFloatShortDecimal checks appendFloat against strconv's
// shortest 'g' form on short decimals (its own path), their neighbours
// and random floats.
func TestAppendFloatShortDecimal(t *testing.T) {
	check := func(v float64) {
		t.Helper()
		if math.IsNaN(v) || math.IsInf(v, 0) { // null, not strconv's: TestAppendScoreFields
			return
		}
		if got, want := string(appendFloat(nil, v)), strconv.FormatFloat(v, 'g', -1, 64); got != want {
			t.Fatalf("appendFloat(%v) = %s, want %s", v, got, want)
		}
	}
	edges := []float64{0, math.Copysign(0, -1), 1e-4, 1e-5, 9.99999e-5, 0.0001000001, 1e6, 999999.999999, 999999.9999995,
		1, 10, 0.1, 0.05, 0.9, 0.95, 0.999999, 123456.000001, 0.000123, 1e-3, 0.3, 0.1 + 0.2, 5e-324, math.MaxFloat64}
	for _, v := range edges {
		check(v)
		check(-v)
		check(math.Nextafter(v, 2*v+1))
		check(math.Nextafter(v, -1))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 200000 {
		k := r.Uint64N(1e12)
		v := float64(k) / math.Pow(10, float64(r.IntN(13)))
		check(v)
		check(-v)
		check(math.Nextafter(v, math.Inf(1)))
		check(math.Float64frombits(r.Uint64()))
		check(r.Float64())
	}
}

// TestAppendTimeUTC checks the scored_at writer against
// t.UTC().AppendFormat(time.RFC3339Nano): random instants over years 0 to
// 9999 and beyond (AppendFormat's own path), whole seconds, fractions with
// trailing zeros, times in other zones, leap days and the ends of years.
func TestAppendTimeUTC(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	lo, hi := time.Date(-2, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(10002, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	times := []time.Time{
		{}, time.Unix(0, 0), time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 100, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 11, 27, 9, 5, 7, 120000000, zone),
	}
	for range 20000 {
		sec := lo + r.Int64N(hi-lo)
		ns := r.Int64N(1e9)
		switch r.IntN(4) {
		case 0:
			ns = 0
		case 1:
			ns -= ns % 1000000 // trailing zeros
		}
		tm := time.Unix(sec, ns)
		if r.IntN(2) == 0 {
			tm = tm.In(zone)
		}
		times = append(times, tm)
	}
	for _, tm := range times {
		want := tm.UTC().AppendFormat([]byte("x"), time.RFC3339Nano)
		if got := appendTimeUTC([]byte("x"), tm); !bytes.Equal(got, want) {
			t.Fatalf("%v: %s, want %s", tm, got, want)
		}
	}
}

// A FloatCache's times are appendTimeUTC's bytes whatever the order they
// come in: runs within one second, the next second, a step back, the
// ends of days and years, another zone for the same instant, and years
// outside 0 to 9999 (AppendFormat's path) between two of the same second.
func TestFloatCacheAppendTime(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	zone := time.FixedZone("UTC-3", -3*3600)
	base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	var times []time.Time
	at := base
	for range 20000 {
		switch r.IntN(20) {
		case 0:
			at = at.Add(-time.Duration(r.Int64N(3e9))) // a step back
		case 1:
			times = append(times, time.Date(10000+r.IntN(5), 1, 1, 0, 0, 0, r.IntN(1e9), time.UTC))
		case 2:
			times = append(times, at.In(zone))
		case 3:
			at = at.Truncate(time.Second) // a whole second
		default:
			at = at.Add(time.Duration(r.Int64N(400e6)))
		}
		times = append(times, at)
	}
	var c FloatCache
	for _, tm := range times {
		want := appendTimeUTC([]byte("x"), tm)
		if ref := tm.UTC().AppendFormat([]byte("x"), time.RFC3339Nano); !bytes.Equal(want, ref) {
			t.Fatalf("%v: appendTimeUTC %s, AppendFormat %s", tm, want, ref)
		}
		if got := c.appendTime([]byte("x"), tm); !bytes.Equal(got, want) {
			t.Fatalf("%v: %s, want %s", tm, got, want)
		}
	}
}

// BenchmarkAppendTime is a record's scored_at, times 1.7 µs apart as a
// run's records are: appendTimeUTC alone (plain) and through a FloatCache
// (cached), which keeps the text of the second. 0 allocs/op.
func BenchmarkAppendTime(b *testing.B) {
	base := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	for _, cached := range []bool{false, true} {
		name := "plain"
		var c *FloatCache
		if cached {
			name, c = "cached", new(FloatCache)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			i := 0
			for b.Loop() {
				buf = c.appendTime(buf[:0], base.Add(time.Duration(i)*1733))
				i++
			}
		})
	}
}
