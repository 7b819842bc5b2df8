package adaboost

import (
	"errors"
	"fmt"
	"math"

	"github.com/streamer/streamer/online/codec"
)

// ErrFormat is wrapped by every error of UnmarshalBinary.
var ErrFormat = errors.New("adaboost: malformed encoding")

// Encoding of an Ensemble (online/codec's conventions, little-endian;
// pinned by testdata/format_v1.bin): magic "ADAB", version u16 (1), dim u32,
// members u32, n u32 (training rows), stop u8, rounds u32, then per round
// kind u8 (1 member, 2 stump), index u32 (the member's, or the stump's
// feature), threshold f64 (0 for a member), polarity u8 (1: +1, 2: −1; 1
// for a member), err f64, beta f64. The scoring form is derived from the
// rounds on decoding; the members' names are not encoded.
const (
	magic      = "ADAB"
	version    = 1
	roundBytes = 1 + 4 + 8 + 1 + 8 + 8
	maxDim     = 1 << 24
)

// MarshalBinary encodes the ensemble.
func (e *Ensemble) MarshalBinary() ([]byte, error) {
	return e.AppendBinary(make([]byte, 0, 23+len(e.rounds)*roundBytes))
}

// AppendBinary appends the encoding of the ensemble to dst.
func (e *Ensemble) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, magic...)
	dst = codec.AppendU16(dst, version)
	dst = codec.AppendU32(dst, uint32(e.dim))
	dst = codec.AppendU32(dst, uint32(e.members))
	dst = codec.AppendU32(dst, uint32(e.n))
	dst = codec.AppendU8(dst, uint8(e.stop))
	dst = codec.AppendU32(dst, uint32(len(e.rounds)))
	for _, r := range e.rounds {
		kind, index := uint8(1), r.Member
		if r.Member < 0 {
			kind, index = 2, r.Feature
		}
		pol := uint8(1)
		if r.Polarity < 0 {
			pol = 2
		}
		dst = codec.AppendU8(dst, kind)
		dst = codec.AppendU32(dst, uint32(index))
		dst = codec.AppendF64(dst, r.Threshold)
		dst = codec.AppendU8(dst, pol)
		dst = codec.AppendF64(dst, r.Err)
		dst = codec.AppendF64(dst, r.Beta)
	}
	return dst, nil
}

// UnmarshalBinary restores an ensemble written by MarshalBinary into e.
// Errors wrap ErrFormat; on error e is unchanged.
func (e *Ensemble) UnmarshalBinary(b []byte) error {
	r := codec.NewReader(b, ErrFormat)
	if m := r.Take(len(magic)); r.Err() == nil && string(m) != magic {
		r.Failf("bad magic %q", m)
	}
	if v := r.U16(); r.Err() == nil && v != version {
		r.Failf("format version %d (this build reads %d)", v, version)
	}
	dim, members, n := int(r.U32()), int(r.U32()), int(r.U32())
	stop := Stop(r.U8())
	if r.Err() == nil {
		switch {
		case dim < 1 || dim > maxDim:
			r.Failf("dimension %d", dim)
		case members > dim:
			r.Failf("%d members for dimension %d", members, dim)
		case n < 1 || n > math.MaxInt32:
			r.Failf("%d training rows", n)
		case stop < StopRounds || stop > StopChance:
			r.Failf("stop reason %d", stop)
		}
	}
	count := r.Count("rounds", MaxRounds, roundBytes)
	if r.Err() == nil && count == 0 {
		r.Failf("no rounds")
	}
	rounds := make([]Round, 0, count)
	for k := range count {
		kind, index, t, pol := r.U8(), int(r.U32()), r.F64(), r.U8()
		rd := Round{Member: index, Feature: -1, Threshold: t, Polarity: 1, Err: r.F64(), Beta: r.F64()}
		if pol == 2 {
			rd.Polarity = -1
		}
		if r.Err() != nil {
			break
		}
		switch {
		case kind == 1 && (index >= members || math.Float64bits(t) != 0 || pol != 1):
			r.Failf("round %d: member %d of %d, threshold %v, polarity %d", k, index, members, t, pol)
		case kind == 2 && (index >= dim-members || math.IsNaN(t) || math.IsInf(t, 0) || (pol != 1 && pol != 2)):
			r.Failf("round %d: stump on feature %d of %d, threshold %v, polarity %d", k, index, dim-members, t, pol)
		case kind != 1 && kind != 2:
			r.Failf("round %d: kind %d", k, kind)
		case !(rd.Err >= 0 && rd.Err < 0.5) || !(rd.Beta > 0 && rd.Beta <= BetaMax):
			r.Failf("round %d: error %v, β %v", k, rd.Err, rd.Beta)
		}
		if kind == 2 {
			rd.Member, rd.Feature = -1, index
		}
		rounds = append(rounds, rd)
	}
	if err := r.End(); err != nil {
		return err
	}
	if stop == StopPerfect && rounds[len(rounds)-1].Beta != BetaMax {
		return fmt.Errorf("%w: stopped on a perfect member with β %v", ErrFormat, rounds[len(rounds)-1].Beta)
	}
	*e = Ensemble{dim: dim, members: members, n: n, rounds: rounds, stop: stop}
	e.build()
	return nil
}
