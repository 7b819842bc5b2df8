//go:build amd64 && !purego

package vmath

import (
	"math/rand/v2"
	"testing"
)

// TestMulVecOtherWidth: MulVec under AVX-512 with the other projection
// kernel than the one this machine selected (gemv16 where wideGemv, gemv32
// where not) gives the definition's bits too.
func TestMulVecOtherWidth(t *testing.T) {
	if level < levelAVX512 {
		t.Skip("needs AVX-512F (cpu.X86.HasAVX512F false here): gemv32 cannot run")
	}
	saved := wideGemv
	defer func() { wideGemv = saved }()
	wideGemv = !saved
	r := rand.New(rand.NewPCG(1, 3))
	for _, sh := range mulVecShapes {
		rows, cols := sh[0], sh[1]
		a, x := randMatrix(r, rows, cols)
		m := Pack(a, rows, cols)
		z := make([]float64, rows)
		m.MulVec(z, x)
		want := refMulVec(a, rows, cols, x)
		for i := range z {
			if !same(z[i], want[i]) {
				t.Fatalf("wideGemv %v, %d×%d: z[%d] = %v, want %v", wideGemv, rows, cols, i, z[i], want[i])
			}
		}
	}
}
