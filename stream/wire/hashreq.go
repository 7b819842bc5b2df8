package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Ranking requests with hashed features (a Decoder WithRequests and
// WithHashing). A request may carry its own "features" object — what every
// candidate shares, e.g. the user's namespace and the context — beside each
// candidate's:
//
//	{"id": "r-1", "key": "u42", "features": {"user": {"id": "u42", "country": "fr"}},
//	 "candidates": [{"item": "i7", "features": {"item": {"id": "i7", "tags": ["sale"]}}}, …]}
//
// Candidate i's hashed features are those of the event whose features
// object holds the request's members followed by candidate i's (see
// Event.CandidateHashed). While decoding, each candidate's first-order
// features wait in Event.cf (hash, signed value, field) and those of its
// namespaces in interactions in Event.cp (hash, unsigned value,
// namespace); the request's own are hashed as an event's features are. Once
// the whole request is read, hashedRequest writes every candidate's
// features, interactions included, to Idx, Val, Hash and Field.

// candHashed locates a candidate's hashed features: while decoding, its
// first-order features ev.cf[f0:f1] and those in interactions ev.cp[p0:p1];
// once the request is decoded, all of them in Idx, Val, Hash and
// Field[lo:hi].
type candHashed struct{ f0, f1, p0, p1, lo, hi int }

// CandidateHashed returns the hashed features of candidate i of a ranking
// request decoded WithHashing: feature k has index idx[k], signed value
// val[k], 64-bit hash hash[k] and field field[k], as Idx, Val, Hash and
// Field hold an event's. They are slices of memory owned by the Event,
// valid until the next Decode.
//
// They are exactly the features of the event
//
//	{"features": {<the request's features members>, <candidate i's features members>}}
//
// (the request's "features" object and the candidate's merged into one, the
// request's members first): the request's first-order features, the
// candidate's, then the interactions crossed over both, pair by pair in
// configuration order, so that an interaction [user, item] crosses the
// request's user namespace with the candidate's item namespace, and a
// namespace given in both has the features of both. MaxFeatures bounds
// each candidate's count, the request's features and the interactions
// included (too_many_features, the detail naming the candidate).
func (ev *Event) CandidateHashed(i int) (idx []int32, val []float64, hash []uint64, field []uint8) {
	c := ev.Cands[i].h
	return ev.Idx[c.lo:c.hi:c.hi], ev.Val[c.lo:c.hi:c.hi], ev.Hash[c.lo:c.hi:c.hi], ev.Field[c.lo:c.hi:c.hi]
}

// hashedCandidate parses a candidate's "features" value of a hashing
// Decoder: its first-order features, in ev.cf and ev.cp.
func (s *scanner) hashedCandidate() (candHashed, *Error) {
	ev, h := s.ev, s.d.hash
	switch c := s.src[s.pos]; c {
	case '{':
	case 'n':
		if e := s.literal("null"); e != nil {
			return candHashed{}, e
		}
		return candHashed{}, &Error{Reason: ReasonMissingFeatures, Detail: "features is null"}
	case '[':
		return candHashed{}, &Error{Reason: ReasonWrongType, Detail: "features: got array, want object (feature hashing is on: {name: value, …})"}
	default:
		return candHashed{}, &Error{Reason: ReasonWrongType, Detail: "features: got " + kindOf(c) + ", want object"}
	}
	// Parse into Idx, Val, Hash and hx past what they hold (the request's
	// features, when they came first), then move the candidate's to cf
	// and cp.
	i0, x0, hn := len(ev.Idx), len(ev.hx), ev.hn
	ev.hn = 0
	if cap(ev.hcnt) < len(h.ns) {
		ev.hcnt = make([]int, len(h.ns))
	} else {
		ev.hcnt = ev.hcnt[:len(h.ns)]
		clear(ev.hcnt)
	}
	ev.hkey = append(append(ev.hkey[:0], h.seed[:]...), 0)
	s.cand = true
	e := s.hashedObject(true, h.top)
	s.cand = false
	n := ev.hn
	ev.hn = hn
	if e == nil && h.max > 0 && n > h.max {
		e = &Error{Reason: ReasonTooManyFeatures, Detail: fmt.Sprintf("features: %d features, limit %d", n, h.max)}
	}
	var c candHashed
	if e == nil {
		c.f0 = len(ev.cf)
		for k := i0; k < len(ev.Hash); k++ {
			ev.cf = append(ev.cf, hashed{h: ev.Hash[k], v: ev.Val[k], field: ev.Field[k]})
		}
		c.f1, c.p0 = len(ev.cf), len(ev.cp)
		ev.cp = append(ev.cp, ev.hx[x0:]...)
		c.p1 = len(ev.cp)
	}
	ev.Idx, ev.Val, ev.Hash, ev.Field, ev.hx = ev.Idx[:i0], ev.Val[:i0], ev.Hash[:i0], ev.Field[:i0], ev.hx[:x0]
	return c, e
}

// hashedRequest writes every candidate's features, combined with the
// request's own (shared: the request has a features object, whose
// first-order features head Idx, Val, Hash and Field), to Idx, Val, Hash
// and Field.
func (s *scanner) hashedRequest(shared bool) *Error {
	ev, h := s.ev, s.d.hash
	sf0, sp0 := len(ev.cf), len(ev.cp)
	if shared {
		for k := range ev.hn { // ≤ MaxFeatures: hashedFeatures checked
			ev.cf = append(ev.cf, hashed{h: ev.Hash[k], v: ev.Val[k], field: ev.Field[k]})
		}
		ev.cp = append(ev.cp, ev.hx...)
	}
	sf, sp := ev.cf[sf0:], ev.cp[sp0:]
	ev.Idx, ev.Val, ev.Hash, ev.Field = ev.Idx[:0], ev.Val[:0], ev.Hash[:0], ev.Field[:0]
	var k [16]byte
	for i := range ev.Cands {
		c := &ev.Cands[i].h
		cf, cp := ev.cf[c.f0:c.f1], ev.cp[c.p0:c.p1]
		total := len(sf) + len(cf)
		for _, p := range h.pairs {
			a := inSlot(sp, p[0]) + inSlot(cp, p[0])
			b := inSlot(sp, p[1]) + inSlot(cp, p[1])
			if a > 0 && b > (math.MaxInt-total)/a {
				total = math.MaxInt
				break
			}
			total += a * b
		}
		if h.max > 0 && total > h.max {
			return &Error{Reason: ReasonTooManyFeatures, Detail: fmt.Sprintf("candidates[%d]: %d features with the request's (interactions included), limit %d", i, total, h.max)}
		}
		c.lo = len(ev.Idx)
		for _, f := range sf {
			ev.Hash = append(ev.Hash, f.h)
			ev.Idx = append(ev.Idx, int32(f.h&h.mask))
			ev.Val = append(ev.Val, f.v)
			ev.Field = append(ev.Field, f.field)
		}
		for _, f := range cf {
			ev.Hash = append(ev.Hash, f.h)
			ev.Idx = append(ev.Idx, int32(f.h&h.mask))
			ev.Val = append(ev.Val, f.v)
			ev.Field = append(ev.Field, f.field)
		}
		// The request's features precede the candidate's, as in one
		// features object: crossed in that order.
		n := len(sp) + len(cp)
		for _, p := range h.pairs {
			for ai := range n {
				a := at(sp, cp, ai)
				if int(a.slot) != p[0] {
					continue
				}
				binary.LittleEndian.PutUint64(k[:8], a.h)
				for bi := range n {
					b := at(sp, cp, bi)
					if int(b.slot) != p[1] {
						continue
					}
					binary.LittleEndian.PutUint64(k[8:], b.h)
					s.push(xxhash.Sum64(k[:]), a.v*b.v)
				}
			}
		}
		c.hi = len(ev.Idx)
	}
	return nil
}

// inSlot counts the features of namespace slot in fs.
func inSlot(fs []hashed, slot int) int {
	n := 0
	for _, f := range fs {
		if int(f.slot) == slot {
			n++
		}
	}
	return n
}

// at is element i of a followed by b.
func at(a, b []hashed, i int) *hashed {
	if i < len(a) {
		return &a[i]
	}
	return &b[i-len(a)]
}
