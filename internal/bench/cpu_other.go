//go:build !unix

package bench

import "time"

// processCPU cannot be read here: the reports leave CPU out.
func processCPU() (time.Duration, bool) { return 0, false }
