package online

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/streamer/streamer/online/internal/legacytest"
)

// toLegacyPred is p as the manifest records predictions.
func toLegacyPred(p Prediction) legacytest.Pred {
	return legacytest.Pred{Score: p.Score, Label: p.Label, MistakeBound: p.MistakeBound, HasBound: p.HasBound,
		Probability: p.Probability, HasProbability: p.HasProbability, N: p.N, Version: p.Version}
}

// TestLegacyV1: the version-1 encodings written before the model registry
// (testdata/legacy) restore through the registry into models of the same
// type, dimension and number of examples that make bit-identical
// predictions on the recorded inputs; re-encoded (version 2) and restored
// again, they still do. The refitted models of the directory (svm,
// lsrrank, mlsrrank, krr, rfrank) are tested with their package.
func TestLegacyV1(t *testing.T) {
	dir := filepath.Join("testdata", "legacy")
	entries := legacytest.Load(t, dir)
	tested := map[string]int{}
	for _, e := range entries {
		switch e.Type {
		case MAMName, OMAMName, LogisticName, LDAName:
		default:
			continue
		}
		tested[e.Type]++
		t.Run(e.Name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 6 || string(b[:4]) != formatMagic || binary.LittleEndian.Uint16(b[4:]) != legacyVersion1 {
				t.Fatalf("%s is not a version-1 encoding", e.File)
			}
			if len(e.Inputs) != 8 || len(e.Predictions) != len(e.Inputs) {
				t.Fatalf("manifest: %d inputs, %d predictions", len(e.Inputs), len(e.Predictions))
			}
			m, err := testTypes.Restore(b)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			check := func(what string, m Model) {
				t.Helper()
				if m.Type() != e.Type || m.Dim() != e.Dim || m.Examples() != e.Examples {
					t.Fatalf("%s: type %q dim %d examples %d, want %q %d %d", what, m.Type(), m.Dim(), m.Examples(), e.Type, e.Dim, e.Examples)
				}
				if _, std := m.(*Standardized); std != e.Standardize {
					t.Fatalf("%s: %T, standardize %v", what, m, e.Standardize)
				}
			}
			check("restored", m)
			// The parameters are those the configuration gives today.
			if got, want := modelParams(m), legacyConfigParams(t, e); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored parameters %+v, the configuration gives %+v", got, want)
			}
			// Version 2 of the same state, before the replay changes it.
			enc, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if binary.LittleEndian.Uint16(enc[4:]) != formatVersion {
				t.Fatalf("re-encoded as version %d", binary.LittleEndian.Uint16(enc[4:]))
			}
			m2, err := testTypes.Restore(enc)
			if err != nil {
				t.Fatalf("Restore of the re-encoding: %v", err)
			}
			check("re-encoded", m2)
			if err := StateClose(m, m2, 0); err != nil {
				t.Fatalf("re-encoded state: %v", err)
			}
			if enc2, _ := m2.MarshalBinary(); !bytes.Equal(enc, enc2) {
				t.Fatal("the version-2 re-encoding does not re-encode to itself")
			}
			for i, x := range e.Inputs {
				want := e.Predictions[i]
				if got := toLegacyPred(m.Observe(x, 0, false)); !got.Same(want) {
					t.Errorf("prediction %d: %+v, recorded %+v", i, got, want)
				}
				if got := toLegacyPred(m2.Observe(x, 0, false)); !got.Same(want) {
					t.Errorf("prediction %d after re-encoding: %+v, recorded %+v", i, got, want)
				}
			}
			// UnmarshalBinary of the legacy bytes into a configured model
			// of the same type replaces it with the same state.
			into := m2
			if err := into.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if again, _ := into.MarshalBinary(); !bytes.Equal(again, enc) {
				t.Fatal("UnmarshalBinary of the version-1 bytes differs from Restore")
			}
		})
	}
	for _, typ := range []string{MAMName, OMAMName, LogisticName, LDAName} {
		if tested[typ] == 0 {
			t.Errorf("no legacy encoding of type %s in the manifest", typ)
		}
	}
}

// legacyConfigParams returns the parameters (a value of the type's
// parameter struct) of the model configured by the entry, decoded as the
// configuration does and completed.
func legacyConfigParams(t *testing.T, e legacytest.Entry) any {
	t.Helper()
	p := testTypes.Lookup(e.Type).NewParams()
	given := e.DecodeParams(t, p)
	if c, ok := p.(Completer); ok {
		c.Complete(e.Dim, given)
	}
	if err := p.Validate(e.Dim); err != nil {
		t.Fatalf("manifest yaml: %v", err)
	}
	return reflect.ValueOf(p).Elem().Interface()
}
