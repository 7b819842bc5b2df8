package vmath

// The kernels' implementations, from the portable Go definitions up.
const (
	levelGo     = iota // the Go code of this package
	levelAVX2          // AVX2 and FMA assembly, four lanes per register
	levelAVX512        // AVX-512F assembly, eight lanes per register
)

// Kernels names the implementation the kernels run on: "avx512" (amd64
// with AVX-512F), "avx2" (amd64 with AVX2 and FMA) or "go" (elsewhere, or
// with the build tag purego). Every one gives the same bits.
func Kernels() string {
	switch level {
	case levelAVX512:
		return "avx512"
	case levelAVX2:
		return "avx2"
	}
	return "go"
}
