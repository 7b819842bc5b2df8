package codec

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// Canonical encoding of a parameter struct: the exported fields with a
// yaml tag, in declaration order (embedded structs tagged `yaml:",inline"`
// flattened in place), each non-zero field as
//
//	key str | kind u8 | value
//
// with the kinds
//
//	'b' bool u8      'i' int64 (every signed integer, time.Duration)
//	'u' uint64       'f' float64
//	's' bytes (a string)
//	'F' count u32 + float64 each       'S' count u32 + bytes each
//	'L' count u32 + per list: count u32 + bytes each (a list of string lists)
//	'm' frame: a nested struct's canonical encoding
//	'M' count u32 + a frame per struct
//
// Zero values (false, 0, "", empty lists, structs whose fields are all
// zero) are left out, so that a field added later whose zero value means
// the old behaviour changes neither the encoding of existing parameters
// nor their fingerprints. Decoding starts from the zero value, sets the
// fields present and refuses unknown keys, repeated keys and kinds that do
// not match the field.

// Field is one key of a parameter struct.
type Field struct {
	Key   string              // the yaml key
	Value reflect.Value       // the field (settable when the struct is addressable)
	Type  reflect.StructField // the field's declaration (doc tags, type)
}

// Fields lists the keys of the struct v (a struct or a pointer to one) in
// declaration order, with embedded structs tagged `yaml:",inline"`
// flattened. Unexported fields, fields without a yaml tag and `yaml:"-"`
// are not keys.
func Fields(v reflect.Value) []Field {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out []Field
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag, ok := sf.Tag.Lookup("yaml")
		if !ok || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" && sf.Type.Kind() == reflect.Struct {
			out = append(out, Fields(v.Field(i))...)
			continue
		}
		if name == "" {
			continue
		}
		out = append(out, Field{Key: name, Value: v.Field(i), Type: sf})
	}
	return out
}

const (
	kindBool    = 'b'
	kindInt     = 'i'
	kindUint    = 'u'
	kindFloat   = 'f'
	kindString  = 's'
	kindFloats  = 'F'
	kindStrings = 'S'
	kindLists   = 'L' // [][]string
	kindStruct  = 'm'
	kindStructs = 'M'
)

// paramKind returns the encoding kind of a field type, 0 if unsupported.
func paramKind(t reflect.Type) byte {
	switch t.Kind() {
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kindInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return kindUint
	case reflect.Float32, reflect.Float64:
		return kindFloat
	case reflect.String:
		return kindString
	case reflect.Struct:
		return kindStruct
	case reflect.Slice:
		switch paramKind(t.Elem()) {
		case kindFloat:
			return kindFloats
		case kindString:
			return kindStrings
		case kindStruct:
			return kindStructs
		case kindStrings:
			return kindLists
		}
	}
	return 0
}

// CheckParams reports whether every key of the parameter struct type t
// (recursively) has a supported type and keys are unique per struct.
func CheckParams(t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("codec: parameters of type %v: not a struct", t)
	}
	seen := map[string]bool{}
	for _, f := range Fields(reflect.New(t)) {
		if seen[f.Key] {
			return fmt.Errorf("codec: parameters %v: key %q repeated", t, f.Key)
		}
		seen[f.Key] = true
		if len(f.Key) > MaxStr {
			return fmt.Errorf("codec: parameters %v: key %q longer than %d bytes", t, f.Key, MaxStr)
		}
		k := paramKind(f.Type.Type)
		switch k {
		case 0:
			return fmt.Errorf("codec: parameters %v: key %q has unsupported type %v", t, f.Key, f.Type.Type)
		case kindStruct:
			if err := CheckParams(f.Type.Type); err != nil {
				return err
			}
		case kindStructs:
			if err := CheckParams(f.Type.Type.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendParams appends the canonical encoding of the parameter struct p (a
// struct or a pointer to one). It panics on a field type CheckParams
// refuses (a programmer error in a model type's definition).
func AppendParams(dst []byte, p any) []byte {
	return appendStruct(dst, reflect.ValueOf(p))
}

func appendStruct(dst []byte, v reflect.Value) []byte {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	for _, f := range Fields(v) {
		fv := f.Value
		if fv.IsZero() || (fv.Kind() == reflect.Slice && fv.Len() == 0) {
			continue
		}
		k := paramKind(fv.Type())
		start := len(dst)
		dst = AppendStr(dst, f.Key)
		dst = append(dst, k)
		switch k {
		case kindBool:
			dst = AppendBool(dst, fv.Bool())
		case kindInt:
			dst = AppendI64(dst, fv.Int())
		case kindUint:
			dst = AppendU64(dst, fv.Uint())
		case kindFloat:
			dst = AppendF64(dst, fv.Float())
		case kindString:
			dst = AppendBytes(dst, []byte(fv.String()))
		case kindFloats:
			dst = AppendU32(dst, uint32(fv.Len()))
			for i := range fv.Len() {
				dst = AppendF64(dst, fv.Index(i).Float())
			}
		case kindStrings:
			dst = appendStrings(dst, fv)
		case kindLists:
			dst = AppendU32(dst, uint32(fv.Len()))
			for i := range fv.Len() {
				dst = appendStrings(dst, fv.Index(i))
			}
		case kindStruct:
			var at int
			dst, at = BeginFrame(dst)
			n := len(dst)
			dst = appendStruct(dst, fv)
			if len(dst) == n { // all zero: leave the key out
				dst = dst[:start]
				continue
			}
			dst = EndFrame(dst, at)
		case kindStructs:
			dst = AppendU32(dst, uint32(fv.Len()))
			for i := range fv.Len() {
				var at int
				dst, at = BeginFrame(dst)
				dst = EndFrame(appendStruct(dst, fv.Index(i)), at)
			}
		default:
			panic(fmt.Sprintf("codec: parameter %q has unsupported type %v", f.Key, fv.Type()))
		}
	}
	return dst
}

// appendStrings appends the list of strings v: its length, then each.
func appendStrings(dst []byte, v reflect.Value) []byte {
	dst = AppendU32(dst, uint32(v.Len()))
	for i := range v.Len() {
		dst = AppendBytes(dst, []byte(v.Index(i).String()))
	}
	return dst
}

// maxParamList bounds the length of a list in decoded parameters.
const maxParamList = 1 << 16

// ReadParams decodes a canonical encoding, the rest of r, into the struct p
// points to, which should hold the zero value (keys left out are zero).
// Failures are recorded in r.
func ReadParams(r *Reader, p any) {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("codec: ReadParams: %T is not a pointer to a struct", p))
	}
	readStruct(r, v.Elem())
}

func readStruct(r *Reader, v reflect.Value) {
	fields := Fields(v)
	byKey := make(map[string]reflect.Value, len(fields))
	for _, f := range fields {
		byKey[f.Key] = f.Value
	}
	seen := map[string]bool{}
	for r.Len() > 0 && r.Err() == nil {
		key := r.Str()
		k := r.U8()
		if r.Err() != nil {
			return
		}
		fv, ok := byKey[key]
		switch {
		case !ok:
			r.Failf("unknown parameter %q", key)
			return
		case seen[key]:
			r.Failf("parameter %q repeated", key)
			return
		case paramKind(fv.Type()) != k:
			r.Failf("parameter %q: kind %q, want %q", key, k, paramKind(fv.Type()))
			return
		}
		seen[key] = true
		switch k {
		case kindBool:
			fv.SetBool(r.Bool(key))
		case kindInt:
			x := r.I64()
			if fv.OverflowInt(x) {
				r.Failf("parameter %q: %d overflows %v", key, x, fv.Type())
				return
			}
			fv.SetInt(x)
		case kindUint:
			x := r.U64()
			if fv.OverflowUint(x) {
				r.Failf("parameter %q: %d overflows %v", key, x, fv.Type())
				return
			}
			fv.SetUint(x)
		case kindFloat:
			x := r.F64()
			if fv.Kind() == reflect.Float32 && !math.IsInf(x, 0) && fv.OverflowFloat(x) {
				r.Failf("parameter %q: %v overflows float32", key, x)
				return
			}
			fv.SetFloat(x)
		case kindString:
			fv.SetString(string(r.Bytes()))
		case kindFloats:
			n := r.Count(key, maxParamList, 8)
			s := reflect.MakeSlice(fv.Type(), n, n)
			for i := range n {
				s.Index(i).SetFloat(r.F64())
			}
			fv.Set(s)
		case kindStrings:
			fv.Set(readStrings(r, key, fv.Type()))
		case kindLists:
			n := r.Count(key, maxParamList, 4)
			s := reflect.MakeSlice(fv.Type(), n, n)
			for i := range n {
				s.Index(i).Set(readStrings(r, key, fv.Type().Elem()))
			}
			fv.Set(s)
		case kindStruct:
			sub := r.Frame()
			readStruct(sub, fv)
			r.Fail(sub.Err())
		case kindStructs:
			n := r.Count(key, maxParamList, 4)
			s := reflect.MakeSlice(fv.Type(), n, n)
			for i := range n {
				sub := r.Frame()
				readStruct(sub, s.Index(i))
				r.Fail(sub.Err())
			}
			fv.Set(s)
		}
	}
}

// readStrings reads a list of strings of key into a new slice of type t.
func readStrings(r *Reader, key string, t reflect.Type) reflect.Value {
	n := r.Count(key, maxParamList, 4)
	s := reflect.MakeSlice(t, n, n)
	for i := range n {
		s.Index(i).SetString(string(r.Bytes()))
	}
	return s
}
