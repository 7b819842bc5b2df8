package wire

import (
	"errors"
	"fmt"
	"strconv"
)

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

// DecodeFeatures parses obj, a features object ({"ns": {...}, …}), into
// ev's hashed features (Idx, Val, Hash, Field), as Decode would the
// "features" member of an event: for the members of a profile the service
// adds to an event or a candidate. ev's other fields are left as they
// are. d must hash; obj must be one JSON object and nothing else.
func (d *Decoder) DecodeFeatures(obj []byte, ev *Event) error {
	if d.hash == nil {
		return errors.New("wire: DecodeFeatures: the decoder does not hash")
	}
	ev.buf = ev.buf[:0]
	s := scanner{src: obj, d: d, ev: ev, ent: -1}
	s.skipWS()
	if s.pos >= len(s.src) {
		return s.syntax("empty input")
	}
	if e := s.hashedFeatures(); e != nil {
		return e
	}
	s.skipWS()
	if s.pos != len(s.src) {
		return s.syntax("trailing data after the features object")
	}
	return nil
}
