package online

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// LabelMap maps a wire label to the label a model reads (before
// Model.Label), so that one stream of labels, say ratings 0.5..5, feeds
// models of different kinds: a classifier reads +1 where a condition on
// the label holds and −1 elsewhere (PositiveWhen), an ordinal model reads
// the level 1 + #{edges ≤ label} (BinnedBy). Either may also have a range
// (WithRange): a wire label outside it is not read at all (Read), so that
// one label off the scale, a producer's bug or a hostile client's, cannot
// move a model (a squared-loss model's running mean and clipping range
// would take in a rating of 1e12). The zero value and nil map nothing
// (Map returns its argument, Read reads every label). A LabelMap is
// immutable: any number of goroutines may use it.
type LabelMap struct {
	op     string  // PositiveWhen: ">=", ">", "<=", "<" or "=="; "" otherwise
	at     float64 // PositiveWhen: the number compared with
	edges  []float64
	ranged bool    // WithRange: labels outside [lo, hi] are not read
	lo, hi float64 // the range (±Inf for an open side)
}

// PositiveWhen returns the map of a classifier's labels to +1 where the
// condition cond holds and to −1 elsewhere. cond is an operator (>=, >,
// <=, < or ==) and a finite number, e.g. ">= 4" or "<0.5".
func PositiveWhen(cond string) (*LabelMap, error) {
	s := strings.TrimSpace(cond)
	var op string
	for _, o := range []string{">=", "<=", "==", ">", "<"} { // two-character operators first
		if strings.HasPrefix(s, o) {
			op = o
			break
		}
	}
	if op == "" {
		return nil, fmt.Errorf("%q is not a condition: want an operator (>=, >, <=, <, ==) and a number, e.g. \">= 4\"", cond)
	}
	num := strings.TrimSpace(s[len(op):])
	at, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(at) || math.IsInf(at, 0) {
		return nil, fmt.Errorf("%q is not a condition: %q is not a finite number", cond, num)
	}
	return &LabelMap{op: op, at: at}, nil
}

// BinnedBy returns the map of real-valued labels to the levels 1..m of an
// ordinal model, m = len(edges) + 1: level = 1 + #{edges ≤ label}. The
// edges must be finite and strictly increasing.
func BinnedBy(edges []float64) (*LabelMap, error) {
	if len(edges) == 0 {
		return nil, fmt.Errorf("no edges: want levels − 1 strictly increasing numbers")
	}
	for i, e := range edges {
		if math.IsNaN(e) || math.IsInf(e, 0) {
			return nil, fmt.Errorf("edge %d is %v: edges must be finite", i, e)
		}
		if i > 0 && !(e > edges[i-1]) {
			return nil, fmt.Errorf("edges must be strictly increasing: %v after %v", e, edges[i-1])
		}
	}
	return &LabelMap{edges: append([]float64(nil), edges...)}, nil
}

// WithRange returns a copy of l (nil: a map of nothing) that reads only
// the wire labels in [lo, hi]; −Inf or +Inf leaves a side open. lo and hi
// must not be NaN, and lo ≤ hi.
func (l *LabelMap) WithRange(lo, hi float64) (*LabelMap, error) {
	if math.IsNaN(lo) || math.IsNaN(hi) || !(lo <= hi) {
		return nil, fmt.Errorf("range [%v, %v]: want min ≤ max", lo, hi)
	}
	c := &LabelMap{}
	if l != nil {
		*c = *l
	}
	c.ranged, c.lo, c.hi = true, lo, hi
	return c, nil
}

// Range returns the range of a WithRange map (ok false otherwise).
func (l *LabelMap) Range() (lo, hi float64, ok bool) {
	if l == nil || !l.ranged {
		return 0, 0, false
	}
	return l.lo, l.hi, true
}

// Read returns Map(v) and whether v is in the map's range (always, for a
// map without one): a label outside it must not reach the model. It does
// not allocate.
func (l *LabelMap) Read(v float64) (float64, bool) {
	if l != nil && l.ranged && !(v >= l.lo && v <= l.hi) {
		return 0, false
	}
	return l.Map(v), true
}

// Map returns the label the model reads for wire label v: ±1 for a
// condition, a level for edges, v itself for a nil or zero map; whatever
// the range (see Read). It does not allocate.
func (l *LabelMap) Map(v float64) float64 {
	switch {
	case l == nil:
		return v
	case l.op != "":
		if l.holds(v) {
			return 1
		}
		return -1
	case l.edges != nil:
		return float64(l.Level(v))
	}
	return v
}

func (l *LabelMap) holds(v float64) bool {
	switch l.op {
	case ">=":
		return v >= l.at
	case ">":
		return v > l.at
	case "<=":
		return v <= l.at
	case "<":
		return v < l.at
	}
	return v == l.at
}

// Level returns 1 + #{edges ≤ v} (1 without edges; NaN gives 1).
func (l *LabelMap) Level(v float64) int {
	if l == nil {
		return 1
	}
	lo, hi := 0, len(l.edges) // count of edges ≤ v by bisection
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l.edges[mid] <= v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return 1 + lo
}

// Edges returns the edges of a BinnedBy map (nil otherwise); the caller
// must not change them.
func (l *LabelMap) Edges() []float64 {
	if l == nil {
		return nil
	}
	return l.edges
}

// Condition returns the operator and number of a PositiveWhen map ("" and 0
// otherwise).
func (l *LabelMap) Condition() (op string, at float64) {
	if l == nil {
		return "", 0
	}
	return l.op, l.at
}

// String describes the map: "positive >= 4", "edges [1.5 2.5]" or "none",
// then its range if it has one: "positive >= 4, range [0.5, 5]", "range
// [0.5, 5]".
func (l *LabelMap) String() string {
	if l == nil {
		return "none"
	}
	var parts []string
	switch {
	case l.op != "":
		parts = append(parts, "positive "+l.op+" "+strconv.FormatFloat(l.at, 'g', -1, 64))
	case l.edges != nil:
		parts = append(parts, fmt.Sprintf("edges %v", l.edges))
	}
	if l.ranged {
		parts = append(parts, fmt.Sprintf("range [%v, %v]", l.lo, l.hi))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
