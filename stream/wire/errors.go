package wire

import (
	"errors"
	"fmt"
)

// Reason classifies why an input event was rejected. Its values are stable
// snake_case strings: they are used as a metric label and as the value of the
// dead-letter "reason" header, so they are part of the wire contract.
type Reason string

// The rejection reasons. Every error returned by [Decoder.Decode] carries
// exactly one of them but [ReasonBadLabel], which is assigned by callers when a
// model refuses a label that is well-formed JSON.
const (
	ReasonTooLarge        Reason = "too_large"         // value over the configured max size
	ReasonNotJSON         Reason = "not_json"          // not a syntactically valid JSON object (incl. trailing data)
	ReasonWrongType       Reason = "wrong_type"        // a known field has the wrong JSON type
	ReasonMissingFeatures Reason = "missing_features"  // no features field, features null, or a configured name absent
	ReasonWrongDimension  Reason = "wrong_dimension"   // array length != dim, or a feature name that is not configured
	ReasonNonFinite       Reason = "non_finite"        // NaN/±Inf (e.g. 1e999 overflows) in features or label
	ReasonOutOfRange      Reason = "out_of_range"      // a finite feature beyond the configured bound (Decoder.WithMaxAbs)
	ReasonBadLabel        Reason = "bad_label"         // the model rejects the label (set by callers)
	ReasonBadRequest      Reason = "bad_request"       // a malformed ranking request (Decoder.WithRequests)
	ReasonTooManyFeatures Reason = "too_many_features" // more hashed features than HashConfig.MaxFeatures (Decoder.WithHashing)
)

var allReasons = []Reason{
	ReasonTooLarge,
	ReasonNotJSON,
	ReasonWrongType,
	ReasonMissingFeatures,
	ReasonWrongDimension,
	ReasonNonFinite,
	ReasonOutOfRange,
	ReasonBadLabel,
	ReasonBadRequest,
	ReasonTooManyFeatures,
}

// Reasons returns every Reason, in a fixed order, for example to initialise a
// metric's label values. The caller may modify the returned slice.
func Reasons() []Reason { return append([]Reason(nil), allReasons...) }

// Error is a classified rejection of an input event.
type Error struct {
	Reason Reason
	Detail string // where and what, e.g. "features[3]: not a number" or "got 31 features, want 32"
}

// Error returns "wire: <reason>: <detail>".
func (e *Error) Error() string {
	if e.Detail == "" {
		return "wire: " + string(e.Reason)
	}
	return "wire: " + string(e.Reason) + ": " + e.Detail
}

// Is reports whether target is an *Error with the same Reason, so that
// errors.Is(err, &wire.Error{Reason: wire.ReasonNotJSON}) matches any not_json
// rejection regardless of its detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// ReasonOf returns the Reason of the first *Error in err's chain, or "" when
// err is nil or carries no classification.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Errorf returns an *Error with the given reason and a formatted detail. It is
// meant for callers that classify rejections themselves, e.g. ReasonBadLabel.
func Errorf(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
