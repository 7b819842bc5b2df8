package codec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var errTest = errors.New("test: bad encoding")

func TestAppendAndRead(t *testing.T) {
	var b []byte
	b = AppendU8(b, 7)
	b = AppendU16(b, 0xBEEF)
	b = AppendU32(b, 1<<31+5)
	b = AppendU64(b, 1<<63+9)
	b = AppendI64(b, -42)
	b = AppendF64(b, math.Pi)
	b = AppendF64s(b, []float64{1.5, math.Inf(-1)})
	b = AppendBool(b, true)
	b = AppendStr(b, "mam")
	b = AppendBytes(b, []byte("state"))
	b, err := AppendFrame(b, func(dst []byte) ([]byte, error) { return AppendU32(dst, 99), nil })
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(b, errTest)
	if r.U8() != 7 || r.U16() != 0xBEEF || r.U32() != 1<<31+5 || r.U64() != 1<<63+9 || r.I64() != -42 || r.F64() != math.Pi {
		t.Fatal("scalars differ")
	}
	fs := make([]float64, 2)
	r.F64s(fs)
	if fs[0] != 1.5 || !math.IsInf(fs[1], -1) || !r.Bool("flag") || r.Str() != "mam" || string(r.Bytes()) != "state" {
		t.Fatal("values differ")
	}
	fr := r.Frame()
	if fr.U32() != 99 || fr.End() != nil || r.End() != nil {
		t.Fatalf("frame: %v %v", fr.Err(), r.Err())
	}
}

// TestReaderSticky: the first failure sticks, later reads return zero
// values, and the error wraps the sentinel (and ErrTruncated when short).
func TestReaderSticky(t *testing.T) {
	r := NewReader([]byte{1, 2, 3}, errTest)
	if r.U32() != 0 || !errors.Is(r.Err(), errTest) || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("short read: %v", r.Err())
	}
	first := r.Err()
	if r.U8() != 0 || r.Str() != "" || r.Bytes() != nil || r.Len() != 0 || r.Err() != first {
		t.Fatal("reads after a failure must return zero values and keep the first error")
	}
	r = NewReader([]byte{2}, errTest)
	r.Bool("converged")
	if !errors.Is(r.Err(), errTest) || !strings.Contains(r.Err().Error(), "converged flag 2") {
		t.Fatalf("bad flag: %v", r.Err())
	}
	r = NewReader(AppendU32(nil, 1000), errTest)
	if n := r.Count("rows", 1<<20, 8); n != 0 || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("a count beyond the bytes left: %d, %v", n, r.Err())
	}
	r = NewReader(append(AppendU32(nil, 5), make([]byte, 40)...), errTest)
	if n := r.Count("rows", 4, 8); n != 0 || !strings.Contains(r.Err().Error(), "5 rows (at most 4)") {
		t.Fatalf("a count beyond its limit: %d, %v", n, r.Err())
	}
	r = NewReader([]byte{1, 2}, errTest)
	r.U8()
	if err := r.End(); !errors.Is(err, errTest) || !strings.Contains(err.Error(), "1 trailing bytes") {
		t.Fatalf("trailing: %v", err)
	}
}

type inner struct {
	Type  string  `yaml:"type"`
	Gamma float64 `yaml:"gamma"`
}

type shared struct {
	Lambda float64 `yaml:"lambda"`
}

type params struct {
	Kernel  inner `yaml:"kernel"`
	shared  `yaml:",inline"`
	Shared  shared        `yaml:",inline"`
	Budget  int           `yaml:"budget"`
	Seed    uint64        `yaml:"seed"`
	On      bool          `yaml:"on"`
	Every   time.Duration `yaml:"every"`
	Edges   []float64     `yaml:"edges"`
	Names   []string      `yaml:"names"`
	Kernels []inner       `yaml:"kernels"`
	Pairs   [][]string    `yaml:"pairs"`
	Skipped int           `yaml:"-"`
	NoTag   int
}

func TestFields(t *testing.T) {
	var keys []string
	for _, f := range Fields(reflect.ValueOf(&params{})) {
		keys = append(keys, f.Key)
	}
	want := "kernel lambda budget seed on every edges names kernels pairs"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("keys %q, want %q (inline flattened, unexported, '-' and untagged skipped)", got, want)
	}
	if err := CheckParams(reflect.TypeOf(params{})); err != nil {
		t.Fatal(err)
	}
	type dup struct {
		A int `yaml:"a"`
		B int `yaml:"a"`
	}
	type bad struct {
		M map[string]int `yaml:"m"`
	}
	type deep struct {
		L [][][]string `yaml:"l"`
	}
	type numbers struct {
		L [][]float64 `yaml:"l"`
	}
	for _, tp := range []reflect.Type{reflect.TypeOf(dup{}), reflect.TypeOf(bad{}), reflect.TypeOf(0), reflect.TypeOf(deep{}), reflect.TypeOf(numbers{})} {
		if CheckParams(tp) == nil {
			t.Errorf("CheckParams accepts %v (a repeated key, a map, a non-struct, lists of lists other than of strings)", tp)
		}
	}
}

func TestParamsRoundTrip(t *testing.T) {
	p := params{Kernel: inner{"rbf", 0.5}, Shared: shared{Lambda: 1e-3}, Budget: -3, Seed: math.MaxUint64, On: true,
		Every: time.Minute, Edges: []float64{1, 2}, Names: []string{"a", ""}, Kernels: []inner{{"rbf", 1}, {}},
		Pairs: [][]string{{"user", "item"}, {"ctx", "", "x"}, {}}}
	b := AppendParams(nil, &p)
	var q params
	r := NewReader(b, errTest)
	ReadParams(r, &q)
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	p.Pairs[2] = []string{} // decoded as an empty list, not nil
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", q, p)
	}
	if !bytes.Equal(AppendParams(nil, q), b) {
		t.Fatal("re-encoding differs")
	}
}

// TestParamsZeroLeftOut: zero values are not encoded, so a field added
// later whose zero value keeps the old behaviour changes no encoding.
func TestParamsZeroLeftOut(t *testing.T) {
	if b := AppendParams(nil, &params{Kernel: inner{}, Edges: []float64{}}); len(b) != 0 {
		t.Fatalf("zero parameters encode to %d bytes", len(b))
	}
	type v1 struct {
		Gamma float64 `yaml:"gamma"`
	}
	type v2 struct {
		Gamma float64 `yaml:"gamma"`
		Extra int     `yaml:"extra"`
	}
	if !bytes.Equal(AppendParams(nil, v1{2}), AppendParams(nil, v2{Gamma: 2})) {
		t.Fatal("a new zero field changed the encoding")
	}
	if b := AppendParams(nil, &params{Pairs: [][]string{}}); len(b) != 0 {
		t.Fatalf("an empty list of lists encodes to %d bytes", len(b))
	}
}

// TestParamsPinned: the encoding of parameters of every kind but the
// lists of string lists, as the codec wrote it before that kind existed
// (so that no existing fingerprint changed), and that kind's own bytes.
func TestParamsPinned(t *testing.T) {
	p := params{Kernel: inner{"rbf", 0.5}, Shared: shared{Lambda: 1e-3}, Budget: -3, Seed: math.MaxUint64, On: true,
		Every: time.Minute, Edges: []float64{1, 2}, Names: []string{"a", ""}, Kernels: []inner{{"rbf", 1}, {}}}
	const before = "066b65726e656c6d1c000000047479706573030000007262660567616d6d6166000000000000e03f066c616d62646166fca9f1d24d62503f" +
		"0662756467657469fdffffffffffffff047365656475ffffffffffffffff026f6e620105657665727969005847f80d00000005656467657346" +
		"02000000000000000000f03f0000000000000040056e616d65735302000000010000006100000000076b65726e656c734d020000001c0000" +
		"00047479706573030000007262660567616d6d6166000000000000f03f00000000"
	if got := hex.EncodeToString(AppendParams(nil, &p)); got != before {
		t.Errorf("the encoding changed (and every fingerprint with it):\n got %s\nwant %s", got, before)
	}
	want := AppendStr(nil, "pairs")
	want = append(want, 'L')
	want = AppendU32(want, 2)
	want = AppendBytes(AppendBytes(AppendU32(want, 2), []byte("user")), []byte("item"))
	want = AppendU32(want, 0)
	if got := AppendParams(nil, &params{Pairs: [][]string{{"user", "item"}, nil}}); !bytes.Equal(got, want) {
		t.Errorf("lists of string lists: % x, want % x", got, want)
	}
}

func TestParamsErrors(t *testing.T) {
	enc := func(key string, kind byte, value []byte) []byte {
		return append(append(AppendStr(nil, key), kind), value...)
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"unknown key":      {enc("gama", kindFloat, AppendF64(nil, 1)), `unknown parameter "gama"`},
		"repeated key":     {append(enc("budget", kindInt, AppendI64(nil, 1)), enc("budget", kindInt, AppendI64(nil, 2))...), `parameter "budget" repeated`},
		"wrong kind":       {enc("budget", kindFloat, AppendF64(nil, 1)), `parameter "budget": kind`},
		"truncated":        {enc("budget", kindInt, []byte{1, 2}), "truncated"},
		"bad bool":         {enc("on", kindBool, []byte{7}), "on flag 7"},
		"huge list":        {enc("edges", kindFloats, AppendU32(nil, 1<<30)), "edges"},
		"nested error":     {enc("kernel", kindStruct, AppendBytes(nil, enc("x", kindInt, AppendI64(nil, 1)))), `unknown parameter "x"`},
		"list item bad":    {enc("kernels", kindStructs, AppendBytes(AppendU32(nil, 1), enc("v", kindInt, AppendI64(nil, 1)))), `unknown parameter "v"`},
		"lists as strings": {enc("pairs", kindStrings, AppendBytes(AppendU32(nil, 1), []byte("a"))), `parameter "pairs": kind`},
		"strings as lists": {enc("names", kindLists, AppendU32(nil, 0)), `parameter "names": kind`},
		"huge inner list":  {enc("pairs", kindLists, AppendU32(AppendU32(nil, 1), 1<<30)), "pairs"},
		"truncated inner":  {enc("pairs", kindLists, AppendBytes(AppendU32(AppendU32(nil, 1), 2), []byte("a"))), "truncated"},
	} {
		var p params
		r := NewReader(tc.b, errTest)
		ReadParams(r, &p)
		if err := r.End(); !errors.Is(err, errTest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func FuzzReadParams(f *testing.F) {
	f.Add(AppendParams(nil, &params{Kernel: inner{"rbf", 0.5}, Budget: 3, Edges: []float64{1}, Kernels: []inner{{"a", 1}}}))
	f.Add(AppendParams(nil, &params{Pairs: [][]string{{"user", "item"}, {}, {"a"}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p params
		r := NewReader(b, errTest)
		ReadParams(r, &p)
		if r.End() != nil {
			return
		}
		var q params
		b1 := AppendParams(nil, &p)
		r2 := NewReader(b1, errTest)
		ReadParams(r2, &q)
		if err := r2.End(); err != nil || !bytes.Equal(AppendParams(nil, &q), b1) {
			t.Fatalf("decoded parameters do not round-trip: %v", err)
		}
	})
}
