package online

import (
	"errors"
	"fmt"
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
	// Value is the predicted label on the label's own scale, published by
	// regression models that predict one (fm with the squared loss: its
	// score clipped to the range of the labels learned so far) as the
	// wire's "prediction". HasValue is false for models that publish none
	// (krr: the score is the answer) and before the model has learned a
	// label.
	Value    float64
	HasValue bool
}

// Model is an online scorer/learner owned by one goroutine at a time (not
// safe for concurrent use).
type Model interface {
	// Type returns the model type (its registered name, e.g. MAMName).
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

// Preparer is a Model whose per-event work splits in two: Prepare reads only
// the model's immutable configuration (its feature map), so it may run
// concurrently with anything, including Observe and other Prepare calls on
// the same model, each with its own dst; ObservePrepared is Observe for an
// x whose preparation is prep, and like Observe needs exclusive use of the
// model.
type Preparer interface {
	Model
	// PreparedLen is the length of the buffer Prepare fills.
	PreparedLen() int
	// Prepare writes what ObservePrepared needs about x into dst
	// (len(dst) == PreparedLen(), len(x) == Dim(); it panics otherwise). It does not allocate.
	Prepare(dst, x []float64)
	// ObservePrepared is Observe(x, y, labelled) with prep written by
	// Prepare(prep, x): the same Prediction and the same new state, bit for bit.
	ObservePrepared(prep, x []float64, y float64, labelled bool) Prediction
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
