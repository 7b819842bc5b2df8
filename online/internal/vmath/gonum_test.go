package vmath

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// TestMulVecGonum: MulVec equals gonum's Dgemv of the float32-rounded
// matrix (in float64, another order of the sums and no FMA) to the
// rounding of the sums: |Δz_i| ≤ 2·cols·2⁻⁵³·Σ_j |A_ij x_j|.
func TestMulVecGonum(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for _, sh := range mulVecShapes {
			rows, cols := sh[0], sh[1]
			a, x := randMatrix(r, rows, cols)
			for i := range a {
				a[i] = float64(float32(a[i]))
			}
			want := make([]float64, rows)
			blas64.Gemv(blas.NoTrans, 1,
				blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: a},
				blas64.Vector{N: cols, Inc: 1, Data: x}, 0,
				blas64.Vector{N: rows, Inc: 1, Data: want})
			m := Pack(a, rows, cols)
			z := make([]float64, rows)
			m.MulVec(z, x)
			for i := range z {
				var mag float64
				for j := range cols {
					mag += math.Abs(a[i*cols+j] * x[j])
				}
				if d := math.Abs(z[i] - want[i]); d > 2*float64(cols)*0x1p-53*mag {
					t.Fatalf("%d×%d: z[%d] = %v, gonum %v (Σ|a x| = %v)", rows, cols, i, z[i], want[i], mag)
				}
			}
		}
	})
}
