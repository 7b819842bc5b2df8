//go:build !amd64 || purego

package cpuinfo

// halfWidth512 is false: the kernels here are not amd64 assembly.
func halfWidth512() bool { return false }
