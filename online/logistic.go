package online

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ModelLogistic is the type of the online logistic regression baseline.
const ModelLogistic = "logistic"

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
// No certainty bound: the MAM bound (MATH.md §1) is a statement about a
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
	spec Spec

	n, nPos, nNeg int64
	w             []float64 // weights
	b             float64   // bias
	g             []float64 // AdaGrad Σ g_i² for w
	gb            float64   // AdaGrad Σ g² for b
}

var _ Model = (*Logistic)(nil)

func init() {
	registerModel(ModelLogistic, modelType{
		validate: validateLogistic,
		new:      func(s Spec) (Model, error) { return NewLogistic(s) },
		restore: func(b []byte) (Model, error) {
			m := new(Logistic)
			if err := m.UnmarshalBinary(b); err != nil {
				return nil, err
			}
			return m, nil
		},
	})
}

// validateRawLinear checks what the raw-feature baselines (logistic, lda)
// share: dim, a raw linear kernel, and zero for every field of the kernel
// models.
func validateRawLinear(s Spec) error {
	if s.Dim <= 0 || s.Dim > maxDim {
		return specErrorf("dim", "must be in [1, %d], got %d", maxDim, s.Dim)
	}
	k := s.Kernel
	typ := s.Type
	switch {
	case k.Type != "" && k.Type != KernelLinear:
		return specErrorf("kernel.type", "%s works on the raw features: want \"\" or %q, got %q", typ, KernelLinear, k.Type)
	case k.Gamma != 0:
		return specErrorf("kernel.gamma", "not supported by %s (got %v)", typ, k.Gamma)
	case k.Features != 0:
		return specErrorf("kernel.features", "not supported by %s (got %d)", typ, k.Features)
	case k.Seed != 0:
		return specErrorf("kernel.seed", "not supported by %s (got %d)", typ, k.Seed)
	case k.Degree != 0:
		return specErrorf("kernel.degree", "not supported by %s (got %d)", typ, k.Degree)
	case k.Coef0 != 0:
		return specErrorf("kernel.coef0", "not supported by %s (got %v)", typ, k.Coef0)
	case s.Balance:
		return specErrorf("balance", "not supported by %s", typ)
	case s.Delta != 0:
		return specErrorf("delta", "not supported by %s: it publishes no certainty bound (got %v)", typ, s.Delta)
	case s.Budget != 0:
		return specErrorf("budget", "not supported by %s (got %d)", typ, s.Budget)
	case s.Levels != 0:
		return specErrorf("levels", "not supported by %s (got %d)", typ, s.Levels)
	case len(s.Edges) != 0:
		return specErrorf("edges", "not supported by %s (got %d edges)", typ, len(s.Edges))
	case s.Normalize:
		return specErrorf("normalize", "not supported by %s", typ)
	}
	return nil
}

// validateLogistic checks a logistic spec.
func validateLogistic(s Spec) error {
	if err := validateRawLinear(s); err != nil {
		return err
	}
	switch {
	case s.Window != 0:
		return specErrorf("window", "not supported by logistic (got %d): its step size already follows drift", s.Window)
	case s.HalfLife != 0:
		return specErrorf("half_life", "not supported by logistic (got %v): its step size already follows drift", s.HalfLife)
	case !(s.LearningRate > 0) || math.IsInf(s.LearningRate, 0):
		return specErrorf("learning_rate", "must be > 0 and finite, got %v", s.LearningRate)
	case !(s.L2 >= 0) || math.IsInf(s.L2, 0):
		return specErrorf("l2", "must be ≥ 0 and finite, got %v", s.L2)
	}
	return nil
}

// NewLogistic builds an empty logistic regression (w = 0, b = 0);
// spec.Type must be "logistic". Spec.Standardize is honoured by New, which
// wraps the model; NewLogistic ignores it.
func NewLogistic(spec Spec) (*Logistic, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Type != ModelLogistic {
		return nil, specErrorf("type", "want %q, got %q", ModelLogistic, spec.Type)
	}
	d := spec.Dim
	return &Logistic{spec: spec, w: make([]float64, d), g: make([]float64, d)}, nil
}

// Type returns "logistic".
func (m *Logistic) Type() string { return ModelLogistic }

// Dim returns the input dimension d.
func (m *Logistic) Dim() int { return m.spec.Dim }

// Spec returns the model's spec.
func (m *Logistic) Spec() Spec { return m.spec }

// Label maps −1 and 0 (false) to −1 and +1 (true) to +1.
func (m *Logistic) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Examples returns n, the number of examples learned.
func (m *Logistic) Examples() int64 { return m.n }

// ClassCounts returns n₊ and n₋.
func (m *Logistic) ClassCounts() (pos, neg int64) { return m.nPos, m.nNeg }

// Version returns 1.
func (m *Logistic) Version() int64 { return 1 }

// Weights returns the weight vector (the model's own storage: do not
// modify; valid until the next Observe) and the bias.
func (m *Logistic) Weights() ([]float64, float64) { return m.w, m.b }

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
	p := Prediction{N: m.n}
	z, xx := dotSq(m.w, x)
	if !(xx <= maxInputSq) {
		return p
	}
	z += m.b
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
	hi := 1 / (1 + e)
	lo := e * hi
	p.Probability, p.HasProbability = hi, true
	if z < 0 {
		p.Probability = lo
	}
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

// learn takes one AdaGrad step with loss derivative gz = dℓ/df.
func (m *Logistic) learn(x []float64, gz float64) {
	eta, l2 := m.spec.LearningRate, m.spec.L2
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

// Logistic encoding (format version 1): the shared header with model type
// "logistic" and the spec (appendSpec), then
//
//	n, n₊, n₋ int64; w (d float64); b float64; G (d float64); G_b float64.

// AppendBinary appends the MarshalBinary encoding of m to dst
// (encoding.BinaryAppender).
func (m *Logistic) AppendBinary(dst []byte) ([]byte, error) {
	le := binary.LittleEndian
	dst = append(dst, formatMagic...)
	dst = le.AppendUint16(dst, formatVersion)
	dst = appendStr(dst, ModelLogistic)
	dst = appendSpec(dst, m.spec)
	dst = le.AppendUint64(dst, uint64(m.n))
	dst = le.AppendUint64(dst, uint64(m.nPos))
	dst = le.AppendUint64(dst, uint64(m.nNeg))
	for _, v := range m.w {
		dst = appendF64(dst, v)
	}
	dst = appendF64(dst, m.b)
	for _, v := range m.g {
		dst = appendF64(dst, v)
	}
	return appendF64(dst, m.gb), nil
}

// MarshalBinary encodes the complete state of m.
func (m *Logistic) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, 160+16*len(m.w)))
}

// UnmarshalBinary replaces m's spec and state with the encoded ones. On
// error (wrapping ErrFormat) m is unchanged.
func (m *Logistic) UnmarshalBinary(b []byte) error {
	r := reader{b: b}
	typ := r.header()
	if r.err == nil && typ != ModelLogistic {
		return fmt.Errorf("%w: model type %q, want %q", ErrFormat, typ, ModelLogistic)
	}
	spec := r.spec(typ)
	n, nPos, nNeg := int64(r.u64()), int64(r.u64()), int64(r.u64())
	if r.err != nil {
		return r.err
	}
	if err := formatSpecErr(spec.Validate()); err != nil {
		return err
	}
	d := spec.Dim
	switch size := 8 * (2*d + 2); {
	case len(r.b) < size:
		return fmt.Errorf("%w: truncated", ErrFormat)
	case len(r.b) > size:
		return fmt.Errorf("%w: %d trailing bytes", ErrFormat, len(r.b)-size)
	}
	nm, err := NewLogistic(spec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	nm.n, nm.nPos, nm.nNeg = n, nPos, nNeg
	for i := range nm.w {
		nm.w[i] = r.f64()
	}
	nm.b = r.f64()
	for i := range nm.g {
		nm.g[i] = r.f64()
	}
	nm.gb = r.f64()
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

// formatSpecErr turns a spec validation error of a decoded spec into an
// ErrFormat error naming the field; nil stays nil.
func formatSpecErr(err error) error {
	if err == nil {
		return nil
	}
	var se *SpecError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: spec: %s: %s", ErrFormat, se.Field, se.Problem)
	}
	return fmt.Errorf("%w: spec: %w", ErrFormat, err)
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
