package wire

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchEvent32 returns a realistic input event with 32 features.
func benchEvent32() []byte {
	b := []byte(`{"id":"evt-000000012345","key":"user-42","ts":"2026-11-22T04:00:00.123Z","features":[`)
	for i := range 32 {
		if i > 0 {
			b = append(b, ',')
		}
		switch i % 4 {
		case 0:
			b = append(b, "0.123456789"...)
		case 1:
			b = append(b, "-12.5e-3"...)
		case 2:
			b = strconv.AppendFloat(b, 1234.5678+float64(i), 'f', -1, 64)
		default:
			b = strconv.AppendInt(b, int64(i), 10)
		}
	}
	return append(b, `],"label":1}`...)
}

// BenchmarkDecode32 decodes a realistic event with 32 features, an id, a key,
// a ts and a label. Target: at least 500 k events/s (≤ 2 µs/event) on one
// core, with 0 allocs/op.
func BenchmarkDecode32(b *testing.B) {
	d := mustDecoder(b, 32, nil, 1<<20)
	src := benchEvent32()
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := d.Decode(src, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode32Full decodes an event of 32 features as Go, Python or
// Java print float64 values (the shortest string that reads back: 15–17
// significant digits for these normal draws), half of which strconv used
// to parse before the Eisel–Lemire path. Target: ≤ 1 µs/event (1 M
// events/s) on one core, 0 allocs/op.
func BenchmarkDecode32Full(b *testing.B) {
	d := mustDecoder(b, 32, nil, 1<<20)
	r := rand.New(rand.NewPCG(32, 17))
	src := []byte(`{"id":"evt-000000012345","key":"user-42","ts":"2026-11-22T04:00:00.123Z","features":[`)
	for i := range 32 {
		if i > 0 {
			src = append(src, ',')
		}
		src = strconv.AppendFloat(src, r.NormFloat64(), 'g', -1, 64)
	}
	src = append(src, `],"label":1}`...)
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := d.Decode(src, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode32Random decodes events of 32 standard normal features,
// 1 024 different events in turn, so that what varies from number to
// number (signs, leading zeros, digit counts) cannot be learnt by the
// branch predictor as one event's pattern is: "six" with six decimals, as
// `streamer bench` writes them, "shortest" as Go, Python or Java print a
// float64 (15–17 significant digits). Target: 0 allocs/op.
func BenchmarkDecode32Random(b *testing.B) {
	for _, c := range []struct {
		name string
		prec int
	}{{"six", 6}, {"shortest", -1}} {
		b.Run(c.name, func(b *testing.B) {
			d := mustDecoder(b, 32, nil, 1<<20)
			r := rand.New(rand.NewPCG(32, 18))
			srcs := make([][]byte, 1024)
			size := 0
			for k := range srcs {
				src := []byte(`{"id":"b-` + strconv.Itoa(k) + `","features":[`)
				for i := range 32 {
					if i > 0 {
						src = append(src, ',')
					}
					src = strconv.AppendFloat(src, r.NormFloat64(), 'f', c.prec, 64)
				}
				srcs[k] = append(src, `],"label":1}`...)
				size += len(srcs[k])
			}
			var ev Event
			b.ReportAllocs()
			b.SetBytes(int64(size / len(srcs)))
			i := 0
			for b.Loop() {
				if err := d.Decode(srcs[i&1023], &ev); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkDecode32Parallel is BenchmarkDecode32 on all cores sharing one
// Decoder, as partition workers do.
func BenchmarkDecode32Parallel(b *testing.B) {
	d := mustDecoder(b, 32, nil, 1<<20)
	src := benchEvent32()
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	b.RunParallel(func(pb *testing.PB) {
		var ev Event
		for pb.Next() {
			if err := d.Decode(src, &ev); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDecodeReject measures the (allocating) rejection path.
func BenchmarkDecodeReject(b *testing.B) {
	d := mustDecoder(b, 32, nil, 1<<20)
	src := benchEvent32()
	src[len(src)-len(`],"label":1}`)-1] = 'x' // last feature is no longer a number
	var ev Event
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if d.Decode(src, &ev) == nil {
			b.Fatal("accepted")
		}
	}
}

func benchScore() *Score {
	return &Score{
		ID: []byte("evt-000000012345"), Key: []byte("user-42"), Model: "mam", Version: 17,
		Score: 0.4213371337, Prediction: 1, HasBound: true, MistakeBound: 0.3125, Delta: 0.05, N: 120000,
		EventTS:  []byte("2026-11-22T04:00:00.123Z"),
		ScoredAt: time.Date(2026, 11, 22, 4, 0, 0, 123456789, time.UTC),
	}
}

// BenchmarkAppendScore encodes one output record into a reused buffer.
// Target: 0 allocs, ≤ 400 ns (207–236 ns on the development VM since
// scored_at is written by hand, 2026-11-27; 233–281 ns before in the same
// session; 445 ns before short decimals skipped strconv).
func BenchmarkAppendScore(b *testing.B) {
	s := benchScore()
	buf := AppendScore(nil, s)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendScore(buf[:0], s)
	}
}

// BenchmarkDecodeMatrix decodes an event whose features are a 20×20 matrix
// sent as nested arrays (features.shape). Target: 0 allocs, about the cost
// of the same 400 numbers sent flat.
func BenchmarkDecodeMatrix(b *testing.B) {
	var src strings.Builder
	src.WriteString(`{"id":"e-1","features":[`)
	for r := range 20 {
		if r > 0 {
			src.WriteByte(',')
		}
		src.WriteByte('[')
		for c := range 20 {
			if c > 0 {
				src.WriteByte(',')
			}
			fmt.Fprintf(&src, "%.4f", float64(r*20+c)/400-0.5)
		}
		src.WriteByte(']')
	}
	src.WriteString(`],"label":1}`)
	base, _ := NewDecoder(400, nil, 0)
	d := base.WithShape(20).WithMaxAbs(1e15)
	msg := []byte(src.String())
	var ev Event
	if err := d.Decode(msg, &ev); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := d.Decode(msg, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendFloat writes a certainty's delta (0.05, a short decimal)
// and a score (an arbitrary float). Target: 0 allocs; the short decimal
// well below strconv's shortest form (the score's).
func BenchmarkAppendFloat(b *testing.B) {
	for _, c := range []struct {
		name string
		v    float64
	}{{"delta", 0.05}, {"score", 0.4213371337}} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				buf = appendFloat(buf[:0], c.v)
			}
		})
	}
	// Scores as models compute them: 1 024 standard normal draws in turn,
	// 16 or 17 significant digits each.
	r := rand.New(rand.NewPCG(1, 2))
	vs := make([]float64, 1024)
	for i := range vs {
		vs[i] = r.NormFloat64()
	}
	b.Run("normals", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf = appendFloat(buf[:0], vs[i&1023])
			i++
		}
	})
}
