package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// `streamer version` and `streamer --version` print the same line: the
// module version (and VCS revision when the build recorded one) and the Go
// version.
func TestVersion(t *testing.T) {
	run := func(args ...string) string {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	v := run("version")
	if !strings.HasPrefix(v, "streamer ") || !strings.Contains(v, runtime.Version()) {
		t.Fatalf("version: %q", v)
	}
	if f := run("--version"); f != v {
		t.Fatalf("--version %q, version %q", f, v)
	}
}
