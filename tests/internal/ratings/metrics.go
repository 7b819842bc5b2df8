package ratings

import (
	"cmp"
	"math"
	"slices"
	"strconv"
)

// RMSE is a running root mean squared error.
type RMSE struct {
	se kahan
	n  int
}

// Add counts one prediction of y.
func (r *RMSE) Add(pred, y float64) { d := pred - y; r.se.add(d * d); r.n++ }

// Value returns the RMSE so far (NaN before any).
func (r *RMSE) Value() float64 {
	if r.n == 0 {
		return math.NaN()
	}
	return math.Sqrt(r.se.sum / float64(r.n))
}

// N returns the predictions counted.
func (r *RMSE) N() int { return r.n }

// Binary judges a classifier's predictions of a binary outcome: accuracy
// of its decisions, log loss of its probabilities and ROC AUC of its scores.
type Binary struct {
	scores    []float64
	pos       []bool
	right, n  int // decisions (prediction ±1)
	undecided int
	ll        kahan
	nll       int
}

// Add counts one event: the outcome, the model's score, its decision (+1,
// −1 or 0 for none) and its probability of the positive outcome (NaN: none).
func (b *Binary) Add(positive bool, score, decision, prob float64) {
	if !math.IsNaN(score) {
		b.scores = append(b.scores, score)
		b.pos = append(b.pos, positive)
	}
	switch {
	case decision > 0 || decision < 0:
		b.n++
		if (decision > 0) == positive {
			b.right++
		}
	default:
		b.undecided++
	}
	if !math.IsNaN(prob) {
		p := Clip(prob, 1e-15, 1-1e-15)
		if !positive {
			p = 1 - p
		}
		b.ll.add(-math.Log(p))
		b.nll++
	}
}

// Accuracy returns the fraction of right decisions and how many there were.
func (b *Binary) Accuracy() (float64, int) {
	if b.n == 0 {
		return math.NaN(), 0
	}
	return float64(b.right) / float64(b.n), b.n
}

// Undecided returns the events without a decision.
func (b *Binary) Undecided() int { return b.undecided }

// LogLoss returns the mean log loss of the probabilities and how many
// there were.
func (b *Binary) LogLoss() (float64, int) {
	if b.nll == 0 {
		return math.NaN(), 0
	}
	return b.ll.sum / float64(b.nll), b.nll
}

// BinaryFigures are a classifier's figures against a binary outcome:
// accuracy of the Decisions (prediction ±1), log loss of the LogLossN
// probabilities, ROC AUC of the scores.
type BinaryFigures struct {
	Decisions int `json:"decisions"`
	Accuracy  Num `json:"accuracy"`
	LogLossN  int `json:"log_loss_n"`
	LogLoss   Num `json:"log_loss"`
	AUC       Num `json:"auc"`
}

// Figures returns b's figures.
func (b *Binary) Figures() BinaryFigures {
	acc, n := b.Accuracy()
	ll, nll := b.LogLoss()
	return BinaryFigures{Decisions: n, Accuracy: Num(acc), LogLossN: nll, LogLoss: Num(ll), AUC: Num(b.AUC())}
}

// AUC returns the ROC AUC of the scores (NaN without both outcomes).
func (b *Binary) AUC() float64 { return AUC(b.scores, b.pos) }

// AUC returns the area under the ROC curve of scores against the outcomes
// pos: the probability that a random positive scores above a random
// negative, ties counting half (the Mann–Whitney statistic). NaN when
// either outcome is missing.
func AUC(scores []float64, pos []bool) float64 {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	var rankSum float64
	npos := 0
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mid := float64(i+j+1) / 2 // mean 1-based rank of the tie group
		for _, k := range idx[i:j] {
			if pos[k] {
				rankSum += mid
				npos++
			}
		}
		i = j
	}
	nneg := len(scores) - npos
	if npos == 0 || nneg == 0 {
		return math.NaN()
	}
	return (rankSum - float64(npos)*float64(npos+1)/2) / (float64(npos) * float64(nneg))
}

// Interval is a mean with its 95% confidence interval.
type Interval struct {
	Mean, Lower, Upper float64
	N                  int
}

// MeanCI returns the mean of xs with its 95% interval by the normal
// approximation, mean ± 1.96·s/√n (s the sample standard deviation).
func MeanCI(xs []float64) Interval {
	n := len(xs)
	if n == 0 {
		return Interval{Mean: math.NaN(), Lower: math.NaN(), Upper: math.NaN()}
	}
	var s kahan
	for _, x := range xs {
		s.add(x)
	}
	mean := s.sum / float64(n)
	if n == 1 {
		return Interval{Mean: mean, Lower: math.NaN(), Upper: math.NaN(), N: 1}
	}
	var ss kahan
	for _, x := range xs {
		ss.add((x - mean) * (x - mean))
	}
	h := 1.96 * math.Sqrt(ss.sum/float64(n-1)/float64(n))
	return Interval{Mean: mean, Lower: mean - h, Upper: mean + h, N: n}
}

// Num is a float64 that encodes to JSON as null when it is not finite (a
// figure that could not be computed).
type Num float64

// MarshalJSON implements json.Marshaler.
func (x Num) MarshalJSON() ([]byte, error) {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}
