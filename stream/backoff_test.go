package stream

import (
	"testing"
	"time"
)

// Waits grow exponentially to the cap, each drawn from [d/2, d], and start
// over after a reset; they are not all equal (jitter).
func TestBackoff(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Second)
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000}
	seen := map[time.Duration]bool{}
	for round := range 20 {
		for i, c := range ceilings {
			c *= time.Millisecond
			if c > time.Second {
				c = time.Second
			}
			w := b.next()
			if w < c/2 || w > c {
				t.Fatalf("round %d, attempt %d: wait %v outside [%v, %v]", round, i, w, c/2, c)
			}
			seen[w] = true
		}
		b.reset()
	}
	if len(seen) < 20 {
		t.Fatalf("only %d distinct waits in 120: no jitter", len(seen))
	}
}
