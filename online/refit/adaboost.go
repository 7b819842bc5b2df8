package refit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/adaboost"
)

// AdaBoostName is the configuration's name of the AdaBoost aggregation.
const AdaBoostName = "adaboost"

// AdaBoostParams are the parameters of type "adaboost": discrete AdaBoost
// (online/adaboost) over a dictionary of the configuration's member
// classifiers and, optionally, decision stumps on the features, refitted in
// the background from a window.
//
// The model's input has dim entries: the first len(Members) are the
// members' predictions for the event (only their sign is read: −1, 0 = no
// decision, +1), the others are the event's features.
type AdaBoostParams struct {
	// Members are names of other classifiers of the same configuration
	// (distinct, non-empty; the configuration checks that they exist).
	Members []string `yaml:"members"`
	// Stumps adds the decision stumps on every feature to the dictionary.
	Stumps bool     `yaml:"stumps"`
	Rounds int      `yaml:"rounds"` // M, 1..10000 (default 100)
	Window Window   `yaml:"window"`
	Refit  SVMRefit `yaml:"refit"`
}

// DefaultAdaBoostParams returns the defaults of type "adaboost".
func DefaultAdaBoostParams() AdaBoostParams {
	return AdaBoostParams{
		Rounds: 100,
		Window: Window{Events: DefaultWindow},
		Refit:  SVMRefit{Schedule: Schedule{EveryEvents: DefaultRefitEvery}, Guard: 0.1, GuardSlack: 0.02},
	}
}

// MemberNames returns the names of the member models whose predictions
// fill the first len(Members) entries of the input.
func (p *AdaBoostParams) MemberNames() []string { return slices.Clone(p.Members) }

// Complete applies the refit schedule's default.
func (p *AdaBoostParams) Complete(_ int, given func(string) bool) {
	p.Refit.Schedule.complete(given)
}

// Validate checks the parameters for inputs of dimension dim.
func (p *AdaBoostParams) Validate(dim int) error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, specErrorf(key, format, args...)) }
	seen := map[string]bool{}
	for i, name := range p.Members {
		switch {
		case name == "":
			add("members", "member %d: empty name", i+1)
		case seen[name]:
			add("members", "%q is listed twice", name)
		}
		seen[name] = true
	}
	switch {
	case len(p.Members) == 0 && !p.Stumps:
		add("members", "an empty dictionary: list members and/or set stumps: true")
	case len(p.Members) > dim:
		add("members", "%d members, but the input has %d entries (the members' predictions come first)", len(p.Members), dim)
	case p.Stumps && len(p.Members) == dim:
		add("stumps", "no features to split: the input's %d entries are all members' predictions", dim)
	}
	if p.Rounds < 1 || p.Rounds > adaboost.MaxRounds {
		add("rounds", "must be in 1..%d, got %d", adaboost.MaxRounds, p.Rounds)
	}
	checkWindow(&errs, p.Window, p.Refit.Schedule, dim)
	if !(p.Refit.Guard >= 0 && p.Refit.Guard < 0.5) {
		add("refit.guard", "must be in [0, 0.5), got %v", p.Refit.Guard)
	}
	if !(p.Refit.GuardSlack >= 0) || math.IsInf(p.Refit.GuardSlack, 0) {
		add("refit.guard_slack", "must be a finite number ≥ 0, got %v", p.Refit.GuardSlack)
	}
	return errors.Join(errs...)
}

// AdaBoostType is the "adaboost" model type.
func AdaBoostType() *online.Type {
	return online.Define(online.Def[AdaBoostParams]{
		Name:     AdaBoostName,
		Doc:      "discrete AdaBoost over member classifiers' predictions and/or decision stumps, refitted in the background from a window; the score is Σ β·h",
		Defaults: DefaultAdaBoostParams,
		Traits: func(*AdaBoostParams) online.Traits {
			return online.Traits{Kind: online.Classifier, Refitted: true}
		},
		Examples: func() []AdaBoostParams {
			p := DefaultAdaBoostParams()
			p.Stumps, p.Rounds, p.Window.Events, p.Refit.EveryEvents = true, 20, 30, 12
			members := p
			members.Stumps, members.Members = false, []string{"a"}
			both := p
			both.Members, both.Refit.Guard = []string{"a"}, 0
			return []AdaBoostParams{p, members, both}
		},
		New:     newAdaBoost,
		Restore: func(b []byte) (online.Model, error) { return restore(b, AdaBoostName, newAdaBoost) },
	})
}

func newAdaBoost(dim int, p *AdaBoostParams) (online.Model, error) {
	return New(Config{
		Type: AdaBoostName, Params: p, Dim: dim,
		Window: p.Window.Events, WindowTime: p.Window.Time, MinEvents: p.Window.MinEvents,
		EveryEvents: p.Refit.EveryEvents, Every: p.Refit.Every, OnScore: p.Refit.OnScore, Guard: p.Refit.Guard, GuardSlack: p.Refit.GuardSlack,
	}, &AdaBoost{Members: slices.Clone(p.Members), Stumps: p.Stumps, Rounds: p.Rounds})
}

// AdaBoost trains adaboost ensembles on windows: the first len(Members)
// columns of a row are the members' predictions, the rest its features.
// Scores are F = Σ β·h; there is no certainty bound and no probability
// (docs/math.md: the logistic link is not calibrated).
type AdaBoost struct {
	Members []string // the members' names (for Weights)
	Stumps  bool
	Rounds  int
}

var _ Trainer = (*AdaBoost)(nil)

// Label maps −1/0 to −1 and 1 to +1.
func (t *AdaBoost) Label(v float64) (float64, bool) { return binaryLabel(v) }

// Fit boosts on d.
func (t *AdaBoost) Fit(ctx context.Context, d *Data, _ Fitted) (Fitted, Stats, error) {
	e, err := adaboost.Fit(ctx, d.X, d.Y, d.D, adaboost.Config{Members: len(t.Members), Stumps: t.Stumps, Rounds: t.Rounds})
	if err != nil {
		return nil, Stats{}, fmt.Errorf("refit: %w", err)
	}
	return &AdaBoostFit{e: e, names: t.Members}, Stats{Iterations: len(e.Rounds())}, nil
}

// Unmarshal restores a fit written by MarshalBinary. Errors wrap
// ErrFormat.
func (t *AdaBoost) Unmarshal(b []byte) (Fitted, error) {
	e := new(adaboost.Ensemble)
	if err := e.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: refit: %w", ErrFormat, err)
	}
	if e.Members() != len(t.Members) {
		return nil, fmt.Errorf("%w: refit: adaboost fit of %d members, configured %d", ErrFormat, e.Members(), len(t.Members))
	}
	return &AdaBoostFit{e: e, names: t.Members}, nil
}

// AdaBoostFit is a fitted "adaboost" version. Reach the serving one from an
// online.Model with online.Unwrap[*refit.Model] and Model.AdaBoostFit.
type AdaBoostFit struct {
	e     *adaboost.Ensemble
	names []string
}

// Predict scores x: Score F(x) = Σ β·h(x), Label its sign (0 when F = 0),
// N the rows trained on. It does not allocate.
func (f *AdaBoostFit) Predict(x []float64) online.Prediction {
	s := f.e.Score(x)
	p := online.Prediction{Score: s, N: int64(f.e.N())}
	switch {
	case s > 0:
		p.Label = 1
	case s < 0:
		p.Label = -1
	}
	return p
}

// MarshalBinary encodes the ensemble (online/adaboost's encoding).
func (f *AdaBoostFit) MarshalBinary() ([]byte, error) { return f.e.MarshalBinary() }

// Weights returns the fitted β per dictionary member: every member by name
// (β 0 if never picked), then the stumps picked, "stump(feature j ≤ t)"
// with j counted among the features (input column len(members)+j) and a
// signed β (adaboost.Weight).
func (f *AdaBoostFit) Weights() []adaboost.Weight { return f.e.Weights(f.names) }

// Ensemble returns the fitted ensemble (rounds, stop reason).
func (f *AdaBoostFit) Ensemble() *adaboost.Ensemble { return f.e }

// inputDim is the dimension of the inputs the fit scores.
func (f *AdaBoostFit) inputDim() int { return f.e.Dim() }

// AdaBoostFit returns the serving version's fit of an "adaboost" model; ok
// is false before the first refit and for other types. From an
// online.Model m (possibly standardised):
//
//	r, ok := online.Unwrap[*refit.Model](m)
//	f, ok := r.AdaBoostFit()
//	weights := f.Weights()
func (m *Model) AdaBoostFit() (f *AdaBoostFit, ok bool) {
	if s := m.cur.Load(); s != nil {
		f, ok = s.fit.(*AdaBoostFit)
	}
	return f, ok
}
