package online

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestZigguratTables recomputes the ziggurat's tables (Marsaglia and Tsang
// 2000) that featuremap_hashed.go keeps as literals.
func TestZigguratTables(t *testing.T) {
	const m1 = 1 << 31
	dn, vn := zigR, 0.00492867323399
	tn := dn
	var kn [256]float64
	var wn, fn [256]float64
	q := vn / math.Exp(-.5*dn*dn)
	kn[0] = (dn / q) * m1
	wn[0], wn[255] = q/m1, dn/m1
	fn[0], fn[255] = 1, math.Exp(-.5*dn*dn)
	for i := 254; i >= 1; i-- {
		dn = math.Sqrt(-2 * math.Log(vn/dn+math.Exp(-.5*dn*dn)))
		kn[i+1] = (dn / tn) * m1
		tn = dn
		fn[i] = math.Exp(-.5 * dn * dn)
		wn[i] = dn / m1
	}
	for i := range 256 {
		if math.Abs(float64(zigK[i])-math.Floor(kn[i])) > 1 || !closeRel(zigW[i], wn[i], 1e-14) || !closeRel(zigF[i], fn[i], 1e-14) {
			t.Fatalf("layer %d: table %#x %v %v, recomputed %v %v %v", i, zigK[i], zigW[i], zigF[i], kn[i], wn[i], fn[i])
		}
	}
}

// TestGenNormal: the generator's draws over many keys and rows are
// standard normal: mean, variance and fourth moment within 5 standard
// errors, and the Kolmogorov–Smirnov distance to Φ below its 1% critical
// value; the wedge and tail paths are taken at the rate the tables
// predict (1.49%).
func TestGenNormal(t *testing.T) {
	const n = 1 << 20
	g := newGenMap(KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 256, Seed: 7})
	xs := make([]float64, 0, n)
	slow := 0
	t1 := make([]float64, 256)
	for j := 0; len(xs) < n; j++ {
		clear(t1)
		genAddColumn(t1, g.colKey(j), 1)
		xs = append(xs, t1...)
		c := g.colKey(j)
		for k := range uint64(256) {
			s := c + (k+1)*genP0
			if x := genNormal(c, k); x != t1[k] {
				t.Fatalf("genNormal(%d, %d) = %v, the column %v", j, k, x, t1[k])
			}
			h, l := mul64(s)
			r := h ^ l
			hz := int32(r)
			if uint32((hz^(hz>>31))-(hz>>31)) >= zigK[(r>>32)&255] {
				slow++
			}
		}
	}
	var m1, m2, m4 float64
	for _, x := range xs {
		m1 += x
		m2 += x * x
		m4 += x * x * x * x
	}
	m1, m2, m4 = m1/n, m2/n, m4/n
	if se := 1 / math.Sqrt(n); math.Abs(m1) > 5*se || math.Abs(m2-1) > 5*math.Sqrt(2)*se || math.Abs(m4-3) > 5*math.Sqrt(96)*se {
		t.Errorf("moments %v %v %v, want 0 1 3", m1, m2, m4)
	}
	slices.Sort(xs)
	var ks float64
	for i, x := range xs {
		c := 0.5 * math.Erfc(-x/math.Sqrt2)
		ks = max(ks, math.Abs(c-float64(i)/n), math.Abs(c-float64(i+1)/n))
	}
	if crit := 1.63 / math.Sqrt(n); ks > crit {
		t.Errorf("Kolmogorov–Smirnov distance %v > %v", ks, crit)
	}
	var want float64 // 1 − Σ_i zigK[i]/2³¹/256
	for _, k := range zigK {
		want += (1 - float64(k)/(1<<31)) / 256
	}
	if rate := float64(slow) / n; !closeRel(rate, want, 0.05) {
		t.Errorf("slow-path rate %v, want %v", rate, want)
	}
	t.Logf("moments %.4f %.4f %.4f, KS %.2g, slow path %.4f, range [%.3f, %.3f]", m1, m2, m4, ks, float64(slow)/n, xs[0], xs[n-1])
}

func mul64(s uint64) (uint64, uint64) { return bits.Mul64(s, s^genP1) }

// sparsePair draws two sparse inputs in dimension d sharing some entries,
// with γ·‖x − x'‖² (or the norm for laplacian) of order 1.
func sparsePair(r *rand.Rand, d int, nnz int, scale float64) (ia []int32, va []float64, ib []int32, vb []float64) {
	seen := map[int32]bool{}
	for len(ia) < nnz {
		i := int32(r.IntN(d))
		if seen[i] {
			continue
		}
		seen[i] = true
		v := r.NormFloat64() * scale
		ia = append(ia, i)
		va = append(va, v)
		switch r.IntN(3) {
		case 0: // shared, same value
			ib, vb = append(ib, i), append(vb, v)
		case 1: // shared, another value
			ib, vb = append(ib, i), append(vb, v+r.NormFloat64()*scale)
		}
	}
	for len(ib) < nnz {
		i := int32(r.IntN(d))
		if seen[i] {
			continue
		}
		seen[i] = true
		ib, vb = append(ib, i), append(vb, r.NormFloat64()*scale)
	}
	sortPairs(ia, va)
	sortPairs(ib, vb)
	return
}

func sortPairs(idx []int32, val []float64) {
	p := make([]int, len(idx))
	for i := range p {
		p[i] = i
	}
	slices.SortFunc(p, func(a, b int) int { return int(idx[a]) - int(idx[b]) })
	i2, v2 := slices.Clone(idx), slices.Clone(val)
	for k, j := range p {
		idx[k], val[k] = i2[j], v2[j]
	}
}

// sparseDist returns ‖x − x'‖² of two sparse inputs (increasing indices).
func sparseDist(ia []int32, va []float64, ib []int32, vb []float64) float64 {
	m := map[int32]float64{}
	for k, i := range ia {
		m[i] += va[k]
	}
	for k, i := range ib {
		m[i] -= vb[k]
	}
	var s float64
	for _, v := range m {
		s += v * v
	}
	return s
}

// TestGenMapKernel: on sparse inputs in 2^20 dimensions (10 nonzeros, some
// shared), the generated rbf and laplacian maps estimate their kernels:
// every |<φ(x), φ(x')> − K| within 4/sqrt(D) (the pair form's estimate has
// standard deviation ≤ sqrt(1/(2D))), and averaged over 200 seeds (200
// independent maps) the error is within 4 standard errors of 0 (no bias).
func TestGenMapKernel(t *testing.T) {
	const d, D = 1 << 20, 2048
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []string{KernelRBF, KernelLaplacian} {
		for _, gamma := range []float64{0.1, 1} {
			scale := 1 / math.Sqrt(gamma*10)
			if typ == KernelLaplacian {
				scale = 1 / (gamma * math.Sqrt(10))
			}
			kernel := func(d2 float64) float64 {
				if typ == KernelLaplacian {
					return math.Exp(-gamma * math.Sqrt(d2))
				}
				return math.Exp(-gamma * d2)
			}
			fm, err := NewFeatureMap(KernelSpec{Type: typ, Gamma: gamma, Features: D, Seed: 11, Sparse: true}, d)
			if err != nil {
				t.Fatal(err)
			}
			p, q := make([]float64, fm.Dim()), make([]float64, fm.Dim())
			var worst float64
			for range 50 {
				ia, va, ib, vb := sparsePair(r, d, 10, scale)
				fm.mapSparse(p, ia, va)
				fm.mapSparse(q, ib, vb)
				worst = max(worst, math.Abs(dot(p, q)-kernel(sparseDist(ia, va, ib, vb))))
			}
			if tol := 4 / math.Sqrt(D); worst > tol {
				t.Errorf("%s gamma %v: max |<φ(x),φ(x')> − K| = %v > %v", typ, gamma, worst, tol)
			}
			// Bias: one pair, 200 maps.
			ia, va, ib, vb := sparsePair(r, d, 10, scale)
			k := kernel(sparseDist(ia, va, ib, vb))
			var sum, sum2 float64
			const seeds = 200
			for s := range uint64(seeds) {
				fm, _ := NewFeatureMap(KernelSpec{Type: typ, Gamma: gamma, Features: 256, Seed: 100 + s, Sparse: true}, d)
				p, q := make([]float64, fm.Dim()), make([]float64, fm.Dim())
				fm.mapSparse(p, ia, va)
				fm.mapSparse(q, ib, vb)
				e := dot(p, q) - k
				sum += e
				sum2 += e * e
			}
			mean := sum / seeds
			se := math.Sqrt((sum2/seeds - mean*mean) / seeds)
			if math.Abs(mean) > 4*se+1e-12 {
				t.Errorf("%s gamma %v: mean error %v over %d maps, standard error %v", typ, gamma, mean, seeds, se)
			}
			t.Logf("%s gamma %v: max kernel error %.4f (1/sqrt(D) = %.4f); K = %.3f, mean error over %d maps %.4f ± %.4f",
				typ, gamma, worst, 1/math.Sqrt(D), k, seeds, mean, se)
		}
	}
}

// mapSparse is Map for sparse x (increasing distinct indices): the test's
// way to the generated projection.
func (m *FeatureMap) mapSparse(dst []float64, idx []int32, val []float64) float64 {
	m.gen.projectSparse(dst[m.out/2:], idx, val)
	return sincosRFF(dst, m.scale)
}

// TestGenMapDenseSparse: the dense input and its nonzero entries give the
// same bits, and the map of x does not depend on the dimension; Map
// reports a non-finite input as not ok.
func TestGenMapDenseSparse(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	for _, typ := range []string{KernelRBF, KernelLaplacian} {
		k := KernelSpec{Type: typ, Gamma: 0.7, Features: 64, Seed: 3, Sparse: true}
		small, _ := NewFeatureMap(k, 300)
		big, _ := NewFeatureMap(k, 1<<20)
		x := make([]float64, 300)
		var idx []int32
		var val []float64
		for j := range x {
			if r.IntN(10) == 0 {
				x[j] = r.NormFloat64()
				idx, val = append(idx, int32(j)), append(val, x[j])
			}
		}
		a, b := make([]float64, 128), make([]float64, 128)
		sa, _ := small.Map(a, x)
		sb := big.mapSparse(b, idx, val)
		if sa != sb || !slices.Equal(a, b) {
			t.Fatalf("%s: dense and sparse maps differ", typ)
		}
		x[7] = math.Inf(1)
		if _, ok := small.Map(a, x); ok {
			t.Fatalf("%s: infinite input mapped", typ)
		}
	}
}

// TestGenMapGolden pins the generator (featuremap_hashed.go): a change in
// it would silently change every restored model with kernel.sparse.
func TestGenMapGolden(t *testing.T) {
	g := newGenMap(KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 4, Seed: 1})
	l := newGenMap(KernelSpec{Type: KernelLaplacian, Gamma: 2, Features: 4, Seed: 1})
	got := []float64{
		genNormal(g.colKey(0), 0), genNormal(g.colKey(0), 1), genNormal(g.colKey(1), 0),
		genNormal(g.colKey(1<<18-1), 3), l.scale[0], l.scale[3],
	}
	z := make([]float64, 4)
	g.projectSparse(z, []int32{5, 1000, 262143}, []float64{1, -1, 0.5})
	got = append(got, z...)
	golden := []uint64{
		0xbfd86be2ed6899aa, 0x3fc80cf08795d63f, 0xbfe433f2b6473647, 0x3fe72e703d0b8736, 0x3ffd7f02ef72bec3, 0x4020addaa8b6238b,
		0x3ff82523c36da971, 0xbfeec8ab61c8a830, 0x3fe2dd66bccd67f2, 0x3ff1fffe2cbc7be0,
	}
	for i, v := range got {
		if i < len(golden) && math.Float64bits(v) != golden[i] {
			t.Errorf("value %d = %v (%#x), golden %v (%#x)", i, v, math.Float64bits(v), math.Float64frombits(golden[i]), golden[i])
		}
	}
	if len(golden) != len(got) {
		t.Errorf("golden values missing")
	}
}

// TestGenMapAllocs: projecting does not allocate.
func TestGenMapAllocs(t *testing.T) {
	fm, _ := NewFeatureMap(KernelSpec{Type: KernelLaplacian, Gamma: 1, Features: 128, Seed: 1, Sparse: true}, 1<<18)
	dst := make([]float64, fm.Dim())
	idx, val := []int32{3, 99, 1 << 17}, []float64{1, -1, 2}
	if a := testing.AllocsPerRun(100, func() { fm.mapSparse(dst, idx, val) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// BenchmarkGenProject30 is the generated projection of a hashed event: 30
// nonzeros (±1) in 2^18 dimensions, D = 1024 rows: 30 720 generated
// normals. Target: ≤ 3 ns per (row, nonzero), ≤ 90 µs per event.
func BenchmarkGenProject30(b *testing.B) {
	fm, _ := NewFeatureMap(KernelSpec{Type: KernelRBF, Gamma: 0.1, Features: 1024, Seed: 1, Sparse: true}, 1<<18)
	r := rand.New(rand.NewPCG(1, 2))
	evs := make([][]int32, 64)
	val := make([]float64, 30)
	for i := range val {
		val[i] = float64(1 - 2*r.IntN(2))
	}
	for e := range evs {
		for range 30 {
			evs[e] = append(evs[e], int32(r.IntN(1<<18)))
		}
		slices.Sort(evs[e])
	}
	z := make([]float64, 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		fm.gen.projectSparse(z, evs[i&63], val)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(30*1024), "ns/normal")
}
