// Package refit runs heavy models — kernel SVMs, kernel ranking — that are
// refitted in the background from a window of recent labelled events, and
// presents each as an online.Model so that the stream engine scores with it
// like any other model.
//
// A Model keeps the last Window labelled events (and, with WindowTime, only
// those younger than that) in a preallocated ring. Every EveryEvents
// labelled events, and every Every of wall time, the processing goroutine
// copies the window and hands it to the model's refit goroutine, which
// trains a new Fitted model with the Trainer. At most one refit runs per
// model; event processing never waits for it. When the guard is on, the
// newest Guard fraction of the window is held back: the new model is
// trained on the rest and swapped in only if its error on the held-back
// slice is at most the serving model's plus GuardSlack. The swap is one
// atomic pointer store of an immutable (Fitted, version) pair, so a score is
// always made by exactly one version and names it; no half-built model is
// ever visible. A refit that fails, is cancelled or is rejected leaves the
// serving model in place and is reported.
//
// A Model that is not started (the instances of a key-scoped model,
// offline evaluation) refits inline, on the event that makes the refit
// due. With Config.OnScore it also refits inline before it scores an
// unlabelled event (online.Peek) when labelled events were learned since
// its last refit, so that rarely scored instances that learn many labels
// score with a fit of their whole current window while paying for one
// refit per score of a changed window, not one per label. A started Model
// ignores OnScore.
//
// Trainers that fit from running sums of the window (RFRank: the random-
// feature ΦᵀΦ, Φᵀ1, Φᵀy, Σy of rank.Sums) do not get the window's rows:
// the processing goroutine adds each labelled event to the sums as it
// enters the window and subtracts it as it leaves (O(D²) amortised, no
// allocation), and a refit copies the sums (one D × D copy) and solves
// from the copy in the background, so the cost of a refit does not grow
// with the window. The sums are part of the encoded state.
//
// With Config.Levels = m ≥ 2 (ranking scores on ordinal targets), the
// Model also keeps online.LevelThresholds learned from the (score, level)
// pairs of its labelled events, as omam does, and publishes the level
// 1..m as Prediction.Label (0 until the thresholds are first fitted);
// labels must then be integers 1..m.
//
// Goroutines: Start starts one refit goroutine per Model; Close cancels a
// running refit and waits for it.
package refit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/internal/sparse"
	"github.com/streamer/streamer/online/rank"
)

// Data is a window handed to a Trainer: N rows of D features, row-major in
// X, or, for a model of hashed features (Config.Sparse), sparse in Rows
// (X nil).
type Data struct {
	X    []float64
	Y    []float64
	D    int
	Rows []sparse.Row
}

// N is the number of rows.
func (d *Data) N() int { return len(d.Y) }

// Row returns row i of a dense window.
func (d *Data) Row(i int) []float64 { return d.X[i*d.D : (i+1)*d.D] }

// Sparse reports whether the rows are sparse (Rows).
func (d *Data) Sparse() bool { return d.Rows != nil }

// slice returns rows [i, j).
func (d *Data) slice(i, j int) *Data {
	if d.Rows != nil {
		return &Data{Rows: d.Rows[i:j], Y: d.Y[i:j], D: d.D}
	}
	return &Data{X: d.X[i*d.D : j*d.D], Y: d.Y[i:j], D: d.D}
}

// Fitted is a trained model. It is immutable once returned by Fit, so it
// can score from the processing goroutine while the next one is trained.
type Fitted interface {
	// Predict scores x (it must not allocate). Prediction.N is the number
	// of examples the model was trained on.
	Predict(x []float64) online.Prediction
	MarshalBinary() ([]byte, error)
}

// sparseTrainer is implemented by trainers that fit on sparse rows
// (Data.Rows) and whose fits score sparse inputs (sparseFitted).
type sparseTrainer interface {
	Trainer
	fitsSparse()
}

// sparseFitted is a Fitted trained on sparse rows: predictSparse scores a
// sparse x (indices increasing) with buf as scratch space (see
// svm.Model.DecisionSparse); it must not allocate.
type sparseFitted interface {
	Fitted
	predictSparse(x sparse.Row, buf []float64) online.Prediction
	sparseRows() bool // trained on sparse rows
}

// Stats describes a fit, for metrics.
type Stats struct {
	SupportVectors int     // SVM: support vectors (0 when not applicable)
	Objective      float64 // the solver's objective (SVM: dual objective, LIBSVM's sign)
	Iterations     int
}

// Trainer trains Fitted models.
type Trainer interface {
	// Label maps a wire label to the model's label (see online.Model).
	Label(v float64) (float64, bool)
	// Fit trains on d. prev, when not nil, is the serving model (for warm
	// starts). It must return promptly with ctx.Err() when ctx ends.
	Fit(ctx context.Context, d *Data, prev Fitted) (Fitted, Stats, error)
	// Unmarshal restores a Fitted from MarshalBinary output.
	Unmarshal(b []byte) (Fitted, error)
}

// Config configures a Model.
type Config struct {
	// Type is the model type the Model presents (Type()) and encodes, e.g.
	// SVMName; Params its parameters, encoded with the state so that the
	// model restores from its bytes alone (nil: none).
	Type   string
	Params online.Params

	Dim         int
	Window      int           // labelled events kept (required)
	WindowTime  time.Duration // also drop events older than this (0 = off)
	EveryEvents int           // refit after this many labelled events (0 = off)
	Every       time.Duration // refit this often (0 = off)
	Guard       float64       // held-back fraction of the window, in [0, 0.5); 0 = off
	GuardSlack  float64       // accept a new model if its held-back error ≤ old + slack
	MinEvents   int           // no refit before the window holds this many events (default 10)
	Levels      int           // ≥ 2: publish levels 1..Levels from thresholds on the score; 0 = off
	// Sparse > 0: the inputs are hashed features, sparse rows of dimension
	// Dim with at most Sparse entries (features.max_features). The window
	// keeps them sparse (ObserveSparse) in an arena that grows to its
	// largest content and no further; the trainer must fit on sparse rows.
	Sparse int
	// OnScore: a model not started refits inline before scoring an
	// unlabelled event when labelled events were learned since its last
	// refit (see Observe); a started model ignores it. With it,
	// EveryEvents and Every may both be 0.
	OnScore bool
}

// Report says what one refit did.
type Report struct {
	Version            int64         // version serving after the refit
	Accepted           bool          // the new model was swapped in
	Err                error         // why not, if it failed (context.Canceled when cancelled)
	Rejected           bool          // the guard kept the old model
	Duration           time.Duration // wall time of the fit
	Window             int           // rows trained on
	Stats              Stats
	OldError, NewError float64 // held-back errors (NaN without guard or previous model)
}

// request is one refit's input: the window's rows, or a copy of its
// running sums.
type request struct {
	data  *Data
	sums  *rank.Sums
	scale *scale // standardisation as of the refit (nil: none)
}

// scale is the standardisation a version was trained with and scores with:
// z = (x − mean)·inv.
type scale struct {
	mean, inv []float64
}

func (s *scale) apply(dst, x []float64) {
	for i, v := range x {
		dst[i] = (v - s.mean[i]) * s.inv[i]
	}
}

// sumsTrainer is implemented by trainers that fit from running sums of the
// window (rank.Sums) rather than from its rows; Model then keeps the sums.
type sumsTrainer interface {
	Trainer
	// newSums returns empty sums for inputs of dimension dim.
	newSums(dim int) (*rank.Sums, error)
	// fitSums fits a model from s (a copy it may modify).
	fitSums(ctx context.Context, s *rank.Sums) (Fitted, Stats, error)
}

type serving struct {
	fit     Fitted
	version int64
	scale   *scale // the standardisation fit was trained with (nil: none)
}

// predict scores x with the serving version, standardising it into z
// first when the version has a scale.
func (s *serving) predict(x, z []float64) online.Prediction {
	if s.scale != nil {
		s.scale.apply(z, x)
		x = z
	}
	return s.fit.Predict(x)
}

// Model is an online.Model backed by background refits.
type Model struct {
	cfg Config
	tr  Trainer
	cur atomic.Pointer[serving]

	// The window: owned by the processing goroutine (Observe, Marshal).
	xs      []float64
	ys      []float64
	ts      []int64
	head    int
	size    int
	learned int64
	since   int
	now     func() time.Time

	due     atomic.Bool // set by the ticker: refit at the next event
	running atomic.Bool
	reqs    chan request

	levels *online.LevelThresholds // Config.Levels: levels from scores (processing goroutine)

	// Standardisation (StandardizeWith): the statistics of a Standardized
	// wrapper, read when a refit is requested; z is the scratch of the
	// processing goroutine's scores, zs that of the events entering the
	// running sums (which hold standardised events).
	scaling   online.Scaling
	z, zs, zi []float64

	// The window's rows of a model of hashed features (Config.Sparse; xs
	// is then nil), the builder of an event's row and the scratch space of
	// its scores.
	rows *sparse.Ring
	bld  sparse.Builder
	sbuf []float64

	// Running sums of the window, for a sumsTrainer: sums follows the
	// window on the processing goroutine; spare (made at the first refit)
	// is the copy a refit fits from, owned by the refit goroutine while
	// running is set.
	st          sumsTrainer
	sums, spare *rank.Sums
	// autoS is the data scale S of the sums' map for the random-feature
	// solver with gamma auto (0: not auto); its warm-up (rescale) sets it.
	autoS float64

	mu       sync.Mutex
	onRefit  func(Report)
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	started  bool
	closed   bool
	versions atomic.Int64 // last version number handed out
}

var (
	_ online.Model       = (*Model)(nil)
	_ online.RawInput    = (*Model)(nil)
	_ online.SparseModel = (*Model)(nil)
)

// New builds a Model; Start starts its refit goroutine.
func New(cfg Config, tr Trainer) (*Model, error) {
	if cfg.Type == "" {
		return nil, errors.New("refit: Config.Type is required")
	}
	if cfg.Dim < 1 {
		return nil, fmt.Errorf("refit: dim must be ≥ 1, got %d", cfg.Dim)
	}
	if cfg.Window < 2 {
		return nil, fmt.Errorf("refit: window.events must be ≥ 2, got %d", cfg.Window)
	}
	if cfg.EveryEvents < 0 || cfg.Every < 0 || (cfg.EveryEvents == 0 && cfg.Every == 0 && !cfg.OnScore) {
		return nil, errors.New("refit: refit.every_events or refit.every must be set (> 0), or refit.on_score")
	}
	if !(cfg.Guard >= 0 && cfg.Guard < 0.5) {
		return nil, fmt.Errorf("refit: guard must be in [0, 0.5), got %v", cfg.Guard)
	}
	if cfg.MinEvents <= 0 {
		cfg.MinEvents = 10
	}
	if cfg.Sparse < 0 {
		return nil, fmt.Errorf("refit: Config.Sparse %d < 0", cfg.Sparse)
	}
	m := &Model{
		cfg:  cfg,
		tr:   tr,
		ys:   make([]float64, cfg.Window),
		ts:   make([]int64, cfg.Window),
		now:  time.Now,
		reqs: make(chan request, 1),
	}
	if cfg.Sparse > 0 {
		if _, ok := tr.(sparseTrainer); !ok {
			return nil, fmt.Errorf("refit: %s: this configuration does not take hashed (sparse) features", cfg.Type)
		}
		// Room for rows of up to 32 entries at first: the arena grows to
		// what the window holds.
		m.rows = sparse.NewRing(cfg.Window, cfg.Window*min(cfg.Sparse, 32))
		m.sbuf = make([]float64, cfg.Window)
	} else {
		m.xs = make([]float64, cfg.Window*cfg.Dim)
		m.z, m.zs, m.zi = make([]float64, cfg.Dim), make([]float64, cfg.Dim), make([]float64, cfg.Dim)
	}
	if cfg.Levels != 0 {
		l, err := online.NewLevelThresholds(cfg.Levels)
		if err != nil {
			return nil, fmt.Errorf("refit: %w", err)
		}
		m.levels = l
	}
	if st, ok := tr.(sumsTrainer); ok {
		if cfg.Guard > 0 {
			return nil, fmt.Errorf("refit: %s fits from running sums: no held-back rows for the guard (guard must be 0, got %v)", cfg.Type, cfg.Guard)
		}
		s, err := st.newSums(cfg.Dim)
		if err != nil {
			return nil, err
		}
		m.st, m.sums = st, s
		if autoFeatures(tr) {
			m.autoS = 1
		}
	}
	return m, nil
}

// OnRefit registers fn to be called (from the refit goroutine) after every
// refit attempt. Set it before Start.
func (m *Model) OnRefit(fn func(Report)) { m.onRefit = fn }

// Start starts the refit goroutine (and the timer when Every is set).
func (m *Model) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go m.loop(ctx)
	if m.cfg.Every > 0 {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			t := time.NewTicker(m.cfg.Every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					m.due.Store(true)
				}
			}
		}()
	}
}

// Close cancels a running refit and stops the goroutines. The serving model
// stays usable.
func (m *Model) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// Refitting reports whether a refit is running now.
func (m *Model) Refitting() bool { return m.running.Load() }

func (m *Model) loop(ctx context.Context) {
	defer m.wg.Done()
	for {
		select {
		case <-ctx.Done():
			// A refit requested before Close that had not started is
			// cancelled like a running one: reported, and running cleared
			// (select picks at random when both are ready, so without
			// this its report could be lost and running stay set).
			select {
			case req := <-m.reqs:
				m.report(m.refit(ctx, req)) // cancelled before it fits
			default:
			}
			return
		case req := <-m.reqs:
			m.report(m.refit(ctx, req))
		}
	}
}

// report hands r to the OnRefit callback and marks the refit finished.
func (m *Model) report(r Report) {
	if m.onRefit != nil {
		m.onRefit(r)
	}
	m.running.Store(false)
}

// refit trains on req and swaps the result in if it passes the guard.
func (m *Model) refit(ctx context.Context, req request) Report {
	r := Report{OldError: math.NaN(), NewError: math.NaN()}
	if err := ctx.Err(); err != nil { // cancelled before it started
		r.Err, r.Version = err, m.Version()
		return r
	}
	cur := m.cur.Load()
	var prev Fitted
	if cur != nil {
		prev = cur.fit
	}
	var (
		fit   Fitted
		stats Stats
		err   error
		held  *Data
	)
	start := time.Now()
	if req.sums != nil {
		r.Window = int(req.sums.N())
		fit, stats, err = m.st.fitSums(ctx, req.sums)
	} else {
		d, train := req.data, req.data
		if k := int(m.cfg.Guard * float64(d.N())); k > 0 && prev != nil {
			n := d.N() - k
			train, held = d.slice(0, n), d.slice(n, d.N())
		}
		if req.scale != nil { // train on a standardised copy; held stays raw
			x := make([]float64, len(train.X))
			for i := range train.N() {
				req.scale.apply(x[i*d.D:(i+1)*d.D], train.Row(i))
			}
			train = &Data{X: x, Y: train.Y, D: d.D}
		}
		r.Window = train.N()
		fit, stats, err = m.tr.Fit(ctx, train, prev)
	}
	r.Duration = time.Since(start)
	r.Stats = stats
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		r.Err = err
		r.Version = m.Version()
		return r
	}
	next := &serving{fit: fit, scale: req.scale}
	if held != nil {
		r.OldError, r.NewError = errorRate(cur, held, m.cfg.Window), errorRate(next, held, m.cfg.Window)
		if r.NewError > r.OldError+m.cfg.GuardSlack {
			r.Rejected = true
			r.Version = m.Version()
			return r
		}
	}
	next.version = m.versions.Add(1)
	m.cur.Store(next)
	r.Accepted, r.Version = true, next.version
	return r
}

// errorRate is the fraction of raw rows whose label predicted by s (with
// its standardisation) differs from y (no decision counts as an error);
// window is the configured window (sparse rows: the scratch space).
func errorRate(s *serving, d *Data, window int) float64 {
	wrong := 0
	if d.Rows != nil {
		f := s.fit.(sparseFitted)
		buf := make([]float64, window) // scratch of the sparse scores (a fit has at most window rows)
		for i, x := range d.Rows {
			if float64(f.predictSparse(x, buf).Label) != d.Y[i] {
				wrong++
			}
		}
		return float64(wrong) / float64(d.N())
	}
	z := make([]float64, d.D)
	for i := range d.N() {
		if float64(s.predict(d.Row(i), z).Label) != d.Y[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(d.N())
}

// Type returns the model type (Config.Type).
func (m *Model) Type() string { return m.cfg.Type }

// StandardizeWith makes the model standardise its inputs with s
// (online.RawInput): the window keeps raw events, each refit trains on the
// window standardised with s's statistics as of the refit, and the version
// it makes scores with the same statistics. A model fitted from running
// sums (the random-feature ranking solver) standardises each event as it
// enters the sums, with the statistics before it; its versions score with
// the statistics as of their refit. Call it before the first event.
func (m *Model) StandardizeWith(s online.Scaling) { m.scaling = s }

// Dim returns the input dimension.
func (m *Model) Dim() int { return m.cfg.Dim }

// Label maps a wire label through the trainer; with Config.Levels it must
// also be one of the levels 1..m.
func (m *Model) Label(v float64) (float64, bool) {
	y, ok := m.tr.Label(v)
	if ok && m.levels != nil {
		return m.levels.Label(y)
	}
	return y, ok
}

// Levels returns Config.Levels (0: no levels).
func (m *Model) Levels() int { return m.cfg.Levels }

// Thresholds appends the level thresholds θ₁..θ_{m−1} to dst; ok is false
// without Config.Levels or before their first fit.
func (m *Model) Thresholds(dst []float64) (_ []float64, ok bool) {
	if m.levels == nil {
		return dst, false
	}
	return m.levels.Thresholds(dst)
}

// Examples is the number of labelled events the model has taken in.
func (m *Model) Examples() int64 { return m.learned }

// Version is the version serving now (0 before the first refit).
func (m *Model) Version() int64 {
	if s := m.cur.Load(); s != nil {
		return s.version
	}
	return 0
}

// WindowSize is the number of events in the window.
func (m *Model) WindowSize() int { return m.size }

// Observe scores x with the serving version, then adds a labelled event to
// the window and, when a refit is due and none is running, hands a copy of
// the window (or of its running sums) to the refit goroutine. Before the
// first refit the prediction is "no decision" (score 0, label 0, version
// 0). With Config.Levels the label is the level of the score, and a
// labelled event scored by a serving version adds its (score, level) pair
// to the thresholds' buffer. It does not allocate, except for the copy of
// the window handed to a refit of the rows. A model of hashed features
// (Config.Sparse) takes x's nonzero entries, as ObserveSparse.
//
// With Config.OnScore, a model not started scores an unlabelled event
// (online.Peek) after refitting inline (RefitNow) when labelled events
// were learned since the last refit and the window holds MinEvents: its
// score comes from a fit of the whole current window. That refit changes
// the serving version (and allocates, as every refit); the next unlabelled
// events, until a labelled one, refit no more.
func (m *Model) Observe(x []float64, y float64, labelled bool) online.Prediction {
	if len(x) != m.cfg.Dim {
		panic(fmt.Sprintf("refit: Observe: %d features, want %d", len(x), m.cfg.Dim))
	}
	if m.rows != nil {
		return m.observeRow(m.bld.FromDense(x), y, labelled)
	}
	if !labelled && m.cfg.OnScore && m.since > 0 {
		m.refitOnScore()
	}
	var p online.Prediction
	if s := m.cur.Load(); s != nil {
		p = s.predict(x, m.z)
		p.Version = s.version
		if m.levels != nil {
			p.Label = m.levels.Level(p.Score)
		}
	}
	if !labelled {
		return p
	}
	if m.levels != nil && p.Version != 0 {
		m.levels.Record(p.Score, int(y))
	}
	now := m.now().UnixNano()
	D := m.cfg.Dim
	if m.sums != nil && m.scaling != nil {
		// The sums hold standardised events: the window keeps them as
		// they entered, so that one leaves exactly as it came in.
		z, inv := m.zs, m.zi
		m.scaling.Transform(z, inv)
		for j, v := range x {
			z[j] = (v - z[j]) * inv[j]
		}
		x = z
	}
	i := (m.head + m.size) % m.cfg.Window
	if m.size == m.cfg.Window {
		if m.sums != nil { // slot i = head: the oldest event leaves
			m.sums.Remove(m.xs[i*D:(i+1)*D], m.ys[i])
		}
		m.head = (m.head + 1) % m.cfg.Window
	} else {
		m.size++
	}
	copy(m.xs[i*D:(i+1)*D], x)
	m.ys[i], m.ts[i] = y, now
	if m.sums != nil {
		m.sums.Add(x, y)
	}
	m.learned++
	m.since++
	if m.autoS > 0 && rescalePoint(m.learned) {
		m.rescale()
	}
	m.maybeRefit(now)
	return p
}

// Sparse reports whether the model takes hashed (sparse) features: nil
// when it was built for them (Config.Sparse > 0: a type's SparseParams
// with features.hash), else why not.
func (m *Model) Sparse() error {
	if m.rows == nil {
		return errors.New("the window keeps dense rows: the model was built without hashed features (features.hash)")
	}
	return nil
}

// ObserveSparse is Observe on the dense x with x[idx[k]] += val[k] (see
// online.SparseModel) for a model of hashed features (Config.Sparse > 0;
// it panics otherwise, as for len(idx) != len(val) or an index outside
// [0, Dim())): the event's row (duplicates summed in order, indices
// sorted, entries summing to 0 left out) is scored by the serving version
// on its sparse rows and, if labelled, stored in the window's arena. It
// costs O(nnz log nnz) for the row plus the score (svm: O(nSV + the
// entries the event shares with the support vectors)) and does not
// allocate once the arena has grown to the window's content, except for
// the copy of the window handed to a refit (with Config.OnScore, also
// before an unlabelled event's score: see Observe).
func (m *Model) ObserveSparse(idx []int32, val []float64, y float64, labelled bool) online.Prediction {
	if m.rows == nil {
		panic("refit: ObserveSparse: " + m.Sparse().Error())
	}
	if len(idx) != len(val) {
		panic("refit: ObserveSparse: len(idx) != len(val)")
	}
	for _, i := range idx {
		if uint32(i) >= uint32(m.cfg.Dim) {
			panic(fmt.Sprintf("refit: ObserveSparse: index %d outside [0, %d)", i, m.cfg.Dim))
		}
	}
	return m.observeRow(m.bld.Build(idx, val), y, labelled)
}

// observeRow is Observe for a sparse row x (a model of hashed features).
func (m *Model) observeRow(x sparse.Row, y float64, labelled bool) online.Prediction {
	if !labelled && m.cfg.OnScore && m.since > 0 {
		m.refitOnScore() // the window's rows are copied: x (m.bld's) is untouched
	}
	var p online.Prediction
	if s := m.cur.Load(); s != nil {
		p = s.fit.(sparseFitted).predictSparse(x, m.sbuf)
		p.Version = s.version
		if m.levels != nil {
			p.Label = m.levels.Level(p.Score)
		}
	}
	if !labelled {
		return p
	}
	if m.levels != nil && p.Version != 0 {
		m.levels.Record(p.Score, int(y))
	}
	now := m.now().UnixNano()
	i := (m.head + m.size) % m.cfg.Window
	if m.size == m.cfg.Window {
		m.rows.Pop()
		m.head = (m.head + 1) % m.cfg.Window
	} else {
		m.size++
	}
	m.rows.Push(x, sparse.Sq(x))
	m.ys[i], m.ts[i] = y, now
	m.learned++
	m.since++
	m.maybeRefit(now)
	return p
}

// maybeRefit starts a refit after a labelled event when one is due.
func (m *Model) maybeRefit(now int64) {
	due := (m.cfg.EveryEvents > 0 && m.since >= m.cfg.EveryEvents) || m.due.Load()
	if due && !m.running.Load() {
		m.expire(now)
		if m.size >= m.cfg.MinEvents {
			m.due.Store(false)
			m.since = 0
			if m.async() {
				m.running.Store(true)
				m.reqs <- m.request() // never blocks: at most one request is outstanding
			} else {
				// Not started (offline evaluation, tests): refit inline, so
				// that results are deterministic.
				m.RefitNow(context.Background())
			}
		}
	}
}

// refitOnScore refits inline before an unlabelled event is scored
// (Config.OnScore; the caller checked that labelled events were learned
// since the last refit), unless the model is started: a started model
// refits in the background by its schedule only, and its event path never
// waits for a fit. Events older than WindowTime leave first; with fewer
// than MinEvents left nothing is fitted (and the next score looks again).
func (m *Model) refitOnScore() {
	if m.async() {
		return
	}
	m.expire(m.now().UnixNano())
	if m.size < m.cfg.MinEvents {
		return
	}
	m.due.Store(false)
	m.since = 0
	m.RefitNow(context.Background())
}

func (m *Model) async() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started && !m.closed
}

// expire drops events older than WindowTime.
func (m *Model) expire(now int64) {
	if m.cfg.WindowTime <= 0 {
		return
	}
	D := m.cfg.Dim
	for m.size > 0 && now-m.ts[m.head] > int64(m.cfg.WindowTime) {
		if m.sums != nil {
			m.sums.Remove(m.xs[m.head*D:(m.head+1)*D], m.ys[m.head])
		}
		if m.rows != nil {
			m.rows.Pop()
		}
		m.head = (m.head + 1) % m.cfg.Window
		m.size--
	}
}

// request is the input of the next refit: a copy of the running sums into
// spare (which the refit goroutine owns until it clears running), or a
// copy of the window.
func (m *Model) request() request {
	sc := m.currentScale()
	if m.sums != nil {
		switch fm := m.sums.FeatureMap(); {
		case m.spare == nil:
			m.spare = rank.NewSums(fm)
		case m.spare.FeatureMap() != fm: // gamma auto's warm-up redrew the map
			m.spare.Remap(fm)
		}
		m.spare.Copy(m.sums)
		return request{sums: m.spare, scale: sc}
	}
	return request{data: m.window(), scale: sc}
}

// currentScale copies the statistics of StandardizeWith (nil without, and
// for hashed features, which are not standardised).
func (m *Model) currentScale() *scale {
	if m.scaling == nil || m.rows != nil {
		return nil
	}
	sc := &scale{mean: make([]float64, m.cfg.Dim), inv: make([]float64, m.cfg.Dim)}
	m.scaling.Transform(sc.mean, sc.inv)
	return sc
}

// window copies the window, oldest first.
func (m *Model) window() *Data {
	if m.rows != nil {
		d := &Data{Rows: make([]sparse.Row, m.size), Y: make([]float64, m.size), D: m.cfg.Dim}
		for k := range m.size {
			d.Rows[k] = m.rows.Row(k)
			d.Y[k] = m.ys[(m.head+k)%m.cfg.Window]
		}
		d.Rows = sparse.Clone(d.Rows)
		return d
	}
	d := &Data{X: make([]float64, m.size*m.cfg.Dim), Y: make([]float64, m.size), D: m.cfg.Dim}
	for k := range m.size {
		i := (m.head + k) % m.cfg.Window
		copy(d.Row(k), m.xs[i*m.cfg.Dim:(i+1)*m.cfg.Dim])
		d.Y[k] = m.ys[i]
	}
	return d
}

// RefitNow trains synchronously on the current window (used by offline
// evaluation at the end of a data set) and swaps the result in, guard
// included. It must not run concurrently with Observe.
func (m *Model) RefitNow(ctx context.Context) Report {
	var req request
	if m.sums != nil && m.running.Load() { // spare is in use by a background refit
		req.sums = rank.NewSums(m.sums.FeatureMap())
		req.sums.Copy(m.sums)
		req.scale = m.currentScale()
	} else {
		req = m.request()
	}
	r := m.refit(ctx, req)
	if m.onRefit != nil {
		m.onRefit(r)
	}
	return r
}

// Encoding, after the envelope (online.AppendHeader: type, parameters,
// input dimension d):
//
//	learned i64 | since u32 | size u32 | version i64 |
//	fitted model: frame (empty: none) |
//	the serving version's standardisation: frame (empty: none; else mean
//	and 1/sd, d float64 each; for a model of hashed features, which never
//	standardises, 4 bytes: Config.Sparse u32, and the rows are sparse) |
//	size rows, oldest first: x (d float64; standardised as they entered
//	for a model fitted from running sums; sparse: nnz u32, nnz indices
//	u32 strictly increasing, nnz float64 values), y float64, ts int64 |
//	level thresholds: frame (empty: none; online.LevelThresholds) |
//	running sums: frame (empty: none; rank.Sums) |
//	for the random-feature solver with gamma auto only: S float64, the
//	data scale of the sums' map
//
// Before the envelope the encoding did not carry the parameters (formats 1
// and 2, still read by UnmarshalBinary into a configured model): magic
// "RFIT", format u16, type str, dim u32, window u32, size u32, learned i64,
// since u32, version i64, fitted length u32 + bytes (0 = none), size rows;
// format 2 continued with sections u8 (bit 0: level thresholds, bit 1:
// running sums) and each present section's length u32 + bytes.
const legacyMagic = "RFIT"

const (
	sectionLevels = 1 << iota
	sectionSums
)

// noParams stands for the parameters of a Model configured without any
// (Config.Params nil, as in tests).
type noParams struct{}

func (*noParams) Validate(int) error { return nil }

// params returns Config.Params, or noParams.
func (m *Model) params() online.Params {
	if m.cfg.Params != nil {
		return m.cfg.Params
	}
	return &noParams{}
}

// AppendBinary appends the encoding of the window and the serving model
// to dst. It must not run concurrently with Observe (the pipeline pauses
// processing for it); it may run while a refit is in progress (the
// serving model is immutable).
func (m *Model) AppendBinary(dst []byte) ([]byte, error) {
	cur := m.cur.Load()
	var version int64
	if cur != nil {
		version = cur.version
	}
	dst = online.AppendHeader(dst, m.cfg.Type, m.params(), m.cfg.Dim)
	dst = codec.AppendI64(dst, m.learned)
	dst = codec.AppendU32(dst, uint32(m.since))
	dst = codec.AppendU32(dst, uint32(m.size))
	dst = codec.AppendI64(dst, version)
	dst, err := codec.AppendFrame(dst, func(dst []byte) ([]byte, error) {
		if cur == nil {
			return dst, nil
		}
		b, err := cur.fit.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("refit: marshal fitted model: %w", err)
		}
		return append(dst, b...), nil
	})
	if err != nil {
		return nil, err
	}
	dst, at := codec.BeginFrame(dst)
	if m.rows != nil {
		dst = codec.AppendU32(dst, uint32(m.cfg.Sparse))
	} else if cur != nil && cur.scale != nil {
		dst = codec.AppendF64s(dst, cur.scale.mean)
		dst = codec.AppendF64s(dst, cur.scale.inv)
	}
	dst = codec.EndFrame(dst, at)
	D := m.cfg.Dim
	for k := range m.size {
		i := (m.head + k) % m.cfg.Window
		if m.rows != nil {
			x := m.rows.Row(k)
			dst = codec.AppendU32(dst, uint32(x.Len()))
			for _, j := range x.Idx {
				dst = codec.AppendU32(dst, uint32(j))
			}
			dst = codec.AppendF64s(dst, x.Val)
		} else {
			dst = codec.AppendF64s(dst, m.xs[i*D:(i+1)*D])
		}
		dst = codec.AppendF64(dst, m.ys[i])
		dst = codec.AppendI64(dst, m.ts[i])
	}
	if dst, err = codec.AppendFrame(dst, func(dst []byte) ([]byte, error) {
		if m.levels == nil {
			return dst, nil
		}
		return m.levels.AppendBinary(dst)
	}); err != nil {
		return nil, fmt.Errorf("refit: marshal level thresholds: %w", err)
	}
	if dst, err = codec.AppendFrame(dst, func(dst []byte) ([]byte, error) {
		if m.sums == nil {
			return dst, nil
		}
		return m.sums.AppendBinary(dst)
	}); err != nil {
		return nil, fmt.Errorf("refit: marshal running sums: %w", err)
	}
	if m.autoS > 0 {
		dst = codec.AppendF64(dst, m.autoS)
	}
	return dst, nil
}

// MarshalBinary encodes the window and the serving model (see
// AppendBinary).
func (m *Model) MarshalBinary() ([]byte, error) {
	if m.rows != nil {
		return m.AppendBinary(make([]byte, 0, 256+m.size*20+m.rows.Entries()*12))
	}
	return m.AppendBinary(make([]byte, 0, 256+m.size*(m.cfg.Dim+2)*8))
}

// ErrFormat is wrapped by every decoding error: online.ErrFormat, the
// sentinel of every model encoding.
var ErrFormat = online.ErrFormat

// decoded is a decoded state, before it replaces a Model's.
type decoded struct {
	learned        int64
	since, size    int
	version        int64
	fit            Fitted
	scale          *scale
	rows           []byte // size rows of (d + 2) × 8 bytes
	levels, sums   []byte // sections (nil: absent)
	hasLevels, has bool
	autoS          float64 // the random-feature solver's S (gamma auto)

	// A window of sparse rows (hashed features): the rows, labels, times.
	sparse bool
	srows  []sparse.Row
	sy     []float64
	sts    []int64
}

// UnmarshalBinary restores a state written by MarshalBinary into a Model
// configured with the same type and dimension (and, for the version's
// state, the same parameters: the caller checks them, as the service does
// with fingerprints). A smaller configured window keeps the newest events.
// On error (wrapping ErrFormat, or online.ErrFormat for the envelope) m is
// unchanged.
func (m *Model) UnmarshalBinary(b []byte) error {
	var st decoded
	var err error
	if bytes.HasPrefix(b, []byte(legacyMagic)) {
		err = m.decodeLegacy(b, &st)
	} else {
		err = m.decode(b, &st)
	}
	if err != nil {
		return err
	}
	return m.apply(&st)
}

// decode reads the current encoding.
func (m *Model) decode(b []byte, st *decoded) error {
	p := reflect.New(reflect.TypeOf(m.params()).Elem()).Interface().(online.Params)
	dim, r := online.ReadHeader(b, m.cfg.Type, p, nil)
	if r.Err() == nil && dim != m.cfg.Dim {
		r.Failf("dimension %d, configured %d", dim, m.cfg.Dim)
	}
	st.learned = r.I64()
	st.since = int(r.U32())
	st.size = int(r.U32())
	st.version = r.I64()
	fit := r.Bytes()
	sc := r.Bytes()
	if err := r.Err(); err != nil {
		return err
	}
	D := m.cfg.Dim
	if len(fit) > 0 {
		f, err := m.unmarshalFit(fit)
		if err != nil {
			return err
		}
		st.fit = f
	}
	if (len(sc) == 4) != (m.rows != nil) {
		if m.rows != nil {
			return fmt.Errorf("%w: a window of dense rows, the model takes hashed (sparse) features", ErrFormat)
		}
		return fmt.Errorf("%w: a window of hashed (sparse) rows, the model is configured for dense features", ErrFormat)
	}
	switch len(sc) {
	case 0:
	case 4:
		st.sparse = true
		if st.fit != nil {
			if f, ok := st.fit.(sparseFitted); !ok || !f.sparseRows() {
				return fmt.Errorf("%w: a fitted model of dense rows with a window of sparse rows", ErrFormat)
			}
		}
		return m.decodeSparseRows(r, st)
	case 16 * D:
		if st.fit == nil {
			return fmt.Errorf("%w: standardisation without a fitted model", ErrFormat)
		}
		st.scale = &scale{mean: make([]float64, D), inv: make([]float64, D)}
		sr := codec.NewReader(sc, ErrFormat)
		sr.F64s(st.scale.mean)
		sr.F64s(st.scale.inv)
		for i := range D {
			if !isFinite(st.scale.mean[i]) || !(st.scale.inv[i] > 0) || math.IsInf(st.scale.inv[i], 0) {
				return fmt.Errorf("%w: standardisation of feature %d: mean %v, 1/sd %v", ErrFormat, i, st.scale.mean[i], st.scale.inv[i])
			}
		}
	default:
		return fmt.Errorf("%w: standardisation of %d bytes for dimension %d", ErrFormat, len(sc), D)
	}
	row := (D + 2) * 8
	if st.size < 0 || !r.Need(st.size*row) {
		return fmt.Errorf("%w: window of %d rows: %w", ErrFormat, st.size, r.Err())
	}
	st.rows = r.Take(st.size * row)
	st.levels, st.sums = r.Bytes(), r.Bytes()
	st.hasLevels, st.has = len(st.levels) > 0, len(st.sums) > 0
	if m.autoS > 0 {
		if st.autoS = r.F64(); r.Err() == nil && !(st.autoS > 0 && !math.IsInf(st.autoS, 1)) {
			return fmt.Errorf("%w: gamma auto's data scale %v", ErrFormat, st.autoS)
		}
	}
	return r.End()
}

// decodeSparseRows reads the rest of the current encoding of a model of
// hashed features: its sparse rows and sections.
func (m *Model) decodeSparseRows(r *codec.Reader, st *decoded) error {
	D := m.cfg.Dim
	if st.size < 0 || !r.Need(20*st.size) {
		return fmt.Errorf("%w: window of %d rows: %w", ErrFormat, st.size, r.Err())
	}
	st.srows, st.sy, st.sts = make([]sparse.Row, st.size), make([]float64, st.size), make([]int64, st.size)
	for k := range st.size {
		nnz := int(r.U32())
		if r.Err() != nil || nnz > D || !r.Need(12*nnz+16) {
			return fmt.Errorf("%w: row %d of %d entries: %w", ErrFormat, k, nnz, r.Err())
		}
		x := sparse.Row{Idx: make([]int32, nnz), Val: make([]float64, nnz)}
		for j := range x.Idx {
			x.Idx[j] = int32(r.U32())
		}
		r.F64s(x.Val)
		if err := sparse.Check(x, D); err != nil {
			return fmt.Errorf("%w: row %d: %w", ErrFormat, k, err)
		}
		st.srows[k], st.sy[k], st.sts[k] = x, r.F64(), r.I64()
	}
	st.levels, st.sums = r.Bytes(), r.Bytes()
	st.hasLevels, st.has = len(st.levels) > 0, len(st.sums) > 0
	if st.has {
		return fmt.Errorf("%w: running sums with a window of sparse rows", ErrFormat)
	}
	return r.End()
}

// decodeLegacy reads formats 1 and 2 (before the envelope).
func (m *Model) decodeLegacy(b []byte, st *decoded) error {
	r := codec.NewReader(b[len(legacyMagic):], ErrFormat)
	format := r.U16()
	if r.Err() == nil && format != 1 && format != 2 {
		return fmt.Errorf("%w: format %d", ErrFormat, format)
	}
	if typ := r.Str(); r.Err() == nil && !m.legacyType(typ) {
		return fmt.Errorf("%w: model type %q, configured %q", ErrFormat, typ, m.cfg.Type)
	}
	dim := int(r.U32())
	r.U32() // window
	st.size = int(r.U32())
	st.learned = r.I64()
	st.since = int(r.U32())
	st.version = r.I64()
	fit := r.Bytes()
	if err := r.Err(); err != nil {
		return err
	}
	if dim != m.cfg.Dim {
		return fmt.Errorf("%w: dimension %d, configured %d", ErrFormat, dim, m.cfg.Dim)
	}
	if m.rows != nil {
		return fmt.Errorf("%w: a window of dense rows (format %d), the model takes hashed (sparse) features", ErrFormat, format)
	}
	if len(fit) > 0 {
		f, err := m.unmarshalFit(fit)
		if err != nil {
			return err
		}
		st.fit = f
	}
	row := (dim + 2) * 8
	if st.size < 0 || !r.Need(st.size*row) {
		return fmt.Errorf("%w: window of %d rows: %w", ErrFormat, st.size, r.Err())
	}
	st.rows = r.Take(st.size * row)
	if format == 2 {
		sections := r.U8()
		if r.Err() == nil && sections&^(sectionLevels|sectionSums) != 0 {
			return fmt.Errorf("%w: unknown sections %#x", ErrFormat, sections)
		}
		if sections&sectionLevels != 0 {
			st.levels, st.hasLevels = r.Bytes(), true
		}
		if sections&sectionSums != 0 {
			st.sums, st.has = r.Bytes(), true
		}
	}
	return r.End()
}

// unmarshalFit decodes a fitted model through the trainer and checks that
// it scores inputs of the configured dimension.
func (m *Model) unmarshalFit(b []byte) (Fitted, error) {
	f, err := m.tr.Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("%w: fitted model: %w", ErrFormat, err)
	}
	if d, ok := f.(interface{ inputDim() int }); ok && d.inputDim() != m.cfg.Dim {
		return nil, fmt.Errorf("%w: fitted model of dimension %d, configured %d", ErrFormat, d.inputDim(), m.cfg.Dim)
	}
	return f, nil
}

// legacyType reports whether typ is what a model of this configuration
// wrote before the envelope: its type, or "rfrank" for the random-feature
// ranking solver of lsrrank, mlsrrank and krr.
func (m *Model) legacyType(typ string) bool {
	return typ == m.cfg.Type || (typ == "rfrank" && m.sums != nil)
}

// apply replaces m's state with st after checking it; on error m is
// unchanged. Sections not configured are skipped; one configured but
// absent starts afresh (thresholds) or is rebuilt from the window (sums),
// as it is when the window was cut.
func (m *Model) apply(st *decoded) error {
	D := m.cfg.Dim
	if st.learned < int64(st.size) || st.size < 0 {
		return fmt.Errorf("%w: window of %d rows after %d events", ErrFormat, st.size, st.learned)
	}
	skip := max(0, st.size-m.cfg.Window)
	var levels *online.LevelThresholds
	if st.hasLevels && m.levels != nil {
		levels, _ = online.NewLevelThresholds(m.cfg.Levels)
		lr := codec.NewReader(st.levels, ErrFormat)
		levels.Decode(lr)
		if err := lr.End(); err != nil {
			return fmt.Errorf("%w: level thresholds: %w", ErrFormat, err)
		}
	}
	var fm *rank.FeatureMap
	if m.sums != nil {
		fm = m.sums.FeatureMap()
	}
	if m.autoS > 0 {
		if st.autoS == 0 { // a format before the envelope
			return fmt.Errorf("%w: no data scale for gamma auto's random features", ErrFormat)
		}
		var err error
		if fm, err = m.tr.(*RFRank).featureMap(D, st.autoS); err != nil {
			return fmt.Errorf("%w: gamma auto's data scale %v: %w", ErrFormat, st.autoS, err)
		}
	}
	var sums *rank.Sums
	if st.has && m.sums != nil && skip == 0 {
		sums = rank.NewSums(fm)
		if err := sums.UnmarshalBinary(st.sums); err != nil {
			return fmt.Errorf("%w: running sums: %w", ErrFormat, err)
		}
		if sums.N() != int64(st.size) {
			return fmt.Errorf("%w: running sums of %d events for a window of %d", ErrFormat, sums.N(), st.size)
		}
	}
	m.head, m.size = 0, st.size-skip
	if st.sparse {
		m.rows.Reset()
		for k := skip; k < st.size; k++ {
			j := k - skip
			m.rows.Push(st.srows[k], sparse.Sq(st.srows[k]))
			m.ys[j], m.ts[j] = st.sy[k], st.sts[k]
		}
	}
	rr := codec.NewReader(st.rows, ErrFormat)
	for k := range st.size {
		if st.sparse {
			break
		}
		if k < skip {
			rr.Take((D + 2) * 8)
			continue
		}
		j := k - skip
		rr.F64s(m.xs[j*D : (j+1)*D])
		m.ys[j] = rr.F64()
		m.ts[j] = rr.I64()
	}
	m.learned, m.since = st.learned, st.since
	if m.levels != nil {
		if levels == nil {
			levels, _ = online.NewLevelThresholds(m.cfg.Levels)
		}
		m.levels = levels
	}
	if m.sums != nil {
		if sums == nil {
			sums = rank.NewSums(fm)
			for k := range m.size {
				sums.Add(m.xs[k*D:(k+1)*D], m.ys[k])
			}
		}
		m.sums = sums
		if m.autoS > 0 {
			m.autoS = st.autoS
		}
	}
	if st.fit != nil {
		m.cur.Store(&serving{fit: st.fit, version: st.version, scale: st.scale})
		m.versions.Store(st.version)
	} else {
		m.cur.Store(nil)
	}
	return nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
