// Package profile keeps what the stream says about an entity — an item
// named by the events' features, a user named by the message key — as
// keyed state: its event and label counts, the labels' mean and variance
// (Welford), when it was first and last seen, a decayed popularity, a
// factorization machine's factors for it, and the labels a fixed set of
// reference keys gave it (seed 001's "reference reviewers").
//
// A profile is rendered as the members of a hashed features object
// (Render): a namespace of numbers such as
//
//	"item_profile":{"count":12,"labels":9,"mean":3.9,…,"f0":0.12,…,"r0":4,…}
//
// so that a model takes profile values exactly as if the event had carried
// them, and a client may spell them out in a request instead. The engine
// (stream/engine) keeps one table of profiles per entity in each shard, in
// the key store and snapshots like a key-scoped model's instances
// (stream/holder), and joins them at score time; this package knows
// nothing of shards or Kafka.
package profile

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// The values a profile publishes in its namespace (Config.Values).
const (
	ValueCount      = "count"      // events seen
	ValueLabels     = "labels"     // labelled events seen
	ValueMean       = "mean"       // the labels' mean (cold: Config.Prior)
	ValueVariance   = "variance"   // the labels' population variance (0 below two labels)
	ValuePopularity = "popularity" // events decayed with Config.HalfLife, as of the last one
	ValueBias       = "bias"       // the fm model's weight for the entity's id
	ValueFactors    = "factors"    // f0..f{k-1}: the fm model's factors for the entity's id
	ValueReference  = "reference"  // r0..r{R-1}: the reference keys' labels (missing: the key's median)
)

// AllValues are the values a profile can publish, in the order Render
// writes them.
var AllValues = []string{ValueCount, ValueLabels, ValueMean, ValueVariance, ValuePopularity, ValueBias, ValueFactors, ValueReference}

// Config is one entity's profile: where its id comes from and what is
// kept and published.
type Config struct {
	Entity string // its name, e.g. "item"
	// The entity's id: the event's hashed feature Namespace.Name (a
	// string value), or the message key when Key.
	Key             bool
	Namespace, Name string
	// Out is the namespace its values are published in, e.g.
	// "item_profile".
	Out    string
	Values []string // of AllValues, in that order
	// HalfLife of the popularity (0: not decayed, a count).
	HalfLife time.Duration
	// Factors is the fm model whose factors for the id feature
	// (Namespace.Name=id) are kept; K its number of factors (0: none).
	Factors string
	K       int
	// Reference are the keys whose labels make the reference vector
	// (entry j: key j's label for the entity, or key j's median label
	// when it gave none); MaxLabels bounds the labels kept per key for
	// its median.
	Reference [][]byte
	MaxLabels int
	// Prior is the mean published for an entity with no label yet.
	Prior float64
	// Candidates: a ranking request's candidate "item" is this entity's
	// id (at most one entity).
	Candidates bool
}

// Names are the feature names of the numbers c publishes, in Render's
// order.
func (c *Config) Names() []string {
	var out []string
	for _, v := range c.Values {
		switch v {
		case ValueFactors:
			for j := range c.K {
				out = append(out, "f"+strconv.Itoa(j))
			}
		case ValueReference:
			for j := range c.Reference {
				out = append(out, "r"+strconv.Itoa(j))
			}
		default:
			out = append(out, v)
		}
	}
	return out
}

// TypeName is the type of a profile's state as the key store and
// snapshots name it.
const TypeName = "profile"

// State is one entity's profile. It is an online.Model only so that a
// key table (stream/holder) can keep it: Observe does nothing; Update
// learns an event.
type State struct {
	Events, Labels int64
	Mean, M2       float64 // Welford's running mean and sum of squared deviations
	First, Last    int64   // unix milliseconds of the first and last event
	Pop            float64 // popularity as of Last
	Bias           float64 // the fm's weight for the id (with Factors)
	Factors        []float64
	Ref            []RefLabel // sorted by J, one per reference key
	Attrs          []byte     // the entity's namespace object from its last event that had it (raw JSON)

	hashed Hashed // Attrs hashed (SetHashedAttrs; not encoded), until Attrs change
}

// NewState returns an empty State as an online.Model: a key table's
// factory (holder.Spec.Factory).
func NewState() (online.Model, error) { return &State{}, nil }

// EventUpdate learns Ev into a State under Cfg: a key table's updater
// (holder.Updater), reused from event to event.
type EventUpdate struct {
	Cfg *Config
	Ev  Event
}

// Update learns the event into m, a *State.
func (u *EventUpdate) Update(m online.Model) { m.(*State).Update(u.Cfg, &u.Ev) }

// Hashed are hashed features: indices, signed values, fields.
type Hashed struct {
	Idx   []int32
	Val   []float64
	Field []uint8
	ok    bool
}

// HashedAttrs returns Attrs as SetHashedAttrs kept them, and whether it
// did since they last changed.
func (s *State) HashedAttrs() (*Hashed, bool) { return &s.hashed, s.hashed.ok }

// SetHashedAttrs keeps Attrs hashed (copies of idx, val, field) until they
// change.
func (s *State) SetHashedAttrs(idx []int32, val []float64, field []uint8) {
	h := &s.hashed
	h.Idx, h.Val, h.Field, h.ok = append(h.Idx[:0], idx...), append(h.Val[:0], val...), append(h.Field[:0], field...), true
}

// RefLabel is reference key J's latest label for the entity.
type RefLabel struct {
	J int32
	Y float64
}

// Event is what an event tells a profile.
type Event struct {
	At       int64 // unix milliseconds
	Label    float64
	Labelled bool
	Factors  []float64 // the fm model's factors for the id after it learned the event (nil: none)
	Bias     float64   // and its weight (with Factors)
	Ref      int       // the event's key's index in Config.Reference, -1 if none
	Attrs    []byte    // the entity's namespace object in the event (nil: none)
}

// Update learns ev into s.
func (s *State) Update(c *Config, ev *Event) {
	if s.Events == 0 || ev.At < s.First {
		s.First = ev.At
	}
	if c.HalfLife > 0 && s.Events > 0 && ev.At > s.Last {
		s.Pop *= math.Exp2(-float64(ev.At-s.Last) / float64(c.HalfLife.Milliseconds()))
	}
	s.Pop++
	if ev.At > s.Last {
		s.Last = ev.At
	}
	s.Events++
	if ev.Labelled {
		s.Labels++
		d := ev.Label - s.Mean
		s.Mean += d / float64(s.Labels)
		s.M2 += d * (ev.Label - s.Mean)
		if ev.Ref >= 0 {
			j := int32(ev.Ref)
			i, found := slices.BinarySearchFunc(s.Ref, j, func(r RefLabel, j int32) int { return int(r.J - j) })
			if found {
				s.Ref[i].Y = ev.Label
			} else {
				s.Ref = slices.Insert(s.Ref, i, RefLabel{J: j, Y: ev.Label})
			}
		}
	}
	if ev.Factors != nil {
		s.Factors = append(s.Factors[:0], ev.Factors...)
		s.Bias = ev.Bias
	}
	if ev.Attrs != nil && string(ev.Attrs) != string(s.Attrs) {
		s.Attrs = append(s.Attrs[:0], ev.Attrs...)
		s.hashed.ok = false
	}
}

// Variance is the labels' population variance (0 below two labels).
func (s *State) Variance() float64 {
	if s.Labels < 2 {
		return 0
	}
	return s.M2 / float64(s.Labels)
}

// Numbers appends to dst the numbers c publishes for s (nil: an entity
// never seen, with its cold defaults: counts 0, the prior mean, zero
// factors, every reference key's median), in Names' order; median holds
// the reference keys' median labels.
func (c *Config) Numbers(dst []float64, s *State, median Medians) []float64 {
	var zero State
	if s == nil {
		s = &zero
	}
	for _, v := range c.Values {
		switch v {
		case ValueCount:
			dst = append(dst, float64(s.Events))
		case ValueLabels:
			dst = append(dst, float64(s.Labels))
		case ValueMean:
			m := s.Mean
			if s.Labels == 0 {
				m = c.Prior
			}
			dst = append(dst, m)
		case ValueVariance:
			dst = append(dst, s.Variance())
		case ValuePopularity:
			dst = append(dst, s.Pop)
		case ValueBias:
			dst = append(dst, s.Bias)
		case ValueFactors:
			for j := range c.K {
				f := 0.0
				if j < len(s.Factors) {
					f = s.Factors[j]
				}
				dst = append(dst, f)
			}
		case ValueReference:
			k := 0
			for j := range c.Reference {
				if k < len(s.Ref) && int(s.Ref[k].J) == j {
					dst = append(dst, s.Ref[k].Y)
					k++
				} else {
					dst = append(dst, median.At(j))
				}
			}
		}
	}
	return dst
}

// Render appends the members of a features object that publish s (nil:
// the cold defaults, as Values) under c.Out, e.g. "item_profile":{"count":12,…}.
// Numbers are written in the shortest form that reads back as the same
// float64, so that a client that spells the values out gets the features
// the service joins.
func (c *Config) Render(dst []byte, s *State, median Medians) []byte {
	dst = strconv.AppendQuote(dst, c.Out)
	dst = append(dst, ":{"...)
	values := c.Numbers(nil, s, median)
	for k, name := range c.Names() {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, name)
		dst = append(dst, ':')
		dst = strconv.AppendFloat(dst, values[k], 'g', -1, 64)
	}
	return append(dst, '}')
}

// The format of an encoded State.
const stateVersion = 1

// ErrFormat is wrapped by decoding errors.
var ErrFormat = errors.New("profile: bad encoding")

// AppendBinary appends s's encoding.
func (s *State) AppendBinary(dst []byte) ([]byte, error) {
	dst = codec.AppendU8(dst, stateVersion)
	dst = codec.AppendI64(dst, s.Events)
	dst = codec.AppendI64(dst, s.Labels)
	dst = codec.AppendF64(dst, s.Mean)
	dst = codec.AppendF64(dst, s.M2)
	dst = codec.AppendI64(dst, s.First)
	dst = codec.AppendI64(dst, s.Last)
	dst = codec.AppendF64(dst, s.Pop)
	dst = codec.AppendF64(dst, s.Bias)
	dst = codec.AppendU32(dst, uint32(len(s.Factors)))
	dst = codec.AppendF64s(dst, s.Factors)
	dst = codec.AppendU32(dst, uint32(len(s.Ref)))
	for _, r := range s.Ref {
		dst = codec.AppendU32(dst, uint32(r.J))
		dst = codec.AppendF64(dst, r.Y)
	}
	return codec.AppendBytes(dst, s.Attrs), nil
}

// MarshalBinary encodes s.
func (s *State) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// UnmarshalBinary decodes what MarshalBinary wrote; on error s is
// unchanged.
func (s *State) UnmarshalBinary(b []byte) error {
	r := codec.NewReader(b, ErrFormat)
	if v := r.U8(); r.Err() == nil && v != stateVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrFormat, v, stateVersion)
	}
	var t State
	t.Events, t.Labels = r.I64(), r.I64()
	t.Mean, t.M2 = r.F64(), r.F64()
	t.First, t.Last = r.I64(), r.I64()
	t.Pop = r.F64()
	t.Bias = r.F64()
	if n := r.Count("factors", 1<<16, 8); n > 0 {
		t.Factors = make([]float64, n)
		r.F64s(t.Factors)
	}
	n := r.Count("reference labels", 1<<24, 12)
	t.Ref = make([]RefLabel, 0, n)
	for range n {
		t.Ref = append(t.Ref, RefLabel{J: int32(r.U32()), Y: r.F64()})
	}
	if a := r.Bytes(); len(a) > 0 {
		t.Attrs = slices.Clone(a)
	}
	if err := r.End(); err != nil {
		return err
	}
	switch {
	case t.Events < 0 || t.Labels < 0 || t.Labels > t.Events:
		return fmt.Errorf("%w: counts %d events, %d labels", ErrFormat, t.Events, t.Labels)
	case !slices.IsSortedFunc(t.Ref, func(a, b RefLabel) int { return int(a.J - b.J) }):
		return fmt.Errorf("%w: reference labels out of order", ErrFormat)
	}
	*s = t
	return nil
}

// The online.Model methods: a key table keeps a State as a model.

// Type is TypeName.
func (s *State) Type() string { return TypeName }

// Dim is 0: a profile takes no features.
func (s *State) Dim() int { return 0 }

// Label accepts any finite label.
func (s *State) Label(v float64) (float64, bool) { return v, !math.IsNaN(v) && !math.IsInf(v, 0) }

// Observe does nothing (Update learns an event).
func (s *State) Observe([]float64, float64, bool) online.Prediction { return online.Prediction{} }

// Examples is the number of events the profile learned.
func (s *State) Examples() int64 { return s.Events }

// Version is 1.
func (s *State) Version() int64 { return 1 }
