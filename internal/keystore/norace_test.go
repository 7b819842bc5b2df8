//go:build !race

package keystore

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
