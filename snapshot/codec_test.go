package snapshot

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/v1.snap")

// testSnapshot returns a small snapshot with every kind of field, including
// a model without data.
func testSnapshot(seq uint64) *Snapshot {
	return &Snapshot{
		Format:      FormatVersion,
		Seq:         seq,
		CreatedAt:   time.Date(2026, 11, 22, 4, 0, 0, 123456789, time.UTC),
		Fingerprint: "9f86d081884c7d65",
		Offsets: []Offset{
			{Topic: "events", Partition: 0, Offset: 1200},
			{Topic: "events", Partition: 1, Offset: 0},
			{Topic: "events", Partition: 2, Offset: 1 << 40},
		},
		Models: []Model{
			{Name: "mam", Type: "mam", Fingerprint: "c0ffee", Data: []byte("mam state \x00\x01\x02")},
			{Name: "ordinal", Type: "ordinal_mam", Data: bytes.Repeat([]byte{0xA5, 0x5A}, 40)},
			{Name: "svm", Type: "kernel_svm"},
		},
	}
}

// equalSnap reports whether two snapshots hold the same content.
func equalSnap(t *testing.T, got, want *Snapshot) {
	t.Helper()
	if got.Format != want.Format || got.Seq != want.Seq || !got.CreatedAt.Equal(want.CreatedAt) ||
		got.Fingerprint != want.Fingerprint || !reflect.DeepEqual(got.Offsets, want.Offsets) ||
		len(got.Models) != len(want.Models) {
		t.Fatalf("snapshot differs:\n got %+v\nwant %+v", summary(got), summary(want))
	}
	for i := range got.Models {
		g, w := got.Models[i], want.Models[i]
		if g.Name != w.Name || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("model %d differs: got %q/%q (%d bytes), want %q/%q (%d bytes)",
				i, g.Name, g.Type, len(g.Data), w.Name, w.Type, len(w.Data))
		}
	}
}

func summary(s *Snapshot) any {
	if s == nil {
		return nil
	}
	c := *s
	c.Models = nil
	var ms []string
	for _, m := range s.Models {
		ms = append(ms, m.Name+":"+m.Type)
	}
	return struct {
		S      Snapshot
		Models []string
	}{c, ms}
}

func TestRoundTrip(t *testing.T) {
	s := testSnapshot(42)
	b := AppendEncode(nil, s)
	if len(b) != EncodedLen(s) {
		t.Fatalf("len %d, EncodedLen %d", len(b), EncodedLen(s))
	}
	var w bytes.Buffer
	n, err := Encode(&w, s)
	if err != nil || n != int64(len(b)) || !bytes.Equal(w.Bytes(), b) {
		t.Fatalf("Encode = %d, %v; differs from AppendEncode: %v", n, err, !bytes.Equal(w.Bytes(), b))
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	equalSnap(t, got, s)

	// Empty snapshot and zero time.
	empty := &Snapshot{Format: FormatVersion}
	got, err = Decode(AppendEncode(nil, empty))
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.IsZero() {
		t.Fatalf("zero time came back as %v", got.CreatedAt)
	}
	equalSnap(t, got, empty)
}

func TestAppendEncodeReusesBuffer(t *testing.T) {
	s := testSnapshot(1)
	buf := AppendEncode([]byte("prefix"), s)
	if !bytes.HasPrefix(buf, []byte("prefix")) {
		t.Fatal("AppendEncode clobbered dst")
	}
	if _, err := Decode(buf[len("prefix"):]); err != nil {
		t.Fatal(err)
	}
	buf = make([]byte, 0, EncodedLen(s))
	allocs := testing.AllocsPerRun(20, func() { buf = AppendEncode(buf[:0], s) })
	if allocs != 0 {
		t.Fatalf("AppendEncode into a big enough buffer allocated %v times", allocs)
	}
}

// TestDecodeFlippedBytes flips every byte of an encoding in turn: each flip
// must be detected, and attributed to the part that holds the byte.
func TestDecodeFlippedBytes(t *testing.T) {
	s := testSnapshot(7)
	b := AppendEncode(nil, s)
	hdrEnd := prefixLen + headerLenV1(s) + 4
	mamEnd := hdrEnd + len(s.Models[0].Data)
	ordEnd := mamEnd + len(s.Models[1].Data)
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		_, err := Decode(c)
		if err == nil {
			t.Fatalf("flip at %d not detected", i)
		}
		if 8 <= i && i < 12 { // the version field
			if !errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: %v", i, err)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: error %v does not wrap ErrCorrupt", i, err)
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("flip at %d: no *CorruptError in %v", i, err)
		}
		var want string
		switch {
		case i < 8:
			want = "file"
		case i < hdrEnd:
			want = "header"
		case i < mamEnd:
			want = `model "mam"`
		case i < ordEnd:
			want = `model "ordinal"`
		default:
			want = "trailer"
		}
		if ce.Part != want {
			t.Fatalf("flip at %d: part %q, want %q (%v)", i, ce.Part, want, err)
		}
	}
}

func TestDecodeTruncatedOrExtended(t *testing.T) {
	b := AppendEncode(nil, testSnapshot(7))
	for n := range len(b) {
		if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: err = %v", n, err)
		}
	}
	if _, err := Decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("extra byte: err = %v", err)
	}
}

// TestDecodeReportsEveryBadModel checks that an inspect tool learns about all
// damaged models, not just the first.
func TestDecodeReportsEveryBadModel(t *testing.T) {
	s := testSnapshot(7)
	b := AppendEncode(nil, s)
	hdrEnd := prefixLen + headerLenV1(s) + 4
	b[hdrEnd] ^= 1                         // mam
	b[hdrEnd+len(s.Models[0].Data)+3] ^= 1 // ordinal
	_, err := Decode(b)
	for _, part := range []string{`model "mam"`, `model "ordinal"`, "trailer"} {
		if !strings.Contains(err.Error(), "corrupt "+part+":") {
			t.Errorf("error does not name %s: %v", part, err)
		}
	}
}

func TestDecodeVersions(t *testing.T) {
	b := AppendEncode(nil, testSnapshot(1))
	b[8] = FormatVersion + 1
	if _, err := Decode(b); !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("newer version: err = %v", err)
	}
	b[8] = 0
	if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 0: err = %v", err)
	}
	if _, err := Decode([]byte("not a snapshot at all, really")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad magic: err = %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Snapshot)
	}{
		{"empty model name", func(s *Snapshot) { s.Models[0].Name = "" }},
		{"duplicate model", func(s *Snapshot) { s.Models[1].Name = s.Models[0].Name }},
		{"long model name", func(s *Snapshot) { s.Models[0].Name = strings.Repeat("m", MaxNameLen+1) }},
		{"long type", func(s *Snapshot) { s.Models[0].Type = strings.Repeat("t", MaxNameLen+1) }},
		{"empty topic", func(s *Snapshot) { s.Offsets[0].Topic = "" }},
		{"negative partition", func(s *Snapshot) { s.Offsets[0].Partition = -1 }},
		{"negative offset", func(s *Snapshot) { s.Offsets[0].Offset = -1 }},
		{"duplicate partition", func(s *Snapshot) { s.Offsets[1].Partition = 0 }},
		{"long fingerprint", func(s *Snapshot) { s.Fingerprint = strings.Repeat("f", MaxFingerprintLen+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(1)
			tc.mod(s)
			if err := s.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v", err)
			}
			// Decode refuses what Validate refuses, even with good CRCs.
			if _, err := Decode(AppendEncode(nil, s)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode = %v", err)
			}
		})
	}
	if err := testSnapshot(1).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenV1 pins format version 1: testdata/v1.snap was written by this
// test with -update and must keep decoding to exactly this content in every
// future version of the package.
func TestGoldenV1(t *testing.T) {
	path := filepath.Join("testdata", "v1.snap")
	if *update {
		if FormatVersion != 1 {
			t.Fatal("refusing to rewrite the v1 golden file with another format version")
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, AppendEncode(nil, testSnapshot(42)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Snapshot{
		Format:      1,
		Seq:         42,
		CreatedAt:   time.Date(2026, 11, 22, 4, 0, 0, 123456789, time.UTC),
		Fingerprint: "9f86d081884c7d65",
		Offsets: []Offset{
			{Topic: "events", Partition: 0, Offset: 1200},
			{Topic: "events", Partition: 1, Offset: 0},
			{Topic: "events", Partition: 2, Offset: 1099511627776},
		},
		Models: []Model{
			{Name: "mam", Type: "mam", Fingerprint: "c0ffee", Data: []byte("mam state \x00\x01\x02")},
			{Name: "ordinal", Type: "ordinal_mam", Data: bytes.Repeat([]byte{0xA5, 0x5A}, 40)},
			{Name: "svm", Type: "kernel_svm"},
		},
	}
	equalSnap(t, got, want)
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt location %v, want UTC", got.CreatedAt.Location())
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(AppendEncode(nil, testSnapshot(42)))
	f.Add(AppendEncode(nil, &Snapshot{}))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		// With checksums skipped the fuzzer reaches the parser itself.
		for _, verify := range []bool{true, false} {
			s, err := decode(b, verify)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("verify=%v: error %v wraps neither ErrCorrupt nor ErrUnsupportedVersion", verify, err)
				}
				continue
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("decoded snapshot does not validate: %v", err)
			}
			if verify {
				// Decoding is canonical: a verified input re-encodes to itself.
				if re := AppendEncode(nil, s); !bytes.Equal(re, b) {
					t.Fatalf("re-encoding differs from the input")
				}
			}
		}
	})
}
