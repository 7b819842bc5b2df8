package online

import "math"

// Prequential is the prequential (test-then-train) accuracy over the last
// Window() outcomes: each event is scored before it is learned and Add
// records whether that prediction was right. Add and Accuracy are O(1) and
// do not allocate. Not safe for concurrent use.
type Prequential struct {
	ring    []bool
	next    int // slot of the next outcome
	count   int // outcomes held, ≤ len(ring)
	correct int // true outcomes held
}

// NewPrequential returns an empty window of the given size; it panics if
// window < 1.
func NewPrequential(window int) *Prequential {
	if window < 1 {
		panic("online: NewPrequential: window must be ≥ 1")
	}
	return &Prequential{ring: make([]bool, window)}
}

// Add records one outcome, evicting the oldest when the window is full.
func (p *Prequential) Add(correct bool) {
	if p.count == len(p.ring) {
		if p.ring[p.next] {
			p.correct--
		}
	} else {
		p.count++
	}
	p.ring[p.next] = correct
	if correct {
		p.correct++
	}
	if p.next++; p.next == len(p.ring) {
		p.next = 0
	}
}

// Accuracy returns the fraction of correct outcomes in the window, NaN when
// it is empty (no evidence, rather than a fake 0).
func (p *Prequential) Accuracy() float64 {
	if p.count == 0 {
		return math.NaN()
	}
	return float64(p.correct) / float64(p.count)
}

// Count returns the number of outcomes in the window, ≤ Window().
func (p *Prequential) Count() int { return p.count }

// Correct returns the number of correct outcomes in the window.
func (p *Prequential) Correct() int { return p.correct }

// Window returns the window size.
func (p *Prequential) Window() int { return len(p.ring) }

// Reset empties the window.
func (p *Prequential) Reset() {
	clear(p.ring)
	p.next, p.count, p.correct = 0, 0, 0
}
