//go:build !race

package stream

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
