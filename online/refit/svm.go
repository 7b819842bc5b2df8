package refit

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/svm"
)

// SVMName is the configuration's name of the kernel SVM type.
const SVMName = "svm"

// SVMParams are the parameters of type "svm": LIBSVM's C-SVC, refitted in
// the background from a window.
type SVMParams struct {
	Kernel      SVMKernel   `yaml:"kernel"`
	C           float64     `yaml:"C"`     // box constraint of both classes, > 0 (default 1)
	CPos        float64     `yaml:"C_pos"` // C of class +1 (0: C)
	CNeg        float64     `yaml:"C_neg"` // C of class −1 (0: C)
	Delta       float64     `yaml:"delta"` // δ of the certainty bound, in (0, 1) (default 0.05)
	Window      Window      `yaml:"window"`
	Refit       SVMRefit    `yaml:"refit"`
	Probability Probability `yaml:"probability"`
}

// SVMKernel is the svm's "kernel" key, in LIBSVM's parameterisation (the
// exact kernel: no random features).
type SVMKernel struct {
	Type   string  `yaml:"type"`   // linear, rbf (default), laplacian, polynomial, sigmoid
	Gamma  float64 `yaml:"gamma"`  // all but linear (default 1/dim, as LIBSVM)
	Degree int     `yaml:"degree"` // polynomial (default 2)
	Coef0  float64 `yaml:"coef0"`  // polynomial, sigmoid (default 1)
}

// SVMRefit is the svm's "refit" key: the schedule and the guard.
type SVMRefit struct {
	Schedule `yaml:",inline"`
	// Guard is the newest fraction of the window held back to judge a new
	// model, in [0, 0.5) (default 0.1; 0 = off); it replaces the serving
	// one only if its held-back error is at most the old one's + GuardSlack
	// (default 0.02).
	Guard      float64 `yaml:"guard"`
	GuardSlack float64 `yaml:"guard_slack"`
}

// Probability is the svm's "probability" key.
type Probability struct {
	Levels int `yaml:"levels"` // H: weighted SVMs at π = h/H, 2..100; 0 = off
}

var svmKernels = map[string]svm.KernelType{"linear": svm.Linear, "rbf": svm.RBF, "laplacian": svm.Laplacian, "polynomial": svm.Polynomial, "sigmoid": svm.Sigmoid}

// DefaultSVMParams returns the defaults of type "svm" (kernel.gamma's, 1/dim,
// is set by Complete).
func DefaultSVMParams() SVMParams {
	return SVMParams{
		Kernel: SVMKernel{Type: "rbf"},
		C:      1, Delta: online.DefaultDelta,
		Window: Window{Events: DefaultWindow},
		Refit:  SVMRefit{Schedule: Schedule{EveryEvents: DefaultRefitEvery}, Guard: 0.1, GuardSlack: 0.02},
	}
}

// Complete applies the kernel type's defaults to the keys not given
// (gamma = 1/dim, LIBSVM's, for every kernel but linear) and the refit
// schedule's.
func (p *SVMParams) Complete(dim int, given func(string) bool) {
	k := &p.Kernel
	if !given("kernel.gamma") {
		k.Gamma = 0
		if k.Type != "linear" && dim > 0 {
			k.Gamma = 1 / float64(dim)
		}
	}
	if !given("kernel.degree") {
		k.Degree = 0
		if k.Type == "polynomial" {
			k.Degree = 2
		}
	}
	if !given("kernel.coef0") {
		k.Coef0 = 0
		if k.Type == "polynomial" || k.Type == "sigmoid" {
			k.Coef0 = 1
		}
	}
	p.Refit.Schedule.complete(given)
}

// Validate checks the parameters for inputs of dimension dim.
func (p *SVMParams) Validate(dim int) error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, specErrorf(key, format, args...)) }
	k := p.Kernel
	if _, ok := svmKernels[k.Type]; !ok {
		add("kernel.type", "%q is not one of linear, rbf, laplacian, polynomial, sigmoid", k.Type)
	}
	if k.Type == "linear" {
		if k.Gamma != 0 {
			add("kernel.gamma", "not used by the linear kernel; remove it")
		}
	} else if !positive(k.Gamma) {
		add("kernel.gamma", "must be a finite number > 0, got %v", k.Gamma)
	}
	if k.Type == "polynomial" {
		if k.Degree < 1 || k.Degree > 16 {
			add("kernel.degree", "must be in 1..16, got %d", k.Degree)
		}
	} else if k.Degree != 0 {
		add("kernel.degree", "only for kernel type polynomial; remove it (kernel.type is %s)", k.Type)
	}
	if k.Type == "polynomial" || k.Type == "sigmoid" {
		if !isFinite(k.Coef0) {
			add("kernel.coef0", "must be a finite number, got %v", k.Coef0)
		}
	} else if k.Coef0 != 0 {
		add("kernel.coef0", "only for kernel types polynomial and sigmoid; remove it (kernel.type is %s)", k.Type)
	}
	if !positive(p.C) {
		add("C", "must be a finite number > 0, got %v", p.C)
	}
	for _, c := range []struct {
		key string
		v   float64
	}{{"C_pos", p.CPos}, {"C_neg", p.CNeg}} {
		if !(c.v >= 0) || math.IsInf(c.v, 0) {
			add(c.key, "must be a finite number > 0 (0 = C), got %v", c.v)
		}
	}
	if !(p.Delta > 0 && p.Delta < 1) {
		add("delta", "must be in (0, 1), got %v", p.Delta)
	}
	checkWindow(&errs, p.Window, p.Refit.Schedule, dim)
	if !(p.Refit.Guard >= 0 && p.Refit.Guard < 0.5) {
		add("refit.guard", "must be in [0, 0.5), got %v", p.Refit.Guard)
	}
	if !(p.Refit.GuardSlack >= 0) || math.IsInf(p.Refit.GuardSlack, 0) {
		add("refit.guard_slack", "must be a finite number ≥ 0, got %v", p.Refit.GuardSlack)
	}
	if l := p.Probability.Levels; l != 0 && (l < 2 || l > 100) {
		add("probability.levels", "must be in 2..100 (0 = off), got %d", l)
	}
	return errors.Join(errs...)
}

// SVMType is the "svm" model type.
func SVMType() *online.Type {
	return online.Define(online.Def[SVMParams]{
		Name:     SVMName,
		Doc:      "kernel C-SVC (LIBSVM's SMO: WSS2, shrinking, kernel cache) refitted in the background from a window; optional probability from weighted SVMs",
		Defaults: DefaultSVMParams,
		Traits: func(p *SVMParams) online.Traits {
			// The sigmoid kernel is not positive definite: no bound.
			return online.Traits{Kind: online.Classifier, Bound: p.Kernel.Type != "sigmoid",
				Probability: p.Probability.Levels > 0, Refitted: true}
		},
		Examples: func() []SVMParams {
			p := DefaultSVMParams()
			p.Kernel.Gamma, p.Window.Events, p.Refit.EveryEvents = 0.5, 30, 12
			prob := p
			prob.Probability.Levels, prob.Refit.Guard = 4, 0
			linear := p
			linear.Kernel = SVMKernel{Type: "linear"}
			sigmoid := p
			sigmoid.Kernel = SVMKernel{Type: "sigmoid", Gamma: 0.1, Coef0: 0}
			return []SVMParams{p, prob, linear, sigmoid}
		},
		New:     newSVMModel,
		Restore: func(b []byte) (online.Model, error) { return restore(b, SVMName, newSVMModel) },
	})
}

func newSVMModel(dim int, p *SVMParams) (online.Model, error) { return newSVM(dim, 0, p) }

// newSVM builds an svm; nnz > 0: of hashed features (Config.Sparse).
func newSVM(dim, nnz int, p *SVMParams) (online.Model, error) {
	params := svm.Params{
		Kernel: svm.Kernel{Type: svmKernels[p.Kernel.Type], Gamma: p.Kernel.Gamma, Coef0: p.Kernel.Coef0, Degree: p.Kernel.Degree},
		C:      p.C, CPos: p.CPos, CNeg: p.CNeg,
	}
	return New(Config{
		Type: SVMName, Params: p, Dim: dim,
		Window: p.Window.Events, WindowTime: p.Window.Time, MinEvents: p.Window.MinEvents,
		EveryEvents: p.Refit.EveryEvents, Every: p.Refit.Every, OnScore: p.Refit.OnScore, Guard: p.Refit.Guard, GuardSlack: p.Refit.GuardSlack,
		Sparse: nnz,
	}, &SVM{Params: params, Delta: p.Delta, ProbLevels: p.Probability.Levels, NoBound: p.Kernel.Type == "sigmoid"})
}

// SVM trains kernel SVMs (online/svm, the LIBSVM algorithm) on windows.
// Scores are decision values; the certainty bound is Corollary 1 of
// docs/math.md §4 with the clipped margin g(z) = min(1, max(−1, z)): W² =
// αᵀQα of the dual solution, tr Ω and the average clipped margin over the
// training window, evaluated at ρ = min(|f(x)|, 1) (none with NoBound: the
// sigmoid kernel is not positive definite). With ProbLevels ≥ 2 it also
// fits the weighted SVMs at π = h/H and publishes a probability. A window
// is a fresh problem: the previous window's α do not map onto the new rows,
// so fits start cold (the weighted fits of the probability option
// warm-start along π).
type SVM struct {
	Params     svm.Params
	Delta      float64
	ProbLevels int
	NoBound    bool
}

var (
	_ sparseTrainer = (*SVM)(nil)
	_ sparseFitted  = (*svmFit)(nil)
)

func (*SVM) fitsSparse() {}

// Label maps −1/0 to −1 and 1 to +1.
func (t *SVM) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Fit trains on d.
func (t *SVM) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	if d.Rows != nil {
		return t.fitSparse(ctx, d)
	}
	X, err := binaryRows(d, "svm")
	if err != nil {
		return nil, Stats{}, err
	}
	n := len(X)
	m, err := svm.Train(ctx, X, d.Y, t.Params, nil)
	if err != nil {
		return nil, Stats{}, err
	}
	f := &svmFit{m: m, marginStats: marginStats{delta: t.Delta, n: n}, noBound: t.NoBound}
	var clip float64
	for i := range n {
		clip += svm.Clip(d.Y[i] * m.Decision(X[i]))
		f.tr += m.Kernel.Eval(X[i], X[i])
	}
	f.avgClip = clip / float64(n)
	f.w = math.Sqrt(max(m.W2(), 0))
	if t.ProbLevels >= 2 {
		if f.prob, err = svm.TrainProbability(ctx, X, d.Y, t.Params, t.ProbLevels); err != nil {
			return nil, Stats{}, err
		}
	}
	return f, Stats{SupportVectors: m.NSV(), Objective: m.Obj, Iterations: m.Iter}, nil
}

// fitSparse trains on the sparse rows of d (hashed features).
func (t *SVM) fitSparse(ctx context.Context, d *Data) (Fitted, Stats, error) {
	if err := binaryLabels(d.Y, "svm"); err != nil {
		return nil, Stats{}, err
	}
	n := d.N()
	m, err := svm.TrainSparse(ctx, d.Rows, d.D, d.Y, t.Params, nil)
	if err != nil {
		return nil, Stats{}, err
	}
	f := &svmFit{m: m, marginStats: marginStats{delta: t.Delta, n: n}, noBound: t.NoBound}
	var clip float64
	buf := make([]float64, m.NSV())
	for i, x := range d.Rows {
		clip += svm.Clip(d.Y[i] * m.DecisionSparse(x, buf))
		f.tr += m.Kernel.EvalSparse(x, x)
	}
	f.avgClip = clip / float64(n)
	f.w = math.Sqrt(max(m.W2(), 0))
	if t.ProbLevels >= 2 {
		if f.prob, err = svm.TrainProbabilitySparse(ctx, d.Rows, d.D, d.Y, t.Params, t.ProbLevels); err != nil {
			return nil, Stats{}, err
		}
	}
	return f, Stats{SupportVectors: m.NSV(), Objective: m.Obj, Iterations: m.Iter}, nil
}

type svmFit struct {
	m           *svm.Model
	prob        *svm.ProbModel
	marginStats      // w = ‖w‖ = sqrt(αᵀQα), tr = Σ K(xᵢ, xᵢ)
	noBound     bool // not encoded: the type's configuration decides
}

func (f *svmFit) Predict(x []float64) online.Prediction {
	p := f.prediction(f.m.Decision(x))
	if f.prob != nil {
		p.Probability, p.HasProbability = f.prob.Prob(x), true
	}
	return p
}

// prediction is the prediction of decision value s, without a probability.
func (f *svmFit) prediction(s float64) online.Prediction {
	p := online.Prediction{Score: s, N: int64(f.n)}
	switch {
	case s > 0:
		p.Label = 1
	case s < 0:
		p.Label = -1
	}
	if !f.noBound {
		p.HasBound, p.Delta = true, f.delta
		p.MistakeBound = f.Bound(math.Abs(s))
	}
	return p
}

// predictSparse is Predict for a sparse x (buf: svm.Model.DecisionSparse's).
func (f *svmFit) predictSparse(x sparse.Row, buf []float64) online.Prediction {
	p := f.prediction(f.m.DecisionSparse(x, buf))
	if f.prob != nil {
		p.Probability, p.HasProbability = f.prob.ProbSparse(x, buf), true
	}
	return p
}

func (f *svmFit) sparseRows() bool { return f.m.Sparse() }

// Encoding of a fitted SVM (package online/codec's conventions; pinned by
// testdata/format_svmfit*_v1.bin): magic "RSVM" u16 version 1, n u32,
// delta, avgClip, w, tr float64, the model as a frame (u32 length +
// svm.Model's encoding), prob H u32 (0 = none), then H−1 model frames.
const (
	svmFitMagic   = "RSVM"
	svmFitVersion = 1
	maxProbLevels = 1000 // H of a decoded fit
)

// MarshalBinary encodes the fit.
func (f *svmFit) MarshalBinary() ([]byte, error) {
	var h int
	var probs []appendFunc
	if f.prob != nil {
		h = f.prob.H
		for _, m := range f.prob.Models {
			probs = append(probs, m.AppendBinary)
		}
	}
	return appendMarginFit(svmFitMagic, svmFitVersion, &f.marginStats, f.m.AppendBinary, h, probs)
}

// Unmarshal restores a fit written by MarshalBinary. Errors wrap
// ErrFormat (and, for a model that does not decode, svm.ErrFormat).
func (t *SVM) Unmarshal(b []byte) (Fitted, error) {
	r := codec.NewReader(b, ErrFormat)
	f := &svmFit{marginStats: readMarginHead(r, "svm", svmFitMagic, svmFitVersion), noBound: t.NoBound}
	f.m = readSVMModel(r, -1)
	if h := readProbLevels(r, "svm"); h != 0 {
		f.prob = &svm.ProbModel{H: h}
		for range h - 1 {
			if r.Err() != nil {
				break
			}
			f.prob.Models = append(f.prob.Models, readSVMModel(r, f.m.Dim))
		}
	}
	if err := r.End(); err != nil {
		return nil, err
	}
	return f, nil
}

// readSVMModel reads a model frame; dim ≥ 0 is the dimension it must
// have. Failures are recorded in r.
func readSVMModel(r *codec.Reader, dim int) *svm.Model {
	b := r.Bytes()
	if r.Err() != nil {
		return nil
	}
	m := new(svm.Model)
	if err := m.UnmarshalBinary(b); err != nil {
		r.Fail(fmt.Errorf("refit: svm: %w", err))
		return nil
	}
	if dim >= 0 && m.Dim != dim {
		r.Failf("refit: svm: probability model of dimension %d, the fit's is %d", m.Dim, dim)
		return nil
	}
	return m
}

// inputDim is the dimension of the inputs the fit scores.
func (f *svmFit) inputDim() int { return f.m.Dim }

// Bound is the serving model's certainty bound at ρ (1 before the first
// refit), for the live bound monitor.
func (m *Model) Bound(rho float64) float64 {
	if s := m.cur.Load(); s != nil {
		if b, ok := s.fit.(interface{ Bound(float64) float64 }); ok {
			return b.Bound(rho)
		}
	}
	return 1
}

// binaryLabel maps a wire label to a classifier's: −1/0 to −1, 1 to +1.
func binaryLabel(v float64) (float64, bool) {
	switch v {
	case 1:
		return 1, true
	case -1, 0:
		return -1, true
	}
	return 0, false
}

// binaryLabels returns an error naming the model type when the labels y of
// a classifier's window are empty or lack a class.
func binaryLabels(y []float64, typ string) error {
	pos := 0
	for _, v := range y {
		if v > 0 {
			pos++
		}
	}
	if len(y) == 0 {
		return fmt.Errorf("refit: %s: empty window", typ)
	}
	if pos == 0 || pos == len(y) {
		return fmt.Errorf("refit: %s: window has %d positive and %d negative examples; need both classes", typ, pos, len(y)-pos)
	}
	return nil
}

// binaryRows returns the rows of a classifier's window d, or an error
// naming the model type when it is empty or lacks a class.
func binaryRows(d *Data, typ string) ([][]float64, error) {
	n := d.N()
	if n == 0 {
		return nil, fmt.Errorf("refit: %s: empty window", typ)
	}
	X := make([][]float64, n)
	pos := 0
	for i := range n {
		X[i] = d.Row(i)
		if d.Y[i] > 0 {
			pos++
		}
	}
	if pos == 0 || pos == n {
		return nil, fmt.Errorf("refit: %s: window has %d positive and %d negative examples; need both classes", typ, pos, n-pos)
	}
	return X, nil
}
