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
		t.Skip("no AVX-512F here: gemv32 cannot run")
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

// TestAMDFamily19: the CPUID signatures of Zen 4 (family 19h: the
// projection stays on AVX2) and Zen 5 (1Ah), and another vendor's.
func TestAMDFamily19(t *testing.T) {
	const amdB, amdC, amdD = 0x68747541, 0x444d4163, 0x69746e65 // "Auth" "cAMD" "enti"
	for _, tc := range []struct {
		b, c, d, a uint32
		want       bool
	}{
		{amdB, amdC, amdD, 0x00a10f11, true},                    // EPYC 9004 (Zen 4)
		{amdB, amdC, amdD, 0x00a60f12, true},                    // Ryzen 7000 (Zen 4)
		{amdB, amdC, amdD, 0x00b00f21, false},                   // EPYC 9005 (Zen 5)
		{amdB, amdC, amdD, 0x00800f12, false},                   // family 17h (Zen 1)
		{0x756e6547, 0x6c65746e, 0x49656e69, 0x000806f8, false}, // GenuineIntel
	} {
		if got := amdFamily19(tc.b, tc.c, tc.d, tc.a); got != tc.want {
			t.Errorf("amdFamily19(eax %#x) = %v, want %v", tc.a, got, tc.want)
		}
	}
	_, b, c, d := cpuid(0, 0)
	a, _, _, _ := cpuid(1, 0)
	t.Logf("this machine: vendor %q, leaf 1 eax %#x, family 19h %v, wideGemv %v",
		string([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24), byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24), byte(c), byte(c >> 8), byte(c >> 16), byte(c >> 24)}),
		a, halfWidth512(), wideGemv)
}
