package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/streamer/streamer/online"
)

var update = flag.Bool("update", false, "rewrite generated documentation")

const (
	readmePath      = "../../README.md"
	modelTableBegin = "<!-- BEGIN model table: generated from the model registry by `go test ./cmd/streamer -run TestModelTable -update` -->"
	modelTableEnd   = "<!-- END model table -->"
)

// modelTable renders the README's table of model types from the registry:
// name, kinds, description and certainty, over the type's example
// configurations.
func modelTable(types *online.Registry) string {
	var b strings.Builder
	b.WriteString("| type | kind | what | certainty |\n|---|---|---|---|\n")
	for _, typ := range types.Types() {
		var kinds []string
		bound, prob, n := 0, 0, 0
		for _, p := range typ.Examples() {
			tr := typ.Traits(p)
			if k := tr.Kind.String(); !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
			n++
			if tr.Bound {
				bound++
			}
			if tr.Probability {
				prob++
			}
		}
		var cert []string
		switch {
		case bound == n:
			cert = append(cert, "mistake bound")
		case bound > 0:
			cert = append(cert, "mistake bound (most configurations)")
		}
		switch {
		case prob == n:
			cert = append(cert, "probability")
		case prob > 0:
			cert = append(cert, "probability (option)")
		}
		if len(cert) == 0 {
			cert = []string{"—"}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", typ.Name(), strings.Join(kinds, ", "), typ.Doc(), strings.Join(cert, ", "))
	}
	return b.String()
}

// TestModelTable checks (with -update: writes) the README's model table,
// generated from the registry, so that it lists exactly the registered
// types as they describe themselves.
func TestModelTable(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(readme, []byte(modelTableBegin)), bytes.Index(readme, []byte(modelTableEnd))
	if i < 0 || j < i {
		t.Fatalf("%s: no generated model table (markers %q … %q)", readmePath, modelTableBegin, modelTableEnd)
	}
	want := modelTableBegin + "\n" + modelTable(newModelTypes())
	got := string(readme[i:j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s: the model table is stale; regenerate it with go test ./cmd/streamer -run TestModelTable -update\n got:\n%s\nwant:\n%s", readmePath, got, want)
	}
	out := append(append(append([]byte(nil), readme[:i]...), want...), readme[j:]...)
	if err := os.WriteFile(readmePath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
