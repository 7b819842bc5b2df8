package online

import (
	"bytes"
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
// and generated frequencies (raw and normalised, with decay too),
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
	for name, p := range map[string]OMAMParams{"rbf": rbf, "rbf raw": raw, "laplacian decay": lap, "linear": lin} {
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
