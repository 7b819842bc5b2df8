package sparse

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomEvent draws an event of n entries over dim indices with
// duplicates, entries that cancel and zeros.
func randomEvent(rng *rand.Rand, n, dim int) ([]int32, []float64) {
	idx := make([]int32, 0, n+2)
	val := make([]float64, 0, n+2)
	for len(idx) < n {
		i := int32(rng.IntN(dim))
		switch rng.IntN(6) {
		case 0: // a duplicate of an earlier index
			if len(idx) > 0 {
				i = idx[rng.IntN(len(idx))]
			}
		case 1: // an entry and its cancellation
			v := rng.NormFloat64()
			idx = append(idx, i, i)
			val = append(val, v, -v)
			continue
		case 2:
			idx = append(idx, i)
			val = append(val, 0)
			continue
		}
		idx = append(idx, i)
		val = append(val, rng.NormFloat64())
	}
	return idx, val
}

func densify(idx []int32, val []float64, dim int) []float64 {
	x := make([]float64, dim)
	for k, i := range idx {
		x[i] += val[k]
	}
	return x
}

// TestBuild: a built row is the densified event's nonzeros, bit for bit.
func TestBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b Builder
	for trial := range 2000 {
		dim := 1 + rng.IntN(300)
		n := rng.IntN(60)
		idx, val := randomEvent(rng, n, dim)
		if trial%7 == 0 { // a canonical event: the sorted fast path
			x := densify(idx, val, dim)
			idx, val = nil, nil
			for i, v := range x {
				if v != 0 {
					idx, val = append(idx, int32(i)), append(val, v)
				}
			}
		}
		r := b.Build(idx, val)
		x := densify(idx, val, dim)
		var want Row
		for i, v := range x {
			if v != 0 {
				want.Idx = append(want.Idx, int32(i))
				want.Val = append(want.Val, v)
			}
		}
		if !slices.Equal(r.Idx, want.Idx) || !slices.Equal(r.Val, want.Val) {
			t.Fatalf("trial %d: built %v, want %v", trial, r, want)
		}
		if err := Check(r, dim); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if d := b.FromDense(x); !slices.Equal(d.Idx, want.Idx) || !slices.Equal(d.Val, want.Val) {
			t.Fatalf("trial %d: FromDense %v, want %v", trial, d, want)
		}
	}
	if r := b.Build(nil, nil); r.Len() != 0 {
		t.Fatalf("empty event: %v", r)
	}
}

func denseDot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// TestDotIndex: Dot, DotDense and Index.Dots agree with the dense sums
// (Dots bit for bit with Dot), Dist2 with the dense distance.
func TestDotIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dim = 200
	var rows []Row
	var dense [][]float64
	var b Builder
	for range 100 {
		idx, val := randomEvent(rng, rng.IntN(40), dim)
		r := b.Build(idx, val)
		rows = append(rows, Clone([]Row{r})[0])
		dense = append(dense, densify(idx, val, dim))
	}
	ix := NewIndex(rows)
	dst := make([]float64, len(rows))
	for i, x := range rows {
		ix.Dots(dst, x)
		for j, y := range rows {
			d := Dot(x, y)
			if math.Float64bits(d) != math.Float64bits(dst[j]) {
				t.Fatalf("rows %d, %d: Dots %v, Dot %v", i, j, dst[j], d)
			}
			want := denseDot(dense[i], dense[j])
			if math.Abs(d-want) > 1e-12*(1+math.Abs(want)) {
				t.Fatalf("rows %d, %d: Dot %v, dense %v", i, j, d, want)
			}
			if g := DotDense(x, dense[j]); math.Abs(g-want) > 1e-12*(1+math.Abs(want)) {
				t.Fatalf("rows %d, %d: DotDense %v, dense %v", i, j, g, want)
			}
			var dd float64
			for k := range dim {
				e := dense[i][k] - dense[j][k]
				dd += e * e
			}
			if g := Dist2(Sq(x), Sq(y), d); math.Abs(g-dd) > 1e-12*(1+dd) {
				t.Fatalf("rows %d, %d: Dist2 %v, dense %v", i, j, g, dd)
			}
		}
		if Dist2(Sq(x), Sq(x), Dot(x, x)) != 0 {
			t.Fatalf("row %d: distance to itself is not 0", i)
		}
	}
}

// TestRing: random pushes and pops against a slice of copies; once the
// arena has settled, a steady stream allocates nothing.
func TestRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const slots = 17
	r := NewRing(slots, 8)
	var ref []Row
	var b Builder
	for step := range 20000 {
		if len(ref) > 0 && (len(ref) == slots || rng.IntN(3) == 0) {
			r.Pop()
			ref = ref[1:]
		} else {
			n := rng.IntN(30)
			if step%50 == 0 {
				n = 0
			}
			idx, val := randomEvent(rng, n, 1000)
			x := b.Build(idx, val)
			r.Push(x, Sq(x))
			ref = append(ref, Clone([]Row{x})[0])
		}
		if r.Len() != len(ref) {
			t.Fatalf("step %d: %d rows, want %d", step, r.Len(), len(ref))
		}
		live := 0
		for k, want := range ref {
			got := r.Row(k)
			if !slices.Equal(got.Idx, want.Idx) || !slices.Equal(got.Val, want.Val) || r.Sq(k) != Sq(want) {
				t.Fatalf("step %d: row %d is %v, want %v", step, k, got, want)
			}
			live += want.Len()
		}
		if r.Entries() != live {
			t.Fatalf("step %d: %d entries, want %d", step, r.Entries(), live)
		}
		if r.Arena() > 2*slots*30+64 {
			t.Fatalf("step %d: arena of %d entries for at most %d live", step, r.Arena(), slots*30)
		}
	}
	// Steady state: full ring, rows of up to 30 entries.
	rows := make([]Row, 64)
	for i := range rows {
		idx, val := randomEvent(rng, rng.IntN(30), 1000)
		rows[i] = Clone([]Row{b.Build(idx, val)})[0]
	}
	for i := range 10 * slots {
		if r.Len() == slots {
			r.Pop()
		}
		r.Push(rows[i%len(rows)], 0)
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		r.Pop()
		r.Push(rows[i%len(rows)], 0)
		i++
	}); a != 0 {
		t.Fatalf("%v allocations per Pop+Push once warm", a)
	}
}

// BenchmarkRingPush: Pop and Push of a 30-entry row in a full window of
// 2 000 rows. Target: well under 100 ns, 0 allocs.
func BenchmarkRingPush(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	var bl Builder
	rows := make([]Row, 256)
	for i := range rows {
		idx, val := randomEvent(rng, 30, 1<<18)
		rows[i] = Clone([]Row{bl.Build(idx, val)})[0]
	}
	r := NewRing(2000, 0)
	for i := range 4000 {
		if r.Len() == r.Cap() {
			r.Pop()
		}
		r.Push(rows[i%len(rows)], 0)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Pop()
		x := rows[i&255]
		r.Push(x, 0)
		i++
	}
}

// BenchmarkBuild30: an event of 30 hashed entries (unsorted, no
// duplicates) into a row. Target: under 1 µs, 0 allocs.
func BenchmarkBuild30(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	idx := make([]int32, 30)
	val := make([]float64, 30)
	for k := range idx {
		idx[k] = int32(rng.IntN(1 << 18))
		val[k] = 1
	}
	var bl Builder
	b.ReportAllocs()
	for b.Loop() {
		bl.Build(idx, val)
	}
}

// TestPostings: a FIFO window of rows in slots, through random adds and
// removals: Dots agrees bit for bit with a Dot per row held, the table
// keeps only the features held, and a steady window allocates nothing.
func TestPostings(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const slots = 23
	p := NewPostings(4)
	type held struct {
		s int32
		x Row
	}
	var win []held
	var b Builder
	next := int32(0)
	dst := make([]float64, slots)
	for step := range 6000 {
		if len(win) > 0 && (len(win) == slots || rng.IntN(3) == 0) {
			p.Remove(win[0].s, win[0].x)
			win = win[1:]
		} else {
			// Skewed indices: some features in many rows, most rare.
			dim := 40
			if rng.IntN(2) == 0 {
				dim = 100000
			}
			idx, val := randomEvent(rng, rng.IntN(20), dim)
			x := Clone([]Row{b.Build(idx, val)})[0]
			p.Add(next, x)
			win = append(win, held{next, x})
			next = (next + 1) % slots
		}
		distinct := map[int32]bool{}
		for _, h := range win {
			for _, i := range h.x.Idx {
				distinct[i] = true
			}
		}
		if p.Features() != len(distinct) {
			t.Fatalf("step %d: %d features indexed, %d held", step, p.Features(), len(distinct))
		}
		if step%10 == 0 {
			idx, val := randomEvent(rng, 25, 40)
			x := b.Build(idx, val)
			clear(dst)
			p.Dots(dst, x)
			for _, h := range win {
				if d := Dot(x, h.x); math.Float64bits(d) != math.Float64bits(dst[h.s]) {
					t.Fatalf("step %d: slot %d: Dots %v, Dot %v", step, h.s, dst[h.s], d)
				}
			}
		}
	}
	rows := make([]Row, 50)
	for i := range rows {
		idx, val := randomEvent(rng, 20, 300)
		rows[i] = Clone([]Row{b.Build(idx, val)})[0]
	}
	for _, h := range win {
		p.Remove(h.s, h.x)
	}
	if p.Features() != 0 {
		t.Fatalf("%d features left in an empty index", p.Features())
	}
	var ring [slots]Row // slot s holds ring[s]
	k := 0
	step := func() {
		s := k % slots
		if k >= slots {
			p.Remove(int32(s), ring[s])
		}
		ring[s] = rows[k%len(rows)]
		p.Add(int32(s), ring[s])
		k++
	}
	for range 2000 {
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Fatalf("%v allocations per step once warm", a)
	}
}
