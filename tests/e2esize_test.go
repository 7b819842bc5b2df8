//go:build !e2efull

package tests

// e2eScale multiplies the streams of the crash and scale-out tests: 1
// here, 2 with -tags e2efull (e2esize_full_test.go), their sizes before
// 2026-11-27. At 1, CI, which runs four of these tests two at a time,
// stays under ten minutes on two cores.
const e2eScale = 1
