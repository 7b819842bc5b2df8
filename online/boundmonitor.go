package online

import "math"

// Bounder is implemented by models that publish a certainty bound: Bound
// returns the current bound on P(Y f(X) ≤ −rho) (docs/math.md §4), in [0, 1].
type Bounder interface {
	Bound(rho float64) float64
}

var _ Bounder = (*MAM)(nil)

// BoundMonitor checks the certainty bound against what the stream shows
// (docs/math.md §4, "checkable consequence"): it keeps the margins y·f(x) of the
// last Window labelled events (each scored before it was learned) and, for
// every ρ of a grid, the number of them with y·f ≤ −ρ. [BoundMonitor.Check]
// compares these observed fractions with the model's current bound(ρ); an
// observed fraction above the bound is a violation. On i.i.d. data a
// violation should happen with probability at most about δ (the window is a
// finite sample, so small excursions are possible); a lasting run of them
// means the data has drifted away from what the model learned.
//
// Add and Observed are O(len(grid)) and do not allocate. Not safe for
// concurrent use.
type BoundMonitor struct {
	grid   []float64
	counts []int     // counts[i] = #{margins held ≤ −grid[i]}
	ring   []float64 // margins held; nil in cumulative mode
	next   int       // slot of the next margin
	count  int       // margins held (≤ len(ring) unless cumulative)
}

// NewBoundMonitor returns a monitor over the last window margins for the
// given grid of ρ values (copied). window ≤ 0 makes it cumulative: every
// margin added is kept in the counts (nothing is evicted), in O(len(grid))
// memory, which is what a held-out evaluation wants.
func NewBoundMonitor(window int, grid []float64) *BoundMonitor {
	m := &BoundMonitor{
		grid:   append([]float64(nil), grid...),
		counts: make([]int, len(grid)),
	}
	if window > 0 {
		m.ring = make([]float64, window)
	}
	return m
}

// DefaultBoundGrid returns the ρ grid 0, 0.1, …, 0.9 (B = 1).
func DefaultBoundGrid() []float64 {
	g := make([]float64, 10)
	for i := range g {
		g[i] = float64(i) / 10
	}
	return g
}

// Grid returns the monitor's ρ grid (not a copy: do not modify).
func (m *BoundMonitor) Grid() []float64 { return m.grid }

// Window returns the window size, 0 for a cumulative monitor.
func (m *BoundMonitor) Window() int { return len(m.ring) }

// Add records the margin y·f(x) of one labelled event (scored before it was
// learned), evicting the oldest once the window is full. A NaN margin is
// counted as an event with no margin ≤ −ρ for any ρ (never a violation).
func (m *BoundMonitor) Add(margin float64) {
	if m.ring != nil {
		if m.count == len(m.ring) {
			m.adjust(m.ring[m.next], -1)
		} else {
			m.count++
		}
		m.ring[m.next] = margin
		if m.next++; m.next == len(m.ring) {
			m.next = 0
		}
	} else {
		m.count++
	}
	m.adjust(margin, +1)
}

// adjust adds d to the counts of every grid ρ with margin ≤ −ρ.
func (m *BoundMonitor) adjust(margin float64, d int) {
	for i, rho := range m.grid {
		if margin <= -rho {
			m.counts[i] += d
		}
	}
}

// Count returns the number of margins held (all added, when cumulative).
func (m *BoundMonitor) Count() int { return m.count }

// Observed returns the fraction of the margins held that are ≤ −grid[i],
// NaN when the monitor is empty.
func (m *BoundMonitor) Observed(i int) float64 {
	if m.count == 0 {
		return math.NaN()
	}
	return float64(m.counts[i]) / float64(m.count)
}

// Check evaluates bound at every grid ρ into dst (grown or reused; nil is
// fine) and returns it with the number of ρ at which the observed fraction
// exceeds the bound. An empty monitor has no violations.
func (m *BoundMonitor) Check(bound func(rho float64) float64, dst []float64) (bounds []float64, violations int) {
	if cap(dst) < len(m.grid) {
		dst = make([]float64, len(m.grid))
	}
	dst = dst[:len(m.grid)]
	for i, rho := range m.grid {
		b := bound(rho)
		dst[i] = b
		if m.count > 0 && m.Observed(i) > b {
			violations++
		}
	}
	return dst, violations
}

// Reset empties the monitor.
func (m *BoundMonitor) Reset() {
	clear(m.counts)
	clear(m.ring)
	m.next, m.count = 0, 0
}
