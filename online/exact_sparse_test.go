package online

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestExactMAMSparse streams the same events into an exact-kernel mam built
// for hashed features (ObserveSparse) and one built for dense inputs
// (Observe on the densified x), for every kernel, plain and balanced, with
// a budget that wraps many times: every prediction agrees (label exactly,
// score and bound within 1e-9 relative); the state is StateClose to the
// dense one's; the per-event path allocates nothing once warm; the state
// survives an encoding round trip (UnmarshalBinary and Restore from the
// bytes alone) and continues identically.
func TestExactMAMSparse(t *testing.T) {
	const dim = 30
	reg := MustRegistry(MAMType())
	for _, c := range []struct {
		name string
		k    KernelSpec
	}{
		{"linear", KernelSpec{Type: KernelLinear}},
		{"rbf", KernelSpec{Type: KernelRBF, Gamma: 0.4}},
		{"rbf_peaked", KernelSpec{Type: KernelRBF, Gamma: 200}},
		{"laplacian", KernelSpec{Type: KernelLaplacian, Gamma: 0.7}},
		{"polynomial", KernelSpec{Type: KernelPolynomial, Degree: 3, Coef0: 1}},
	} {
		for _, balance := range []bool{false, true} {
			name := c.name + "_plain"
			if balance {
				name = c.name + "_balanced"
			}
			t.Run(name, func(t *testing.T) {
				p := MAMParams{Kernel: c.k, Balance: balance, Delta: DefaultDelta, Budget: 40}
				sm, err := reg.New(Spec{Type: MAMName, Dim: dim, Params: &p, MaxFeatures: 64})
				if err != nil {
					t.Fatal(err)
				}
				if err := SparseSupport(sm); err != nil {
					t.Fatal(err)
				}
				dm, err := NewExactMAM(dim, p)
				if err != nil {
					t.Fatal(err)
				}
				if err := SparseSupport(dm); err == nil {
					t.Fatal("a dense exact mam says it takes sparse input")
				}
				s := sm.(*ExactMAM)
				evs := randomSparseStream(rand.New(rand.NewPCG(7, 8)), dim, 700, 12, true)
				for i := range evs {
					if i%23 == 0 { // an event without features
						evs[i].idx, evs[i].val = nil, nil
						clear(evs[i].x)
					}
					if i%29 == 0 && len(evs[i].idx) > 0 { // an entry cancelled
						e := &evs[i]
						e.idx, e.val = append(e.idx, e.idx[0]), append(e.val, -e.x[e.idx[0]])
						e.x[e.idx[0]] = 0
					}
				}
				var worst float64
				for i, e := range evs {
					p := s.ObserveSparse(e.idx, e.val, e.y, e.labelled)
					q := dm.Observe(e.x, e.y, e.labelled)
					if p.Label != q.Label || p.HasBound != q.HasBound || p.N != q.N {
						t.Fatalf("event %d: sparse %+v, dense %+v", i, p, q)
					}
					d := math.Abs(p.Score-q.Score) / max(math.Abs(q.Score), 1e-300)
					if q.Score == 0 {
						d = math.Abs(p.Score)
					}
					worst = max(worst, d)
					if d > 1e-9 || math.Abs(p.MistakeBound-q.MistakeBound) > 1e-9 {
						t.Fatalf("event %d: score %v bound %v, dense %v %v", i, p.Score, p.MistakeBound, q.Score, q.MistakeBound)
					}
				}
				t.Logf("largest relative score difference %.1e", worst)
				if s.Stored() != 40 || s.Examples() < 500 {
					t.Fatalf("%d stored of %d", s.Stored(), s.Examples())
				}

				k := 0
				if a := testing.AllocsPerRun(300, func() {
					e := evs[k%len(evs)]
					s.ObserveSparse(e.idx, e.val, e.y, true)
					dm.Observe(e.x, e.y, true)
					k++
				}); a != 0 {
					t.Fatalf("%v allocations per event", a)
				}
				if err := s.checkState(); err != nil {
					t.Fatal(err)
				}

				b, err := s.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				back, err := reg.New(Spec{Type: MAMName, Dim: dim, Params: &p, MaxFeatures: 64})
				if err != nil {
					t.Fatal(err)
				}
				if err := back.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				restored, err := reg.Restore(b)
				if err != nil {
					t.Fatal(err)
				}
				for name, o := range map[string]Model{"unmarshal": back, "restore": restored} {
					if b2, _ := o.MarshalBinary(); !bytes.Equal(b, b2) {
						t.Fatalf("%s: re-encoding differs", name)
					}
					if err := StateClose(s, o, 0); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				for i, e := range evs[:100] {
					p := s.ObserveSparse(e.idx, e.val, e.y, e.labelled)
					for name, o := range map[string]Model{"unmarshal": back, "restore": restored} {
						if q := o.(SparseModel).ObserveSparse(e.idx, e.val, e.y, e.labelled); p != q {
							t.Fatalf("%s: event %d: %+v, original %+v", name, i, q, p)
						}
					}
				}
				for i := 0; i < len(b); i += 1 + len(b)/200 {
					if _, err := reg.Restore(b[:i]); !errors.Is(err, ErrFormat) {
						t.Fatalf("truncated to %d of %d bytes: %v", i, len(b), err)
					}
				}
			})
		}
	}
}

// TestExactMAMSparseHashed: at 2^18 dimensions with a budget of 2 000 (a
// dense budget would be 2 000 × 2^18 values and is refused), an exact rbf
// mam of hashed features learns an interaction of two categorical fields
// that no linear model of the one-hot features can: prequential error
// below 20% once the budget is full (11.5%), where linear mam stays near 50%.
func TestExactMAMSparseHashed(t *testing.T) {
	const bits = 18
	reg := MustRegistry(MAMType())
	p := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.25}, Balance: true, Delta: DefaultDelta, Budget: 2000}
	if _, err := reg.New(Spec{Type: MAMName, Dim: 1 << bits, Params: &p}); err == nil {
		t.Fatal("a dense budget of 2 000 × 2^18 values was built")
	}
	m, err := reg.New(Spec{Type: MAMName, Dim: 1 << bits, Params: &p, MaxFeatures: 64})
	if err != nil {
		t.Fatal(err)
	}
	lin, err := reg.New(Spec{Type: MAMName, Dim: 1 << bits, Params: &MAMParams{Kernel: KernelSpec{Type: KernelLinear}, Balance: true, Delta: DefaultDelta}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	hash := func(f, v int) (int32, float64) {
		h := (uint64(f)*0x9E3779B97F4A7C15 ^ uint64(v)*0xBF58476D1CE4E5B9) * 0xD6E8FEB86659FD93
		return int32(h >> (64 - bits)), float64(1 - 2*int(h>>20&1))
	}
	wrong, wrongLin, n := 0, 0, 0
	idx, val := make([]int32, 8), make([]float64, 8)
	for i := range 8000 {
		v0, v1 := rng.IntN(6), rng.IntN(6)
		y := 1.0 // a checkerboard of the two fields: no linear function of their one-hot features
		if (v0+v1)%2 == 0 {
			y = -1
		}
		idx[0], val[0] = hash(0, v0)
		idx[1], val[1] = hash(1, v1)
		for f := 2; f < 8; f++ { // noise fields of 1 000 values
			idx[f], val[f] = hash(f, rng.IntN(1000))
		}
		p := m.(SparseModel).ObserveSparse(idx, val, y, true)
		q := lin.(SparseModel).ObserveSparse(idx, val, y, true)
		if i >= 4000 {
			n++
			if float64(p.Label) != y {
				wrong++
			}
			if float64(q.Label) != y {
				wrongLin++
			}
		}
	}
	e, el := float64(wrong)/float64(n), float64(wrongLin)/float64(n)
	t.Logf("prequential error: exact rbf %.3f, linear %.3f", e, el)
	if e > 0.2 || el < 0.4 {
		t.Fatalf("exact rbf error %.3f (want < 0.2), linear %.3f (want ≥ 0.4)", e, el)
	}
}

// TestExactMAMSparseValidation: the budget is bounded by the entries of an
// event, not the dimension; window and decay are refused as for dense
// inputs.
func TestExactMAMSparseValidation(t *testing.T) {
	p := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Delta: DefaultDelta, Budget: 5000}
	if err := p.ValidateSparse(1<<30, 4096); err == nil || !strings.Contains(err.Error(), "budget×(features.max_features+7)") {
		t.Fatalf("budget 5000 × 4096 entries: %v", err)
	}
	if err := p.ValidateSparse(1<<30, 64); err != nil {
		t.Fatal(err)
	}
	p.Window.Events = 10
	if err := p.ValidateSparse(1<<18, 64); err == nil || !strings.Contains(err.Error(), "remove window") {
		t.Fatalf("window: %v", err)
	}
}

// BenchmarkExactMAMSparse is a labelled hashed event (30 entries among
// 2^18) into an exact rbf mam with a full budget of 500. Target: ≤ 20 µs,
// 0 allocs (a dense budget of 500 rows of 2^18 would be 1 GiB).
func BenchmarkExactMAMSparse(b *testing.B) {
	p := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.05}, Balance: true, Delta: DefaultDelta, Budget: 500}
	m, err := p.NewSparse(1<<18, 64)
	if err != nil {
		b.Fatal(err)
	}
	s := m.(SparseModel)
	rng := rand.New(rand.NewPCG(3, 3))
	type ev struct {
		idx []int32
		val []float64
		y   float64
	}
	evs := make([]ev, 1024)
	for i := range evs {
		e := ev{y: float64(1 - 2*rng.IntN(2))}
		for f := range 30 {
			v := rng.IntN(10 << (f % 8))
			h := (uint64(f)*0x9E3779B97F4A7C15 ^ uint64(v)*0xBF58476D1CE4E5B9) * 0xD6E8FEB86659FD93
			e.idx = append(e.idx, int32(h>>46))
			e.val = append(e.val, 1)
		}
		evs[i] = e
	}
	for i := range 4 * len(evs) { // the arena and the index grow to the budget's content
		e := evs[i%len(evs)]
		s.ObserveSparse(e.idx, e.val, e.y, true)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := evs[i&1023]
		s.ObserveSparse(e.idx, e.val, e.y, true)
		i++
	}
}
