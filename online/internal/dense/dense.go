// Package dense holds the few dense kernels that the kernel-ranking solvers
// of online/rank spend their time in, written for the hardware: C += α·AᵀB
// (GemmTN), its symmetric form C += α·AᵀA on the upper triangle (SyrkTN),
// and an upper Cholesky factorisation A = UᵀU with its solve — all on
// row-major float64 matrices with a row stride (the layout of gonum's
// blas64.General and blas64.Symmetric with blas.Upper).
//
// The products follow the BLIS design: blocks of A (kc × mc) and B
// (kc × nc) are packed into contiguous slivers and a 6 × 8 micro-kernel
// accumulates one tile of C in twelve registers. On amd64 with AVX2 and
// FMA the micro-kernel and axpy are assembly (kernel_amd64.s, 16 flops per
// cycle per core at best); where AVX-512 runs at full width (Zen 5, Intel:
// cpuinfo.Wide512) a second micro-kernel takes two tiles side by side in
// twelve 512-bit registers (32 flops per cycle at best; every element
// summed in the same order, so the same bits). Elsewhere, or with the
// build tag purego, they are plain Go. The Cholesky factorisation is recursive (Gustavson): half
// the matrix is factorised, the off-diagonal block solved by a recursive
// triangular solve and the trailing block updated by SyrkTN, so nearly all
// of its m³/3 flops run in the micro-kernel; the triangular solves and the
// trailing updates are split over goroutines.
//
// gonum's pure-Go BLAS and LAPACK run these operations three to six times
// slower (see BenchmarkCholesky); this package exists only for that gap.
// The results agree with gonum's Dpotrf and with naive products to
// rounding (dense_test.go).
package dense

import (
	"fmt"
	"math"
	"sync"
)

const (
	mr = 6    // rows of a micro-tile
	nr = 8    // columns of a micro-tile
	kc = 256  // depth of a packed block
	mc = 96   // rows of a packed block of A (a multiple of mr)
	nc = 2048 // columns of a packed block of B (a multiple of nr)
)

// Workspace holds the packing buffers of GemmTN and SyrkTN. The zero value
// is ready to use; it sizes itself on first use and then does not
// allocate. A Workspace is not safe for concurrent use.
type Workspace struct {
	ap   []float64 // packed A block: mc/mr slivers of kc × mr
	bp   []float64 // packed B block: nc/nr slivers of kc × nr
	tile [mr * nr]float64
}

// Reserve sizes the buffers for products with n columns and depth k, so
// that the first such product does not allocate either.
func (w *Workspace) Reserve(n, k int) {
	if need := mc * min(k, kc); len(w.ap) < need {
		w.ap = make([]float64, mc*kc)
	}
	if need := min(k, kc) * roundUp(min(n, nc), nr); len(w.bp) < need {
		w.bp = make([]float64, need)
	}
}

// GemmTN computes C += alpha·AᵀB for C m × n (row stride ldc), A k × m
// (row stride lda) and B k × n (row stride ldb). It panics if a slice is
// too short for its dimensions and stride.
func (w *Workspace) GemmTN(m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	check("GemmTN", m, n, k, a, lda, b, ldb, c, ldc)
	w.gemm(m, n, k, alpha, a, lda, b, ldb, c, ldc, false, 0)
}

// SyrkTN computes the upper triangle of C += alpha·AᵀA for C n × n (row
// stride ldc) and A k × n (row stride lda); the strictly lower triangle of
// C is not touched. It panics if a slice is too short.
func (w *Workspace) SyrkTN(n, k int, alpha float64, a []float64, lda int, c []float64, ldc int) {
	check("SyrkTN", n, n, k, a, lda, a, lda, c, ldc)
	w.gemm(n, n, k, alpha, a, lda, a, lda, c, ldc, true, 0)
}

func check(op string, m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	switch {
	case m < 0 || n < 0 || k < 0:
		panic(fmt.Sprintf("dense: %s: negative dimension %d×%d×%d", op, m, n, k))
	case lda < max(1, m) || ldb < max(1, n) || ldc < max(1, n):
		panic(fmt.Sprintf("dense: %s: bad stride", op))
	case k > 0 && (len(a) < (k-1)*lda+m || len(b) < (k-1)*ldb+n):
		panic(fmt.Sprintf("dense: %s: A or B too short", op))
	case m > 0 && len(c) < (m-1)*ldc+n:
		panic(fmt.Sprintf("dense: %s: C too short", op))
	}
}

// gemm computes C[i,j] += alpha·Σ_p A[p,i]·B[p,j] for i < m, j < n; with
// upper, only where i ≤ j + off (the upper triangle of a C whose column 0
// is column off of the whole matrix).
func (w *Workspace) gemm(m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int, upper bool, off int) {
	if m == 0 || n == 0 || k == 0 || alpha == 0 {
		return
	}
	w.Reserve(n, k)
	for jc := 0; jc < n; jc += nc {
		ncc := min(nc, n-jc)
		mEnd := m
		if upper {
			mEnd = min(m, jc+ncc+off)
		}
		for pc := 0; pc < k; pc += kc {
			kcc := min(kc, k-pc)
			pack(w.bp, b[pc*ldb+jc:], ldb, kcc, ncc, nr)
			for ic := 0; ic < mEnd; ic += mc {
				mcc := min(mc, mEnd-ic)
				pack(w.ap, a[pc*lda+ic:], lda, kcc, mcc, mr)
				w.macro(kcc, mcc, ncc, ic, jc, alpha, c, ldc, upper, off)
			}
		}
	}
}

// macro multiplies the packed blocks into C[ic:ic+mcc, jc:jc+ncc]: one B
// sliver at a time, or two where useWide (kernel2 on each pair of full
// tiles).
func (w *Workspace) macro(kcc, mcc, ncc, ic, jc int, alpha float64, c []float64, ldc int, upper bool, off int) {
	for jr := 0; jr < ncc; {
		if useWide && jr+2*nr <= ncc {
			w.macroPair(kcc, mcc, jr, ic, jc, alpha, c, ldc, upper, off)
			jr += 2 * nr
			continue
		}
		for ir := 0; ir < mcc; ir += mr {
			if !w.tileAt(kcc, mcc, ncc, ir, jr, ic, jc, alpha, c, ldc, upper, off) {
				break
			}
		}
		jr += nr
	}
}

// macroPair is macro for the full B slivers at jr and jr + nr.
func (w *Workspace) macroPair(kcc, mcc, jr, ic, jc int, alpha float64, c []float64, ldc int, upper bool, off int) {
	bs := w.bp[jr*kcc : (jr+2*nr)*kcc]
	gj := jc + jr
	for ir := 0; ir < mcc; ir += mr {
		gi := ic + ir
		if mcc-ir >= mr && (!upper || gi+mr-1 <= gj+off) {
			kernel2(kcc, w.ap[ir*kcc:(ir+mr)*kcc], bs, c[gi*ldc+gj:], ldc, alpha)
			continue
		}
		left := w.tileAt(kcc, mcc, jr+2*nr, ir, jr, ic, jc, alpha, c, ldc, upper, off)
		right := w.tileAt(kcc, mcc, jr+2*nr, ir, jr+nr, ic, jc, alpha, c, ldc, upper, off)
		if !left && !right {
			break // these tiles and the ones below them are under the diagonal
		}
	}
}

// tileAt multiplies A sliver ir by B sliver jr into their tile of C,
// ncc bounding the block's columns; with upper it reports false, and
// computes nothing, when the tile (and so every one below it) is under
// the diagonal.
func (w *Workspace) tileAt(kcc, mcc, ncc, ir, jr, ic, jc int, alpha float64, c []float64, ldc int, upper bool, off int) bool {
	cols := min(nr, ncc-jr)
	bs := w.bp[jr*kcc : (jr+nr)*kcc]
	gi, gj := ic+ir, jc+jr
	if upper && gi > gj+cols-1+off {
		return false
	}
	rows := min(mr, mcc-ir)
	as := w.ap[ir*kcc : (ir+mr)*kcc]
	if rows == mr && cols == nr && (!upper || gi+mr-1 <= gj+off) {
		kernel(kcc, as, bs, c[gi*ldc+gj:], ldc, alpha)
		return true
	}
	clear(w.tile[:])
	kernel(kcc, as, bs, w.tile[:], nr, alpha)
	for r := range rows {
		crow := c[(gi+r)*ldc+gj : (gi+r)*ldc+gj+cols]
		t := w.tile[r*nr : r*nr+cols]
		q0 := 0
		if upper {
			q0 = max(0, gi+r-gj-off)
		}
		for q := q0; q < cols; q++ {
			crow[q] += t[q]
		}
	}
	return true
}

// pack copies src[0:kcc, 0:cols] (row stride ld) into slivers of w
// columns, zero-padded: dst[s·kcc + p·w + q] = src[p, s+q]. Blocks of A
// are packed with w = mr, blocks of B with w = nr.
func pack(dst, src []float64, ld, kcc, cols, w int) {
	for s := 0; s < cols; s += w {
		n := min(w, cols-s)
		d := dst[s*kcc : s*kcc+kcc*w]
		for p := range kcc {
			dp := d[p*w : p*w+w]
			copy(dp, src[p*ld+s:p*ld+s+n])
			if n < w {
				clear(dp[n:])
			}
		}
	}
}

// kernelGo is the portable micro-kernel.
func kernelGo(k int, a, b, c []float64, ldc int, alpha float64) {
	var acc [mr][nr]float64
	for p := range k {
		ap := a[p*mr : p*mr+mr]
		bp := (*[nr]float64)(b[p*nr : p*nr+nr])
		for r, ar := range ap {
			row := &acc[r]
			for q, bq := range bp {
				row[q] += ar * bq
			}
		}
	}
	for r := range mr {
		crow := c[r*ldc : r*ldc+nr]
		for q := range nr {
			crow[q] += alpha * acc[r][q]
		}
	}
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// pool recycles workspaces for the parallel operations.
var pool = sync.Pool{New: func() any { return new(Workspace) }}

// parallel runs fn(t) for t in [0, workers) on workers goroutines (fn(0)
// on the caller's), each with a workspace of its own, and waits.
func parallel(workers int, fn func(t int, w *Workspace)) {
	var wg sync.WaitGroup
	for t := 1; t < workers; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := pool.Get().(*Workspace)
			fn(t, w)
			pool.Put(w)
		}()
	}
	w := pool.Get().(*Workspace)
	fn(0, w)
	pool.Put(w)
	wg.Wait()
}

// minParallel is the flop count below which an operation runs on one
// goroutine.
const minParallel = 4 << 20

// GemmTNParallel is GemmTN with the columns of C split over up to workers
// goroutines.
func GemmTNParallel(workers, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	check("GemmTN", m, n, k, a, lda, b, ldb, c, ldc)
	gemmParallel(workers, m, n, k, alpha, a, lda, b, ldb, c, ldc, false)
}

// SyrkTNParallel is SyrkTN with the columns of C split over up to workers
// goroutines, each with the same share of the triangle.
func SyrkTNParallel(workers, n, k int, alpha float64, a []float64, lda int, c []float64, ldc int) {
	check("SyrkTN", n, n, k, a, lda, a, lda, c, ldc)
	gemmParallel(workers, n, n, k, alpha, a, lda, a, lda, c, ldc, true)
}

// gemmParallel runs gemm on column blocks of C, one per goroutine; small
// products run on the caller's goroutine.
func gemmParallel(workers, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int, upper bool) {
	flops := 2 * m * n * k
	if upper {
		flops /= 2
	}
	workers = min(workers, n/(4*nr))
	if workers <= 1 || flops < minParallel {
		w := pool.Get().(*Workspace)
		w.gemm(m, n, k, alpha, a, lda, b, ldb, c, ldc, upper, 0)
		pool.Put(w)
		return
	}
	parallel(workers, func(t int, w *Workspace) {
		j0, j1 := split(n, workers, t, upper)
		if j1 <= j0 {
			return
		}
		rows, off := m, 0
		if upper { // the rows below j1 lie under the diagonal
			rows, off = j1, j0
		}
		w.gemm(rows, j1-j0, k, alpha, a, lda, b[j0:], ldb, c[j0:], ldc, upper, off)
	})
}

// split returns part t of [0, n) in workers parts on multiples of nr:
// equal widths, or, for a triangle, equal areas (column j has j+1
// entries).
func split(n, workers, t int, triangle bool) (int, int) {
	at := func(t int) int {
		if t >= workers {
			return n
		}
		f := float64(t) / float64(workers)
		if triangle {
			f = math.Sqrt(f)
		}
		return min(n, roundUp(int(f*float64(n)), nr))
	}
	return at(t), at(t + 1)
}

// axpyGo is the portable y += alpha·x (len(y) = len(x)).
func axpyGo(alpha float64, x, y []float64) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}
