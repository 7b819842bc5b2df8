//go:build e2efull

package tests

// e2eScale: the full streams of the crash and scale-out tests (e2esize_test.go).
const e2eScale = 2
