package online

import (
	"math"
	"math/rand/v2"
	"testing"
)

// benchEvents returns 1024 random events of dimension d with labels ±1.
func benchEvents(d int) (x [][]float64, y []float64) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 1024 {
		v := make([]float64, d)
		for j := range v {
			v[j] = r.NormFloat64()
		}
		x = append(x, v)
		y = append(y, float64(2*r.IntN(2)-1))
	}
	return x, y
}

func benchObserve(b *testing.B, k KernelSpec, d int) {
	for _, bal := range []struct {
		name string
		on   bool
	}{{"plain", false}, {"balanced", true}} {
		b.Run(bal.name, func(b *testing.B) {
			m := newMAM(b, k, d, bal.on)
			x, y := benchEvents(d)
			for i := range x { // warm state: both classes seen
				m.Observe(x[i], y[i], true)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m.Observe(x[i&1023], y[i&1023], true)
				i++
			}
		})
	}
}

// BenchmarkMAMLinear32 measures one Observe (score + learn) of the linear
// MAM with d = 32. Target: ≥ 5 M events/s on one core (≤ 200 ns/op), 0
// allocs/op.
func BenchmarkMAMLinear32(b *testing.B) {
	benchObserve(b, KernelSpec{Type: KernelLinear}, 32)
}

// BenchmarkMAMRBF256 measures one Observe (score + learn) of the rbf MAM
// with D = 256 random frequencies (dim φ = 512) and d = 32: the feature
// map (BenchmarkRBFMap256) and one fused pass over the sums. Target
// (issue 15): ≤ 1.0 µs/op for the balanced form on one core, 0 allocs/op.
func BenchmarkMAMRBF256(b *testing.B) {
	benchObserve(b, KernelSpec{Type: KernelRBF, Gamma: 0.1, Features: 256, Seed: 1}, 32)
}

// BenchmarkMAMRBF256Prepared splits BenchmarkMAMRBF256/balanced (the
// default, balanced MAM) at the Preparer interface: "prepare" is Prepare
// alone (the feature map, which partition workers run outside the model's
// lock), "observe-prepared" is ObservePrepared alone with the preparations
// of the 1024 events computed beforehand (the part that needs the lock; the
// 4 MiB of preparations are mostly out of cache, as when other cores wrote
// them), "both" is the two in sequence with one buffer. Targets: "both"
// within 5% of BenchmarkMAMRBF256/balanced (Observe), "observe-prepared"
// well under half of it; 0 allocs/op.
func BenchmarkMAMRBF256Prepared(b *testing.B) {
	const d = 32
	k := KernelSpec{Type: KernelRBF, Gamma: 0.1, Features: 256, Seed: 1}
	x, y := benchEvents(d)
	warm := func() *MAM {
		m := newMAM(b, k, d, true)
		for i := range x { // warm state: both classes seen
			m.Observe(x[i], y[i], true)
		}
		return m
	}
	b.Run("prepare", func(b *testing.B) {
		m := warm()
		buf := make([]float64, m.PreparedLen())
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.Prepare(buf, x[i&1023])
			i++
		}
	})
	b.Run("observe-prepared", func(b *testing.B) {
		m := warm()
		prep := make([][]float64, len(x))
		for i := range prep {
			prep[i] = make([]float64, m.PreparedLen())
			m.Prepare(prep[i], x[i])
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.ObservePrepared(prep[i&1023], x[i&1023], y[i&1023], true)
			i++
		}
	})
	b.Run("both", func(b *testing.B) {
		m := warm()
		buf := make([]float64, m.PreparedLen())
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.Prepare(buf, x[i&1023])
			m.ObservePrepared(buf, x[i&1023], y[i&1023], true)
			i++
		}
	})
}

// BenchmarkRBFMap256 isolates the feature map (projection + sincos) of
// BenchmarkMAMRBF256. Target (issue 15): ≤ 0.7 µs/op, 0 allocs/op.
func BenchmarkRBFMap256(b *testing.B) {
	fm := rbfMap(b, 0.1, 256, 32, 1)
	x, _ := benchEvents(32)
	dst := make([]float64, fm.Dim())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		fm.Map(dst, x[i&1023])
		i++
	}
}

// BenchmarkRBFProject256 isolates the projection z = Ω x of
// BenchmarkRBFMap256: 8 192 products over Ω in float32 (32 KiB), each
// entry converted to float64; the conversions bound it (eight per cycle
// under AVX-512 on Zen 5, six under AVX2 on Zen 4). Target: ≤ 300 ns with
// the AVX-512 kernel, 0 allocs/op.
func BenchmarkRBFProject256(b *testing.B) {
	fm := rbfMap(b, 0.1, 256, 32, 1)
	x, _ := benchEvents(32)
	z := make([]float64, 256)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		fm.project(z, x[i&1023])
		i++
	}
}

// BenchmarkSincos compares 256 math.Sincos calls with sincosRFF on 256
// arguments (the sin/cos of BenchmarkRBFMap256).
func BenchmarkSincos(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	z := make([]float64, 256)
	for i := range z {
		z[i] = 20 * r.NormFloat64()
	}
	p := make([]float64, 512)
	b.Run("math.Sincos", func(b *testing.B) {
		for b.Loop() {
			for k, x := range z {
				p[256+k], p[k] = math.Sincos(x)
			}
		}
	})
	b.Run("sincosRFF", func(b *testing.B) {
		for b.Loop() {
			copy(p[256:], z)
			sincosRFF(p, 1)
		}
	})
}

func BenchmarkPrequential(b *testing.B) {
	p := NewPrequential(1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Add(i%3 != 0)
		_ = p.Accuracy()
		i++
	}
}
