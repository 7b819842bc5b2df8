//go:build !race

package engine

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
