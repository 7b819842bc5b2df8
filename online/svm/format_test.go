package svm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"reflect"
	"slices"
	"testing"

	goldenfile "github.com/streamer/streamer/online/internal/golden"
	"github.com/streamer/streamer/online/internal/sparse"
)

var update = flag.Bool("update", false, "rewrite testdata/format_v1*.bin with the current encoder")

// goldenFile compares b with the golden file testdata/name (or, with
// -update, writes it) and returns the file's bytes.
func goldenFile(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	return goldenfile.Compare(t, name, b, *update)
}

// fixedModels are models with hand-set state (the solver is not part of
// the format): an RBF model and a polynomial one that did not converge.
func fixedModels() map[string]*Model {
	sp := &Model{
		Kernel:  Kernel{Type: RBF, Gamma: 0.125},
		Dim:     1 << 18,
		SVIndex: []int{0, 2, 3}, Coef: []float64{0.5, -0.25, -0.25},
		Alpha: []float64{0.5, 0, 0.25, 0.25},
		B:     0.375, Obj: -0.75, NBSV: 0, Iter: 9, Converged: true,
		w2: 0.6875,
	}
	sp.setSparse([]sparse.Row{
		{Idx: []int32{3, 70000, 262143}, Val: []float64{1, -1, 0.5}},
		{Idx: []int32{}, Val: []float64{}}, // an event without features
		{Idx: []int32{70000}, Val: []float64{2}},
	})
	return map[string]*Model{
		"format_v2_sparse.bin": sp,
		"format_v1.bin": {
			Kernel:  Kernel{Type: RBF, Gamma: 0.5},
			Dim:     3,
			SV:      [][]float64{{0.5, -1.25, 2}, {-0.375, 0.75, 1e-3}},
			SVIndex: []int{1, 3}, Coef: []float64{0.8, -0.8},
			Alpha: []float64{0, 0.8, 0, 0.8, 0},
			B:     -0.0625, Obj: -1.5, NBSV: 1, Iter: 17, Converged: true,
			w2: 2.75,
		},
		"format_v1_poly.bin": {
			Kernel:  Kernel{Type: Polynomial, Gamma: 0.25, Coef0: 1, Degree: 3},
			Dim:     2,
			SV:      [][]float64{{1, 2}, {-3, 4}, {5, -6}},
			SVIndex: []int{0, 2, 5}, Coef: []float64{1, 0.5, -1.5},
			Alpha: []float64{1, 0, 0.5, 0, 0, 1.5},
			B:     0.125, Obj: -3.25, NBSV: 2, Iter: 100000, Converged: false,
			w2: 9.5,
		},
	}
}

// TestFormat pins the model's encoding ("SVMM" version 1, and 2 for
// sparse support vectors): the bytes of
// fixed models, their decoding, and that every truncation fails with
// ErrFormat.
func TestFormat(t *testing.T) {
	for name, m := range fixedModels() {
		t.Run(name, func(t *testing.T) {
			b, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			want := goldenFile(t, name, b)
			var got Model
			if err := got.UnmarshalBinary(want); err != nil {
				t.Fatal(err)
			}
			m.pack() // the decoded model packs its dense rbf support vectors
			if !reflect.DeepEqual(&got, m) {
				t.Fatalf("decoded %+v, want %+v", got, *m)
			}
			if a, err := m.AppendBinary([]byte("prefix")); err != nil || !bytes.Equal(a, append([]byte("prefix"), want...)) {
				t.Fatalf("AppendBinary: %v", err)
			}
			for i := range len(want) {
				if err := new(Model).UnmarshalBinary(want[:i]); !errors.Is(err, ErrFormat) {
					t.Fatalf("truncated to %d of %d bytes: %v", i, len(want), err)
				}
			}
			// Corruptions with a valid checksum: the decoder itself must
			// refuse them.
			body := want[:len(want)-4]
			for _, c := range []struct {
				what string
				edit func(b []byte) []byte
			}{
				{"version", func(b []byte) []byte { b[4] = 7; return b }},
				{"dense as sparse or sparse as dense", func(b []byte) []byte { b[4] ^= 3; return b }},
				{"kernel type", func(b []byte) []byte { b[5] = 9; return b }},
				{"trailing byte", func(b []byte) []byte { return append(b, 0) }},
				{"missing byte", func(b []byte) []byte { return b[:len(b)-1] }},
				{"nSV > n", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[34:], 1000); return b }},
			} {
				bad := c.edit(slices.Clone(body))
				bad = binary.LittleEndian.AppendUint32(bad, crc32.ChecksumIEEE(bad))
				if err := new(Model).UnmarshalBinary(bad); !errors.Is(err, ErrFormat) {
					t.Errorf("%s: %v", c.what, err)
				}
			}
			flipped := slices.Clone(want)
			flipped[len(flipped)/2] ^= 1
			if err := new(Model).UnmarshalBinary(flipped); !errors.Is(err, ErrFormat) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("flipped bit: %v", err)
			}
		})
	}
}
