package dense

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"

	"github.com/streamer/streamer/internal/allocs"
)

func randSlice(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.NormFloat64()
	}
	return s
}

// bothKernels runs f with the assembly kernels (where the machine has
// them: AVX-512's two tiles at a time where it pays, then AVX2's one) and
// with the portable ones.
func bothKernels(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	savedAsm, savedWide := useAsm, useWide
	defer func() { useAsm, useWide = savedAsm, savedWide }()
	if raceEnabled { // one level is enough to check the goroutines
		f(t)
		return
	}
	if canWide { // where AVX-512F is, selected or not (Zen 4)
		useWide = true
		t.Run("avx512", f)
	}
	useWide = false
	if savedAsm {
		t.Run("asm", f)
	}
	useAsm = false
	t.Run("go", f)
}

// naiveTN returns C + alpha·AᵀB by the definition.
func naiveTN(m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int, upper bool) []float64 {
	out := append([]float64(nil), c...)
	for i := range m {
		for j := range n {
			if upper && i > j {
				continue
			}
			var s float64
			for p := range k {
				s += a[p*lda+i] * b[p*ldb+j]
			}
			out[i*ldc+j] += alpha * s
		}
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > tol*(1+math.Abs(want[i])) || math.IsNaN(got[i]) {
			t.Fatalf("%s: entry %d: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestGemmTN(t *testing.T) {
	bothKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		var w Workspace
		// Sizes around the tile and block edges: mr = 6, nr = 8, kc = 256, mc = 96.
		for _, dims := range [][3]int{{1, 1, 1}, {6, 8, 1}, {7, 9, 3}, {5, 7, 2}, {13, 17, 255}, {97, 33, 257},
			{96, 2049, 20}, {200, 300, 513}, {0, 5, 5}, {5, 0, 5}, {5, 5, 0}} {
			m, n, k := dims[0], dims[1], dims[2]
			lda, ldb, ldc := m+3, n+1, n+5
			a := randSlice(rng, max(1, k*lda))
			b := randSlice(rng, max(1, k*ldb))
			c := randSlice(rng, max(1, m*ldc))
			want := naiveTN(m, n, k, -0.7, a, lda, b, ldb, c, ldc, false)
			w.GemmTN(m, n, k, -0.7, a, lda, b, ldb, c, ldc)
			closeTo(t, fmt.Sprintf("GemmTN %v", dims), c, want, 1e-12)
			c2 := append([]float64(nil), want...)
			want2 := naiveTN(m, n, k, 1.3, a, lda, b, ldb, c2, ldc, false)
			GemmTNParallel(3, m, n, k, 1.3, a, lda, b, ldb, c2, ldc)
			closeTo(t, fmt.Sprintf("GemmTNParallel %v", dims), c2, want2, 1e-12)
		}
	})
}

func TestSyrkTN(t *testing.T) {
	bothKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		var w Workspace
		for _, dims := range [][2]int{{1, 1}, {6, 3}, {8, 8}, {13, 300}, {97, 7}, {513, 32}, {2100, 9}} {
			n, k := dims[0], dims[1]
			lda, ldc := n+2, n+3
			a := randSlice(rng, k*lda)
			c := randSlice(rng, n*ldc)
			want := naiveTN(n, n, k, 0.5, a, lda, a, lda, c, ldc, true)
			w.SyrkTN(n, k, 0.5, a, lda, c, ldc)
			// want equals c below the diagonal: the lower triangle is untouched.
			closeTo(t, fmt.Sprintf("SyrkTN %v", dims), c, want, 1e-12)
			c2 := append([]float64(nil), want...)
			want2 := naiveTN(n, n, k, -2, a, lda, a, lda, c2, ldc, true)
			SyrkTNParallel(2, n, k, -2, a, lda, c2, ldc)
			closeTo(t, fmt.Sprintf("SyrkTNParallel %v", dims), c2, want2, 1e-12)
		}
	})
}

// spd returns a random SPD n × n matrix (full, row stride ld): GᵀG/n + I.
func spd(rng *rand.Rand, n, ld int) []float64 {
	g := randSlice(rng, n*n)
	a := make([]float64, n*ld)
	for i := range n {
		for j := range n {
			var s float64
			for p := range n {
				s += g[p*n+i] * g[p*n+j]
			}
			a[i*ld+j] = s / float64(n)
		}
		a[i*ld+i]++
	}
	return a
}

func TestCholeskyAgainstGonum(t *testing.T) {
	bothKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range []int{1, 2, 7, 64, 65, 130, 301, 700} {
			ld := n + 1
			a := spd(rng, n, ld)
			ref := append([]float64(nil), a...)
			if !Cholesky(a, ld, n, 2) {
				t.Fatalf("n=%d: not positive definite", n)
			}
			if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: ld, Data: ref}); !ok {
				t.Fatalf("n=%d: gonum: not positive definite", n)
			}
			for i := range n {
				// Upper triangle: the factor; lower: untouched (gonum leaves it too).
				closeTo(t, fmt.Sprintf("n=%d row %d", n, i), a[i*ld:i*ld+n], ref[i*ld:i*ld+n], 1e-10)
			}
			// Solve against a known x.
			x := randSlice(rng, n)
			full := make([]float64, n*n)
			for i := range n {
				for j := i; j < n; j++ {
					var s float64
					for p := 0; p <= i; p++ {
						s += a[p*ld+i] * a[p*ld+j]
					}
					full[i*n+j], full[j*n+i] = s, s
				}
			}
			b := make([]float64, n)
			for i := range n {
				for j := range n {
					b[i] += full[i*n+j] * x[j]
				}
			}
			CholeskySolve(a, ld, n, b)
			closeTo(t, fmt.Sprintf("n=%d solve", n), b, x, 1e-8)
		}
	})
}

func TestCholeskyNotPD(t *testing.T) {
	for _, n := range []int{3, 200} {
		a := spd(rand.New(rand.NewPCG(7, 8)), n, n)
		a[(n-1)*n+n-1] = -5
		if Cholesky(a, n, n, 2) {
			t.Fatalf("n=%d: a matrix with a negative diagonal entry was factorised", n)
		}
		a[0] = math.NaN()
		if Cholesky(a, n, n, 2) {
			t.Fatalf("n=%d: a matrix with NaN was factorised", n)
		}
	}
}

func TestSyrkTNDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var w Workspace
	a, c := randSlice(rng, 32*512), make([]float64, 512*512)
	w.SyrkTN(512, 32, 1, a, 512, c, 512)
	if n := allocs.PerRun(10, func() { w.SyrkTN(512, 32, 1, a, 512, c, 512) }); n != 0 {
		t.Fatalf("SyrkTN allocates %v times per call", n)
	}
}

// BenchmarkSyrkTN is the update of the random-feature ranking sums: a
// rank-32 update of a 512 × 512 ΦᵀΦ (8.4 Mflop), the per-event path's
// cost every 32 events. Target on one Zen 5 core: ≥ 55 Gflop/s with the
// AVX-512 kernel (37–39 with AVX2's), 0 allocs.
func BenchmarkSyrkTN(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	var w Workspace
	a, c := randSlice(rng, 32*512), make([]float64, 512*512)
	b.ReportAllocs()
	for b.Loop() {
		w.SyrkTN(512, 32, 1, a, 512, c, 512)
	}
	b.ReportMetric(float64(b.N)*512*513*32/b.Elapsed().Seconds()/1e9, "Gflop/s")
}

// BenchmarkGemmTN is one packed block of a product: C (480 × 512) +=
// AᵀB with depth 256 (126 Mflop). Target on one Zen 5 core: ≥ 70 Gflop/s
// with the AVX-512 kernel (40–42 with AVX2's), 0 allocs.
func BenchmarkGemmTN(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	var w Workspace
	a, bb, c := randSlice(rng, 256*480), randSlice(rng, 256*512), make([]float64, 480*512)
	w.GemmTN(480, 512, 256, 1, a, 480, bb, 512, c, 512)
	b.ReportAllocs()
	for b.Loop() {
		w.GemmTN(480, 512, 256, 1, a, 480, bb, 512, c, 512)
	}
	b.ReportMetric(float64(b.N)*2*480*512*256/b.Elapsed().Seconds()/1e9, "Gflop/s")
}

// BenchmarkCholesky factorises an SPD matrix of order 2 000 and 4 000 with
// this package and with gonum's Dpotrf (the exact ranking refit's solve).
func BenchmarkCholesky(b *testing.B) {
	for _, n := range []int{2000, 4000} {
		g := randSlice(rand.New(rand.NewPCG(11, 12)), n*n)
		src := make([]float64, n*n)
		// A diagonally dominant SPD matrix, cheap to build.
		for i := range n {
			for j := i; j < n; j++ {
				src[i*n+j] = g[i*n+j] / float64(n)
			}
			src[i*n+i] = 2 + math.Abs(g[i*n+i])
		}
		work := make([]float64, n*n)
		flops := float64(n) * float64(n) * float64(n) / 3
		b.Run(fmt.Sprintf("n=%d/dense", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				copy(work, src)
				if !Cholesky(work, n, n, 2) {
					b.Fatal("not PD")
				}
			}
			b.ReportMetric(float64(b.N)*flops/b.Elapsed().Seconds()/1e9, "Gflop/s")
		})
		b.Run(fmt.Sprintf("n=%d/gonum", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				copy(work, src)
				if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Upper, N: n, Stride: n, Data: work}); !ok {
					b.Fatal("not PD")
				}
			}
			b.ReportMetric(float64(b.N)*flops/b.Elapsed().Seconds()/1e9, "Gflop/s")
		})
	}
}

// TestWideSameBits: the products taking two B slivers at a time (useWide,
// forced on wherever the machine does not select it) give the bits of one
// at a time, in products, symmetric updates on and off the diagonal, their
// parallel forms and the Cholesky factorisation. Where the machine has
// AVX-512F the pairs go to the AVX-512 kernel (kern6x16) and the single
// slivers to the AVX2 one; elsewhere both go to the machine's one-tile
// kernel, which checks the pairing itself.
func TestWideSameBits(t *testing.T) {
	t.Logf("paired slivers on kern6x16 (AVX-512F): %v", canWide && useAsm)
	saved := useWide
	defer func() { useWide = saved }()
	run := func(wide bool, f func() []float64) []float64 {
		useWide = wide
		return f()
	}
	same := func(what string, a, b []float64) {
		t.Helper()
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				t.Fatalf("%s: entry %d: two slivers at a time %v, one %v", what, i, a[i], b[i])
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range [][3]int{{6, 16, 1}, {6, 24, 3}, {7, 17, 5}, {13, 40, 255}, {97, 33, 257},
		{96, 2049, 20}, {200, 300, 513}, {12, 16, 9}} {
		m, n, k := dims[0], dims[1], dims[2]
		lda, ldb, ldc := m+3, n+1, n+5
		a, b, c := randSlice(rng, k*lda), randSlice(rng, k*ldb), randSlice(rng, m*ldc)
		gemm := func() []float64 {
			var w Workspace
			out := append([]float64(nil), c...)
			w.GemmTN(m, n, k, -0.7, a, lda, b, ldb, out, ldc)
			return out
		}
		same(fmt.Sprintf("GemmTN %v", dims), run(true, gemm), run(false, gemm))
		par := func() []float64 {
			out := append([]float64(nil), c...)
			GemmTNParallel(3, m, n, k, 1.3, a, lda, b, ldb, out, ldc)
			return out
		}
		same(fmt.Sprintf("GemmTNParallel %v", dims), run(true, par), run(false, par))
		sa, sc := randSlice(rng, k*(n+2)), randSlice(rng, n*(n+4))
		syrk := func() []float64 {
			var w Workspace
			out := append([]float64(nil), sc...)
			w.SyrkTN(n, k, 0.9, sa, n+2, out, n+4)
			return out
		}
		same(fmt.Sprintf("SyrkTN %v", dims), run(true, syrk), run(false, syrk))
		for _, off := range []int{-9, 3, 16} {
			upper := func() []float64 {
				var w Workspace
				out := append([]float64(nil), c...)
				w.gemm(m, n, k, 0.5, a, lda, b, ldb, out, ldc, true, off)
				return out
			}
			same(fmt.Sprintf("upper gemm %v off %d", dims, off), run(true, upper), run(false, upper))
		}
	}
	for _, n := range []int{50, 301, 700} {
		g := randSlice(rng, n*n)
		src := make([]float64, n*n)
		for i := range n {
			for j := i; j < n; j++ {
				src[i*n+j] = g[i*n+j] / float64(n)
			}
			src[i*n+i] = 2 + math.Abs(g[i*n+i])
		}
		chol := func() []float64 {
			out := append([]float64(nil), src...)
			if !Cholesky(out, n, n, 2) {
				t.Fatal("not PD")
			}
			return out
		}
		same(fmt.Sprintf("Cholesky %d", n), run(true, chol), run(false, chol))
	}
}
