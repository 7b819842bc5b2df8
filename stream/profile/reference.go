package profile

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
)

// RefState is a reference key's labels, kept for its median: the value
// of its missing entries in every entity's reference vector. It is kept
// like a State (a key table's model), under the reference key.
type RefState struct {
	Sorted []float64 // its labels, ascending; at most Config.MaxLabels (the first ones)
	Seen   int64     // every label it gave
}

// NewRefState returns an empty RefState as an online.Model: a key table's
// factory (holder.Spec.Factory).
func NewRefState() (online.Model, error) { return &RefState{}, nil }

// Medians are the reference keys' median labels, by key index, each read
// and written atomically (the float64's bits): the value of a reference
// key an entity has not labelled (Config.Numbers).
type Medians []atomic.Uint64

// NewMedians returns n medians, each prior.
func NewMedians(n int, prior float64) Medians {
	m := make(Medians, n)
	m.Reset(prior)
	return m
}

// Reset sets every median to prior (no labels).
func (m Medians) Reset(prior float64) {
	for j := range m {
		m.Set(j, prior)
	}
}

// Set sets key j's median to v.
func (m Medians) Set(j int, v float64) { m[j].Store(math.Float64bits(v)) }

// At is key j's median.
func (m Medians) At(j int) float64 { return math.Float64frombits(m[j].Load()) }

// LabelUpdate adds label Y to a RefState (at most Max kept) and reads its
// median back into Median: a key table's updater (holder.Updater).
type LabelUpdate struct {
	Y      float64
	Max    int
	Median float64
}

// Update adds the label to m, a *RefState.
func (u *LabelUpdate) Update(m online.Model) {
	r := m.(*RefState)
	r.Add(u.Y, u.Max)
	u.Median = r.Median()
}

// Add records label y (beyond max labels only counted).
func (r *RefState) Add(y float64, max int) {
	r.Seen++
	if len(r.Sorted) >= max {
		return
	}
	i, _ := slices.BinarySearch(r.Sorted, y)
	r.Sorted = slices.Insert(r.Sorted, i, y)
}

// Median is the median of the labels kept (the mean of the two middle ones
// of an even count), NaN when there are none.
func (r *RefState) Median() float64 { return medianSorted(r.Sorted) }

// Median is the median of xs (the mean of the two middle values of an
// even count; NaN for none), xs unchanged.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return medianSorted(s)
}

func medianSorted(s []float64) float64 {
	n := len(s)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return s[n/2]
	default:
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// AppendBinary appends r's encoding.
func (r *RefState) AppendBinary(dst []byte) ([]byte, error) {
	dst = codec.AppendU8(dst, stateVersion)
	dst = codec.AppendI64(dst, r.Seen)
	dst = codec.AppendU32(dst, uint32(len(r.Sorted)))
	return codec.AppendF64s(dst, r.Sorted), nil
}

// MarshalBinary encodes r.
func (r *RefState) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes what MarshalBinary wrote; on error r is
// unchanged.
func (r *RefState) UnmarshalBinary(b []byte) error {
	rd := codec.NewReader(b, ErrFormat)
	if v := rd.U8(); rd.Err() == nil && v != stateVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrFormat, v, stateVersion)
	}
	seen := rd.I64()
	n := rd.Count("labels", 1<<24, 8)
	s := make([]float64, n)
	rd.F64s(s)
	if err := rd.End(); err != nil {
		return err
	}
	if !slices.IsSorted(s) || seen < int64(n) {
		return fmt.Errorf("%w: reference labels unsorted or miscounted", ErrFormat)
	}
	r.Sorted, r.Seen = s, seen
	return nil
}

// RefTypeName is the type of a reference key's state.
const RefTypeName = "profile-reference"

// Type is RefTypeName.
func (r *RefState) Type() string { return RefTypeName }

// Dim is 0.
func (r *RefState) Dim() int { return 0 }

// Label accepts any finite label.
func (r *RefState) Label(v float64) (float64, bool) { return v, !math.IsNaN(v) && !math.IsInf(v, 0) }

// Observe does nothing (Add learns a label).
func (r *RefState) Observe([]float64, float64, bool) online.Prediction { return online.Prediction{} }

// Examples is the number of labels seen.
func (r *RefState) Examples() int64 { return r.Seen }

// Version is 1.
func (r *RefState) Version() int64 { return 1 }
