package online

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online/codec"
)

// LogisticName is the configuration's name of the logistic regression
// baseline.
const LogisticName = "logistic"

// LogisticParams are the parameters of type "logistic".
type LogisticParams struct {
	LearningRate float64 `yaml:"learning_rate"` // AdaGrad base step η, > 0 (default 0.1)
	L2           float64 `yaml:"l2"`            // L2 penalty, ≥ 0 (default 1e-4)
}

// Logistic defaults.
const (
	DefaultLearningRate = 0.1
	DefaultL2           = 1e-4
)

// Validate checks the parameters.
func (p *LogisticParams) Validate(int) error {
	var c checks
	if !(p.LearningRate > 0) || math.IsInf(p.LearningRate, 0) {
		c.add("learning_rate", "must be > 0 and finite, got %v", p.LearningRate)
	}
	if !(p.L2 >= 0) || math.IsInf(p.L2, 0) {
		c.add("l2", "must be ≥ 0 and finite, got %v", p.L2)
	}
	return c.err()
}

// LogisticType is the "logistic" model type.
func LogisticType() *Type {
	return Define(Def[LogisticParams]{
		Name:     LogisticName,
		Doc:      "baseline: logistic regression on the raw features, AdaGrad with L2, O(d) per event",
		Defaults: func() LogisticParams { return LogisticParams{LearningRate: DefaultLearningRate, L2: DefaultL2} },
		Traits:   func(*LogisticParams) Traits { return Traits{Kind: Classifier, Probability: true} },
		New:      func(dim int, p *LogisticParams) (Model, error) { return NewLogistic(dim, *p) },
		Examples: func() []LogisticParams {
			return []LogisticParams{{LearningRate: DefaultLearningRate, L2: DefaultL2}, {LearningRate: 0.5}}
		},
		Restore: RestoreNew[Logistic],
	})
}

// legacyLogistic reads a version-1 logistic spec.
func legacyLogistic(tag string, s legacySpec, p *LogisticParams) error {
	if tag != LogisticName {
		return fmt.Errorf("model type %q, want %q", tag, LogisticName)
	}
	if err := legacyRawLinear(s); err != nil {
		return err
	}
	if s.Window != 0 || s.HalfLife != 0 {
		return errors.New("window or half-life set")
	}
	*p = LogisticParams{LearningRate: s.LearningRate, L2: s.L2}
	return nil
}

// legacyRawLinear checks that a version-1 spec of a raw-feature baseline
// sets none of the kernel models' fields.
func legacyRawLinear(s legacySpec) error {
	k := s.Kernel
	if (k.Type != "" && k.Type != KernelLinear) || k.Gamma != 0 || k.Features != 0 || k.Seed != 0 || k.Degree != 0 || k.Coef0 != 0 ||
		s.Balance || s.Delta != 0 || s.Budget != 0 || s.Levels != 0 || len(s.Edges) != 0 || s.Normalize {
		return errors.New("fields of another model type set")
	}
	return nil
}

// adagradEps keeps AdaGrad's step η·g/(sqrt(G) + ε) finite while a
// coordinate's squared-gradient sum G is still 0.
const adagradEps = 1e-8

// maxInputSq bounds ‖x‖² of an event the linear baselines accept: beyond it
// (a NaN or infinite entry, or entries near 1e150) squared gradients and
// second moments would overflow.
const maxInputSq = 1e300

// Logistic is online logistic regression on the raw inputs, a baseline for
// the kernel models: f(x) = <w, x> + b (the logit), P(y = +1 | x) = σ(f),
// trained by AdaGrad on the log-loss ln(1 + exp(−y f(x))) plus the L2
// penalty (Spec.L2/2)·‖w‖² per example (the bias is not penalised):
//
//	g   = −y·σ(−y f(x))·[x; 1] + L2·[w; 0]
//	G_i += g_i²,   θ_i −= LearningRate·g_i/(sqrt(G_i) + 1e-8)   for θ = [w; b]
//
// one pass over the d + 1 coordinates per labelled event (O(d), one sqrt
// and one division per coordinate).
//
// G is a plain sum, the one long-running sum of the package that is not
// compensated, on purpose: it only sets the step size. After n additions
// its relative rounding error is at most n·2⁻⁵³ (1e-7 at n = 10⁹; about
// sqrt(n)·2⁻⁵³ in practice), which changes a step by half that, far below
// the arbitrariness of the step rule itself, while compensation would cost
// about a fifth of the per-event time.
//
// Spec: Kernel.Type "" or "linear" both mean the raw features plus a bias
// (no normalisation: combine with Spec.Standardize for inputs on different
// scales); the kernel's other fields must be 0. LearningRate must be > 0
// (the service configuration supplies 0.1 when it is left out) and L2 ≥ 0.
//
// No certainty bound: the MAM bound (docs/math.md §4) is a statement about a
// normalised average-margin classifier with ‖φ‖ ≤ B; a logistic regression
// has no such guarantee here, so HasBound is false and Spec.Delta must be 0.
// Instead every prediction carries Probability = σ(f), HasProbability true.
//
// No Window or HalfLife (they must be 0): stochastic gradient descent
// already follows drift through its step size. AdaGrad's per-coordinate
// step LearningRate/sqrt(G_i) shrinks only like 1/sqrt(n), far slower than
// a running mean's 1/n, so the model keeps moving towards recent data; and
// L2 pulls weights no longer supported by the data back to 0.
//
// Labels are −1/+1 (0 means −1). Label is sign(f), 0 (no decision) only
// when the logit is exactly 0, as for the empty model.
type Logistic struct {
	p   LogisticParams
	dim int

	n, nPos, nNeg int64
	w             []float64 // weights
	b             float64   // bias
	g             []float64 // AdaGrad Σ g_i² for w
	gb            float64   // AdaGrad Σ g² for b

	sparseState // lazy L2 of ObserveSparse (sparse.go)
}

var _ Model = (*Logistic)(nil)

// NewLogistic builds an empty logistic regression (w = 0, b = 0) for
// inputs of dimension dim.
func NewLogistic(dim int, p LogisticParams) (*Logistic, error) {
	if err := validateDim(dim); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	return &Logistic{p: p, dim: dim, w: make([]float64, dim), g: make([]float64, dim)}, nil
}

// Type returns "logistic".
func (m *Logistic) Type() string { return LogisticName }

// Dim returns the input dimension d.
func (m *Logistic) Dim() int { return m.dim }

// Params returns the model's parameters.
func (m *Logistic) Params() LogisticParams { return m.p }

// Label maps −1 and 0 (false) to −1 and +1 (true) to +1.
func (m *Logistic) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Examples returns n, the number of examples learned.
func (m *Logistic) Examples() int64 { return m.n }

// ClassCounts returns n₊ and n₋.
func (m *Logistic) ClassCounts() (pos, neg int64) { return m.nPos, m.nNeg }

// Version returns 1.
func (m *Logistic) Version() int64 { return 1 }

// Weights returns the weight vector (the model's own storage: do not
// modify; valid until the next Observe or ObserveSparse) and the bias. It
// first applies the L2 steps ObserveSparse deferred (O(d)).
func (m *Logistic) Weights() ([]float64, float64) {
	m.flush()
	return m.w, m.b
}

// Observe scores x (Score = <w, x> + b, Probability = σ(Score)) and then,
// if labelled, takes one AdaGrad step on (x, y). Inputs with a non-finite
// entry, or with ‖x‖² > 1e300, are neither scored nor learned: the
// Prediction then has Score 0, Label 0 and HasProbability false. It panics
// if len(x) != Dim() or if labelled and y is not −1 or +1.
func (m *Logistic) Observe(x []float64, y float64, labelled bool) Prediction {
	if len(x) != len(m.w) {
		panic("online: Logistic.Observe: len(x) != Dim()")
	}
	if labelled && y != 1 && y != -1 {
		panic("online: Logistic.Observe: label must be -1 or +1 (see Label)")
	}
	m.flush()
	p := Prediction{N: m.n}
	z, xx := dotSq(m.w, x)
	if !(xx <= maxInputSq) {
		return p
	}
	hi, lo := logitPrediction(&p, z+m.b)
	z = p.Score
	if labelled {
		// dℓ/df = −y·σ(−y f); σ(−y f) is lo when y f ≥ 0.
		s := hi
		if y*z >= 0 {
			s = lo
		}
		m.learn(x, -y*s)
		m.n++
		if y > 0 {
			m.nPos++
		} else {
			m.nNeg++
		}
	}
	return p
}

// logitPrediction sets p's Score (z, with −0 as 0), Label (sign z) and
// Probability (σ(z)) and returns σ(|z|) and σ(−|z|).
func logitPrediction(p *Prediction, z float64) (hi, lo float64) {
	if z == 0 {
		z = 0 // no −0 on the wire
	}
	p.Score = z
	switch {
	case z > 0:
		p.Label = 1
	case z < 0:
		p.Label = -1
	}
	// σ(|z|) and σ(−|z|) from one exp, without overflow or cancellation.
	e := math.Exp(-math.Abs(z))
	hi = 1 / (1 + e)
	lo = e * hi
	p.Probability, p.HasProbability = hi, true
	if z < 0 {
		p.Probability = lo
	}
	return hi, lo
}

// learn takes one AdaGrad step with loss derivative gz = dℓ/df.
func (m *Logistic) learn(x []float64, gz float64) {
	eta, l2 := m.p.LearningRate, m.p.L2
	w, g := m.w, m.g[:len(m.w)]
	x = x[:len(w)]
	for i, xi := range x {
		wi := w[i]
		gi := gz*xi + l2*wi
		t := g[i] + gi*gi
		g[i] = t
		w[i] = wi - eta*gi/(math.Sqrt(t)+adagradEps)
	}
	m.gb += gz * gz
	m.b -= eta * gz / (math.Sqrt(m.gb) + adagradEps)
}

// dotSq returns <a, b> and ‖b‖², len(a) == len(b).
func dotSq(a, b []float64) (ab, bb float64) {
	b = b[:len(a)]
	var s0, s1, q0, q1 float64
	i := 0
	for ; i+2 <= len(a); i += 2 {
		b0, b1 := b[i], b[i+1]
		s0 += a[i] * b0
		s1 += a[i+1] * b1
		q0 += b0 * b0
		q1 += b1 * b1
	}
	if i < len(a) {
		s0 += a[i] * b[i]
		q0 += b[i] * b[i]
	}
	return s0 + s1, q0 + q1
}

// Logistic encoding, after the envelope (header.go; type "logistic"):
//
//	n, n₊, n₋ int64; w (d float64); b float64; G (d float64); G_b float64.

// AppendBinary appends the MarshalBinary encoding of m to dst
// (encoding.BinaryAppender).
func (m *Logistic) AppendBinary(dst []byte) ([]byte, error) {
	m.flush()
	dst = AppendHeader(dst, LogisticName, &m.p, m.dim)
	dst = codec.AppendI64(dst, m.n)
	dst = codec.AppendI64(dst, m.nPos)
	dst = codec.AppendI64(dst, m.nNeg)
	dst = codec.AppendF64s(dst, m.w)
	dst = codec.AppendF64(dst, m.b)
	dst = codec.AppendF64s(dst, m.g)
	return codec.AppendF64(dst, m.gb), nil
}

// MarshalBinary encodes the complete state of m.
func (m *Logistic) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 160+16*len(m.w)))
}

// UnmarshalBinary replaces m's parameters and state with the encoded ones.
// On error (wrapping ErrFormat) m is unchanged.
func (m *Logistic) UnmarshalBinary(b []byte) error {
	var p LogisticParams
	d, r := ReadHeader(b, LogisticName, &p, func(tag string, s legacySpec) error { return legacyLogistic(tag, s, &p) })
	checkParams(r, &p, d)
	n, nPos, nNeg := r.I64(), r.I64(), r.I64()
	if err := r.Err(); err != nil {
		return err
	}
	if size := 8 * (2*d + 2); r.Len() != size {
		return fmt.Errorf("%w: %d bytes of state, want %d", ErrFormat, r.Len(), size)
	}
	nm, err := NewLogistic(d, p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	nm.n, nm.nPos, nm.nNeg = n, nPos, nNeg
	r.F64s(nm.w)
	nm.b = r.F64()
	r.F64s(nm.g)
	nm.gb = r.F64()
	if err := r.End(); err != nil {
		return err
	}
	if err := nm.checkState(); err != nil {
		return fmt.Errorf("%w: %s", ErrFormat, err)
	}
	*m = *nm
	return nil
}

// checkState rejects decoded states that no sequence of updates produces.
func (m *Logistic) checkState() error {
	if m.n < 0 || m.nPos < 0 || m.nNeg < 0 || m.n != m.nPos+m.nNeg {
		return fmt.Errorf("inconsistent counts n=%d n+=%d n-=%d", m.n, m.nPos, m.nNeg)
	}
	if !isFinite(m.b) || !isFinite(m.gb) || m.gb < 0 {
		return fmt.Errorf("bias state b=%v G=%v", m.b, m.gb)
	}
	for i := range m.w {
		if !isFinite(m.w[i]) || !isFinite(m.g[i]) || m.g[i] < 0 {
			return fmt.Errorf("coordinate %d: w=%v G=%v", i, m.w[i], m.g[i])
		}
	}
	if m.n == 0 && (m.b != 0 || m.gb != 0 || !allZero(m.w) || !allZero(m.g)) {
		return errors.New("state without examples")
	}
	return nil
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
