package refit

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/legacytest"
)

// Refit on score (Schedule.OnScore, Config.OnScore): the key-scoped
// instances, never started, refit inline before scoring an unlabelled
// event when labelled events came since their last refit.

// onScoreRegistry holds every refitted type whose "refit" key is a
// Schedule.
var onScoreRegistry = online.MustRegistry(SVMType(), LowRankType(), AdaBoostType(), KRRType(), LSRRankType(), MLSRRankType())

// scheduleOf returns the Schedule inside the parameters p of a refitted
// type.
func scheduleOf(t testing.TB, p online.Params) *Schedule {
	t.Helper()
	switch p := p.(type) {
	case *SVMParams:
		return &p.Refit.Schedule
	case *LowRankParams:
		return &p.Refit.Schedule
	case *AdaBoostParams:
		return &p.Refit.Schedule
	case *KRRParams:
		return &p.Refit
	case *LSRRankParams:
		return &p.Refit
	case *MLSRRankParams:
		return &p.Refit
	}
	t.Fatalf("parameters %T have no refit schedule", p)
	return nil
}

func refitModel(t testing.TB, m online.Model) *Model {
	t.Helper()
	r, ok := online.Unwrap[*Model](m)
	if !ok {
		t.Fatalf("%T is not a refitted model", m)
	}
	return r
}

// TestOnScoreValidation: every_events 0 with every 0 is refused on the
// key "refit" without on_score and accepted with it, by every type's
// Validate and by New (Config); with it, a negative schedule is still
// refused; the type's model gets Config.OnScore.
func TestOnScoreValidation(t *testing.T) {
	const dim = 3
	for _, typ := range onScoreRegistry.Types() {
		t.Run(typ.Name(), func(t *testing.T) {
			p := typ.Examples()[0]
			s := scheduleOf(t, p)
			s.EveryEvents, s.Every, s.OnScore = 0, 0, false
			err := p.Validate(dim)
			if f := specFields(err); len(f) != 1 || !strings.HasPrefix(f[0], "refit: ") || !strings.Contains(f[0], "on_score") {
				t.Fatalf("both zero without on_score: %v (fields %q)", err, f)
			}
			if _, err := typ.New(dim, p); err == nil {
				t.Fatal("New: both zero without on_score accepted")
			}
			s.OnScore = true
			if err := p.Validate(dim); err != nil {
				t.Fatalf("on_score alone: %v", err)
			}
			m, err := typ.New(dim, p)
			if err != nil {
				t.Fatalf("New with on_score alone: %v", err)
			}
			if r := refitModel(t, m); !r.cfg.OnScore || r.cfg.EveryEvents != 0 || r.cfg.Every != 0 {
				t.Fatalf("config %+v", r.cfg)
			}
			for _, bad := range []Schedule{{EveryEvents: -1, OnScore: true}, {Every: -time.Second, OnScore: true}} {
				*s = bad
				if f := specFields(p.Validate(dim)); len(f) != 1 || !strings.HasPrefix(f[0], "refit: ") {
					t.Errorf("%+v: fields %q", bad, f)
				}
			}
		})
	}
	if _, err := New(Config{Type: "centroid", Dim: 2, Window: 50}, &centroid{}); err == nil {
		t.Error("New(Config) without a schedule nor OnScore: no error")
	}
	if _, err := New(Config{Type: "centroid", Dim: 2, Window: 50, OnScore: true}, &centroid{}); err != nil {
		t.Errorf("New(Config) with OnScore alone: %v", err)
	}
}

// TestOnScoreDefaults: the schedule's completion as the configuration
// does it (YAML over the defaults, then Complete): every_events 1000 when
// none of every_events, every and on_score: true is given, as before;
// with on_score: true alone every_events is 0 (no refit on labels); given
// keys are kept; on_score: false given alone changes nothing.
func TestOnScoreDefaults(t *testing.T) {
	const dim = 3
	base := map[string]string{MLSRRankName: "kernels: [{gamma: 1}]\n", AdaBoostName: "stumps: true\n"}
	for _, typ := range onScoreRegistry.Types() {
		for _, tc := range []struct {
			refit string
			want  Schedule
			ok    bool
		}{
			{"", Schedule{EveryEvents: DefaultRefitEvery}, true},
			{"refit: {on_score: true}", Schedule{OnScore: true}, true},
			{"refit: {on_score: false}", Schedule{EveryEvents: DefaultRefitEvery}, true},
			{"refit: {on_score: true, every_events: 50}", Schedule{EveryEvents: 50, OnScore: true}, true},
			{"refit: {on_score: true, every: 1m}", Schedule{Every: time.Minute, OnScore: true}, true},
			{"refit: {every: 1m}", Schedule{Every: time.Minute}, true},
			{"refit: {every_events: 0}", Schedule{}, false},
			{"refit: {every_events: 0, on_score: true}", Schedule{OnScore: true}, true},
		} {
			p := typ.NewParams()
			e := legacytest.Entry{YAML: base[typ.Name()] + tc.refit, Dim: dim}
			given := e.DecodeParams(t, p)
			p.(online.Completer).Complete(dim, given)
			if got := *scheduleOf(t, p); got != tc.want {
				t.Errorf("%s %q: schedule %+v, want %+v", typ.Name(), tc.refit, got, tc.want)
			}
			if err := p.Validate(dim); (err == nil) != tc.ok {
				t.Errorf("%s %q: Validate: %v", typ.Name(), tc.refit, err)
			}
		}
	}
}

// onScoreLSR builds an lsrrank (rbf, gamma 0.5) of dimension 3 as a
// key-scoped instance is built: never started.
func onScoreLSR(t testing.TB, window, every int, onScore bool) *Model {
	t.Helper()
	p := DefaultLSRRankParams()
	p.Kernel = RankKernel{Type: "rbf", Gamma: 0.5}
	p.Lambda, p.Window.Events = 0.01, window
	p.Refit = Schedule{EveryEvents: every, OnScore: onScore}
	if err := p.Validate(3); err != nil {
		t.Fatal(err)
	}
	m, err := LSRRankType().New(3, &p)
	if err != nil {
		t.Fatal(err)
	}
	return refitModel(t, m)
}

// rankEvent draws an input of dimension 3 and its target.
func rankEvent(rng *rand.Rand) ([]float64, float64) {
	x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	return x, math.Sin(x[0]) + x[1]*x[2] + 0.1*rng.NormFloat64()
}

// countRefits counts m's refits (every attempt reports).
func countRefits(m *Model) *int {
	n := new(int)
	m.OnRefit(func(Report) { *n++ })
	return n
}

// samePrediction reports whether a and b score alike, bit for bit.
func samePrediction(a, b online.Prediction) bool {
	return math.Float64bits(a.Score) == math.Float64bits(b.Score) && a.Label == b.Label &&
		a.HasBound == b.HasBound && math.Float64bits(a.MistakeBound) == math.Float64bits(b.MistakeBound) &&
		a.HasProbability == b.HasProbability && math.Float64bits(a.Probability) == math.Float64bits(b.Probability)
}

// TestOnScoreRefitsOnlyWhenStale: a key-scoped lsrrank with on_score and
// no event schedule never refits on labels; the first unlabelled event
// after labelled ones refits once (not before the window holds
// MinEvents), the next ones, until a label, not at all; its scores are
// bit for bit those of a model fitted by RefitNow on the same window
// (window wrap-around included). Scoring after the refit allocates
// nothing.
func TestOnScoreRefitsOnlyWhenStale(t *testing.T) {
	const window = 40
	m := onScoreLSR(t, window, 0, true)
	ref := onScoreLSR(t, window, 1<<30, false)
	refits := countRefits(m)
	rng := rand.New(rand.NewPCG(3, 9))
	queries := make([][]float64, 6)
	for i := range queries {
		queries[i], _ = rankEvent(rng)
	}
	learn := func(n int) {
		for range n {
			x, y := rankEvent(rng)
			m.Observe(x, y, true)
			ref.Observe(x, y, true)
		}
	}
	learn(5) // fewer than MinEvents: nothing to fit
	if p := online.Peek(m, queries[0]); p.Version != 0 || *refits != 0 {
		t.Fatalf("%d events: prediction %+v after %d refits", m.WindowSize(), p, *refits)
	}
	want := int64(0)
	for step, n := range []int{10, 1, 7, 33, 60} { // past the window: it wraps
		learn(n)
		if m.Version() != want || *refits != int(want) {
			t.Fatalf("step %d: labels refitted: version %d, %d refits, want %d", step, m.Version(), *refits, want)
		}
		ref.RefitNow(context.Background())
		want++
		for i, q := range queries {
			got := online.Peek(m, q)
			if got.Version != want || m.Version() != want || *refits != int(want) {
				t.Fatalf("step %d, query %d: version %d (model %d), %d refits, want %d", step, i, got.Version, m.Version(), *refits, want)
			}
			if r := online.Peek(ref, q); !samePrediction(got, r) || got.N != r.N {
				t.Fatalf("step %d, query %d: on score %+v, RefitNow %+v", step, i, got, r)
			}
		}
		if m.since != 0 {
			t.Fatalf("step %d: since %d after the refit", step, m.since)
		}
	}
	if a := testing.AllocsPerRun(100, func() { online.Peek(m, queries[0]) }); a != 0 {
		t.Errorf("a score of a fresh fit allocates %v times", a)
	}
	if m.Version() != want {
		t.Fatalf("version %d after the allocation runs, want %d", m.Version(), want)
	}
}

// TestOnScoreWithEveryEvents: with every_events too, both apply: labels
// refit every every_events, and a score refits only when labels came
// since the last refit (of either kind).
func TestOnScoreWithEveryEvents(t *testing.T) {
	m := onScoreLSR(t, 40, 7, true)
	refits := countRefits(m)
	rng := rand.New(rand.NewPCG(4, 1))
	q, _ := rankEvent(rng)
	learn := func(n int) {
		for range n {
			x, y := rankEvent(rng)
			m.Observe(x, y, true)
		}
	}
	learn(10) // due from the 7th label, refits at the 10th (MinEvents)
	if *refits != 1 || m.since != 0 {
		t.Fatalf("after 10 labels: %d refits, since %d", *refits, m.since)
	}
	online.Peek(m, q) // fresh: no refit
	if *refits != 1 {
		t.Fatalf("a fresh fit refitted on score: %d refits", *refits)
	}
	learn(3)
	online.Peek(m, q)
	online.Peek(m, q)
	if *refits != 2 || m.since != 0 {
		t.Fatalf("3 labels, 2 scores: %d refits, since %d", *refits, m.since)
	}
	learn(6) // 6 since the refit on score: the schedule counts from it
	if *refits != 2 {
		t.Fatalf("6 labels after the refit on score: %d refits", *refits)
	}
	learn(1)
	if *refits != 3 {
		t.Fatalf("7 labels after the refit on score: %d refits", *refits)
	}
}

// TestOnScoreStartedIgnoresIt: a started model (the service's global
// instance) does not refit on score: its event path never waits for a
// fit. A model without on_score does not either.
func TestOnScoreStartedIgnoresIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	started := onScoreLSR(t, 40, 0, true)
	started.Start()
	defer started.Close()
	off := onScoreLSR(t, 40, 1000, false)
	for range 20 {
		x, y := rankEvent(rng)
		started.Observe(x, y, true)
		off.Observe(x, y, true)
	}
	q, _ := rankEvent(rng)
	for _, m := range []*Model{started, off} {
		if p := online.Peek(m, q); p.Version != 0 || m.Version() != 0 || m.Refitting() {
			t.Errorf("on_score %v: refitted on score: %+v, version %d", m.cfg.OnScore, p, m.Version())
		}
	}
}

// TestOnScorePeekStandardized: online.Peek through a Standardized
// wrapper (features.standardize) refits the inner model on score, with
// the statistics as of the score, as RefitNow would.
func TestOnScorePeekStandardized(t *testing.T) {
	p := DefaultKRRParams()
	p.Kernel = RankKernel{Type: "rbf", Gamma: 0.3}
	p.Window.Events, p.Refit = 30, Schedule{OnScore: true}
	refP := p
	refP.Refit = Schedule{EveryEvents: 1 << 30}
	reg := online.MustRegistry(KRRType())
	m, err := reg.New(online.Spec{Type: KRRName, Dim: 3, Standardize: true, Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reg.New(online.Spec{Type: KRRName, Dim: 3, Standardize: true, Params: &refP})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 2))
	for round := range 3 {
		for range 12 {
			x, y := rankEvent(rng)
			x[1] *= 40
			m.Observe(x, y, true)
			ref.Observe(x, y, true)
		}
		refitModel(t, ref).RefitNow(context.Background())
		for range 3 {
			q, _ := rankEvent(rng)
			got, want := online.Peek(m, q), online.Peek(ref, q)
			if got.Version != int64(round+1) || !samePrediction(got, want) {
				t.Fatalf("round %d: on score %+v, RefitNow %+v", round, got, want)
			}
		}
	}
}

// TestOnScoreSparse: the hashed-feature path of every type that takes it:
// an unlabelled ObserveSparse (online.PeekSparse), or Observe of the dense
// input on the model of hashed features, refits once on score, and scores
// as a model refitted by RefitNow on the same window.
func TestOnScoreSparse(t *testing.T) {
	const dim = 24
	for _, c := range sparseCases() {
		t.Run(c.name, func(t *testing.T) {
			build := func(s Schedule) *Model {
				p := c.params()
				*scheduleOf(t, p) = Schedule{EveryEvents: s.EveryEvents, OnScore: s.OnScore}
				sp := p.(online.SparseParams)
				if err := sp.ValidateSparse(dim, 16); err != nil {
					t.Fatal(err)
				}
				m, err := sp.NewSparse(dim, 16)
				if err != nil {
					t.Fatal(err)
				}
				return refitModel(t, m)
			}
			m, ref := build(Schedule{OnScore: true}), build(Schedule{EveryEvents: 1 << 30})
			refits := countRefits(m)
			evs := sparseStream(21, 260, dim, c.levels)
			k, want := 0, 0
			for round, n := range []int{25, 9, 80, 100} {
				for _, e := range evs[k : k+n] {
					y, ok := m.Label(e.y)
					if !ok {
						t.Fatalf("label %v refused", e.y)
					}
					m.ObserveSparse(e.idx, e.val, y, true)
					ref.ObserveSparse(e.idx, e.val, y, true)
				}
				k += n
				if *refits != want {
					t.Fatalf("round %d: labels refitted (%d refits, want %d)", round, *refits, want)
				}
				ref.RefitNow(context.Background())
				want++
				for i, e := range evs[k : k+6] {
					var got online.Prediction
					if i == 0 {
						got = m.Observe(e.x, 0, false) // the dense input, hashed model
					} else {
						got = online.PeekSparse(m, e.idx, e.val)
					}
					r := online.PeekSparse(ref, e.idx, e.val)
					if *refits != want || got.Version != m.Version() || !samePrediction(got, r) {
						t.Fatalf("round %d, event %d: %d refits (want %d), on score %+v, RefitNow %+v", round, i, *refits, want, got, r)
					}
				}
			}
		})
	}
}

// TestOnScoreEncoding: the schedule is part of the encoded parameters.
// Encodings from before on_score (testdata/onscore_before_*.bin, written
// by the code of commit c7cf9be, before it) restore with on_score false and
// re-encode to the same bytes: a false on_score is left out of the
// canonical parameters, so neither old encodings nor fingerprints change.
// A model with on_score round-trips through Restore with it, also when
// labels came since its last refit: the restored model refits on its next
// score as the original does, to the same scores and the same bytes.
func TestOnScoreEncoding(t *testing.T) {
	for _, file := range []string{"onscore_before_lsrrank.bin", "onscore_before_svm.bin"} {
		b, err := os.ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := onScoreRegistry.Restore(b)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		r := refitModel(t, m)
		if s := scheduleOf(t, r.cfg.Params); r.cfg.OnScore || s.OnScore || s.EveryEvents != 12 {
			t.Errorf("%s: schedule %+v, config OnScore %v", file, *s, r.cfg.OnScore)
		}
		if r.Version() != 1 || r.WindowSize() != 12 {
			t.Errorf("%s: version %d, window %d", file, r.Version(), r.WindowSize())
		}
		again, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoding differs", file)
		}
	}
	// A false on_score adds nothing to the canonical parameters.
	type before struct {
		EveryEvents int           `yaml:"every_events"`
		Every       time.Duration `yaml:"every"`
	}
	if a, b := codec.AppendParams(nil, &Schedule{EveryEvents: 5, Every: time.Second}), codec.AppendParams(nil, &before{5, time.Second}); !bytes.Equal(a, b) {
		t.Errorf("canonical schedule with on_score false %x, before it %x", a, b)
	}

	m := onScoreLSR(t, 30, 0, true)
	rng := rand.New(rand.NewPCG(8, 8))
	learn := func(m *Model, n int, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 1))
		for range n {
			x, y := rankEvent(r)
			m.Observe(x, y, true)
		}
	}
	learn(m, 20, 1)
	q, _ := rankEvent(rng)
	online.Peek(m, q)
	learn(m, 5, 2) // stale: 5 labels since the refit
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := onScoreRegistry.Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	r := refitModel(t, restored)
	if !r.cfg.OnScore || r.since != 5 || r.Version() != 1 {
		t.Fatalf("restored: OnScore %v, since %d, version %d", r.cfg.OnScore, r.since, r.Version())
	}
	if again, _ := restored.MarshalBinary(); !bytes.Equal(again, b) {
		t.Fatal("re-encoding of the restored model differs")
	}
	got, want := online.Peek(restored, q), online.Peek(m, q)
	if got.Version != 2 || !samePrediction(got, want) {
		t.Fatalf("after restore: %+v, original %+v", got, want)
	}
	ba, _ := m.MarshalBinary()
	bb, _ := restored.MarshalBinary()
	if !bytes.Equal(ba, bb) {
		t.Fatal("the refits on score of the original and the restored model encode differently")
	}
	// A true on_score is in the encoded parameters.
	if !bytes.Contains(b, []byte("on_score")) {
		t.Fatal("on_score true left out of the encoded parameters")
	}
}
