// Package codec is the binary encoding every model state of the project is
// written with: little-endian appenders, a reader with a sticky error, and
// length-framed sections. It also holds the canonical encoding of a model
// type's parameter struct (params.go), which is both the parameters'
// section of a model's state and the input of its configuration
// fingerprint.
//
// Integers and float64 values (IEEE-754 bits) are little-endian. A "str"
// is a uint8 length followed by that many bytes (type names, keys); a
// "bytes" or a frame is a uint32 length followed by that many bytes.
//
// Encoders append to a caller-supplied dst and return the extended slice,
// like strconv.AppendInt. Decoding goes through a Reader: the first
// failure (truncation, a count beyond its limit, a check the caller makes
// with Failf) is kept, every later read returns zero values, and Err
// returns the failure wrapped around the sentinel the Reader was made
// with (e.g. online.ErrFormat), so a decoder checks once, at the end.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

var le = binary.LittleEndian

// AppendU8 appends v.
func AppendU8(dst []byte, v uint8) []byte { return append(dst, v) }

// AppendU16 appends v, little-endian.
func AppendU16(dst []byte, v uint16) []byte { return le.AppendUint16(dst, v) }

// AppendU32 appends v, little-endian.
func AppendU32(dst []byte, v uint32) []byte { return le.AppendUint32(dst, v) }

// AppendU64 appends v, little-endian.
func AppendU64(dst []byte, v uint64) []byte { return le.AppendUint64(dst, v) }

// AppendI64 appends v as its two's-complement uint64.
func AppendI64(dst []byte, v int64) []byte { return le.AppendUint64(dst, uint64(v)) }

// AppendF64 appends the IEEE-754 bits of v.
func AppendF64(dst []byte, v float64) []byte { return le.AppendUint64(dst, math.Float64bits(v)) }

// AppendF64s appends every element of v (no count: the reader knows it).
func AppendF64s(dst []byte, v []float64) []byte {
	for _, x := range v {
		dst = le.AppendUint64(dst, math.Float64bits(x))
	}
	return dst
}

// AppendBool appends 1 for true, 0 for false.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// MaxStr is the longest str: type names, parameter keys and kernel types,
// which online.Define and CheckParams hold to it when a type is defined.
const MaxStr = math.MaxUint8

// AppendStr appends s as a str: a uint8 length and the bytes. s longer than
// MaxStr is a programmer error (the definitions are checked): it panics.
func AppendStr(dst []byte, s string) []byte {
	if len(s) > MaxStr {
		panic("codec: AppendStr: string longer than 255 bytes")
	}
	return append(append(dst, uint8(len(s))), s...)
}

// AppendBytes appends b with a uint32 length.
func AppendBytes(dst, b []byte) []byte {
	return append(le.AppendUint32(dst, uint32(len(b))), b...)
}

// BeginFrame starts a length-framed section: it appends a placeholder
// length and returns where it is; EndFrame fills it in once the section's
// content has been appended.
func BeginFrame(dst []byte) ([]byte, int) {
	return le.AppendUint32(dst, 0), len(dst)
}

// EndFrame sets the length of the frame begun at at (BeginFrame's second
// result) to the bytes appended since.
func EndFrame(dst []byte, at int) []byte {
	le.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// AppendFrame appends the section enc writes, length-framed.
func AppendFrame(dst []byte, enc func([]byte) ([]byte, error)) ([]byte, error) {
	dst, at := BeginFrame(dst)
	dst, err := enc(dst)
	if err != nil {
		return nil, err
	}
	return EndFrame(dst, at), nil
}

// ErrTruncated is wrapped (besides the Reader's sentinel) by the error of a
// read past the end of the input.
var ErrTruncated = errors.New("truncated")

// Reader decodes little-endian fields with a sticky error (see the package
// doc). The zero Reader reads nothing and fails on the first read.
type Reader struct {
	b        []byte
	err      error
	sentinel error
}

// NewReader returns a Reader of b whose errors wrap sentinel (which may be
// nil). The Reader aliases b.
func NewReader(b []byte, sentinel error) *Reader {
	return &Reader{b: b, sentinel: sentinel}
}

// Err returns the first failure, nil if there was none.
func (r *Reader) Err() error { return r.err }

// Len returns the number of bytes not yet read (0 after a failure).
func (r *Reader) Len() int { return len(r.b) }

// Rest returns the bytes not yet read without consuming them (nil after a
// failure).
func (r *Reader) Rest() []byte { return r.b }

// Failf records a failure, unless one is already recorded; the message is
// wrapped around the Reader's sentinel.
func (r *Reader) Failf(format string, args ...any) {
	if r.err != nil {
		return
	}
	r.fail(fmt.Errorf(format, args...))
}

// Fail records err as a failure (wrapped around the sentinel), unless one
// is already recorded; a nil err is ignored.
func (r *Reader) Fail(err error) {
	if err == nil || r.err != nil {
		return
	}
	r.fail(err)
}

func (r *Reader) fail(err error) {
	if r.sentinel != nil && !errors.Is(err, r.sentinel) {
		err = fmt.Errorf("%w: %w", r.sentinel, err)
	}
	r.err = err
	r.b = nil
}

// Take returns the next n bytes (aliasing the input), nil on failure.
func (r *Reader) Take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.fail(ErrTruncated)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// U8 reads a uint8.
func (r *Reader) U8() uint8 {
	if v := r.Take(1); v != nil {
		return v[0]
	}
	return 0
}

// U16 reads a uint16.
func (r *Reader) U16() uint16 {
	if v := r.Take(2); v != nil {
		return le.Uint16(v)
	}
	return 0
}

// U32 reads a uint32.
func (r *Reader) U32() uint32 {
	if v := r.Take(4); v != nil {
		return le.Uint32(v)
	}
	return 0
}

// U64 reads a uint64.
func (r *Reader) U64() uint64 {
	if v := r.Take(8); v != nil {
		return le.Uint64(v)
	}
	return 0
}

// I64 reads an int64.
func (r *Reader) I64() int64 { return int64(r.U64()) }

// F64 reads a float64.
func (r *Reader) F64() float64 { return math.Float64frombits(r.U64()) }

// F64s fills dst with float64 values.
func (r *Reader) F64s(dst []float64) {
	b := r.Take(8 * len(dst))
	if b == nil {
		clear(dst)
		return
	}
	for i := range dst {
		dst[i] = math.Float64frombits(le.Uint64(b[8*i:]))
	}
}

// Bool reads a flag byte; anything but 0 or 1 is a failure naming what.
func (r *Reader) Bool(what string) bool {
	switch v := r.U8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.Failf("%s flag %d", what, v)
		return false
	}
}

// Str reads a str (uint8 length and bytes).
func (r *Reader) Str() string { return string(r.Take(int(r.U8()))) }

// Bytes reads a uint32 length and that many bytes (aliasing the input).
func (r *Reader) Bytes() []byte { return r.Take(int(r.U32())) }

// Frame reads a length-framed section and returns a Reader over it with the
// same sentinel. After a failure it returns a Reader that fails.
func (r *Reader) Frame() *Reader {
	b := r.Bytes()
	if r.err != nil {
		return &Reader{err: r.err, sentinel: r.sentinel}
	}
	return &Reader{b: b, sentinel: r.sentinel}
}

// Count reads a uint32 count of elements of elemSize bytes each and checks
// it against max and against the bytes left (so that a corrupt count
// cannot ask for an absurd allocation); on failure it returns 0.
func (r *Reader) Count(what string, max, elemSize int) int {
	n := int(r.U32())
	switch {
	case r.err != nil:
		return 0
	case n > max:
		r.Failf("%d %s (at most %d)", n, what, max)
		return 0
	case elemSize > 0 && n > len(r.b)/elemSize:
		r.fail(fmt.Errorf("%d %s: %w", n, what, ErrTruncated))
		return 0
	}
	return n
}

// Need fails unless at least n bytes are left (a size check before an
// allocation).
func (r *Reader) Need(n int) bool {
	if r.err == nil && (n < 0 || len(r.b) < n) {
		r.fail(ErrTruncated)
	}
	return r.err == nil
}

// End returns the first failure, or a failure if bytes are left unread.
func (r *Reader) End() error {
	if r.err == nil && len(r.b) > 0 {
		r.Failf("%d trailing bytes", len(r.b))
	}
	return r.err
}
