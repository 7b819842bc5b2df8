package online

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// omamSparseStream is mamSparseStream with levels 1..m: the level from a
// linear truth on the frequent coordinates, cut into m bands.
func omamSparseStream(rng *rand.Rand, d, n, maxNNZ, m int) []mamSparseEvent {
	evs := mamSparseStream(rng, d, n, maxNNZ)
	truth := make([]float64, 64)
	for i := range truth {
		truth[i] = rng.NormFloat64()
	}
	for k := range evs {
		var f float64
		for j, i := range evs[k].idx {
			if i < 64 {
				f += truth[i] * evs[k].val[j]
			}
		}
		l := 1 + int(math.Floor(float64(m)*(0.5+math.Atan(f+0.3*rng.NormFloat64())/math.Pi)))
		evs[k].y = float64(min(max(l, 1), m))
	}
	return evs
}

// TestOMAMSparse: omam takes hashed (sparse) input. With random features
// and generated frequencies (raw and normalised, with decay too, fixed
// gamma and auto),
// ObserveSparse gives the bits of Observe on the densified x at every
// event and the same encoded state. The normalised linear form agrees
// with Observe to rounding (scores within 1e-12 relative, levels equal but
// where a score lies within rounding of a threshold), the states within
// 1e-12 (StateClose), with dense events mixed in (which rebuild w and T
// first) and a restore in the middle.
func TestOMAMSparse(t *testing.T) {
	const d, m = 1 << 12, 4
	rng := rand.New(rand.NewPCG(5, 7))
	evs := omamSparseStream(rng, d, 3000, 20, m)
	x := make([]float64, d)
	rbf := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.4, Features: 32, Seed: 2, Sparse: true}, Levels: m, Normalize: true}
	raw := rbf
	raw.Normalize = false
	lap := rbf
	lap.Kernel.Type, lap.Decay.HalfLife = KernelLaplacian, 200
	lin := OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: m, Normalize: true}
	auto := rbf
	auto.Kernel.Gamma = 0
	autoLap := lap
	autoLap.Kernel.Gamma = 0
	for name, p := range map[string]OMAMParams{"rbf": rbf, "rbf raw": raw, "laplacian decay": lap, "linear": lin,
		"rbf auto": auto, "laplacian auto decay": autoLap} {
		t.Run(name, func(t *testing.T) {
			dense, err := NewOMAM(d, p)
			if err != nil {
				t.Fatal(err)
			}
			sparse, _ := NewOMAM(d, p)
			if err := SparseSupport(sparse); err != nil {
				t.Fatal(err)
			}
			exact := p.Kernel.Type != KernelLinear
			var worst float64
			flips := 0
			for k, e := range evs {
				if k == 1500 {
					b, _ := sparse.MarshalBinary()
					var r OMAM
					if err := r.UnmarshalBinary(b); err != nil {
						t.Fatal(err)
					}
					sparse = &r
				}
				pd := dense.Observe(densify(x, e.idx, e.val), e.y, e.labelled)
				var ps Prediction
				if k%101 == 50 { // a dense event for both
					ps = sparse.Observe(x, e.y, e.labelled)
				} else {
					ps = sparse.ObserveSparse(e.idx, e.val, e.y, e.labelled)
				}
				undensify(x, e.idx)
				if exact {
					if pd != ps {
						t.Fatalf("event %d: dense %+v, sparse %+v", k, pd, ps)
					}
					continue
				}
				diff := math.Abs(pd.Score-ps.Score) / max(math.Abs(pd.Score), 1e-6)
				worst = max(worst, diff)
				if pd.Label != ps.Label {
					flips++
				}
				if diff > 1e-12 || pd.N != ps.N {
					t.Fatalf("event %d: dense %+v, sparse %+v", k, pd, ps)
				}
			}
			if exact {
				bd, _ := dense.MarshalBinary()
				bs, _ := sparse.MarshalBinary()
				if !bytes.Equal(bd, bs) {
					t.Fatal("encodings differ")
				}
			} else {
				t.Logf("largest relative score difference %.2g, %d levels differ", worst, flips)
				if flips > 3 {
					t.Errorf("%d levels differ", flips)
				}
			}
			if err := StateClose(dense, sparse, 1e-12); err != nil {
				t.Fatal(err)
			}
			e := evs[0]
			b0, _ := sparse.MarshalBinary()
			PeekSparse(sparse, e.idx, e.val)
			if b1, _ := sparse.MarshalBinary(); !bytes.Equal(b0, b1) {
				t.Fatal("PeekSparse changed the state")
			}
			k := 0
			if a := testing.AllocsPerRun(100, func() {
				e := evs[k%len(evs)]
				k++
				sparse.ObserveSparse(e.idx, e.val, e.y, e.labelled)
			}); a != 0 {
				t.Fatalf("%v allocations per event", a)
			}
		})
	}
}

// TestOMAMSparseRefusals: what omam's sparse path does not take says why.
func TestOMAMSparseRefusals(t *testing.T) {
	for _, c := range []struct {
		p    OMAMParams
		want string
	}{
		{OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 8, Seed: 1}, Levels: 3, Normalize: true}, "kernel.sparse: true"},
		{OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 3}, "normalize false"},
		{OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 3, Normalize: true, Decay: Decay{HalfLife: 10}}, "decay"},
		{OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 8, Seed: 1, Sparse: true}, Levels: 3, Window: Window{Events: 4}}, "window"},
	} {
		o, err := NewOMAM(16, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if err := SparseSupport(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
	if _, err := OMAMType().New(16, &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Sparse: true}, Levels: 3, Budget: 8}); err == nil || !strings.Contains(err.Error(), "kernel.sparse") {
		t.Errorf("exact mode with kernel.sparse: %v", err)
	}
}

// BenchmarkOMAMLinearSparse30 is one labelled ObserveSparse of the
// normalised linear omam (5 levels) on a hashed event of 30 nonzeros in
// 2^18 dimensions. Target: ≤ 1 µs, 0 allocs.
func BenchmarkOMAMLinearSparse30(b *testing.B) {
	const d, nnz, pool = 1 << 18, 30, 1024
	rng := rand.New(rand.NewPCG(1, 1))
	evs := omamSparseStream(rng, d, pool, nnz, 5)
	o, _ := NewOMAM(d, OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 5, Normalize: true})
	for _, e := range evs {
		o.ObserveSparse(e.idx, e.val, e.y, true)
	}
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		e := evs[k%pool]
		o.ObserveSparse(e.idx, e.val, e.y, true)
		k++
	}
}

// TestOMAMSparseAuto: gamma auto with generated frequencies on hashed
// input. The same events through ObserveSparse (duplicates,
// cancellations, any order of indices, special values) and through
// Observe on the densified x give the same bits at every event and the
// same encodings, during the warm-up and after it, and a model restored
// from its encoding in the warm-up continues exactly as the original.
// The width is that of the densified inputs: at every labelled event of
// the warm-up S (and so gamma) has the bits of a model with the stored
// frequency matrix fed the densified inputs (the dense path's S, from
// the same pairs; their maps differ, so their scores do not).
func TestOMAMSparseAuto(t *testing.T) {
	const d, m = 1 << 12, 4
	rng := rand.New(rand.NewPCG(6, 1))
	evs := omamSparseStream(rng, d, 500, 12, m)
	special := []mamSparseEvent{ // in the warm-up: kept (or not) as Observe keeps them
		{idx: []int32{3, 9}, val: []float64{math.NaN(), 2}, y: 1, labelled: true},
		{idx: []int32{3, 9}, val: []float64{math.Inf(1), 2}, y: 2, labelled: true},
		{idx: []int32{5, 5}, val: []float64{1e300, 1e300}, y: 3, labelled: true},
		{idx: []int32{7, 1}, val: []float64{1e-300, -3e-300}, y: 4, labelled: true},
		{y: 1, labelled: true},
		{idx: []int32{2, 2}, val: []float64{1, -1}, y: 2, labelled: true},
		{idx: []int32{4, 8, 4}, val: []float64{1, 1, 1}, y: 3, labelled: true},
	}
	evs = append(evs[:10:10], append(special, evs[10:]...)...)
	x := make([]float64, d)
	rbf := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Features: 32, Seed: 2, Sparse: true}, Levels: m, Normalize: true}
	lap := rbf
	lap.Kernel.Type, lap.Decay.HalfLife = KernelLaplacian, 150
	raw := rbf
	raw.Normalize = false
	for name, p := range map[string]OMAMParams{"rbf": rbf, "laplacian decay": lap, "rbf raw": raw} {
		t.Run(name, func(t *testing.T) {
			sparse, dense := newOMAM(t, d, p), newOMAM(t, d, p)
			sp := p
			sp.Kernel.Sparse = false
			stored := newOMAM(t, d, sp) // the stored map: the dense path's S
			labelled := 0
			for k, e := range evs {
				pd := dense.Observe(densify(x, e.idx, e.val), e.y, e.labelled)
				stored.Observe(x, e.y, e.labelled)
				undensify(x, e.idx)
				ps := sparse.ObserveSparse(e.idx, e.val, e.y, e.labelled)
				if pd != ps {
					t.Fatalf("event %d: dense %+v, sparse %+v", k, pd, ps)
				}
				if e.labelled && labelled < autoWarmup+2 {
					labelled++
					g, s, final := sparse.AutoGamma()
					gw, sw, finalW := stored.AutoGamma()
					if math.Float64bits(s) != math.Float64bits(sw) || math.Float64bits(g) != math.Float64bits(gw) || final != finalW {
						t.Fatalf("event %d: S %v, gamma %v (final %v); from the densified inputs S %v, gamma %v (final %v)", k, s, g, final, sw, gw, finalW)
					}
				}
				if k == 12 || k == 40 || k == 90 || k == 300 { // in the warm-up (special events kept), just after, long after
					bd, _ := dense.MarshalBinary()
					bs, _ := sparse.MarshalBinary()
					if !bytes.Equal(bd, bs) {
						t.Fatalf("event %d: encodings differ", k)
					}
					r, err := OMAMType().Restore(bs)
					if err != nil {
						t.Fatalf("event %d: %v", k, err)
					}
					if rb, _ := r.MarshalBinary(); !bytes.Equal(rb, bs) {
						t.Fatalf("event %d: the restored model encodes differently", k)
					}
					sparse = r.(*OMAM)
				}
			}
			if _, _, final := sparse.AutoGamma(); !final {
				t.Fatal("the warm-up is not over")
			}
			if err := StateClose(dense, sparse, 0); err != nil {
				t.Fatal(err)
			}
			e := evs[0]
			b0, _ := sparse.MarshalBinary()
			PeekSparse(sparse, e.idx, e.val)
			if b1, _ := sparse.MarshalBinary(); !bytes.Equal(b0, b1) {
				t.Fatal("PeekSparse changed the state")
			}
		})
	}
}

// TestOMAMSparseAutoWarmup: during gamma auto's warm-up an omam with
// generated frequencies in 2^20 dimensions keeps its inputs by their
// entries and holds nothing of size dim (no dense warm-up buffer, no
// accumulator), encodes them as entries (tens of bytes each, not 8 MiB),
// restores to the same model, refuses a corrupt entry list, and does not
// allocate once the warm-up is over.
func TestOMAMSparseAutoWarmup(t *testing.T) {
	const d = 1 << 20
	p := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Features: 32, Seed: 3, Sparse: true}, Levels: 3, Normalize: true}
	o := newOMAM(t, d, p)
	rng := rand.New(rand.NewPCG(2, 2))
	for range 20 {
		idx := []int32{int32(rng.IntN(d)), int32(rng.IntN(d)), 7}
		o.ObserveSparse(idx, []float64{1, -1, 2}, float64(1+rng.IntN(3)), true)
	}
	a := o.auto
	if a.buf != nil || a.sw == nil || a.sw.dense != nil || o.sp.acc != nil {
		t.Fatal("a buffer of size dim held during the warm-up")
	}
	b, _ := o.MarshalBinary()
	fixed := len(b) - o.autoSize()
	if want := 12 + 20*(4+4+3*12); o.autoSize() != want {
		t.Fatalf("warm-up part of %d bytes, want %d", o.autoSize(), want)
	}
	r, err := OMAMType().Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	if rb, _ := r.MarshalBinary(); !bytes.Equal(rb, b) {
		t.Fatal("the restored model encodes differently")
	}
	idx, val := []int32{5, 1 << 19}, []float64{1, 1}
	if got, want := r.(*OMAM).ObserveSparse(idx, val, 2, true), o.ObserveSparse(idx, val, 2, true); got != want {
		t.Fatalf("restored %+v, original %+v", got, want)
	}
	// The first example's entries: count, indices, values (after its level).
	first := fixed + 12 + 4
	for name, mut := range map[string]func(c []byte){
		"zero value":         func(c []byte) { copy(c[first+4+3*4:], make([]byte, 8)) },
		"indices decreasing": func(c []byte) { copy(c[first+4+2*4:], []byte{0, 0, 0, 0}) },
		"index outside":      func(c []byte) { copy(c[first+4:], []byte{0, 0, 0x10, 0}) },
		"count":              func(c []byte) { c[first] = 200 },
	} {
		c := bytes.Clone(b)
		mut(c)
		if _, err := OMAMType().Restore(c); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
	for cut := fixed; cut < len(b); cut++ {
		if _, err := OMAMType().Restore(b[:cut]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: restored", cut, len(b))
		}
	}
	for o.Examples() < autoWarmup+10 {
		o.ObserveSparse([]int32{int32(rng.IntN(d)), int32(rng.IntN(d))}, []float64{1, 1}, float64(1+rng.IntN(3)), true)
	}
	if o.auto.warming() || o.autoSize() != 12 {
		t.Fatal("the warm-up's inputs are kept after it")
	}
	k := 0
	if a := testing.AllocsPerRun(100, func() {
		o.ObserveSparse([]int32{int32(k % d), 9, int32(k * 7919 % d)}, []float64{1, -1, 1}, float64(1+k%3), k%4 != 0)
		k++
	}); a != 0 {
		t.Fatalf("%v allocations per event after the warm-up", a)
	}
}

// TestOMAMSparseLinearHoldsSums: a normalised linear omam fed only hashed
// events holds its level sums and nothing else of size dim (the dense
// path's preparation buffer and its derived w and T are allocated by the
// first dense event, the window's scratch never), restored or not; a
// dense event then builds them and scores as the dense model does.
func TestOMAMSparseLinearHoldsSums(t *testing.T) {
	const d = 1 << 16
	p := OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 5, Normalize: true}
	rng := rand.New(rand.NewPCG(3, 3))
	evs := omamSparseStream(rng, d, 400, 20, 5)
	o, dense := newOMAM(t, d, p), newOMAM(t, d, p)
	x := make([]float64, d)
	for _, e := range evs {
		o.ObserveSparse(e.idx, e.val, e.y, e.labelled)
		dense.Observe(densify(x, e.idx, e.val), e.y, e.labelled)
		undensify(x, e.idx)
	}
	b, _ := o.MarshalBinary()
	r, err := OMAMType().Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*OMAM{"trained": o, "restored": r.(*OMAM)} {
		if m.prep != nil || m.w != nil || m.tot != nil || m.phiO != nil || (m.sp != nil && m.sp.acc != nil) {
			t.Errorf("%s: a vector of size dim besides the sums (prep %d, w %d, T %d, window %d)", name, len(m.prep), len(m.w), len(m.tot), len(m.phiO))
		}
		e := evs[1]
		pd := dense.Observe(densify(x, e.idx, e.val), 0, false)
		pm := m.Observe(x, 0, false)
		undensify(x, e.idx)
		if math.Abs(pd.Score-pm.Score) > 1e-12*math.Abs(pd.Score) || len(m.w) != d {
			t.Fatalf("%s: the first dense event scores %v, the dense model %v", name, pm.Score, pd.Score)
		}
	}
}

// BenchmarkOMAMRBFSparse30 is one labelled ObserveSparse of the normalised
// rbf omam (5 levels) with generated frequencies, D = 1024, on a hashed
// event of 30 nonzeros in 2^20 dimensions: fixed gamma, and gamma auto
// after its warm-up (the projection with the reference map, scaled by the
// width before the sin/cos). 0 allocs.
func BenchmarkOMAMRBFSparse30(b *testing.B) {
	const d, nnz, pool = 1 << 20, 30, 256
	rng := rand.New(rand.NewPCG(1, 1))
	evs := omamSparseStream(rng, d, pool, nnz, 5)
	for _, gamma := range []float64{0.05, 0} {
		name := "fixed"
		if gamma == 0 {
			name = "auto"
		}
		b.Run(name, func(b *testing.B) {
			o := newOMAM(b, d, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: gamma, Features: 1024, Seed: 1, Sparse: true}, Levels: 5, Normalize: true})
			for _, e := range evs { // past the warm-up, thresholds fitted
				o.ObserveSparse(e.idx, e.val, e.y, true)
			}
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				e := evs[k%pool]
				o.ObserveSparse(e.idx, e.val, e.y, true)
				k++
			}
		})
	}
}
