package wire

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// requestField returns f when the Decoder accepts ranking requests, and
// fieldUnknown (the member is skipped) otherwise.
func (s *scanner) requestField(f field) field {
	if s.d.maxCands > 0 {
		return f
	}
	return fieldUnknown
}

// candidates parses the "candidates" array of a ranking request.
func (s *scanner) candidates() *Error {
	ev := s.ev
	ev.IsRequest = true
	ev.Cands, ev.candX = ev.Cands[:0], ev.candX[:0]
	ev.cf, ev.cp = ev.cf[:0], ev.cp[:0] // hashing: the candidates' features (hashreq.go)
	if c := s.src[s.pos]; c != '[' {
		return &Error{Reason: ReasonWrongType, Detail: "candidates: got " + kindOf(c) + ", want array"}
	}
	s.pos++
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == ']' {
		s.pos++
		return &Error{Reason: ReasonBadRequest, Detail: "candidates: empty"}
	}
	for {
		s.skipWS()
		if s.pos >= len(s.src) {
			return s.syntax("unterminated array")
		}
		i := len(ev.Cands)
		if i == s.d.maxCands {
			return &Error{Reason: ReasonBadRequest, Detail: fmt.Sprintf("candidates: more than %d", s.d.maxCands)}
		}
		if e := s.candidate(i); e != nil {
			return e
		}
		done, e := s.separator(']')
		if e != nil {
			return e
		}
		if done {
			break
		}
	}
	// Items name the request's rows for the labels that come back: two
	// alike could not be told apart.
	if i, j := repeatedItem(ev); i >= 0 {
		return &Error{Reason: ReasonBadRequest, Detail: fmt.Sprintf("candidates[%d]: item %s repeats candidates[%d]", i, quoteShort(ev.Cands[i].Item), j)}
	}
	return nil
}

// repeatedItem returns the first candidate i whose item repeats that of
// an earlier candidate j, or −1, −1: the items go into an open-addressing
// table of candidate numbers (ev.items, at most half full), by their
// XXH64 hash, in one pass.
func repeatedItem(ev *Event) (int, int) {
	size := 16
	for size < 2*len(ev.Cands) {
		size *= 2
	}
	if cap(ev.items) < size {
		ev.items = make([]int32, size)
	}
	table := ev.items[:size]
	clear(table) // 0: empty, else candidate number + 1
	mask := uint64(size - 1)
	for i := range ev.Cands {
		item := ev.Cands[i].Item
		for h := xxhash.Sum64(item); ; h++ {
			k := &table[h&mask]
			if *k == 0 {
				*k = int32(i + 1)
				break
			}
			if j := int(*k - 1); bytes.Equal(ev.Cands[j].Item, item) {
				return i, j
			}
		}
	}
	return -1, -1
}

// candidate parses candidate i, an object with an "item" and "features".
func (s *scanner) candidate(i int) *Error {
	ev := s.ev
	if c := s.src[s.pos]; c != '{' {
		return &Error{Reason: ReasonWrongType, Detail: "candidates[" + strconv.Itoa(i) + "]: got " + kindOf(c) + ", want object"}
	}
	s.pos++
	dim := s.d.dim
	if s.d.hash != nil {
		dim = 0 // hashed features go to ev.cf and ev.cp (hashreq.go)
	}
	off := len(ev.candX)
	if cap(ev.candX)-off < dim {
		grown := make([]float64, off, 2*cap(ev.candX)+dim)
		copy(grown, ev.candX)
		ev.candX = grown
	}
	ev.candX = ev.candX[:off+dim]
	clear(ev.candX[off:])
	top := ev.Features
	ev.Features = ev.candX[off : off+dim : off+dim]
	defer func() { ev.Features = top }()
	var item []byte
	var hf candHashed
	haveItem, haveFeatures := false, false
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
	} else {
		src, p := s.src, s.pos // as in document
		for {
			p = skipSpace(src, p)
			if p >= len(src) || src[p] != '"' {
				s.pos = p
				return s.syntax("want object key")
			}
			mark := len(ev.buf)
			var key []byte
			var e *Error
			if j := plainEnd(src, p+1); j < len(src) && src[j] == '"' {
				key, p = src[p+1:j], j+1
			} else {
				s.pos = p
				if key, e = s.key(); e != nil {
					return e
				}
				p = s.pos
			}
			name := string(key) // the compiler does not allocate for a switch
			ev.buf = ev.buf[:mark]
			if p = skipSpace(src, p); p >= len(src) || src[p] != ':' {
				s.pos = p
				return s.syntax("want ':' after object key")
			}
			if p = skipSpace(src, p+1); p >= len(src) {
				s.pos = p
				return s.syntax("want value")
			}
			s.pos = p
			switch name {
			case "item":
				item, haveItem, e = s.stringValue("item")
			case "features":
				haveFeatures = true
				if s.d.hash != nil {
					hf, e = s.hashedCandidate()
				} else {
					e = s.features()
				}
			default:
				if s.d.strict {
					return &Error{Reason: ReasonBadRequest, Detail: "unknown field " + strconv.Quote("candidates["+strconv.Itoa(i)+"]."+string(key)) + " (a candidate has item and features)"}
				}
				e = s.skipValue(0)
			}
			if e != nil {
				if e.Reason != ReasonNotJSON {
					e = &Error{Reason: e.Reason, Detail: candidatePath(i, e.Detail)}
				}
				return e
			}
			if p = skipSpace(src, s.pos); p < len(src) && src[p] == ',' {
				p++
				continue
			}
			if p < len(src) && src[p] == '}' {
				s.pos = p + 1
				break
			}
			s.pos = p
			_, e = s.separator('}') // the error, as separator words it
			return e
		}
	}
	switch {
	case !haveItem:
		return &Error{Reason: ReasonBadRequest, Detail: "candidates[" + strconv.Itoa(i) + "]: no item"}
	case !haveFeatures && s.d.idOnly && s.d.hash != nil:
		// An item named by its id: the request's features only (hashedRequest), the
		// caller adds the item's.
		hf = candHashed{f0: len(ev.cf), f1: len(ev.cf), p0: len(ev.cp), p1: len(ev.cp)}
		ev.Cands = append(ev.Cands, Candidate{Item: item, IDOnly: true, h: hf})
		return nil
	case !haveFeatures:
		return &Error{Reason: ReasonMissingFeatures, Detail: "candidates[" + strconv.Itoa(i) + "]: no features"}
	}
	ev.Cands = append(ev.Cands, Candidate{Item: item, h: hf})
	return nil
}

// candidatePath puts candidate i's path before detail, the error of its
// member: "candidates[3].features[1]: …" for a detail that starts with
// the member's name, "candidates[3]: got 2 features, want 4" for the others.
func candidatePath(i int, detail string) string {
	p := "candidates[" + strconv.Itoa(i) + "]"
	if strings.HasPrefix(detail, "features") || strings.HasPrefix(detail, "item") {
		return p + "." + detail
	}
	return p + ": " + detail
}

// k parses a request's "k": an integer ≥ 1.
func (s *scanner) k() *Error {
	c := s.src[s.pos]
	if c == 'n' {
		return s.literal("null")
	}
	v, st := s.number()
	switch st {
	case numOK:
		if v < 1 || v != float64(int64(v)) || v > 1<<31 {
			return &Error{Reason: ReasonBadRequest, Detail: fmt.Sprintf("k: %g is not a whole number ≥ 1", v)}
		}
		s.ev.K = int(v)
		return nil
	case numNonFinite:
		return &Error{Reason: ReasonNonFinite, Detail: "k: not finite"}
	case numWrongType:
		return &Error{Reason: ReasonWrongType, Detail: "k: got " + kindOf(c) + ", want number"}
	}
	return s.syntax("invalid number")
}

// request checks a decoded ranking request as a whole.
func (s *scanner) request(haveFeatures bool) *Error {
	ev := s.ev
	switch {
	case haveFeatures && s.d.hash == nil:
		return &Error{Reason: ReasonBadRequest, Detail: "a ranking request carries features in its candidates, not in features"}
	case ev.HasLabel:
		return &Error{Reason: ReasonBadRequest, Detail: "a ranking request has no label (label its items later, by id and item)"}
	case ev.Item != nil:
		return &Error{Reason: ReasonBadRequest, Detail: "a ranking request has no item (its candidates do)"}
	case ev.HasLogged && ev.LoggedIndex() < 0:
		return &Error{Reason: ReasonBadRequest, Detail: "logged.item " + quoteShort(ev.Logged) + " is not one of the candidates"}
	}
	if ev.K == 0 || ev.K > len(ev.Cands) {
		ev.K = len(ev.Cands)
	}
	if s.d.hash != nil {
		return s.hashedRequest(haveFeatures)
	}
	return nil
}

// Ranking is the response to a ranking request: its candidates in the
// order chosen, the first K of them.
type Ranking struct {
	ID, Key []byte // the request's id and key
	Model   string
	Version int64
	// Fallback, when not empty, is written as "fallback" after "version":
	// the model that scored the candidates instead of Model (a key-scoped
	// model's fallback, while the key's own instance has no answer).
	Fallback string
	Ranked   []Ranked
	ScoredAt time.Time
}

// Ranked is one item of a Ranking.
type Ranked struct {
	Item         []byte
	Score        float64
	Prediction   int
	Value        float64 // written as "prediction" instead of Prediction when HasValue
	HasValue     bool
	HasBound     bool
	MistakeBound float64 // written only when HasBound
	Delta        float64 // written only when HasBound
	N            int64
	// The calibrated certainty, as in a score record.
	Calibrated
	// Propensity is the probability with which the exploration policy
	// would have put this item at this position (1 for greedy's order).
	Propensity float64
}

// AppendRanking appends the JSON encoding of r to dst:
//
//	{"id":"r-1","key":"user-42","model":"clicks","version":3,"ranked":[
//	 {"item":"a","score":0.42,"prediction":1,"certainty":{"mistake_bound":0.31,"delta":0.05,"n":1200,
//	  "probability":{"p":0.6,"lower":0.58,"upper":0.63,"n":2000}},"propensity":0.95},…],
//	 "scored_at":"…"}
//
// Floats and strings are written as AppendScore writes them. It does not
// allocate when dst has enough capacity.
func AppendRanking(dst []byte, r *Ranking) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, r.ID)
	dst = append(dst, `,"key":`...)
	dst = AppendString(dst, r.Key)
	dst = append(dst, `,"model":`...)
	dst = AppendString(dst, unsafe.Slice(unsafe.StringData(r.Model), len(r.Model)))
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, r.Version, 10)
	if r.Fallback != "" {
		dst = append(dst, `,"fallback":`...)
		dst = AppendString(dst, unsafe.Slice(unsafe.StringData(r.Fallback), len(r.Fallback)))
	}
	dst = append(dst, `,"ranked":[`...)
	for i := range r.Ranked {
		it := &r.Ranked[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"item":`...)
		dst = AppendString(dst, it.Item)
		dst = append(dst, `,"score":`...)
		dst = appendFloat(dst, it.Score)
		dst = append(dst, `,"prediction":`...)
		if it.HasValue {
			dst = appendFloat(dst, it.Value)
		} else {
			dst = strconv.AppendInt(dst, int64(it.Prediction), 10)
		}
		if it.HasBound {
			dst = append(dst, `,"certainty":{"mistake_bound":`...)
			dst = appendFloat(dst, it.MistakeBound)
			dst = append(dst, `,"delta":`...)
			dst = appendFloat(dst, it.Delta)
		} else {
			dst = append(dst, `,"certainty":{"mistake_bound":null,"delta":null`...)
		}
		dst = append(dst, `,"n":`...)
		dst = strconv.AppendInt(dst, it.N, 10)
		dst = it.Calibrated.append(dst, nil)
		dst = append(dst, `},"propensity":`...)
		dst = appendFloat(dst, it.Propensity)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"scored_at":"`...)
	dst = appendTimeUTC(dst, r.ScoredAt)
	return append(dst, `"}`...)
}
