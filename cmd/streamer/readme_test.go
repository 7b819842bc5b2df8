package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/streamer/streamer/online"
)

var update = flag.Bool("update", false, "rewrite generated documentation")

const (
	readmePath      = "../../docs/models.md"
	modelTableBegin = "<!-- BEGIN model table: generated from the model registry by `go test ./cmd/streamer -run TestModelTable -update` -->"
	modelTableEnd   = "<!-- END model table -->"
)

// modelTable renders the table of model types in docs/models.md from the registry:
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

// TestModelTable checks (with -update: writes) the model table of docs/models.md,
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

// TestDocLinks: every relative link of the README, docs/ and deploy/'s
// README points at a file that exists and, with #anchor into a Markdown
// file, at one of its headings (GitHub's anchors).
func TestDocLinks(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md", "../../deploy/README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			full := f
			if path != "" {
				full = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s: link %s: %v", f, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(full, ".md") && !slices.Contains(anchors(t, full), anchor) {
				t.Errorf("%s: link %s: no heading with that anchor in %s", f, target, full)
			}
		}
	}
}

// anchors returns the GitHub anchors of the headings of a Markdown file.
func anchors(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inCode := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
