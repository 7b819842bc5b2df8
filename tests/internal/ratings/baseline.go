package ratings

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Clip bounds x to [lo, hi].
func Clip(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// kahan is a compensated sum.
type kahan struct{ sum, c float64 }

func (k *kahan) add(x float64) {
	y := x - k.c
	t := k.sum + y
	k.c = (t - k.sum) - y
	k.sum = t
}

// Mean is the running mean of the ratings learned so far; 0 before the
// first.
type Mean struct {
	sum kahan
	n   int
}

// Predict returns the mean so far (0 before any rating).
func (m *Mean) Predict() float64 {
	if m.n == 0 {
		return 0
	}
	return m.sum.sum / float64(m.n)
}

// Learn adds y.
func (m *Mean) Learn(y float64) { m.sum.add(y); m.n++ }

// N returns the ratings learned.
func (m *Mean) N() int { return m.n }

// Biases is the running mean plus a user bias and an item bias learned by
// SGD on the squared error without L2: after predicting ŷ = μ + b_u + b_i
// (μ the mean of the ratings before this one, the biases 0 until their
// user's or item's first rating is learned), Learn moves both biases by
// Step·(y − ŷ), then adds y to the mean.
type Biases struct {
	Step   float64
	mean   Mean
	bu, bi map[int]float64
}

// NewBiases returns the baseline with the given step (0.05 in the
// reference figures).
func NewBiases(step float64) *Biases {
	return &Biases{Step: step, bu: map[int]float64{}, bi: map[int]float64{}}
}

// Predict returns μ + b_u + b_i, unclipped.
func (b *Biases) Predict(user, item int) float64 {
	return b.mean.Predict() + b.bu[user] + b.bi[item]
}

// Learn takes rating y of item by user.
func (b *Biases) Learn(user, item int, y float64) {
	e := y - b.Predict(user, item)
	b.bu[user] += b.Step * e
	b.bi[item] += b.Step * e
	b.mean.Learn(y)
}

// FunkMF is the running mean plus user and item biases and K latent
// factors per user and per item, learned by SGD on the squared error with
// an L2 penalty, in one pass: the online form of the biased matrix
// factorisation of Funk's Netflix-prize method (Surprise's SVD update).
// After predicting ŷ = μ + b_u + b_i + ⟨p_u, q_i⟩ (μ the mean of the
// ratings before this one; biases 0 and factors drawn N(0, 0.1²) at a
// user's or item's first rating), Learn moves, with e = y − ŷ,
// b_u, b_i by Step·(e − L2·b) and p_u, q_i by Step·(e·q_i − L2·p_u),
// Step·(e·p_u − L2·q_i), then adds y to the mean.
type FunkMF struct {
	Step, L2 float64
	K        int
	mean     Mean
	bu, bi   map[int]float64
	p, q     map[int][]float64
	rng      *rand.Rand
}

// NewFunkMF returns the baseline with the given step, L2 penalty and
// factors; its initial factors are drawn from seed in the order users
// and items first appear.
func NewFunkMF(step, l2 float64, k int, seed uint64) *FunkMF {
	return &FunkMF{Step: step, L2: l2, K: k, bu: map[int]float64{}, bi: map[int]float64{},
		p: map[int][]float64{}, q: map[int][]float64{}, rng: rand.New(rand.NewPCG(seed, 0x66756e6b))}
}

func (f *FunkMF) factors(m map[int][]float64, id int) []float64 {
	v, ok := m[id]
	if !ok {
		v = make([]float64, f.K)
		for k := range v {
			v[k] = 0.1 * f.rng.NormFloat64()
		}
		m[id] = v
	}
	return v
}

// Predict returns μ + b_u + b_i + ⟨p_u, q_i⟩, unclipped (a user or item
// not seen yet contributes nothing).
func (f *FunkMF) Predict(user, item int) float64 {
	y := f.mean.Predict() + f.bu[user] + f.bi[item]
	pu, qi := f.p[user], f.q[item]
	if pu != nil && qi != nil {
		for k := range pu {
			y += pu[k] * qi[k]
		}
	}
	return y
}

// Learn takes rating y of item by user.
func (f *FunkMF) Learn(user, item int, y float64) {
	pu, qi := f.factors(f.p, user), f.factors(f.q, item)
	e := y - f.Predict(user, item)
	f.bu[user] += f.Step * (e - f.L2*f.bu[user])
	f.bi[item] += f.Step * (e - f.L2*f.bi[item])
	for k := range pu {
		p, q := pu[k], qi[k]
		pu[k] += f.Step * (e*q - f.L2*p)
		qi[k] += f.Step * (e*p - f.L2*q)
	}
	f.mean.Learn(y)
}

// FunkMFSteps are the steps BestFunkMF tries.
var FunkMFSteps = []float64{0.01, 0.02, 0.05, 0.1, 0.2}

// BestFunkMF runs FunkMF (L2 0.02, k factors) with each of FunkMFSteps
// over rs in the given order (nil: rs's own), each rating predicted,
// clipped to [lo, hi], before it is learned, and returns the least RMSE
// and its step: the best in hindsight, optimistic for the baseline.
func BestFunkMF(rs []Rating, order []int, k int, lo, hi float64) (rmse, step float64) {
	rmse = math.Inf(1)
	for _, s := range FunkMFSteps {
		f := NewFunkMF(s, 0.02, k, 1)
		var e RMSE
		inOrder(len(rs), order, func(i int) {
			r := rs[i]
			e.Add(Clip(f.Predict(r.User, r.Item), lo, hi), r.Value)
			f.Learn(r.User, r.Item, r.Value)
		})
		if v := e.Value(); v < rmse {
			rmse, step = v, s
		}
	}
	return rmse, step
}

// Baselines holds every event's prequential prediction by the baselines,
// clipped to the rating range: each rating is predicted before it is
// learned.
type Baselines struct {
	Mean, Biases []float64 // indexed like the ratings
}

// RunBaselines predicts then learns every rating of rs, in the order given
// by order (indices into rs; nil: rs's own order), with the running mean and
// the biases (step), and returns the predictions clipped to [lo, hi]
// indexed like rs.
func RunBaselines(rs []Rating, order []int, step, lo, hi float64) Baselines {
	out := Baselines{Mean: make([]float64, len(rs)), Biases: make([]float64, len(rs))}
	var m Mean
	b := NewBiases(step)
	inOrder(len(rs), order, func(i int) {
		r := rs[i]
		out.Mean[i] = Clip(m.Predict(), lo, hi)
		out.Biases[i] = Clip(b.Predict(r.User, r.Item), lo, hi)
		m.Learn(r.Value)
		b.Learn(r.User, r.Item, r.Value)
	})
	return out
}

// inOrder calls visit with each index of n ratings in the order given by
// order (indices; nil: 0, 1, …, n−1).
func inOrder(n int, order []int, visit func(i int)) {
	if order == nil {
		for i := range n {
			visit(i)
		}
		return
	}
	for _, i := range order {
		visit(i)
	}
}

// ClassifierBaseline is a baseline classifier's prequential figures
// against the outcome rating ≥ liked, as Result has a model's.
type ClassifierBaseline struct {
	Name string `json:"name"`
	BinaryFigures
}

// ClassifierBaselines judges two baselines of a classifier of the outcome
// rating ≥ liked over rs[from:], each event predicted before it is
// learned, in rs's order (base: RunBaselines in that order):
//
//   - the running rate of the outcome: its probability is the fraction of
//     positive ratings so far (½ before the first), its decision the
//     majority so far;
//   - the biases baseline's predicted rating as the score, deciding
//     "positive" when it is ≥ t, t the one of liked − 2h, liked − h and
//     liked with the best accuracy in hindsight (optimistic for the
//     baseline), h a ninth of the ratings' range (½ on a 0.5..5 scale);
//     no probability.
func ClassifierBaselines(rs []Rating, base Baselines, liked float64, from int) []ClassifierBaseline {
	var rate Binary
	pos, n := 0, 0
	for i, r := range rs {
		if i >= from {
			p := 0.5
			if n > 0 {
				p = float64(pos) / float64(n)
			}
			d := -1.0
			if p >= 0.5 {
				d = 1
			}
			rate.Add(r.Value >= liked, p, d, p)
		}
		n++
		if r.Value >= liked {
			pos++
		}
	}
	out := []ClassifierBaseline{{"running rate of liked ratings", rate.Figures()}}
	// The thresholds tried: liked and one and two ninths of the ratings'
	// range below it (3, 3.5 and 4 for liked 4 on a 0.5..5 scale, the
	// same multiples on any other).
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rs {
		lo, hi = min(lo, r.Value), max(hi, r.Value)
	}
	h := max(hi-lo, 0) / 9
	ts := []float64{liked - 2*h, liked - h, liked}
	var best ClassifierBaseline
	for k, t := range ts {
		var b Binary
		for i := from; i < len(rs); i++ {
			d := -1.0
			if base.Biases[i] >= t {
				d = 1
			}
			b.Add(rs[i].Value >= liked, base.Biases[i], d, math.NaN())
		}
		c := ClassifierBaseline{fmt.Sprintf("biases' predicted rating, liked when ≥ %.4g (the best of %.4g, %.4g, %.4g in hindsight)", t, ts[0], ts[1], ts[2]), b.Figures()}
		if k == 0 || c.Accuracy > best.Accuracy {
			best = c
		}
	}
	return append(out, best)
}
