package eval

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress shows how far Run is through its files: a bar redrawn in place
// on a terminal, a plain line at every 10% otherwise. A nil *progress
// shows nothing.
//
// The fraction done is that of the bytes of all files (--data then --test)
// whose rows the models have been given: a file counts for its size, and
// within the current file the position is the reader's offset after the
// last row handed to the models (not the bytes read from the file, which
// run ahead by the reader's buffer: up to 64 KiB, the whole of a small
// file) or, when the rows are shuffled (read whole, then run), the fraction
// of its rows run. The fraction never goes back, never exceeds 1 and is 1
// at the end of a successful run. When a size is unknown (a pipe) only the
// rows are shown.
type progress struct {
	w        io.Writer
	terminal bool
	total    int64 // bytes of all the files; 0 when a size is unknown
	base     int64 // bytes of the files finished
	size     int64 // size of the current file
	pos      int64 // position in the current file, ≤ size
	section  string
	frac     float64 // fraction done, non-decreasing
	nrows    int64
	start    time.Time
	last     time.Time
	decile   int // last decile printed (non-terminal), −1 none
	drawn    bool
}

// newProgress returns a progress display over files of the given sizes
// (≤ 0: unknown), nil when w is nil.
func newProgress(w io.Writer, terminal bool, sizes ...int64) *progress {
	if w == nil {
		return nil
	}
	var total int64
	for _, s := range sizes {
		if s <= 0 {
			total = 0
			break
		}
		total += s
	}
	now := time.Now()
	return &progress{w: w, terminal: terminal, total: total, start: now, last: now, decile: -1}
}

// file starts the next file, of the given size, for section.
func (p *progress) file(section string, size int64) {
	if p == nil {
		return
	}
	p.section, p.size, p.pos = section, max(size, 0), 0
}

// at records that the models have been given n more rows and that the
// current file is done up to byte pos.
func (p *progress) at(pos int64, n int) {
	if p == nil {
		return
	}
	p.nrows += int64(n)
	p.pos = min(max(p.pos, pos), p.size)
	p.update(false)
}

// endFile finishes the current file: it counts for its whole size.
func (p *progress) endFile() {
	if p == nil {
		return
	}
	p.base += p.size
	p.size, p.pos = 0, 0
}

// finish shows the end of a successful run: 100%.
func (p *progress) finish() {
	if p == nil {
		return
	}
	if p.total > 0 {
		p.frac = 1
	}
	p.update(true)
}

// done ends the display (the terminal's line).
func (p *progress) done() {
	if p != nil && p.terminal && p.drawn {
		p.draw(time.Now())
		fmt.Fprintln(p.w)
	}
}

// update recomputes the fraction and shows it when due (always when final).
func (p *progress) update(final bool) {
	if p.total > 0 {
		p.frac = max(p.frac, min(1, float64(p.base+p.pos)/float64(p.total)))
	}
	now := time.Now()
	if p.terminal {
		if final || now.Sub(p.last) >= 100*time.Millisecond {
			p.last = now
			p.draw(now)
		}
		return
	}
	switch {
	case p.total > 0:
		if d := int(10 * p.frac); d > p.decile {
			p.decile = d
			fmt.Fprintf(p.w, "eval: %3d%% %d rows %.1fs (%s)\n", 10*d, p.nrows, now.Sub(p.start).Seconds(), p.section)
		}
	case final:
		fmt.Fprintf(p.w, "eval: %d rows %.1fs\n", p.nrows, now.Sub(p.start).Seconds())
	}
}

// percent is the fraction done in whole percent, rounded down (so that 100
// means done).
func (p *progress) percent() int { return int(100 * p.frac) }

func (p *progress) draw(now time.Time) {
	p.drawn = true
	rate := float64(p.nrows) / max(now.Sub(p.start).Seconds(), 1e-9)
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%d rows %.0f rows/s (%s) ", p.nrows, rate, p.section)
		return
	}
	const width = 30
	full := int(p.frac * width)
	fmt.Fprintf(p.w, "\r[%s%s] %3d%% %d rows %.0f rows/s (%s) ", strings.Repeat("#", full), strings.Repeat(".", width-full),
		p.percent(), p.nrows, rate, p.section)
}
