package seed001

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Evaluation is a model's batch performance on a trial.
type Evaluation struct {
	// Mean is the mean of Users: the trial's result.
	Mean Result
	// Users are the test users' results, in the order of Trial.Tests.
	Users []Result
	// Predictions[i][k] is the model's f on Tests[i].Test[k], learned
	// from Tests[i].Train. f has no offset (its α sum to 0): a model that
	// adds a constant per user, to put f on the ratings' scale, predicts
	// the same differences and has the same MSD and M1D.
	Predictions [][]float64
}

// Evaluate fits the model with parameters p to each test user's Train
// ratings (inputs from Input) and measures it on the user's Test ratings.
// Test users are processed in parallel by up to GOMAXPROCS goroutines; the
// result does not depend on their number.
func (t *Trial) Evaluate(p Params) (*Evaluation, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	ev := &Evaluation{Users: make([]Result, len(t.Tests)), Predictions: make([][]float64, len(t.Tests))}
	err := forEach(len(t.Tests), func(i int) error {
		c := t.newUserCase(&t.Tests[i])
		f, err := c.predict(p)
		if err != nil {
			return fmt.Errorf("user %d: %w", t.Tests[i].User, err)
		}
		ev.Predictions[i] = f
		ev.Users[i] = Measure(c.ytest, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	ev.Mean = Average(ev.Users)
	return ev, nil
}

// Select evaluates every setting of grid on the trial, as Evaluate would,
// and returns the results (means over the test users, in the order of
// grid) and the index of the setting with the least mean MSD (the first
// on ties).
//
// This is the paper's choice of "the parameters with the best
// performance": it is made on the test halves of the trial it is judged
// on (the experiment uses repetition 0 of each group), not on held-out
// validation data, so the selected result is optimistic.
//
// Each test user's squared distances (train×train and test×train) are
// computed once and each width's kernel matrices once, for all of grid;
// test users are processed in parallel by up to GOMAXPROCS goroutines.
func (t *Trial) Select(grid []Params) (best int, results []Result, err error) {
	if len(grid) == 0 {
		return 0, nil, errors.New("empty grid")
	}
	if len(t.Tests) == 0 {
		return 0, nil, errors.New("no test users")
	}
	for _, p := range grid {
		if err := p.check(); err != nil {
			return 0, nil, fmt.Errorf("%v: %w", p, err)
		}
	}
	perUser := make([][]Result, len(t.Tests))
	err = forEach(len(t.Tests), func(i int) error {
		c := t.newUserCase(&t.Tests[i])
		perUser[i] = make([]Result, len(grid))
		for g, p := range grid {
			f, err := c.predict(p)
			if err != nil {
				return fmt.Errorf("user %d, %v: %w", t.Tests[i].User, p, err)
			}
			perUser[i][g] = Measure(c.ytest, f)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	results = make([]Result, len(grid))
	rs := make([]Result, len(t.Tests))
	for g := range grid {
		for i := range rs {
			rs[i] = perUser[i][g]
		}
		results[g] = Average(rs)
		if results[g].MSD < results[best].MSD {
			best = g
		}
	}
	return best, results, nil
}

// LSRRankGrid returns the paper's LSRRank grid: σ ∈ {4⁻³, …, 4³} × λ ∈
// {10⁻⁵, …, 10¹}, one kernel with v = 1 (49 settings).
func LSRRankGrid() []Params {
	var out []Params
	for _, s := range sigmas() {
		for _, l := range lambdas() {
			out = append(out, Params{Lambda: l, Kernels: []Kernel{RBF(s, 1)}})
		}
	}
	return out
}

// MLSRRankGrid returns the paper's MLSRRank grid: widths σ1 < σ2 from
// {4⁻³, …, 4³}, weights (v1, v2) ∈ {(1,1), (1,2), (2,1), (1,4), (4,1)} and
// λ ∈ {10⁻⁵, …, 10¹} (21 × 5 × 7 = 735 settings).
func MLSRRankGrid() []Params {
	vs := [][2]float64{{1, 1}, {1, 2}, {2, 1}, {1, 4}, {4, 1}}
	ss := sigmas()
	var out []Params
	for i, s1 := range ss {
		for _, s2 := range ss[i+1:] {
			for _, v := range vs {
				for _, l := range lambdas() {
					out = append(out, Params{Lambda: l, Kernels: []Kernel{RBF(s1, v[0]), RBF(s2, v[1])}})
				}
			}
		}
	}
	return out
}

// sigmas returns 4^k for k = −3 … 3.
func sigmas() []float64 {
	var out []float64
	for k := -3; k <= 3; k++ {
		out = append(out, math.Ldexp(1, 2*k))
	}
	return out
}

// lambdas returns 10^k for k = −5 … 1.
func lambdas() []float64 {
	var out []float64
	for k := -5; k <= 1; k++ {
		out = append(out, math.Pow10(k))
	}
	return out
}

// userCase is what fitting any model to one test user needs: the ratings
// and the squared distances between the inputs, with the rbf kernel
// matrices computed so far.
type userCase struct {
	ytrain, ytest []float64
	dtt           []float64 // train×train, row-major
	dst           []float64 // test×train, row-major
	exps          map[float64][2][]float64
	// kernels are the kernels of the last predict, and kbarTT and kbarST
	// their combined train×train and test×train matrices; work is solve's
	// copy of kbarTT.
	kernels              []Kernel
	kbarTT, kbarST, work []float64
}

// newUserCase computes u's squared distances.
func (t *Trial) newUserCase(u *TestUser) *userCase {
	m, n := len(u.Train), len(u.Test)
	c := &userCase{
		ytrain: make([]float64, m),
		ytest:  make([]float64, n),
		dtt:    make([]float64, m*m),
		dst:    make([]float64, n*m),
		exps:   map[float64][2][]float64{},
	}
	for i, r := range u.Train {
		c.ytrain[i] = r.Value
		for j, q := range u.Train[:i] {
			d := t.dist2(r.Movie, q.Movie)
			c.dtt[i*m+j], c.dtt[j*m+i] = d, d
		}
	}
	for s, r := range u.Test {
		c.ytest[s] = r.Value
		for i, q := range u.Train {
			c.dst[s*m+i] = t.dist2(q.Movie, r.Movie)
		}
	}
	return c
}

// exp returns exp(−γ·dtt) and exp(−γ·dst), computed on first use.
func (c *userCase) exp(gamma float64) [2][]float64 {
	if e, ok := c.exps[gamma]; ok {
		return e
	}
	e := [2][]float64{make([]float64, len(c.dtt)), make([]float64, len(c.dst))}
	for k, d := range [2][]float64{c.dtt, c.dst} {
		for i, v := range d {
			e[k][i] = math.Exp(-gamma * v)
		}
	}
	c.exps[gamma] = e
	return e
}

// predict fits the model with parameters p to the train ratings and
// returns its predictions on the test ratings, bit for bit as Fit and
// Predict would from the same distances. The combined kernel matrices are
// kept for the next call with the same kernels (a grid varies λ fastest).
func (c *userCase) predict(p Params) ([]float64, error) {
	if !slices.Equal(p.Kernels, c.kernels) {
		c.kernels = slices.Clone(p.Kernels)
		c.kbarTT = c.combine(c.kbarTT, p.Kernels, 0)
		c.kbarST = c.combine(c.kbarST, p.Kernels, 1)
	}
	c.work = append(c.work[:0], c.kbarTT...)
	alpha, err := solve(p.Lambda, c.work, c.ytrain)
	if err != nil {
		return nil, err
	}
	m := len(c.ytrain)
	f := make([]float64, len(c.ytest))
	for s := range f {
		v := 0.0
		for i, a := range alpha {
			v += a * c.kbarST[s*m+i]
		}
		f[s] = v
	}
	return f, nil
}

// combine returns, in dst's storage, K̄ = Σ_k K_k/V_k over train×train
// (which = 0) or test×train (which = 1), summed in the order of kernels as
// Params.kernel does.
func (c *userCase) combine(dst []float64, kernels []Kernel, which int) []float64 {
	for k, kn := range kernels {
		e := c.exp(kn.Gamma)[which]
		if k == 0 {
			dst = dst[:0]
			for _, v := range e {
				dst = append(dst, v/kn.V)
			}
			continue
		}
		for i, v := range e {
			dst[i] += v / kn.V
		}
	}
	return dst
}

// forEach calls f(0), …, f(n−1) from up to GOMAXPROCS goroutines and
// returns the error of the lowest-numbered call that failed (once one
// fails, calls not yet started are skipped).
func forEach(n int, f func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = f(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
