package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFloatCacheSameBytes: records encoded through a FloatCache are the
// bytes AppendScore writes, for values that repeat (the cache's hits),
// values that collide in its table, and the special ones (±0, NaN, ±Inf,
// the longest shortest forms).
func TestFloatCacheSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	levels := []float64{0, math.Copysign(0, -1), 0.05, 1.0 / 3, 2.0 / 3, 0.1 + 0.2, math.NaN(), math.Inf(1), math.Inf(-1),
		-1.2345678901234567e-308, math.SmallestNonzeroFloat64, math.MaxFloat64, 123456789.123}
	pick := func() float64 {
		if rng.IntN(4) == 0 {
			return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		return levels[rng.IntN(len(levels))]
	}
	var c FloatCache
	var want, got []byte
	hits := 0
	for i := range 20000 {
		s := benchScore()
		s.Score, s.MistakeBound, s.Delta = pick(), pick(), pick()
		s.HasValue, s.Value = i%3 == 0, pick()
		s.HasProbability, s.Probability = i%2 == 0, pick()
		s.HasExpected, s.Expected = i%5 == 0, pick()
		s.HasCal, s.CalP, s.CalLower, s.CalUpper, s.CalN = true, pick(), pick(), pick(), int64(i)
		s.HasInterval, s.IntLower, s.IntUpper, s.IntLevel = i%2 == 1, pick(), pick(), 0.9
		want = AppendScore(want[:0], s)
		before := c
		got = c.AppendScore(got[:0], s)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want)
		}
		if before == c {
			hits++ // every float of the record was in the table
		}
	}
	if hits == 0 {
		t.Error("no record was written from the table alone: the cache never hits")
	}
}

// BenchmarkAppendScoreCalibrated encodes a calibrated classifier's record:
// the score and the mistake bound change every time, the probability and
// its bounds come from a calibrator's table of 60 levels. "plain" is
// AppendScore, "cached" FloatCache.AppendScore. Target: 0 allocs.
func BenchmarkAppendScoreCalibrated(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	records := make([]*Score, 1024)
	for i := range records {
		s := benchScore()
		s.Score = rng.NormFloat64()
		s.HasBound, s.MistakeBound = true, 0.3+rng.Float64()/100
		lo := float64(rng.IntN(60)) / 67
		s.HasCal, s.CalLower, s.CalUpper, s.CalN = true, lo, lo+0.01/3, 2000
		s.CalP = s.CalUpper / (1 - s.CalLower + s.CalUpper)
		records[i] = s
	}
	var c FloatCache
	for _, bc := range []struct {
		name string
		enc  func([]byte, *Score) []byte
	}{{"plain", AppendScore}, {"cached", c.AppendScore}} {
		b.Run(bc.name, func(b *testing.B) {
			buf := bc.enc(nil, records[0])
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				buf = bc.enc(buf[:0], records[i&1023])
				i++
			}
		})
	}
}
