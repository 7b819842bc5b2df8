package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/bench"
)

// runBench runs `streamer bench args…` and returns its stdout and stderr.
func runBench(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench"}, args...))
	err = root.Execute()
	return out.String(), errb.String(), err
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchConfigJSON benchmarks a configuration of two model types
// (a classifier and a refitted ranking model) and reads the JSON report:
// every round has both pipelines, a score record per model and event, and
// the within-round ratio.
func TestBenchConfigJSON(t *testing.T) {
	path := writeConfig(t, `
models:
  - name: lr
    type: logistic
    features: {dim: 4}
  - name: rank
    type: lsrrank
    features: {dim: 4}
    kernel: {type: linear}
    window: {events: 200}
    refit: {every_events: 500}
calibration: {window: 500, every: 50}
`)
	const events = 2000
	stdout, stderr, err := runBench(t, "--config", path, "--events", "2000", "--rounds", "2", "--warmup", "0",
		"--snapshot-every", "0", "--partitions", "2", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if !strings.Contains(rep.Setup.Models, "lr (logistic)") || !strings.Contains(rep.Setup.Models, "rank (lsrrank)") ||
		rep.Setup.Dim != 4 || rep.Setup.Labels != "±1" || len(rep.Setup.Pipelines) != 2 ||
		rep.Setup.CalibrationWindow != 500 || rep.Setup.CalibrationEvery != 50 {
		t.Errorf("setup %+v (want the config's calibration: window 500, every 50)", rep.Setup)
	}
	if len(rep.Rounds) != 2 || len(rep.Warmup) != 0 {
		t.Fatalf("%d rounds, %d warm-up, want 2 and 0", len(rep.Rounds), len(rep.Warmup))
	}
	for i, rd := range rep.Rounds {
		if rd.Round != i+1 || len(rd.Results) != 2 || len(rd.Order) != 2 {
			t.Fatalf("round %d: %+v", i+1, rd)
		}
		for _, r := range rd.Results {
			want := int64(events)
			if r.Mode == bench.Score {
				want = 2 * events // one score per model
			}
			if r.Events != events || r.Records != want || !(r.Rate() > 0) || rd.Order[r.Position] != r.Mode {
				t.Errorf("round %d %s: %+v, want %d records", i+1, r.Mode, r, want)
			}
		}
		if v := rd.Ratios["score/passthrough"]; !(v > 0) {
			t.Errorf("round %d: ratio %v", i+1, v)
		}
	}
	if len(rep.Summary.Ratios) != 1 || rep.Summary.Ratios[0].N != 2 {
		t.Errorf("summary ratios %+v", rep.Summary.Ratios)
	}
	if !strings.Contains(stderr, "| ratio, within each round |") {
		t.Errorf("the text tables are not on stderr:\n%s", stderr)
	}
}

// TestBenchCalibrationFlags: the built-in model's bench keeps the
// service's default calibration; --calibration-window 0 turns it off; a
// refit period below 1 is refused.
func TestBenchCalibrationFlags(t *testing.T) {
	def := config.Default().Calibration
	for _, c := range []struct {
		args          []string
		window, every int
	}{
		{nil, def.Window, def.Every},
		{[]string{"--calibration-window", "0"}, 0, def.Every},
		{[]string{"--calibration-window", "300", "--calibration-every", "30"}, 300, 30},
	} {
		args := append([]string{"--events", "500", "--rounds", "1", "--warmup", "0", "--snapshot-every", "0", "--json"}, c.args...)
		stdout, stderr, err := runBench(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, stderr)
		}
		var rep bench.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("%v: stdout is not the JSON report: %v", c.args, err)
		}
		if rep.Setup.CalibrationWindow != c.window || rep.Setup.CalibrationEvery != c.every {
			t.Errorf("%v: calibration window %d every %d, want %d and %d", c.args,
				rep.Setup.CalibrationWindow, rep.Setup.CalibrationEvery, c.window, c.every)
		}
	}
	if _, _, err := runBench(t, "--events", "500", "--calibration-every", "0"); err == nil || !strings.Contains(err.Error(), "--calibration-every") {
		t.Errorf("--calibration-every 0: %v, want an error naming it", err)
	}
}

// TestBenchConfigLabels: an ordinal model gets level labels; a classifier
// and an ordinal model together are refused before anything runs.
func TestBenchConfigLabels(t *testing.T) {
	types := newModelTypes()
	ordinal := `
models:
  - name: o
    type: omam
    levels: 4
    kernel: {type: linear}
    features: {dim: 3}
  - name: r
    type: lsrrank
    levels: 3
    features: {dim: 3}
`
	c, err := config.Load(writeConfig(t, ordinal), nil, types)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bench.FromConfig(c, types)
	if err != nil {
		t.Fatal(err)
	}
	if m.Levels != 3 || m.Labels() != "1..3" || m.Dim != 3 {
		t.Errorf("levels %d (%s), dim %d; want the fewest levels, 3", m.Levels, m.Labels(), m.Dim)
	}
	_, stderr, err := runBench(t, "--config", writeConfig(t, ordinal+`
  - name: lr
    type: logistic
    features: {dim: 3}
`), "--events", "10")
	if err == nil || !strings.Contains(err.Error(), "lr (logistic, classifier) does not accept label 2") {
		t.Errorf("classifier with ordinal models: err %v\n%s", err, stderr)
	}
}
