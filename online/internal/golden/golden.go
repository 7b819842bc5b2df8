// Package golden compares encodings with golden files, for the format
// tests of the model packages: a format is pinned by a file written once
// and compared on every run.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Compare compares b with testdata/name (or, with update, writes it first)
// and returns the file's bytes. A difference fails the test with the first
// byte that differs.
func Compare(t testing.TB, name string, b []byte, update bool) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestFormat -update to write it)", err)
	}
	if !bytes.Equal(b, want) {
		at := 0
		for at < min(len(b), len(want)) && b[at] == want[at] {
			at++
		}
		t.Fatalf("encoding differs from %s (%d bytes, golden %d) from byte %d on: the format changed", path, len(b), len(want), at)
	}
	return want
}
