package wire

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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

// features parses a "features" value into ev.Features.
func (s *scanner) features() *Error {
	if s.d.hash != nil {
		return s.hashedFeatures()
	}
	switch c := s.src[s.pos]; c {
	case '[':
		return s.denseFeatures()
	case '{':
		return s.namedFeatures()
	case 'n':
		if e := s.literal("null"); e != nil {
			return e
		}
		return &Error{Reason: ReasonMissingFeatures, Detail: "features is null"}
	default:
		return &Error{Reason: ReasonWrongType, Detail: "features: got " + kindOf(c) + ", want array or object"}
	}
}

// stringValue parses a string or null into ev.buf and returns the unescaped
// bytes and whether a string was present.
func (s *scanner) stringValue(name string) ([]byte, bool, *Error) {
	switch c := s.src[s.pos]; c {
	case '"':
		mark := len(s.ev.buf)
		buf, e := s.appendString(s.ev.buf)
		s.ev.buf = buf
		if e != nil {
			return nil, false, e
		}
		return buf[mark:len(buf):len(buf)], true, nil
	case 'n':
		return nil, false, s.literal("null")
	default:
		return nil, false, &Error{Reason: ReasonWrongType, Detail: name + ": got " + kindOf(c) + ", want string"}
	}
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

func (s *scanner) denseFeatures() *Error {
	s.pos++ // '['
	f := s.ev.Features
	n := 0
	s.skipWS()
	if s.d.rows > 0 && s.pos < len(s.src) && s.src[s.pos] == '[' {
		return s.matrixFeatures()
	}
	if s.pos < len(s.src) && s.src[s.pos] == ']' {
		s.pos++
	} else {
		// The common case inline: a number, a comma, the next number.
		src, i, maxAbs := s.src, s.pos, s.d.maxAbs
		// Short decimals first (shortRun) when the first number is one:
		// an event of another form costs this probe, not a call (calling
		// shortRun for every event made Decode32Random/shortest 3–6%
		// slower).
		if _, end, ok := shortNumber(src, i); ok && src[end] == ',' {
			i, n = shortRun(src, i, f, 0, maxAbs)
		}
		for {
			if i < len(src) && src[i] <= ' ' {
				s.pos = i
				s.skipWS()
				i = s.pos
			}
			v, end, st := fastNumber(src, i)
			if st == numSlow {
				v, st = slowNumber(src[i:end])
			}
			if st != numOK || maxAbs > 0 && (v > maxAbs || v < -maxAbs) {
				s.pos = i
				_, e := s.feature(-1, n) // the error, as feature words it
				return e
			}
			if n < len(f) {
				f[n] = v
			}
			n++
			i = end
			if i < len(src) && src[i] == ',' {
				i++
				continue
			}
			s.pos = i
			done, e := s.separator(']')
			if e != nil {
				return e
			}
			if done {
				break
			}
			i = s.pos
		}
	}
	if n != len(f) {
		return &Error{Reason: ReasonWrongDimension, Detail: fmt.Sprintf("got %d features, want %d", n, len(f))}
	}
	return nil
}

// shortRun reads the numbers of the short form (shortNumber) that a comma
// follows from src[i:], as features written with a fixed number of
// decimals come, into dst from index n (counting those past its end), and
// returns the index after the last one's comma and the new count. It stops
// at the first other number: the last of the array, one beyond ±maxAbs,
// one of another form, which the caller's general loop reads.
func shortRun(src []byte, i int, dst []float64, n int, maxAbs float64) (int, int) {
	for {
		v, end, ok := shortNumber(src, i)
		if !ok || src[end] != ',' || maxAbs > 0 && (v > maxAbs || v < -maxAbs) {
			return i, n
		}
		if n < len(dst) {
			dst[n] = v
		}
		n++
		i = end + 1
	}
}

// feature parses the number of features[i] (row < 0) or features[row][i]
// and checks it against the bound.
func (s *scanner) feature(row, i int) (float64, *Error) {
	v, st := s.number()
	if st == numOK && !(s.d.maxAbs > 0 && (v > s.d.maxAbs || v < -s.d.maxAbs)) {
		return v, nil
	}
	where := "features[" + strconv.Itoa(i) + "]" // built only for an error
	if row >= 0 {
		where = "features[" + strconv.Itoa(row) + "][" + strconv.Itoa(i) + "]"
	}
	if st != numOK {
		return 0, s.featureError(st, where)
	}
	return 0, outOfRange(where, v, s.d.maxAbs)
}

// matrixFeatures parses the features as nested arrays, the outer '[' read:
// rows arrays of cols numbers, row-major into ev.Features.
func (s *scanner) matrixFeatures() *Error {
	f := s.ev.Features
	rows, cols := s.d.rows, len(f)/s.d.rows
	n, r := 0, 0            // numbers and rows read
	badRow, badLen := -1, 0 // the first row of another length
	for {
		s.skipWS()
		if s.pos >= len(s.src) {
			return s.syntax("unterminated array")
		}
		if s.src[s.pos] != '[' {
			return &Error{Reason: ReasonWrongType, Detail: "features[" + strconv.Itoa(r) + "]: got " + kindOf(s.src[s.pos]) + ", want an array (a row of the matrix)"}
		}
		s.pos++
		c := 0
		s.skipWS()
		if s.pos < len(s.src) && s.src[s.pos] == ']' {
			s.pos++
		} else {
			var row []float64 // where row r goes, if it is one of the matrix's
			if r < rows {
				row = f[r*cols : (r+1)*cols]
			}
			src, i, maxAbs := s.src, s.pos, s.d.maxAbs
			i, c = shortRun(src, i, row, 0, maxAbs)
			n += c
			for { // as in denseFeatures
				if i < len(src) && src[i] <= ' ' {
					s.pos = i
					s.skipWS()
					i = s.pos
				}
				v, end, st := fastNumber(src, i)
				if st == numSlow {
					v, st = slowNumber(src[i:end])
				}
				if st != numOK || maxAbs > 0 && (v > maxAbs || v < -maxAbs) {
					s.pos = i
					_, e := s.feature(r, c)
					return e
				}
				if c < len(row) {
					row[c] = v
				}
				c++
				n++
				i = end
				if i < len(src) && src[i] == ',' {
					i++
					continue
				}
				s.pos = i
				done, e := s.separator(']')
				if e != nil {
					return e
				}
				if done {
					break
				}
				i = s.pos
			}
		}
		if c != cols && badRow < 0 {
			badRow, badLen = r, c
		}
		r++
		done, e := s.separator(']')
		if e != nil {
			return e
		}
		if done {
			break
		}
	}
	if r != rows || badRow >= 0 {
		detail := fmt.Sprintf("got a matrix of %d rows, want %d×%d", r, rows, cols)
		if r == rows {
			detail = fmt.Sprintf("row %d has %d numbers, want %d×%d", badRow, badLen, rows, cols)
		}
		return &Error{Reason: ReasonWrongDimension, Detail: detail}
	}
	return nil
}

func (s *scanner) namedFeatures() *Error {
	d, ev := s.d, s.ev
	if d.index == nil {
		return &Error{Reason: ReasonWrongType, Detail: "features: got object, want array (no feature names configured)"}
	}
	if cap(ev.seen) < d.dim {
		ev.seen = make([]bool, d.dim)
	} else {
		ev.seen = ev.seen[:d.dim]
		clear(ev.seen)
	}
	s.pos++ // '{'
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
	} else {
		for {
			s.skipWS()
			if s.pos >= len(s.src) || s.src[s.pos] != '"' {
				return s.syntax("want object key")
			}
			mark := len(ev.buf)
			key, e := s.key()
			if e != nil {
				return e
			}
			i, ok := d.index[string(key)]
			if !ok {
				return &Error{Reason: ReasonWrongDimension, Detail: fmt.Sprintf("features: unknown feature %s", quoteShort(key))}
			}
			ev.buf = ev.buf[:mark]
			if e := s.colon(); e != nil {
				return e
			}
			v, st := s.number()
			if st != numOK {
				return s.featureError(st, "features."+d.names[i])
			}
			if m := d.maxAbs; m > 0 && (v > m || v < -m) {
				return outOfRange("features."+d.names[i], v, m)
			}
			ev.Features[i] = v // a repeated name: the last one wins, as in encoding/json
			ev.seen[i] = true
			done, e := s.separator('}')
			if e != nil {
				return e
			}
			if done {
				break
			}
		}
	}
	missing, first := 0, -1
	for i, ok := range ev.seen {
		if !ok {
			if first < 0 {
				first = i
			}
			missing++
		}
	}
	switch {
	case missing == 1:
		return &Error{Reason: ReasonMissingFeatures, Detail: fmt.Sprintf("features: missing %q", d.names[first])}
	case missing > 1:
		return &Error{Reason: ReasonMissingFeatures, Detail: fmt.Sprintf("features: missing %q and %d more", d.names[first], missing-1)}
	}
	return nil
}

func outOfRange(where string, v, max float64) *Error {
	return &Error{Reason: ReasonOutOfRange, Detail: fmt.Sprintf("%s: %g is beyond ±%g", where, v, max)}
}

func (s *scanner) featureError(st numStatus, where string) *Error {
	switch st {
	case numNonFinite:
		return &Error{Reason: ReasonNonFinite, Detail: where + ": not finite"}
	case numWrongType:
		c := byte(0)
		if s.pos < len(s.src) {
			c = s.src[s.pos]
		}
		return &Error{Reason: ReasonWrongType, Detail: where + ": not a number (got " + kindOf(c) + ")"}
	}
	return s.syntax("invalid number")
}

// number parses the JSON number at s.pos (see parseNumber) and moves past
// it; on numWrongType s.pos is left at the offending value.
func (s *scanner) number() (float64, numStatus) {
	v, end, st := fastNumber(s.src, s.pos)
	if st == numSlow {
		v, st = slowNumber(s.src[s.pos:end])
	}
	s.pos = end
	return v, st
}

// scanNumber checks the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? from src[i] and returns the
// index after it.
func scanNumber(src []byte, i int) (int, bool) {
	if i < len(src) && src[i] == '-' {
		i++
	}
	switch {
	case i >= len(src):
		return i, false
	case src[i] == '0':
		i++
	case src[i] >= '1' && src[i] <= '9':
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || !isDigit(src[i]) {
			return i, false
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			return i, false
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	return i, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// key scans the object key at s.pos (a '"'). Without escapes it returns a
// slice of src; otherwise the key is unescaped onto the end of ev.buf, which
// the caller truncates again. It also consumes the key.
func (s *scanner) key() ([]byte, *Error) {
	src := s.src
	if i := plainEnd(src, s.pos+1); i < len(src) && src[i] == '"' {
		k := src[s.pos+1 : i]
		s.pos = i + 1
		return k, nil
	}
	mark := len(s.ev.buf)
	buf, e := s.appendString(s.ev.buf)
	s.ev.buf = buf
	return buf[mark:], e
}

func (s *scanner) colon() *Error {
	s.skipWS()
	if s.pos >= len(s.src) || s.src[s.pos] != ':' {
		return s.syntax("want ':' after object key")
	}
	s.pos++
	s.skipWS()
	return nil
}

// appendString unescapes the JSON string at s.pos (a '"') onto dst and moves
// past its closing quote. Invalid UTF-8 is kept as is; a lone surrogate
// escape becomes U+FFFD, as in encoding/json.
func (s *scanner) appendString(dst []byte) ([]byte, *Error) {
	src := s.src
	i := s.pos + 1
	for {
		var j int
		dst, j = appendPlain(dst, src, i)
		if j >= len(src) {
			s.pos = j
			return dst, s.syntax("unterminated string")
		}
		switch c := src[j]; {
		case c == '"':
			s.pos = j + 1
			return dst, nil
		case c < 0x20:
			s.pos = j
			return dst, s.syntax("control character in string")
		}
		if j+1 >= len(src) {
			s.pos = j
			return dst, s.syntax("unterminated string")
		}
		i = j + 2
		switch src[j+1] {
		case '"', '\\', '/':
			dst = append(dst, src[j+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(src, j+2)
			if !ok {
				s.pos = j
				return dst, s.syntax(`invalid \u escape`)
			}
			i = j + 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(src) && src[i] == '\\' && src[i+1] == 'u' {
					r2, _ = hex4(src, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			s.pos = j
			return dst, s.syntax("invalid escape in string")
		}
	}
}

// hex4 decodes the four hex digits at src[i:].
func hex4(src []byte, i int) (rune, bool) {
	if i+4 > len(src) {
		return -1, false
	}
	var r rune
	for _, c := range src[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipString moves past the JSON string at s.pos, checking its syntax.
func (s *scanner) skipString() *Error {
	src := s.src
	i := s.pos + 1
	for i < len(src) {
		i = plainEnd(src, i)
		if i >= len(src) {
			break
		}
		switch c := src[i]; {
		case c == '"':
			s.pos = i + 1
			return nil
		case c == '\\':
			if i+1 >= len(src) {
				s.pos = i
				return s.syntax("unterminated string")
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(src, i+2); !ok {
					s.pos = i
					return s.syntax(`invalid \u escape`)
				}
				i += 6
			default:
				s.pos = i
				return s.syntax("invalid escape in string")
			}
		case c < 0x20:
			s.pos = i
			return s.syntax("control character in string")
		default:
			i++
		}
	}
	s.pos = len(src)
	return s.syntax("unterminated string")
}

// skipValue moves past any JSON value at s.pos, checking its syntax.
func (s *scanner) skipValue(depth int) *Error {
	if s.pos >= len(s.src) {
		return s.syntax("want value")
	}
	switch c := s.src[s.pos]; c {
	case '"':
		return s.skipString()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	case '{', '[':
		if depth >= maxDepth {
			return s.syntax("nesting too deep")
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.pos++
		s.skipWS()
		if s.pos < len(s.src) && s.src[s.pos] == end {
			s.pos++
			return nil
		}
		for {
			s.skipWS()
			if c == '{' {
				if s.pos >= len(s.src) || s.src[s.pos] != '"' {
					return s.syntax("want object key")
				}
				if e := s.skipString(); e != nil {
					return e
				}
				if e := s.colon(); e != nil {
					return e
				}
			}
			if e := s.skipValue(depth + 1); e != nil {
				return e
			}
			s.skipWS()
			if s.pos >= len(s.src) {
				return s.syntax("unterminated " + kindOf(c))
			}
			d := s.src[s.pos]
			if d == end {
				s.pos++
				return nil
			}
			if d != ',' {
				return s.syntax("want ',' or '" + string(end) + "'")
			}
			s.pos++
		}
	default:
		end, ok := scanNumber(s.src, s.pos)
		if !ok {
			s.pos = end
			return s.syntax("invalid value")
		}
		s.pos = end
		return nil
	}
}

func (s *scanner) literal(lit string) *Error {
	if len(s.src)-s.pos < len(lit) || string(s.src[s.pos:s.pos+len(lit)]) != lit {
		return s.syntax("invalid literal, want " + lit)
	}
	s.pos += len(lit)
	return nil
}

func (s *scanner) skipWS() { s.pos = skipSpace(s.src, s.pos) }

// skipSpace returns the index of the first byte from src[i] that is not
// JSON whitespace.
func skipSpace(src []byte, i int) int {
	for i < len(src) && src[i] <= ' ' && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

func (s *scanner) syntax(msg string) *Error {
	return &Error{Reason: ReasonNotJSON, Detail: fmt.Sprintf("offset %d: %s", s.pos, msg)}
}

// kindOf names the JSON type of a value starting with c.
func kindOf(c byte) string {
	switch {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || isDigit(c):
		return "number"
	}
	return "invalid value"
}

// knownFields names the top-level members d reads, for the error of an
// unknown one (WithStrict).
func (d *Decoder) knownFields() string {
	if d.maxCands > 0 {
		return "a ranking request has id, key, ts, k, candidates and, with hashed features, features"
	}
	return "an event has id, key, ts, features and label"
}

// quoteShort quotes b for an error detail, cut to a readable length.
func quoteShort(b []byte) string {
	const max = 64
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "…"
	}
	return strconv.Quote(string(b))
}

// separator consumes what follows an object member or an array element:
// ',' (more follow) or the closing byte (done).
func (s *scanner) separator(closing byte) (done bool, e *Error) {
	s.skipWS()
	if s.pos >= len(s.src) {
		if closing == '}' {
			return false, s.syntax("unterminated object")
		}
		return false, s.syntax("unterminated array")
	}
	c := s.src[s.pos]
	s.pos++
	switch c {
	case closing:
		return true, nil
	case ',':
		return false, nil
	}
	s.pos--
	if closing == '}' {
		return false, s.syntax("want ',' or '}' after object member")
	}
	return false, s.syntax("want ',' or ']' after array element")
}
