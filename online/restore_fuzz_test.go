package online

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzRestore is the shared body of the restore fuzz targets: Restore
// either fails with an error wrapping ErrFormat (nil is returned) or yields
// a model whose encoding is b itself — or, with canonical false, one whose
// encoding restores again. The caller then checks that the model learns.
func fuzzRestore(t *testing.T, b []byte, canonical bool) Model {
	t.Helper()
	m, err := Restore(b)
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
	if canonical && !bytes.Equal(enc, b) {
		t.Fatalf("re-encoding differs")
	}
	if _, err := Restore(enc); err != nil {
		t.Fatalf("re-encoding does not restore: %v", err)
	}
	return m
}
