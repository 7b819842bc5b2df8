package online

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/streamer/streamer/online/codec"
)

// testTypes is the registry of this package's model types, through which
// the tests build models from a Spec and restore encodings.
var testTypes = MustRegistry(MAMType(), OMAMType(), LogisticType(), LDAType())

// mustNew builds the model of spec through testTypes.
func mustNew(t testing.TB, spec Spec) Model {
	t.Helper()
	m, err := testTypes.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// envelopeEnd returns the offset at which the type's state starts in a
// version-2 encoding (after magic, version, type, the parameters' frame and
// the input dimension).
func envelopeEnd(t testing.TB, b []byte) int {
	t.Helper()
	r := codec.NewReader(b, ErrFormat)
	if version, _ := readEnvelope(r); r.Err() == nil && version != formatVersion {
		t.Fatalf("format version %d, want %d", version, formatVersion)
	}
	r.Frame()
	r.U32()
	if err := r.Err(); err != nil {
		t.Fatalf("envelope: %v", err)
	}
	return len(b) - r.Len()
}

// withHeader returns the version-2 encoding b with its envelope replaced
// by one of type typ, parameters p and input dimension dim; the state is
// kept as is.
func withHeader(t testing.TB, b []byte, typ string, p Params, dim int) []byte {
	t.Helper()
	return append(AppendHeader(nil, typ, p, dim), b[envelopeEnd(t, b):]...)
}

// asVersion1 returns the version-2 encoding b rewritten in format version
// 1: the envelope holds the type tag and the legacy spec s in place of the
// parameters and dimension; the state is kept as is (which is the state of
// version 1 for every type but the Standardized wrapper).
func asVersion1(t testing.TB, b []byte, tag string, s legacySpec) []byte {
	t.Helper()
	out := append([]byte(formatMagic), 0, 0)
	binary.LittleEndian.PutUint16(out[len(formatMagic):], legacyVersion1)
	out = codec.AppendStr(out, tag)
	out = appendLegacySpec(out, s)
	return append(out, b[envelopeEnd(t, b):]...)
}

// putF64 writes v at off of a copy of b.
func putF64(b []byte, off int, v float64) []byte {
	b = bytes.Clone(b)
	copy(b[off:], codec.AppendF64(nil, v))
	return b
}

// f64Bytes is the little-endian encoding of v.
func f64Bytes(v []float64) []byte {
	return codec.AppendF64s(nil, v)
}

// legacySpecOf returns the version-1 type tag and spec of a model built
// from spec (its parameters, or the type's defaults when nil).
func legacySpecOf(t testing.TB, spec Spec) (tag string, s legacySpec) {
	t.Helper()
	p := spec.Params
	if p == nil {
		p = testTypes.Lookup(spec.Type).NewParams()
	}
	s = legacySpec{Dim: spec.Dim, Standardize: spec.Standardize}
	switch p := p.(type) {
	case *MAMParams:
		s.Kernel, s.Balance, s.Delta, s.Budget = p.Kernel, p.Balance, p.Delta, p.Budget
		s.Window, s.HalfLife = p.Window.Events, p.Decay.HalfLife
		tag = MAMName
		if p.Budget > 0 {
			tag = legacyTagExactMAM
		}
	case *OMAMParams:
		s.Kernel, s.Levels, s.Edges, s.Normalize, s.Budget = p.Kernel, p.Levels, p.Edges, p.Normalize, p.Budget
		s.Window, s.HalfLife = p.Window.Events, p.Decay.HalfLife
		tag = OMAMName
		if p.Budget > 0 {
			tag = legacyTagExactOMAM
		}
	case *LogisticParams:
		s.LearningRate, s.L2 = p.LearningRate, p.L2
		tag = LogisticName
	case *LDAParams:
		s.Window, s.HalfLife = p.Window.Events, p.Decay.HalfLife
		tag = LDAName
	default:
		t.Fatalf("legacySpecOf: parameters %T", p)
	}
	return tag, s
}

// modelParams returns the parameters of m (of the model a Standardized
// wraps), as the type's parameter struct (not a pointer).
func modelParams(m Model) any {
	if s, ok := m.(*Standardized); ok {
		m = s.Inner()
	}
	switch m := m.(type) {
	case *MAM:
		return m.Params()
	case *ExactMAM:
		return m.Params()
	case *OMAM:
		return m.Params()
	case *ExactOMAM:
		return m.Params()
	case *Logistic:
		return m.Params()
	case *LDA:
		return m.Params()
	}
	return nil
}

// withParamsFrame returns the version-2 encoding b with its envelope
// replaced by one of type typ whose parameters' frame holds the bytes
// frame (not necessarily a canonical encoding) and input dimension dim.
func withParamsFrame(t testing.TB, b []byte, typ string, frame []byte, dim int) []byte {
	t.Helper()
	out := append([]byte(formatMagic), 0, 0)
	binary.LittleEndian.PutUint16(out[len(formatMagic):], formatVersion)
	out = codec.AppendStr(out, typ)
	out = codec.AppendBytes(out, frame)
	out = codec.AppendU32(out, uint32(dim))
	return append(out, b[envelopeEnd(t, b):]...)
}

// nonCanonicalMAM returns encodings of m's state whose parameters are
// valid but not in the canonical form: a zero value written out, and the
// keys out of declaration order.
func nonCanonicalMAM(t testing.TB, m *MAM) map[string][]byte {
	t.Helper()
	good, _ := m.MarshalBinary()
	p := m.Params()
	zero := codec.AppendParams(nil, &p)
	zero = append(codec.AppendStr(zero, "budget"), 'i')
	zero = codec.AppendI64(zero, 0)
	order := codec.AppendParams(nil, &MAMParams{Delta: p.Delta})
	order = codec.AppendParams(order, &MAMParams{Kernel: p.Kernel, Balance: p.Balance})
	return map[string][]byte{
		"parameters with a zero value": withParamsFrame(t, good, MAMName, zero, m.Dim()),
		"parameters out of order":      withParamsFrame(t, good, MAMName, order, m.Dim()),
	}
}
