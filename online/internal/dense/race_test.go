//go:build race

package dense

// raceEnabled: under the race detector the tests run the kernels of one
// level only (the machine's): the concurrency they check is the same Go
// code whichever kernel the goroutines call.
const raceEnabled = true
