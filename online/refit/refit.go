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
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/rank"
)

// Data is a window handed to a Trainer: N rows of D features, row-major.
type Data struct {
	X []float64
	Y []float64
	D int
}

// N is the number of rows.
func (d *Data) N() int { return len(d.Y) }

// Row returns row i.
func (d *Data) Row(i int) []float64 { return d.X[i*d.D : (i+1)*d.D] }

// Fitted is a trained model. It is immutable once returned by Fit, so it
// can score from the processing goroutine while the next one is trained.
type Fitted interface {
	// Predict scores x (it must not allocate). Prediction.N is the number
	// of examples the model was trained on.
	Predict(x []float64) online.Prediction
	MarshalBinary() ([]byte, error)
}

// Stats describes a fit, for metrics.
type Stats struct {
	SupportVectors int     // SVM: support vectors (0 when not applicable)
	Objective      float64 // the solver's objective (SVM: dual objective, LIBSVM's sign)
	Iterations     int
}

// Trainer trains Fitted models.
type Trainer interface {
	// Type is the model type, e.g. "svm".
	Type() string
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
	Dim         int
	Window      int           // labelled events kept (required)
	WindowTime  time.Duration // also drop events older than this (0 = off)
	EveryEvents int           // refit after this many labelled events (0 = off)
	Every       time.Duration // refit this often (0 = off)
	Guard       float64       // held-back fraction of the window, in [0, 0.5); 0 = off
	GuardSlack  float64       // accept a new model if its held-back error ≤ old + slack
	MinEvents   int           // no refit before the window holds this many events (default 10)
	Levels      int           // ≥ 2: publish levels 1..Levels from thresholds on the score; 0 = off
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
	data *Data
	sums *rank.Sums
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

	// Running sums of the window, for a sumsTrainer: sums follows the
	// window on the processing goroutine; spare (made at the first refit)
	// is the copy a refit fits from, owned by the refit goroutine while
	// running is set.
	st          sumsTrainer
	sums, spare *rank.Sums

	mu       sync.Mutex
	onRefit  func(Report)
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	started  bool
	closed   bool
	versions atomic.Int64 // last version number handed out
}

var _ online.Model = (*Model)(nil)

// New builds a Model; Start starts its refit goroutine.
func New(cfg Config, tr Trainer) (*Model, error) {
	if cfg.Dim < 1 {
		return nil, fmt.Errorf("refit: dim must be ≥ 1, got %d", cfg.Dim)
	}
	if cfg.Window < 2 {
		return nil, fmt.Errorf("refit: window.events must be ≥ 2, got %d", cfg.Window)
	}
	if cfg.EveryEvents < 0 || cfg.Every < 0 || (cfg.EveryEvents == 0 && cfg.Every == 0) {
		return nil, errors.New("refit: refit.every_events or refit.every must be set (> 0)")
	}
	if !(cfg.Guard >= 0 && cfg.Guard < 0.5) {
		return nil, fmt.Errorf("refit: guard must be in [0, 0.5), got %v", cfg.Guard)
	}
	if cfg.MinEvents <= 0 {
		cfg.MinEvents = 10
	}
	m := &Model{
		cfg:  cfg,
		tr:   tr,
		xs:   make([]float64, cfg.Window*cfg.Dim),
		ys:   make([]float64, cfg.Window),
		ts:   make([]int64, cfg.Window),
		now:  time.Now,
		reqs: make(chan request, 1),
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
			return nil, fmt.Errorf("refit: %s fits from running sums: no held-back rows for the guard (guard must be 0, got %v)", tr.Type(), cfg.Guard)
		}
		s, err := st.newSums(cfg.Dim)
		if err != nil {
			return nil, err
		}
		m.st, m.sums = st, s
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
			return
		case req := <-m.reqs:
			r := m.refit(ctx, req)
			if m.onRefit != nil {
				m.onRefit(r)
			}
			m.running.Store(false)
		}
	}
}

// refit trains on req and swaps the result in if it passes the guard.
func (m *Model) refit(ctx context.Context, req request) Report {
	r := Report{OldError: math.NaN(), NewError: math.NaN()}
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
			train = &Data{X: d.X[:n*d.D], Y: d.Y[:n], D: d.D}
			held = &Data{X: d.X[n*d.D:], Y: d.Y[n:], D: d.D}
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
	if held != nil {
		r.OldError, r.NewError = errorRate(prev, held), errorRate(fit, held)
		if r.NewError > r.OldError+m.cfg.GuardSlack {
			r.Rejected = true
			r.Version = m.Version()
			return r
		}
	}
	v := m.versions.Add(1)
	m.cur.Store(&serving{fit: fit, version: v})
	r.Accepted, r.Version = true, v
	return r
}

// errorRate is the fraction of rows whose predicted label differs from y
// (no decision counts as an error).
func errorRate(f Fitted, d *Data) float64 {
	wrong := 0
	for i := range d.N() {
		if float64(f.Predict(d.Row(i)).Label) != d.Y[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(d.N())
}

// Type returns the trainer's model type.
func (m *Model) Type() string { return m.tr.Type() }

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
// the window handed to a refit of the rows.
func (m *Model) Observe(x []float64, y float64, labelled bool) online.Prediction {
	if len(x) != m.cfg.Dim {
		panic(fmt.Sprintf("refit: Observe: %d features, want %d", len(x), m.cfg.Dim))
	}
	var p online.Prediction
	if s := m.cur.Load(); s != nil {
		p = s.fit.Predict(x)
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
	return p
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
		m.head = (m.head + 1) % m.cfg.Window
		m.size--
	}
}

// request is the input of the next refit: a copy of the running sums into
// spare (which the refit goroutine owns until it clears running), or a
// copy of the window.
func (m *Model) request() request {
	if m.sums != nil {
		if m.spare == nil {
			m.spare = rank.NewSums(m.sums.FeatureMap())
		}
		m.spare.Copy(m.sums)
		return request{sums: m.spare}
	}
	return request{data: m.window()}
}

// window copies the window, oldest first.
func (m *Model) window() *Data {
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
	} else {
		req = m.request()
	}
	r := m.refit(ctx, req)
	if m.onRefit != nil {
		m.onRefit(r)
	}
	return r
}

// Encoding: magic "RFIT", format u16, type str, dim u32, window u32,
// size u32, learned i64, since u32, version i64, fitted length u32 +
// bytes (0 = none), then size rows (oldest first): d float64 + y float64 +
// ts int64. Format 2 (written only by models with levels or running sums;
// the others still write format 1, which is format 2 without the tail)
// continues with sections u8 (bit 0: level thresholds, bit 1: running
// sums) and, for each section present, its length u32 + bytes
// (online.LevelThresholds.AppendBinary, rank.Sums.AppendBinary).
const encMagic = "RFIT"

const (
	sectionLevels = 1 << iota
	sectionSums
)

// MarshalBinary encodes the window and the serving model. It must not run
// concurrently with Observe (the pipeline pauses processing for it); it
// may run while a refit is in progress (the serving model is immutable).
func (m *Model) MarshalBinary() ([]byte, error) {
	le := binary.LittleEndian
	var fit []byte
	var version int64
	if s := m.cur.Load(); s != nil {
		b, err := s.fit.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("refit: marshal fitted model: %w", err)
		}
		fit, version = b, s.version
	}
	typ := m.tr.Type()
	format := uint16(1)
	if m.levels != nil || m.sums != nil {
		format = 2
	}
	dst := make([]byte, 0, 64+len(typ)+len(fit)+m.size*(m.cfg.Dim+2)*8)
	dst = append(dst, encMagic...)
	dst = le.AppendUint16(dst, format)
	dst = append(dst, byte(len(typ)))
	dst = append(dst, typ...)
	dst = le.AppendUint32(dst, uint32(m.cfg.Dim))
	dst = le.AppendUint32(dst, uint32(m.cfg.Window))
	dst = le.AppendUint32(dst, uint32(m.size))
	dst = le.AppendUint64(dst, uint64(m.learned))
	dst = le.AppendUint32(dst, uint32(m.since))
	dst = le.AppendUint64(dst, uint64(version))
	dst = le.AppendUint32(dst, uint32(len(fit)))
	dst = append(dst, fit...)
	for k := range m.size {
		i := (m.head + k) % m.cfg.Window
		for _, v := range m.xs[i*m.cfg.Dim : (i+1)*m.cfg.Dim] {
			dst = le.AppendUint64(dst, math.Float64bits(v))
		}
		dst = le.AppendUint64(dst, math.Float64bits(m.ys[i]))
		dst = le.AppendUint64(dst, uint64(m.ts[i]))
	}
	if format == 1 {
		return dst, nil
	}
	var sections byte
	if m.levels != nil {
		sections |= sectionLevels
	}
	if m.sums != nil {
		sections |= sectionSums
	}
	dst = append(dst, sections)
	section := func(dst []byte, enc func([]byte) ([]byte, error)) ([]byte, error) {
		at := len(dst)
		dst, err := enc(le.AppendUint32(dst, 0))
		if err != nil {
			return nil, err
		}
		le.PutUint32(dst[at:], uint32(len(dst)-at-4))
		return dst, nil
	}
	var err error
	if m.levels != nil {
		if dst, err = section(dst, m.levels.AppendBinary); err != nil {
			return nil, fmt.Errorf("refit: marshal level thresholds: %w", err)
		}
	}
	if m.sums != nil {
		if dst, err = section(dst, m.sums.AppendBinary); err != nil {
			return nil, fmt.Errorf("refit: marshal running sums: %w", err)
		}
	}
	return dst, nil
}

// ErrFormat is wrapped by every decoding error.
var ErrFormat = errors.New("refit: bad model encoding")

// UnmarshalBinary restores a state written by MarshalBinary into a Model
// configured with the same type and dimension. A smaller configured window
// keeps the newest events. On error m is unchanged.
func (m *Model) UnmarshalBinary(b []byte) error {
	le := binary.LittleEndian
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, a...)...)
	}
	if len(b) < 7 || string(b[:4]) != encMagic || le.Uint16(b[4:]) < 1 || le.Uint16(b[4:]) > 2 {
		return bad("bad header")
	}
	format := le.Uint16(b[4:])
	tl := int(b[6])
	b = b[7:]
	if len(b) < tl+4*4+8+8+4 {
		return bad("truncated")
	}
	if typ := string(b[:tl]); typ != m.tr.Type() {
		return bad("model type %q, configured %q", typ, m.tr.Type())
	}
	b = b[tl:]
	dim, _, size := int(le.Uint32(b)), int(le.Uint32(b[4:])), int(le.Uint32(b[8:]))
	learned, since, version := int64(le.Uint64(b[12:])), int(le.Uint32(b[20:])), int64(le.Uint64(b[24:]))
	fl := int(le.Uint32(b[32:]))
	b = b[36:]
	if dim != m.cfg.Dim {
		return bad("dimension %d, configured %d", dim, m.cfg.Dim)
	}
	if fl > len(b) {
		return bad("truncated fitted model")
	}
	var fit Fitted
	if fl > 0 {
		f, err := m.tr.Unmarshal(b[:fl])
		if err != nil {
			return fmt.Errorf("%w: fitted model: %w", ErrFormat, err)
		}
		fit = f
	}
	b = b[fl:]
	row := (dim + 2) * 8
	if len(b) < size*row || format == 1 && len(b) != size*row || learned < int64(size) {
		return bad("window of %d rows in %d bytes", size, len(b))
	}
	rows, b := b[:size*row], b[size*row:]
	skip := max(0, size-m.cfg.Window)
	// Format 2 tail: the sections, decoded into fresh state so that m
	// stays unchanged on error. A section not configured is skipped; one
	// configured but absent starts afresh (thresholds) or is rebuilt from
	// the window (sums), as it is when the window was cut (skip > 0).
	var levels *online.LevelThresholds
	var sums *rank.Sums
	if format == 2 {
		if len(b) < 1 {
			return bad("truncated sections")
		}
		sections := b[0]
		b = b[1:]
		if sections&^(sectionLevels|sectionSums) != 0 {
			return bad("unknown sections %#x", sections)
		}
		next := func() ([]byte, error) {
			if len(b) < 4 || int(le.Uint32(b)) > len(b)-4 {
				return nil, bad("truncated section")
			}
			n := int(le.Uint32(b))
			p := b[4 : 4+n]
			b = b[4+n:]
			return p, nil
		}
		if sections&sectionLevels != 0 {
			p, err := next()
			if err != nil {
				return err
			}
			if m.levels != nil {
				levels, _ = online.NewLevelThresholds(m.cfg.Levels)
				if rest, err := levels.Decode(p); err != nil || len(rest) != 0 {
					return bad("level thresholds: %v (%d trailing bytes)", err, len(rest))
				}
			}
		}
		if sections&sectionSums != 0 {
			p, err := next()
			if err != nil {
				return err
			}
			if m.sums != nil && skip == 0 {
				sums = rank.NewSums(m.sums.FeatureMap())
				if err := sums.UnmarshalBinary(p); err != nil {
					return fmt.Errorf("%w: running sums: %w", ErrFormat, err)
				}
				if sums.N() != int64(size) {
					return bad("running sums of %d events for a window of %d", sums.N(), size)
				}
			}
		}
		if len(b) != 0 {
			return bad("%d trailing bytes", len(b))
		}
	}
	b = rows
	m.head, m.size = 0, size-skip
	for k := skip; k < size; k++ {
		r := b[k*row:]
		dst := m.xs[(k-skip)*dim : (k-skip+1)*dim]
		for j := range dst {
			dst[j] = math.Float64frombits(le.Uint64(r[j*8:]))
		}
		m.ys[k-skip] = math.Float64frombits(le.Uint64(r[dim*8:]))
		m.ts[k-skip] = int64(le.Uint64(r[dim*8+8:]))
	}
	m.learned, m.since = learned, since
	if m.levels != nil {
		if levels == nil {
			levels, _ = online.NewLevelThresholds(m.cfg.Levels)
		}
		m.levels = levels
	}
	if m.sums != nil {
		if sums == nil {
			sums = rank.NewSums(m.sums.FeatureMap())
			for k := range m.size {
				sums.Add(m.xs[k*dim:(k+1)*dim], m.ys[k])
			}
		}
		m.sums = sums
	}
	if fit != nil {
		m.cur.Store(&serving{fit: fit, version: version})
		m.versions.Store(version)
	} else {
		m.cur.Store(nil)
	}
	return nil
}
