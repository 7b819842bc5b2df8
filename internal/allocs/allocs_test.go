package allocs

import (
	"runtime/debug"
	"testing"
)

var sink []byte

// TestPerRun: a call that allocates is counted in full, one that does not
// is counted as nothing, and the collector's setting is restored.
func TestPerRun(t *testing.T) {
	if n := PerRun(100, func() { sink = make([]byte, 64) }); n != 1 {
		t.Errorf("a call that allocates once: %v allocations per run, want 1", n)
	}
	if n := PerRun(100, func() { sink = make([]byte, 64); sink = make([]byte, 128) }); n != 2 {
		t.Errorf("a call that allocates twice: %v allocations per run, want 2", n)
	}
	buf := make([]byte, 0, 64)
	if n := PerRun(100, func() { buf = append(buf[:0], "warm"...) }); n != 0 {
		t.Errorf("a call that reuses its buffer: %v allocations per run, want 0", n)
	}
	was := debug.SetGCPercent(50)
	PerRun(10, func() {})
	if now := debug.SetGCPercent(was); now != 50 {
		t.Errorf("GOGC after PerRun: %d, want the 50 set before", now)
	}
}
