package online

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// rffSparseParams are the random-feature configurations with the
// generated map that take sparse input: fixed gamma (plain, balanced,
// laplacian with decay) and gamma auto.
func rffSparseParams() map[string]MAMParams {
	fixed := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.3, Features: 64, Seed: 5, Sparse: true}, Balance: true, Delta: DefaultDelta}
	plain := fixed
	plain.Balance = false
	lap := fixed
	lap.Kernel.Type, lap.Kernel.Gamma, lap.Decay.HalfLife = KernelLaplacian, 0.5, 300
	auto := DefaultMAMParams()
	auto.Kernel.Features, auto.Kernel.Sparse, auto.Bandwidths = 64, true, 4
	autoPlain := auto
	autoPlain.Balance = false
	autoLap := auto
	autoLap.Kernel.Type = KernelLaplacian
	autoLap.Decay.HalfLife = 400
	return map[string]MAMParams{"rbf": fixed, "rbf plain": plain, "laplacian decay": lap,
		"auto": auto, "auto plain": autoPlain, "auto laplacian decay": autoLap}
}

// TestMAMSparseRFF: the rbf and laplacian MAM with generated frequencies
// give the same bits through ObserveSparse (duplicates, cancellations,
// any order of indices) as through Observe on the densified x, at every
// event: scores, bounds, and the encoded states (during gamma auto's
// warm-up too); a model restored from its encoding in the warm-up and
// after it continues exactly as the original.
func TestMAMSparseRFF(t *testing.T) {
	const d = 1 << 12
	rng := rand.New(rand.NewPCG(3, 4))
	evs := mamSparseStream(rng, d, 600, 12)
	x := make([]float64, d)
	for name, p := range rffSparseParams() {
		t.Run(name, func(t *testing.T) {
			dense, err := NewMAM(d, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := SparseSupport(dense); err != nil {
				t.Fatal(err)
			}
			sparse, _ := NewMAM(d, p)
			for k, e := range evs {
				pd := dense.Observe(densify(x, e.idx, e.val), e.y, e.labelled)
				undensify(x, e.idx)
				ps := sparse.ObserveSparse(e.idx, e.val, e.y, e.labelled)
				if pd != ps {
					t.Fatalf("event %d: dense %+v, sparse %+v", k, pd, ps)
				}
				if k == 30 || k == 70 || k == 400 { // in the warm-up, just after, long after
					bd, _ := dense.MarshalBinary()
					bs, _ := sparse.MarshalBinary()
					if !bytes.Equal(bd, bs) {
						t.Fatalf("event %d: encodings differ", k)
					}
					var r MAM
					if err := r.UnmarshalBinary(bs); err != nil {
						t.Fatalf("event %d: %v", k, err)
					}
					sparse = &r
				}
			}
			// Special values: not finite (neither scored nor learned),
			// huge, tiny, empty, cancelled, duplicates.
			for k, c := range []mamSparseEvent{
				{idx: []int32{3, 9}, val: []float64{math.NaN(), 2}, y: -1},
				{idx: []int32{3, 9}, val: []float64{math.Inf(1), 2}, y: -1},
				{idx: []int32{5, 5}, val: []float64{1e300, 1e300}, y: 1},
				{idx: []int32{7, 1}, val: []float64{1e-300, -3e-300}, y: 1},
				{y: -1},
				{idx: []int32{2, 2}, val: []float64{1, -1}, y: 1},
				{idx: []int32{4, 8, 4}, val: []float64{1, 1, 1}, y: -1},
			} {
				pd := dense.Observe(densify(x, c.idx, c.val), c.y, true)
				undensify(x, c.idx)
				ps := sparse.ObserveSparse(c.idx, c.val, c.y, true)
				if pd != ps && !(math.IsNaN(pd.MistakeBound) && math.IsNaN(ps.MistakeBound)) {
					t.Fatalf("special case %d: dense %+v, sparse %+v", k, pd, ps)
				}
			}
			if err := StateClose(dense, sparse, 0); err != nil {
				t.Fatal(err)
			}
			// An unlabelled sparse event changes nothing encoded.
			b0, _ := sparse.MarshalBinary()
			e := evs[0]
			PeekSparse(sparse, e.idx, e.val)
			if b1, _ := sparse.MarshalBinary(); !bytes.Equal(b0, b1) {
				t.Fatal("PeekSparse changed the state")
			}
		})
	}
}

// TestMAMSparseRFFWarmupEncoding: during gamma auto's warm-up a model with
// generated frequencies in 2^20 dimensions encodes its kept inputs by
// their entries (a few hundred bytes each, not 8 MiB) and holds nothing
// of size dim, and a corrupt entry list is refused.
func TestMAMSparseRFFWarmupEncoding(t *testing.T) {
	const d = 1 << 20
	p := DefaultMAMParams()
	p.Kernel.Features, p.Kernel.Sparse = 32, true
	m, err := NewMAM(d, p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		idx := []int32{int32(rng.IntN(d)), int32(rng.IntN(d)), 7}
		m.ObserveSparse(idx, []float64{1, -1, 2}, float64(1-2*rng.IntN(2)), true)
	}
	if m.sp.acc != nil {
		t.Error("a dim-sized accumulator allocated for short events (a model per key would hold one each)")
	}
	b, _ := m.MarshalBinary()
	if len(b) > autoStateSize(p, d, 20)+20*(1+4+3*12)+200 {
		t.Fatalf("warm-up encoding of %d bytes", len(b))
	}
	var r MAM
	if err := r.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if err := StateClose(m, &r, 0); err != nil {
		t.Fatal(err)
	}
	// The last example's last value set to 0: refused.
	bad := bytes.Clone(b)
	copy(bad[len(bad)-8:], make([]byte, 8))
	if err := r.UnmarshalBinary(bad); err == nil || !strings.Contains(err.Error(), "zero or not finite") {
		t.Fatalf("zero entry: %v", err)
	}
	if err := r.UnmarshalBinary(b[:len(b)-3]); err == nil {
		t.Fatal("truncated warm-up restored")
	}
}

// TestMAMSparseRFFAllocs: ObserveSparse with generated frequencies does not
// allocate once warm (fixed gamma, and gamma auto after its warm-up).
func TestMAMSparseRFFAllocs(t *testing.T) {
	const d = 1 << 16
	rng := rand.New(rand.NewPCG(8, 9))
	evs := mamSparseStream(rng, d, 200, 30)
	for name, p := range rffSparseParams() {
		m, _ := NewMAM(d, p)
		for _, e := range evs {
			m.ObserveSparse(e.idx, e.val, e.y, e.labelled)
		}
		k := 0
		if a := testing.AllocsPerRun(200, func() {
			e := evs[k%len(evs)]
			k++
			m.ObserveSparse(e.idx, e.val, e.y, e.labelled)
		}); a != 0 {
			t.Fatalf("%s: %v allocations per event", name, a)
		}
	}
}

// TestMAMSparseRFFRefusals: what the sparse random-feature path does not
// take says why.
func TestMAMSparseRFFRefusals(t *testing.T) {
	stored, _ := NewMAM(16, MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 8, Seed: 1}, Delta: DefaultDelta})
	if err := SparseSupport(stored); err == nil || !strings.Contains(err.Error(), "kernel.sparse: true") {
		t.Errorf("stored map: %v", err)
	}
	w := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 8, Seed: 1, Sparse: true}, Delta: DefaultDelta, Window: Window{Events: 5}}
	win, err := NewMAM(16, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := SparseSupport(win); err == nil || !strings.Contains(err.Error(), "window") {
		t.Errorf("window: %v", err)
	}
	for _, tc := range []struct {
		p    MAMParams
		want string
	}{
		{MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 8, Seed: 1, Sparse: true, Orthogonal: true}, Delta: DefaultDelta}, "kernel.orthogonal"},
		{MAMParams{Kernel: KernelSpec{Type: KernelLinear, Sparse: true}, Delta: DefaultDelta}, "kernel.sparse"},
		{MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Sparse: true}, Delta: DefaultDelta, Budget: 10}, "kernel.sparse"},
	} {
		if _, err := MAMType().New(16, &tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error on %s", tc.p, err, tc.want)
		}
	}
	// 2^20 inputs: the stored map is refused by its size, the generated
	// one (fixed or auto) is built.
	big := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 1024, Seed: 1}, Delta: DefaultDelta}
	if _, err := NewMAM(1<<20, big); err == nil || !strings.Contains(err.Error(), "kernel.sparse") {
		t.Errorf("stored map in 2^20 dimensions: %v", err)
	}
	big.Kernel.Sparse = true
	if _, err := NewMAM(1<<20, big); err != nil {
		t.Error(err)
	}
	big.Kernel.Gamma = 0
	if _, err := NewMAM(1<<20, big); err != nil {
		t.Error(err)
	}
}

// TestMAMSparseRFFFingerprint: a model with generated frequencies and one
// with stored ones encode different parameters, so that the state of one
// never restores as the other's (the configuration's fingerprint covers
// the parameters too).
func TestMAMSparseRFFFingerprint(t *testing.T) {
	p := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 8, Seed: 1}, Balance: true, Delta: DefaultDelta}
	a, _ := NewMAM(16, p)
	p.Kernel.Sparse = true
	b, _ := NewMAM(16, p)
	ea, _ := a.MarshalBinary()
	eb, _ := b.MarshalBinary()
	if bytes.Equal(ea, eb) {
		t.Fatal("stored and generated maps encode the same")
	}
	var r MAM
	if err := r.UnmarshalBinary(ea); err != nil || r.Params().Kernel.Sparse {
		t.Fatalf("restored %+v, %v", r.Params(), err)
	}
	x := make([]float64, 16)
	x[3] = 1
	if pa, pb := a.Observe(x, 1, true), b.Observe(x, 1, true); pa.Score == pb.Score && math.Abs(pa.Score) > 0 {
		// both maps score their first example alike (f = 1·K(x,x)/…):
		// compare the second
		x[5] = 2
		if Peek(a, x).Score == Peek(b, x).Score {
			t.Fatal("stored and generated maps give the same scores")
		}
	}
}

// BenchmarkMAMRBFSparse30 is one labelled ObserveSparse of the rbf mam
// with generated frequencies (D = 1024, the default) on a hashed event of
// 30 nonzeros (±1) in 2^18 dimensions: the projection, O(D·nnz) = 30 720
// generated normals (BenchmarkGenProject30), then the dense model's work
// on φ, O(D) per bandwidth. Targets: fixed gamma ≤ 110 µs, gamma auto
// (6 bandwidths, the default) ≤ 130 µs; 0 allocs.
func BenchmarkMAMRBFSparse30(b *testing.B) {
	const d, nnz, pool = 1 << 18, 30, 256
	rng := rand.New(rand.NewPCG(1, 1))
	idx := make([][]int32, pool)
	val := make([][]float64, pool)
	ys := make([]float64, pool)
	for e := range idx {
		for range nnz {
			idx[e] = append(idx[e], int32(rng.IntN(d)))
			val[e] = append(val[e], float64(1-2*rng.IntN(2)))
		}
		ys[e] = float64(1 - 2*rng.IntN(2))
	}
	fixed := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.1, Features: DefaultRFFFeatures, Seed: 1, Sparse: true}, Balance: true, Delta: DefaultDelta}
	auto := DefaultMAMParams()
	auto.SetHashed()
	for _, c := range []struct {
		name string
		p    MAMParams
	}{{"gamma=0.1", fixed}, {"gamma=auto", auto}} {
		b.Run(c.name, func(b *testing.B) {
			m, err := NewMAM(d, c.p)
			if err != nil {
				b.Fatal(err)
			}
			for e := range 100 { // past gamma auto's warm-up
				m.ObserveSparse(idx[e%pool], val[e%pool], ys[e%pool], true)
			}
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				e := k % pool
				m.ObserveSparse(idx[e], val[e], ys[e], true)
				k++
			}
		})
	}
}

// TestMAMSparseRFFBeyondDenseDim: with generated frequencies nothing is
// kept per input index, so a mam takes 2^26 hashed inputs (past the dense
// limit), fixed gamma and auto, learns indices anywhere in the range,
// and its state restores through the registry as the same model.
func TestMAMSparseRFFBeyondDenseDim(t *testing.T) {
	const dim = 1 << 26
	for _, gamma := range []float64{0.5, 0} {
		p := DefaultMAMParams()
		p.Kernel = KernelSpec{Type: KernelRBF, Gamma: gamma, Features: 128, Seed: 3, Sparse: true}
		if err := p.ValidateSparse(dim, 8); err != nil {
			t.Fatal(err)
		}
		mm, err := p.NewSparse(dim, 8)
		if err != nil {
			t.Fatal(err)
		}
		m := mm.(SparseModel)
		for i := range 300 {
			m.ObserveSparse([]int32{int32(i % 5), int32(dim - 1 - i%11)}, []float64{1, float64(1 - 2*(i%2))}, float64(1-2*(i%2)), true)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 1<<20 {
			t.Fatalf("gamma %v: state of %d bytes", gamma, len(b))
		}
		r, err := MAMType().Restore(b)
		if err != nil {
			t.Fatalf("gamma %v: restore: %v", gamma, err)
		}
		x, v := []int32{2, dim - 5}, []float64{1, -1}
		if got, want := r.(SparseModel).ObserveSparse(x, v, 0, false), m.ObserveSparse(x, v, 0, false); got != want {
			t.Fatalf("gamma %v: restored %+v, saved %+v", gamma, got, want)
		}
	}
	lin := DefaultMAMParams()
	lin.Kernel = KernelSpec{Type: KernelLinear}
	if _, err := lin.NewSparse(dim, 8); err == nil {
		t.Fatal("a linear mam at 2^26: no error")
	}
}
