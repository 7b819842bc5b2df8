package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runEvalCmd runs `streamer eval` with args (-q added) and returns its
// stdout and stderr.
func runEvalCmd(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"eval", "-q"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// TestEvalCommandOutput: eval prints a summary table (a line per model and
// section) and then the two report paths on stdout; Ripley's training
// file, sorted by class, gets the sorted-label warning on stderr, which
// --shuffle silences; --shuffle and --seed are recorded in report.json.
func TestEvalCommandOutput(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := runEvalCmd(t, "-c", "../../configs/eval-ripley.yaml", "--data", "data/ripley_train.csv",
		"--test", "../../eval/testdata/ripley_test.csv", "-o", dir)
	t.Logf("stdout:\n%sstderr:\n%s", stdout, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 1+2*5+2 {
		t.Fatalf("%d lines on stdout, want a header, 2 per model (5), 2 paths", len(lines))
	}
	if lines[len(lines)-2] != filepath.Join(dir, "report.json") || lines[len(lines)-1] != filepath.Join(dir, "report.html") {
		t.Errorf("the last lines are not the report paths: %q", lines[len(lines)-2:])
	}
	for _, col := range []string{"model", "type", "section", " n ", " error ", "error 95% CI", "abstained", "decided error", "decided 95% CI", "auc", "log loss"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q has no %q", lines[0], col)
		}
	}
	if f := strings.Fields(lines[1]); len(f) < 4 || f[0] != "mam_rbf" || f[2] != "prequential" || f[3] != "250" {
		t.Errorf("first row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) < 4 || f[0] != "mam_rbf" || f[2] != "holdout" || f[3] != "1000" {
		t.Errorf("second row %q", lines[2])
	}
	if !strings.Contains(stderr, "warning:") || !strings.Contains(stderr, "labels look sorted") || !strings.Contains(stderr, "--shuffle") {
		t.Errorf("no sorted-label warning on stderr: %q", stderr)
	}
	if strings.Contains(stdout, "warning") {
		t.Errorf("the warning is on stdout")
	}

	dir2 := t.TempDir()
	stdout, stderr = runEvalCmd(t, "-c", "../../configs/eval-ripley.yaml", "--data", "data/ripley_train.csv",
		"-o", dir2, "--shuffle", "--seed", "42")
	if strings.Contains(stderr, "warning") {
		t.Errorf("--shuffle: warning %q", stderr)
	}
	if n := strings.Count(stdout, "\n"); n != 1+5+2 {
		t.Errorf("--shuffle without --test: %d lines on stdout:\n%s", n, stdout)
	}
	b, err := os.ReadFile(filepath.Join(dir2, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Data map[string]struct {
			Shuffled bool   `json:"shuffled"`
			Seed     *int64 `json:"seed"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Data["prequential"]; !d.Shuffled || d.Seed == nil || *d.Seed != 42 || len(rep.Warnings) != 0 {
		t.Errorf("report.json: data %+v, warnings %q", rep.Data, rep.Warnings)
	}
}
