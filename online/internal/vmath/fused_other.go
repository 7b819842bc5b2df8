//go:build !amd64.v3

package vmath

// goFusesMulAdd is false: on amd64 below GOAMD64=v3 the compiler rounds
// every product of Go code (other architectures have no assembly here).
const goFusesMulAdd = false
