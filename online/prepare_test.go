package online

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// preparerCase builds one variant of a model implementing Preparer, and
// draws its labels.
type preparerCase struct {
	name  string
	new   func(t testing.TB) Preparer
	label func(r *rand.Rand) float64
}

// preparerDim is the input dimension of the preparer cases.
const preparerDim = 5

// preparerCases returns every variant of MAM and OMAM: each kernel, plain
// and balanced (raw and normalised), without forgetting, with a window and
// with decay (a half-life short enough for the sweeps to flush).
func preparerCases() []preparerCase {
	kernels := []KernelSpec{
		{Type: KernelLinear},
		{Type: KernelRBF, Gamma: 0.3, Features: 24, Seed: 3},
		{Type: KernelLaplacian, Gamma: 0.5, Features: 24, Seed: 4},
	}
	forgets := []struct {
		name   string
		window Window
		decay  Decay
	}{
		{"none", Window{}, Decay{}},
		{"window", Window{Events: 40}, Decay{}},
		{"decay", Window{}, Decay{HalfLife: 15}},
		{"fastdecay", Window{}, Decay{HalfLife: 0.05}},
	}
	binary := func(r *rand.Rand) float64 { return float64(2*r.IntN(2) - 1) }
	const levels = 4
	level := func(r *rand.Rand) float64 { return float64(1 + r.IntN(levels)) }
	var cs []preparerCase
	for _, k := range kernels {
		for _, f := range forgets {
			for _, bal := range []bool{false, true} {
				p := MAMParams{Kernel: k, Balance: bal, Delta: 0.05, Window: f.window, Decay: f.decay}
				cs = append(cs, preparerCase{
					name: fmt.Sprintf("mam/%s/%s/balance=%v", k.Type, f.name, bal),
					new: func(t testing.TB) Preparer {
						t.Helper()
						m, err := NewMAM(preparerDim, p)
						if err != nil {
							t.Fatal(err)
						}
						return m
					},
					label: binary,
				})
				q := OMAMParams{Kernel: k, Levels: levels, Normalize: bal, Window: f.window, Decay: f.decay}
				cs = append(cs, preparerCase{
					name: fmt.Sprintf("omam/%s/%s/normalize=%v", k.Type, f.name, bal),
					new: func(t testing.TB) Preparer {
						t.Helper()
						return newOMAM(t, preparerDim, q)
					},
					label: level,
				})
			}
		}
	}
	return cs
}

// preparerEvent is one event of a test stream.
type preparerEvent struct {
	x        []float64
	y        float64
	labelled bool
}

// preparerStream returns n events, about 70% labelled, with an input with
// a NaN, one with +Inf, one with −Inf and all-zero inputs among them (some
// labelled, so that learning them is refused or, for 0, done).
func preparerStream(seed uint64, n int, label func(*rand.Rand) float64) []preparerEvent {
	r := rand.New(rand.NewPCG(seed, 99))
	ev := make([]preparerEvent, n)
	for i := range ev {
		x := make([]float64, preparerDim)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		if r.IntN(7) == 0 { // repeated inputs: ties and cancellations
			x[0] = 1
		}
		ev[i] = preparerEvent{x: x, y: label(r), labelled: r.IntN(10) < 7}
	}
	special := func(i int, f func(x []float64)) {
		if i < n {
			f(ev[i].x)
			ev[i].labelled = true
		}
	}
	special(3, func(x []float64) { x[2] = math.NaN() })
	special(n/3, func(x []float64) { x[1] = math.Inf(1) })
	special(n/3+1, func(x []float64) { x[4] = math.Inf(-1) })
	special(0, func(x []float64) { clear(x) })
	special(n/2, func(x []float64) { clear(x) })
	if n > 10 {
		ev[n/2+1].x = make([]float64, preparerDim) // zero, unlabelled
		ev[n/2+1].labelled = false
	}
	return ev
}

// samePrediction reports whether a and b are equal, floats compared bit
// for bit.
func samePrediction(a, b Prediction) bool {
	fb := math.Float64bits
	return fb(a.Score) == fb(b.Score) && a.Label == b.Label &&
		fb(a.MistakeBound) == fb(b.MistakeBound) && a.HasBound == b.HasBound &&
		fb(a.Delta) == fb(b.Delta) && a.N == b.N && a.Version == b.Version &&
		fb(a.Probability) == fb(b.Probability) && a.HasProbability == b.HasProbability
}

func mustMarshal(t testing.TB, m Model) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPrepareMatchesObserve feeds one stream to two identical models, one
// through Observe and one through Prepare + ObservePrepared with a buffer
// reused across events: every Prediction and the final state must be
// identical bit for bit.
func TestPrepareMatchesObserve(t *testing.T) {
	for _, c := range preparerCases() {
		t.Run(c.name, func(t *testing.T) {
			a, b := c.new(t), c.new(t)
			ev := preparerStream(11, 3000, c.label)
			buf := make([]float64, b.PreparedLen())
			saved := make([]float64, len(buf))
			var scored, learned int
			for i, e := range ev {
				pa := a.Observe(e.x, e.y, e.labelled)
				b.Prepare(buf, e.x)
				copy(saved, buf)
				pb := b.ObservePrepared(buf, e.x, e.y, e.labelled)
				for j := range buf {
					if math.Float64bits(buf[j]) != math.Float64bits(saved[j]) {
						t.Fatalf("event %d: ObservePrepared modified prep[%d]", i, j)
					}
				}
				if !samePrediction(pa, pb) {
					t.Fatalf("event %d (x %v): Observe %+v, Prepare+ObservePrepared %+v", i, e.x, pa, pb)
				}
				if pa.Score != 0 {
					scored++
				}
				if i == len(ev)/2 && !bytes.Equal(mustMarshal(t, a), mustMarshal(t, b)) {
					t.Fatalf("states differ after %d events", i+1)
				}
			}
			learned = int(a.Examples())
			if scored < len(ev)/2 || learned < len(ev)/2 {
				t.Fatalf("degenerate stream: %d scored, %d learned", scored, learned)
			}
			if a.Examples() != b.Examples() {
				t.Fatalf("Examples %d and %d", a.Examples(), b.Examples())
			}
			if !bytes.Equal(mustMarshal(t, a), mustMarshal(t, b)) {
				t.Fatal("final states differ")
			}
		})
	}
}

// TestPrepareNonFinite checks the preparation of inputs with a NaN or an
// infinite entry: nothing is scored or learned, as with Observe.
func TestPrepareNonFinite(t *testing.T) {
	for _, c := range preparerCases() {
		t.Run(c.name, func(t *testing.T) {
			m := c.new(t)
			r := rand.New(rand.NewPCG(5, 5))
			for _, e := range preparerStream(2, 200, c.label) {
				m.Observe(e.x, e.y, e.labelled)
			}
			before := mustMarshal(t, m)
			buf := make([]float64, m.PreparedLen())
			for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				x := []float64{0.1, 0.2, v, 0.3, 0.4}
				m.Prepare(buf, x)
				p := m.ObservePrepared(buf, x, c.label(r), true)
				if p.Score != 0 || p.Label != 0 || p.HasBound {
					t.Fatalf("x %v: %+v", x, p)
				}
			}
			if !bytes.Equal(before, mustMarshal(t, m)) {
				t.Fatal("a non-finite input changed the state")
			}
		})
	}
}

// TestPrepareConcurrent runs Prepare on one shared model from several
// goroutines, each with its own buffer and stream, while ObservePrepared
// (and, in one goroutine, Observe) run under a mutex; the order in which
// events were learned is recorded and replayed serially through Observe on
// a fresh model, which must give the same predictions and state. Run with
// -race.
func TestPrepareConcurrent(t *testing.T) {
	const workers, perWorker = 4, 600
	for _, c := range preparerCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := c.new(t)
			streams := make([][]preparerEvent, workers)
			for g := range streams {
				streams[g] = preparerStream(uint64(100+g), perWorker, c.label)
			}
			type done struct {
				g, i int
				p    Prediction
			}
			var (
				mu    sync.Mutex
				order []done
				wg    sync.WaitGroup
			)
			for g := range workers {
				wg.Go(func() {
					buf := make([]float64, m.PreparedLen())
					for i, e := range streams[g] {
						if g == 0 && i%3 == 0 { // Observe, while the others prepare
							mu.Lock()
							p := m.Observe(e.x, e.y, e.labelled)
							order = append(order, done{g, i, p})
							mu.Unlock()
							continue
						}
						m.Prepare(buf, e.x) // outside the lock
						mu.Lock()
						p := m.ObservePrepared(buf, e.x, e.y, e.labelled)
						order = append(order, done{g, i, p})
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(order) != workers*perWorker {
				t.Fatalf("%d events recorded", len(order))
			}
			ref := c.new(t)
			for k, d := range order {
				e := streams[d.g][d.i]
				if p := ref.Observe(e.x, e.y, e.labelled); !samePrediction(p, d.p) {
					t.Fatalf("event %d (worker %d, #%d): serial %+v, concurrent %+v", k, d.g, d.i, p, d.p)
				}
			}
			if !bytes.Equal(mustMarshal(t, ref), mustMarshal(t, m)) {
				t.Fatal("final states differ")
			}
		})
	}
}

// TestPrepareNoAlloc checks that Prepare + ObservePrepared do not allocate
// (labelled events: window slides and decay sweeps included).
func TestPrepareNoAlloc(t *testing.T) {
	for _, c := range preparerCases() {
		t.Run(c.name, func(t *testing.T) {
			m := c.new(t)
			ev := preparerStream(7, 512, c.label)
			buf := make([]float64, m.PreparedLen())
			i := 0
			if a := testing.AllocsPerRun(2000, func() {
				e := ev[i%len(ev)]
				i++
				m.Prepare(buf, e.x)
				m.ObservePrepared(buf, e.x, e.y, e.labelled || i%2 == 0)
			}); a != 0 {
				t.Fatalf("%v allocs per Prepare + ObservePrepared", a)
			}
		})
	}
}

// TestPreparePanics checks the length checks of Prepare and
// ObservePrepared.
func TestPreparePanics(t *testing.T) {
	for _, c := range preparerCases() {
		m := c.new(t)
		n := m.PreparedLen()
		x := make([]float64, preparerDim)
		y := c.label(rand.New(rand.NewPCG(1, 1)))
		for _, bad := range []struct {
			name string
			f    func()
		}{
			{"short dst", func() { m.Prepare(make([]float64, n-1), x) }},
			{"long dst", func() { m.Prepare(make([]float64, n+1), x) }},
			{"short x", func() { m.Prepare(make([]float64, n), x[:preparerDim-1]) }},
			{"short prep", func() { m.ObservePrepared(make([]float64, n-1), x, y, true) }},
			{"long x", func() { m.ObservePrepared(make([]float64, n), append(x, 0), y, true) }},
			{"bad label", func() { m.ObservePrepared(make([]float64, n), x, 0.5, true) }},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s did not panic", c.name, bad.name)
					}
				}()
				bad.f()
			}()
		}
	}
}
