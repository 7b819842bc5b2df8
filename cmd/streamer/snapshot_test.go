package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// trainedState returns the encoding of a model of spec after a few events
// (a label of the spec's kind on every other one).
func trainedState(t *testing.T, types *online.Registry, spec online.Spec) []byte {
	t.Helper()
	m, err := types.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	tr := types.Lookup(spec.Type).Traits(spec.Params)
	x := make([]float64, spec.Dim)
	for i := range 60 {
		for j := range x {
			x[j] = float64((i*7+j*3)%11) - 5
		}
		label := 1.0
		switch {
		case tr.Kind == online.Classifier && x[0] < 0:
			label = -1
		case tr.Kind == online.Ordinal:
			label = float64(1 + i%tr.Levels)
		case tr.Kind == online.Ranking || tr.Kind == online.Regression:
			label = x[0] + 0.1*x[1]
		}
		y, _ := m.Label(label)
		m.Observe(x, y, i%2 == 0)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keyedState encodes states as a key-scoped model's (stream's format: magic
// "KEYD", count, then key and state per instance).
func keyedState(keys []string, states [][]byte) []byte {
	b := codec.AppendU32([]byte("KEYD"), uint32(len(keys)))
	for i, k := range keys {
		b = codec.AppendBytes(b, []byte(k))
		b = codec.AppendBytes(b, states[i])
	}
	return b
}

// TestSnapshotVerifyEveryType writes a snapshot holding one model of every
// registered type (each example configuration, plain and standardised), a
// key-scoped model and states written before the registry (format version 1
// and the refitted models' earlier encoding) and a challenger's rank
// state, and checks that `snapshot
// verify` calls it good and `inspect` reports every model with its n; then
// that a snapshot whose model state does not decode is reported BAD.
func TestSnapshotVerifyEveryType(t *testing.T) {
	types := newModelTypes()
	snap := &snapshot.Snapshot{Seq: 7, CreatedAt: time.Now().UTC(), Fingerprint: "test",
		Offsets: []snapshot.Offset{{Topic: "events", Partition: 0, Offset: 42}}}
	want := map[string]string{} // model name → a fragment inspect must print for it
	for _, typ := range types.Types() {
		for i, p := range typ.Examples() {
			for _, std := range []bool{false, true} {
				name := typ.Name() + "-" + string(rune('a'+i))
				if std {
					name += "-std"
				}
				b := trainedState(t, types, online.Spec{Type: typ.Name(), Dim: 3, Standardize: std, Params: p})
				snap.Models = append(snap.Models, snapshot.Model{Name: name, Type: typ.Name(), Fingerprint: "fp", Data: b})
				want[name] = "n=30"
			}
		}
		p := typ.Examples()[0]
		a := trainedState(t, types, online.Spec{Type: typ.Name(), Dim: 3, Params: p})
		b := trainedState(t, types, online.Spec{Type: typ.Name(), Dim: 3, Standardize: true, Params: p})
		name := typ.Name() + "-per-key"
		snap.Models = append(snap.Models, snapshot.Model{Name: name, Type: typ.Name(), Fingerprint: "fp",
			Data: keyedState([]string{"alice", "bob"}, [][]byte{a, b})})
		want[name] = "keys=2  n=60"
	}
	// With rank.challenger, which model ranks (not a model state).
	snap.Models = append(snap.Models, snapshot.Model{Name: engine.RankStateName, Type: engine.RankStateType, Data: []byte("mam-a")})
	want[engine.RankStateName] = "the model that ranks: mam-a"
	legacy, err := filepath.Glob("../../online/testdata/legacy/*.bin")
	if err != nil || len(legacy) < 10 {
		t.Fatalf("legacy states: %v %v", legacy, err)
	}
	for _, f := range legacy {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		typ, err := online.PeekType(b)
		if err != nil {
			t.Fatal(err)
		}
		if typ == "std" || typ == "mam_exact" || typ == "omam_exact" || typ == "rfrank" {
			m, err := types.Restore(b)
			switch {
			case err == nil:
				typ = m.Type()
			case typ == "rfrank":
				typ = "lsrrank"
			default:
				t.Fatalf("%s: %v", f, err)
			}
		}
		name := "legacy-" + strings.TrimSuffix(filepath.Base(f), ".bin")
		snap.Models = append(snap.Models, snapshot.Model{Name: name, Type: typ, Fingerprint: "fp", Data: b})
		want[name] = "bytes"
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "0000000007.snap"), snapshot.AppendEncode(nil, snap), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := inspectSnapshots(&out, types, dir, false); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), ": ok (seq 7") {
		t.Fatalf("verify output:\n%s", out.String())
	}
	out.Reset()
	if err := inspectSnapshots(&out, types, dir, true); err != nil {
		t.Fatalf("inspect: %v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	for name, frag := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), name+" ") {
				found = true
				if !strings.Contains(l, frag) || strings.Contains(l, "BAD") {
					t.Errorf("inspect line of %s: %q, want …%s…", name, l, frag)
				}
			}
		}
		if !found {
			t.Errorf("inspect does not list %s:\n%s", name, out.String())
		}
	}
	t.Logf("%d models of %d types verified", len(snap.Models), len(types.Types()))

	// A model state that does not decode makes the snapshot BAD (the
	// snapshot's own checksums are fine: the bytes were written so).
	for i, m := range snap.Models {
		if m.Type == "svm" && !strings.HasPrefix(m.Name, "legacy") {
			snap.Models[i].Data = m.Data[:len(m.Data)-3]
			break
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "0000000008.snap"), snapshot.AppendEncode(nil, snap), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = inspectSnapshots(&out, types, dir, false)
	if err == nil || !strings.Contains(out.String(), "0000000008.snap: BAD: model svm-") || !strings.Contains(out.String(), "0000000007.snap: ok") {
		t.Fatalf("a truncated model state: err %v\n%s", err, out.String())
	}
	// And a state recorded under another type than the one it holds.
	snap.Models = snap.Models[:1]
	snap.Models[0].Type = "logistic"
	if err := os.WriteFile(filepath.Join(dir, "0000000009.snap"), snapshot.AppendEncode(nil, snap), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := inspectSnapshots(&out, types, filepath.Join(dir, "0000000009.snap"), false); err == nil || !strings.Contains(out.String(), "recorded as logistic") {
		t.Fatalf("a state under the wrong type: err %v\n%s", err, out.String())
	}
}
