package engine

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/wire"
)

// The challenger (RankConfig.Challenger). A second model scores the
// candidates of every request that can be labelled (an id, with delayed
// labels on), after the champion has ranked them: only its greedy first
// item is kept, in the first item's mark (opeMark), and its order is never
// served. The labels of first items then estimate both greedy policies
// and their difference from the champion's exploration log (ope.go).
// With promote auto the engine swaps the two when the difference's lower
// bound has stayed above 0 for Hold labelled first items: from the next
// request on the promoted model ranks (its exploration policy as
// configured) and the old champion challenges it. Every switch is logged,
// counted (streamer_rank_promotions_total) and shown by
// streamer_rank_champion; which model is champion is saved with every
// checkpoint (a "rank state" entry of the snapshot, RankStateType) and
// restored with it.

// RankStateType is the type of the snapshot entry that holds which model
// ranks (RankStateName; its data is the champion's name).
const (
	RankStateType = "rank-state"
	RankStateName = "rank.champion"
)

// challengerIndex is the index of cfg's challenger in models (-1: none;
// checkChallenger checked it).
func challengerIndex(cfg *RankConfig, models []NamedModel) int {
	if cfg.Challenger == "" {
		return -1
	}
	return slices.IndexFunc(models, func(nm NamedModel) bool { return nm.Name == cfg.Challenger })
}

// checkChallenger resolves the challenger's settings (defaults) and checks
// it against the models and the rank model rank.
func checkChallenger(cfg *Config, models []NamedModel, rank int) error {
	r := &cfg.Rank
	if r.Promote == "" {
		r.Promote = PromoteManual
	}
	if r.Estimator == "" {
		r.Estimator = "dr"
	}
	if r.Confidence == 0 {
		r.Confidence = 0.95
	}
	if r.Hold == 0 {
		r.Hold = 2000
	}
	switch {
	case r.Promote != PromoteManual && r.Promote != PromoteAuto:
		return fmt.Errorf("stream: rank challenger promote %q (want %s or %s)", r.Promote, PromoteManual, PromoteAuto)
	case r.Estimator != "dr" && r.Estimator != "ips":
		return fmt.Errorf("stream: rank challenger estimator %q (want dr or ips)", r.Estimator)
	case !(r.Confidence >= 0.5 && r.Confidence < 1):
		return fmt.Errorf("stream: rank challenger confidence %v not in [0.5, 1)", r.Confidence)
	case r.Hold < challengeEvery:
		return fmt.Errorf("stream: rank challenger hold %d: at least %d", r.Hold, challengeEvery)
	}
	if r.Challenger == "" {
		return nil
	}
	if rank < 0 {
		return fmt.Errorf("stream: rank challenger %s: no rank model", r.Challenger)
	}
	i := challengerIndex(r, models)
	switch {
	case i < 0:
		return fmt.Errorf("stream: rank challenger %q is not one of the models", r.Challenger)
	case i == rank:
		return fmt.Errorf("stream: rank challenger %s is the rank model", r.Challenger)
	case len(models[i].Members) > 0:
		return fmt.Errorf("stream: rank challenger %s aggregates other models", r.Challenger)
	case usesStats(r.Policy):
		return fmt.Errorf("stream: rank policy %s keeps statistics of the rank model's own: a challenger needs %s or %s", r.Policy, PolicyGreedy, PolicyEpsilon)
	case models[i].Traits.Kind != models[rank].Traits.Kind:
		return fmt.Errorf("stream: rank challenger %s is of kind %s, the rank model %s of kind %s", r.Challenger, models[i].Traits.Kind, models[rank].Name, models[rank].Traits.Kind)
	}
	return nil
}

// challenge sets up the challenger's evidence and what its promotion
// does.
func (e *Engine) challenge() {
	if e.chal.Load() < 0 {
		return
	}
	c := newChallengeStats(&e.cfg.Rank)
	a, b := e.defs[e.champ.Load()].name, e.defs[e.chal.Load()].name
	e.met.promotions.WithLabelValues(a, b) // both ways at 0: the series exist from the start
	e.met.promotions.WithLabelValues(b, a)
	c.promote = func(mean, lo, samples float64) {
		from, to := e.champ.Load(), e.chal.Load()
		e.champ.Store(to)
		e.chal.Store(from)
		e.met.promotions.WithLabelValues(e.defs[from].name, e.defs[to].name).Inc()
		if e.cfg.Log != nil {
			e.cfg.Log.Info("rank: challenger promoted", "from", e.defs[from].name, "to", e.defs[to].name,
				"estimator", c.est.String(), "difference", mean, "lower", lo, "confidence", c.cfg.Confidence, "labels", samples)
		}
	}
	c.wins = func(mean, lo, samples float64) {
		if e.cfg.Log != nil {
			e.cfg.Log.Info("rank: the challenger wins (promote manual: not promoted)", "champion", e.defs[e.champ.Load()].name,
				"challenger", e.defs[e.chal.Load()].name, "estimator", c.est.String(), "difference", mean, "lower", lo,
				"confidence", c.cfg.Confidence, "labels", samples)
		}
	}
	e.ope.ch = c
}

// Champion is the model that ranks now: the rank model, or a challenger
// promoted since ("" = requests off).
func (e *Engine) Champion() string {
	if e.rankIdx < 0 {
		return ""
	}
	return e.defs[e.champ.Load()].name
}

// challengerFirst scores request ev's candidates for key with model ch
// (the challenger, as the rank model would be: its fallback's scores when
// it has an answer for none, a residual model's plus its fallback's) and
// returns its greedy first: the highest score, ties to the earlier
// candidate.
func (s *Shard) challengerFirst(ch int, ev *wire.Event, key []byte) int {
	rk := s.rk
	m := s.models[ch]
	hashed := s.e.cfg.Hash != nil
	mu := m.lock(key)
	defer unlock(mu)
	inst := m.h.Find(key)
	var fb *shardModel
	var fbInst online.Model
	if f := m.def.fallback; f >= 0 {
		fb = s.models[f]
		defer unlock(fb.lock(key)) // after the model's: the one order of the two
		fbInst = fb.h.Find(key)
	}
	rk.chPreds = rk.chPreds[:0]
	decided := false
	for i := range ev.Cands {
		in, _ := s.candidate(ev, i, key, hashed)
		p, _ := m.h.Peek(inst, m.feed(in, nil, nil))
		if m.def.decided(&p) {
			decided = true
			if m.def.residual {
				fp, _ := fb.h.Peek(fbInst, fb.feed(in, nil, nil))
				addFallback(&p, fp)
			}
		}
		rk.chPreds = append(rk.chPreds, p)
	}
	if !decided && fb != nil {
		for i := range ev.Cands {
			in, _ := s.candidate(ev, i, key, hashed)
			p, _ := fb.h.Peek(fbInst, fb.feed(in, nil, nil))
			rk.chPreds[i] = m.def.fromFallback(p)
		}
	}
	best := 0
	for i := range rk.chPreds {
		if rk.chPreds[i].Score > rk.chPreds[best].Score {
			best = i
		}
	}
	return best
}

// takeLogged puts candidate c, a request's logged decision, first in
// rk.order with propensity prop (RankConfig.Replay), the others after it
// in the policy's order.
func (rk *rankScratch) takeLogged(c int, prop float64) {
	j := slices.Index(rk.order, c)
	if j < 0 {
		return
	}
	copy(rk.order[1:j+1], rk.order[:j])
	rk.order[0] = c
	rk.prop[0] = prop
}

// captureRank adds the rank state to a checkpoint: which model ranks.
func (s *Shard) captureRank(c *Checkpoint) {
	if s.e.chal.Load() < 0 {
		return
	}
	c.Models = append(c.Models, snapshot.Model{Name: RankStateName, Type: RankStateType, Data: []byte(s.e.Champion())})
	c.deltas = append(c.deltas, nil)
	c.holders = append(c.holders, nil)
}

// restoreRank restores which model ranks from a snapshot's rank state
// (removed from byName): the champion saved, when it is still the rank
// model or the challenger; otherwise the rank model.
func (s *Shard) restoreRank(byName map[string]snapshot.Model) {
	sv, ok := byName[RankStateName]
	delete(byName, RankStateName)
	e := s.e
	if !ok || e.chal.Load() < 0 {
		return
	}
	name := string(sv.Data)
	if e.Champion() == name {
		return
	}
	if ch := e.chal.Load(); e.defs[ch].name == name {
		e.ope.mu.Lock()
		e.chal.Store(e.champ.Load())
		e.champ.Store(ch)
		e.ope.newGeneration()
		e.ope.mu.Unlock()
	}
}

// newPromotions is streamer_rank_promotions_total.
func newPromotions() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_rank_promotions_total",
		Help: "Challengers promoted to rank (rank.challenger.promote auto), by the model that ranked before (from) and the one that ranks since (to)."},
		[]string{"from", "to"})
}

// ItemScore is a candidate's item and a model's score of it.
type ItemScore struct {
	Item  string
	Score float64
}

// Scores scores the candidates of request (a ranking request as the input
// topic carries it) with the named model as a challenger does
// (challengerFirst), changing nothing: what that model's greedy order
// would be. For tools and tests; the caller must hold the shard (no apply
// runs meanwhile).
func (s *Shard) Scores(model string, request []byte) ([]ItemScore, error) {
	i := slices.IndexFunc(s.e.defs, func(d *modelDef) bool { return d.name == model })
	if i < 0 {
		return nil, fmt.Errorf("stream: no model %q", model)
	}
	dec, err := s.e.RequestDecoder(len(request))
	if err != nil {
		return nil, err
	}
	var ev wire.Event
	if err := dec.Decode(request, &ev); err != nil {
		return nil, err
	}
	if !ev.IsRequest {
		return nil, fmt.Errorf("stream: not a ranking request")
	}
	rk := s.rankScratch()
	s.challengerFirst(i, &ev, ev.Key)
	out := make([]ItemScore, len(ev.Cands))
	for c := range out {
		out[c] = ItemScore{Item: string(ev.Cands[c].Item), Score: rk.chPreds[c].Score}
	}
	return out, nil
}
