//go:build race

package dense

// raceEnabled: under the race detector bothKernels runs the machine's
// kernels only: the concurrency checked is the same Go code whichever
// kernel the goroutines call.
const raceEnabled = true
