//go:build e2efull

package tests

// e2eScale: the full streams of the crash and scale-out tests and the 20
// seeds of TestChallengerPromotion (e2esize_test.go).
const e2eScale = 2
