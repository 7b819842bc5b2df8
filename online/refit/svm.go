package refit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/svm"
)

// SVM trains kernel SVMs (online/svm, the LIBSVM algorithm) on windows.
// Scores are decision values; the certainty bound is Corollary 1 of
// MATH.md §1 with the clipped margin g(z) = min(1, max(−1, z)): W² = αᵀQα
// of the dual solution, tr Ω and the average clipped margin over the
// training window, evaluated at ρ = min(|f(x)|, 1). With ProbLevels ≥ 2 it
// also fits the weighted SVMs of seed 002 §2.2 and publishes a probability.
// A window is a fresh problem: the previous window's α do not map onto the
// new rows, so fits start cold (the weighted fits of the probability
// option warm-start along π).
type SVM struct {
	Params     svm.Params
	Delta      float64
	ProbLevels int
}

var _ Trainer = (*SVM)(nil)

// Type returns "svm".
func (t *SVM) Type() string { return "svm" }

// Label maps −1/0 to −1 and 1 to +1.
func (t *SVM) Label(v float64) (float64, bool) {
	switch v {
	case 1:
		return 1, true
	case -1, 0:
		return -1, true
	}
	return 0, false
}

// Fit trains on d.
func (t *SVM) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	n := d.N()
	if n == 0 {
		return nil, Stats{}, errors.New("refit: svm: empty window")
	}
	X := make([][]float64, n)
	pos, neg := 0, 0
	for i := range n {
		X[i] = d.Row(i)
		if d.Y[i] > 0 {
			pos++
		} else {
			neg++
		}
	}
	if pos == 0 || neg == 0 {
		return nil, Stats{}, fmt.Errorf("refit: svm: window has %d positive and %d negative examples; need both classes", pos, neg)
	}
	m, err := svm.Train(ctx, X, d.Y, t.Params, nil)
	if err != nil {
		return nil, Stats{}, err
	}
	f := &svmFit{m: m, delta: t.Delta, n: n}
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

type svmFit struct {
	m       *svm.Model
	prob    *svm.ProbModel
	avgClip float64 // (1/n) Σ g(yᵢ f(xᵢ)) over the training window
	w       float64 // ‖w‖ = sqrt(αᵀQα)
	tr      float64 // tr Ω of the window
	n       int
	delta   float64
}

func (f *svmFit) Predict(x []float64) online.Prediction {
	s := f.m.Decision(x)
	p := online.Prediction{Score: s, N: int64(f.n), Delta: f.delta, HasBound: true}
	switch {
	case s > 0:
		p.Label = 1
	case s < 0:
		p.Label = -1
	}
	p.MistakeBound = svm.ClippedMarginBound(f.avgClip, f.w, f.tr, float64(f.n), f.delta, math.Min(math.Abs(s), 1))
	if f.prob != nil {
		p.Probability, p.HasProbability = f.prob.Prob(x), true
	}
	return p
}

// Bound is the certainty bound at ρ for this fit.
func (f *svmFit) Bound(rho float64) float64 {
	return svm.ClippedMarginBound(f.avgClip, f.w, f.tr, float64(f.n), f.delta, math.Min(rho, 1))
}

// Encoding: magic "RSVM" u16 version 1, n u32, delta, avgClip, w, tr
// float64, model length u32 + model, prob H u32 (0 = none), then H−1 ×
// (length u32 + model).
func (f *svmFit) MarshalBinary() ([]byte, error) {
	le := binary.LittleEndian
	dst := append([]byte("RSVM"), 1, 0)
	dst = le.AppendUint32(dst, uint32(f.n))
	for _, v := range []float64{f.delta, f.avgClip, f.w, f.tr} {
		dst = le.AppendUint64(dst, math.Float64bits(v))
	}
	appendModel := func(m *svm.Model) error {
		b, err := m.MarshalBinary()
		if err != nil {
			return err
		}
		dst = le.AppendUint32(dst, uint32(len(b)))
		dst = append(dst, b...)
		return nil
	}
	if err := appendModel(f.m); err != nil {
		return nil, err
	}
	if f.prob == nil {
		return le.AppendUint32(dst, 0), nil
	}
	dst = le.AppendUint32(dst, uint32(f.prob.H))
	for _, m := range f.prob.Models {
		if err := appendModel(m); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// Unmarshal restores a fit written by MarshalBinary.
func (t *SVM) Unmarshal(b []byte) (Fitted, error) {
	le := binary.LittleEndian
	if len(b) < 6+4+32+4 || string(b[:4]) != "RSVM" || le.Uint16(b[4:]) != 1 {
		return nil, errors.New("refit: svm: bad header")
	}
	f := &svmFit{n: int(le.Uint32(b[6:]))}
	vals := []*float64{&f.delta, &f.avgClip, &f.w, &f.tr}
	for i, p := range vals {
		*p = math.Float64frombits(le.Uint64(b[10+8*i:]))
	}
	b = b[42:]
	model := func() (*svm.Model, error) {
		if len(b) < 4 || int(le.Uint32(b)) > len(b)-4 {
			return nil, errors.New("refit: svm: truncated model")
		}
		l := int(le.Uint32(b))
		m := new(svm.Model)
		if err := m.UnmarshalBinary(b[4 : 4+l]); err != nil {
			return nil, err
		}
		b = b[4+l:]
		return m, nil
	}
	var err error
	if f.m, err = model(); err != nil {
		return nil, err
	}
	if len(b) < 4 {
		return nil, errors.New("refit: svm: truncated")
	}
	h := int(le.Uint32(b))
	b = b[4:]
	if h != 0 {
		if h < 2 || h > 1000 {
			return nil, fmt.Errorf("refit: svm: probability levels %d", h)
		}
		f.prob = &svm.ProbModel{H: h}
		for range h - 1 {
			m, err := model()
			if err != nil {
				return nil, err
			}
			f.prob.Models = append(f.prob.Models, m)
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("refit: svm: %d trailing bytes", len(b))
	}
	return f, nil
}

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
