package tests

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// TestChangelogRestore: state written to the compacted changelog topic is
// the same as the file snapshot, and an instance with no local files
// restores from Kafka alone and carries on exactly where the state ends.
func TestChangelogRestore(t *testing.T) {
	const first, more = 30_000, 10_000
	b := crashBroker(t)
	dir := t.TempDir()
	// Two snapshots at least (the newest is corrupted below): one within
	// the first half, whatever the machine's speed, and one at the end.
	produceStream(t, b, first/2)
	a := startStreamer(t, b, crashYAML("cl", "scores", dir, "streamer.state"))
	waitFor(t, 60*time.Second, "a snapshot of the first half", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
		return len(files) > 0
	})
	produceStreamFrom(t, b, first/2, first-first/2)
	waitLearned(t, a, first, 60*time.Second)
	if err := a.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	fromFile, _ := finalState(t, dir)
	cl := snapshot.NewChangelogStore(b.Addrs(), "streamer.state", "test")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.Compact()
	fromLog, err := cl.LoadLatest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fromLog.Seq != fromFile.Seq || fromLog.Fingerprint != fromFile.Fingerprint || len(fromLog.Models) != len(fromFile.Models) {
		t.Fatalf("changelog snapshot seq %d / %d models, file snapshot seq %d / %d models", fromLog.Seq, len(fromLog.Models), fromFile.Seq, len(fromFile.Models))
	}
	for i, m := range fromFile.Models {
		if l := fromLog.Model(m.Name); l == nil || !bytes.Equal(l.Data, m.Data) || l.Fingerprint != m.Fingerprint {
			t.Fatalf("model %s: changelog state differs from the file state", fromFile.Models[i].Name)
		}
	}
	if len(fromLog.Offsets) != len(fromFile.Offsets) {
		t.Fatalf("offsets: changelog %v, file %v", fromLog.Offsets, fromFile.Offsets)
	}

	// The CLI sees the same: inspect prints it, verify accepts it, and
	// rejects it once a byte is flipped.
	out, err := exec.Command(binary, "snapshot", "inspect", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("snapshot inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"format version  1", "checksum        ok", "mam_rbf", "n=30000", "events/0"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("snapshot inspect output lacks %q:\n%s", want, out)
		}
	}
	if out, err := exec.Command(binary, "snapshot", "verify", dir).CombinedOutput(); err != nil {
		t.Fatalf("snapshot verify on good snapshots: %v\n%s", err, out)
	}
	bad := corruptNewest(t, dir)
	out, err = exec.Command(binary, "snapshot", "verify", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CORRUPT") {
		t.Fatalf("snapshot verify on a corrupted file: err %v, output:\n%s", err, out)
	}

	// A stateless instance: no snapshot dir, only the changelog.
	s := startStreamer(t, b, crashYAML("cl", "scores", `""`, "streamer.state"))
	for _, m := range []string{"mam_rbf", "mam_linear"} {
		if v := s.metric(t, "streamer_model_examples", `model="`+m+`"`); v != first {
			t.Fatalf("%s restored from the changelog with %v examples, want %d", m, v, first)
		}
	}
	produceStreamFrom(t, b, first, more)
	waitLearned(t, s, first+more, 60*time.Second)
	if err := s.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	final, err := cl.LoadLatest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range final.Models {
		if m.Type == engine.CalibrationStateType {
			continue // a model's calibration window, not a model
		}
		mod, err := testTypes.Restore(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if mod.Examples() != first+more {
			t.Fatalf("%s: %d examples after the stateless run, want exactly %d", m.Name, mod.Examples(), first+more)
		}
	}
}
