package stream

import (
	"context"
	"time"
)

// clockBase is the origin of monotonic.
var clockBase = time.Now()

// monotonic is the time since clockBase on the monotonic clock: for timing
// an interval, it reads the clock once where time.Now reads it twice (wall
// and monotonic).
func monotonic() time.Duration { return time.Since(clockBase) }

// poller paces a loop that polls a condition, backing off from 100 µs to
// 5 ms between checks. Its zero value is ready. The loop stays with the
// caller, which checks its own condition and calls sleep while it does
// not hold:
//
//	var w poller
//	for !done() {
//		if err := w.sleep(ctx); err != nil { … }
//	}
type poller struct{ wait time.Duration }

// sleep waits for the next check: nil once the pause has passed, ctx's
// error if it ends first.
func (w *poller) sleep(ctx context.Context) error {
	if w.wait == 0 {
		w.wait = 100 * time.Microsecond
	}
	t := time.NewTimer(w.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	w.wait = min(2*w.wait, 5*time.Millisecond)
	return nil
}
