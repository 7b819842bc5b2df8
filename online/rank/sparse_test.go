package rank

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamer/streamer/online/internal/sparse"
)

// sparseData draws n sparse rows of dimension dim built from events with
// duplicates and cancelling entries (some empty), and a non-linear target.
func sparseData(rng *rand.Rand, n, dim int) ([]sparse.Row, [][]float64, []float64) {
	var b sparse.Builder
	var X []sparse.Row
	var D [][]float64
	var y []float64
	for range n {
		var idx []int32
		var val []float64
		for k := range rng.IntN(20) {
			i := int32(rng.IntN(dim))
			v := rng.NormFloat64()
			switch k % 6 {
			case 2:
				idx, val = append(idx, i, i), append(val, v, -v)
				continue
			case 4:
				if len(idx) > 0 {
					i = idx[0]
				}
			}
			idx, val = append(idx, i), append(val, v)
		}
		r := sparse.Clone([]sparse.Row{b.Build(idx, val)})[0]
		x := make([]float64, dim)
		for k, i := range r.Idx {
			x[i] = r.Val[k]
		}
		X, D = append(X, r), append(D, x)
		y = append(y, math.Sin(x[0]+x[1]*x[2])+x[3]*x[3]+0.1*rng.NormFloat64())
	}
	return X, D, y
}

// TestFitSparseMatchesDense: FitSparse and Fit on the densified rows give
// the same α and b, and the same scores on held-out rows (sparse through
// the index and by merges, dense input, dense model) within 1e-9 of the
// scale of the scores, for LSRRank, MLSRRank and KRR with rbf and linear
// kernels; PredictSparse allocates nothing.
func TestFitSparseMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const dim = 40
	X, D, y := sparseData(rng, 150, dim)
	Xt, Dt, _ := sparseData(rng, 60, dim)
	flat := slices.Concat(D...)
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"lsrrank", Config{Method: LSRRank, Kernels: []Kernel{{Type: RBF, Gamma: 0.2}}, Lambda: 1e-3}},
		{"mlsrrank", Config{Method: LSRRank, Kernels: []Kernel{{Type: RBF, Gamma: 0.05}, {Type: RBF, Gamma: 1, V: 3}}, Lambda: 1e-2}},
		{"krr", Config{Method: KRR, Kernels: []Kernel{{Type: RBF, Gamma: 0.3}, {Type: Linear, V: 2}}, Lambda: 0.1}},
		{"lsrrank_linear", Config{Method: LSRRank, Kernels: []Kernel{{Type: Linear}}, Lambda: 1e-2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			ms, err := FitSparse(ctx, X, dim, y, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			md, err := Fit(ctx, flat, dim, y, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !ms.Sparse() || md.Sparse() {
				t.Fatal("Sparse() wrong")
			}
			var scale float64
			for i, x := range Dt {
				scale = max(scale, math.Abs(md.Predict(x)))
				_ = i
			}
			buf := make([]float64, ms.N())
			var worst float64
			for i, x := range Xt {
				want := md.Predict(Dt[i])
				for name, got := range map[string]float64{
					"index": ms.PredictSparse(x, buf), "merge": ms.PredictSparse(x, nil),
					"dense input": ms.Predict(Dt[i]), "dense model": md.PredictSparse(x, nil),
				} {
					e := math.Abs(got-want) / scale
					worst = max(worst, e)
					if e > 1e-9 {
						t.Fatalf("row %d, %s: %v, dense %v", i, name, got, want)
					}
				}
				// The index's path (one rbf: the exps eight at a time) is
				// the merge's, bit for bit.
				if a, b := ms.PredictSparse(x, buf), ms.PredictSparse(x, nil); math.Float64bits(a) != math.Float64bits(b) {
					t.Fatalf("row %d: index %v, merge %v", i, a, b)
				}
			}
			t.Logf("largest difference %.1e of the scores' scale %.3g", worst, scale)
			if a := testing.AllocsPerRun(100, func() { ms.PredictSparse(Xt[1], buf) }); a != 0 {
				t.Fatalf("PredictSparse: %v allocations", a)
			}
			b, err := ms.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalModel(b)
			if err != nil {
				t.Fatal(err)
			}
			if b2, _ := got.MarshalBinary(); !bytes.Equal(b, b2) {
				t.Fatal("re-encoding differs")
			}
			for i, x := range Xt {
				if got.PredictSparse(x, buf) != ms.PredictSparse(x, buf) {
					t.Fatalf("row %d: decoded model scores differently", i)
				}
			}
		})
	}
}

// TestFormatSparse pins the encoding of an exact model with sparse rows
// ("RKSP" version 1).
func TestFormatSparse(t *testing.T) {
	k, err := newKernels([]Kernel{{Gamma: 0.5, V: 1}, {Type: Linear, V: 4}})
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{method: LSRRank, k: k, lambda: 0.03, d: 1 << 18, alpha: pattern(3, 0.25), b: -0.125}
	m.setSparse([]sparse.Row{
		{Idx: []int32{5, 70000, 262143}, Val: []float64{1, -1, 0.5}},
		{Idx: []int32{}, Val: []float64{}},
		{Idx: []int32{70000}, Val: []float64{2}},
	})
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, "format_v1_sparse.bin", b)
	got, err := UnmarshalModel(want)
	if err != nil {
		t.Fatal(err)
	}
	if got.method != m.method || got.lambda != m.lambda || got.d != m.d || got.b != m.b ||
		!slices.Equal(got.alpha, m.alpha) || !slices.Equal(got.k.ks, m.k.ks) || len(got.sx) != len(m.sx) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	x := sparse.Row{Idx: []int32{5, 70000}, Val: []float64{0.5, 1}}
	if got.PredictSparse(x, nil) != m.PredictSparse(x, nil) {
		t.Fatal("decoded model predicts differently")
	}
	truncations(t, want, func(b []byte) error { _, err := UnmarshalModel(b); return err })
	for _, bad := range []struct {
		at int
		v  byte
	}{{4, 2}, {6, 7}, {3, 'X'}, {len(want) - 24 - 4 - 16 - 1, 1}} { // version, method, magic, row 0's last index ≥ d
		c := slices.Clone(want)
		c[bad.at] = bad.v
		if _, err := UnmarshalModel(c); !errors.Is(err, ErrFormat) {
			t.Errorf("byte %d = %d: %v", bad.at, bad.v, err)
		}
	}
}

// hashedRows is BenchmarkFitSparse2000's window: n hashed events (31
// entries among 2^18 indices, three of them among 30 common ones).
func hashedRows(n int) ([]sparse.Row, []float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	var bl sparse.Builder
	X := make([]sparse.Row, n)
	y := make([]float64, len(X))
	for i := range X {
		idx, val := make([]int32, 31), make([]float64, 31)
		for k := range idx {
			idx[k], val[k] = int32(rng.IntN(1<<18)), 1
			if k < 3 {
				idx[k] = int32(k*10 + rng.IntN(10)) // a few common features
			}
		}
		X[i] = sparse.Clone([]sparse.Row{bl.Build(idx, val)})[0]
		y[i] = float64(idx[0] % 3)
	}
	return X, y
}

// BenchmarkFitSparse2000 is a refit of lsrrank's default window (2 000
// rows) of hashed events (31 entries among 2^18 indices). Target: no
// slower than the dense exact fit of 2 000 rows of a few dozen features
// (the Cholesky, about 0.1 s here, dominates both).
func BenchmarkFitSparse2000(b *testing.B) {
	X, y := hashedRows(2000)
	cfg := Config{Method: LSRRank, Kernels: []Kernel{{Type: RBF, Gamma: 1.0 / 31}}, Lambda: 1e-3}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FitSparse(context.Background(), X, 1<<18, y, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPredictSparse2000 scores a hashed event with the lsrrank model
// of BenchmarkFitSparse2000's window (2 000 rows, one rbf kernel) through
// its inverted index: the per-event score of a sparse exact ranking model.
// Target: ≤ 10 µs, 0 allocs (the exps eight at a time since 2026-11-27).
func BenchmarkPredictSparse2000(b *testing.B) {
	X, y := hashedRows(2000)
	m, err := FitSparse(context.Background(), X, 1<<18, y, Config{Method: LSRRank, Kernels: []Kernel{{Type: RBF, Gamma: 1.0 / 31}}, Lambda: 1e-3})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]float64, m.N())
	b.ReportAllocs()
	var s float64
	i := 0
	for b.Loop() {
		s += m.PredictSparse(X[i%len(X)], buf)
		i++
	}
	_ = s
}
