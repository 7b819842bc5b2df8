package online

import (
	"errors"
	"fmt"
	"slices"
)

// Prediction is what a model says about one event.
type Prediction struct {
	Score        float64 // f(x)
	Label        int     // predicted class −1/+1 (0 = no decision); level 1..m for ordinal models
	MistakeBound float64 // certainty bound in [0,1]; only meaningful when HasBound
	HasBound     bool
	Delta        float64
	N            int64 // examples learned before this prediction (n_eff, rounded, under decay)
	// Version of the model that made the prediction, for models refitted in
	// the background (0: the model's Version()).
	Version int64
	// Probability of class +1, for models that estimate one (logistic).
	Probability    float64
	HasProbability bool
}

// Model is an online scorer/learner owned by one goroutine at a time (not
// safe for concurrent use).
type Model interface {
	// Type returns the model type, e.g. "mam".
	Type() string
	// Dim returns the input dimension d.
	Dim() int
	// Label maps a wire label (−1/+1, 0/1; true/false arrive as 1/0) to the
	// model's label; ok is false when v is outside its set (e.g. 2, 0.5, NaN).
	Label(v float64) (y float64, ok bool)
	// Observe scores x with the current state and then, if labelled, learns
	// (x, y); φ(x) is computed once. y must be a label returned by Label.
	// len(x) must be Dim() (it panics otherwise: programmer error). It does
	// not allocate.
	Observe(x []float64, y float64, labelled bool) Prediction
	// Examples returns the number of examples learned.
	Examples() int64
	// Version is 1 for online models (heavy models bump it on refit).
	Version() int64
	// MarshalBinary returns the complete state: spec, seed, sums (with
	// their compensation terms) and counts.
	MarshalBinary() ([]byte, error)
	// UnmarshalBinary restores a state written by MarshalBinary exactly,
	// spec included. It rejects a wrong format version, truncated or
	// inconsistent data with an error wrapping ErrFormat, and leaves the
	// receiver unchanged then.
	UnmarshalBinary([]byte) error
}

// ModelMAM is the type of the maximal-average-margin classifier.
const ModelMAM = "mam"

// Spec describes a model. Fields a model type does not use must be zero.
type Spec struct {
	Type    string // "mam", "omam", "logistic", "lda"
	Dim     int    // input dimension d, ≥ 1
	Kernel  KernelSpec
	Balance bool    // mam: class-balanced direction μ₊ − μ₋ with offset (the better default)
	Delta   float64 // confidence parameter δ of the certainty bound, in (0, 1); e.g. 0.05

	// Budget > 0 selects the exact-kernel mode of mam: the last Budget
	// labelled examples are stored and every score sums the exact kernel
	// over them (O(Budget) per event).
	Budget int

	// Forgetting (at most one of the two): Window > 0 keeps an exact sliding
	// window over the last Window labelled examples (sums updated by
	// subtraction); HalfLife > 0 weighs an example by 2^(−age/HalfLife), age
	// counted in labelled examples, and the bound uses n_eff.
	Window   int
	HalfLife float64

	// Standardize keeps running per-feature means and variances (Welford)
	// and standardises inputs before the model sees them.
	Standardize bool

	// omam: Levels m ≥ 2 (labels 1..m). Edges, when set (m−1 increasing
	// values), bin real-valued targets: level = 1 + #{edges e : e ≤ y}.
	// Normalize selects the Nadaraya–Watson form m(x)/Σᵢ K(xᵢ, x).
	Levels    int
	Edges     []float64
	Normalize bool

	// logistic: AdaGrad base step and L2 penalty.
	LearningRate float64
	L2           float64
}

// modelType is what a model type registers: how to validate a spec, build
// an empty model, and restore one from MarshalBinary output.
type modelType struct {
	validate func(Spec) error
	new      func(Spec) (Model, error)
	restore  func([]byte) (Model, error)
	// encoding marks an encoding tag (e.g. "mam_exact"): a type string
	// of the serialised form only, which Restore accepts and Types does
	// not list.
	encoding bool
}

// modelTypes holds the model types of this package, registered by each
// type's file in init.
var modelTypes = map[string]modelType{}

func registerModel(name string, t modelType) {
	if _, dup := modelTypes[name]; dup {
		panic("online: model type " + name + " registered twice")
	}
	modelTypes[name] = t
}

// Types lists the configurable model types (not the encoding tags).
func Types() []string {
	out := make([]string, 0, len(modelTypes))
	for name, t := range modelTypes {
		if !t.encoding {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func init() {
	registerModel(ModelMAM, modelType{
		validate: func(s Spec) error {
			if s.Budget != 0 { // exact kernel mode (exact.go)
				return validateExactMAM(s)
			}
			return validateMAM(s)
		},
		new: func(s Spec) (Model, error) {
			if s.Budget > 0 {
				return NewExactMAM(s)
			}
			return NewMAM(s)
		},
		restore: func(b []byte) (Model, error) {
			m := new(MAM)
			if err := m.UnmarshalBinary(b); err != nil {
				return nil, err
			}
			return m, nil
		},
	})
	// The encoding tag of mam's exact kernel mode: Restore only.
	registerModel(encodingExactMAM, modelType{
		validate: func(Spec) error {
			return specErrorf("type", "%q is an encoding tag: use type %q with budget > 0", encodingExactMAM, ModelMAM)
		},
		new: func(Spec) (Model, error) {
			return nil, specErrorf("type", "%q is an encoding tag: use type %q with budget > 0", encodingExactMAM, ModelMAM)
		},
		restore: func(b []byte) (Model, error) {
			m := new(ExactMAM)
			if err := m.UnmarshalBinary(b); err != nil {
				return nil, err
			}
			return m, nil
		},
		encoding: true,
	})
}

// Validate checks s; the error is a *SpecError naming the field.
func (s Spec) Validate() error {
	if s.Type == "" {
		return specErrorf("type", "missing (one of %v)", Types())
	}
	t, ok := modelTypes[s.Type]
	if !ok {
		return specErrorf("type", "unknown model type %q (one of %v)", s.Type, Types())
	}
	return t.validate(s)
}

// validateMAM checks a mam spec.
func validateMAM(s Spec) error {
	if err := validateKernel(s.Kernel, s.Dim); err != nil {
		return err
	}
	if !(s.Delta > 0 && s.Delta < 1) {
		return specErrorf("delta", "must be in (0, 1), got %v", s.Delta)
	}
	return validateForgetting(s) // window, half_life (mam.go)
}

// New builds an empty model from spec after validating it; errors are
// *SpecError values naming the field, e.g. "online: kernel.gamma: must be > 0
// and finite, got -1".
func New(spec Spec) (Model, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Standardize {
		return newStandardizedModel(spec) // wraps modelTypes[spec.Type].new(spec)
	}
	return modelTypes[spec.Type].new(spec)
}

// Restore builds a model of the right type from MarshalBinary output.
func Restore(b []byte) (Model, error) {
	typ, err := peekType(b)
	if err != nil {
		return nil, err
	}
	if typ == standardizedTag {
		return restoreStandardizedModel(b)
	}
	t, ok := modelTypes[typ]
	if !ok {
		return nil, fmt.Errorf("%w: unknown model type %q", ErrFormat, typ)
	}
	return t.restore(b)
}

// ErrFormat is wrapped by every error about malformed serialised state.
var ErrFormat = errors.New("online: bad model encoding")

// ErrSpec is matched (errors.Is) by every *SpecError.
var ErrSpec = errors.New("online: invalid spec")

// SpecError reports an invalid Spec field.
type SpecError struct {
	Field   string // e.g. "kernel.gamma"
	Problem string // e.g. "must be > 0 and finite, got -1"
}

func (e *SpecError) Error() string { return "online: " + e.Field + ": " + e.Problem }

// Is makes errors.Is(err, ErrSpec) true for every *SpecError.
func (e *SpecError) Is(target error) bool { return target == ErrSpec }

func specErrorf(field, format string, args ...any) error {
	return &SpecError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// binaryLabel maps a wire label to −1/+1: −1 and 0 give −1, +1 gives +1.
func binaryLabel(v float64) (float64, bool) {
	switch v {
	case 1:
		return 1, true
	case -1, 0:
		return -1, true
	}
	return 0, false
}
