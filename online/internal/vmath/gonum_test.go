//go:build amd64 && !noasm && !gccgo && !safe

package vmath

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// TestMulVecGonum: MulVec equals gonum's Dgemv (its amd64 assembly, which
// the feature map used before) bit for bit.
func TestMulVecGonum(t *testing.T) {
	bothKernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for _, sh := range mulVecShapes {
			rows, cols := sh[0], sh[1]
			a, x := randMatrix(r, rows, cols)
			want := make([]float64, rows)
			blas64.Gemv(blas.NoTrans, 1,
				blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: a},
				blas64.Vector{N: cols, Inc: 1, Data: x}, 0,
				blas64.Vector{N: rows, Inc: 1, Data: want})
			m := Pack(a, rows, cols)
			z := make([]float64, rows)
			m.MulVec(z, x)
			for i := range z {
				if !same(z[i], want[i]) {
					t.Fatalf("%d×%d: z[%d] = %v, gonum %v", rows, cols, i, z[i], want[i])
				}
			}
		}
	})
}
