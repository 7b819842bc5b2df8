package online

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/streamer/streamer/online/codec"
)

// Kind is what a model's scores mean: how its labels are read, what the
// wire's "prediction" holds and how it is judged.
type Kind uint8

// Model kinds.
const (
	// Classifier: labels −1/+1 (0/1 and false/true on the wire), the
	// prediction is the class sign f(x), judged by prequential accuracy.
	Classifier Kind = iota + 1
	// Ordinal: labels are levels 1..m, the prediction is a level, judged by
	// mean absolute error, zero-one error and Kendall's τ-b.
	Ordinal
	// Ranking: labels are any finite real (a relevance, a rating), the
	// score orders events and the prediction is 0; judged by Kendall's τ-b.
	Ranking
	// Regression: labels are any finite real, the score is the predicted
	// value and the prediction 0; judged by Kendall's τ-b and the root
	// mean squared error.
	Regression
)

var kindNames = [...]string{Classifier: "classifier", Ordinal: "ordinal", Ranking: "ranking", Regression: "regression"}

// String returns the kind's name, e.g. "classifier".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Traits say what a configured model publishes and how it is judged. A
// model type's traits can depend on its parameters (a ranking model with
// levels is ordinal; the polynomial kernel has no bound).
type Traits struct {
	Kind        Kind
	Levels      int  // Ordinal: m, labels 1..m
	Bound       bool // publishes certainty.mistake_bound (the model is a Bounder)
	Probability bool // publishes probability
	Refitted    bool // refitted in the background from a window of events
	// Value: a regression model that publishes Prediction.Value (the
	// predicted label, HasValue once it has learned one), such as fm with
	// the squared loss.
	Value bool
}

// Params is implemented by a pointer to a model type's parameter struct.
// The struct's exported fields with yaml tags are the keys of the model's
// configuration besides name, type, features, scope and max_keys; nested
// structs are nested keys. Supported field types are those of
// codec.CheckParams.
type Params interface {
	// Validate checks the parameters for inputs of dimension dim. Every
	// error is a *SpecError whose Field is the key at fault, dotted as in
	// the configuration ("kernel.gamma"); errors.Join joins several.
	Validate(dim int) error
}

// Completer is implemented by parameters whose defaults depend on other
// keys (the kernel's type, the solver, the input dimension). The
// configuration calls Complete after decoding a model's keys over the
// type's defaults; given reports whether a key (dotted, "kernel.gamma") was
// set explicitly. Complete sets the defaults that apply and clears those
// that do not, so that Validate can refuse a key that does not apply only
// when it was given.
type Completer interface {
	Complete(dim int, given func(key string) bool)
}

// Shaped is implemented by parameters of a model type whose input is a
// matrix (lowrank): when features.shape is configured, the configuration
// calls SetShape before Complete, and the parameters take the shape unless
// their own keys set it.
type Shaped interface {
	SetShape(rows, cols int)
}

// Hashed is implemented by parameters whose model needs to know that its
// input is hashed (features.hash: sparse, of dimension 2^bits, a few
// nonzero entries per event): the configuration calls SetHashed before
// Complete (mam and omam generate their random frequencies instead of
// storing them, kernel.sparse).
type Hashed interface {
	SetHashed()
}

// Namespaced is implemented by parameters whose model reads the fields of
// hashed inputs (FieldModel): the configuration calls SetNamespaces with
// features.namespaces before Complete, so that field f ≥ 1 of an entry is
// the namespace ns[f-1].
type Namespaced interface {
	SetNamespaces(ns []string)
}

// AutoKeys is implemented by parameters with number keys that also take
// the value auto, which the configuration decodes as 0: the model chooses
// (kernel.gamma: auto). AutoKeys returns them, dotted.
type AutoKeys interface {
	AutoKeys() []string
}

// Aggregator is implemented by parameters of a model type that aggregates
// other models of the configuration (adaboost): MemberNames are their
// names. Such a model's input is the members' predictions for the event
// (their sign: −1, 0 or +1, in MemberNames' order) followed by the
// event's features, so its dimension is len(MemberNames()) + features.dim.
type Aggregator interface {
	MemberNames() []string
}

// Type is a registered model type: its name, parameters and defaults,
// traits, construction and restore. Make one with Define.
type Type struct {
	name      string
	doc       string
	params    reflect.Type // the parameter struct (not the pointer)
	defaults  func() Params
	traits    func(Params) Traits
	build     func(dim int, p Params) (Model, error)
	restore   func(b []byte) (Model, error)
	examples  func() []Params
	legacyTag []string
}

// Def is what a model type's file declares to define it.
type Def[P any] struct {
	Name string // the configuration's type name (e.g. MAMName)
	Doc  string // one line: what it is (the README's model table)
	// Defaults returns the parameters with every default that does not
	// depend on other keys applied.
	Defaults func() P
	// Traits of a model with these (validated) parameters.
	Traits func(p *P) Traits
	// New builds an empty model; p has been validated.
	New func(dim int, p *P) (Model, error)
	// Restore rebuilds a model from its MarshalBinary output (parameters
	// included), rejecting malformed input with an error wrapping
	// ErrFormat. Encodings of earlier format versions keep restoring.
	Restore func(b []byte) (Model, error)
	// Examples are small valid configurations of the type, one per mode
	// worth checking (an exact and a random-feature solver, a window, …),
	// valid for any input dimension. The conformance suite
	// (online/onlinetest) runs every type on each of them, so a type is
	// tested by being registered.
	Examples func() []P
	// LegacyTags are type strings that older encodings of this type were
	// written under (e.g. "mam_exact"), which Registry.Restore routes here.
	LegacyTags []string
}

// Define makes a model Type from its definition. It panics if the
// definition is incomplete or the parameter struct has a field type the
// canonical encoding does not support: a programmer error, caught by the
// first test that registers the type.
func Define[P any, PP interface {
	*P
	Params
}](d Def[P]) *Type {
	var zero P
	pt := reflect.TypeOf(zero)
	if d.Name == "" || d.Defaults == nil || d.Traits == nil || d.New == nil || d.Restore == nil || d.Examples == nil {
		panic(fmt.Sprintf("online: Define %q: Name, Defaults, Traits, New, Restore and Examples are required", d.Name))
	}
	if len(d.Name) > codec.MaxStr {
		panic(fmt.Sprintf("online: Define %q: name longer than %d bytes", d.Name, codec.MaxStr))
	}
	if err := codec.CheckParams(pt); err != nil {
		panic(fmt.Sprintf("online: Define %q: %v", d.Name, err))
	}
	cast := func(p Params) (*P, error) {
		tp, ok := p.(PP)
		if !ok || tp == nil {
			return nil, fmt.Errorf("online: model type %s: parameters %T, want *%v", d.Name, p, pt)
		}
		return (*P)(tp), nil
	}
	return &Type{
		name:   d.Name,
		doc:    d.Doc,
		params: pt,
		defaults: func() Params {
			p := d.Defaults()
			return PP(&p)
		},
		traits: func(p Params) Traits {
			tp, err := cast(p)
			if err != nil {
				return Traits{}
			}
			return d.Traits(tp)
		},
		build: func(dim int, p Params) (Model, error) {
			tp, err := cast(p)
			if err != nil {
				return nil, err
			}
			return d.New(dim, tp)
		},
		restore: d.Restore,
		examples: func() []Params {
			var out []Params
			for _, p := range d.Examples() {
				out = append(out, PP(&p))
			}
			return out
		},
		legacyTag: d.LegacyTags,
	}
}

// Name returns the type's name (e.g. MAMName).
func (t *Type) Name() string { return t.name }

// Doc returns the type's one-line description.
func (t *Type) Doc() string { return t.doc }

// NewParams returns a fresh parameter struct (a pointer) holding the
// type's defaults.
func (t *Type) NewParams() Params { return t.defaults() }

// ParamsType returns the type of the parameter struct (not the pointer).
func (t *Type) ParamsType() reflect.Type { return t.params }

// Traits returns the traits of a model of this type with parameters p.
func (t *Type) Traits(p Params) Traits { return t.traits(p) }

// New validates p for inputs of dimension dim and builds an empty model.
// Errors are *SpecError values naming the key, or errors joining them.
func (t *Type) New(dim int, p Params) (Model, error) {
	if p == nil {
		return nil, specErrorf("type", "model type %s: no parameters", t.name)
	}
	if reflect.TypeOf(p) != reflect.PointerTo(t.params) {
		return nil, fmt.Errorf("online: model type %s: parameters %T, want *%v", t.name, p, t.params)
	}
	if err := validateDimFor(dim, p); err != nil {
		return nil, err
	}
	if err := p.Validate(dim); err != nil {
		return nil, err
	}
	return t.build(dim, p)
}

// newSparse is New for hashed inputs with at most nnz entries (see
// SparseParams).
func (t *Type) newSparse(dim, nnz int, p SparseParams) (Model, error) {
	if reflect.TypeOf(p) != reflect.PointerTo(t.params) {
		return nil, fmt.Errorf("online: model type %s: parameters %T, want *%v", t.name, p, t.params)
	}
	if dim <= 0 || dim > MaxSparseDim {
		return nil, specErrorf("dim", "must be in [1, %d] for hashed features, got %d", MaxSparseDim, dim)
	}
	if err := p.ValidateSparse(dim, nnz); err != nil {
		return nil, err
	}
	return p.NewSparse(dim, nnz)
}

// Restore rebuilds a model of this type from its MarshalBinary output.
func (t *Type) Restore(b []byte) (Model, error) { return t.restore(b) }

// Examples returns the type's example parameters (fresh pointers), valid
// for any input dimension.
func (t *Type) Examples() []Params { return t.examples() }

func validateDim(dim int) error {
	if dim <= 0 || dim > maxDim {
		return specErrorf("dim", "must be in [1, %d], got %d", maxDim, dim)
	}
	return nil
}

// validateDimFor is validateDim for p's model: up to p.maxDim() when its
// configuration keeps nothing per input index (a generated feature map).
func validateDimFor(dim int, p Params) error {
	if b, ok := p.(interface{ maxDim() int }); ok {
		if lim := b.maxDim(); dim <= 0 || dim > lim {
			return specErrorf("dim", "must be in [1, %d], got %d", lim, dim)
		}
		return nil
	}
	return validateDim(dim)
}

// Spec is a configured model as the registry builds it: a registered type,
// the input dimension, the type's parameters and whether inputs are
// standardised (see Standardized).
type Spec struct {
	Type        string
	Dim         int
	Standardize bool
	Params      Params // the type's parameter struct; nil = its defaults
	// MaxFeatures > 0: the inputs are hashed, sparse rows of dimension Dim
	// with at most MaxFeatures entries (features.max_features); parameters
	// that are SparseParams are then validated and built by their sparse
	// methods.
	MaxFeatures int
}

// Registry holds the model types a program knows. It is built explicitly
// (cmd/streamer assembles the service's) and is read-only afterwards, so
// it is safe for concurrent use.
type Registry struct {
	types  []*Type
	byName map[string]*Type
	byTag  map[string]*Type // names and legacy encoding tags
}

// NewRegistry returns a registry of the given types, in that order. Two
// types with one name (or encoding tag) are an error.
func NewRegistry(types ...*Type) (*Registry, error) {
	r := &Registry{byName: map[string]*Type{}, byTag: map[string]*Type{standardizedTag: nil}}
	for _, t := range types {
		if t == nil {
			return nil, errors.New("online: NewRegistry: nil type")
		}
		if _, dup := r.byName[t.name]; dup {
			return nil, fmt.Errorf("online: model type %q registered twice", t.name)
		}
		r.byName[t.name] = t
		for _, tag := range append([]string{t.name}, t.legacyTag...) {
			if _, dup := r.byTag[tag]; dup {
				return nil, fmt.Errorf("online: model type %q: encoding tag %q is taken", t.name, tag)
			}
			r.byTag[tag] = t
		}
		r.types = append(r.types, t)
	}
	return r, nil
}

// MustRegistry is NewRegistry for a fixed list of types; it panics on an
// error.
func MustRegistry(types ...*Type) *Registry {
	r, err := NewRegistry(types...)
	if err != nil {
		panic(err)
	}
	return r
}

// Types returns the registered types in registration order.
func (r *Registry) Types() []*Type { return slices.Clone(r.types) }

// Names returns the registered type names in registration order.
func (r *Registry) Names() []string {
	out := make([]string, len(r.types))
	for i, t := range r.types {
		out[i] = t.name
	}
	return out
}

// Lookup returns the type called name, or nil.
func (r *Registry) Lookup(name string) *Type { return r.byName[name] }

// Type returns the type called name, or a *SpecError on "type" listing the
// registered ones.
func (r *Registry) Type(name string) (*Type, error) {
	if name == "" {
		return nil, specErrorf("type", "required (one of %v)", r.Names())
	}
	t := r.byName[name]
	if t == nil {
		return nil, specErrorf("type", "unknown model type %q (one of %v)", name, r.Names())
	}
	return t, nil
}

// New builds an empty model of spec: the type's model, wrapped in a
// Standardized when spec.Standardize is set.
func (r *Registry) New(spec Spec) (Model, error) {
	t, err := r.Type(spec.Type)
	if err != nil {
		return nil, err
	}
	p := spec.Params
	if p == nil {
		p = t.NewParams()
		if c, ok := p.(Completer); ok {
			c.Complete(spec.Dim, func(string) bool { return false })
		}
	}
	var m Model
	if sp, ok := p.(SparseParams); ok && spec.MaxFeatures > 0 {
		m, err = t.newSparse(spec.Dim, spec.MaxFeatures, sp)
	} else {
		m, err = t.New(spec.Dim, p)
	}
	if err != nil {
		return nil, err
	}
	if spec.Standardize {
		return Standardize(m), nil
	}
	return m, nil
}

// Restore rebuilds a model from its MarshalBinary output: a registered
// type's encoding or a Standardized wrapper's (whose inner model is
// restored through r).
func (r *Registry) Restore(b []byte) (Model, error) {
	tag, err := PeekType(b)
	if err != nil {
		return nil, err
	}
	if tag == standardizedTag {
		return restoreStandardized(b, r)
	}
	t := r.byTag[tag]
	if t == nil {
		return nil, fmt.Errorf("%w: unknown model type %q", ErrFormat, tag)
	}
	return t.restore(b)
}

// checks collects the errors of a Validate method, each a *SpecError.
type checks struct{ errs []error }

// add records an error on key.
func (c *checks) add(key, format string, args ...any) {
	c.errs = append(c.errs, specErrorf(key, format, args...))
}

// add1 records err (nil: nothing; a joined error: each of its errors).
func (c *checks) add1(err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		c.errs = append(c.errs, j.Unwrap()...)
		return
	}
	c.errs = append(c.errs, err)
}

// delta checks the bound's δ.
func (c *checks) delta(d float64) {
	if !(d > 0 && d < 1) {
		c.add("delta", "must be in (0, 1), got %v", d)
	}
}

// err returns the errors recorded, joined; nil if none.
func (c *checks) err() error { return errors.Join(c.errs...) }

// Unwrap returns m, or the first model it wraps (through Inner, as a
// Standardized does) that is a T.
func Unwrap[T any](m Model) (T, bool) {
	for m != nil {
		if t, ok := m.(T); ok {
			return t, true
		}
		w, ok := m.(interface{ Inner() Model })
		if !ok {
			break
		}
		m = w.Inner()
	}
	var zero T
	return zero, false
}

// RestoreNew is a Def.Restore for a model type whose zero value decodes
// any of its encodings: new(T), then UnmarshalBinary.
func RestoreNew[T any, PT interface {
	*T
	Model
}](b []byte) (Model, error) {
	m := PT(new(T))
	if err := m.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return m, nil
}
