package dense

import (
	"fmt"
	"math"
)

// Cholesky factorises the symmetric positive definite n × n matrix whose
// upper triangle is in a (row stride lda) as A = UᵀU, overwriting the upper
// triangle with U; the strictly lower triangle is not touched. It returns
// false, with a partly overwritten, if A is not numerically positive
// definite (a pivot ≤ 0 or NaN). The factorisation is recursive and runs
// its triangular solves and trailing updates on up to workers goroutines.
func Cholesky(a []float64, lda, n, workers int) bool {
	if n < 0 || lda < max(1, n) || (n > 0 && len(a) < (n-1)*lda+n) {
		panic(fmt.Sprintf("dense: Cholesky: %d × %d with stride %d in %d values", n, n, lda, len(a)))
	}
	return potrf(a, lda, n, max(1, workers))
}

// potrfBase is the order at or below which potrf factorises directly.
const potrfBase = 64

func potrf(a []float64, lda, n, workers int) bool {
	if n <= potrfBase {
		return potf2(a, lda, n)
	}
	n1 := n / 2
	n2 := n - n1
	if !potrf(a, lda, n1, workers) {
		return false
	}
	// U12 = U11⁻ᵀ A12, then A22 −= U12ᵀ U12.
	TrsmParallel(workers, a, lda, n1, a[n1:], lda, n2)
	SyrkTNParallel(workers, n2, n1, -1, a[n1:], lda, a[n1*lda+n1:], lda)
	return potrf(a[n1*lda+n1:], lda, n2, workers)
}

// potf2 is the unblocked right-looking factorisation, by rows.
func potf2(a []float64, lda, n int) bool {
	for j := range n {
		ajj := a[j*lda+j]
		if !(ajj > 0) {
			return false
		}
		ajj = math.Sqrt(ajj)
		a[j*lda+j] = ajj
		row := a[j*lda+j+1 : j*lda+n]
		inv := 1 / ajj
		for i := range row {
			row[i] *= inv
		}
		for i, u := range row {
			r := j + 1 + i
			axpyTo(-u, row[i:], a[r*lda+r:r*lda+n])
		}
	}
	return true
}

// trsmBase is the order at or below which trsm substitutes directly.
const trsmBase = 32

// Trsm solves UᵀX = B in place for the n × n upper triangular U (row
// stride ldu) and B n × cols (row stride ldb), recursively: all but the
// leaves' flops run in GemmTN.
func (w *Workspace) Trsm(u []float64, ldu, n int, b []float64, ldb, cols int) {
	if n <= trsmBase {
		for i := range n {
			bi := b[i*ldb : i*ldb+cols]
			inv := 1 / u[i*ldu+i]
			for j := range bi {
				bi[j] *= inv
			}
			for l := i + 1; l < n; l++ {
				axpyTo(-u[i*ldu+l], bi, b[l*ldb:l*ldb+cols])
			}
		}
		return
	}
	n1 := n / 2
	w.Trsm(u, ldu, n1, b, ldb, cols)
	w.gemm(n-n1, cols, n1, -1, u[n1:], ldu, b, ldb, b[n1*ldb:], ldb, false, 0)
	w.Trsm(u[n1*ldu+n1:], ldu, n-n1, b[n1*ldb:], ldb, cols)
}

// TrsmParallel is Trsm with the columns of B split over up to workers
// goroutines (they are independent).
func TrsmParallel(workers int, u []float64, ldu, n int, b []float64, ldb, cols int) {
	workers = min(workers, cols/(4*nr))
	if workers <= 1 || n*n*cols < minParallel {
		w := pool.Get().(*Workspace)
		w.Trsm(u, ldu, n, b, ldb, cols)
		pool.Put(w)
		return
	}
	parallel(workers, func(t int, w *Workspace) {
		j0, j1 := split(cols, workers, t, false)
		if j1 > j0 {
			w.Trsm(u, ldu, n, b[j0:], ldb, j1-j0)
		}
	})
}

// CholeskySolve solves UᵀU x = b in place for the factor U of Cholesky.
func CholeskySolve(u []float64, ldu, n int, b []float64) {
	if len(b) < n || (n > 0 && len(u) < (n-1)*ldu+n) {
		panic(fmt.Sprintf("dense: CholeskySolve: %d values for order %d", len(b), n))
	}
	// Uᵀz = b, by rows of U: z_i is final once the rows above are applied.
	for i := range n {
		b[i] /= u[i*ldu+i]
		axpyTo(-b[i], u[i*ldu+i+1:i*ldu+n], b[i+1:n])
	}
	// U x = z, backwards.
	for i := n - 1; i >= 0; i-- {
		row := u[i*ldu+i+1 : i*ldu+n]
		s := b[i]
		for j, v := range row {
			s -= v * b[i+1+j]
		}
		b[i] = s / u[i*ldu+i]
	}
}
