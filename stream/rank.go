package stream

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

// Ranking requests: an event with "candidates" asks the rank model to
// order them for the event's key. It is scored, never learned: every
// candidate is scored with online.Peek on the live state of the key's
// instance, the exploration policy orders the top k, and one response
// record goes to the response topic. With delayed labels on, each item
// shown waits in the join buffer under (request id, item), so that a label
// {"id": request id, "item": item, "label": …} later teaches every model
// the item's features, and the first item's label feeds the off-policy
// estimates of the greedy policy (metrics streamer_ope_*).

// RankConfig configures ranking requests (EngineConfig.Rank).
type RankConfig struct {
	Model         string // the ranking model's name; "" = requests off
	MaxCandidates int
	ResponseTopic string // "" = EngineConfig.OutputTopic
	Policy        string // "greedy" (default) or "epsilon"
	Epsilon       float64
	Seed          uint64
}

// Exploration policies (RankConfig.Policy).
const (
	PolicyGreedy  = "greedy"
	PolicyEpsilon = "epsilon"
)

// rankScratch is a shard's scratch for requests.
type rankScratch struct {
	preds []online.Prediction // per candidate: the rank model's
	score []float64           // per candidate: its score
	order []int               // candidates, best first, then as the policy picked
	prop  []float64           // per position: the policy's propensity
	all   []online.Prediction // per model: a shown item's predictions
	resp  wire.Ranking
	rng   *rand.Rand
	jid   []byte // (request id, item) of the join
}

// orderCandidates sorts the candidates best first (ties: the earlier
// candidate first) into rk.order and lets the policy pick the first k:
// greedy takes them in that order (propensity 1); epsilon, at each
// position j, takes the best remaining with probability 1 − ε and a
// uniformly drawn remaining one otherwise, so the propensity of the item
// it puts there is (1 − ε)·[best remaining] + ε/(n − j). It returns the
// greedy first item.
func (rk *rankScratch) orderCandidates(n, k int, policy string, eps float64) int {
	rk.order = rk.order[:0]
	for i := range n {
		rk.order = append(rk.order, i)
	}
	score := rk.score
	slices.SortFunc(rk.order, func(a, b int) int {
		if c := cmp.Compare(score[b], score[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	best := rk.order[0]
	rk.prop = rk.prop[:0]
	for j := range k {
		p := 1.0
		if policy == PolicyEpsilon {
			r := n - j
			p = 1 - eps + eps/float64(r)
			if eps > 0 && rk.rng.Float64() < eps {
				if pick := j + rk.rng.IntN(r); pick != j {
					// Move the pick to j; the rest stay best first.
					v := rk.order[pick]
					copy(rk.order[j+1:pick+1], rk.order[j:pick])
					rk.order[j] = v
					p = eps / float64(r)
				}
			}
		}
		rk.prop = append(rk.prop, p)
	}
	return best
}

// rankRequest answers the request ev (id: its id, key: the entity key)
// from the shard's state: it fills s.rk.resp, whose items alias ev's, and,
// with delayed labels on and an id, keeps the shown items for their
// labels. It returns the number of candidates scored.
func (s *Shard) rankRequest(ev *wire.Event, id, key []byte, now time.Time) {
	e := s.e
	rk := s.rankScratch()
	m := s.models[e.rankIdx]
	n := len(ev.Cands)
	rk.preds, rk.score = rk.preds[:0], rk.score[:0]
	var version int64
	for i := range n {
		p, v := m.peek(key, ev.CandidateFeatures(i))
		rk.preds = append(rk.preds, p)
		rk.score = append(rk.score, p.Score)
		version = v
	}
	k := ev.K
	best := rk.orderCandidates(n, k, e.cfg.Rank.Policy, e.cfg.Rank.Epsilon)
	r := &rk.resp
	r.ID, r.Key, r.Model, r.ScoredAt = id, key, m.def.name, now
	r.Ranked = r.Ranked[:0]
	for j := range k {
		c := rk.order[j]
		p := &rk.preds[c]
		r.Ranked = append(r.Ranked, wire.Ranked{Item: ev.Cands[c].Item, Score: p.Score, Prediction: p.Label,
			HasBound: p.HasBound, MistakeBound: p.MistakeBound, Delta: p.Delta, N: p.N, Propensity: rk.prop[j]})
	}
	r.Version = version
	e.met.rankRequests.Inc()
	e.met.rankCandidates.Add(float64(n))
	if s.join == nil || !ev.HasID {
		return
	}
	before := s.join.pending()
	for j := range k {
		c := rk.order[j]
		x := ev.CandidateFeatures(c)
		for i, mm := range s.models {
			if i == e.rankIdx {
				rk.all[i] = rk.preds[c]
				continue
			}
			rk.all[i], _ = mm.peek(key, mm.input(x, rk.all))
		}
		rk.jid = itemID(rk.jid[:0], ev.ID, ev.Cands[c].Item)
		e.met.joinDropped.Add(float64(s.join.put(rk.jid, x, rk.all, now.UnixNano())))
		if j == 0 {
			s.join.mark(opeMark{first: true, prop: rk.prop[0], greedy: c == best})
		}
	}
	e.joinMoved(s.join.pending() - before)
}

// reward is the off-policy reward of label y (as the rank model maps it).
func (e *Engine) reward(y float64) float64 {
	if e.defs[e.rankIdx].traits.Kind != online.Classifier {
		return y
	}
	if y > 0 {
		return 1
	}
	return 0
}

// itemID appends the join id of item of request id: id, a 0 byte, item.
func itemID(dst, id, item []byte) []byte {
	dst = append(dst, id...)
	dst = append(dst, 0)
	return append(dst, item...)
}

// rankScratch returns the shard's request scratch, made on first use.
func (s *Shard) rankScratch() *rankScratch {
	if s.rk == nil {
		seed := s.e.cfg.Rank.Seed
		s.rk = &rankScratch{rng: rand.New(rand.NewPCG(seed, uint64(s.part+1))), all: make([]online.Prediction, len(s.models))}
	}
	return s.rk
}

// peek scores x with the model's instance for key without changing any
// state (online.Peek) and returns the prediction and the version that
// made it. A key-scoped model's instance comes from its store (a fresh
// one when the store cannot be read, counted like observe's); a
// mergeable one scores with the merge of every partition's statistics.
func (m *shardModel) peek(key []byte, x []float64) (online.Prediction, int64) {
	var inst online.Model
	switch {
	case m.keyed != nil:
		ent, err := m.keyed.get(key)
		if err != nil {
			m.def.met.keyErrors.Inc()
			inst, _ = m.keyed.factory()
		} else {
			inst = ent.m
		}
	case m.own != nil:
		return m.def.merged.peek(x), 1
	default:
		inst = m.m
	}
	p := online.Peek(inst, x)
	v := p.Version
	if v == 0 {
		v = inst.Version()
	}
	return p, v
}

// request answers a ranking request read from Kafka: the response record
// goes to the response topic, keyed like the request.
func (s *Shard) request(ev *wire.Event, msg *kafka.Message, id []byte, pub Sink, now time.Time) {
	key := msg.Key
	if len(key) == 0 {
		key = ev.Key
	}
	s.rankRequest(ev, id, key, now)
	topic := s.e.cfg.Rank.ResponseTopic
	if topic == "" {
		topic = s.e.cfg.OutputTopic
	}
	pub.Publish(kafka.Message{Topic: topic, Key: msg.Key, Value: wire.AppendRanking(pub.Buffer(), &s.rk.resp)})
}

// opeStats accumulates the off-policy estimates of the greedy policy from
// the labels of the items requests put first: per labelled request, the
// logged reward r (a classifier's: 1 for the positive class, else 0;
// another kind's: the label itself, e.g. a rating), the importance weight
// w = [greedy would have put the same item first]/propensity, and r·w.
type opeStats struct {
	mu                  sync.Mutex
	n, reward, w, rw    float64
	rw2, greedyN, match float64
}

// add records the reward r of the first item of a request, marked mark.
func (o *opeStats) add(mark opeMark, r float64) {
	w := 0.0
	if mark.greedy && mark.prop > 0 {
		w = 1 / mark.prop
	}
	o.mu.Lock()
	o.n++
	o.reward += r
	o.w += w
	o.rw += r * w
	o.rw2 += r * w * r * w
	if mark.greedy {
		o.match++
	}
	o.mu.Unlock()
}

// opeCollector exports opeStats.
type opeCollector struct {
	s                       *opeStats
	n, value, ci, agreement *prometheus.Desc
}

func newOPECollector(s *opeStats) *opeCollector {
	return &opeCollector{s: s,
		n: prometheus.NewDesc("streamer_ope_labels_total",
			"Labels of the items ranking requests put first: the samples of the off-policy estimates.", nil, nil),
		value: prometheus.NewDesc("streamer_ope_value",
			"Estimated mean reward of the first item (a classifier's positive-label rate; another kind's mean label): policy logged is the mean observed under the exploration policy; greedy is the greedy order's, by inverse propensity scoring (estimator ips) or its self-normalised form (snips).",
			[]string{"policy", "estimator"}, nil),
		ci: prometheus.NewDesc("streamer_ope_ci95",
			"Half-width of the normal 95% confidence interval of the greedy policy's IPS estimate.", nil, nil),
		agreement: prometheus.NewDesc("streamer_ope_greedy_agreement",
			"Fraction of labelled requests whose first item is greedy's first.", nil, nil),
	}
}

func (c *opeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.n
	ch <- c.value
	ch <- c.ci
	ch <- c.agreement
}

func (c *opeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	n, reward, w, rw, rw2, match := s.n, s.reward, s.w, s.rw, s.rw2, s.match
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.n, prometheus.CounterValue, n)
	if n == 0 {
		return
	}
	ips := rw / n
	ch <- prometheus.MustNewConstMetric(c.value, prometheus.GaugeValue, reward/n, "logged", "observed")
	ch <- prometheus.MustNewConstMetric(c.value, prometheus.GaugeValue, ips, "greedy", "ips")
	if w > 0 {
		ch <- prometheus.MustNewConstMetric(c.value, prometheus.GaugeValue, rw/w, "greedy", "snips")
	}
	ch <- prometheus.MustNewConstMetric(c.ci, prometheus.GaugeValue, ipsCI95(n, rw, rw2))
	ch <- prometheus.MustNewConstMetric(c.agreement, prometheus.GaugeValue, match/n)
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

// checkRank resolves cfg.Rank against the models: the index of the rank
// model (-1: requests off).
func checkRank(cfg *EngineConfig, models []NamedModel) (int, error) {
	r := &cfg.Rank
	if r.Model == "" {
		return -1, nil
	}
	if r.MaxCandidates <= 0 {
		r.MaxCandidates = 1000
	}
	switch r.Policy {
	case "":
		r.Policy = PolicyGreedy
	case PolicyGreedy, PolicyEpsilon:
	default:
		return 0, fmt.Errorf("stream: rank policy %q (want %s or %s)", r.Policy, PolicyGreedy, PolicyEpsilon)
	}
	if !(r.Epsilon >= 0 && r.Epsilon <= 1) {
		return 0, fmt.Errorf("stream: rank epsilon %v not in [0, 1]", r.Epsilon)
	}
	for i, nm := range models {
		if nm.Name == r.Model {
			if len(nm.Members) > 0 {
				return 0, fmt.Errorf("stream: rank model %s aggregates other models", r.Model)
			}
			return i, nil
		}
	}
	return 0, fmt.Errorf("stream: rank model %q is not one of the models", r.Model)
}
