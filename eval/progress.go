package eval

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress shows how far Run is through its files, by bytes read: a bar
// redrawn in place on a terminal, a plain line at every 10% otherwise. A
// nil *progress shows nothing.
type progress struct {
	w        io.Writer
	terminal bool
	total    int64
	read     int64
	nrows    int64
	start    time.Time
	last     time.Time
	decile   int64
}

func newProgress(w io.Writer, terminal bool, total int64) *progress {
	if w == nil {
		return nil
	}
	now := time.Now()
	return &progress{w: w, terminal: terminal, total: total, start: now, last: now}
}

func (p *progress) bytes(n int64) {
	if p != nil {
		p.read += n
	}
}

func (p *progress) rows(n int) {
	if p == nil {
		return
	}
	p.nrows += int64(n)
	now := time.Now()
	if p.terminal {
		if now.Sub(p.last) >= 100*time.Millisecond {
			p.last = now
			p.draw(now)
		}
		return
	}
	if p.total > 0 {
		if d := 10 * p.read / p.total; d > p.decile {
			p.decile = d
			fmt.Fprintf(p.w, "eval: %3d%% %d rows %.1fs\n", 10*d, p.nrows, now.Sub(p.start).Seconds())
		}
	}
}

func (p *progress) draw(now time.Time) {
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = min(1, float64(p.read)/float64(p.total))
	}
	full := int(frac * width)
	rate := float64(p.nrows) / max(now.Sub(p.start).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %d rows %.0f rows/s ", strings.Repeat("#", full), strings.Repeat(".", width-full),
		100*frac, p.nrows, rate)
}

func (p *progress) done() {
	if p == nil {
		return
	}
	if p.terminal {
		p.draw(time.Now())
		fmt.Fprintln(p.w)
	}
}
