package refit

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	goldenfile "github.com/streamer/streamer/online/internal/golden"
	"github.com/streamer/streamer/online/internal/sparse"

	"github.com/streamer/streamer/online/svm"
)

var update = flag.Bool("update", false, "rewrite testdata/format_*.bin with the current encoders")

// goldenFile compares b with the golden file testdata/name (or, with
// -update, writes it) and returns the file's bytes.
func goldenFile(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	return goldenfile.Compare(t, name, b, *update)
}

// svmGolden decodes one of online/svm's golden models (fixed state).
func svmGolden(t *testing.T, name string) *svm.Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "svm", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m := new(svm.Model)
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFormatSVMFit pins the encoding of a fitted SVM ("RSVM" version 1),
// without and with the probability's weighted models.
func TestFormatSVMFit(t *testing.T) {
	rbf, poly := svmGolden(t, "format_v1.bin"), svmGolden(t, "format_v1_poly.bin")
	poly2 := *poly
	poly2.B = -0.5
	for name, f := range map[string]*svmFit{
		"format_svmfit_v1.bin": {m: rbf, marginStats: marginStats{avgClip: 0.75, w: 1.625, tr: 42, n: 5, delta: 0.05}},
		"format_svmfit_prob_v1.bin": {m: poly, marginStats: marginStats{avgClip: -0.25, w: 3.5, tr: 7.125, n: 6, delta: 0.01},
			prob: &svm.ProbModel{H: 3, Models: []*svm.Model{poly, &poly2}}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := f.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			want := goldenFile(t, name, b)
			tr := &SVM{}
			g, err := tr.Unmarshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got := g.(*svmFit)
			if got.avgClip != f.avgClip || got.w != f.w || got.tr != f.tr || got.n != f.n || got.delta != f.delta ||
				(got.prob == nil) != (f.prob == nil) {
				t.Fatalf("decoded %+v, want %+v", got, f)
			}
			if b2, _ := got.MarshalBinary(); !bytes.Equal(b2, want) {
				t.Fatal("re-encoding differs")
			}
			x := []float64{0.25, -0.5, 1}[:f.m.Dim]
			if p, q := got.Predict(x), f.Predict(x); p != q {
				t.Fatalf("decoded fit predicts %+v, want %+v", p, q)
			}
			for i := range len(want) {
				if _, err := tr.Unmarshal(want[:i]); !errors.Is(err, ErrFormat) {
					t.Fatalf("truncated to %d of %d bytes: %v", i, len(want), err)
				}
			}
			if _, err := tr.Unmarshal(append(slices.Clone(want), 0)); !errors.Is(err, ErrFormat) {
				t.Fatalf("trailing byte: %v", err)
			}
			bad := slices.Clone(want)
			bad[4] = 2 // version
			if _, err := tr.Unmarshal(bad); !errors.Is(err, ErrFormat) {
				t.Fatalf("version 2: %v", err)
			}
		})
	}
}

// FuzzSVMFitUnmarshal: no input makes the fitted SVM's decoder panic or
// fail without ErrFormat; a decoded fit scores inputs of its dimension and
// re-encodes to the same bytes.
func FuzzSVMFitUnmarshal(f *testing.F) {
	for _, name := range []string{"format_svmfit_v1.bin", "format_svmfit_prob_v1.bin"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A fit on sparse rows (hashed features), with probability.
	evs := sparseStream(4, 60, 50, false)
	d := &Data{D: 50}
	for _, e := range evs {
		var bl sparse.Builder
		d.Rows = append(d.Rows, sparse.Clone([]sparse.Row{bl.Build(e.idx, e.val)})[0])
		d.Y = append(d.Y, e.y)
	}
	tr := &SVM{Params: svm.Params{Kernel: svm.Kernel{Type: svm.RBF, Gamma: 0.3}}, Delta: 0.05, ProbLevels: 3}
	fit, _, err := tr.Fit(context.Background(), d, nil)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := fit.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := (&SVM{}).Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		fit := g.(*svmFit)
		fit.Predict(make([]float64, fit.inputDim()))
		if fit.inputDim() > 0 {
			fit.predictSparse(sparse.Row{Idx: []int32{0}, Val: []float64{1}}, nil)
		}
		if b2, _ := fit.MarshalBinary(); !bytes.Equal(b, b2) {
			t.Fatal("re-encoding differs")
		}
	})
}
