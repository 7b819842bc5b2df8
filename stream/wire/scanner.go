package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

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

func outOfRange(where string, v, max float64) *Error {
	return &Error{Reason: ReasonOutOfRange, Detail: fmt.Sprintf("%s: %g is beyond ±%g", where, v, max)}
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

// plainEnd returns the index of the first byte from src[i] that is a
// quote, a backslash or a control character (len(src) if none): the end
// of a string's plain run. It reads 8 bytes at a time: in each word, the
// lowest byte flagged by the borrow tricks below is a true match (a false
// one can only sit above a true one).
func plainEnd(src []byte, i int) int {
	for ; i+8 <= len(src); i += 8 {
		if t := specialBytes(binary.LittleEndian.Uint64(src[i:])); t != 0 {
			return i + bits.TrailingZeros64(t)/8
		}
	}
	for i < len(src) && src[i] != '"' && src[i] != '\\' && src[i] >= 0x20 {
		i++
	}
	return i
}

// appendPlain appends to dst the plain run of the string at src[i:] (up
// to plainEnd's index, which it returns too), copying each 8-byte word as
// it scans it. dst grows (allocates) only while its capacity does.
func appendPlain(dst, src []byte, i int) ([]byte, int) {
	n := len(dst)
	for i+8 <= len(src) {
		if cap(dst)-n < 8 {
			dst = slices.Grow(dst[:n], 8)
		}
		x := binary.LittleEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(dst[n:n+8], x)
		if t := specialBytes(x); t != 0 {
			k := bits.TrailingZeros64(t) / 8
			return dst[:n+k], i + k
		}
		n += 8
		i += 8
	}
	j := plainEnd(src, i)
	return append(dst[:n], src[i:j]...), j
}

// specialBytes flags (sets the high bit of) the bytes of x that end a
// string's plain run: a quote, a backslash or a control character. The
// lowest flagged byte is always a true one (see plainEnd).
func specialBytes(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, b := x^(lo*'"'), x^(lo*'\\')
	return ((q-lo)&^q | (b-lo)&^b | (x-lo*0x20)&^x) & hi
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
