//go:build !e2efull

package tests

// e2eScale multiplies the streams of the crash and scale-out tests, and
// the seeds of TestChallengerPromotion: 1 here, 2 with -tags e2efull
// (e2esize_full_test.go), the streams' sizes before 2026-11-27 and the
// issue's 20 seeds. At 1, CI, which runs four of these tests two at a
// time, stays under fifteen minutes on two cores.
const e2eScale = 1
