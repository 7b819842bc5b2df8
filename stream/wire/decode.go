package wire

import (
	"fmt"
)

// maxDepth bounds the nesting of skipped values, like encoding/json's limit,
// so that hostile input cannot make the scanner recurse without bound.
const maxDepth = 10000

// Event is one decoded input event. The zero value is ready to use; pass the
// same Event to [Decoder.Decode] again and again so that its buffers are
// reused and decoding does not allocate.
//
// ID, Key and TS alias memory owned by the Event (never the source bytes):
// they stay valid until the next Decode into this Event. Features is
// overwritten in place by the next Decode.
type Event struct {
	ID       []byte    // unescaped "id"; nil when absent or null
	HasID    bool      // "id" was present as a string (possibly empty)
	Key      []byte    // unescaped "key"; informational, the Kafka message key is authoritative
	TS       []byte    // unescaped "ts", not parsed
	Features []float64 // len == dim after a successful Decode; empty with hashing
	Label    float64   // 1 for true, 0 for false; only meaningful when HasLabel
	HasLabel bool      // false when "label" is absent or null
	// HasFeatures is false only for a label-only event (an "id" and a
	// "label", no "features"), accepted when the Decoder allows delayed
	// labels; Features is then all zeros.
	HasFeatures bool

	// A ranking request (a "candidates" array, accepted by a Decoder
	// WithRequests): IsRequest is true, Features is unused, and the
	// candidates are Cands, candidate i's features CandidateFeatures(i)
	// (with hashing CandidateHashed(i): Idx, Val, Hash and Field then hold
	// every candidate's features, one after the other).
	// K is the number of items to rank (the request's "k", at most
	// len(Cands); len(Cands) when absent).
	IsRequest bool
	Cands     []Candidate
	K         int
	// Item is a label-only event's "item" (a label for one item of a
	// ranking request); nil when absent. Only read WithRequests.
	Item []byte

	// A request's logged decision (a Decoder WithLogged; logged.go): the
	// item another run put first and its propensity.
	Logged     []byte
	LoggedProp float64
	HasLogged  bool

	// The entities of a Decoder WithEntities, by index: the id the event
	// gives each (nil: none), the id feature's hash, and its namespace's
	// object as the message has it (nil: absent). See WithEntities.
	Ent     [][]byte
	EntHash []uint64
	EntObj  [][]byte

	// The hashed features of a Decoder WithHashing: feature k has index
	// Idx[k] in [0, 2^Bits) and value Val[k] (signed); indices may repeat.
	// Empty without hashing. Overwritten by the next Decode.
	Idx []int32
	Val []float64
	// Hash holds feature k's full 64-bit hash (Idx[k] is its low bits),
	// for estimating collisions.
	Hash []uint64
	// Field holds feature k's field: 1 + the index of its namespace in
	// HashConfig.Namespaces, 0 for the top level, a namespace not listed
	// and an interaction (see WithHashing).
	Field []uint8

	buf   []byte    // backing store for ID, Key, TS, items and escaped object keys
	seen  []bool    // named features seen so far
	candX []float64 // the candidates' features, dim each
	items []int32   // the table of repeatedItem
	hkey  []byte    // the bytes hashed for the current feature
	hx    []hashed  // first-order features of the namespaces in interactions
	hcnt  []int     // features per namespace of hashing.ns
	hn    int       // first-order hashed features, counted also beyond the limit
	cf    []hashed  // hashing, requests: first-order features of the candidates, then of the request (hashreq.go)
	cp    []hashed  // hashing, requests: their features in interactions
}

// Candidate is one item of a ranking request.
type Candidate struct {
	Item   []byte // unescaped "item"; aliases memory owned by the Event
	IDOnly bool   // it has no "features" (a Decoder WithIDOnly): the request's features only

	h candHashed // hashing: its features (hashreq.go)
}

// CandidateFeatures returns the features of candidate i of a request (a
// slice of memory owned by the Event, valid until the next Decode).
func (ev *Event) CandidateFeatures(i int) []float64 {
	d := len(ev.Features)
	return ev.candX[i*d : (i+1)*d : (i+1)*d]
}

func (ev *Event) reset(dim int) {
	ev.ID, ev.HasID, ev.Key, ev.TS = nil, false, nil, nil
	ev.Label, ev.HasLabel = 0, false
	ev.HasFeatures = true
	ev.IsRequest, ev.Cands, ev.K, ev.Item = false, ev.Cands[:0], 0, nil
	ev.Logged, ev.LoggedProp, ev.HasLogged = nil, 0, false
	ev.candX = ev.candX[:0]
	ev.Idx, ev.Val, ev.Hash, ev.Field = ev.Idx[:0], ev.Val[:0], ev.Hash[:0], ev.Field[:0]
	ev.Ent, ev.EntHash, ev.EntObj = ev.Ent[:0], ev.EntHash[:0], ev.EntObj[:0]
	ev.buf = ev.buf[:0]
	if cap(ev.Features) < dim {
		ev.Features = make([]float64, dim)
	} else {
		ev.Features = ev.Features[:dim]
		clear(ev.Features)
	}
}

// Decoder decodes and validates input events. It is immutable after
// [NewDecoder] and safe for concurrent use; each goroutine needs its own
// [Event].
type Decoder struct {
	dim      int
	names    []string
	index    map[string]int // nil: dense arrays only
	maxBytes int
	maxAbs   float64 // features beyond ±maxAbs are out_of_range (0: no bound)
	rows     int     // > 0: features may also be a rows × dim/rows matrix (nested arrays)

	labelOnly bool // accept label-only events (delayed labels)
	maxCands  int  // > 0: ranking requests with at most maxCands candidates
	strict    bool // unknown members are bad_request (WithStrict), not skipped
	idOnly    bool // candidates may come without features (WithIDOnly)
	logged    bool // requests may carry a logged decision (WithLogged)

	hash *hashing // non-nil: features are hashed (WithHashing); dim is then 2^Bits
}

// WithRequests returns a copy of d that also accepts ranking requests —
// {"id": …, "key": …, "candidates": [{"item": …, "features": …}, …], "k": …}
// with at most max candidates, each with features in any form d accepts —
// reporting them with Event.IsRequest, and the "item" of label-only events
// (a label for one item of a request). A malformed request is bad_request
// (or the reason of a candidate's features, the detail naming the
// candidate). max must be ≥ 1.
func (d *Decoder) WithRequests(max int) *Decoder {
	if max < 1 {
		panic(fmt.Sprintf("wire: WithRequests(%d)", max))
	}
	c := *d
	c.maxCands = max
	return &c
}

// WithStrict returns a copy of d that refuses an unknown member, at the
// top level or in a candidate, as bad_request naming it by its path
// (`unknown field "candidates[2].score"`), where d otherwise skips it as
// the wire contract's additive rule asks of events: for the requests of
// POST /v1/rank, which a client sends and reads the answer of at once,
// so that a misspelt field is an error, not a silent default. A document
// without candidates is then bad_request too (`candidates: missing`), not
// an event's error: such a body can only be a ranking request.
func (d *Decoder) WithStrict() *Decoder {
	c := *d
	c.strict = true
	return &c
}

// WithMaxAbs returns a copy of d that rejects, as out_of_range, an event
// with a feature whose magnitude exceeds max (max ≤ 0: no bound). Finite
// but huge values (1.797e308) pass the non-finite check yet overflow the
// models' arithmetic (a feature map's projection, a squared norm): this
// keeps them from any model.
func (d *Decoder) WithMaxAbs(max float64) *Decoder {
	c := *d
	c.maxAbs = max
	return &c
}

// WithShape returns a copy of d that also accepts the features as a matrix
// of rows arrays of dim/rows numbers each (row-major: row i is features
// i·cols … (i+1)·cols−1), besides the flat array of dim numbers. A matrix
// of another shape is wrong_dimension, with both shapes in the detail.
// rows must divide the dimension (it panics otherwise: a programmer
// error, the configuration checks it).
func (d *Decoder) WithShape(rows int) *Decoder {
	if rows < 1 || d.dim%rows != 0 {
		panic(fmt.Sprintf("wire: WithShape(%d) for dimension %d", rows, d.dim))
	}
	c := *d
	c.rows = rows
	return &c
}

// WithLabelOnly returns a copy of d that also accepts label-only events —
// {"id": …, "label": …} without features, the late label of an earlier
// impression — reporting them with Event.HasFeatures false. Without an id
// or a label, a missing features field is still missing_features.
func (d *Decoder) WithLabelOnly() *Decoder {
	c := *d
	c.labelOnly = true
	return &c
}

// NewDecoder returns a Decoder for events with dim features.
//
// names, when non-nil, also allows the object form of "features", mapping
// name i to position i; it must then hold exactly dim distinct names. A nil
// names accepts the dense array form only. maxBytes limits the size of a
// message value; 0 means no limit.
//
// It returns an error if dim < 1, maxBytes < 0, or names is non-nil and
// not dim distinct, non-empty names.
func NewDecoder(dim int, names []string, maxBytes int) (*Decoder, error) {
	if dim < 1 {
		return nil, fmt.Errorf("wire: NewDecoder: dimension %d < 1", dim)
	}
	if maxBytes < 0 {
		return nil, fmt.Errorf("wire: NewDecoder: maximum message size %d < 0", maxBytes)
	}
	d := &Decoder{dim: dim, maxBytes: maxBytes}
	if names != nil {
		if len(names) != dim {
			return nil, fmt.Errorf("wire: NewDecoder: %d feature names for dimension %d", len(names), dim)
		}
		d.names = append([]string(nil), names...)
		d.index = make(map[string]int, len(names))
		for i, n := range names {
			if n == "" {
				return nil, fmt.Errorf("wire: NewDecoder: feature name %d is empty", i)
			}
			if _, dup := d.index[n]; dup {
				return nil, fmt.Errorf("wire: NewDecoder: duplicate feature name %q", n)
			}
			d.index[n] = i
		}
	}
	return d, nil
}

// Dim returns the number of features of every decoded event (with
// hashing, the size of the hashed space, 2^Bits).
func (d *Decoder) Dim() int { return d.dim }

// Decode parses one message value into ev, resetting it first and reusing its
// buffers. A rejection is returned as an *[Error]; ev's contents are then
// unspecified. Once ev's buffers have grown, an accepted event costs no
// allocation.
//
// A value that is not a syntactically valid JSON object is always reported as
// [ReasonNotJSON], even if it also has a semantic defect earlier on; among
// semantic defects the first one in the input wins, and a missing "features"
// is reported last.
func (d *Decoder) Decode(src []byte, ev *Event) error {
	if d.hash != nil {
		ev.reset(0)
	} else {
		ev.reset(d.dim)
	}
	if d.maxBytes > 0 && len(src) > d.maxBytes {
		return &Error{Reason: ReasonTooLarge, Detail: fmt.Sprintf("%d bytes, limit %d", len(src), d.maxBytes)}
	}
	s := scanner{src: src, d: d, ev: ev, ent: -1}
	if e := s.document(); e != nil {
		return e
	}
	return nil
}

// scanner holds the state of one Decode call.
type scanner struct {
	src   []byte
	pos   int
	d     *Decoder
	ev    *Event
	field uint8 // hashing: the field of the namespace being read
	ent   int   // hashing: the entity of the namespace being read (-1: none)
	cand  bool  // reading a candidate (its features name no entity)
}

// field identifies a top-level member.
type field int

const (
	fieldUnknown field = iota
	fieldID
	fieldKey
	fieldTS
	fieldFeatures
	fieldLabel
	fieldCandidates
	fieldK
	fieldItem
	fieldLogged
)

func (s *scanner) document() *Error {
	s.skipWS()
	if s.pos >= len(s.src) {
		return s.syntax("empty input")
	}
	if c := s.src[s.pos]; c != '{' {
		// Say what was found, not what its first byte suggests ("nope"
		// is not null).
		return s.syntax("want a JSON object, found " + quoteShort(s.src[s.pos:]))
	}
	s.pos++
	var sem *Error // first semantic error; the rest is only checked for syntax
	haveFeatures := false
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
	} else {
		// The position is kept in i, and in s.pos only around the calls
		// that read it (as in hashedObject).
		src, i := s.src, s.pos
		for {
			i = skipSpace(src, i)
			if i >= len(src) || src[i] != '"' {
				s.pos = i
				return s.syntax("want object key")
			}
			mark := len(s.ev.buf)
			var key []byte
			if j := plainEnd(src, i+1); j < len(src) && src[j] == '"' {
				key, i = src[i+1:j], j+1
			} else {
				s.pos = i
				var e *Error
				if key, e = s.key(); e != nil {
					return e
				}
				i = s.pos
			}
			f := fieldUnknown
			switch string(key) {
			case "id":
				f = fieldID
			case "key":
				f = fieldKey
			case "ts":
				f = fieldTS
			case "features":
				f = fieldFeatures
			case "label":
				f = fieldLabel
			case "candidates":
				f = s.requestField(fieldCandidates)
			case "k":
				f = s.requestField(fieldK)
			case "item":
				f = s.requestField(fieldItem)
			case "logged":
				f = s.loggedField()
			}
			if f == fieldUnknown && s.d.strict && sem == nil {
				sem = &Error{Reason: ReasonBadRequest, Detail: "unknown field " + quoteShort(key) + " (" + s.d.knownFields() + ")"}
			}
			s.ev.buf = s.ev.buf[:mark] // drop an unescaped key
			if i = skipSpace(src, i); i >= len(src) || src[i] != ':' {
				s.pos = i
				return s.syntax("want ':' after object key")
			}
			i = skipSpace(src, i+1)
			s.pos = i
			var e *Error
			if sem != nil || f == fieldUnknown {
				e = s.skipValue(0)
			} else {
				e = s.member(f)
				if f == fieldFeatures {
					haveFeatures = true
				}
			}
			if e != nil {
				if e.Reason == ReasonNotJSON {
					return e
				}
				sem = e
				s.pos = i
				if e := s.skipValue(0); e != nil {
					return e
				}
			}
			if i = skipSpace(src, s.pos); i < len(src) && src[i] == ',' {
				i++
				continue
			}
			if i < len(src) && src[i] == '}' {
				s.pos = i + 1
				break
			}
			s.pos = i
			_, e = s.separator('}') // the error, as separator words it
			return e
		}
	}
	s.skipWS()
	if s.pos < len(s.src) {
		return s.syntax("trailing data after object")
	}
	if sem != nil {
		return sem
	}
	if s.ev.IsRequest {
		return s.request(haveFeatures)
	}
	if s.d.strict { // POST /v1/rank's body: a request or nothing
		return &Error{Reason: ReasonBadRequest, Detail: `candidates: missing: not a ranking request without them, [{"item": …, "features": …}, …]`}
	}
	if s.ev.K != 0 {
		return &Error{Reason: ReasonBadRequest, Detail: "k without candidates"}
	}
	if s.ev.HasLogged {
		return &Error{Reason: ReasonBadRequest, Detail: "logged without candidates"}
	}
	if !haveFeatures {
		if s.d.labelOnly && s.ev.HasID && s.ev.HasLabel {
			s.ev.HasFeatures = false
			return nil
		}
		return &Error{Reason: ReasonMissingFeatures, Detail: "no features field"}
	}
	return nil
}

// member parses the value of a known top-level field; s.pos is at the value.
func (s *scanner) member(f field) *Error {
	if s.pos >= len(s.src) {
		return s.syntax("want value")
	}
	ev := s.ev
	switch f {
	case fieldID:
		v, ok, e := s.stringValue("id")
		ev.ID, ev.HasID = v, ok
		return e
	case fieldKey:
		v, _, e := s.stringValue("key")
		ev.Key = v
		return e
	case fieldTS:
		v, _, e := s.stringValue("ts")
		ev.TS = v
		return e
	case fieldLabel:
		return s.label()
	case fieldCandidates:
		return s.candidates()
	case fieldK:
		return s.k()
	case fieldItem:
		v, _, e := s.stringValue("item")
		ev.Item = v
		return e
	case fieldFeatures:
		return s.features()
	case fieldLogged:
		return s.loggedDecision()
	}
	panic("unreachable")
}

func (s *scanner) label() *Error {
	ev := s.ev
	switch c := s.src[s.pos]; c {
	case 't':
		ev.Label, ev.HasLabel = 1, true
		return s.literal("true")
	case 'f':
		ev.Label, ev.HasLabel = 0, true
		return s.literal("false")
	case 'n': // unlabelled, also when an earlier "label" said otherwise
		ev.Label, ev.HasLabel = 0, false
		return s.literal("null")
	}
	v, st := s.number()
	switch st {
	case numOK:
		ev.Label, ev.HasLabel = v, true
		return nil
	case numNonFinite:
		return &Error{Reason: ReasonNonFinite, Detail: "label: not finite"}
	case numWrongType:
		return &Error{Reason: ReasonWrongType, Detail: "label: got " + kindOf(s.src[s.pos]) + ", want number, boolean or null"}
	}
	return s.syntax("invalid number")
}

// knownFields names the top-level members d reads, for the error of an
// unknown one (WithStrict).
func (d *Decoder) knownFields() string {
	if d.maxCands > 0 {
		return "a ranking request has id, key, ts, k, candidates and, with hashed features, features"
	}
	return "an event has id, key, ts, features and label"
}
