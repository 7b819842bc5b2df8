package online

import (
	"math"
	"slices"
)

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
// Add is O(len(grid)) in compares and one count; Observed and Check are
// O(len(grid)). None allocates. Not safe for concurrent use.
//
// A margin m is ≤ −ρ exactly for the ρ ≤ −m: for the grid in ascending
// order, a prefix of it. So the monitor counts the margins by the length
// k of their prefix (hist[k]), one count per margin, and the fraction at
// ρ is the sum of the counts of the longer prefixes. Every ρ's count
// moved with each margin before, on a branch as unpredictable as the
// margins, and cost the judge of every labelled event more.
type BoundMonitor struct {
	grid  []float64 // as given: Observed's and Check's order
	asc   []float64 // grid ascending, without NaN
	first []int     // first[i]: where grid[i]'s first copy is in asc
	hist  []int     // hist[k]: margins held that are ≤ −ρ for the k smallest ρ and no other
	above []int     // scratch of Check: above[k] = hist[k+1] + … + hist[len(grid)]
	ring  []int32   // the prefix lengths of the margins held; nil in cumulative mode
	next  int       // slot of the next margin
	count int       // margins held (≤ len(ring) unless cumulative)
}

// NewBoundMonitor returns a monitor over the last window margins for the
// given grid of ρ values (copied, in any order). window ≤ 0 makes it
// cumulative: every margin added is kept in the counts (nothing is
// evicted), in O(len(grid)) memory, which is what a held-out evaluation
// wants.
func NewBoundMonitor(window int, grid []float64) *BoundMonitor {
	m := &BoundMonitor{
		grid:  slices.Clone(grid),
		asc:   slices.Clone(grid),
		first: make([]int, len(grid)),
		hist:  make([]int, len(grid)+1),
		above: make([]int, len(grid)+1),
	}
	// A NaN ρ, which no margin is ≤ −ρ for, goes after the others (where
	// no prefix reaches): its fraction is 0, as every margin compares
	// false with it.
	m.asc = slices.DeleteFunc(m.asc, func(rho float64) bool { return math.IsNaN(rho) })
	slices.Sort(m.asc)
	for i, rho := range m.grid {
		m.first[i] = len(grid)
		if !math.IsNaN(rho) {
			m.first[i], _ = slices.BinarySearch(m.asc, rho)
		}
	}
	if window > 0 {
		m.ring = make([]int32, window)
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
	k := m.prefix(margin)
	if m.ring != nil {
		if m.count == len(m.ring) {
			m.hist[m.ring[m.next]]--
		} else {
			m.count++
		}
		m.ring[m.next] = int32(k)
		if m.next++; m.next == len(m.ring) {
			m.next = 0
		}
	} else {
		m.count++
	}
	m.hist[k]++
}

// prefix is how many ρ of the grid margin is ≤ −ρ for: the length of the
// prefix of asc it passes (0 for NaN). It counts without a branch per ρ.
func (m *BoundMonitor) prefix(margin float64) int {
	k := 0
	for _, rho := range m.asc {
		d := 0
		if rho <= -margin {
			d = 1
		}
		k += d
	}
	return k
}

// Count returns the number of margins held (all added, when cumulative).
func (m *BoundMonitor) Count() int { return m.count }

// Observed returns the fraction of the margins held that are ≤ −grid[i],
// NaN when the monitor is empty.
func (m *BoundMonitor) Observed(i int) float64 {
	if m.count == 0 {
		return math.NaN()
	}
	n := 0
	for _, c := range m.hist[m.first[i]+1:] {
		n += c
	}
	return float64(n) / float64(m.count)
}

// Check evaluates bound at every grid ρ into dst (grown or reused; nil is
// fine) and returns it with the number of ρ at which the observed fraction
// exceeds the bound. An empty monitor has no violations.
func (m *BoundMonitor) Check(bound func(rho float64) float64, dst []float64) (bounds []float64, violations int) {
	if cap(dst) < len(m.grid) {
		dst = make([]float64, len(m.grid))
	}
	dst = dst[:len(m.grid)]
	n := 0
	for k := len(m.hist) - 1; k >= 0; k-- {
		m.above[k] = n
		n += m.hist[k]
	}
	for i, rho := range m.grid {
		b := bound(rho)
		dst[i] = b
		if m.count > 0 && float64(m.above[m.first[i]])/float64(m.count) > b {
			violations++
		}
	}
	return dst, violations
}

// Reset empties the monitor.
func (m *BoundMonitor) Reset() {
	clear(m.hist)
	clear(m.ring)
	m.next, m.count = 0, 0
}
