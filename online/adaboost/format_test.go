package adaboost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	goldenfile "github.com/streamer/streamer/online/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/format_v1.bin with the current encoder")

// formatEnsemble is the fixed ensemble of testdata/format_v1.bin: one
// member and two features, member and stump rounds of both polarities.
func formatEnsemble() *Ensemble {
	e := &Ensemble{dim: 3, members: 1, n: 7, stop: StopChance, rounds: []Round{
		{Member: -1, Feature: 1, Threshold: 0.375, Polarity: 1, Err: 0.125, Beta: 0.5 * math.Log(7)},
		{Member: 0, Feature: -1, Polarity: 1, Err: 0.25, Beta: 0.5 * math.Log(3)},
		{Member: -1, Feature: 0, Threshold: -2.5, Polarity: -1, Err: 0.375, Beta: 0.5 * math.Log(5.0/3)},
	}}
	e.build()
	return e
}

// TestFormat pins the encoding ("ADAB" version 1), checks that it decodes
// to the same rounds and scores, and that truncations, a trailing byte and
// corrupt fields are refused with ErrFormat, leaving the receiver
// unchanged.
func TestFormat(t *testing.T) {
	f := formatEnsemble()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := goldenfile.Compare(t, "format_v1.bin", b, *update)
	var g Ensemble
	if err := g.UnmarshalBinary(want); err != nil {
		t.Fatal(err)
	}
	if g.dim != f.dim || g.members != f.members || g.n != f.n || g.stop != f.stop || !slices.Equal(g.rounds, f.rounds) {
		t.Fatalf("decoded %+v, want %+v", g, *f)
	}
	if b2, _ := g.MarshalBinary(); !bytes.Equal(b2, want) {
		t.Fatal("re-encoding differs")
	}
	for _, x := range [][]float64{{1, -3, 0.5}, {0, 0, 0}, {-1, -2.5, 0.375}} {
		if p, q := g.Score(x), f.Score(x); p != q {
			t.Fatalf("decoded ensemble scores %v, want %v", p, q)
		}
	}
	keep := formatEnsemble()
	refuse := func(what string, b []byte) {
		t.Helper()
		if err := keep.UnmarshalBinary(b); !errors.Is(err, ErrFormat) {
			t.Fatalf("%s: %v, want ErrFormat", what, err)
		}
		if !slices.Equal(keep.rounds, f.rounds) || keep.stop != f.stop {
			t.Fatalf("%s: the receiver changed", what)
		}
	}
	for i := range len(want) {
		refuse("truncated", want[:i])
	}
	refuse("trailing byte", append(slices.Clone(want), 0))
	// Offsets: magic 0, version 4, dim 6, members 10, n 14, stop 18, rounds
	// 19, round 0 at 23: kind 23, index 24, threshold 28, polarity 36, err
	// 37, beta 45; round 1 (a member) at 53.
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	f64 := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	for _, c := range []struct {
		what string
		at   int
		b    []byte
	}{
		{"magic", 0, []byte("ADAC")},
		{"version", 4, []byte{2, 0}},
		{"dimension 0", 6, u32(0)},
		{"members > dim", 10, u32(4)},
		{"no rows", 14, u32(0)},
		{"stop 0", 18, []byte{0}},
		{"stop 4", 18, []byte{4}},
		{"no rounds", 19, u32(0)},
		{"too many rounds", 19, u32(MaxRounds + 1)},
		{"kind", 23, []byte{3}},
		{"stump feature", 24, u32(2)},
		{"threshold NaN", 28, f64(math.NaN())},
		{"threshold Inf", 28, f64(math.Inf(1))},
		{"polarity", 36, []byte{0}},
		{"error ½", 37, f64(0.5)},
		{"error NaN", 37, f64(math.NaN())},
		{"β 0", 45, f64(0)},
		{"β > BetaMax", 45, f64(BetaMax * 2)},
		{"member index", 53 + 1, u32(1)},
		{"member threshold", 53 + 5, f64(1)},
		{"member polarity", 53 + 13, []byte{2}},
	} {
		bad := slices.Clone(want)
		copy(bad[c.at:], c.b)
		refuse(c.what, bad)
	}
	// A perfect stop needs β = BetaMax on its last round.
	p := &Ensemble{dim: 1, members: 1, n: 4, stop: StopPerfect, rounds: []Round{{Member: 0, Feature: -1, Polarity: 1, Beta: BetaMax}}}
	pb, _ := p.MarshalBinary()
	if err := new(Ensemble).UnmarshalBinary(pb); err != nil {
		t.Fatalf("perfect: %v", err)
	}
	copy(pb[len(pb)-8:], f64(1))
	refuse("perfect with β 1", pb)
}

// FuzzUnmarshal: no input makes the decoder panic or fail without
// ErrFormat; a decoded ensemble scores inputs of its dimension and
// re-encodes to the same bytes.
func FuzzUnmarshal(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "format_v1.bin"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Ensemble
		if err := e.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if e.Dim() <= 1<<12 {
			e.Score(make([]float64, e.Dim()))
		}
		e.Weights(nil)
		if b2, _ := e.MarshalBinary(); !bytes.Equal(b, b2) {
			t.Fatal("re-encoding differs")
		}
	})
}
