package refit

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
)

// centroid is a test trainer: the class-mean-difference classifier.
type centroid struct {
	flip  bool          // train a deliberately wrong model
	block chan struct{} // when set, Fit waits on it or on ctx
	fits  int
	mu    sync.Mutex
}

type centroidFit struct {
	w []float64
	b float64
	n int
}

func (f *centroidFit) Predict(x []float64) online.Prediction {
	s := f.b
	for i, v := range x {
		s += f.w[i] * v
	}
	l := 0
	if s > 0 {
		l = 1
	} else if s < 0 {
		l = -1
	}
	return online.Prediction{Score: s, Label: l, N: int64(f.n)}
}

func (f *centroidFit) MarshalBinary() ([]byte, error) {
	b := binary.LittleEndian.AppendUint32(nil, uint32(f.n))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.b))
	for _, v := range f.w {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b, nil
}

func (c *centroid) Label(v float64) (float64, bool) {
	return map[float64]float64{1: 1, -1: -1, 0: -1}[v], v == 1 || v == -1 || v == 0
}
func (c *centroid) Unmarshal(b []byte) (Fitted, error) {
	if len(b) < 12 || (len(b)-12)%8 != 0 {
		return nil, errors.New("bad centroid")
	}
	f := &centroidFit{n: int(binary.LittleEndian.Uint32(b)), b: math.Float64frombits(binary.LittleEndian.Uint64(b[4:]))}
	for i := 12; i < len(b); i += 8 {
		f.w = append(f.w, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
	}
	return f, nil
}

func (c *centroid) Fit(ctx context.Context, d *Data, prev Fitted) (Fitted, Stats, error) {
	c.mu.Lock()
	c.fits++
	block, flip := c.block, c.flip
	c.mu.Unlock()
	if block != nil {
		select {
		case <-ctx.Done():
			return nil, Stats{}, ctx.Err()
		case <-block:
		}
	}
	pos, neg := make([]float64, d.D), make([]float64, d.D)
	var np, nn float64
	for i := range d.N() {
		if d.Y[i] > 0 {
			np++
			for j, v := range d.Row(i) {
				pos[j] += v
			}
		} else {
			nn++
			for j, v := range d.Row(i) {
				neg[j] += v
			}
		}
	}
	f := &centroidFit{w: make([]float64, d.D), n: d.N()}
	var pp, qq float64
	for j := range f.w {
		pos[j] /= max(np, 1)
		neg[j] /= max(nn, 1)
		f.w[j] = pos[j] - neg[j]
		pp += pos[j] * pos[j]
		qq += neg[j] * neg[j]
	}
	f.b = (qq - pp) / 2
	if flip {
		for j := range f.w {
			f.w[j] = -f.w[j]
		}
		f.b = -f.b
	}
	return f, Stats{Iterations: 1}, nil
}

func sample(r *rand.Rand) ([]float64, float64) {
	y := 1.0
	if r.IntN(2) == 0 {
		y = -1
	}
	return []float64{y + r.NormFloat64()*0.5, r.NormFloat64()}, y
}

func TestVersionsAndScores(t *testing.T) {
	tr := &centroid{}
	m, err := New(Config{Type: "centroid", Dim: 2, Window: 100, EveryEvents: 50}, tr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports []Report
	m.OnRefit(func(r Report) { mu.Lock(); reports = append(reports, r); mu.Unlock() })
	m.Start()
	defer m.Close()
	r := rand.New(rand.NewPCG(1, 2))
	last := int64(0)
	for i := range 1000 {
		x, y := sample(r)
		p := m.Observe(x, y, true)
		if p.Version < last {
			t.Fatalf("event %d: version went back from %d to %d", i, last, p.Version)
		}
		last = p.Version
		if i < 50 && p.Version != 0 {
			t.Fatalf("event %d scored by version %d before any refit", i, p.Version)
		}
		time.Sleep(50 * time.Microsecond)
	}
	if last < 5 {
		t.Fatalf("only %d versions after 1000 events with refits every 50", last)
	}
	x, _ := sample(r)
	if p := m.Observe(x, 0, false); p.N == 0 || p.Label == 0 {
		t.Fatalf("prediction %+v from a fitted model", p)
	}
	m.Close()
	mu.Lock()
	defer mu.Unlock()
	for i, rep := range reports {
		if i == len(reports)-1 && errors.Is(rep.Err, context.Canceled) && !rep.Accepted {
			continue // a refit requested by the last events, cancelled by Close
		}
		if !rep.Accepted || rep.Window == 0 {
			t.Fatalf("report %d of %d: %+v", i+1, len(reports), rep)
		}
	}
}

func TestCancelledRefitKeepsServingModel(t *testing.T) {
	tr := &centroid{}
	m, _ := New(Config{Type: "centroid", Dim: 2, Window: 100, EveryEvents: 20}, tr)
	done := make(chan Report, 10)
	m.OnRefit(func(r Report) { done <- r })
	m.Start()
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		x, y := sample(r)
		m.Observe(x, y, true)
	}
	if rep := <-done; !rep.Accepted || rep.Version != 1 {
		t.Fatalf("first refit: %+v", rep)
	}
	// The report comes before the refit counts as finished (report): wait
	// for that, or the events below find it still running and request no
	// refit, and the wait for Refitting below ends at once on the first.
	for m.Refitting() {
		time.Sleep(time.Millisecond)
	}
	tr.mu.Lock()
	tr.block = make(chan struct{}) // the next fit hangs until cancelled
	tr.mu.Unlock()
	for range 20 {
		x, y := sample(r)
		m.Observe(x, y, true)
	}
	for !m.Refitting() {
		time.Sleep(time.Millisecond)
	}
	m.Close() // cancels the hanging refit
	rep := <-done
	if !errors.Is(rep.Err, context.Canceled) || rep.Accepted || rep.Version != 1 {
		t.Fatalf("cancelled refit: %+v", rep)
	}
	x, _ := sample(r)
	if p := m.Observe(x, 0, false); p.Version != 1 || p.Label == 0 {
		t.Fatalf("after a cancelled refit: %+v, want version 1 serving", p)
	}
}

// TestCloseReportsQueuedRefit: a refit requested but not started when
// Close cancels the loop is reported as cancelled and no longer counts as
// running. The loop's select picks at random between the cancellation and
// the request, so each of the 32 rounds takes either path; before, the
// cancellation path dropped the request (no report, running left set) and
// a caller waiting for the report waited forever.
func TestCloseReportsQueuedRefit(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 32 {
		m, err := New(Config{Type: "centroid", Dim: 2, Window: 100, EveryEvents: 1_000_000}, &centroid{})
		if err != nil {
			t.Fatal(err)
		}
		var reports []Report
		m.OnRefit(func(rep Report) { reports = append(reports, rep) })
		for range 10 {
			x, y := sample(r)
			m.Observe(x, y, true)
		}
		m.running.Store(true)
		m.reqs <- m.request() // queued, as Observe queues one
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Close came first
		m.wg.Add(1)
		m.loop(ctx)
		if len(reports) != 1 || !errors.Is(reports[0].Err, context.Canceled) || reports[0].Accepted || reports[0].Version != 0 {
			t.Fatalf("round %d: reports %+v, want one cancelled report at version 0", round, reports)
		}
		if m.Refitting() {
			t.Fatalf("round %d: still refitting after the loop ended", round)
		}
	}
}

func TestGuardRejectsWorseModel(t *testing.T) {
	tr := &centroid{}
	m, _ := New(Config{Type: "centroid", Dim: 2, Window: 200, EveryEvents: 100, Guard: 0.2}, tr)
	var reps []Report
	m.OnRefit(func(r Report) { reps = append(reps, r) }) // not started: refits run inline
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		x, y := sample(r)
		m.Observe(x, y, true)
	}
	tr.flip = true
	for range 100 {
		x, y := sample(r)
		m.Observe(x, y, true)
	}
	if len(reps) != 2 || !reps[0].Accepted || !reps[1].Rejected || m.Version() != 1 {
		t.Fatalf("reports %+v, version %d: want the flipped model rejected", reps, m.Version())
	}
	if !(reps[1].NewError > reps[1].OldError) {
		t.Fatalf("held-back errors old %v new %v", reps[1].OldError, reps[1].NewError)
	}
}

func TestRoundTrip(t *testing.T) {
	tr := &centroid{}
	m, _ := New(Config{Type: "centroid", Dim: 2, Window: 50, EveryEvents: 30}, tr)
	r := rand.New(rand.NewPCG(7, 8))
	for range 75 {
		x, y := sample(r)
		m.Observe(x, y, true)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := New(Config{Type: "centroid", Dim: 2, Window: 50, EveryEvents: 30}, &centroid{})
	if err := m2.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if m2.Version() != m.Version() || m2.Examples() != m.Examples() || m2.WindowSize() != m.WindowSize() {
		t.Fatalf("restored version %d examples %d window %d; want %d %d %d", m2.Version(), m2.Examples(), m2.WindowSize(), m.Version(), m.Examples(), m.WindowSize())
	}
	for range 100 {
		x, y := sample(r)
		p1, p2 := m.Observe(x, y, true), m2.Observe(x, y, true)
		if p1 != p2 {
			t.Fatalf("restored model diverges: %+v vs %+v", p1, p2)
		}
	}
	for i := range len(b) {
		if err := m2.UnmarshalBinary(b[:i]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d bytes: %v", i, err)
		}
	}
	other, _ := New(Config{Type: "centroid", Dim: 3, Window: 50, EveryEvents: 30}, &centroid{})
	if err := other.UnmarshalBinary(b); !errors.Is(err, ErrFormat) {
		t.Fatalf("wrong dimension: %v", err)
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	m, _ := New(Config{Type: "centroid", Dim: 2, Window: 1000, EveryEvents: 1 << 30}, &centroid{})
	m.RefitNow(context.Background())
	x := []float64{1, 2}
	if a := testing.AllocsPerRun(1000, func() { m.Observe(x, 1, true) }); a != 0 {
		t.Fatalf("Observe allocates %v per event", a)
	}

}
