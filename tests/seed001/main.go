// Command seed001 runs seed 001's recommendation experiment (its §IV-C,
// Table III: LSRRank and MLSRRank judged by MSD and M1D) on a stream,
// through the service, and against a batch solution of the same
// objectives on the same splits:
//
//	go run ./tests/seed001 -data DIR            # 3 groups × 10 repetitions
//	go run ./tests/seed001 -data DIR -reps 2 -groups 0
//
// DIR holds a MovieLens set in any of GroupLens' layouts: ratings.csv
// (ml-latest, ml-20m and later), ratings.dat (ml-1m, ml-10m) or u.data
// (ml-100k); docs/performance.md says where to download one. Its licence is for research only, so the
// repository holds neither it nor anything derived from it, and DIR is
// always a flag.
//
// The design (tests/internal/seed001): reference users grouped by their
// number of ratings ([20,40), [40,60), [60,80)); test users with 50–300
// ratings, not reference users; per group and repetition up to 300
// reference users and 300 test users drawn at random, each test user's
// ratings shuffled and split in half. A movie's input is its ratings by the
// reference users, a missing one being that reviewer's median rating. The
// parameters of each model (σ, λ, and for MLSRRank two widths and
// weights) are those of the paper's grids with the lowest batch MSD on the
// group's first repetition, as the paper picks "the best predictive
// performance".
//
// Through the service, per group and repetition: an embedded Kafka broker
// and a service in this process whose item profiles keep the reference
// users' ratings (profiles[].reference, the trial's reference users),
// published as the namespace item_profile, and two key-scoped models that
// take only that namespace (features.use): lsrrank and mlsrrank, per user,
// refitted on score (refit.on_score). The reference users' ratings are
// produced first, then (once the service has scored them) the test users'
// training halves, then their test halves unlabelled; the scores the
// service publishes for the test halves are measured. MSD and M1D of a
// user are over all ordered pairs of its test ratings; a trial's is the
// mean over its test users; the table gives mean ± sample std over the
// repetitions, for the service and the batch solution, their largest
// relative difference, and a constant prediction's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/modeltypes"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/tests/internal/seed001"
)

func main() {
	var o options
	flag.StringVar(&o.data, "data", "", "directory of a MovieLens set: ratings.csv, ratings.dat or u.data (required)")
	flag.IntVar(&o.reps, "reps", seed001.Reps, "repetitions per group")
	flag.StringVar(&o.groups, "groups", "0,1,2", "groups to run (0: [20,40), 1: [40,60), 2: [60,80))")
	flag.IntVar(&o.refs, "refs", seed001.MaxRefs, "reference users per trial, at most")
	flag.IntVar(&o.tests, "tests", seed001.MaxTests, "test users per trial, at most")
	flag.Uint64Var(&o.seed, "seed", 1, "the draws' seed")
	flag.IntVar(&o.partitions, "partitions", 2, "partitions of the input topic")
	flag.BoolVar(&o.jsonOut, "json", false, "write the report as JSON to stdout (the table to stderr)")
	flag.BoolVar(&o.verbose, "v", false, "the service's log to stderr")
	flag.Parse()
	if o.data == "" {
		fmt.Fprintln(os.Stderr, "seed001: -data DIR is required (a MovieLens set; see the command's doc)")
		os.Exit(2)
	}
	d, err := seed001.Load(o.data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seed001:", err)
		os.Exit(1)
	}
	o.progress = os.Stderr
	rep, err := run(context.Background(), d, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seed001:", err)
		os.Exit(1)
	}
	tw := os.Stdout
	if o.jsonOut {
		tw = os.Stderr
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	}
	rep.table(tw)
}

// options are the command's flags.
type options struct {
	data                  string
	reps, refs, tests     int
	groups                string
	seed                  uint64
	partitions            int
	jsonOut, verbose      bool
	lsrGrid, mlsrGrid     []seed001.Params // nil: the paper's grids
	lsrParams, mlsrParams *seed001.Params  // set: no selection
	progress              io.Writer
}

// report is the experiment's result.
type report struct {
	Groups []groupReport `json:"groups"`
}

type groupReport struct {
	Group  string        `json:"group"`
	Refs   int           `json:"reference_users"`
	Tests  int           `json:"test_users"`
	Models []modelReport `json:"models"`
	Const  summary       `json:"constant"`
}

type modelReport struct {
	Model   string  `json:"model"`
	Params  string  `json:"params"`
	Service summary `json:"service"`
	Batch   summary `json:"batch"`
	// MaxRelDiff is the largest |service − batch| / batch over the
	// repetitions, of MSD and of M1D.
	MaxRelDiff float64 `json:"max_relative_difference"`
	// PerRep are the repetitions' results, service then batch.
	PerRep [][2]seed001.Result `json:"per_repetition"`
}

// summary is mean ± std over the repetitions.
type summary struct {
	MSD, MSDStd, M1D, M1DStd float64
}

func summarise(rs []seed001.Result) summary {
	var msd, m1d []float64
	for _, r := range rs {
		msd, m1d = append(msd, r.MSD), append(m1d, r.M1D)
	}
	var s summary
	s.MSD, s.MSDStd = seed001.MeanStd(msd)
	s.M1D, s.M1DStd = seed001.MeanStd(m1d)
	return s
}

// run runs the experiment on d.
func run(ctx context.Context, d *seed001.Data, o options) (*report, error) {
	rep := &report{}
	for _, gs := range strings.Split(o.groups, ",") {
		gi, err := strconv.Atoi(strings.TrimSpace(gs))
		if err != nil || gi < 0 || gi >= len(seed001.Groups) {
			return nil, fmt.Errorf("-groups: %q is not a group index 0..%d", gs, len(seed001.Groups)-1)
		}
		g := seed001.Groups[gi]
		gr := groupReport{Group: g.String()}
		first := d.Trial(g, 0, o.seed, o.refs, o.tests)
		gr.Refs, gr.Tests = len(first.Refs), len(first.Tests)
		if gr.Refs == 0 || gr.Tests == 0 {
			return nil, fmt.Errorf("group %s: %d reference and %d test users", g, gr.Refs, gr.Tests)
		}
		params := make([]seed001.Params, 2)
		for m, fixed := range []*seed001.Params{o.lsrParams, o.mlsrParams} {
			if fixed != nil {
				params[m] = *fixed
				continue
			}
			grid := [][]seed001.Params{o.lsrGrid, o.mlsrGrid}[m]
			if grid == nil {
				grid = [][]seed001.Params{seed001.LSRRankGrid(), seed001.MLSRRankGrid()}[m]
			}
			best, _, err := first.Select(grid)
			if err != nil {
				return nil, fmt.Errorf("group %s: %w", g, err)
			}
			params[m] = grid[best]
		}
		o.logf("group %s: %d reference users, %d test users; lsrrank %s; mlsrrank %s", g, gr.Refs, gr.Tests, params[0], params[1])
		per := make([][][2]seed001.Result, 2)
		var consts []seed001.Result
		for r := range o.reps {
			t := first
			if r > 0 {
				t = d.Trial(g, r, o.seed, o.refs, o.tests)
			}
			start := time.Now()
			served, err := serve(ctx, d, t, params, o)
			if err != nil {
				return nil, fmt.Errorf("group %s, repetition %d: %w", g, r, err)
			}
			for m := range 2 {
				ev, err := t.Evaluate(params[m])
				if err != nil {
					return nil, err
				}
				var rs []seed001.Result
				for i := range t.Tests {
					res, err := t.Tests[i].Measure(served[m][t.Tests[i].User])
					if err != nil {
						return nil, fmt.Errorf("group %s, repetition %d, user %d: %w", g, r, t.Tests[i].User, err)
					}
					rs = append(rs, res)
				}
				per[m] = append(per[m], [2]seed001.Result{seed001.Average(rs), ev.Mean})
			}
			consts = append(consts, constant(t))
			o.logf("group %s, repetition %d: lsrrank MSD %.4f (batch %.4f), mlsrrank MSD %.4f (batch %.4f), %.1fs",
				g, r, per[0][r][0].MSD, per[0][r][1].MSD, per[1][r][0].MSD, per[1][r][1].MSD, time.Since(start).Seconds())
		}
		for m, name := range []string{"lsrrank", "mlsrrank"} {
			mr := modelReport{Model: name, Params: params[m].String(), PerRep: per[m]}
			var sv, bt []seed001.Result
			for _, p := range per[m] {
				sv, bt = append(sv, p[0]), append(bt, p[1])
				mr.MaxRelDiff = max(mr.MaxRelDiff, math.Abs(p[0].MSD-p[1].MSD)/p[1].MSD, math.Abs(p[0].M1D-p[1].M1D)/p[1].M1D)
			}
			mr.Service, mr.Batch = summarise(sv), summarise(bt)
			gr.Models = append(gr.Models, mr)
		}
		gr.Const = summarise(consts)
		rep.Groups = append(rep.Groups, gr)
	}
	return rep, nil
}

// constant is a constant prediction's result on t: MSD and M1D of the
// test ratings' own differences.
func constant(t *seed001.Trial) seed001.Result {
	var rs []seed001.Result
	for _, u := range t.Tests {
		y := make([]float64, len(u.Test))
		for k, r := range u.Test {
			y[k] = r.Value
		}
		rs = append(rs, seed001.Measure(y, make([]float64, len(y))))
	}
	return seed001.Average(rs)
}

func (o options) logf(format string, args ...any) {
	if o.progress != nil {
		fmt.Fprintf(o.progress, format+"\n", args...)
	}
}

// table writes the report as a table, with Table III's MovieLens 1M
// figures for scale.
func (r *report) table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "group\tmodel\tparameters\tMSD service\tMSD batch\tM1D service\tM1D batch\tmax rel. diff\tMSD paper (ML-1M)\tM1D paper (ML-1M)")
	paper := map[string][2][2]string{
		"[20,40)": {{"1.92 ± 0.07", "1.05 ± 0.02"}, {"1.90 ± 0.04", "1.01 ± 0.02"}},
		"[40,60)": {{"1.92 ± 0.04", "1.05 ± 0.01"}, {"1.88 ± 0.05", "1.02 ± 0.01"}},
		"[60,80)": {{"1.88 ± 0.06", "1.04 ± 0.02"}, {"1.85 ± 0.03", "1.02 ± 0.01"}},
	}
	for _, g := range r.Groups {
		for m, mr := range g.Models {
			p := paper[g.Group][m]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.4f ± %.4f\t%.4f ± %.4f\t%.4f ± %.4f\t%.4f ± %.4f\t%.2g\t%s\t%s\n", g.Group, mr.Model, mr.Params,
				mr.Service.MSD, mr.Service.MSDStd, mr.Batch.MSD, mr.Batch.MSDStd, mr.Service.M1D, mr.Service.M1DStd, mr.Batch.M1D, mr.Batch.M1DStd,
				mr.MaxRelDiff, p[0], p[1])
		}
		fmt.Fprintf(tw, "%s\tconstant\t\t%.4f ± %.4f\t\t%.4f ± %.4f\t\t\t\t\n", g.Group, g.Const.MSD, g.Const.MSDStd, g.Const.M1D, g.Const.M1DStd)
	}
	tw.Flush()
}

// serve runs trial t through a fresh broker and service with the models'
// params and returns, per model (lsrrank, mlsrrank), the scores it
// published for each test user's test movies.
func serve(ctx context.Context, d *seed001.Data, t *seed001.Trial, params []seed001.Params, o options) ([2]map[int]map[int]float64, error) {
	var out [2]map[int]map[int]float64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := max(1, o.partitions)
	b, err := stream.StartBroker(0, stream.TopicSpec{Name: "ratings", Partitions: parts},
		stream.TopicSpec{Name: "scores", Partitions: parts}, stream.TopicSpec{Name: "ratings.dlq", Partitions: 1})
	if err != nil {
		return out, err
	}
	defer b.Close()
	dir, err := os.MkdirTemp("", "seed001-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	types := modeltypes.New()
	cfg, err := config.Parse([]byte(serviceYAML(t, params, b.Addrs()[0], dir)), nil, types)
	if err != nil {
		return out, err
	}
	logw := io.Discard
	if o.verbose {
		logw = os.Stderr
	}
	svc, err := stream.NewService(ctx, cfg, types, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(logw, nil)))
	if err != nil {
		return out, err
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()

	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()[0]), Topic: "ratings", Balancer: &kafka.Hash{}, BatchSize: 1000, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addrs()[0]}, GroupTopics: []string{"scores", "ratings.dlq"}, GroupID: "seed001-reader", MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond, StartOffset: kafka.FirstOffset})
	defer r.Close()
	col := &collector{r: r, scores: [2]map[int]map[int]float64{{}, {}}}

	// Phase 1: the reference users' ratings (their profiles and every
	// movie's reference vector). Phase 2: the test users' training halves.
	// Phase 3: their test halves, unlabelled. Each phase waits until the
	// service has scored the one before it (its two records per event), so
	// that every training event sees the complete reference vectors.
	var phase []kafka.Message
	event := func(user int, rating seed001.Rating, labelled bool) {
		v := fmt.Sprintf(`{"id":"%c%d-%d","features":{"item":{"id":"m%d"}}`, "rt"[b2i(!labelled)], user, rating.Movie, rating.Movie)
		if labelled {
			v += fmt.Sprintf(`,"label":%g`, rating.Value)
		}
		phase = append(phase, kafka.Message{Key: []byte("u" + strconv.Itoa(user)), Value: []byte(v + "}")})
	}
	produce := func() error {
		n := len(phase)
		if err := w.WriteMessages(ctx, phase...); err != nil {
			return err
		}
		phase = phase[:0]
		return col.await(ctx, 2*n)
	}
	for _, u := range t.Refs {
		for _, rt := range d.Ratings(u) {
			event(u, rt, true)
		}
	}
	if err := produce(); err != nil {
		return out, fmt.Errorf("reference ratings: %w", err)
	}
	for _, u := range t.Tests {
		for _, rt := range u.Train {
			event(u.User, rt, true)
		}
	}
	if err := produce(); err != nil {
		return out, fmt.Errorf("training ratings: %w", err)
	}
	for _, u := range t.Tests {
		for _, rt := range u.Test {
			event(u.User, rt, false)
		}
	}
	if err := produce(); err != nil {
		return out, fmt.Errorf("test ratings: %w", err)
	}
	if col.dead > 0 {
		return out, fmt.Errorf("%d events dead-lettered (first: %s)", col.dead, col.firstDead)
	}
	return col.scores, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// serviceYAML is the service's configuration for trial t.
func serviceYAML(t *seed001.Trial, params []seed001.Params, broker, dir string) string {
	var refs strings.Builder
	for j, u := range t.Refs {
		if j > 0 {
			refs.WriteString(", ")
		}
		refs.WriteString("u" + strconv.Itoa(u))
	}
	features := `{hash: {bits: 24, seed: 1}, namespaces: [item, item_profile], use: [item_profile], max_features: 16}`
	model := func(name string, p seed001.Params) string {
		s := fmt.Sprintf("  - name: %s\n    type: %s\n    scope: key\n    max_keys: 2000\n    lambda: %g\n    solver: exact\n    window: {events: 1000}\n    refit: {on_score: true}\n    features: %s\n",
			name, name, p.Lambda, features)
		if name == "lsrrank" {
			return s + fmt.Sprintf("    kernel: {type: rbf, gamma: %g}\n", p.Kernels[0].Gamma)
		}
		s += "    kernels:\n"
		for _, k := range p.Kernels {
			s += fmt.Sprintf("      - {gamma: %g, v: %g}\n", k.Gamma, k.V)
		}
		return s
	}
	return fmt.Sprintf(`kafka: {brokers: [%q], group: seed001, input_topic: ratings, output_topic: scores, dlq_topic: ratings.dlq, start_offset: earliest}
http: {listen: "127.0.0.1:0"}
snapshot: {dir: %q, every: 10s}
calibration: {window: 0}
profiles:
  - entity: item
    id: item.id
    values: [reference]
    reference: {keys: [%s]}
models:
%s%s`, broker, dir, refs.String(), model("lsrrank", params[0]), model("mlsrrank", params[1]))
}

// collector reads the service's records: the scores of the test events
// by model, user and movie, and the dead letters.
type collector struct {
	r         *kafka.Reader
	n         int
	scores    [2]map[int]map[int]float64
	dead      int
	firstDead string
}

// await reads records until n more arrived.
func (c *collector) await(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for want := c.n + n; c.n < want; {
		m, err := c.r.ReadMessage(ctx)
		if err != nil {
			return fmt.Errorf("%d of %d records: %w", c.n, want, err)
		}
		if m.Topic == "ratings.dlq" {
			c.dead++
			if c.firstDead == "" {
				c.firstDead = string(m.Value) + " " + headers(m.Headers)
			}
			c.n += 2 // an event dead-lettered has no score records
			continue
		}
		c.n++
		var rec struct {
			ID    string   `json:"id"`
			Model string   `json:"model"`
			Score *float64 `json:"score"`
		}
		if err := json.Unmarshal(m.Value, &rec); err != nil {
			return fmt.Errorf("record %s: %w", m.Value, err)
		}
		if !strings.HasPrefix(rec.ID, "t") || rec.Score == nil {
			continue
		}
		var user, movie int
		if _, err := fmt.Sscanf(rec.ID, "t%d-%d", &user, &movie); err != nil {
			return fmt.Errorf("record id %q: %w", rec.ID, err)
		}
		mi := 0
		if rec.Model == "mlsrrank" {
			mi = 1
		}
		if c.scores[mi][user] == nil {
			c.scores[mi][user] = map[int]float64{}
		}
		c.scores[mi][user][movie] = *rec.Score
	}
	return nil
}

func headers(hs []kafka.Header) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s=%s ", h.Key, h.Value)
	}
	return b.String()
}
