// Package adaboost is discrete AdaBoost (Freund and Schapire) over a
// dictionary of classifiers with outputs in {−1, 0, +1}: the aggregation of
// classifiers of docs/math.md ("AdaBoost aggregation of classifiers").
//
// The dictionary is made of
//
//   - members: the first Config.Members columns of each input row hold the
//     outputs of given classifiers, of which only the sign is read (−1, 0 =
//     no decision, +1);
//   - with Config.Stumps, the decision stumps on every remaining column
//     (the features): h(x) = +1 if x_j ≤ t, else −1 (polarity +1), and its
//     opposite (polarity −1), with t halfway between two consecutive
//     distinct values of column j in the training rows.
//
// Fit starts from the weights wᵢ = 1/n and, for m = 1..M, picks the
// dictionary member h of least weighted error err_m (a no decision counts
// as a mistake), gives it β_m = ½ ln((1 − err_m)/err_m) and reweights
// wᵢ ∝ wᵢ·e^{β_m} on its mistakes and wᵢ·e^{−β_m} elsewhere (that is
// wᵢ·exp(−β_m yᵢ h(xᵢ)) where h decides). The aggregate is F = Σ β_m h_m,
// the prediction sign(F), 0 when F = 0. A member may be picked in several
// rounds: its β's add up (Weights).
//
// Two cases end the rounds early: a member with no mistake at all (err = 0:
// it gets β = BetaMax and fitting stops) and a least error of ½ or more
// (no member is better than chance: fitting stops without it). Ties
// between members of equal weighted error (compared as the weight of their
// mistakes) go to the first in dictionary order: the members in their order, then the stumps by column, threshold
// and polarity (+1 first).
//
// Each stump round costs O(n) per feature column: the columns are sorted
// once per fit (O(n log n) each), and the weighted errors at every
// threshold are read off cumulative sums of the weights in sorted order.
// Scoring an input (Score) costs one comparison per member and per distinct
// stump and does not allocate.
package adaboost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxRounds is the largest number of rounds (Config.Rounds).
const MaxRounds = 10000

// Eps floors the weighted error in β and in the reweighting, so that β ≤
// BetaMax.
const Eps = 1e-10

// BetaMax = ½ ln((1 − Eps)/Eps) ≈ 11.51 is the β of a member that makes no
// mistake on the training rows (and the largest β).
var BetaMax = 0.5 * math.Log((1-Eps)/Eps)

// ErrChance is returned by Fit when no dictionary member has a weighted
// error below ½ in the first round (nothing better than chance to boost).
var ErrChance = errors.New("adaboost: no dictionary member is better than chance (least weighted error ≥ ½)")

// Config configures Fit.
type Config struct {
	Members int  // the first Members input columns are member outputs
	Stumps  bool // add the decision stumps of the other columns
	Rounds  int  // M, 1..MaxRounds
}

// Stop says why fitting ended.
type Stop uint8

// Reasons to stop.
const (
	// StopRounds: all Config.Rounds rounds ran.
	StopRounds Stop = iota + 1
	// StopPerfect: the round's member made no mistake on the training
	// rows; it got β = BetaMax and was the last. (A member without mistakes
	// has error 0 under every weighting, so this happens in round 1.)
	StopPerfect
	// StopChance: the least weighted error reached ½; that round was not
	// added.
	StopChance
)

func (s Stop) String() string {
	switch s {
	case StopRounds:
		return "rounds"
	case StopPerfect:
		return "perfect"
	case StopChance:
		return "chance"
	}
	return fmt.Sprintf("Stop(%d)", uint8(s))
}

// Round is one round of boosting: the member picked, its weighted error and
// β.
type Round struct {
	Member    int     // index of the member, 0..Members−1; −1 for a stump
	Feature   int     // stump: feature index, input column Members+Feature; −1 for a member
	Threshold float64 // stump: t
	Polarity  int     // stump: +1 predicts +1 when x ≤ t, −1 the opposite; a member: +1
	Err       float64 // weighted error, in [0, ½)
	Beta      float64 // ½ ln((1 − err)/err), or BetaMax for err = 0
}

// Ensemble is a fitted aggregate F = Σ β_m h_m. It is immutable.
type Ensemble struct {
	dim, members, n int
	rounds          []Round
	stop            Stop

	// The scoring form, derived from rounds: β summed per member and per
	// stump, a stump of polarity −1 counting as −β on its polarity +1 twin.
	memberCol  []int
	memberBeta []float64
	stumps     []stump
}

type stump struct {
	col  int // input column
	t    float64
	coef float64 // F gains coef when x[col] ≤ t, loses it otherwise
}

// Dim is the dimension of the inputs.
func (e *Ensemble) Dim() int { return e.dim }

// Members is Config.Members of the fit.
func (e *Ensemble) Members() int { return e.members }

// N is the number of training rows.
func (e *Ensemble) N() int { return e.n }

// Stop says why fitting ended.
func (e *Ensemble) Stop() Stop { return e.stop }

// Rounds returns a copy of the rounds, in order.
func (e *Ensemble) Rounds() []Round { return slices.Clone(e.rounds) }

// Score returns F(x) = Σ β_m h_m(x); it does not allocate. x has Dim
// entries.
func (e *Ensemble) Score(x []float64) float64 {
	var s float64
	for k, c := range e.memberCol {
		if v := x[c]; v > 0 {
			s += e.memberBeta[k]
		} else if v < 0 {
			s -= e.memberBeta[k]
		}
	}
	for _, st := range e.stumps {
		// +coef when x ≤ t, −coef otherwise, without a branch: t − x is
		// +0 when x = t and never 0 when x ≠ t (inputs are finite).
		s += math.Copysign(1, st.t-x[st.col]) * st.coef
	}
	return s
}

// Label is the sign of F(x): −1, +1, or 0 when F(x) = 0.
func (e *Ensemble) Label(x []float64) int { return sign(e.Score(x)) }

func sign(v float64) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// Weight is the total β of one dictionary member.
type Weight struct {
	// Name is the member's name, or "stump(feature j ≤ t)".
	Name      string
	Member    int     // index of the member; −1 for a stump
	Feature   int     // stump: feature index (input column Members+Feature); −1 for a member
	Threshold float64 // stump: t
	// Beta is the sum of the β's of the rounds that picked the member. A
	// stump's is signed: it adds Beta to F when x_j ≤ t and subtracts it
	// otherwise (a round that picked the polarity −1 stump adds −β).
	Beta   float64
	Rounds int // rounds that picked it
}

// Weights returns the total β per dictionary member: every member (in
// order, Beta 0 if never picked), then the stumps picked, by feature and
// threshold. names are the members' names (nil or short: "member k").
func (e *Ensemble) Weights(names []string) []Weight {
	out := make([]Weight, e.members, e.members+len(e.stumps))
	for k := range out {
		name := fmt.Sprintf("member %d", k)
		if k < len(names) {
			name = names[k]
		}
		out[k] = Weight{Name: name, Member: k, Feature: -1}
	}
	at := map[[2]uint64]int{}
	for _, r := range e.rounds {
		if r.Member >= 0 {
			out[r.Member].Beta += r.Beta
			out[r.Member].Rounds++
			continue
		}
		key := [2]uint64{uint64(r.Feature), math.Float64bits(r.Threshold)}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, Weight{Name: StumpName(r.Feature, r.Threshold), Member: -1, Feature: r.Feature, Threshold: r.Threshold})
		}
		out[i].Beta += float64(r.Polarity) * r.Beta
		out[i].Rounds++
	}
	slices.SortStableFunc(out[e.members:], func(a, b Weight) int {
		return cmp.Or(cmp.Compare(a.Feature, b.Feature), cmp.Compare(a.Threshold, b.Threshold))
	})
	return out
}

// StumpName is the name of the stump on feature j at threshold t in
// Weights: "stump(feature j ≤ t)".
func StumpName(j int, t float64) string { return fmt.Sprintf("stump(feature %d ≤ %g)", j, t) }

// build derives the scoring form from the rounds.
func (e *Ensemble) build() {
	e.memberCol, e.memberBeta, e.stumps = nil, nil, nil
	for _, w := range e.Weights(nil) {
		switch {
		case w.Member >= 0 && w.Rounds > 0:
			e.memberCol = append(e.memberCol, w.Member)
			e.memberBeta = append(e.memberBeta, w.Beta)
		case w.Member < 0:
			e.stumps = append(e.stumps, stump{col: e.members + w.Feature, t: w.Threshold, coef: w.Beta})
		}
	}
}

// column is one feature column's sorted order, for the stumps.
type column struct {
	order  []int32   // training rows by increasing value (ties by row)
	pos    []float64 // 1 where the row at that position is positive, else 0
	cut    []int32   // positions k with value(order[k]) < value(order[k+1])
	thresh []float64 // the thresholds of the cuts
	below  []int32   // positives at positions ≤ cut
}

// Fit boosts on the n rows of X (row-major, dim columns each: the members'
// outputs, then the features) with labels y (−1 or +1; both must occur).
// It returns ErrChance when the first round finds nothing better than
// chance, and ctx.Err() when ctx ends.
func Fit(ctx context.Context, X, y []float64, dim int, cfg Config) (*Ensemble, error) {
	n, p := len(y), cfg.Members
	switch {
	case cfg.Rounds < 1 || cfg.Rounds > MaxRounds:
		return nil, fmt.Errorf("adaboost: rounds must be in 1..%d, got %d", MaxRounds, cfg.Rounds)
	case p < 0 || p > dim:
		return nil, fmt.Errorf("adaboost: %d members for inputs of dimension %d", p, dim)
	case cfg.Stumps && p == dim:
		return nil, fmt.Errorf("adaboost: stumps: no feature columns (dimension %d, %d members)", dim, p)
	case p == 0 && !cfg.Stumps:
		return nil, errors.New("adaboost: empty dictionary: no members and no stumps")
	case n == 0:
		return nil, errors.New("adaboost: no training rows")
	case len(X) != n*dim:
		return nil, fmt.Errorf("adaboost: %d values for %d rows of dimension %d", len(X), n, dim)
	case n > math.MaxInt32:
		return nil, fmt.Errorf("adaboost: %d rows", n)
	}
	pos := 0
	for i, v := range y {
		switch v {
		case 1:
			pos++
		case -1:
		default:
			return nil, fmt.Errorf("adaboost: label %v of row %d is not −1 or +1", v, i)
		}
	}
	if pos == 0 || pos == n {
		return nil, fmt.Errorf("adaboost: %d positive and %d negative rows; need both classes", pos, n-pos)
	}
	// Members: each one's mistakes (no decision included) do not depend on
	// the weights.
	var mis [][]int32
	for j := range p {
		var rows []int32
		for i := range n {
			if float64(sign(X[i*dim+j])) != y[i] {
				rows = append(rows, int32(i))
			}
		}
		mis = append(mis, rows)
	}
	var cols []column
	if cfg.Stumps {
		cols = make([]column, dim-p)
		for f := range cols {
			c := p + f
			for i := range n {
				if v := X[i*dim+c]; math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("adaboost: feature %d of row %d is %v", f, i, v)
				}
			}
			cols[f] = sortColumn(X, y, dim, c)
		}
	}

	e := &Ensemble{dim: dim, members: p, n: n, stop: StopRounds}
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / float64(n)
	}
	wrong := make([]bool, n)
	for range cfg.Rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		best, count, ok := pick(y, w, pos, mis, cols)
		if !ok {
			break // no member and no stump with a cut: nothing to pick
		}
		// Rounding (the totals and the cumulative sums add in different
		// orders) can leave a tiny negative error, or a tiny positive one
		// without mistakes.
		best.Err = max(best.Err, 0)
		if count == 0 {
			best.Err, best.Beta = 0, BetaMax
			e.rounds = append(e.rounds, best)
			e.stop = StopPerfect
			break
		}
		if !(best.Err < 0.5) {
			e.stop = StopChance
			break
		}
		err := max(best.Err, Eps)
		best.Beta = 0.5 * math.Log((1-err)/err)
		e.rounds = append(e.rounds, best)
		// w·e^{±β}/Z with Z = 2√(err(1−err)) is w/(2·err) on the mistakes
		// and w/(2(1−err)) elsewhere; the sum then renormalises rounding.
		mistakes(wrong, X, y, dim, p, mis, best)
		var s float64
		for i := range w {
			if wrong[i] {
				w[i] = w[i] / (2 * err)
			} else {
				w[i] = w[i] / (2 * (1 - err))
			}
			s += w[i]
		}
		for i := range w {
			w[i] = w[i] / s
		}
	}
	if len(e.rounds) == 0 {
		if e.stop == StopChance {
			return nil, ErrChance
		}
		return nil, errors.New("adaboost: empty dictionary: no members and every feature is constant")
	}
	e.build()
	return e, nil
}

// sortColumn sorts the training rows by column c (stably: ties by row) and
// lists the cuts between distinct values with their thresholds: halfway,
// or the lower value if halfway rounds up to the higher one.
func sortColumn(X, y []float64, dim, c int) column {
	n := len(y)
	col := column{order: make([]int32, n), pos: make([]float64, n)}
	for i := range col.order {
		col.order[i] = int32(i)
	}
	slices.SortFunc(col.order, func(a, b int32) int { return cmp.Or(cmp.Compare(X[int(a)*dim+c], X[int(b)*dim+c]), cmp.Compare(a, b)) })
	var np int32
	for k, i := range col.order {
		if y[i] > 0 {
			col.pos[k] = 1
			np++
		}
		if k == n-1 {
			break
		}
		a, b := X[int(i)*dim+c], X[int(col.order[k+1])*dim+c]
		if a < b {
			t := (a + b) / 2
			if t >= b || math.IsInf(t, 0) {
				t = a
			}
			col.cut = append(col.cut, int32(k))
			col.thresh = append(col.thresh, t)
			col.below = append(col.below, np)
		}
	}
	return col
}

// pick returns the dictionary member of least weighted error (the first in
// dictionary order on ties) and its number of mistakes; ok is false if the
// dictionary is empty. The weights of the positive and of the negative
// rows are summed in row order, the cumulative sums of a column in its
// sorted order.
func pick(y, w []float64, np int, mis [][]int32, cols []column) (best Round, count int, ok bool) {
	var P, N float64
	for i, v := range w {
		if y[i] > 0 {
			P += v
		} else {
			N += v
		}
	}
	W, n := P+N, len(y)
	// Compared by the mistakes' weight (err = raw/W, W fixed for the round);
	// err is computed for the winner only.
	var bestRaw float64
	for j, rows := range mis {
		var raw float64
		for _, i := range rows {
			raw += w[i]
		}
		if !ok || raw < bestRaw {
			bestRaw, best, count, ok = raw, Round{Member: j, Feature: -1, Polarity: 1}, len(rows), true
		}
	}
	for f := range cols {
		col := &cols[f]
		var cp, cn float64 // weights of the positives and negatives at or below the cut
		k := 0
		for c, at := range col.cut {
			for ; k <= int(at); k++ {
				// Branch-free: adding 0·w leaves a sum unchanged.
				v, q := w[col.order[k]], col.pos[k]
				cp += v * q
				cn += v * (1 - q)
			}
			// Polarity +1 (+1 at or below t) errs on the negatives below
			// and the positives above; polarity −1 on the others.
			plus, minus := cn+(P-cp), cp+(N-cn)
			if ok && plus >= bestRaw && minus >= bestRaw {
				continue
			}
			kp := int(col.below[c])
			kn := int(at) + 1 - kp
			if !ok || plus < bestRaw {
				bestRaw, best, count, ok = plus, Round{Member: -1, Feature: f, Threshold: col.thresh[c], Polarity: 1}, kn+(np-kp), true
			}
			if minus < bestRaw {
				bestRaw, best, count = minus, Round{Member: -1, Feature: f, Threshold: col.thresh[c], Polarity: -1}, kp+((n-np)-kn)
			}
		}
	}
	best.Err = bestRaw / W
	return best, count, ok
}

// mistakes sets wrong[i] when the round's member errs on row i.
func mistakes(wrong []bool, X, y []float64, dim, p int, mis [][]int32, r Round) {
	if r.Member >= 0 {
		clear(wrong)
		for _, i := range mis[r.Member] {
			wrong[i] = true
		}
		return
	}
	c := p + r.Feature
	for i := range wrong {
		h := -r.Polarity
		if X[i*dim+c] <= r.Threshold {
			h = r.Polarity
		}
		wrong[i] = float64(h) != y[i]
	}
}
