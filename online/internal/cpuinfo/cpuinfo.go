// Package cpuinfo tells the kernels of vmath and dense whether AVX-512
// pays on this processor.
package cpuinfo

import "golang.org/x/sys/cpu"

// Wide512 reports whether the processor has AVX-512F and executes 512-bit
// instructions at full width, so that a kernel bound by its vector
// instructions does twice a 256-bit one's work per instruction: Intel's and
// AMD's Zen 5 (family 1Ah) do; Zen 4 (family 19h) splits each into two
// 256-bit halves, and its AVX-512 forms of such kernels measured no faster
// than AVX2.
var Wide512 = cpu.X86.HasAVX512F && !halfWidth512()

// amdFamily19 reports whether CPUID leaf 0's vendor registers (b, c, d)
// say "AuthenticAMD" and leaf 1's eax a gives family 19h.
func amdFamily19(b, c, d, a uint32) bool {
	if b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163 {
		return false
	}
	family := (a >> 8) & 0xf
	if family == 0xf {
		family += (a >> 20) & 0xff
	}
	return family == 0x19
}
