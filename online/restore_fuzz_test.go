package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// fuzzRestore is the shared body of the restore fuzz targets: Restore
// (through testTypes) either fails with an error wrapping ErrFormat (nil is
// returned) or yields a model whose encoding is b itself — or, with
// canonical false, one whose encoding restores again. A version-1
// encoding (the legacy path) re-encodes as version 2, so for it the
// re-encoding must restore to a model that encodes to the same bytes. The
// caller then checks that the model learns.
func fuzzRestore(t *testing.T, b []byte, canonical bool) Model {
	t.Helper()
	m, err := testTypes.Restore(b)
	if err != nil {
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
		return nil
	}
	enc, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	legacy := len(b) >= 6 && binary.LittleEndian.Uint16(b[4:]) == legacyVersion1
	if canonical && !legacy && !bytes.Equal(enc, b) {
		t.Fatalf("re-encoding differs")
	}
	r, err := testTypes.Restore(enc)
	if err != nil {
		t.Fatalf("re-encoding does not restore: %v", err)
	}
	if canonical {
		if enc2, _ := r.MarshalBinary(); !bytes.Equal(enc2, enc) {
			t.Fatalf("re-encoding of the re-encoding differs")
		}
	}
	return m
}

// encodedBudget returns the budget (exact kernel mode) in the parameters
// of an encoded mam or omam, standardised or not, version 1 or 2; 0 if
// there is none or b is not such an encoding.
func encodedBudget(b []byte) int {
	typ, err := PeekType(b)
	if err != nil {
		return 0
	}
	switch typ {
	case MAMName, legacyTagExactMAM:
		var p MAMParams
		ReadHeader(b, MAMName, &p, func(tag string, s legacySpec) error { return legacyMAM(tag, s, &p) })
		return p.Budget
	case OMAMName, legacyTagExactOMAM:
		var p OMAMParams
		ReadHeader(b, OMAMName, &p, func(tag string, s legacySpec) error { return legacyOMAM(tag, s, &p) })
		return p.Budget
	case standardizedTag:
		legacy := false
		d, r := ReadHeader(b, standardizedTag, &standardizedParams{}, func(string, legacySpec) error {
			legacy = true
			return nil
		})
		r.I64()
		if d <= 0 || d > maxDim || !r.Need(32*d) {
			return 0
		}
		r.Take(32 * d)
		if legacy {
			return encodedBudget(r.Rest())
		}
		return encodedBudget(r.Bytes())
	}
	return 0
}
