//go:build amd64 && !purego

package cpuinfo

// halfWidth512 reports an AMD family 19h processor (Zen 3 and 4).
func halfWidth512() bool {
	_, b, c, d := cpuid(0, 0)
	a, _, _, _ := cpuid(1, 0)
	return amdFamily19(b, c, d, a)
}

//go:noescape
func cpuid(leaf, sub uint32) (a, b, c, d uint32)
