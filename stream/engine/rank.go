package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/wire"
)

// Ranking requests: an event with "candidates" asks the rank model to
// order them for the event's key. It is scored, never learned: every
// candidate is scored with online.Peek (hashed features: online.PeekFields
// on the candidate's entries combined with the request's own features,
// and their fields, wire.Event.CandidateHashed) on the live state of the key's
// instance, the exploration policy orders the top k, and one response
// record goes to the response topic. With delayed labels on, each item
// shown waits under (request id, item) in a join buffer of its own
// (Shard.shown: RankConfig.JoinEvents items at most, JoinPerKey of one
// key), apart from the stream's impressions, which requests therefore
// never push out; a label {"id": request id, "item": item, "label": …}
// later teaches every model the item's features, and the first item's
// label feeds the off-policy estimates of the greedy policy (metrics
// streamer_ope_*).

// RankConfig configures ranking requests (Config.Rank).
type RankConfig struct {
	Model         string // the ranking model's name; "" = requests off
	MaxCandidates int
	ResponseTopic string // "" = Config.OutputTopic
	Policy        string // PolicyGreedy (default), PolicyEpsilon, PolicyUCB or PolicyThompson
	Epsilon       float64
	// Alpha scales ucb's width and thompson's perturbation (explore.go);
	// Samples is the number of thompson draws that estimate its
	// propensities (0 = 100).
	Alpha   float64
	Samples int
	Seed    uint64

	// The join window of the items requests show (with delayed labels
	// on: Config.JoinEvents > 0), per shard. JoinEvents bounds the
	// items kept (0 = Config.JoinEvents; < 0 = none: their labels
	// count as unknown ids), JoinTime how long each waits (0 =
	// Config.JoinTime), JoinPerKey the items of one key kept (0 =
	// no limit; more are not kept). JoinEntries, with hashed features,
	// bounds the hashed entries the items keep, all together (0 =
	// DefaultJoinEntriesPerItem × JoinEvents). JoinLabelled is the
	// share of the items' slots kept for the keys that labelled: the
	// items of other keys hold at most 1 − JoinLabelled of them; once they
	// do, one more takes the oldest's slot if that is such an item, or is
	// not kept (0: no such limit, the window is one queue).
	JoinEvents   int
	JoinTime     time.Duration
	JoinPerKey   int
	JoinEntries  int
	JoinLabelled float64

	// Challenger names a model that ranks every request that can be
	// labelled in shadow (its order is not served; challenger.go); ""
	// none. Promote (PromoteManual, the default, or PromoteAuto),
	// Estimator ("dr", the default, or "ips"), Confidence (0 = 0.95)
	// and Hold (0 = 2000) are rank.challenger's.
	Challenger string
	Promote    string
	Estimator  string
	Confidence float64
	Hold       int

	// Replay makes the shards take a request's logged decision
	// (wire.Event.Logged, a Decoder WithLogged) for their own: the logged
	// item is put first with the logged propensity, so that the
	// off-policy estimates are those of the log's decisions (streamer
	// eval --log).
	Replay bool
}

// Promotion modes of a challenger (RankConfig.Promote).
const (
	PromoteManual = "manual"
	PromoteAuto   = "auto"
)

// DefaultJoinEntriesPerItem sizes the ring of the hashed entries of the
// items requests show when RankConfig.JoinEntries is 0: that many entries
// per item on average.
const DefaultJoinEntriesPerItem = 64

// maxJoinEntries bounds RankConfig.JoinEntries (a slot's room in the
// ring is an int32).
const maxJoinEntries = 1 << 27

// Exploration policies (RankConfig.Policy). ucb and thompson keep
// exploration statistics per key (explore.go): they need a key-scoped rank
// model with dense features.
const (
	PolicyGreedy   = "greedy"
	PolicyEpsilon  = "epsilon"
	PolicyUCB      = "ucb"
	PolicyThompson = "thompson"
)

// usesStats reports whether policy keeps exploration statistics.
func usesStats(policy string) bool { return policy == PolicyUCB || policy == PolicyThompson }

// rankScratch is a shard's scratch for requests.
type rankScratch struct {
	preds    []online.Prediction // per candidate: the rank model's (or its fallback's: fellBack)
	own      []online.Prediction // fellBack: per candidate, the rank model's own
	fellBack bool                // the key's instance had no answer: its fallback scored the candidates
	score    []float64           // per candidate: its score
	order    []int               // candidates, best first, then as the policy picked
	prop     []float64           // per position: the policy's propensity
	all      []online.Prediction // per model: a shown item's predictions
	resp     wire.Ranking
	rng      *rand.Rand
	jid      []byte              // (request id, item) of the join
	in       holder.Input        // a candidate's features (candidate)
	chPreds  []online.Prediction // per candidate: the challenger's (challengerFirst)

	ex    explorer  // ucb and thompson: the key's statistics at work
	draw  []int     // thompson: a draw's order
	hits  []int     // thompson: per position, draws that put the logged item there
	dind  []float64 // thompson: a draw's indexes
	taken []bool    // thompson: candidates a draw has placed
}

// orderCandidates orders the n candidates into rk.order by the policy and
// sets rk.prop, the propensities of the first k, and returns the greedy
// first item (the highest score; ties: the earlier candidate).
//
// greedy takes them by score, best first (ties: the earlier candidate),
// propensity 1. epsilon, at each position j, takes the best remaining with
// probability 1 − ε and a uniformly drawn remaining one otherwise, so the
// propensity of the item it puts there is (1 − ε)·[best remaining] +
// ε/(n − j). ucb takes them by rk.ex.ind (score + alpha·width), propensity
// 1. thompson takes them by rk.ex.ind (score + alpha·ξᵀz for this
// request's draw ξ) and estimates the probability that its draw puts the
// item at position j from samples more draws: (1 + hits)/(1 + samples),
// the realised draw counting as one (explore.go).
func (rk *rankScratch) orderCandidates(n, k int, cfg *RankConfig, ex *explored) int {
	rk.order = rk.order[:0]
	best := 0
	for i := range n {
		rk.order = append(rk.order, i)
		if rk.score[i] > rk.score[best] {
			best = i
		}
	}
	index := rk.score
	if usesStats(cfg.Policy) && ex != nil {
		index = rk.ex.ind[:n]
	}
	sortBy(rk.order, index)
	rk.prop = rk.prop[:0]
	switch {
	case cfg.Policy == PolicyEpsilon:
		eps := cfg.Epsilon
		for j := range k {
			r := n - j
			p := 1 - eps + eps/float64(r)
			if eps > 0 && rk.rng.Float64() < eps {
				if pick := j + rk.rng.IntN(r); pick != j {
					// Move the pick to j; the rest stay best first.
					v := rk.order[pick]
					copy(rk.order[j+1:pick+1], rk.order[j:pick])
					rk.order[j] = v
					p = eps / float64(r)
				}
			}
			rk.prop = append(rk.prop, p)
		}
	case cfg.Policy == PolicyThompson && ex != nil:
		rk.thompsonPropensities(n, k, cfg)
	default:
		for range k {
			rk.prop = append(rk.prop, 1)
		}
	}
	return best
}

// sortBy sorts order by index, highest first; ties: the earlier candidate.
func sortBy(order []int, index []float64) {
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(index[b], index[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// thompsonPropensities sets rk.prop for thompson's order in rk.order: the
// fraction of cfg.Samples further draws (and the realised one) that put
// each of the first k items where it is.
func (rk *rankScratch) thompsonPropensities(n, k int, cfg *RankConfig) {
	ex := &rk.ex
	rk.hits = append(rk.hits[:0], make([]int, k)...)
	rk.dind = append(rk.dind[:0], make([]float64, n)...)
	rk.draw = rk.draw[:0]
	for i := range n {
		rk.draw = append(rk.draw, i)
	}
	rk.taken = append(rk.taken[:0], make([]bool, n)...)
	for range cfg.Samples {
		ex.drawNormal(rk.rng)
		for i := range n {
			rk.dind[i] = rk.score[i] + cfg.Alpha*ex.perturbation(i)
		}
		if k <= 16 {
			// Selection: the best of the remaining, k times.
			clear(rk.taken)
			for j := range k {
				pick := -1
				for i := range n {
					if !rk.taken[i] && (pick < 0 || rk.dind[i] > rk.dind[pick]) {
						pick = i
					}
				}
				rk.taken[pick] = true
				if pick == rk.order[j] {
					rk.hits[j]++
				}
			}
			continue
		}
		sortBy(rk.draw, rk.dind)
		for j := range k {
			if rk.draw[j] == rk.order[j] {
				rk.hits[j]++
			}
		}
	}
	for j := range k {
		rk.prop = append(rk.prop, float64(1+rk.hits[j])/float64(1+cfg.Samples))
	}
}

// Ranks reports whether ranking requests are configured (RankConfig.Model).
func (e *Engine) Ranks() bool { return e.rankIdx >= 0 }

// KeyScoped reports whether a model is key-scoped: its keys' state is
// where their partition is consumed.
func (e *Engine) KeyScoped() bool {
	return slices.ContainsFunc(e.defs, func(d *modelDef) bool { return d.keyFactory != nil })
}

// RequestDecoder returns a decoder of ranking requests sent over HTTP
// (at most maxBytes each): the events' features, strict (an unknown field
// is an error the client sees at once, not skipped as the stream's
// additive contract has it).
func (e *Engine) RequestDecoder(maxBytes int) (*wire.Decoder, error) {
	dec, err := wire.NewDecoder(e.cfg.Dim, e.cfg.FeatureNames, maxBytes)
	if err != nil {
		return nil, err
	}
	dec = dec.WithMaxAbs(e.cfg.MaxFeatureAbs).WithRequests(e.cfg.Rank.MaxCandidates).WithStrict()
	if e.cfg.Rows > 0 {
		dec = dec.WithShape(e.cfg.Rows)
	}
	if e.cfg.Hash != nil {
		if dec, err = dec.WithHashing(*e.cfg.Hash); err != nil {
			return nil, err
		}
		dec = e.withProfiles(dec)
	}
	return dec, nil
}

// RankWaited records that a ranking request waited d for its shard.
func (e *Engine) RankWaited(d time.Duration) { e.met.rankWait.Observe(d.Seconds()) }

// RankServed records that a ranking request was answered in d.
func (e *Engine) RankServed(d time.Duration) { e.met.rankSeconds.Observe(d.Seconds()) }

// Rank answers the ranking request ev (its id and entity key are ev's)
// with the shard's state, held exclusively, and appends the response's
// encoding to dst.
func (s *Shard) Rank(dst []byte, ev *wire.Event) []byte {
	s.rankRequest(ev, ev.ID, ev.Key, s.e.now())
	return wire.AppendRanking(dst, &s.rk.resp)
}

// rankRequest answers the request ev (id: its id, key: the entity key)
// from the shard's state: it fills s.rk.resp, whose items alias ev's, and,
// with delayed labels on and an id, keeps the shown items for their
// labels. It returns the number of candidates scored.
func (s *Shard) rankRequest(ev *wire.Event, id, key []byte, now time.Time) {
	e := s.e
	cfg := &e.cfg.Rank
	rk := s.rankScratch()
	champ := int(e.champ.Load()) // the model that ranks: this request's, whatever a promotion does meanwhile
	gen := e.ope.generation()
	m := s.models[champ]
	n := len(ev.Cands)
	rk.preds, rk.score = rk.preds[:0], rk.score[:0]
	// The rank model's instance stays this request's until it is
	// ordered (its exploration statistics with it): another lane may
	// learn from the key's events meanwhile.
	mu := m.lock(key)
	inst := m.h.Find(key) // one look-up for every candidate
	ex, _ := inst.(*explored)
	hashed := e.cfg.Hash != nil
	// A residual model's predictions are its fallback's plus its own
	// (residual.go): the fallback scores each candidate on the same
	// input, behind its lock, taken after the rank model's (the one order
	// of the two).
	var fb *shardModel
	var fbInst online.Model
	var fbMu *sync.Mutex
	if m.def.residual {
		fb = s.models[m.def.fallback]
		fbMu = fb.lock(key)
		fbInst = fb.h.Find(key)
	}
	var version int64
	for i := range n {
		in, _ := s.candidate(ev, i, key, hashed)
		p, v := m.h.Peek(inst, m.feed(in, nil, nil))
		if fb != nil && m.def.decided(&p) {
			fp, _ := fb.h.Peek(fbInst, fb.feed(in, nil, nil))
			addFallback(&p, fp)
		}
		rk.preds = append(rk.preds, p)
		rk.score = append(rk.score, p.Score)
		version = v
	}
	unlock(fbMu)
	fallback := ""
	rk.fellBack = m.def.fallback >= 0 && rk.undecided(m.def) // a model with a fallback is key-scoped (checkFallbacks)
	if rk.fellBack {
		fallback, version = s.rankFallback(ev, key, m.def)
	}
	if usesStats(cfg.Policy) && ex != nil && !rk.explore(ex, ev, cfg) {
		ex = nil // not positive definite (cannot happen): greedy
		m.def.met.keyErrors.Inc()
	}
	k := ev.K
	best := rk.orderCandidates(n, k, cfg, ex)
	if cfg.Replay && ev.HasLogged {
		rk.takeLogged(ev.LoggedIndex(), ev.LoggedProp)
	}
	unlock(mu)
	r := &rk.resp
	r.ID, r.Key, r.Model, r.ScoredAt, r.Fallback = id, key, m.def.name, now, fallback
	r.Ranked = r.Ranked[:0]
	// The calibration of the model whose predictions these are: the
	// fallback's when it scored them as they are, none when they were
	// mapped to the rank model's levels.
	cd := m.def
	if rk.fellBack {
		cd = s.models[m.def.fallback].def
		if m.def.fbBins != nil {
			cd = nil
		}
	}
	for j := range k {
		c := rk.order[j]
		p := &rk.preds[c]
		r.Ranked = append(r.Ranked, wire.Ranked{Item: ev.Cands[c].Item, Score: p.Score, Prediction: p.Label,
			HasBound: p.HasBound, MistakeBound: p.MistakeBound, Delta: p.Delta, N: p.N, Propensity: rk.prop[j]})
		it := &r.Ranked[len(r.Ranked)-1]
		if m.def.traits.Kind == online.Regression && p.HasValue {
			it.Value, it.HasValue = p.Value, true
		}
		if cd != nil && cd.cal != nil && (cd.decided(p) || cd.traits.Kind == online.Classifier) {
			q := *p // an ordinal model's expected label goes to q.Value
			cd.cal.certainty(&q, &it.Calibrated)
		}
	}
	r.Version = version
	e.met.rankRequests.Inc()
	e.met.rankCandidates.Add(float64(n))
	if s.shown == nil || !ev.HasID {
		return
	}
	chBest := -1 // the challenger's greedy first
	if ch := int(e.chal.Load()); ch >= 0 {
		chBest = s.challengerFirst(ch, ev, key)
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	before := s.shown.pending()
	for j := range k {
		c := rk.order[j]
		rk.jid = itemID(rk.jid[:0], ev.ID, ev.Cands[c].Item)
		in, hash := s.candidate(ev, c, key, hashed)
		for i, mm := range s.models {
			if i == champ {
				rk.all[i] = rk.ownPred(c)
				continue
			}
			p, _ := mm.peek(key, mm.feed(in, nil, rk.all))
			mm.def.residualSum(&p, rk.all) // as an event's (ApplyAt): its label judges the sum
			rk.all[i] = p
		}
		var kept bool
		var d joinDrops
		if hashed {
			// The item's hashed entries (the request's features and its
			// own, interactions included) wait for its label, with their
			// fields.
			e.hashed.add(hash, in.Idx[:len(hash)])
			kept, d = s.shown.putSparse(rk.jid, key, in.Idx, in.Val, in.Field, rk.all, now.UnixNano())
		} else {
			kept, d = s.shown.put(rk.jid, key, in.X, rk.all, now.UnixNano())
		}
		e.joinDropped(srcRequests, d)
		if j == 0 && kept {
			mk := opeMark{first: true, prop: rk.prop[0], greedy: c == best, gen: gen,
				predShown: e.rewardOf(cd, rk.preds[c]), predTop: e.rewardOf(cd, rk.preds[best])}
			if chBest >= 0 {
				mk.hasChal, mk.chMatch, mk.predCh = true, c == chBest, e.rewardOf(cd, rk.preds[chBest])
			}
			s.shown.mark(mk)
		}
	}
	e.joinMoved(srcRequests, s.shown.pending()-before)
}

// explore sets rk.ex.ind, the policy's index of every candidate, from the
// key's statistics ex: ucb's score + alpha·width, or thompson's score +
// alpha·ξᵀz for a draw ξ ~ N(0, A⁻¹). It reports false if A does not
// factor.
func (rk *rankScratch) explore(ex *explored, ev *wire.Event, cfg *RankConfig) bool {
	x := &rk.ex
	if x.factor(ex) != nil {
		return false
	}
	n := len(ev.Cands)
	x.ind = x.ind[:0]
	for i := range n {
		w := x.whiten(i, ev.CandidateFeatures(i))
		x.ind = append(x.ind, rk.score[i]+cfg.Alpha*w)
	}
	if cfg.Policy == PolicyThompson {
		x.drawNormal(rk.rng)
		for i := range n {
			x.ind[i] = rk.score[i] + cfg.Alpha*x.perturbation(i)
		}
	}
	return true
}

// reward is the off-policy reward of label y (as the rank model maps it;
// raw: as sent): a classifier's 1 or 0, another kind's label as sent.
func (e *Engine) reward(y, raw float64) float64 {
	if e.defs[e.rankIdx].traits.Kind != online.Classifier { // a challenger is of the same kind (checkChallenger)
		return raw
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
		s.rk = &rankScratch{rng: rand.New(rand.NewPCG(seed, s.stream)), all: make([]online.Prediction, len(s.models))}
	}
	return s.rk
}

// request answers a ranking request read from Kafka: the response record
// goes to the response topic, keyed like the request.
func (s *Shard) request(ev *wire.Event, msg *kafka.Message, id []byte, pub Sink, now time.Time) {
	key := msg.Key
	if len(key) == 0 {
		key = ev.Key
	}
	s.rankRequest(ev, id, key, now)
	pub.Publish(kafka.Message{Topic: s.e.ResponseTopic(), Key: msg.Key, Value: wire.AppendRanking(pub.Buffer(), &s.rk.resp)})
}

// ResponseTopic is where the responses to ranking requests go:
// RankConfig.ResponseTopic, else the output topic.
func (e *Engine) ResponseTopic() string {
	if t := e.cfg.Rank.ResponseTopic; t != "" {
		return t
	}
	return e.cfg.OutputTopic
}

// checkRank resolves cfg.Rank against the models: the index of the rank
// model (-1: requests off).
func checkRank(cfg *Config, models []NamedModel) (int, error) {
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
	case PolicyGreedy, PolicyEpsilon, PolicyUCB, PolicyThompson:
	default:
		return 0, fmt.Errorf("stream: rank policy %q (want %s, %s, %s or %s)", r.Policy, PolicyGreedy, PolicyEpsilon, PolicyUCB, PolicyThompson)
	}
	if !(r.Epsilon >= 0 && r.Epsilon <= 1) {
		return 0, fmt.Errorf("stream: rank epsilon %v not in [0, 1]", r.Epsilon)
	}
	if !(r.Alpha >= 0) || math.IsInf(r.Alpha, 0) {
		return 0, fmt.Errorf("stream: rank alpha %v: want a finite number ≥ 0", r.Alpha)
	}
	if r.Samples == 0 {
		r.Samples = 100
	}
	if r.Samples < 1 || r.Samples > 100000 {
		return 0, fmt.Errorf("stream: rank samples %d not in [1, 100000]", r.Samples)
	}
	if r.JoinEvents == 0 {
		r.JoinEvents = cfg.JoinEvents
	}
	if r.JoinTime == 0 {
		r.JoinTime = cfg.JoinTime
	}
	if r.JoinTime < 0 || r.JoinPerKey < 0 || r.JoinEntries < 0 {
		return 0, fmt.Errorf("stream: rank join: time %v, per key %d, entries %d: want ≥ 0", r.JoinTime, r.JoinPerKey, r.JoinEntries)
	}
	if !(r.JoinLabelled >= 0 && r.JoinLabelled <= 1) {
		return 0, fmt.Errorf("stream: rank join: labelled keys' share %v: want it in [0, 1]", r.JoinLabelled)
	}
	if r.JoinEntries == 0 && r.JoinEvents > 0 {
		r.JoinEntries = min(DefaultJoinEntriesPerItem*r.JoinEvents, maxJoinEntries)
	}
	if r.JoinEntries > maxJoinEntries {
		return 0, fmt.Errorf("stream: rank join: %d entries (at most %d)", r.JoinEntries, maxJoinEntries)
	}
	for i, nm := range models {
		if nm.Name != r.Model {
			continue
		}
		if len(nm.Members) > 0 {
			return 0, fmt.Errorf("stream: rank model %s aggregates other models", r.Model)
		}
		if usesStats(r.Policy) {
			switch {
			case nm.Factory == nil:
				return 0, fmt.Errorf("stream: rank policy %s keeps exploration statistics per key: rank model %s must be key-scoped", r.Policy, r.Model)
			case cfg.Hash != nil:
				return 0, fmt.Errorf("stream: rank policy %s needs dense features, not hashed ones", r.Policy)
			case cfg.Dim > maxExploreDim:
				return 0, fmt.Errorf("stream: rank policy %s: exploration statistics of dimension %d (at most %d)", r.Policy, cfg.Dim, maxExploreDim)
			}
		}
		return i, nil
	}
	return 0, fmt.Errorf("stream: rank model %q is not one of the models", r.Model)
}
