package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamer/streamer/internal/bench"
)

// TestBenchNoBroker runs `streamer bench --no-broker --stages --json` on a
// few events: the JSON report's setup says the records came from memory
// and were discarded, every run processed every event and had a record
// acknowledged per event (one model: one score each), the text tables on
// stderr say so too and carry the stages' table. --instances refuses it.
func TestBenchNoBroker(t *testing.T) {
	const events = 1500
	stdout, stderr, err := runBench(t, "--no-broker", "--stages", "--events", "1500", "--rounds", "2", "--warmup", "0",
		"--snapshot-every", "0", "--partitions", "3", "--dim", "4", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if rep.Setup.DataPath != (bench.DataPath{Input: "memory", Output: "discarded"}) || rep.Setup.Events != events {
		t.Errorf("setup %+v", rep.Setup)
	}
	if len(rep.Rounds) != 2 {
		t.Fatalf("%d rounds, want 2", len(rep.Rounds))
	}
	for _, rd := range rep.Rounds {
		if len(rd.Results) != 2 {
			t.Fatalf("round %d: %+v", rd.Round, rd)
		}
		for _, r := range rd.Results {
			if r.Events != events || r.Records != events || !(r.Rate() > 0) {
				t.Errorf("round %d %s: %+v", rd.Round, r.Mode, r)
			}
			if r.Mode == bench.Score && r.Learned["bench"] != events {
				t.Errorf("round %d: learned %v", rd.Round, r.Learned)
			}
		}
	}
	for _, want := range []string{"input: memory, output: discarded", "generating 1500 events", "| ratio, within each round |"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, _, err := runBench(t, "--no-broker", "--instances", "1", "--events", "10"); err == nil || !strings.Contains(err.Error(), "--no-broker") {
		t.Errorf("--no-broker --instances: %v, want a refusal naming --no-broker", err)
	}
}

// TestBenchMemProfile: --memprofile writes a profile of the bench's
// allocations (a gzipped pprof protocol buffer) in which each allocation
// counts: it holds the alloc_objects sample type and the workers the
// score runs allocate once per partition, which the default sampling
// (one allocation per 512 kB) would mostly miss.
func TestBenchMemProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mem.prof")
	if _, stderr, err := runBench(t, "--no-broker", "--memprofile", path, "--events", "300", "--rounds", "1", "--warmup", "0",
		"--snapshot-every", "0", "--partitions", "2", "--dim", "4"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("not a gzipped profile: %v", err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alloc_objects", "stream/engine.(*Engine).NewWorker"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the profile names no %q", want)
		}
	}
}
