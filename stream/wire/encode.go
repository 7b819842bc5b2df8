package wire

import (
	"encoding/binary"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Score is one output record: the score of one event by one model.
type Score struct {
	ID, Key    []byte // the event's id and its Kafka message key; arbitrary bytes
	Model      string
	Version    int64
	Score      float64
	Prediction int // class, or level for ordinal models
	// Value, when HasValue, is written as "prediction" instead of
	// Prediction: a regression model's predicted label (a float).
	Value    float64
	HasValue bool
	// Probability of class +1, written as "probability" after "prediction"
	// only when HasProbability (models that estimate one, e.g. logistic).
	Probability    float64
	HasProbability bool
	// Expected, when HasExpected, is written as "expected" after
	// "prediction" and "probability": an ordinal model's expected label on
	// the raw label's scale.
	Expected    float64
	HasExpected bool
	// Fallback, when not empty, is written as "fallback" after "expected":
	// the name of the model whose answer the record carries (a key-scoped
	// model's fallback, while the key's own instance has none).
	Fallback     string
	HasBound     bool
	MistakeBound float64 // written only when HasBound
	Delta        float64 // written only when HasBound
	N            int64
	Calibrated
	EventTS  []byte    // "event_ts" is omitted when empty
	ScoredAt time.Time // written in UTC as RFC 3339 with nanoseconds
}

// AppendScore appends the JSON encoding of s to dst and returns the extended
// buffer. It does not allocate when dst has enough capacity.
//
// The fields are written in the order of the wire contract:
//
//	{"id":"e-1","key":"user-42","model":"clicks","version":17,"score":0.42,"prediction":1,
//	 "certainty":{"mistake_bound":0.31,"delta":0.05,"n":120000,
//	              "probability":{"p":0.83,"lower":0.81,"upper":0.85,"n":2000}},"event_ts":"…","scored_at":"…"}
//
// "probability", "expected" and "fallback" follow "prediction" when set,
// in this order; "prediction" is a float when HasValue.
//
// Without a bound, mistake_bound and delta are null. A non-finite float is
// written as null so that the output is always valid JSON. Strings are
// escaped like encoding/json does, invalid UTF-8 becoming U+FFFD.
func AppendScore(dst []byte, s *Score) []byte { return appendScore(dst, s, nil) }

// AppendScore is AppendScore with the formatted floats memoised in c: the
// same bytes, and for a value c holds a copy instead of the shortest
// search. Only the values that records repeat go through c: the delta,
// and a calibrated probability's and interval's, which come from a table
// of a few values refitted now and then; the score, prediction,
// probability, expected label and mistake bound change from record to
// record and would only push those out of c.
func (c *FloatCache) AppendScore(dst []byte, s *Score) []byte { return appendScore(dst, s, c) }

func appendScore(dst []byte, s *Score, c *FloatCache) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, s.ID)
	dst = append(dst, `,"key":`...)
	dst = AppendString(dst, s.Key)
	dst = append(dst, `,"model":`...)
	dst = AppendString(dst, unsafe.Slice(unsafe.StringData(s.Model), len(s.Model)))
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, s.Version, 10)
	dst = append(dst, `,"score":`...)
	dst = appendFloat(dst, s.Score)
	dst = append(dst, `,"prediction":`...)
	if s.HasValue {
		dst = appendFloat(dst, s.Value)
	} else {
		dst = strconv.AppendInt(dst, int64(s.Prediction), 10)
	}
	if s.HasProbability {
		dst = append(dst, `,"probability":`...)
		dst = appendFloat(dst, s.Probability)
	}
	if s.HasExpected {
		dst = append(dst, `,"expected":`...)
		dst = appendFloat(dst, s.Expected)
	}
	if s.Fallback != "" {
		dst = append(dst, `,"fallback":`...)
		dst = AppendString(dst, unsafe.Slice(unsafe.StringData(s.Fallback), len(s.Fallback)))
	}
	if s.HasBound {
		dst = append(dst, `,"certainty":{"mistake_bound":`...)
		dst = appendFloat(dst, s.MistakeBound)
		dst = append(dst, `,"delta":`...)
		dst = c.appendFloat(dst, s.Delta)
	} else {
		dst = append(dst, `,"certainty":{"mistake_bound":null,"delta":null`...)
	}
	dst = append(dst, `,"n":`...)
	dst = strconv.AppendInt(dst, s.N, 10)
	dst = s.Calibrated.append(dst, c)
	dst = append(dst, '}')
	if len(s.EventTS) > 0 {
		dst = append(dst, `,"event_ts":`...)
		dst = AppendString(dst, s.EventTS)
	}
	dst = append(dst, `,"scored_at":"`...)
	dst = c.appendTime(dst, s.ScoredAt)
	return append(dst, `"}`...)
}

// appendTimeUTC appends t in UTC as t.UTC().AppendFormat(dst,
// time.RFC3339Nano) does (the fraction's trailing zeros dropped, none for
// a whole second), without the layout's interpretation: years 0 to 9999
// by hand, others by AppendFormat.
func appendTimeUTC(dst []byte, t time.Time) []byte {
	var b [19]byte
	if !putSecond(&b, t) {
		return t.UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	dst = append(dst, b[:]...)
	return appendFraction(dst, t.Nanosecond())
}

// putSecond writes t's second in UTC, "2006-01-02T15:04:05", to b; false
// (b unwritten) for a year outside 0 to 9999.
func putSecond(b *[19]byte, t time.Time) bool {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return false
	}
	hour, minute, sec := t.Clock()
	put4(b[0:4], year)
	b[4] = '-'
	put2(b[5:7], int(month))
	b[7] = '-'
	put2(b[8:10], day)
	b[10] = 'T'
	put2(b[11:13], hour)
	b[13] = ':'
	put2(b[14:16], minute)
	b[16] = ':'
	put2(b[17:19], sec)
	return true
}

// appendFraction appends the fraction of a second of ns nanoseconds
// (0 ≤ ns < 10^9) as RFC3339Nano writes it, ".999999999" without its
// trailing zeros and nothing for 0, then the zone, "Z".
func appendFraction(dst []byte, ns int) []byte {
	if ns == 0 {
		return append(dst, 'Z')
	}
	var b [11]byte // .999999999Z
	b[0], b[1] = '.', byte('0'+ns/1e8)
	put8(b[2:10], uint32(ns%1e8))
	n := 10
	for b[n-1] == '0' { // ns is not 0: a digit is not 0
		n--
	}
	b[n] = 'Z'
	return append(dst, b[:n+1]...)
}

// appendTime is appendTimeUTC with the text of the second kept in c: the
// records of one run are stamped within microseconds of each other, and
// the date and clock of their second cost more than the rest of the time
// together (BenchmarkAppendTime).
func (c *FloatCache) appendTime(dst []byte, t time.Time) []byte {
	if c == nil {
		return appendTimeUTC(dst, t)
	}
	if sec := t.Unix(); !c.hasSec || c.sec != sec {
		if !putSecond(&c.second, t) { // c.second is the last second's still
			return appendTimeUTC(dst, t)
		}
		c.sec, c.hasSec = sec, true
	}
	dst = append(dst, c.second[:]...)
	return appendFraction(dst, t.Nanosecond())
}

func put2(b []byte, v int) { b[0], b[1] = byte('0'+v/10), byte('0'+v%10) }

func put4(b []byte, v int) {
	put2(b[0:2], v/100)
	put2(b[2:4], v%100)
}

// needsEscape marks the ASCII bytes that cannot appear as is in a JSON string.
var needsEscape = [utf8.RuneSelf]bool{'"': true, '\\': true}

func init() {
	for c := 0; c < 0x20; c++ {
		needsEscape[c] = true
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends b as a quoted JSON string. Control characters are
// escaped, as are U+2028 and U+2029 (like encoding/json, so the output is
// also valid JavaScript); invalid UTF-8 becomes U+FFFD.
func AppendString(dst, b []byte) []byte { return appendString(dst, b, true) }

// appendString is AppendString, skipping eight plain bytes at a time
// (plain8) when words is set; a byte at a time otherwise.
func appendString(dst, b []byte, words bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); {
		for words && i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i == len(b) {
			break
		}
		c := b[i]
		if c < utf8.RuneSelf {
			if !needsEscape[c] {
				i++
				continue
			}
			dst = append(dst, b[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, b[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, b[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

// plain8 reports whether the eight bytes of x are ASCII that a JSON string
// holds as is: none of them has its high bit set, is below 0x20, or is '"'
// or '\\'. A byte below 0x20 (x − 0x20 borrows in it) or equal to one of
// the two (the byte of x XOR it, less 1, borrows) sets its high bit in
// the flags; a borrow can flag a byte above a flagged one as well, never
// one when none is.
func plain8(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, s := x^(lo*'"'), x^(lo*'\\')
	return (x|(x-lo*0x20)&^x|(q-lo)&^q|(s-lo)&^s)&hi == 0
}

// Calibrated is a prediction's calibrated certainty, in a score record
// (Score) and a ranked item (Ranked) alike.
type Calibrated struct {
	// Calibrated probability of class +1 with its Venn–Abers interval,
	// written as certainty.probability {p, lower, upper, n} only when
	// HasCal (classifiers, once their calibration table is fitted).
	HasCal                   bool
	CalP, CalLower, CalUpper float64
	CalN                     int64
	// CalText, when set, is the member as AppendProbability renders
	// CalP, CalLower, CalUpper and CalN, written as is: a calibration
	// table renders each of its cells once, where most cells' floats
	// would miss an encoder's FloatCache.
	CalText []byte
	// Conformal interval of the score at level IntLevel, written as
	// certainty.interval {lower, upper, level} only when HasInterval
	// (ranking, ordinal and regression models).
	HasInterval                  bool
	IntLower, IntUpper, IntLevel float64
}

// AppendProbability appends a certainty object's member "probability"
// {p, lower, upper, n}, with its leading comma, as a record writes it
// (Calibrated.CalText).
func AppendProbability(dst []byte, p, lower, upper float64, n int64) []byte {
	c := Calibrated{HasCal: true, CalP: p, CalLower: lower, CalUpper: upper, CalN: n}
	return c.append(dst, nil)
}

// append appends c's members of a certainty object: "probability" when
// HasCal, "interval" when HasInterval.
func (c *Calibrated) append(dst []byte, fc *FloatCache) []byte {
	if c.HasCal && len(c.CalText) > 0 {
		dst = append(dst, c.CalText...)
	} else if c.HasCal {
		dst = append(dst, `,"probability":{"p":`...)
		dst = fc.appendFloat(dst, c.CalP)
		dst = append(dst, `,"lower":`...)
		dst = fc.appendFloat(dst, c.CalLower)
		dst = append(dst, `,"upper":`...)
		dst = fc.appendFloat(dst, c.CalUpper)
		dst = append(dst, `,"n":`...)
		dst = strconv.AppendInt(dst, c.CalN, 10)
		dst = append(dst, '}')
	}
	if c.HasInterval {
		dst = append(dst, `,"interval":{"lower":`...)
		dst = fc.appendFloat(dst, c.IntLower)
		dst = append(dst, `,"upper":`...)
		dst = fc.appendFloat(dst, c.IntUpper)
		dst = append(dst, `,"level":`...)
		dst = fc.appendFloat(dst, c.IntLevel)
		dst = append(dst, '}')
	}
	return dst
}
