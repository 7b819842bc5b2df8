//go:build !amd64 || purego

package dense

// useAsm is false: no assembly kernels on this platform.
var useAsm = false

func kern6x8(k int, a, b, c *float64, ldc int, alpha float64) {
	panic("dense: no assembly kernel")
}

func axpy(n int, alpha float64, x, y *float64) {
	panic("dense: no assembly kernel")
}
