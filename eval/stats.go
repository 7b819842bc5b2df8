package eval

import (
	"cmp"
	"math"
	"slices"
	"strconv"
)

// z95 is the standard normal quantile of 0.975: two-sided 95% intervals.
const z95 = 1.959963984540054

// Interval is a confidence interval, [Lo, Hi].
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Wilson returns the Wilson score interval of a binomial proportion: k
// successes in n trials, two-sided with normal quantile z (z95 for 95%):
//
//	(p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n),  p̂ = k/n
//
// the set of p for which |p̂ − p| ≤ z·√(p(1−p)/n). Unlike p̂ ± z·√(p̂(1−p̂)/n)
// it stays inside [0, 1] and is not empty at k = 0 or k = n. ok is false
// when n is 0.
func Wilson(k, n int64, z float64) (iv Interval, ok bool) {
	if n <= 0 || k < 0 || k > n {
		return Interval{}, false
	}
	nf := float64(n)
	p := float64(k) / nf
	z2 := z * z
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	iv = Interval{Lo: max(0, center-half), Hi: min(1, center+half)}
	// At k = 0 or n one end is exactly 0 or 1 (rounding would leave 1e-17).
	if k == 0 {
		iv.Lo = 0
	}
	if k == n {
		iv.Hi = 1
	}
	return iv, true
}

// wilson95 is Wilson at 95%, nil when n is 0.
func wilson95(k, n int64) *Interval {
	iv, ok := Wilson(k, n, z95)
	if !ok {
		return nil
	}
	return &iv
}

// ROCAUC returns the area under the ROC curve of scores for the rows whose
// truth is > 0 (positives) against the others (negatives): the probability
// that a random positive scores above a random negative, ties counting one
// half. It is computed as the Mann–Whitney statistic from mid-ranks (tied
// scores share the mean of their ranks):
//
//	AUC = (R₊ − n₊(n₊+1)/2) / (n₊·n₋)
//
// with R₊ the sum of the positives' ranks, in O(n log n). It is NaN when
// either class is missing (the AUC is undefined).
func ROCAUC(scores, truth []float64) float64 {
	idx := make([]int, len(scores))
	var npos, nneg float64
	for i := range idx {
		idx[i] = i
		if truth[i] > 0 {
			npos++
		} else {
			nneg++
		}
	}
	if npos == 0 || nneg == 0 {
		return math.NaN()
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	var rankSum float64 // of the positives
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mid := float64(i+1+j) / 2 // mean of the 1-based ranks i+1 … j
		for _, k := range idx[i:j] {
			if truth[k] > 0 {
				rankSum += mid
			}
		}
		i = j
	}
	return (rankSum - npos*(npos+1)/2) / (npos * nneg)
}

// OptFloat is a measure that applies but may be undefined (e.g. ROC AUC
// when a class is missing): its JSON form is the number, or null.
type OptFloat struct {
	Value float64
	Valid bool
}

// MarshalJSON writes the value, or null when it is undefined.
func (o OptFloat) MarshalJSON() ([]byte, error) {
	if !o.Valid || math.IsNaN(o.Value) || math.IsInf(o.Value, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, o.Value, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number or null.
func (o *OptFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = OptFloat{}
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*o = OptFloat{Value: v, Valid: true}
	return nil
}

func optFloat(v float64) *OptFloat {
	return &OptFloat{Value: v, Valid: !math.IsNaN(v) && !math.IsInf(v, 0)}
}

// Confusion is a binary classifier's confusion matrix over a section's
// judged rows, positive = label +1. Abstentions (prediction 0, "no
// decision") are neither: they are counted by true class.
type Confusion struct {
	TP              int64 `json:"tp"`               // label +1, predicted +1
	FP              int64 `json:"fp"`               // label −1, predicted +1
	TN              int64 `json:"tn"`               // label −1, predicted −1
	FN              int64 `json:"fn"`               // label +1, predicted −1
	AbstainPositive int64 `json:"abstain_positive"` // label +1, no decision
	AbstainNegative int64 `json:"abstain_negative"` // label −1, no decision
}

func (c *Confusion) add(pred int, y float64) {
	pos := y > 0
	switch {
	case pred == 0 && pos:
		c.AbstainPositive++
	case pred == 0:
		c.AbstainNegative++
	case pred > 0 && pos:
		c.TP++
	case pred > 0:
		c.FP++
	case pos:
		c.FN++
	default:
		c.TN++
	}
}

// ReliabilityBins is the number of equal-width bins of predicted
// probability in a reliability curve.
const ReliabilityBins = 10

// ReliabilityBin is one bin of a reliability (calibration) curve: the rows
// whose published probability of class +1 is in [Lo, Hi) ([0.9, 1] for the
// last bin), their mean probability and the observed fraction of label +1
// with its 95% Wilson interval. A perfectly calibrated model has Observed ≈
// MeanProbability in every bin. Empty bins have no mean, observed or
// interval.
type ReliabilityBin struct {
	Lo              float64   `json:"lo"`
	Hi              float64   `json:"hi"`
	N               int64     `json:"n"`
	Positives       int64     `json:"positives"`
	MeanProbability *float64  `json:"mean_probability,omitempty"`
	Observed        *float64  `json:"observed,omitempty"`
	ObservedCI      *Interval `json:"observed_ci,omitempty"`
}

// reliability accumulates a reliability curve.
type reliability struct {
	n, pos [ReliabilityBins]int64
	sum    [ReliabilityBins]float64
	total  int64
}

func (r *reliability) add(p, y float64) {
	b := min(ReliabilityBins-1, max(0, int(p*ReliabilityBins)))
	r.n[b]++
	r.sum[b] += p
	if y > 0 {
		r.pos[b]++
	}
	r.total++
}

// bins returns the curve, nil when no row had a probability.
func (r *reliability) bins() []ReliabilityBin {
	if r.total == 0 {
		return nil
	}
	out := make([]ReliabilityBin, ReliabilityBins)
	for b := range out {
		rb := ReliabilityBin{
			Lo: float64(b) / ReliabilityBins, Hi: float64(b+1) / ReliabilityBins,
			N: r.n[b], Positives: r.pos[b],
		}
		if r.n[b] > 0 {
			rb.MeanProbability = num(r.sum[b] / float64(r.n[b]))
			rb.Observed = num(float64(r.pos[b]) / float64(r.n[b]))
			rb.ObservedCI = wilson95(r.pos[b], r.n[b])
		}
		out[b] = rb
	}
	return out
}

// Label order. A prequential run learns the rows in file order; a file
// sorted (or grouped) by label makes the model see one class, then the
// other, and the report says more about the order than about the model.
const (
	// SortedMinRows is the number of labelled rows below which the label
	// order is not judged.
	SortedMinRows = 100
	// SortedFraction: labels look sorted when the number of label changes
	// between consecutive labelled rows is below this fraction of the
	// number expected in a random order.
	SortedFraction = 0.1
	// maxLabelValues bounds the distinct label values counted (a real
	// target has as many as rows; its changes are then not counted).
	maxLabelValues = 1 << 16
)

// labelOrder counts, over a sequence of labels, the changes between
// consecutive labels and how often each value occurs.
type labelOrder struct {
	n, changes int64
	last       float64
	counts     map[float64]int64
	overflow   bool
}

func (l *labelOrder) add(y float64) {
	if l.overflow {
		return
	}
	if l.counts == nil {
		l.counts = map[float64]int64{}
	}
	if l.n > 0 && y != l.last {
		l.changes++
	}
	l.last = y
	l.n++
	l.counts[y]++
	if len(l.counts) > maxLabelValues {
		l.overflow, l.counts = true, nil
	}
}

// expected returns the expected number of label changes between n labels
// in a uniformly random order (a random permutation of the same labels):
// each of the n−1 adjacent pairs differs with probability
// 1 − Σₖ nₖ(nₖ−1) / (n(n−1)), nₖ the count of label value k.
func (l *labelOrder) expected() float64 {
	if l.n < 2 {
		return 0
	}
	n := float64(l.n)
	var same float64
	for _, c := range l.counts {
		same += float64(c) * float64(c-1)
	}
	return (n - 1) * (1 - same/(n*(n-1)))
}

// looksSorted applies the rule: at least SortedMinRows labelled rows and
// fewer changes than SortedFraction of the expected number.
func (l *labelOrder) looksSorted() bool {
	return !l.overflow && l.n >= SortedMinRows && float64(l.changes) < SortedFraction*l.expected()
}
