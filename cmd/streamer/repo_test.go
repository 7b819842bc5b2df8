package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repository stays tidy: build outputs and local state are ignored,
// and no large binary is committed.
func TestRepositoryIgnoresOutputs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	for _, p := range []string{"streamer", "cmd/streamer/streamer", "state/snapshot-1.snap", "cmd/streamer/state/x",
		"report/report.html", "bench.test", "cpu.out"} {
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", p).Run(); err != nil {
			t.Errorf("%s is not ignored by .gitignore", p)
		}
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Stat(filepath.Join(root, f))
		if err == nil && fi.Size() > 8<<20 {
			t.Errorf("%s is committed and %d MB", f, fi.Size()>>20)
		}
	}
}
