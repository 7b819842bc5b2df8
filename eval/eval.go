// Package eval runs configured models over a file, without Kafka, and
// reports their quality: prequential (every row is scored, then learned)
// over a data file and, optionally, holdout (rows scored only, by the models
// as learned from the data file) over a test file. `streamer eval` is its
// command; docs/eval.md documents the report.
//
// Measures, per section, as they apply to a model's kind (online.Traits):
//
//	classifiers (binary, labels −1/+1):
//	  error               fraction of rows whose prediction ≠ label ("no decision", 0, is an
//	                      error, as the service's accuracy counts it)
//	  error_ci            its 95% Wilson score interval
//	  abstentions         rows predicted 0, "no decision"; abstention_rate = abstentions / n
//	  decided_error       mistakes over decided rows: (wrong − abstentions) / (n − abstentions)
//	  decided_error_ci    its 95% Wilson score interval
//	  roc_auc             area under the ROC curve of the score (Mann–Whitney, mid-ranks for
//	                      ties); null when the section has one class only
//	  confusion           tp, fp, tn, fn, and abstentions by true class
//	  log_loss            with Prediction.HasProbability; p clipped to [1e-15, 1 − 1e-15]
//	  reliability         with Prediction.HasProbability: 10 bins of the probability, the
//	                      observed fraction of +1 per bin
//	  mean_mistake_bound  mean published bound, with Prediction.HasBound
//	  bound_violations    grid ρ (0, 0.1, …, 0.9) at which the observed fraction of y·f ≤ −ρ
//	                      exceeds bound(ρ): holdout, over the section against the final
//	                      model's bound; prequential, online.Judge's live check (the last
//	                      metrics.accuracy_window events every 100 events against the
//	                      model's bound then, summed), as the service exports it
//	ordinal:
//	  kendall_tau         Kendall's τ-b of score against true level
//	  mae, zero_one       of the predicted level (level 0, "no decision", counts as wrong)
//	  zero_one_ci         95% Wilson score interval of zero_one
//	  abstentions         rows predicted level 0; abstention_rate = abstentions / n
//	ranking, regression:
//	  kendall_tau         Kendall's τ-b of score against the target
//	  rmse                regression: root mean squared error of the score
//	all:
//	  n                   rows judged (labelled, label accepted by the model)
//	  events_per_s        Observe calls per second of the model's own wall time
//	  rejected            rows whose label the model rejects (not fatal)
//
// Rows a reader cannot use (malformed, wrong dimension, non-finite) are
// skipped and counted by reason in the report's data section.
//
// Files are streamed (256 rows at a time), but the score and label of every
// judged row are kept per model and section for Kendall's τ, the ROC AUC
// and the histograms: 16 bytes a row. With Options.Shuffle the data file's
// rows are read whole first (their features in memory), then run in an
// order drawn from Options.Seed.
//
// Without Shuffle, the order of the data file's labels is checked: when
// there are at least SortedMinRows labelled rows and the number of label
// changes between consecutive labelled rows is below SortedFraction (10%)
// of the number expected in a random order of the same labels, the report
// carries a warning (a file sorted or grouped by label: the prequential
// measures then say more about the order than about the model).
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/stream/wire"
)

// Options says what Run evaluates.
type Options struct {
	Data string // prequential section: every row scored, then learned
	Test string // holdout section (optional): rows scored only
	// Format of both files; "" picks it from each file's extension.
	Format string
	// ConfigPath is recorded in the report (informational).
	ConfigPath string
	// Progress, when non-nil, receives progress: a bar redrawn in place
	// when Terminal, otherwise a line at every 10%.
	Progress io.Writer
	Terminal bool
	// MaxSkipped is the fraction of a file's rows that may be skipped
	// (malformed, wrong dimension, …) before Run fails with the counts and
	// the first reason: a file whose rows are mostly unusable would
	// otherwise give a report about the few that were. 0 means the default,
	// DefaultMaxSkipped; 1 accepts any.
	MaxSkipped float64
	// Shuffle runs the data file's rows in a random order drawn from Seed
	// (the same seed, the same order) instead of the file's. The holdout
	// file is read in its order (its rows are scored only).
	Shuffle bool
	Seed    int64
}

// DefaultMaxSkipped is Options.MaxSkipped's default: 10% of the rows.
const DefaultMaxSkipped = 0.1

// CheckEvery is the number of judged events between prequential checks
// (online.JudgeCheckEvery).
const CheckEvery = online.JudgeCheckEvery

const (
	sectionPrequential = "prequential"
	sectionHoldout     = "holdout"
	batchRows          = 256
	probClip           = 1e-15
)

// Report is the result of Run. Its JSON form is report.json.
type Report struct {
	Models map[string]*ModelReport `json:"models"`
	Config ConfigInfo              `json:"config"`
	Data   map[string]*DataInfo    `json:"data"` // by section
	// Warnings about the input (e.g. labels that look sorted).
	Warnings []string `json:"warnings,omitempty"`

	order []string // model names in config order
}

// ConfigInfo describes the evaluated configuration.
type ConfigInfo struct {
	Path  string            `json:"path,omitempty"`
	Types map[string]string `json:"types"` // model name → type
}

// DataInfo describes one input file.
type DataInfo struct {
	Path         string           `json:"path"`
	Format       string           `json:"format"`
	Rows         int64            `json:"rows"` // rows read, skipped ones included
	Unlabelled   int64            `json:"unlabelled,omitempty"`
	Skipped      map[string]int64 `json:"skipped,omitempty"` // by reason
	FirstSkipped string           `json:"first_skipped,omitempty"`
	Seconds      float64          `json:"seconds"`
	// Shuffled: the rows ran in the order drawn from Seed, not the file's.
	Shuffled bool   `json:"shuffled"`
	Seed     *int64 `json:"seed,omitempty"`
	// Label order of the prequential section, as run (see the package
	// documentation): changes between consecutive labelled rows, the number
	// expected in a random order, and whether the labels look sorted.
	LabelChanges         *int64   `json:"label_changes,omitempty"`
	ExpectedLabelChanges *float64 `json:"expected_label_changes,omitempty"`
	LabelsLookSorted     bool     `json:"labels_look_sorted,omitempty"`
}

// ModelReport holds one model's measures per section.
type ModelReport struct {
	Prequential *Measures `json:"prequential"`
	Holdout     *Measures `json:"holdout,omitempty"`
	// Fit describes the fitted model at the end, for the types that say
	// more than their measures (adaboost's weights).
	Fit *FitInfo `json:"fit,omitempty"`

	typ   string
	kind  online.Kind // which summary table the model is in
	plots plotData
}

// Measures of one model over one section (see the package documentation);
// measures that do not apply are nil (omitted from JSON). ROCAUC applies to
// every classifier: when it is undefined (one class) it is null in JSON.
type Measures struct {
	N          int64   `json:"n"`
	EventsPerS float64 `json:"events_per_s"`
	Rejected   int64   `json:"rejected"`

	Error            *float64         `json:"error,omitempty"`
	ErrorCI          *Interval        `json:"error_ci,omitempty"`
	Abstentions      *int64           `json:"abstentions,omitempty"`
	AbstentionRate   *float64         `json:"abstention_rate,omitempty"`
	DecidedError     *float64         `json:"decided_error,omitempty"`
	DecidedErrorCI   *Interval        `json:"decided_error_ci,omitempty"`
	ROCAUC           *OptFloat        `json:"roc_auc,omitempty"`
	Confusion        *Confusion       `json:"confusion,omitempty"`
	LogLoss          *float64         `json:"log_loss,omitempty"`
	Reliability      []ReliabilityBin `json:"reliability,omitempty"`
	MeanMistakeBound *float64         `json:"mean_mistake_bound,omitempty"`
	BoundViolations  *int             `json:"bound_violations,omitempty"`

	KendallTau *float64  `json:"kendall_tau,omitempty"`
	MAE        *float64  `json:"mae,omitempty"`
	ZeroOne    *float64  `json:"zero_one,omitempty"`
	ZeroOneCI  *Interval `json:"zero_one_ci,omitempty"`
	RMSE       *float64  `json:"rmse,omitempty"`
}

// ModelNames returns the model names in configuration order.
func (r *Report) ModelNames() []string { return append([]string(nil), r.order...) }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Run evaluates the models of cfg, built fresh from the model types of reg
// as the service builds them, over opt.Data and, if set, opt.Test. It stops
// early with ctx's error when ctx is cancelled.
func Run(ctx context.Context, cfg config.Config, reg *online.Registry, opt Options) (*Report, error) {
	if opt.Data == "" {
		return nil, errors.New("eval: no data file")
	}
	if len(cfg.Models) == 0 {
		return nil, errors.New("eval: the configuration has no models")
	}
	type namedModel struct {
		Name   string
		Model  online.Model
		Traits online.Traits
	}
	models := make([]namedModel, len(cfg.Models))
	for i, mc := range cfg.Models {
		t, err := reg.Type(mc.Type)
		if err != nil {
			return nil, fmt.Errorf("eval: models[%d] (%s): %w", i, mc.Name, err)
		}
		m, err := reg.New(mc.Spec())
		if err != nil {
			return nil, fmt.Errorf("eval: models[%d] (%s): %w", i, mc.Name, err)
		}
		models[i] = namedModel{mc.Name, m, t.Traits(mc.Params)}
	}
	rep := &Report{
		Models: map[string]*ModelReport{},
		Config: ConfigInfo{Path: opt.ConfigPath, Types: map[string]string{}},
		Data:   map[string]*DataInfo{},
	}
	states := make([]*modelState, len(models))
	for i, nm := range models {
		st := newModelState(nm.Model, nm.Traits, cfg.Metrics.AccuracyWindow)
		// models[i].label, as the service maps it.
		st.label = cfg.Models[i].LabelMap()
		for _, name := range cfg.Models[i].Members() { // an aggregator: scored after its members (listed before it)
			j := slices.IndexFunc(cfg.Models[:i], func(o config.Model) bool { return o.Name == name })
			if j < 0 {
				return nil, fmt.Errorf("eval: models[%d] (%s): member %q is not a model before it", i, nm.Name, name)
			}
			st.members = append(st.members, states[j])
		}
		if len(st.members) > 0 {
			st.in = make([]float64, nm.Model.Dim())
		}
		states[i] = st
		rep.order = append(rep.order, nm.Name)
		rep.Config.Types[nm.Name] = nm.Model.Type()
		rep.Models[nm.Name] = &ModelReport{typ: nm.Model.Type(), kind: nm.Traits.Kind}
	}
	sizes := []int64{fileSize(opt.Data)}
	if opt.Test != "" {
		sizes = append(sizes, fileSize(opt.Test))
	}
	prog := newProgress(opt.Progress, opt.Terminal, sizes...)
	defer prog.done()

	m0 := cfg.Models[0].Features
	fr := &fileRunner{format: opt.Format, dim: m0.Dim, names: m0.Names, maxBytes: cfg.Kafka.MaxMessageBytes,
		states: states, prog: prog}
	if h := m0.Hash; h != nil {
		fr.hash = &wire.HashConfig{Bits: h.Bits, Seed: uint64(h.Seed), MaxFeatures: m0.MaxFeatures, Namespaces: m0.Namespaces}
		for _, p := range m0.Interactions {
			fr.hash.Interactions = append(fr.hash.Interactions, [2]string{p[0], p[1]})
		}
		for i, st := range states {
			err := online.SparseSupport(st.m)
			if err == nil && len(st.members) > 0 {
				err = errors.New("an aggregating model does not take hashed features")
			}
			if err != nil {
				return nil, fmt.Errorf("eval: models[%d] (%s): %w", i, cfg.Models[i].Name, err)
			}
		}
	}
	sections := []struct{ name, path string }{{sectionPrequential, opt.Data}}
	if opt.Test != "" {
		sections = append(sections, struct{ name, path string }{sectionHoldout, opt.Test})
	}
	for _, sec := range sections {
		learn := sec.name == sectionPrequential
		for _, st := range states {
			st.begin(learn)
		}
		info, err := fr.run(ctx, sec.name, sec.path, learn && opt.Shuffle, opt.Seed)
		if err != nil {
			return nil, err
		}
		if err := info.usable(opt.MaxSkipped); err != nil {
			return nil, err
		}
		rep.Data[sec.name] = info
		if learn && info.LabelsLookSorted && !opt.Shuffle {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf(
				"%s: the labels look sorted (label changes between consecutive rows: %d; in a random order about %.0f): the prequential measures follow the file's order; use --shuffle",
				info.Path, *info.LabelChanges, *info.ExpectedLabelChanges))
		}
		if learn {
			// Heavy models refit once more at the end of the data, so that
			// the holdout judges a model trained on the last window.
			for _, nm := range models {
				if r, ok := online.Unwrap[interface {
					RefitNow(context.Context) refit.Report
				}](nm.Model); ok {
					if rr := r.RefitNow(ctx); rr.Err != nil && ctx.Err() == nil {
						return nil, fmt.Errorf("eval: final refit of %s: %w", nm.Name, rr.Err)
					}
				}
			}
		}
		for i, st := range states {
			mr := rep.Models[rep.order[i]]
			ms := st.finish()
			if learn {
				mr.Prequential = ms
			} else {
				mr.Holdout = ms
			}
		}
	}
	prog.finish()
	for i, st := range states {
		rep.Models[rep.order[i]].plots = st.plotData()
		rep.Models[rep.order[i]].Fit = fitInfo(models[i].Model)
	}
	return rep, nil
}

// FitInfo describes a fitted model beyond its measures.
type FitInfo struct {
	Version int64 `json:"version"`
	// Weights are an adaboost's β per dictionary member (every member
	// model, then each stump picked), summed over the rounds that picked it.
	Weights []FitWeight `json:"weights,omitempty"`
	// A lowrank model's shape, rank, the alternating iterations of its
	// last fit and whether they converged (the objective settled within
	// tol), and its final objective ½‖UVᵀ‖²_F + C Σ hinge.
	Rows       int      `json:"rows,omitempty"`
	Cols       int      `json:"cols,omitempty"`
	Rank       int      `json:"rank,omitempty"`
	Iterations int      `json:"iterations,omitempty"`
	Converged  *bool    `json:"converged,omitempty"`
	Objective  *float64 `json:"objective,omitempty"`
	// A mam with kernel.gamma auto: each candidate bandwidth (increasing
	// gamma) with its prequential error over the recent window and its
	// weight in the scoring mixture, and the gamma of the one with the
	// fewest recent mistakes.
	Bandwidths  []FitBandwidth `json:"bandwidths,omitempty"`
	ChosenGamma *float64       `json:"chosen_gamma,omitempty"`
}

// FitBandwidth is one candidate bandwidth of a gamma-auto mam.
type FitBandwidth struct {
	Gamma  float64  `json:"gamma"`
	Error  *float64 `json:"error"` // null before any judged prediction
	Weight float64  `json:"weight"`
}

// FitWeight is one dictionary member's weight in an adaboost model.
type FitWeight struct {
	Name   string  `json:"name"`
	Beta   float64 `json:"beta"`
	Rounds int     `json:"rounds"`
}

// fitInfo returns what m's fitted state says beyond its measures (nil for
// the types that say nothing more).
func fitInfo(m online.Model) *FitInfo {
	if mm, ok := online.Unwrap[*online.MAM](m); ok {
		c, cands := mm.Bandwidths()
		if c < 0 {
			return nil
		}
		info := &FitInfo{Version: mm.Version()}
		for _, b := range cands {
			fb := FitBandwidth{Gamma: b.Gamma, Weight: b.Weight}
			if !math.IsNaN(b.Error) {
				fb.Error = &b.Error
			}
			info.Bandwidths = append(info.Bandwidths, fb)
		}
		if c < len(cands) {
			info.ChosenGamma = &cands[c].Gamma
		}
		return info
	}
	if om, ok := online.Unwrap[*online.OMAM](m); ok {
		g, _, final := om.AutoGamma()
		if g == 0 || !final {
			return nil // a fixed gamma, or an auto one still in its warm-up
		}
		return &FitInfo{Version: om.Version(), ChosenGamma: &g}
	}
	r, ok := online.Unwrap[*refit.Model](m)
	if !ok {
		return nil
	}
	if s, ok := refit.LowRankState(m); ok {
		return &FitInfo{Version: r.Version(), Rows: s.Rows, Cols: s.Cols, Rank: s.Rank, Iterations: s.Iterations,
			Converged: &s.Converged, Objective: &s.Objective}
	}
	if g, ok := r.AutoGamma(); ok { // krr, lsrrank: the width of the current fit
		return &FitInfo{Version: r.Version(), ChosenGamma: &g}
	}
	if f, ok := r.AdaBoostFit(); ok {
		info := &FitInfo{Version: r.Version()}
		for _, w := range f.Weights() {
			info.Weights = append(info.Weights, FitWeight{Name: w.Name, Beta: w.Beta, Rounds: w.Rounds})
		}
		return info
	}
	return nil
}

// fileSize returns the size of a regular file, 0 when unknown (a pipe).
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// fileRunner streams files through every model.
type fileRunner struct {
	format   string // "" = from each file's extension
	dim      int
	names    []string
	maxBytes int
	hash     *wire.HashConfig // features.hash: JSON Lines rows hashed into sparse rows
	states   []*modelState
	prog     *progress
}

// run runs one file through every model, batchRows rows at a time: in the
// file's order, or shuffled (read whole, then run in the order drawn from
// seed). The prequential section's label order is checked.
func (fr *fileRunner) run(ctx context.Context, section, path string, shuffle bool, seed int64) (*DataInfo, error) {
	format := fr.format
	if format == "" {
		var err error
		if format, err = FormatFromPath(path); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	size := fileSize(path)
	fr.prog.file(section, size)
	var rd Reader
	switch {
	case fr.hash == nil:
		rd, err = NewReader(format, f, fr.dim, fr.names, fr.maxBytes)
	case format != FormatJSONL:
		err = fmt.Errorf("hashed features (models[0].features.hash) are read from JSON Lines (wire events) only, not %s", format)
	default:
		rd, err = NewHashedReader(f, *fr.hash, fr.maxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", path, err)
	}
	info := &DataInfo{Path: path, Format: format, Shuffled: shuffle}
	if shuffle {
		info.Seed = &seed
	}
	var order *labelOrder
	if section == sectionPrequential {
		order = &labelOrder{}
	}
	start := time.Now()
	// next reads the next usable row into r, counting the others; false at
	// the end.
	next := func(r *Row) (bool, error) {
		for {
			err := rd.Next(r)
			if err == io.EOF {
				return false, nil
			}
			info.Rows++
			var re *RowError
			if errors.As(err, &re) {
				if info.Skipped == nil {
					info.Skipped = map[string]int64{}
					info.FirstSkipped = re.Error()
				}
				info.Skipped[re.Reason]++
				continue
			}
			if err != nil {
				return false, fmt.Errorf("eval: %s: %w", path, err)
			}
			if !r.HasLabel {
				info.Unlabelled++
			}
			return true, nil
		}
	}
	feed := func(batch []Row) {
		if order != nil {
			for i := range batch {
				if batch[i].HasLabel {
					order.add(batch[i].Label)
				}
			}
		}
		for _, st := range fr.states {
			st.run(batch)
		}
	}
	if shuffle {
		rows, err := readShuffled(ctx, next, fr.dim, seed)
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(rows); i += batchRows {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			end := min(i+batchRows, len(rows))
			feed(rows[i:end])
			fr.prog.at(int64(float64(size)*float64(end)/float64(len(rows))), end-i)
		}
	} else {
		off, _ := rd.(offsetter)
		batch := make([]Row, batchRows)
		for done := false; !done; {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n := 0
			for n < len(batch) {
				ok, err := next(&batch[n])
				if err != nil {
					return nil, err
				}
				if !ok {
					done = true
					break
				}
				n++
			}
			feed(batch[:n])
			var pos int64
			if off != nil {
				pos = off.offset()
			}
			fr.prog.at(pos, n)
		}
	}
	fr.prog.endFile()
	info.Seconds = time.Since(start).Seconds()
	if order != nil && !order.overflow {
		c, e := order.changes, order.expected()
		info.LabelChanges, info.ExpectedLabelChanges = &c, &e
		info.LabelsLookSorted = order.looksSorted()
	}
	return info, nil
}

// readShuffled reads every usable row with next and returns them in the
// order drawn from seed: math/rand/v2's Fisher–Yates shuffle driven by a
// PCG generator seeded with (seed, shuffleStream), so that a seed gives the
// same order on every run and platform.
func readShuffled(ctx context.Context, next func(*Row) (bool, error), dim int, seed int64) ([]Row, error) {
	var (
		xs     []float64
		sparse []Row
		labels []float64
		has    []bool
		r      Row
	)
	for i := 0; ; i++ {
		if i%batchRows == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ok, err := next(&r)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if len(r.X) == 0 { // hashed: sparse rows, each kept as read
			sparse = append(sparse, Row{Idx: slices.Clone(r.Idx), Val: slices.Clone(r.Val), Field: slices.Clone(r.Field)})
		}
		xs = append(xs, r.X...)
		labels = append(labels, r.Label)
		has = append(has, r.HasLabel)
	}
	rows := make([]Row, len(labels))
	for i := range rows {
		if sparse != nil {
			rows[i] = Row{Idx: sparse[i].Idx, Val: sparse[i].Val, Field: sparse[i].Field, Label: labels[i], HasLabel: has[i]}
			continue
		}
		rows[i] = Row{X: xs[i*dim : (i+1)*dim : (i+1)*dim], Label: labels[i], HasLabel: has[i]}
	}
	shuffleRows(rows, seed)
	return rows, nil
}

// shuffleStream is the PCG stream of the shuffle (any fixed constant).
const shuffleStream = 0x5eed_5eed_5eed_5eed

// shuffleRows puts rows in the random order drawn from seed.
func shuffleRows(rows []Row, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), shuffleStream))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
}

// usable checks that a file gave rows to judge and that no more than the
// fraction max of its rows (0: DefaultMaxSkipped) was skipped.
func (d *DataInfo) usable(max float64) error {
	if max <= 0 {
		max = DefaultMaxSkipped
	}
	var skipped int64
	reasons := make([]string, 0, len(d.Skipped))
	for r, n := range d.Skipped {
		skipped += n
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(reasons)
	switch {
	case d.Rows == 0:
		return fmt.Errorf("eval: %s: no rows", d.Path)
	case skipped == d.Rows || float64(skipped) > max*float64(d.Rows):
		return fmt.Errorf("eval: %s: %d of %d rows skipped (%s), more than %g%% (--max-skipped); the first: %s",
			d.Path, skipped, d.Rows, strings.Join(reasons, ", "), 100*max, d.FirstSkipped)
	}
	return nil
}

// outcome is what one model made of one row.
type outcome struct {
	kind int8 // outcomeJudged, outcomeScored (unlabelled), outcomeRejected
	y    float64
	p    online.Prediction
}

const (
	outcomeJudged int8 = iota
	outcomeScored
	outcomeRejected
)

// modelState is one model's evaluation in progress.
type modelState struct {
	m       online.Model
	traits  online.Traits
	label   *online.LabelMap // maps the file's label before m.Label (nil: none)
	bounder online.Bounder   // nil when the model has no bound
	ordinal bool             // judged by τ (and levels) rather than accuracy
	ranking bool             // ranking or regression: real targets, no predicted level
	learn   bool
	out     []outcome
	window  int

	sec       *sectionStats
	preqStats *sectionStats // kept for the plots
	holdStats *sectionStats

	// An aggregator's members (run on each batch before it) and its input
	// buffer: their predictions for a row, then the row's features.
	members []*modelState
	in      []float64
}

// observe is the model's Observe of row i of the batch (ObserveSparse for
// a hashed row, ObserveFields for a model that reads its fields).
func (st *modelState) observe(i int, r *Row, y float64, learn bool) online.Prediction {
	if len(r.X) == 0 && r.Idx != nil {
		return online.ObserveFields(st.m.(online.SparseModel), r.Idx, r.Val, r.Field, y, learn)
	}
	return st.m.Observe(st.input(i, r.X), y, learn)
}

// input returns what the model observes for row i of the batch: its
// features, or for an aggregator the members' predictions for it first.
func (st *modelState) input(i int, x []float64) []float64 {
	if st.in == nil {
		return x
	}
	for k, m := range st.members {
		st.in[k] = float64(m.out[i].p.Label)
	}
	copy(st.in[len(st.members):], x)
	return st.in
}

// sectionStats accumulates one section's measures.
type sectionStats struct {
	learn                bool
	n, rejected, calls   int64
	elapsed              time.Duration
	wrong                int64
	abstain              int64 // predicted 0 (classifier) or level 0 (ordinal)
	conf                 Confusion
	rel                  reliability
	logLoss              float64
	nProb                int64
	boundSum             float64
	nBound               int64
	sinceCheck           int
	judge                *online.Judge        // prequential: the service's judge
	all                  *online.BoundMonitor // cumulative, default grid
	fine                 *online.BoundMonitor // cumulative, fine grid (plots)
	scores, truth        []float64            // judged rows
	pred                 []int                // ordinal: predicted levels
	curve, cumCurve      series               // quality over the stream (see plotData)
	finalBound, fineGrid []float64
}

func newModelState(m online.Model, t online.Traits, window int) *modelState {
	if window <= 0 {
		window = 1000
	}
	st := &modelState{m: m, traits: t, out: make([]outcome, batchRows), window: window}
	st.ordinal = t.Kind != online.Classifier
	st.ranking = t.Kind == online.Ranking || t.Kind == online.Regression
	if t.Bound {
		st.bounder, _ = m.(online.Bounder)
	}
	return st
}

// begin starts a section.
func (st *modelState) begin(learn bool) {
	s := &sectionStats{learn: learn}
	if st.bounder != nil {
		s.all = online.NewBoundMonitor(0, online.DefaultBoundGrid())
		s.fine = online.NewBoundMonitor(0, fineGrid())
	}
	if learn {
		s.judge = online.NewJudge(st.traits, st.window)
	}
	st.sec, st.learn = s, learn
	if learn {
		st.preqStats = s
	} else {
		st.holdStats = s
	}
}

// fineGrid is ρ = 0, 0.01, …, 0.99 for the bound plot.
func fineGrid() []float64 {
	g := make([]float64, 100)
	for i := range g {
		g[i] = float64(i) / 100
	}
	return g
}

// run feeds a batch of rows to the model. Only Label and Observe are timed;
// the bookkeeping runs between timed stretches, which end at every
// CheckEvery-th judged event so that the judge's check (online.Judge: the
// bound, τ) sees the model exactly as it is then.
func (st *modelState) run(rows []Row) {
	s := st.sec
	for i := 0; i < len(rows); {
		start := i
		t0 := time.Now()
		for ; i < len(rows); i++ {
			r, o := &rows[i], &st.out[i]
			if !r.HasLabel {
				o.kind, o.p = outcomeScored, st.observe(i, r, 0, false)
				continue
			}
			v, in := st.label.Read(r.Label)
			y, ok := st.m.Label(v)
			if !in || !ok {
				o.kind = outcomeRejected
				continue
			}
			o.kind, o.y, o.p = outcomeJudged, y, st.observe(i, r, y, st.learn)
			if s.sinceCheck++; s.sinceCheck == CheckEvery {
				s.sinceCheck = 0
				i++
				break
			}
		}
		s.elapsed += time.Since(t0)
		for j := start; j < i; j++ {
			st.account(&st.out[j])
		}
	}
}

// account adds one outcome to the section's measures.
func (st *modelState) account(o *outcome) {
	s := st.sec
	switch o.kind {
	case outcomeRejected:
		s.rejected++
		return
	case outcomeScored:
		s.calls++
		return
	}
	s.calls++
	s.n++
	p := &o.p
	s.scores = append(s.scores, p.Score)
	s.truth = append(s.truth, o.y)
	if s.judge != nil {
		s.judge.Add(*p, o.y, st.bounder)
	}
	if st.ordinal {
		if !st.ranking && p.Label == 0 {
			s.abstain++
		}
		s.pred = append(s.pred, p.Label)
		if s.judge != nil && s.curve.due(s.n) {
			s.curve.add(float64(s.n), s.judge.KendallTau())
			if !st.ranking {
				s.cumCurve.add(float64(s.n), s.judge.ZeroOne())
			}
		}
		return
	}
	wrong := float64(p.Label) != o.y
	if wrong {
		s.wrong++
	}
	if p.Label == 0 {
		s.abstain++
	}
	s.conf.add(p.Label, o.y)
	if s.judge != nil && s.curve.due(s.n) {
		s.curve.add(float64(s.n), 1-s.judge.Accuracy())
		s.cumCurve.add(float64(s.n), float64(s.wrong)/float64(s.n))
	}
	if p.HasProbability {
		q := min(max(p.Probability, probClip), 1-probClip)
		if o.y < 0 {
			q = 1 - q
		}
		s.logLoss -= math.Log(q)
		s.nProb++
		s.rel.add(p.Probability, o.y)
	}
	if p.HasBound {
		s.boundSum += p.MistakeBound
		s.nBound++
	}
	if st.bounder != nil {
		margin := o.y * p.Score
		s.all.Add(margin)
		s.fine.Add(margin)
	}
}

// finish closes the section and returns its measures.
func (st *modelState) finish() *Measures {
	s := st.sec
	m := &Measures{N: s.n, Rejected: s.rejected}
	if sec := s.elapsed.Seconds(); sec > 0 {
		m.EventsPerS = math.Round(float64(s.calls) / sec)
	}
	if st.ordinal {
		if s.n > 0 {
			truth := make([]int, len(s.truth))
			for i, y := range s.truth {
				truth[i] = int(y)
			}
			m.KendallTau = num(online.KendallTauB(s.scores, s.truth))
			if !st.ranking {
				m.MAE = num(online.MeanAbsError(s.pred, truth))
				m.ZeroOne = num(online.ZeroOneError(s.pred, truth))
				var wrong int64
				for i, y := range truth {
					if s.pred[i] != y {
						wrong++
					}
				}
				m.ZeroOneCI = wilson95(wrong, s.n)
				m.Abstentions, m.AbstentionRate = abstentions(s.abstain, s.n)
			}
			if st.traits.Kind == online.Regression {
				var se float64
				for i, y := range s.truth {
					se += (s.scores[i] - y) * (s.scores[i] - y)
				}
				m.RMSE = num(math.Sqrt(se / float64(len(s.truth))))
			}
		}
		return m
	}
	if s.n > 0 {
		m.Error = num(float64(s.wrong) / float64(s.n))
		m.ErrorCI = wilson95(s.wrong, s.n)
	}
	m.Abstentions, m.AbstentionRate = abstentions(s.abstain, s.n)
	if decided := s.n - s.abstain; decided > 0 {
		mistakes := s.wrong - s.abstain
		m.DecidedError = num(float64(mistakes) / float64(decided))
		m.DecidedErrorCI = wilson95(mistakes, decided)
	}
	m.ROCAUC = optFloat(ROCAUC(s.scores, s.truth))
	conf := s.conf
	m.Confusion = &conf
	m.Reliability = s.rel.bins()
	if s.nProb > 0 {
		m.LogLoss = num(s.logLoss / float64(s.nProb))
	}
	if s.nBound > 0 {
		m.MeanMistakeBound = num(s.boundSum / float64(s.nBound))
		if st.bounder != nil {
			var v int
			if s.judge != nil {
				_, v = s.judge.Violations()
			} else {
				_, v = s.all.Check(st.bounder.Bound, nil)
			}
			m.BoundViolations = &v
		}
	}
	if st.bounder != nil {
		s.fineGrid = s.fine.Grid()
		s.finalBound, _ = s.fine.Check(st.bounder.Bound, nil)
	}
	return m
}

// abstentions returns the count and, for n > 0, the rate.
func abstentions(k, n int64) (*int64, *float64) {
	var rate *float64
	if n > 0 {
		rate = num(float64(k) / float64(n))
	}
	return &k, rate
}

// num returns a pointer to v, nil for NaN or ±Inf (not representable in
// JSON: the measure is then omitted).
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// series keeps at most maxPoints points of a quality curve over the stream:
// a point every step events, step doubling (and every other point dropped)
// whenever it fills up.
type series struct {
	x, y []float64
	step int64
}

const maxPoints = 1024

func (s *series) due(n int64) bool {
	if s.step == 0 {
		s.step = 1
	}
	return n%s.step == 0
}

func (s *series) add(x, y float64) {
	if math.IsNaN(y) {
		return
	}
	s.x, s.y = append(s.x, x), append(s.y, y)
	if len(s.x) >= maxPoints {
		k := 0
		for i := 1; i < len(s.x); i += 2 {
			s.x[k], s.y[k] = s.x[i], s.y[i]
			k++
		}
		s.x, s.y = s.x[:k], s.y[:k]
		s.step *= 2
	}
}
