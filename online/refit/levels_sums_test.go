package refit

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/rank"
)

// TestLevelsOnBoston: lsrrank with levels: 5 on boston_ordinal (levels
// 1..5, about 100 houses each), over the 10 stratified 70/30 splits. The
// training split is streamed once (refits every 20 labelled events, so
// the thresholds learn from about 330 prequential (score, level) pairs);
// the test split is then scored. The level's mean absolute error must be
// well below that of the best constant predictor (the training median, 3:
// MAE 1.2 on these balanced levels).
func TestLevelsOnBoston(t *testing.T) {
	var maeSum, zoSum, constSum, tauSum float64
	const splits = 10
	for k := range splits {
		Xtr, ytr, Xte, yte, d := bostonSplit(t, k)
		m, err := New(Config{Type: LSRRankName, Dim: d, Window: len(ytr), EveryEvents: 20, Levels: 5},
			&LSRRank{Kernels: []rank.Kernel{{Gamma: 0.03}}, Lambda: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ytr {
			y, ok := m.Label(ytr[i])
			if !ok {
				t.Fatalf("label %v refused", ytr[i])
			}
			m.Observe(Xtr[i*d:(i+1)*d], y, true)
		}
		th, ok := m.Thresholds(nil)
		if !ok || len(th) != 4 || !slices.IsSorted(th) {
			t.Fatalf("split %d: thresholds %v (fitted %v)", k, th, ok)
		}
		med := median(ytr)
		var mae, zo, cmae float64
		scores := make([]float64, len(yte))
		for i := range yte {
			p := m.Observe(Xte[i*d:(i+1)*d], 0, false)
			if p.Label < 1 || p.Label > 5 {
				t.Fatalf("split %d: level %d", k, p.Label)
			}
			e := math.Abs(float64(p.Label) - yte[i])
			mae += e
			if e != 0 {
				zo++
			}
			cmae += math.Abs(med - yte[i])
			scores[i] = p.Score
		}
		n := float64(len(yte))
		maeSum += mae / n
		zoSum += zo / n
		constSum += cmae / n
		tauSum += rank.Measure(scores, yte).KendallTauB
	}
	mae, zo, cmae, tau := maeSum/splits, zoSum/splits, constSum/splits, tauSum/splits
	t.Logf("lsrrank levels: 5, mean over %d splits: level MAE %.3f, zero-one %.3f (constant predictor MAE %.3f); τ-b %.3f",
		splits, mae, zo, cmae, tau)
	// Measured: MAE 0.363, zero-one 0.334, constant 1.205 (τ-b 0.794).
	if mae > 0.45 || mae > 0.4*cmae {
		t.Errorf("level MAE %.3f: want ≤ 0.45 and ≤ 0.4 × the constant predictor's %.3f", mae, cmae)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func TestLevelsConfig(t *testing.T) {
	if _, err := New(Config{Type: LSRRankName, Dim: 2, Window: 10, EveryEvents: 5, Levels: 1}, &LSRRank{}); err == nil {
		t.Error("levels: 1 accepted")
	}
	m, err := New(Config{Type: LSRRankName, Dim: 2, Window: 10, EveryEvents: 5, Levels: 5}, &LSRRank{Kernels: []rank.Kernel{{Gamma: 1}}, Lambda: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{0, 6, 2.5, -1, math.NaN(), math.Inf(1)} {
		if _, ok := m.Label(v); ok {
			t.Errorf("label %v accepted with levels: 5", v)
		}
	}
	for v := 1.0; v <= 5; v++ {
		if y, ok := m.Label(v); !ok || y != v {
			t.Errorf("label %v → %v, %v", v, y, ok)
		}
	}
	if _, ok := m.Thresholds(nil); ok {
		t.Error("thresholds fitted before any event")
	}
	if p := m.Observe([]float64{0, 0}, 0, false); p.Label != 0 {
		t.Errorf("label %d before the first refit", p.Label)
	}
	if _, err := New(Config{Type: LSRRankName, Dim: 2, Window: 10, EveryEvents: 5, Guard: 0.2}, rfTrainer()); err == nil {
		t.Error("guard accepted for a model fitting from running sums")
	}
}

func rfTrainer() *RFRank {
	return &RFRank{Kernels: []rank.Kernel{{Gamma: 0.5}, {Gamma: 0.05, V: 2}}, Lambda: 1e-3, Features: 64, Seed: 3}
}

// ordinalSample draws x ∈ R³ and a level 1..5 increasing in x₀ + sin(x₁).
func ordinalSample(r *rand.Rand) ([]float64, float64) {
	x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
	z := x[0] + math.Sin(x[1]) + 0.3*r.NormFloat64()
	return x, float64(min(5, max(1, 3+int(math.Round(z)))))
}

// TestRunningSumsMatchWindow: after 60 000 labelled events through a
// window of 250 (so 59 750 subtractions, and more through window.time)
// the running sums equal sums recomputed from the window's rows to 1e-9
// (max-norm relative), and the model they fit scores like one fitted on
// the window's rows.
func TestRunningSumsMatchWindow(t *testing.T) {
	const n, window = 60_000, 250
	tr := rfTrainer()
	m, err := New(Config{Type: LSRRankName, Dim: 3, Window: window, WindowTime: 200 * time.Millisecond, EveryEvents: 997}, tr)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(0, 0)
	m.now = func() time.Time { return clock }
	r := rand.New(rand.NewPCG(5, 6))
	dropped := 0
	for i := range n {
		// 1 ms apart with pauses of up to 150 ms: at a refit, window.time
		// drops events too.
		step := time.Millisecond
		if r.IntN(100) == 0 {
			step = time.Duration(r.IntN(150)) * time.Millisecond
		}
		clock = clock.Add(step)
		x, y := ordinalSample(r)
		before := m.WindowSize()
		m.Observe(x, y, true)
		expired := m.WindowSize() < before
		if expired {
			dropped++
		}
		if i == n/2 || i == n-1 || expired && dropped%10 == 1 {
			d := m.window()
			if int64(d.N()) != m.sums.N() {
				t.Fatalf("window %d rows, sums %d events", d.N(), m.sums.N())
			}
			fresh := rank.NewSums(m.sums.FeatureMap())
			for k := range d.N() {
				fresh.Add(d.Row(k), d.Y[k])
			}
			run := rank.NewSums(m.sums.FeatureMap())
			run.Copy(m.sums) // SumsClose flushes: leave the model's sums as they are
			if err := rank.SumsClose(run, fresh, 1e-9); err != nil {
				t.Fatalf("after %d events (window %d): %v", i+1, d.N(), err)
			}
		}
	}
	t.Logf("window.time dropped events at %d of %d refits", dropped, n/997)
	if dropped == 0 {
		t.Fatal("window.time never dropped an event: the test does not exercise it")
	}
	rep := m.RefitNow(context.Background())
	if !rep.Accepted {
		t.Fatalf("refit: %+v", rep)
	}
	rows, _, _ := tr.Fit(context.Background(), m.window(), nil)
	var worst float64
	for range 200 {
		x, _ := ordinalSample(r)
		worst = math.Max(worst, math.Abs(m.Observe(x, 0, false).Score-rows.Predict(x).Score))
	}
	t.Logf("window %d: max |f_running − f_rows| = %.2g", m.WindowSize(), worst)
	if worst > 1e-6 {
		t.Fatalf("running-sums model differs from the rows' model by %g", worst)
	}
}

// TestRestoreContinuesIdentically: a model with levels (exact lsrrank) and
// one with levels and running sums (features) are encoded mid-stream —
// pending events not yet folded into ΦᵀΦ included — and restored; both
// copies then see the same events and publish identical predictions
// (score, level, version) and end in byte-identical states.
func TestRestoreContinuesIdentically(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   func() Trainer
	}{
		{"lsrrank", func() Trainer { return &LSRRank{Kernels: []rank.Kernel{{Gamma: 0.3}}, Lambda: 1e-3} }},
		{"rfrank", func() Trainer { return rfTrainer() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Type: LSRRankName, Dim: 3, Window: 150, EveryEvents: 40, Levels: 5}
			m, _ := New(cfg, tc.tr())
			clock := time.Unix(0, 0)
			m.now = func() time.Time { return clock }
			r := rand.New(rand.NewPCG(8, 9))
			for range 1000 + 13 { // 13: pending events in the sums' batch
				x, y := ordinalSample(r)
				m.Observe(x, y, true)
			}
			if _, ok := m.Thresholds(nil); !ok {
				t.Fatal("thresholds not fitted")
			}
			b, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if typ, err := online.PeekType(b); err != nil || typ != LSRRankName || !bytes.HasPrefix(b, []byte("OLNM")) {
				t.Fatalf("encoding of type %q (%v), want the envelope of %q", typ, err, LSRRankName)
			}
			m2, _ := New(cfg, tc.tr())
			m2.now = m.now
			if err := m2.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if b2, _ := m2.MarshalBinary(); !bytes.Equal(b, b2) {
				t.Fatal("re-encoding of the restored model differs")
			}
			levels := 0
			for i := range 2000 {
				clock = clock.Add(time.Millisecond)
				x, y := ordinalSample(r)
				labelled := i%3 != 0
				p1, p2 := m.Observe(x, y, labelled), m2.Observe(x, y, labelled)
				if p1 != p2 {
					t.Fatalf("event %d: restored model diverges: %+v vs %+v", i, p1, p2)
				}
				if p1.Label != 0 {
					levels++
				}
			}
			if levels == 0 || m.Version() < 10 {
				t.Fatalf("%d levels published, version %d", levels, m.Version())
			}
			e1, _ := m.MarshalBinary()
			e2, _ := m2.MarshalBinary()
			if !bytes.Equal(e1, e2) {
				t.Fatal("states differ after continuing")
			}
			for i := 0; i < len(b); i += 1 + i/50 {
				if err := m2.UnmarshalBinary(b[:i]); !errors.Is(err, ErrFormat) {
					t.Fatalf("truncated to %d of %d bytes: %v", i, len(b), err)
				}
			}
			if err := m2.UnmarshalBinary(append(slices.Clone(b), 0)); !errors.Is(err, ErrFormat) {
				t.Fatalf("trailing byte: %v", err)
			}
		})
	}
}

// encodeLegacy writes m's state in the refitted models' encoding before
// the envelope ("RFIT", format 1 or 2, under type tag typ), as the old
// code did: format 1 without sections, format 2 with the level thresholds
// and running sums that m has.
func encodeLegacy(t *testing.T, m *Model, typ string, format uint16) []byte {
	t.Helper()
	D := m.cfg.Dim
	b := codec.AppendU16([]byte(legacyMagic), format)
	b = codec.AppendStr(b, typ)
	b = codec.AppendU32(b, uint32(D))
	b = codec.AppendU32(b, uint32(m.cfg.Window))
	b = codec.AppendU32(b, uint32(m.size))
	b = codec.AppendI64(b, m.learned)
	b = codec.AppendU32(b, uint32(m.since))
	var fit []byte
	if cur := m.cur.Load(); cur != nil {
		b = codec.AppendI64(b, cur.version)
		var err error
		if fit, err = cur.fit.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	} else {
		b = codec.AppendI64(b, 0)
	}
	b = codec.AppendBytes(b, fit)
	for k := range m.size {
		i := (m.head + k) % m.cfg.Window
		b = codec.AppendF64s(b, m.xs[i*D:(i+1)*D])
		b = codec.AppendF64(b, m.ys[i])
		b = codec.AppendI64(b, m.ts[i])
	}
	if format == 1 {
		return b
	}
	var sections uint8
	var parts [][]byte
	if m.levels != nil {
		l, err := m.levels.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		sections |= sectionLevels
		parts = append(parts, l)
	}
	if m.sums != nil {
		s, err := m.sums.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		sections |= sectionSums
		parts = append(parts, s)
	}
	b = append(b, sections)
	for _, p := range parts {
		b = codec.AppendBytes(b, p)
	}
	return b
}

// TestLegacyFormatsRestore: the encodings from before the envelope
// ("RFIT" formats 1 and 2; a features model wrote type "rfrank") restore
// into a configured model. Format 1 has no sums section: they are rebuilt
// from the window; format 2's sums restore exactly. Both then continue
// like the original; truncations fail with ErrFormat.
func TestLegacyFormatsRestore(t *testing.T) {
	cfg := Config{Type: LSRRankName, Dim: 3, Window: 100, EveryEvents: 30, Levels: 5}
	m, _ := New(cfg, rfTrainer())
	r := rand.New(rand.NewPCG(1, 1))
	for range 555 {
		x, y := ordinalSample(r)
		m.Observe(x, y, true)
	}
	for _, format := range []uint16{1, 2} {
		b := encodeLegacy(t, m, "rfrank", format)
		m2, _ := New(cfg, rfTrainer())
		if err := m2.UnmarshalBinary(b); err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		if m2.Version() != m.Version() || m2.Examples() != m.Examples() || m2.WindowSize() != m.WindowSize() {
			t.Fatalf("format %d: version %d, examples %d, window %d", format, m2.Version(), m2.Examples(), m2.WindowSize())
		}
		a, c := rank.NewSums(m.sums.FeatureMap()), rank.NewSums(m2.sums.FeatureMap())
		a.Copy(m.sums)
		c.Copy(m2.sums)
		tol := 1e-12
		if format == 2 {
			tol = 0
			ea, _ := m.sums.MarshalBinary()
			ec, _ := m2.sums.MarshalBinary()
			if !bytes.Equal(ea, ec) {
				t.Fatal("format 2: the sums section did not restore exactly")
			}
		}
		if err := rank.SumsClose(a, c, tol); err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		if _, ok := m2.Thresholds(nil); ok != (format == 2) {
			t.Fatalf("format %d: thresholds restored %v", format, ok)
		}
		x, _ := ordinalSample(r)
		if p, q := m.Observe(x, 0, false).Score, m2.Observe(x, 0, false).Score; p != q {
			t.Fatalf("format %d: score %v, want %v", format, q, p)
		}
		for i := 0; i < len(b); i += 1 + i/50 {
			if err := m2.UnmarshalBinary(b[:i]); !errors.Is(err, ErrFormat) {
				t.Fatalf("format %d truncated to %d of %d bytes: %v", format, i, len(b), err)
			}
		}
		if err := m2.UnmarshalBinary(append(slices.Clone(b), 0)); !errors.Is(err, ErrFormat) {
			t.Fatalf("format %d with a trailing byte: %v", format, err)
		}
	}
	// The type tag must be the configured type, or rfrank for a model
	// fitted from running sums.
	exact, _ := New(cfg, &LSRRank{Kernels: []rank.Kernel{{Gamma: 0.3}}, Lambda: 1e-3})
	if err := exact.UnmarshalBinary(encodeLegacy(t, exact, "rfrank", 1)); !errors.Is(err, ErrFormat) {
		t.Fatalf("rfrank into an exact model: %v", err)
	}
	if err := exact.UnmarshalBinary(encodeLegacy(t, exact, LSRRankName, 1)); err != nil {
		t.Fatal(err)
	}
}

// TestFeaturesObserveDoesNotAllocate: the per-event path of the features
// solver (score, add the event to the sums, subtract the one leaving) and
// the hand-over of a refit (copying the sums into the spare) allocate
// nothing.
func TestFeaturesObserveDoesNotAllocate(t *testing.T) {
	m, _ := New(Config{Type: LSRRankName, Dim: 3, Window: 50, EveryEvents: 1 << 30, Levels: 5}, rfTrainer())
	r := rand.New(rand.NewPCG(3, 3))
	for range 200 {
		x, y := ordinalSample(r)
		m.Observe(x, y, true)
	}
	m.RefitNow(context.Background())
	x, y := ordinalSample(r)
	if a := testing.AllocsPerRun(1000, func() { m.Observe(x, y, true) }); a != 0 {
		t.Fatalf("Observe allocates %v per event", a)
	}
	if a := testing.AllocsPerRun(100, func() { _ = m.request() }); a != 0 {
		t.Fatalf("the refit hand-over allocates %v", a)
	}
}

// benchRF is a features model at D = 512 (256 frequencies of one RBF
// kernel of width gamma, 0: auto), d = 13, with a full window of 2 000
// events.
func benchRF(b *testing.B, every int, gamma float64) (*Model, [][]float64, []float64) {
	return benchModel(b, every, &RFRank{Kernels: []rank.Kernel{{Gamma: gamma}}, Lambda: 1e-3, Features: 512, Seed: 1})
}

// benchModel is a ranking model of trainer tr, d = 13, with a full window
// of 2 000 events, and 4 096 events (xs, ys) to go on with.
func benchModel(b *testing.B, every int, tr Trainer) (*Model, [][]float64, []float64) {
	m, err := New(Config{Type: LSRRankName, Dim: 13, Window: 2000, EveryEvents: every}, tr)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	xs, ys := make([][]float64, 4096), make([]float64, 4096)
	for i := range xs {
		xs[i] = make([]float64, 13)
		var s float64
		for j := range xs[i] {
			xs[i][j] = r.NormFloat64()
			s += math.Sin(float64(j+1) * xs[i][j])
		}
		ys[i] = s
	}
	for i := range 2000 {
		m.Observe(xs[i], ys[i], true)
	}
	return m, xs, ys
}

// BenchmarkRFRankObserve is one labelled event of a features model in
// steady state, D = 512, d = 13: score it, add it to the running sums and
// subtract the event leaving the window (target: ≥ 20 k events/s, 0
// allocs), with γ = 0.05 and with gamma auto past its warm-up (the same
// work: its map is fixed by then).
func BenchmarkRFRankObserve(b *testing.B) {
	for _, bc := range []struct {
		name  string
		gamma float64
	}{{"fixed", 0.05}, {"auto", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			m, xs, ys := benchRF(b, 1<<30, bc.gamma)
			benchObserve(b, m, xs, ys)
		})
	}
}

// benchObserve fits m on its window, then times labelled events of xs,
// ys, one per iteration, reporting allocations and events/s.
func benchObserve(b *testing.B, m *Model, xs [][]float64, ys []float64) {
	if rep := m.RefitNow(context.Background()); rep.Err != nil {
		b.Fatal(rep.Err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(xs)
		m.Observe(xs[k], ys[k], true)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRFRankRefit is one refit of a features model, D = 512: copy the
// running sums (on the processing goroutine) and solve the D × D system
// (in the background in a started model) (target ≤ 50 ms).
func BenchmarkRFRankRefit(b *testing.B) {
	m, _, _ := benchRF(b, 1<<30, 0.05)
	b.ReportAllocs()
	for b.Loop() {
		if r := m.refit(context.Background(), m.request()); !r.Accepted {
			b.Fatal(r.Err)
		}
	}
}
