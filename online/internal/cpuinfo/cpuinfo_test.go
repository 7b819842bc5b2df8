package cpuinfo

import "testing"

// TestAMDFamily19: the CPUID signatures of Zen 4 (family 19h: AVX-512 at
// half width) and Zen 5 (1Ah), an older AMD and an Intel.
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
	t.Logf("this machine: Wide512 %v (AVX-512 at half width: %v)", Wide512, halfWidth512())
}
