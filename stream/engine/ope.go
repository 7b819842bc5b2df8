package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/ope"
	"github.com/streamer/streamer/stream/wire"
)

// Off-policy estimates and the challenger. Every labelled first item of a
// ranking request is a sample of the exploration log: its reward, the
// propensity with which the policy put it first, whether the champion's
// greedy order (the rank model's) would have put it first, and, with a
// challenger (RankConfig.Challenger), whether the challenger's would have;
// with the champion's predicted rewards of the item shown, of greedy's
// first and of the challenger's first (the direct method of DR, one reward
// model for both policies, so that it cancels where they agree).
//
// The samples of the current generation are summed (ope.Sums: the
// estimates since the generation began) and the newest opeWindow kept
// (the bootstrap intervals of the metrics). With a challenger, each
// sample's difference of the two policies' terms (ope.Term of the
// configured estimator) enters a confidence sequence over the generation
// (ope.Sequence: an interval whose coverage holds at every sample at
// once, so that checking it often does not make a chance win likely),
// which decides a promotion: checked every challengeEvery samples, auto
// promotion swaps the champion and the challenger once the lower bound
// has been above 0 at every check over Hold samples. A promotion
// starts a new generation: the evidence, gathered under the old
// champion's log and roles, starts afresh, and labels of requests ranked
// before it count only in streamer_ope_labels_total.

// opeMark is what the off-policy estimates need of the item a ranking
// request put first (rankRequest): the probability with which the
// exploration policy put it there, whether the champion's greedy order
// would have (greedy) and the challenger's (chalMatch, when hasChal), the
// champion's predicted rewards of it, of greedy's first and of the
// challenger's first (rewardOf), and the generation it was ranked in.
type opeMark struct {
	prop                            float64
	predShown, predTop, predCh      float64
	gen                             uint32
	first, greedy, hasChal, chMatch bool
}

// challengeEvery is how many samples pass between the checks of a
// challenger's interval.
const challengeEvery = 100

// opeStats accumulates the off-policy estimates from the labels of the
// items requests put first.
type opeStats struct {
	mu     sync.Mutex
	labels float64       // every sample since start (streamer_ope_labels_total)
	gen    atomic.Uint32 // the generation: a promotion starts the next

	// The current generation's samples: the logged rewards, greedy's
	// agreements and IPS's squares (its normal interval), the estimators'
	// sums, and the newest opeWindow samples (a ring).
	reward, match, rw2 float64
	sums               ope.Sums
	window             []ope.Sample
	next               int

	ch *challengeStats // nil: no challenger
}

// challengeStats is a challenger's evidence in the current generation.
type challengeStats struct {
	cfg      *RankConfig
	est      ope.Estimator
	sums     ope.Sums
	window   []ope.Sample  // aligned with opeStats.window: the same decisions as the challenger sees them
	diff     *ope.Sequence // per sample: the challenger's term − the champion's, since the generation began
	since    float64       // samples at the first check of the current run of checks with lo > 0 (-1: none)
	reported bool          // manual: this run's win was logged
	won      *OPEWin       // the generation's first win (manual: it stays the champion)
	promote  func(mean, lo float64, samples float64)
	wins     func(mean, lo float64, samples float64)
}

// opeWindow bounds the samples the intervals are computed over; opeBoots
// is the number of bootstrap resamples of each at a scrape.
const (
	opeWindow = 10_000
	opeBoots  = 100
)

// newChallengeStats returns a challenger's evidence as cfg configures it.
func newChallengeStats(cfg *RankConfig) *challengeStats {
	c := &challengeStats{cfg: cfg, est: ope.DR, diff: ope.NewSequence(cfg.Hold)}
	if cfg.Estimator == "ips" {
		c.est = ope.IPS
	}
	c.reset()
	return c
}

func (c *challengeStats) reset() {
	c.sums, c.window = ope.Sums{}, c.window[:0]
	c.diff.Reset()
	c.since, c.reported, c.won = -1, false, nil
}

// generation is the current generation, which a request's mark carries.
func (o *opeStats) generation() uint32 { return o.gen.Load() }

// add records the reward r of the first item of a request, marked mark.
func (o *opeStats) add(mark opeMark, r float64) {
	smp := ope.Sample{Reward: r, Prop: mark.prop, Match: mark.greedy, PredLogged: mark.predShown, PredTarget: mark.predTop}
	wr := 0.0
	if mark.greedy && mark.prop > 0 {
		wr = r / mark.prop
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.labels++
	if mark.gen != o.gen.Load() {
		return // ranked before a promotion: another champion's roles
	}
	o.reward += r
	o.rw2 += wr * wr
	if mark.greedy {
		o.match++
	}
	o.sums.Add(&smp)
	i := len(o.window)
	if i < opeWindow {
		o.window = append(o.window, smp)
	} else {
		i = o.next
		o.window[i] = smp
		o.next = (o.next + 1) % opeWindow
	}
	if c := o.ch; c != nil && mark.hasChal {
		cs := smp
		cs.Match, cs.PredTarget = mark.chMatch, mark.predCh
		c.sums.Add(&cs)
		if i < len(c.window) {
			c.window[i] = cs
		} else {
			c.window = append(c.window, cs)
		}
		c.diff.Add(ope.Term(c.est, &cs) - ope.Term(c.est, &smp))
		if n := o.sums.N(); int(n)%challengeEvery == 0 {
			o.check(n)
		}
	}
}

// check checks the challenger's interval after n samples of the
// generation, and promotes it (auto) or reports its win (manual) once the
// lower bound has been above 0 at every check over cfg.Hold samples.
func (o *opeStats) check(n float64) {
	c := o.ch
	lo, _ := c.diff.Interval(c.cfg.Confidence)
	if !(lo > 0) {
		c.since, c.reported = -1, false
		return
	}
	if c.since < 0 {
		c.since = n
	}
	if n-c.since < float64(c.cfg.Hold) {
		return
	}
	mean := c.diff.Mean()
	if c.won == nil {
		c.won = &OPEWin{Samples: int64(n), Mean: mean, Lower: lo}
	}
	if c.cfg.Promote != PromoteAuto {
		if !c.reported && c.wins != nil {
			c.wins(mean, lo, n)
		}
		c.reported = true
		return
	}
	if c.promote != nil {
		c.promote(mean, lo, n)
	}
	o.newGeneration()
}

// newGeneration empties the evidence (the caller holds o.mu).
func (o *opeStats) newGeneration() {
	o.gen.Add(1)
	o.reward, o.match, o.rw2, o.sums, o.window, o.next = 0, 0, 0, ope.Sums{}, o.window[:0], 0
	if o.ch != nil {
		o.ch.reset()
	}
}

// ahead is how many samples the challenger's lower bound has been above
// 0 for (0: it is not).
func (c *challengeStats) ahead(n float64) float64 {
	if c.since < 0 {
		return 0
	}
	return n - c.since
}

// rewardOf is the reward the rank model (d, whose calibration is cd's;
// nil: none) predicts for a candidate it predicted p for, on the scale of
// Engine.reward: a classifier's calibrated probability of a positive label
// (its own probability, or 0.5, before its calibration is fitted), another
// kind's value, else its score.
func (e *Engine) rewardOf(cd *modelDef, p online.Prediction) float64 {
	if e.defs[e.rankIdx].traits.Kind != online.Classifier {
		if p.HasValue {
			return p.Value
		}
		return p.Score
	}
	if cd != nil && cd.cal != nil {
		var c wire.Calibrated
		q := p
		if cd.cal.certainty(&q, &c); c.HasCal {
			return c.CalP
		}
	}
	if p.HasProbability {
		return p.Probability
	}
	return 0.5
}

// OPEReport is what the off-policy estimates say (Engine.OPE; the
// metrics streamer_ope_* and streamer_rank_* export the same).
type OPEReport struct {
	Labels     int64  // labelled first items since start
	Champion   string // the model that ranks
	Challenger string // the model that ranks in shadow ("" = none)
	Generation int    // promotions since start
	Samples    int64  // labelled first items of this generation
	Logged     float64
	Agreement  float64 // the share of samples whose first item is greedy's
	// Per policy (greedy: the champion's greedy order; challenger) and
	// estimator: the estimate over the generation and its percentile
	// bootstrap interval over the newest opeWindow samples.
	Estimates []OPEEstimate
	// The challenger − champion difference that promotion is decided on.
	Difference *OPEDifference
}

// OPEEstimate is one policy's estimate by one estimator.
type OPEEstimate struct {
	Policy, Estimator   string
	Value, Lower, Upper float64
}

// OPEDifference is the challenger's value minus the champion's, by
// Estimator over the samples since the generation began, with its
// confidence sequence's interval at Confidence now (Lower, Upper; a
// promotion is decided on it at each check, every challengeEvery samples), the samples over which its
// lower bound has stayed above 0 at the checks (Ahead), and the first
// time in this generation it did so for Hold samples (Won; nil: not yet).
type OPEDifference struct {
	Estimator          string
	Mean, Lower, Upper float64
	Confidence         float64
	Ahead, Hold        int64
	Promote            string
	Won                *OPEWin
}

// OPEWin is when a challenger won: the samples of the generation then,
// the difference's mean and the lower bound of its interval.
type OPEWin struct {
	Samples     int64
	Mean, Lower float64
}

// OPE reports the off-policy estimates, with bootstrap intervals of boots
// resamples drawn from seed (the same seed and samples: the same
// intervals).
func (e *Engine) OPE(boots int, seed uint64) OPEReport {
	o := e.ope
	o.mu.Lock()
	r := OPEReport{Labels: int64(o.labels), Generation: int(o.gen.Load()), Samples: int64(o.sums.N()),
		Champion: e.defs[e.champ.Load()].name}
	sums, window := o.sums, slices.Clone(o.window)
	var chSums ope.Sums
	var chWindow []ope.Sample
	if c := o.ch; c != nil {
		r.Challenger = e.defs[e.chal.Load()].name
		chSums, chWindow = c.sums, slices.Clone(c.window)
		lo, hi := c.diff.Interval(c.cfg.Confidence)
		r.Difference = &OPEDifference{Estimator: c.est.String(), Mean: c.diff.Mean(), Lower: lo, Upper: hi,
			Confidence: c.cfg.Confidence, Ahead: int64(c.ahead(o.sums.N())), Hold: int64(c.cfg.Hold), Promote: c.cfg.Promote}
		if c.won != nil {
			w := *c.won
			r.Difference.Won = &w
		}
	}
	if n := o.sums.N(); n > 0 {
		r.Logged, r.Agreement = o.reward/n, o.match/n
	}
	o.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, uint64(sums.N())))
	add := func(policy string, s ope.Sums, w []ope.Sample) {
		for _, est := range ope.Estimators {
			v := s.Value(est)
			if math.IsNaN(v) {
				continue
			}
			lo, hi := ope.Interval(est, w, 0.95, boots, rng)
			r.Estimates = append(r.Estimates, OPEEstimate{Policy: policy, Estimator: est.String(), Value: v, Lower: lo, Upper: hi})
		}
	}
	add("greedy", sums, window)
	if r.Challenger != "" {
		add("challenger", chSums, chWindow)
	}
	return r
}

// opeCollector exports the off-policy estimates.
type opeCollector struct {
	e                                 *Engine
	n, value, ci, agreement, interval *prometheus.Desc
	diff, ahead, champion             *prometheus.Desc
}

func newOPECollector(e *Engine) *opeCollector {
	return &opeCollector{e: e,
		n: prometheus.NewDesc("streamer_ope_labels_total",
			"Labels of the items ranking requests put first: the samples of the off-policy estimates.", nil, nil),
		value: prometheus.NewDesc("streamer_ope_value",
			"Estimated mean reward of the first item (a classifier's positive-label rate; another kind's mean label) since the last promotion: policy logged is the mean observed under the exploration policy; greedy is the champion's greedy order's, challenger the challenger's (rank.challenger), by inverse propensity scoring (estimator ips), its self-normalised form (snips), doubly robust with the champion's predicted reward as the direct method (dr), or its self-normalised form (sndr).",
			[]string{"policy", "estimator"}, nil),
		interval: prometheus.NewDesc("streamer_ope_interval",
			"95% percentile-bootstrap interval of the greedy order's estimated mean reward, by estimator, over the newest 10 000 labelled first items (bound lower or upper).",
			[]string{"estimator", "bound"}, nil),
		ci: prometheus.NewDesc("streamer_ope_ci95",
			"Half-width of the normal 95% confidence interval of the greedy policy's IPS estimate.", nil, nil),
		agreement: prometheus.NewDesc("streamer_ope_greedy_agreement",
			"Fraction of labelled requests whose first item is greedy's first.", nil, nil),
		diff: prometheus.NewDesc("streamer_rank_challenger_difference",
			"The challenger's estimated mean reward minus the champion's (rank.challenger.estimator, over the labelled first items since the last promotion): stat mean, and lower and upper, the bounds of its confidence sequence at rank.challenger.confidence (valid at every look at once; promotion checks it every 100 labelled first items).",
			[]string{"stat"}, nil),
		ahead: prometheus.NewDesc("streamer_rank_challenger_ahead",
			"Labelled first items over which the lower bound of (challenger − champion) has stayed above 0 (0: it is not above 0); promote auto swaps the two at rank.challenger.hold.", nil, nil),
		champion: prometheus.NewDesc("streamer_rank_champion",
			"1 for the model that ranks (the champion), 0 for the challenger that ranks in shadow.", []string{"model"}, nil),
	}
}

func (c *opeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.n, c.value, c.ci, c.agreement, c.interval, c.diff, c.ahead, c.champion} {
		ch <- d
	}
}

func (c *opeCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	o := e.ope
	o.mu.Lock()
	n, rw2, ips := o.sums.N(), o.rw2, o.sums.Value(ope.IPS)
	o.mu.Unlock()
	r := e.OPE(opeBoots, 1) // the resamples of one window are the same at every scrape
	ch <- prometheus.MustNewConstMetric(c.n, prometheus.CounterValue, float64(r.Labels))
	ch <- prometheus.MustNewConstMetric(c.champion, prometheus.GaugeValue, 1, r.Champion)
	if r.Challenger != "" {
		ch <- prometheus.MustNewConstMetric(c.champion, prometheus.GaugeValue, 0, r.Challenger)
		d := r.Difference
		for _, s := range []struct {
			stat string
			v    float64
		}{{"mean", d.Mean}, {"lower", d.Lower}, {"upper", d.Upper}} {
			if !math.IsNaN(s.v) {
				ch <- prometheus.MustNewConstMetric(c.diff, prometheus.GaugeValue, s.v, s.stat)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.ahead, prometheus.GaugeValue, float64(d.Ahead))
	}
	if n == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.value, prometheus.GaugeValue, r.Logged, "logged", "observed")
	for _, est := range r.Estimates {
		ch <- prometheus.MustNewConstMetric(c.value, prometheus.GaugeValue, est.Value, est.Policy, est.Estimator)
		if est.Policy == "greedy" && !math.IsNaN(est.Lower) {
			ch <- prometheus.MustNewConstMetric(c.interval, prometheus.GaugeValue, est.Lower, est.Estimator, "lower")
			ch <- prometheus.MustNewConstMetric(c.interval, prometheus.GaugeValue, est.Upper, est.Estimator, "upper")
		}
	}
	ch <- prometheus.MustNewConstMetric(c.ci, prometheus.GaugeValue, ipsCI95(n, n*ips, rw2))
	ch <- prometheus.MustNewConstMetric(c.agreement, prometheus.GaugeValue, r.Agreement)
}

// ipsCI95 is the half-width of the normal 95% interval of the mean of n
// samples with sum sum and sum of squares sum2.
func ipsCI95(n, sum, sum2 float64) float64 {
	if n < 2 {
		return math.Inf(1)
	}
	mean := sum / n
	v := max(0, (sum2-n*mean*mean)/(n-1))
	return 1.96 * math.Sqrt(v/n)
}
