package stream

import (
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with jitter for retries against the
// brokers: each wait is drawn from [d/2, d], where d starts at base and
// doubles per failure up to max. The jitter keeps the instances of a group
// (and a client's partitions) that failed together from retrying in step.
// The zero value is not usable; reset after a success.
type backoff struct {
	base, max time.Duration
	d         time.Duration // current ceiling; 0 before the first failure
}

func newBackoff(base, max time.Duration) *backoff { return &backoff{base: base, max: max} }

// next returns the wait before the next attempt.
func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = b.base
	} else {
		b.d = min(2*b.d, b.max)
	}
	half := b.d / 2
	return half + rand.N(b.d-half+1)
}

// reset starts over from base (after a success).
func (b *backoff) reset() { b.d = 0 }
