package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// HashConfig configures feature hashing (the hashing trick, as in Vowpal
// Wabbit): sparse, categorical and namespaced features mapped into a space
// of 2^Bits indices. See [Decoder.WithHashing].
type HashConfig struct {
	Bits         int         // 1..30: the hashed space has 2^Bits indices
	Seed         uint64      // part of every hashed string: another seed, another model
	Interactions [][2]string // pairs of namespaces whose features are crossed (VW's -q); "" is the top level
	MaxFeatures  int         // > 0: an event with more hashed features (interactions included) is too_many_features; 0: no limit (not with Interactions)
	// Namespaces numbers the fields of Event.Field: a feature of
	// Namespaces[i] has field i+1; one of the top level, of a namespace
	// not listed, or an interaction has field 0. At most MaxFields
	// distinct, non-empty names.
	Namespaces []string
}

// MaxFields is the largest number of HashConfig.Namespaces (a field is a
// uint8, and 0 is the unlisted one).
const MaxFields = 255

// hashing is a Decoder's compiled HashConfig.
type hashing struct {
	mask  uint64
	seed  [8]byte  // Seed, little-endian
	max   int      // MaxFeatures
	ns    []string // the distinct namespaces named by Interactions
	pairs [][2]int // Interactions, as indices into ns
	top   int      // index of "" in ns, or -1

	// Every namespace with a slot in ns or a field (nsSlot[i], nsField[i]
	// for nsName[i]); nsMap indexes nsName when it is long.
	nsName  []string
	nsSlot  []int32
	nsField []uint8
	nsMap   map[string]int32

	ents []EntityRef // WithEntities
}

// nsLinear is the longest nsName searched without nsMap.
const nsLinear = 8

// namespace returns the slot (-1: in no interaction) and the field of the
// namespace ns.
func (h *hashing) namespace(ns []byte) (slot int, field uint8) {
	if h.nsMap != nil {
		if i, ok := h.nsMap[string(ns)]; ok {
			return int(h.nsSlot[i]), h.nsField[i]
		}
		return -1, 0
	}
	for i, n := range h.nsName {
		if n == string(ns) {
			return int(h.nsSlot[i]), h.nsField[i]
		}
	}
	return -1, 0
}

// hashed is a first-order feature of a namespace that takes part in an
// interaction, kept until the interactions are crossed.
type hashed struct {
	h     uint64  // its 64-bit hash
	v     float64 // its value, unsigned (signed in Event.cf)
	slot  int32   // its namespace's index in hashing.ns
	field uint8   // its field (HashConfig.Namespaces)
}

// WithHashing returns a copy of d that decodes "features" as a sparse,
// hashed object into Event.Idx and Event.Val (Event.Features is then
// empty, and Dim returns 2^Bits, the size of the hashed space).
//
// The features object maps names to values, for example
//
//	{"features": {"price": 9.5, "color": "red", "tags": ["a", "b"], "new": true,
//	              "user": {"id": "u42", "country": "fr", "age": 31}}}
//
// where a value is
//
//   - a number v: the feature name, value v (WithMaxAbs applies);
//   - a string s: the categorical feature name=s, value 1;
//   - an array of strings (a bag): one feature name=s, value 1, per element
//     (a repeated element repeats the feature); an empty array adds nothing;
//   - true: the feature name, value 1; false and null: nothing (absent);
//   - an object (only at the top level): a namespace, whose members are
//     features of that namespace with the value kinds above. The top-level
//     members are the features of the namespace "". Namespaces do not nest.
//
// Anything else is wrong_type, the detail naming the path
// ("features.user.tags[2]: got number, want string"); a non-finite number
// is non_finite. The dense array form is wrong_type, "features": null is
// missing_features. A name repeated in an object is not merged: each
// occurrence adds its features (encoding/json would keep the last one
// only; producers should not repeat names). A repeated top-level
// "features" member replaces the earlier one.
//
// # Hashing (part of the model format: changing it invalidates models)
//
// A feature of namespace ns (a UTF-8 string, "" at the top level) with
// full name f (name, or name=s for a string value or a bag element) hashes
// the bytes
//
//	seed (8 bytes, little-endian) ‖ ns ‖ 0x00 ‖ f
//
// with 64-bit xxHash (XXH64, seed 0; github.com/cespare/xxhash/v2). Names
// and strings are hashed unescaped, as UTF-8 (invalid UTF-8 is hashed as
// is); numbers are never part of the hashed bytes. From the hash h, the
// feature's index is h mod 2^Bits (the low bits) and its sign is −1 when
// bit 63 of h is set, +1 otherwise; Val holds sign·value, so that inner
// products in the hashed space are unbiased (Weinberger et al., 2009). So
// {"color": "red"} and {"color=red": 1} are the same feature.
//
// # Interactions
//
// Each pair [a, b] of Interactions crosses every first-order feature i of
// namespace a with every feature j of namespace b (|a|·|b| features, i in
// input order outermost; for a == b all ordered pairs, i == j included).
// The crossed feature hashes the 16 bytes
//
//	h_i (8 bytes, little-endian) ‖ h_j (8 bytes, little-endian)
//
// (the 64-bit hashes of i and j, which include the seed) with XXH64; its
// index and its own sign come from that hash as above, and its value is
// sign·v_i·v_j with the unsigned values v_i, v_j. Interactions follow the
// first-order features in Idx and Val, pair by pair in configuration
// order. A namespace absent from an event crosses to nothing.
//
// # Output
//
// Idx and Val are in the order produced: the members in input order (a
// bag's elements in order, a namespace's members where the namespace
// appears), then the interactions. Indices may repeat (a hash collision, a
// repeated bag element): they are not merged, a linear model sums them.
// Once the Event's buffers have grown, decoding allocates nothing.
//
// With MaxFeatures > 0, an event whose features (first-order plus
// interactions) number more is too_many_features, reported when the
// features object has been read (a malformed value in it is reported
// instead).
//
// # Fields
//
// Field[k] is the field of feature k, for models that treat namespaces
// differently (a factorization machine that crosses only some pairs): 1 +
// the index of its namespace in Namespaces, or 0 for a feature of the top
// level (and of the namespace "", the top level too), of a namespace not
// in Namespaces, and for an interaction. Fields are not hashed: listing a
// namespace changes no index or value.
//
// Ranking requests (WithRequests, before or after WithHashing) take
// hashed candidates, combined with the request's own features: see
// [Event.CandidateHashed].
//
// It returns an error if Bits is not in [1, 30], MaxFeatures < 0,
// MaxFeatures is 0 (no limit) with Interactions (whose count is quadratic
// in the size of a message), Namespaces holds more than MaxFields names,
// an empty or a repeated one, or d has feature names (NewDecoder's names)
// or a shape (WithShape). Namespaces named by Interactions need not be
// listed in Namespaces: any name is accepted.
func (d *Decoder) WithHashing(h HashConfig) (*Decoder, error) {
	switch {
	case h.Bits < 1 || h.Bits > 30:
		return nil, fmt.Errorf("wire: WithHashing: bits %d not in [1, 30]", h.Bits)
	case h.MaxFeatures < 0:
		return nil, fmt.Errorf("wire: WithHashing: max features %d < 0", h.MaxFeatures)
	case len(h.Interactions) > 0 && h.MaxFeatures == 0:
		// |a|·|b| features from a message of n bytes: n²/16 without a limit.
		return nil, fmt.Errorf("wire: WithHashing: interactions need a limit on the features (max features > 0)")
	case d.index != nil:
		return nil, fmt.Errorf("wire: WithHashing: the decoder has feature names (hashing takes any name)")
	case d.rows > 0:
		return nil, fmt.Errorf("wire: WithHashing: the decoder has a matrix shape")
	case len(h.Namespaces) > MaxFields:
		return nil, fmt.Errorf("wire: WithHashing: %d namespaces, at most %d", len(h.Namespaces), MaxFields)
	}
	hs := &hashing{mask: 1<<h.Bits - 1, max: h.MaxFeatures, top: -1}
	binary.LittleEndian.PutUint64(hs.seed[:], h.Seed)
	// entry returns the index of namespace ns in nsName, added if new.
	entry := func(ns string) int {
		if i := slices.Index(hs.nsName, ns); i >= 0 {
			return i
		}
		hs.nsName = append(hs.nsName, ns)
		hs.nsSlot = append(hs.nsSlot, -1)
		hs.nsField = append(hs.nsField, 0)
		return len(hs.nsName) - 1
	}
	for i, ns := range h.Namespaces {
		if ns == "" || slices.Contains(h.Namespaces[:i], ns) {
			return nil, fmt.Errorf("wire: WithHashing: namespaces[%d]: empty or repeated namespace %q", i, ns)
		}
		hs.nsField[entry(ns)] = uint8(i + 1)
	}
	slot := func(ns string) int {
		for i, n := range hs.ns {
			if n == ns {
				return i
			}
		}
		hs.ns = append(hs.ns, ns)
		if ns == "" {
			hs.top = len(hs.ns) - 1
		}
		hs.nsSlot[entry(ns)] = int32(len(hs.ns) - 1)
		return len(hs.ns) - 1
	}
	for _, p := range h.Interactions {
		hs.pairs = append(hs.pairs, [2]int{slot(p[0]), slot(p[1])})
	}
	if len(hs.nsName) > nsLinear {
		hs.nsMap = make(map[string]int32, len(hs.nsName))
		for i, n := range hs.nsName {
			hs.nsMap[n] = int32(i)
		}
	}
	c := *d
	c.hash = hs
	c.dim = 1 << h.Bits
	return &c, nil
}

// hashedFeatures parses a "features" value of a hashing Decoder into
// ev.Idx, ev.Val, ev.Hash and ev.Field.
func (s *scanner) hashedFeatures() *Error {
	h, ev := s.d.hash, s.ev
	switch c := s.src[s.pos]; c {
	case '{':
	case 'n':
		if e := s.literal("null"); e != nil {
			return e
		}
		return &Error{Reason: ReasonMissingFeatures, Detail: "features is null"}
	case '[':
		return &Error{Reason: ReasonWrongType, Detail: "features: got array, want object (feature hashing is on: {name: value, …})"}
	default:
		return &Error{Reason: ReasonWrongType, Detail: "features: got " + kindOf(c) + ", want object"}
	}
	ev.Idx, ev.Val, ev.Hash, ev.Field, ev.hx, ev.hn = ev.Idx[:0], ev.Val[:0], ev.Hash[:0], ev.Field[:0], ev.hx[:0], 0
	if cap(ev.hcnt) < len(h.ns) {
		ev.hcnt = make([]int, len(h.ns))
	} else {
		ev.hcnt = ev.hcnt[:len(h.ns)]
		clear(ev.hcnt)
	}
	ev.hkey = append(append(ev.hkey[:0], h.seed[:]...), 0) // seed ‖ "" ‖ 0x00
	if len(h.ents) > 0 {
		ev.resetEntities(len(h.ents))
	}
	if e := s.hashedObject(true, h.top); e != nil {
		return e
	}
	total := ev.hn
	for _, p := range h.pairs {
		a, b := ev.hcnt[p[0]], ev.hcnt[p[1]]
		if a > 0 && b > (math.MaxInt-total)/a {
			total = math.MaxInt // only a message of gigabytes
			break
		}
		total += a * b
	}
	if h.max > 0 && total > h.max {
		return &Error{Reason: ReasonTooManyFeatures, Detail: fmt.Sprintf("%d features, limit %d", total, h.max)}
	}
	var k [16]byte
	for _, p := range h.pairs {
		for _, a := range ev.hx {
			if int(a.slot) != p[0] {
				continue
			}
			binary.LittleEndian.PutUint64(k[:8], a.h)
			for _, b := range ev.hx {
				if int(b.slot) != p[1] {
					continue
				}
				binary.LittleEndian.PutUint64(k[8:], b.h)
				s.push(xxhash.Sum64(k[:]), a.v*b.v)
			}
		}
	}
	return nil
}

// hashedObject parses the features object (top) or a namespace's object at
// s.pos; ev.hkey holds the namespace's prefix, seed ‖ ns ‖ 0x00. slot is
// the namespace's index in hashing.ns (-1: in no interaction).
func (s *scanner) hashedObject(top bool, slot int) *Error {
	ev := s.ev
	s.pos++ // '{'
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
		return nil
	}
	plen := len(ev.hkey)
	// The position is kept in i, and in s.pos only around the calls that
	// read it: a member "name":"value" of compact JSON, the common case,
	// never goes through memory for it.
	src, i := s.src, s.pos
	for {
		if i < len(src) && src[i] <= ' ' {
			s.pos = i
			s.skipWS()
			i = s.pos
		}
		if i >= len(src) || src[i] != '"' {
			s.pos = i
			return s.syntax("want object key")
		}
		var e *Error
		hk, j := appendPlain(ev.hkey[:plen], src, i+1)
		if j < len(src) && src[j] == '"' {
			ev.hkey = hk
			i = j + 1
		} else {
			mark := len(ev.buf)
			var key []byte
			s.pos = i
			if key, e = s.key(); e != nil {
				return e
			}
			i = s.pos
			ev.hkey = append(ev.hkey[:plen], key...)
			ev.buf = ev.buf[:mark]
		}
		if i+1 < len(src) && src[i] == ':' && src[i+1] > ' ' {
			i++ // compact JSON
		} else {
			s.pos = i
			if e := s.colon(); e != nil {
				return e
			}
			i = s.pos
		}
		if i >= len(src) {
			s.pos = i
			return s.syntax("want value")
		}
		if src[i] == '"' {
			// A categorical, the common case: name=value. A value
			// without escapes is appended at once.
			hk := append(ev.hkey, '=')
			vstart := len(hk)
			if hk, j = appendPlain(hk, src, i+1); j < len(src) && src[j] == '"' {
				i = j + 1
			} else {
				s.pos = i
				if hk, e = s.appendString(hk[:vstart]); e != nil {
					ev.hkey = hk
					return e
				}
				i = s.pos
			}
			ev.hkey = hk
			if s.ent >= 0 {
				s.entityMember(hk, plen, vstart)
			}
			s.emit(hk, 1, slot)
		} else {
			s.pos = i
			if e := s.hashedMember(top, plen, slot); e != nil {
				return e
			}
			i = s.pos
		}
		ev.hkey = ev.hkey[:plen]
		if i < len(src) && src[i] == ',' {
			i++
			continue
		}
		s.pos = i
		done, e := s.separator('}')
		if e != nil {
			return e
		}
		if done {
			return nil
		}
		i = s.pos
	}
}

// hashedMember parses the value, not a string, of a member of a features
// object or of a namespace; ev.hkey holds the prefix (plen bytes) and the
// member's name.
func (s *scanner) hashedMember(top bool, plen, slot int) *Error {
	ev := s.ev
	nameEnd := len(ev.hkey)
	switch c := s.src[s.pos]; c {
	case '[':
		return s.bag(top, plen, nameEnd, slot)
	case '{':
		if !top {
			return &Error{Reason: ReasonWrongType, Detail: s.hashPath(top, plen, nameEnd) + ": got object, want number, string, boolean, null or array of strings (namespaces do not nest)"}
		}
		// The prefix becomes seed ‖ name ‖ 0x00 (it was seed ‖ 0x00 ‖ name).
		ns := ev.hkey[plen:nameEnd]
		nslot, field := s.d.hash.namespace(ns)
		ent := -1
		if len(s.d.hash.ents) > 0 && !s.cand {
			ent = s.d.hash.entityOf(ns)
		}
		n := copy(ev.hkey[8:], ns)
		ev.hkey = append(ev.hkey[:8+n], 0)
		s.field, s.ent = field, ent
		start := s.pos
		e := s.hashedObject(false, nslot)
		s.field, s.ent = 0, -1
		if e == nil && ent >= 0 {
			ev.EntObj[ent] = s.src[start:s.pos:s.pos]
		}
		ev.hkey = append(ev.hkey[:8], 0) // the top level's prefix again
		return e
	case 't':
		if e := s.literal("true"); e != nil {
			return e
		}
		s.emit(ev.hkey, 1, slot)
		return nil
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	v, st := s.number()
	switch {
	case st == numWrongType:
		want := "want number, string, boolean, null or array of strings"
		if top {
			want = "want number, string, boolean, null, array of strings or object"
		}
		return &Error{Reason: ReasonWrongType, Detail: s.hashPath(top, plen, nameEnd) + ": got " + kindOf(s.src[s.pos]) + ", " + want}
	case st != numOK:
		return s.featureError(st, s.hashPath(top, plen, nameEnd))
	case s.d.maxAbs > 0 && (v > s.d.maxAbs || v < -s.d.maxAbs):
		return outOfRange(s.hashPath(top, plen, nameEnd), v, s.d.maxAbs)
	}
	s.emit(ev.hkey, v, slot)
	return nil
}

// bag parses an array of strings, one feature name=element each.
func (s *scanner) bag(top bool, plen, nameEnd, slot int) *Error {
	ev := s.ev
	s.pos++ // '['
	ev.hkey = append(ev.hkey, '=')
	vstart := len(ev.hkey)
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.skipWS()
		if s.pos >= len(s.src) {
			return s.syntax("unterminated array")
		}
		if c := s.src[s.pos]; c != '"' {
			return &Error{Reason: ReasonWrongType, Detail: s.hashPath(top, plen, nameEnd) + "[" + strconv.Itoa(i) + "]: got " + kindOf(c) + ", want string"}
		}
		var e *Error
		if ev.hkey, e = s.appendString(ev.hkey[:vstart]); e != nil {
			return e
		}
		s.emit(ev.hkey, 1, slot)
		done, e := s.separator(']')
		if e != nil {
			return e
		}
		if done {
			return nil
		}
	}
}

// hashPath names the member whose name is ev.hkey[plen:nameEnd], for an
// error's detail: features.name or features.ns.name.
func (s *scanner) hashPath(top bool, plen, nameEnd int) string {
	k := s.ev.hkey
	if top {
		return "features." + string(k[plen:nameEnd])
	}
	return "features." + string(k[8:plen-1]) + "." + string(k[plen:nameEnd])
}

// emit adds the first-order feature whose hashed bytes are hk, with
// value v, of namespace slot and field s.field. Beyond MaxFeatures
// features are only counted (the event will be rejected), so that hostile
// input cannot grow the buffers without bound.
func (s *scanner) emit(hk []byte, v float64, slot int) {
	ev, hs := s.ev, s.d.hash
	ev.hn++
	if hs.max > 0 && ev.hn > hs.max {
		if slot >= 0 {
			ev.hcnt[slot]++
		}
		return
	}
	h := xxhash.Sum64(hk)
	ev.Hash = append(ev.Hash, h)
	ev.Idx = append(ev.Idx, int32(h&hs.mask))
	ev.Val = append(ev.Val, math.Float64frombits(math.Float64bits(v)^h&(1<<63)))
	ev.Field = append(ev.Field, s.field)
	if slot >= 0 {
		ev.hcnt[slot]++
		ev.hx = append(ev.hx, hashed{h: h, v: v, slot: int32(slot)})
	}
}

// push appends the interaction of hash h and unsigned value v to Idx,
// Val, Hash and Field (field 0).
func (s *scanner) push(h uint64, v float64) {
	ev := s.ev
	ev.Hash = append(ev.Hash, h)
	ev.Idx = append(ev.Idx, int32(h&s.d.hash.mask))
	ev.Val = append(ev.Val, math.Float64frombits(math.Float64bits(v)^h&(1<<63)))
	ev.Field = append(ev.Field, 0)
}
