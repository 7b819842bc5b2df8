package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc returns the CRC-32C (Castagnoli) of b.
func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

const (
	magic      = "STRMSNAP" // first 8 bytes of every snapshot file
	endMagic   = "ENDS"     // last 4 bytes of a version 1 file
	prefixLen  = 16         // magic + version + header length
	trailerLen = 16         // content length + CRC + end magic
)

// ---- encoding (always the current format, version 1) ----

// EncodedLen returns the exact number of bytes AppendEncode appends for s.
func EncodedLen(s *Snapshot) int {
	return prefixLen + headerLenV1(s) + 4 + s.Size() + trailerLen
}

func headerLenV1(s *Snapshot) int {
	n := 8 + 8 + 4 + 4 + len(s.Fingerprint) + 4
	for _, o := range s.Offsets {
		n += 4 + len(o.Topic) + 4 + 8
	}
	n += 4
	for i := range s.Models {
		n += 4 + len(s.Models[i].Name) + 4 + len(s.Models[i].Type) + 4 + len(s.Models[i].Fingerprint) + 8 + 4
	}
	return n
}

// AppendEncode appends the encoding of s in the current format to dst and
// returns the extended slice. It grows dst at most once, so encoding into a
// reused buffer with enough capacity allocates nothing. AppendEncode does not
// validate s; the stores call Validate before saving. It ignores s.Format.
func AppendEncode(dst []byte, s *Snapshot) []byte {
	start := len(dst)
	dst = slices.Grow(dst, EncodedLen(s))
	dst = appendPrefixHeaderV1(dst, s)
	for i := range s.Models {
		dst = append(dst, s.Models[i].Data...)
	}
	content := uint64(len(dst) - start)
	sum := crc(dst[start:])
	return appendTrailerV1(dst, content, sum)
}

// Encode writes the encoding of s in the current format to w and returns the
// number of bytes written. Model data is written straight from s.Models, not
// copied, so this is the cheaper path for large snapshots going to a file.
func Encode(w io.Writer, s *Snapshot) (int64, error) {
	hdr := appendPrefixHeaderV1(make([]byte, 0, prefixLen+headerLenV1(s)+4), s)
	var n int64
	write := func(b []byte) error {
		k, err := w.Write(b)
		n += int64(k)
		return err
	}
	if err := write(hdr); err != nil {
		return n, err
	}
	sum := crc(hdr)
	for i := range s.Models {
		d := s.Models[i].Data
		sum = crc32.Update(sum, castagnoli, d)
		if err := write(d); err != nil {
			return n, err
		}
	}
	err := write(appendTrailerV1(make([]byte, 0, trailerLen), uint64(n), sum))
	return n, err
}

// appendPrefixHeaderV1 appends the prefix, the header body and the header CRC.
func appendPrefixHeaderV1(dst []byte, s *Snapshot) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint32(dst, 1)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(headerLenV1(s)))
	dst = binary.LittleEndian.AppendUint64(dst, s.Seq)
	dst = appendTime(dst, s.CreatedAt)
	dst = appendString(dst, s.Fingerprint)
	dst = appendOffsets(dst, s.Offsets)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.Models)))
	for i := range s.Models {
		m := &s.Models[i]
		dst = appendString(dst, m.Name)
		dst = appendString(dst, m.Type)
		dst = appendString(dst, m.Fingerprint)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(len(m.Data)))
		dst = binary.LittleEndian.AppendUint32(dst, crc(m.Data))
	}
	return binary.LittleEndian.AppendUint32(dst, crc(dst[start:]))
}

func appendTrailerV1(dst []byte, content uint64, sum uint32) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, content)
	dst = binary.LittleEndian.AppendUint32(dst, sum)
	return append(dst, endMagic...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// appendTime encodes t as int64 Unix seconds and uint32 nanoseconds.
func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t.Unix()))
	return binary.LittleEndian.AppendUint32(dst, uint32(t.Nanosecond()))
}

func appendOffsets(dst []byte, offs []Offset) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(offs)))
	for _, o := range offs {
		dst = appendString(dst, o.Topic)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(o.Partition))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(o.Offset))
	}
	return dst
}

// ---- decoding ----

// decoders maps each format version ever written to its decoder. A new
// format version adds an entry; the old ones stay so old files keep loading.
var decoders = map[uint32]func(b []byte, verify bool) (*Snapshot, error){
	1: decodeV1,
}

// Decode decodes and verifies a snapshot of any supported format version. It
// checks the magic, the version, every length, the header CRC, each model's
// CRC and the whole-content CRC in the trailer. If the bytes are bad the error
// wraps ErrCorrupt; when the header is intact but several parts are bad, the
// error joins one *CorruptError per bad part, so a tool can name them all. A
// version newer than FormatVersion gives an error wrapping
// ErrUnsupportedVersion.
//
// The Data of the returned models aliases b: b must not be modified while the
// snapshot is in use.
func Decode(b []byte) (*Snapshot, error) { return decode(b, true) }

func decode(b []byte, verify bool) (*Snapshot, error) {
	if len(b) < prefixLen {
		return nil, corrupt("file", "truncated: %d bytes, shorter than the %d-byte prefix", len(b), prefixLen)
	}
	if string(b[:len(magic)]) != magic {
		return nil, corrupt("file", "bad magic %q", b[:len(magic)])
	}
	v := binary.LittleEndian.Uint32(b[8:])
	dec, ok := decoders[v]
	if !ok {
		if v > FormatVersion {
			return nil, fmt.Errorf("%w: %d (this binary reads up to %d)", ErrUnsupportedVersion, v, FormatVersion)
		}
		return nil, corrupt("file", "bad format version %d", v)
	}
	return dec(b, verify)
}

// decodeV1 decodes format version 1. With verify false it skips the checksum
// comparisons (used by the fuzz test to reach the parser).
func decodeV1(b []byte, verify bool) (*Snapshot, error) {
	hlen := uint64(binary.LittleEndian.Uint32(b[12:]))
	hend := prefixLen + hlen // end of the header body; its CRC follows
	if uint64(len(b)) < hend+4 {
		return nil, corrupt("header", "truncated: header needs %d bytes, file has %d", hend+4, len(b))
	}
	if got, want := crc(b[:hend]), binary.LittleEndian.Uint32(b[hend:]); verify && got != want {
		return nil, corrupt("header", "checksum mismatch (stored %08x, computed %08x)", want, got)
	}

	r := reader{b: b[prefixLen:hend]}
	s := &Snapshot{Format: 1}
	s.Seq = r.u64()
	s.CreatedAt = r.time()
	s.Fingerprint = r.str(MaxFingerprintLen)
	s.Offsets = r.offsets()
	nm := r.count(4 + 1 + 4 + 4 + 8 + 4)
	type entry struct {
		len uint64
		crc uint32
	}
	entries := make([]entry, 0, nm)
	if nm > 0 {
		s.Models = make([]Model, 0, nm)
	}
	for range nm {
		var m Model
		m.Name = r.str(MaxNameLen)
		m.Type = r.str(MaxNameLen)
		m.Fingerprint = r.str(MaxFingerprintLen)
		e := entry{len: r.u64(), crc: r.u32()}
		if r.err != nil {
			break
		}
		s.Models = append(s.Models, m)
		entries = append(entries, e)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d unused bytes at the end", len(r.b))
	}
	if r.err != nil {
		return nil, corrupt("header", "malformed: %v", r.err)
	}
	if err := s.Validate(); err != nil {
		return nil, corrupt("header", "%v", err)
	}

	// Model data: check each model on its own so a report can name the bad
	// ones, then the trailer.
	var errs []error
	pos := hend + 4
	for i, e := range entries {
		part := fmt.Sprintf("model %q", s.Models[i].Name)
		if e.len > uint64(len(b))-pos { // pos <= len(b) holds here
			errs = append(errs, corrupt(part, "truncated: %d bytes of data declared, %d left in the file", e.len, uint64(len(b))-pos))
			pos = uint64(len(b))
			continue
		}
		d := b[pos : pos+e.len : pos+e.len]
		if got := crc(d); verify && got != e.crc {
			errs = append(errs, corrupt(part, "checksum mismatch (stored %08x, computed %08x)", e.crc, got))
		}
		if len(d) > 0 {
			s.Models[i].Data = d
		}
		pos += e.len
	}
	switch rest := uint64(len(b)) - pos; {
	case rest < trailerLen:
		errs = append(errs, corrupt("trailer", "truncated: %d of %d bytes present", rest, trailerLen))
	case rest > trailerLen:
		errs = append(errs, corrupt("trailer", "%d unexpected bytes after the model data", rest-trailerLen))
	default:
		t := b[pos:]
		if n := binary.LittleEndian.Uint64(t); n != pos {
			errs = append(errs, corrupt("trailer", "content length %d, want %d", n, pos))
		}
		if string(t[12:]) != endMagic {
			errs = append(errs, corrupt("trailer", "bad end magic %q", t[12:]))
		}
		if got, want := crc(b[:pos]), binary.LittleEndian.Uint32(t[8:]); verify && got != want {
			errs = append(errs, corrupt("trailer", "checksum mismatch (stored %08x, computed %08x)", want, got))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// reader decodes little-endian fields with a sticky error: after the first
// failure every read returns a zero value, so one check at the end is enough.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.b = nil
}

func (r *reader) take(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("%s: need %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if b := r.take(1, "u8"); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4, "u32"); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8, "u64"); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str(limit int) string {
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(limit) {
		r.fail("string of %d bytes exceeds the limit %d", n, limit)
	}
	return string(r.take(uint64(n), "string"))
}

// count reads an element count and rejects it if the remaining bytes cannot
// hold that many elements of at least minSize bytes each, so a hostile count
// cannot make the decoder allocate much.
func (r *reader) count(minSize int) int {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minSize) > uint64(len(r.b)) {
		r.fail("count %d does not fit in the %d bytes left", n, len(r.b))
		return 0
	}
	return int(n)
}

func (r *reader) time() time.Time {
	sec := int64(r.u64())
	nsec := r.u32()
	if r.err == nil && nsec > 999_999_999 {
		r.fail("nanoseconds %d out of range", nsec)
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (r *reader) offsets() []Offset {
	n := r.count(4 + 1 + 4 + 8)
	if n == 0 {
		return nil
	}
	offs := make([]Offset, 0, n)
	for range n {
		o := Offset{Topic: r.str(MaxTopicLen), Partition: int32(r.u32()), Offset: int64(r.u64())}
		if r.err != nil {
			return nil
		}
		offs = append(offs, o)
	}
	return offs
}
