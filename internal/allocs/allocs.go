// Package allocs measures a warm path's allocations in tests without the
// noise of the rest of the process.
//
// testing.AllocsPerRun counts every allocation of the process while it
// runs, and a garbage collection in the middle of it empties every
// sync.Pool: a pooled decode target or workspace is then rebuilt, slice by
// slice, and a path that allocates nothing when warm is counted at one
// allocation per call or more (a CI run on a loaded host saw it once).
// PerRun turns the collector off while it measures and keeps the least
// of three measurements: an allocation on the path itself is in all three.
package allocs

import (
	"runtime/debug"
	"testing"
)

// PerRun returns the allocations per call of f, as testing.AllocsPerRun
// does with runs calls, measured three times with the garbage collector
// off; the least of the three.
func PerRun(runs int, f func()) float64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	least := testing.AllocsPerRun(runs, f)
	for range 2 {
		if least == 0 {
			break
		}
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}
