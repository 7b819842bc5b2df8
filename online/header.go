package online

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/streamer/streamer/online/codec"
)

// Every model's encoding starts with the same envelope, then the type's own
// state (codec's little-endian conventions):
//
//	magic "OLNM" (4 bytes) | format version u16 (= 2) | type str |
//	parameters: frame holding codec's canonical encoding of the type's
//	parameter struct | input dimension u32 | the type's state
//
// so that any model restores from its bytes alone (Registry.Restore) and
// adding a parameter to one type changes no other type's format.
//
// Format version 1 (written before the model registry) had a spec shared
// by every type in place of the parameters and dimension (legacySpec
// below); every type still reads it.
const (
	formatMagic    = "OLNM"
	formatVersion  = 2
	legacyVersion1 = 1
)

// ErrNeedsConfig is returned by Restore for an encoding that does not carry
// its parameters (the refitted models' format before version 2 of the
// envelope): it restores only into a model configured like the one that
// wrote it (UnmarshalBinary). It does not wrap ErrFormat: the bytes may be
// fine.
var ErrNeedsConfig = errors.New("online: encoding without parameters: it restores only into a model configured like the one that wrote it")

// legacyRefitMagic starts the refitted models' encoding before the
// envelope: "RFIT", u16 version (1 or 2), type str, ...
const legacyRefitMagic = "RFIT"

// AppendHeader appends the envelope of a model of type typ with parameters
// p (a pointer to the type's parameter struct) and input dimension dim.
func AppendHeader(dst []byte, typ string, p Params, dim int) []byte {
	dst = append(dst, formatMagic...)
	dst = codec.AppendU16(dst, formatVersion)
	dst = codec.AppendStr(dst, typ)
	dst, at := codec.BeginFrame(dst)
	dst = codec.AppendParams(dst, p)
	dst = codec.EndFrame(dst, at)
	return codec.AppendU32(dst, uint32(dim))
}

// PeekType returns the type string of an encoded model (a type name, a
// legacy encoding tag, or "std" for a Standardized wrapper).
func PeekType(b []byte) (string, error) {
	if bytes.HasPrefix(b, []byte(legacyRefitMagic)) {
		r := codec.NewReader(b[len(legacyRefitMagic):], ErrFormat)
		r.U16()
		typ := r.Str()
		return typ, r.Err()
	}
	r := codec.NewReader(b, ErrFormat)
	_, typ := readEnvelope(r)
	return typ, r.Err()
}

// readEnvelope reads magic, version and type string.
func readEnvelope(r *codec.Reader) (version uint16, typ string) {
	if magic := r.Take(len(formatMagic)); r.Err() == nil && string(magic) != formatMagic {
		r.Failf("bad magic %q", magic)
	}
	version = r.U16()
	if r.Err() == nil && version != formatVersion && version != legacyVersion1 {
		r.Failf("format version %d, want %d", version, formatVersion)
	}
	return version, r.Str()
}

// ReadHeader reads the envelope of a model of type typ: the parameters into
// p (a pointer to the type's parameter struct holding the zero value) and
// the input dimension. It returns a Reader positioned at the type's state,
// whose errors wrap ErrFormat; check its Err. A version-1 encoding is read
// through legacy (nil: the type had none), which gets the encoded type tag
// and the shared spec, fills in p and may refuse with an error naming the
// problem.
func ReadHeader(b []byte, typ string, p Params, legacy func(tag string, s legacySpec) error) (dim int, r *codec.Reader) {
	r = codec.NewReader(b, ErrFormat)
	version, tag := readEnvelope(r)
	if r.Err() != nil {
		return 0, r
	}
	if version == legacyVersion1 {
		if legacy == nil {
			r.Failf("model type %q has no format version 1", typ)
			return 0, r
		}
		s := readLegacySpec(r)
		if r.Err() != nil {
			return 0, r
		}
		if err := legacy(tag, s); err != nil {
			r.Failf("version 1 %s spec: %w", tag, err)
			return 0, r
		}
		return s.Dim, r
	}
	if tag != typ {
		r.Failf("model type %q, want %q", tag, typ)
		return 0, r
	}
	pr := r.Frame()
	raw := pr.Rest()
	codec.ReadParams(pr, p)
	if err := pr.Err(); err != nil {
		r.Fail(fmt.Errorf("parameters: %w", err))
		return 0, r
	}
	// Only the canonical encoding (declaration order, zero values left
	// out) is accepted, so that an encoding that restores re-encodes to
	// the same bytes.
	if r.Err() == nil && !bytes.Equal(codec.AppendParams(nil, p), raw) {
		r.Failf("parameters not in canonical form")
		return 0, r
	}
	dim = int(r.U32())
	return dim, r
}

// checkParams validates decoded parameters and dimension, recording a
// failure that names the key in r.
func checkParams(r *codec.Reader, p Params, dim int) {
	if r.Err() != nil {
		return
	}
	if err := validateDimFor(dim, p); err != nil {
		r.Fail(specFormatErr(err))
		return
	}
	r.Fail(specFormatErr(p.Validate(dim)))
}

// specFormatErr turns a validation error of decoded parameters into an
// error wrapping ErrFormat that names the key; nil stays nil.
func specFormatErr(err error) error {
	if err == nil {
		return nil
	}
	var se *SpecError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: parameters: %s: %s", ErrFormat, se.Field, se.Problem)
	}
	return fmt.Errorf("%w: parameters: %w", ErrFormat, err)
}

// legacySpec is the spec every model type shared in format version 1:
//
//	dim u32, kernel type str, gamma f64, features u32, seed u64,
//	balance u8, delta f64, degree u32, coef0 f64, budget u32, window u32,
//	half-life f64, standardize u8, levels u32, edge count u32 + edges f64…,
//	normalize u8, learning rate f64, l2 f64
type legacySpec struct {
	Dim          int
	Kernel       KernelSpec
	Balance      bool
	Delta        float64
	Budget       int
	Window       int
	HalfLife     float64
	Standardize  bool
	Levels       int
	Edges        []float64
	Normalize    bool
	LearningRate float64
	L2           float64
}

func readLegacySpec(r *codec.Reader) legacySpec {
	var s legacySpec
	s.Dim = int(r.U32())
	s.Kernel.Type = r.Str()
	s.Kernel.Gamma = r.F64()
	s.Kernel.Features = int(r.U32())
	s.Kernel.Seed = r.U64()
	s.Balance = r.Bool("balance")
	s.Delta = r.F64()
	s.Kernel.Degree = int(r.U32())
	s.Kernel.Coef0 = r.F64()
	s.Budget = int(r.U32())
	s.Window = int(r.U32())
	s.HalfLife = r.F64()
	s.Standardize = r.Bool("standardize")
	s.Levels = int(r.U32())
	if ne := r.Count("edges", 1<<16, 8); ne > 0 {
		s.Edges = make([]float64, ne)
		r.F64s(s.Edges)
	}
	s.Normalize = r.Bool("normalize")
	s.LearningRate = r.F64()
	s.L2 = r.F64()
	return s
}

// appendLegacySpec writes s in format version 1 (tests: the readers of
// version 1 are checked on encodings made with it).
func appendLegacySpec(dst []byte, s legacySpec) []byte {
	dst = codec.AppendU32(dst, uint32(s.Dim))
	dst = codec.AppendStr(dst, s.Kernel.Type)
	dst = codec.AppendF64(dst, s.Kernel.Gamma)
	dst = codec.AppendU32(dst, uint32(s.Kernel.Features))
	dst = codec.AppendU64(dst, s.Kernel.Seed)
	dst = codec.AppendBool(dst, s.Balance)
	dst = codec.AppendF64(dst, s.Delta)
	dst = codec.AppendU32(dst, uint32(s.Kernel.Degree))
	dst = codec.AppendF64(dst, s.Kernel.Coef0)
	dst = codec.AppendU32(dst, uint32(s.Budget))
	dst = codec.AppendU32(dst, uint32(s.Window))
	dst = codec.AppendF64(dst, s.HalfLife)
	dst = codec.AppendBool(dst, s.Standardize)
	dst = codec.AppendU32(dst, uint32(s.Levels))
	dst = codec.AppendU32(dst, uint32(len(s.Edges)))
	dst = codec.AppendF64s(dst, s.Edges)
	dst = codec.AppendBool(dst, s.Normalize)
	dst = codec.AppendF64(dst, s.LearningRate)
	return codec.AppendF64(dst, s.L2)
}

// IsVersion1 reports whether b is a model encoding of format version 1
// (written before the model registry), which carries its parameters in the
// spec every type shared then.
func IsVersion1(b []byte) bool {
	if len(b) < len(formatMagic)+2 || string(b[:len(formatMagic)]) != formatMagic {
		return false
	}
	return codec.NewReader(b[len(formatMagic):], nil).U16() == legacyVersion1
}

// Configuration returns what an encoding (of the current format) says of
// its model's configuration: its type, input dimension and the canonical
// encoding of its parameters, and for a Standardized wrapper "std/" and the
// same of its inner model. Models built from equal configurations have
// equal ones.
func Configuration(b []byte) (string, error) {
	r := codec.NewReader(b, ErrFormat)
	version, typ := readEnvelope(r)
	if r.Err() == nil && version != formatVersion {
		r.Failf("format version %d: re-encode the model first", version)
	}
	params := r.Bytes()
	dim := r.U32()
	if err := r.Err(); err != nil {
		return "", err
	}
	conf := fmt.Sprintf("%s/%d/%x", typ, dim, params)
	if typ != standardizedTag {
		return conf, nil
	}
	r.Take(8 + 32*int(dim)) // n, mean, comp(mean), M2, comp(M2)
	inner := r.Bytes()
	if err := r.Err(); err != nil {
		return "", err
	}
	in, err := Configuration(inner)
	if err != nil {
		return "", err
	}
	return conf + "/" + in, nil
}
