package main

import (
	"slices"
	"testing"
)

// TestCycleFound: a callback that calls back into its caller's file (the
// publisher calls the pipeline's done, which consume.go passed it) makes
// the two files a set; moved to a file of its own, the calls go one way.
func TestCycleFound(t *testing.T) {
	for _, c := range []struct {
		dir  string
		want [][]string
	}{
		{"testdata/cyclic", [][]string{{"stream/consume.go", "stream/publisher.go"}}},
		{"testdata/oneway", nil},
	} {
		g, err := analyse(c.dir, "./cmd/x", "stream/", defaultRoots)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.files) < 2 {
			t.Fatalf("%s: files %v: the walk did not reach the publisher", c.dir, g.files)
		}
		got := g.cycles()
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%s: sets %v, want %v (edges %v)", c.dir, got, c.want, g.edges)
		}
	}
}
