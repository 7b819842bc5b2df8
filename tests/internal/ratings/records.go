package ratings

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Record is the part of a score record (docs/wire.md) the replay reads.
// Fields a model does not publish stay nil or zero.
type Record struct {
	ID          string          `json:"id"`
	Model       string          `json:"model"`
	Version     int64           `json:"version"`
	Score       *float64        `json:"score"`
	Prediction  float64         `json:"prediction"`
	Probability *float64        `json:"probability"`
	Expected    *float64        `json:"expected"`
	Fallback    string          `json:"fallback"`
	ScoredAt    time.Time       `json:"scored_at"`
	Ranked      json.RawMessage `json:"ranked"`
	Certainty   struct {
		Probability *struct {
			P float64 `json:"p"`
		} `json:"probability"`
	} `json:"certainty"`
}

// Kind is what a model's records say it predicts.
type Kind int

// Kinds, as read from a model's records.
const (
	// KindUnknown: no prediction the replay can judge (a ranking model, a
	// regression model whose score is its answer, a model not heard from).
	KindUnknown Kind = iota
	// KindRating: "prediction" is a rating (a non-integer value in some
	// record), 0 for none.
	KindRating
	// KindExpected: an ordinal model whose records carry "expected", its
	// rating prediction on the raw label scale.
	KindExpected
	// KindLevels: an ordinal model without "expected" (integer predictions
	// beyond ±1): its levels are not on the rating scale.
	KindLevels
	// KindClassifier: predictions ±1 (0 for none).
	KindClassifier
)

var kindNames = [...]string{KindUnknown: "other", KindRating: "rating", KindExpected: "ordinal (expected)", KindLevels: "ordinal (levels only)", KindClassifier: "classifier"}

func (k Kind) String() string { return kindNames[k] }

// Model holds one model's records, indexed by event (NaN: none).
type Model struct {
	Name                                       string
	Score, Prediction, Probability, Expected   []float64
	Version                                    []int64 // the model version that scored each event
	Records, Duplicates                        int
	Fallbacks                                  map[string]int // records that carried "fallback", by its name
	hasExpected, nonInteger, beyondOne, signed bool
}

// Kind returns what the model's records say it predicts.
func (m *Model) Kind() Kind {
	switch {
	case m.hasExpected:
		return KindExpected
	case m.nonInteger:
		return KindRating
	case m.beyondOne:
		return KindLevels
	case m.signed:
		return KindClassifier
	}
	return KindUnknown
}

// RatingPrediction returns the model's rating prediction of event i: an
// ordinal model's "expected", a rating model's nonzero "prediction", or,
// when scoreIsRating, its score (none from version 0: a refitted model
// before its first refit).
func (m *Model) RatingPrediction(i int, scoreIsRating bool) (float64, bool) {
	var v float64
	switch {
	case scoreIsRating:
		if m.Version[i] == 0 {
			return 0, false
		}
		v = m.Score[i]
	case m.hasExpected:
		v = m.Expected[i]
	case m.nonInteger:
		if v = m.Prediction[i]; v == 0 {
			return 0, false
		}
	default:
		return 0, false
	}
	return v, !math.IsNaN(v)
}

// Collector gathers the score records of a replay of n events whose ids
// are their indices ("0" … "n-1"). It is not safe for concurrent use.
type Collector struct {
	n       int
	models  []*Model
	byName  map[string]*Model
	first   []time.Time // the earliest scored_at of an event's records
	count   []int32     // distinct models that scored the event
	dead    []bool      // dead-lettered
	Foreign int         // records that are not a score of one of the n events
}

// NewCollector returns a collector for n events.
func NewCollector(n int) *Collector {
	return &Collector{n: n, byName: map[string]*Model{}, first: make([]time.Time, n), count: make([]int32, n), dead: make([]bool, n)}
}

// N returns the number of events.
func (c *Collector) N() int { return c.n }

// Models returns the models in the order their first records came.
func (c *Collector) Models() []*Model { return c.models }

// Model returns the named model's records (nil if none came).
func (c *Collector) Model(name string) *Model { return c.byName[name] }

// Index parses an event id of the replay ("0" … "n-1"); ok is false for
// any other id.
func (c *Collector) Index(id string) (int, bool) {
	i, err := strconv.Atoi(id)
	return i, err == nil && i >= 0 && i < c.n && strconv.Itoa(i) == id
}

// Add takes the value of one output record and returns the event it
// scored (ok false for a record of no event of the replay, such as a
// ranking response, counted in Foreign).
func (c *Collector) Add(value []byte) (int, bool, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return 0, false, fmt.Errorf("ratings: score record %.200q: %w", value, err)
	}
	i, ok := c.Index(r.ID)
	if !ok || r.Ranked != nil || r.Model == "" {
		c.Foreign++
		return 0, false, nil
	}
	m := c.byName[r.Model]
	if m == nil {
		nan := func() []float64 {
			s := make([]float64, c.n)
			for j := range s {
				s[j] = math.NaN()
			}
			return s
		}
		m = &Model{Name: r.Model, Score: nan(), Prediction: nan(), Probability: nan(), Expected: nan(), Version: make([]int64, c.n), Fallbacks: map[string]int{}}
		c.byName[r.Model] = m
		c.models = append(c.models, m)
	}
	if !math.IsNaN(m.Prediction[i]) {
		m.Duplicates++ // at-least-once delivery: the first record counts
		return i, true, nil
	}
	m.Records++
	c.count[i]++
	if c.first[i].IsZero() || r.ScoredAt.Before(c.first[i]) {
		c.first[i] = r.ScoredAt
	}
	if r.Score != nil {
		m.Score[i] = *r.Score
	}
	m.Version[i] = r.Version
	m.Prediction[i] = r.Prediction
	switch p := r.Prediction; {
	case p != math.Trunc(p):
		m.nonInteger = true
	case p > 1 || p < -1:
		m.beyondOne = true
	case p != 0:
		m.signed = true
	}
	switch {
	case r.Probability != nil:
		m.Probability[i] = *r.Probability
	case r.Certainty.Probability != nil:
		m.Probability[i] = r.Certainty.Probability.P
	}
	if r.Expected != nil {
		m.Expected[i] = *r.Expected
		m.hasExpected = true
	}
	if r.Fallback != "" {
		m.Fallbacks[r.Fallback]++
	}
	return i, true, nil
}

// Dead marks event i dead-lettered.
func (c *Collector) Dead(i int) { c.dead[i] = true }

// Scored returns the number of models that scored event i and whether it
// was dead-lettered.
func (c *Collector) Scored(i int) (int, bool) { return int(c.count[i]), c.dead[i] }

// Order returns the events in the order the service scored them (by the
// earliest scored_at of their records; ties and events without a record
// by index, the latter last).
func (c *Collector) Order() []int {
	idx := make([]int, c.n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ta, tb := c.first[a], c.first[b]
		switch {
		case ta.IsZero() != tb.IsZero():
			if ta.IsZero() {
				return 1
			}
			return -1
		case ta.IsZero():
			return 0
		}
		return ta.Compare(tb)
	})
	return idx
}

// Result is one model's prequential figures over the judged events.
type Result struct {
	Model     string         `json:"model"`
	Kind      string         `json:"kind"`
	Records   int            `json:"records"`
	Fallbacks map[string]int `json:"fallbacks,omitempty"`

	// Rating predictions (kind rating or ordinal with expected, or a
	// model named in ScoreIsRating): RMSE of the clipped predictions over
	// the Predicted events that had one, and the baselines' over the
	// same events.
	Predicted    int  `json:"predicted"`
	RMSE         Num  `json:"rmse"`
	MeanRMSE     Num  `json:"mean_rmse_same_events"`
	BiasesRMSE   Num  `json:"biases_rmse_same_events"`
	ScoreAsValue bool `json:"score_as_rating,omitempty"`
	// RatingAUC is the ROC AUC of the rating predictions as the score of
	// the outcome rating ≥ Options.Liked, over the same events (NaN
	// without rating predictions): what the model is worth to rank by
	// the chance of a like, beside the classifiers.
	RatingAUC Num `json:"rating_auc"`

	// Classifiers, against the outcome rating ≥ Options.Liked (NaN and 0
	// for the other models).
	BinaryFigures
}

// Options says what Judge judges.
type Options struct {
	From          int      // judge events From… (by index) only
	Lo, Hi        float64  // rating predictions are clipped to [Lo, Hi]
	Liked         float64  // a rating ≥ Liked is the positive outcome of classifiers
	ScoreIsRating []string // models whose score is their rating prediction
}

// Judge returns every model's prequential figures over rs[o.From:], with
// the baselines' over the same events.
func Judge(rs []Rating, c *Collector, base Baselines, o Options) []Result {
	var out []Result
	for _, m := range c.models {
		res := Result{Model: m.Name, Kind: m.Kind().String(), Records: m.Records}
		if len(m.Fallbacks) > 0 {
			res.Fallbacks = m.Fallbacks
		}
		scoreIs := slices.Contains(o.ScoreIsRating, m.Name)
		res.ScoreAsValue = scoreIs
		var e, em, eb RMSE
		var bin Binary
		var scores []float64 // the rating predictions, for RatingAUC
		var liked []bool
		for i := o.From; i < len(rs); i++ {
			y := rs[i].Value
			if v, ok := m.RatingPrediction(i, scoreIs); ok {
				e.Add(Clip(v, o.Lo, o.Hi), y)
				em.Add(base.Mean[i], y)
				eb.Add(base.Biases[i], y)
				scores, liked = append(scores, v), append(liked, y >= o.Liked)
			}
			if m.Kind() == KindClassifier && !math.IsNaN(m.Prediction[i]) {
				bin.Add(y >= o.Liked, m.Score[i], m.Prediction[i], m.Probability[i])
			}
		}
		res.RMSE, res.MeanRMSE, res.BiasesRMSE = Num(e.Value()), Num(em.Value()), Num(eb.Value())
		res.Predicted = e.N()
		res.RatingAUC = Num(AUC(scores, liked))
		res.Accuracy, res.LogLoss, res.AUC = Num(math.NaN()), Num(math.NaN()), Num(math.NaN())
		if m.Kind() == KindClassifier {
			res.BinaryFigures = bin.Figures()
		}
		out = append(out, res)
	}
	slices.SortStableFunc(out, func(a, b Result) int { return cmp.Compare(a.Model, b.Model) })
	return out
}

// BaselineRMSE returns the RMSE of the baselines' predictions over
// rs[from:].
func BaselineRMSE(rs []Rating, base Baselines, from int) (mean, biases float64) {
	var em, eb RMSE
	for i := from; i < len(rs); i++ {
		em.Add(base.Mean[i], rs[i].Value)
		eb.Add(base.Biases[i], rs[i].Value)
	}
	return em.Value(), eb.Value()
}
