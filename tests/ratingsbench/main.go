// Command ratingsbench replays a MovieLens-format ratings set through the
// real streamer binary over Kafka and judges the configured models against
// the baselines a practitioner tries first, on the same stream in the same
// order:
//
//	go run ./tests/ratingsbench -data DIR                       # prequential RMSE (and classifiers)
//	go run ./tests/ratingsbench -data DIR -rank                 # and NDCG@5 of POST /v1/rank
//	go run ./tests/ratingsbench -data DIR -quality=false -throughput 3 -throughput-config FILE
//	go run ./tests/ratingsbench -synth factors=0,noise=0.9       # a generated set (ratings.ParseWorld)
//
// DIR holds a MovieLens set in any of the layouts GroupLens publishes:
// ratings.csv and movies.csv (ml-latest, ml-latest-small, ml-20m and
// later: a header row, then user id, movie id, rating and Unix time per
// row; movie id, title and the genres joined by '|'), ratings.dat and
// movies.dat (ml-1m, ml-10m: the same fields separated by "::"), or u.data,
// u.item and u.genre (ml-100k: tab-separated ratings; each item's genres as
// flags, named by u.genre).
// docs/performance.md says where to download such a set; its licence is
// for research only, so the repository holds neither it nor anything
// derived from it, and DIR is always a flag. Ratings of movies missing
// from the movies' file are dropped, with a warning. Without the movies'
// file (ratings of another source in one of these formats) every item is
// known by its id alone.
//
// The bench starts an embedded Kafka-protocol broker (the input and output
// topics with -partitions partitions, the dead-letter topic, the rank
// response topic), builds the streamer (or takes -streamer) and runs it on
// -config as it is, but for kafka.brokers, http.listen and snapshot.dir
// (a fresh temporary directory), set by STREAMER_* environment overrides;
// with -rank also rank.explore.policy: greedy (-greedy=false keeps the
// file's). The ratings, sorted by (timestamp, user, item), become events
// keyed by user:
//
//	{"id":"<n>","features":{"user":{"id":"<u>"},"item":{"id":"<m>","genres":[…]}},"label":<rating>}
//
// and the service scores each before it learns it. From the output topic
// the bench reads every model's record of every event: the RMSE of each
// model that publishes a rating prediction ("prediction" of a regression
// model, "expected" of an ordinal one, the score of the models named in
// -score-models), clipped to [-lo, -hi] (by default the least and the
// greatest rating of the set), over the events that had one,
// with the baselines' RMSE over the same events; classifiers' accuracy,
// log loss and ROC AUC against liked = rating ≥ -liked (by default the
// threshold of the config's first classifier, label.positive ">= x"), and
// the ROC AUC of each rating model's prediction as the score. The baselines,
// computed here: the running mean of the ratings so far, and the running
// mean plus user and item biases by SGD (step -step on the error, no L2),
// each predicting a rating before learning it, in the stream's order and
// again in the order the service scored the events (its partitions
// interleave); and, in the service's order, a biased matrix factorisation
// (ratings.FunkMF: Funk's SGD, 16 factors, L2 0.02) at the best of
// ratings.FunkMFSteps in hindsight, the standard online peer of the fm.
//
// With -rank, from event -rank-start on, at every -rank-every-th event,
// once the service has scored every event before it, the bench asks POST
// /v1/rank to order the -rank-candidates movies the event's user rates
// next (the event's own first; users with fewer are skipped), with the
// user's namespace in the request's features and each movie's item
// namespace in its candidate's, and k = all of them. It reports NDCG@-ndcg-k
// (gain = the user's rating) of the served order, of the order by item
// mean so far (items not rated yet at the mean of all ratings so far;
// ties by movie id), and of a seeded random order, with 95% intervals
// (normal approximation over requests), and the paired difference served −
// item mean. -served-out FILE keeps each request's served NDCG, and a later
// run's -paired-with FILE reports its own less that run's, request by
// request: two configurations compared on the same requests. Producing is
// paced by the requests then, so no rate is reported for that run.
//
// -throughput N adds N runs that produce every event at once, each on a
// fresh broker and service, with -throughput-config (default -config), and
// reports events/s from the first event produced to the last record
// consumed, and the service's CPU time per event. The broker, the producer
// and the consumers share the machine with the service.
//
// -json writes the report as JSON to stdout, the tables to stderr.
//
// The embedded broker keeps its records in memory. The bench deletes them
// from its log as they are consumed (the input topic's below the service's
// committed offsets, the output topic's once read), and the replay
// produces at most -backlog ratings ahead of those scored, so the broker
// holds a bounded part of the stream; the bench keeps each model's
// predictions and the ratings, about 0.6 KB per rating in all (1.0 GB of
// resident memory for a million ratings, 2.5 GB for four million; a
// throughput run, which produces every rating at once, 0.9 GB for a
// million), the service apart. -limit N replays the first N ratings.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamer/streamer/tests/internal/ratings"
)

type options struct {
	data, configPath, binary string
	partitions               int
	limit, backlog           int
	lo, hi, liked, step      float64
	scoreModels              []string
	quality                  bool
	rank                     bool
	rankStart, rankEvery     int
	rankCands, ndcgK         int
	greedy                   bool
	throughput               int
	throughputConfig         string
	asJSON, verbose          bool
	servedOut, pairedWith    string
	stall                    time.Duration
	trimEvery                time.Duration // 0: the replay's default
}

func main() {
	var o options
	var scoreModels string
	flag.StringVar(&o.data, "data", "", "directory of a MovieLens set: ratings.csv and movies.csv, ratings.dat and movies.dat, or u.data, u.item and u.genre; required")
	flag.StringVar(&o.configPath, "config", "configs/recommendation-ratings.yaml", "the service's configuration")
	flag.StringVar(&o.binary, "streamer", "", "the streamer binary (default: go build ./cmd/streamer into a temporary directory)")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions of the input and output topics")
	flag.IntVar(&o.limit, "limit", 0, "replay only the first N ratings in time order (0: all)")
	flag.IntVar(&o.backlog, "backlog", 100000, "the replay produces at most this many ratings ahead of those scored (the broker holds about as many)")
	o.lo, o.hi, o.liked = math.NaN(), math.NaN(), math.NaN()
	flag.Func("lo", "rating predictions are clipped to [lo, hi] (default: the set's least rating)", numberFlag(&o.lo))
	flag.Func("hi", "rating predictions are clipped to [lo, hi] (default: the set's greatest rating)", numberFlag(&o.hi))
	flag.Func("liked", "a rating ≥ liked is the positive outcome of classifiers (default: the threshold of the config's first classifier with label.positive \">= x\", else 4)", numberFlag(&o.liked))
	flag.Float64Var(&o.step, "step", 0.05, "SGD step of the bias baseline")
	flag.StringVar(&scoreModels, "score-models", "", "comma-separated models whose score is their rating prediction (e.g. a krr)")
	flag.BoolVar(&o.quality, "quality", true, "run the prequential replay (RMSE, classifiers; NDCG with -rank)")
	flag.BoolVar(&o.rank, "rank", false, "send ranking requests during the replay and report NDCG")
	flag.IntVar(&o.rankStart, "rank-start", 20000, "the first ranking request at this event")
	flag.IntVar(&o.rankEvery, "rank-every", 50, "a ranking request every this many events")
	flag.IntVar(&o.rankCands, "rank-candidates", 20, "candidates per request: the movies the user rates next")
	flag.IntVar(&o.ndcgK, "ndcg-k", 5, "NDCG cut-off")
	flag.StringVar(&o.servedOut, "served-out", "", "with -rank, write each request's served NDCG to this file (\"event ndcg\" per line)")
	flag.StringVar(&o.pairedWith, "paired-with", "", "with -rank, a -served-out file of another run (another configuration) on the same data: report the paired difference per request")
	flag.BoolVar(&o.greedy, "greedy", true, "with -rank, run the service with rank.explore.policy: greedy")
	flag.IntVar(&o.throughput, "throughput", 0, "throughput runs (every event produced at once) after the replay")
	flag.StringVar(&o.throughputConfig, "throughput-config", "", "the configuration of the throughput runs (default: -config)")
	throughputModels := flag.String("throughput-models", "", "comma-separated models of the throughput configuration to keep (e.g. rating: the fm alone); default all")
	flag.BoolVar(&o.asJSON, "json", false, "write the report as JSON to stdout, the tables to stderr")
	flag.BoolVar(&o.verbose, "v", false, "copy the service's log to stderr")
	flag.DurationVar(&o.stall, "stall", 2*time.Minute, "give up when no record comes for this long")
	synth := flag.String("synth", "", "replay a generated set instead of -data: comma-separated key=value of its world (users, items, ratings, factors, base, bias, interaction, noise, seed, min, max, popularity, step; e.g. factors=0,noise=0.9: user and item biases and noise alone)")
	flag.Parse()
	if *synth != "" {
		dir, err := writeSynth(*synth)
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		o.data = dir
	}
	if o.data == "" {
		log.Fatal("-data DIR or -synth SPEC is required (a MovieLens-format ratings set: docs/performance.md says where to download one)")
	}
	if scoreModels != "" {
		o.scoreModels = strings.Split(scoreModels, ",")
	}
	if o.throughputConfig == "" {
		o.throughputConfig = o.configPath
	}
	if *throughputModels != "" {
		path, err := keepModels(o.throughputConfig, strings.Split(*throughputModels, ","))
		if err != nil {
			log.Fatal(err)
		}
		defer os.Remove(path)
		o.throughputConfig = path
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	var text io.Writer = os.Stdout
	if o.asJSON {
		text = os.Stderr
	}
	rep.writeText(text)
	if o.asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			log.Fatal(err)
		}
	}
}

// mfFactors is the factors of the matrix factorisation baseline: the
// ratings config's fm has 16.
const mfFactors = 16

// writeSynth writes the ratings of the world spec describes
// (ratings.ParseWorld) to ratings.dat in a new temporary directory.
func writeSynth(spec string) (string, error) {
	w, n, err := ratings.ParseWorld(spec)
	if err != nil {
		return "", fmt.Errorf("-synth: %w", err)
	}
	dir, err := os.MkdirTemp("", "ratingsbench-synth")
	if err != nil {
		return "", err
	}
	if err := ratings.WriteDat(dir, w.Ratings(n)); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// report is the bench's output (-json writes it as is).
type report struct {
	Setup     setup            `json:"setup"`
	Models    []ratings.Result `json:"models,omitempty"`
	Baselines []baselineRow    `json:"baselines,omitempty"`
	// The classifiers' baselines (rating ≥ liked), in stream order.
	ClassifierBaselines []ratings.ClassifierBaseline `json:"classifier_baselines,omitempty"`
	DeadLetter          map[string]int               `json:"dead_letters,omitempty"`
	Ranking             *ranking                     `json:"ranking,omitempty"`
	// Records the replay deleted from the embedded broker once consumed.
	BrokerTrimmed int64  `json:"broker_records_deleted"`
	Rates         []rate `json:"rates,omitempty"`
	// Median of the throughput runs (-throughput ≥ 2).
	Median *rate `json:"throughput_median,omitempty"`
}

type setup struct {
	Data       string     `json:"data"`
	Ratings    int        `json:"ratings"`
	Dropped    int        `json:"dropped_unknown_items"`
	Users      int        `json:"users"`
	Items      int        `json:"items"`
	Config     string     `json:"config"`
	Models     []string   `json:"models"`
	Partitions int        `json:"partitions"`
	CPUs       int        `json:"cpus"`
	GOMAXPROCS int        `json:"gomaxprocs"`
	GOMAXENV   string     `json:"gomaxprocs_env,omitempty"`
	Clip       [2]float64 `json:"clip"`
	Liked      float64    `json:"liked"`
	Step       float64    `json:"bias_step"`
}

type baselineRow struct {
	Name   string      `json:"name"`
	Order  string      `json:"order"` // "stream" or "service"
	RMSE   ratings.Num `json:"rmse"`
	Events int         `json:"events"`
}

type ranking struct {
	Requests   int       `json:"requests"`
	Answered   int       `json:"answered"`
	Errors     []string  `json:"errors,omitempty"`
	Model      string    `json:"model"`
	Policy     string    `json:"policy"`
	K          int       `json:"k"`
	Candidates int       `json:"candidates"`
	Orders     []ndcgRow `json:"orders"`
	LatencyP50 float64   `json:"latency_p50_ms"`
	LatencyP99 float64   `json:"latency_p99_ms"`
	NDCGK      int       `json:"ndcg_k"`
	Interval   string    `json:"interval"`
}

type ndcgRow struct {
	Order string      `json:"order"`
	Mean  ratings.Num `json:"ndcg"`
	Lower ratings.Num `json:"lower"`
	Upper ratings.Num `json:"upper"`
	N     int         `json:"requests"`
}

type rate struct {
	Run          string      `json:"run"`
	Config       string      `json:"config"`
	Events       int         `json:"events"`
	Records      int         `json:"records"`
	Seconds      float64     `json:"seconds"`
	EventsPerS   float64     `json:"events_per_s"`
	CPUSeconds   float64     `json:"service_cpu_s"`
	CPUUsPerEvnt ratings.Num `json:"service_cpu_us_per_event"`
}

// numberFlag sets *v to a flag's number.
func numberFlag(v *float64) func(string) error {
	return func(s string) error {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) {
			return fmt.Errorf("want a number, got %q", s)
		}
		*v = x
		return nil
	}
}

func run(ctx context.Context, o options) (*report, error) {
	all, genres, err := ratings.ReadMovieLens(o.data)
	if err != nil {
		return nil, err
	}
	var rs []ratings.Rating
	var unknown []ratings.Rating
	for _, r := range all {
		if _, ok := genres[r.Item]; ok || genres == nil {
			rs = append(rs, r)
		} else {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		log.Printf("warning: dropped %d ratings of movies not in the movies' file, e.g. %+v", len(unknown), unknown[0])
	}
	ratings.SortByTime(rs)
	if o.limit > 0 && o.limit < len(rs) {
		rs = rs[:o.limit]
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no ratings of known movies", o.data)
	}
	lo, hi := rs[0].Value, rs[0].Value
	for _, r := range rs {
		lo, hi = min(lo, r.Value), max(hi, r.Value)
	}
	if math.IsNaN(o.lo) {
		o.lo = lo
	}
	if math.IsNaN(o.hi) {
		o.hi = hi
	}
	cfg, err := readServiceConfig(o.configPath)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(o.liked) {
		o.liked = cfg.likedAt(4)
	}
	users, items := map[int]bool{}, map[int]bool{}
	for _, r := range rs {
		users[r.User], items[r.Item] = true, true
	}
	rep := &report{Setup: setup{Data: o.data, Ratings: len(rs), Dropped: len(unknown), Users: len(users), Items: len(items),
		Config: o.configPath, Models: cfg.modelNames(), Partitions: o.partitions, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GOMAXENV: os.Getenv("GOMAXPROCS"), Clip: [2]float64{o.lo, o.hi}, Liked: o.liked, Step: o.step}}
	progress := func(s string) { fmt.Fprintln(os.Stderr, s) }

	if o.binary == "" {
		dir, err := os.MkdirTemp("", "ratingsbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		progress("building the streamer")
		if o.binary, err = buildStreamer(dir); err != nil {
			return nil, err
		}
	}
	base := ratings.RunBaselines(rs, nil, o.step, o.lo, o.hi)

	if o.quality {
		rp := &replay{configPath: o.configPath, cfg: cfg, binary: o.binary, partitions: o.partitions, rs: rs,
			genres: genres, stall: o.stall, progress: progress, verbose: o.verbose, collect: true, backlog: max(o.backlog, 1),
			trimEvery: o.trimEvery}
		if o.rank {
			rp.requests = ratings.Requests(rs, o.rankStart, o.rankEvery, o.rankCands)
			if o.greedy {
				rp.env = append(rp.env, "STREAMER_RANK_EXPLORE_POLICY=greedy")
			}
		}
		progress(fmt.Sprintf("replaying %d ratings through %s (%d ranking requests)", len(rs), o.configPath, len(rp.requests)))
		res, err := rp.run(ctx)
		if err != nil {
			return nil, err
		}
		if res.col.Foreign > 0 {
			progress(fmt.Sprintf("note: %d records on the output topic were not scores of the replay's events", res.col.Foreign))
		}
		rep.DeadLetter, rep.BrokerTrimmed = res.deadReasons, res.trimmed
		rep.Models = ratings.Judge(rs, res.col, base, ratings.Options{Lo: o.lo, Hi: o.hi, Liked: o.liked, ScoreIsRating: o.scoreModels})
		order := res.col.Order() // the service's
		served := ratings.RunBaselines(rs, order, o.step, o.lo, o.hi)
		m, b := ratings.BaselineRMSE(rs, base, 0)
		sm, sb := ratings.BaselineRMSE(rs, served, 0)
		fs, fstep := ratings.BestFunkMF(rs, order, mfFactors, o.lo, o.hi)
		rep.Baselines = []baselineRow{
			{"running mean", "stream", ratings.Num(m), len(rs)},
			{fmt.Sprintf("running mean + user and item biases (SGD %g)", o.step), "stream", ratings.Num(b), len(rs)},
			{"running mean", "service", ratings.Num(sm), len(rs)},
			{fmt.Sprintf("running mean + user and item biases (SGD %g)", o.step), "service", ratings.Num(sb), len(rs)},
			{fmt.Sprintf("biased matrix factorisation, %d factors (Funk's SGD, L2 0.02, step %g: the best of %v in hindsight)", mfFactors, fstep, ratings.FunkMFSteps),
				"service", ratings.Num(fs), len(rs)},
		}
		rep.ClassifierBaselines = ratings.ClassifierBaselines(rs, base, o.liked, 0)
		if o.rank {
			rep.Ranking = judgeRanking(rs, rp.requests, res, o)
		} else {
			rep.Rates = append(rep.Rates, newRate("replay", o.configPath, len(rs), res))
		}
	}
	if o.throughput > 0 {
		tcfg, err := readServiceConfig(o.throughputConfig)
		if err != nil {
			return nil, err
		}
		// Encoded beforehand, so that producing takes little of the CPU the
		// service runs on.
		keys, vals := make([][]byte, len(rs)), make([][]byte, len(rs))
		for i, r := range rs {
			keys[i] = ratings.AppendKey(nil, r)
			vals[i] = ratings.AppendEvent(nil, i, r, genres)
		}
		for k := range o.throughput {
			rp := &replay{configPath: o.throughputConfig, cfg: tcfg, binary: o.binary, partitions: o.partitions, rs: rs, keys: keys, vals: vals,
				stall: o.stall, progress: progress, verbose: o.verbose}
			progress(fmt.Sprintf("throughput run %d of %d: %s", k+1, o.throughput, o.throughputConfig))
			res, err := rp.run(ctx)
			if err != nil {
				return nil, err
			}
			rep.Rates = append(rep.Rates, newRate(fmt.Sprintf("throughput %d", k+1), o.throughputConfig, len(rs), res))
		}
		if o.throughput >= 2 {
			rep.Median = medianRate(rep.Rates[len(rep.Rates)-o.throughput:])
		}
	}
	return rep, nil
}

func newRate(name, cfg string, n int, res *replayResult) rate {
	s := res.elapsed.Seconds()
	return rate{Run: name, Config: cfg, Events: n, Records: res.records, Seconds: s, EventsPerS: float64(n) / s,
		CPUSeconds: res.cpu.Seconds(), CPUUsPerEvnt: ratings.Num(res.cpu.Seconds() * 1e6 / float64(n))}
}

// medianRate returns the median run's figures of rs (the lower median of
// an even count), by events/s and by CPU per event separately.
func medianRate(rs []rate) *rate {
	byRate := slices.Clone(rs)
	slices.SortFunc(byRate, func(a, b rate) int { return cmp.Compare(a.EventsPerS, b.EventsPerS) })
	m := byRate[(len(byRate)-1)/2]
	slices.SortFunc(byRate, func(a, b rate) int { return cmp.Compare(a.CPUUsPerEvnt, b.CPUUsPerEvnt) })
	c := byRate[(len(byRate)-1)/2]
	m.Run = fmt.Sprintf("median of %d", len(rs))
	m.CPUSeconds, m.CPUUsPerEvnt = c.CPUSeconds, c.CPUUsPerEvnt
	return &m
}

// judgeRanking computes NDCG of the served orders and of the baselines'.
func judgeRanking(rs []ratings.Rating, reqs []ratings.Request, res *replayResult, o options) *ranking {
	rk := &ranking{Requests: len(reqs), Errors: res.rankErrors, Model: res.servedBy, K: o.rankCands, Candidates: o.rankCands, NDCGK: o.ndcgK,
		Interval: "normal approximation over requests, 95%"}
	rk.Policy = "the configuration's rank.explore.policy"
	if o.greedy {
		rk.Policy = "greedy (STREAMER_RANK_EXPLORE_POLICY)"
	}
	if len(rk.Errors) > 5 {
		rk.Errors = append(rk.Errors[:5:5], fmt.Sprintf("… and %d more", len(res.rankErrors)-5))
	}
	means := ratings.NewItemMeans()
	biases := ratings.NewBiases(o.step)
	rng := rand.New(rand.NewPCG(1, 2))
	var served, byMean, byCount, byBiases, random, diff []float64
	var byRequest []string // the served NDCG per request, "index ndcg" (-served-out)
	next := 0
	for q, req := range reqs {
		for ; next < req.Index; next++ {
			means.Learn(rs[next].Item, rs[next].Value)
			biases.Learn(rs[next].User, rs[next].Item, rs[next].Value)
		}
		gains := func(pos []int) []float64 {
			g := make([]float64, len(pos))
			for j, p := range pos {
				g[j] = req.Ratings[p]
			}
			return g
		}
		order := res.served[q]
		if order == nil {
			continue
		}
		pos := make([]int, 0, len(order))
		for _, it := range order {
			id, _ := strconv.Atoi(it)
			if p := slices.Index(req.Items, id); p >= 0 {
				pos = append(pos, p)
			}
		}
		if len(pos) < min(o.ndcgK, len(req.Items)) {
			rk.Errors = append(rk.Errors, fmt.Sprintf("request at event %d: %d items served, want %d", req.Index, len(pos), len(req.Items)))
			continue
		}
		rk.Answered++
		s := ratings.NDCG(gains(pos), o.ndcgK)
		m := ratings.NDCG(gains(means.Order(req.Items)), o.ndcgK)
		served, byMean, diff = append(served, s), append(byMean, m), append(diff, s-m)
		byRequest = append(byRequest, fmt.Sprintf("%d %v", req.Index, s))
		random = append(random, ratings.NDCG(gains(rng.Perm(len(req.Items))), o.ndcgK))
		byCount = append(byCount, ratings.NDCG(gains(means.PopularOrder(req.Items)), o.ndcgK))
		byBiases = append(byBiases, ratings.NDCG(gains(ratings.OrderBy(req.Items, func(it int) float64 { return biases.Predict(req.User, it) })), o.ndcgK))
	}
	row := func(name string, xs []float64) ndcgRow {
		ci := ratings.MeanCI(xs)
		return ndcgRow{name, ratings.Num(ci.Mean), ratings.Num(ci.Lower), ratings.Num(ci.Upper), ci.N}
	}
	rk.Orders = []ndcgRow{row("served ("+res.servedBy+")", served), row("item mean so far", byMean),
		row("item popularity so far (ratings)", byCount), row(fmt.Sprintf("biases' predicted rating (SGD %g)", o.step), byBiases), row("random (seeded)", random),
		row("served − item mean (paired)", diff)}
	if o.servedOut != "" {
		if err := os.WriteFile(o.servedOut, []byte(strings.Join(byRequest, "\n")+"\n"), 0o644); err != nil {
			rk.Errors = append(rk.Errors, "-served-out: "+err.Error())
		}
	}
	if o.pairedWith != "" {
		d, err := pairedDiff(o.pairedWith, byRequest)
		if err != nil {
			rk.Errors = append(rk.Errors, "-paired-with: "+err.Error())
		} else {
			rk.Orders = append(rk.Orders, row("served − "+o.pairedWith+" (paired)", d))
		}
	}
	if len(res.latency) > 0 {
		lat := slices.Clone(res.latency)
		slices.Sort(lat)
		rk.LatencyP50 = float64(lat[len(lat)/2].Microseconds()) / 1e3
		rk.LatencyP99 = float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()) / 1e3
	}
	return rk
}

func f4(x ratings.Num) string {
	if math.IsNaN(float64(x)) {
		return "—"
	}
	return fmt.Sprintf("%.4f", float64(x))
}

func (r *report) writeText(w io.Writer) {
	s := r.Setup
	fmt.Fprintf(w, "ratings replay: %d ratings (%d users, %d movies) from %s", s.Ratings, s.Users, s.Items, s.Data)
	if s.Dropped > 0 {
		fmt.Fprintf(w, " (%d ratings of movies not in the movies' file dropped)", s.Dropped)
	}
	fmt.Fprintf(w, "\nconfig %s, models %s; %d partitions; %d CPUs, GOMAXPROCS %d", s.Config, strings.Join(s.Models, ", "), s.Partitions, s.CPUs, s.GOMAXPROCS)
	if s.GOMAXENV != "" {
		fmt.Fprintf(w, " (GOMAXPROCS=%s in the environment, the service's too)", s.GOMAXENV)
	}
	fmt.Fprintf(w, "\npredictions clipped to [%g, %g]; classifiers judged against rating ≥ %g\n\n", s.Clip[0], s.Clip[1], s.Liked)
	if len(r.Models) > 0 {
		fmt.Fprintln(w, "| model / baseline | kind | RMSE | events with a prediction | running mean, same events | biases, same events |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
		for _, m := range r.Models {
			if m.Predicted == 0 {
				continue
			}
			kind := m.Kind
			if m.ScoreAsValue {
				kind += ", score as rating"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %d of %d | %s | %s |\n", m.Model, kind, f4(m.RMSE), m.Predicted, s.Ratings, f4(m.MeanRMSE), f4(m.BiasesRMSE))
		}
		for _, b := range r.Baselines {
			fmt.Fprintf(w, "| %s (%s order) | baseline | %s | %d | | |\n", b.Name, b.Order, f4(b.RMSE), b.Events)
		}
		fmt.Fprintln(w)
		var cls []ratings.Result
		for _, m := range r.Models {
			if m.Decisions > 0 || m.LogLossN > 0 {
				cls = append(cls, m)
			}
		}
		if len(cls) > 0 {
			fmt.Fprintf(w, "| classifier (liked = rating ≥ %g) | accuracy | decisions | log loss | probabilities | ROC AUC |\n|---|---:|---:|---:|---:|---:|\n", s.Liked)
			for _, m := range cls {
				fmt.Fprintf(w, "| %s | %s | %d | %s | %d | %s |\n", m.Model, f4(m.Accuracy), m.Decisions, f4(m.LogLoss), m.LogLossN, f4(m.AUC))
			}
			for _, m := range r.Models {
				if m.Predicted > 0 && !math.IsNaN(float64(m.RatingAUC)) {
					fmt.Fprintf(w, "| %s's predicted rating as the score | — | 0 | — | 0 | %s |\n", m.Model, f4(m.RatingAUC))
				}
			}
			for _, b := range r.ClassifierBaselines {
				fmt.Fprintf(w, "| %s (stream order, baseline) | %s | %d | %s | %d | %s |\n", b.Name, f4(b.Accuracy), b.Decisions, f4(b.LogLoss), b.LogLossN, f4(b.AUC))
			}
			fmt.Fprintln(w)
		}
		for _, m := range r.Models {
			var notes []string
			if m.Predicted == 0 && m.Decisions == 0 {
				notes = append(notes, fmt.Sprintf("kind %s: nothing judged", m.Kind))
			}
			for name, k := range m.Fallbacks {
				notes = append(notes, fmt.Sprintf("%d records answered by fallback %s", k, name))
			}
			if len(notes) > 0 {
				fmt.Fprintf(w, "- %s (%d records): %s\n", m.Model, m.Records, strings.Join(notes, "; "))
			}
		}
		if len(r.DeadLetter) > 0 {
			fmt.Fprintf(w, "- dead letters: %v\n", r.DeadLetter)
		}
		fmt.Fprintln(w)
	}
	if rk := r.Ranking; rk != nil {
		fmt.Fprintf(w, "ranking: %d requests (%d answered), %d candidates each (the movies the user rates next), k = %d, rank model %s, policy %s; client latency p50 %.2f ms, p99 %.2f ms\n\n",
			rk.Requests, rk.Answered, rk.Candidates, rk.K, rk.Model, rk.Policy, rk.LatencyP50, rk.LatencyP99)
		fmt.Fprintf(w, "| order | NDCG@%d | 95%% interval | requests |\n|---|---:|---|---:|\n", rk.NDCGK)
		for _, o := range rk.Orders {
			fmt.Fprintf(w, "| %s | %s | %s – %s | %d |\n", o.Order, f4(o.Mean), f4(o.Lower), f4(o.Upper), o.N)
		}
		for _, e := range rk.Errors {
			fmt.Fprintf(w, "- %s\n", e)
		}
		fmt.Fprintln(w)
	}
	if len(r.Rates) > 0 {
		fmt.Fprintln(w, "| run | config | events | records | seconds | events/s | service CPU s | CPU µs/event |\n|---|---|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Rates {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.2f | %.0f | %.2f | %.1f |\n", x.Run, x.Config, x.Events, x.Records, x.Seconds, x.EventsPerS, x.CPUSeconds, float64(x.CPUUsPerEvnt))
		}
		if x := r.Median; x != nil {
			fmt.Fprintf(w, "| **%s** | %s | %d | | | **%.0f** | | **%.1f** |\n", x.Run, x.Config, x.Events, x.EventsPerS, float64(x.CPUUsPerEvnt))
		}
		fmt.Fprintln(w)
	}
}

// pairedDiff is this run's served NDCG less the other run's (file, as
// -served-out writes it) on the requests both answered, by event index.
func pairedDiff(file string, mine []string) ([]float64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	other := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		idx, v, ok := strings.Cut(line, " ")
		x, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: line %q is not \"event ndcg\"", file, line)
		}
		other[idx] = x
	}
	var d []float64
	for _, line := range mine {
		idx, v, _ := strings.Cut(line, " ")
		x, _ := strconv.ParseFloat(v, 64)
		if y, ok := other[idx]; ok {
			d = append(d, x-y)
		}
	}
	if len(d) == 0 {
		return nil, fmt.Errorf("%s: no request in common", file)
	}
	return d, nil
}
