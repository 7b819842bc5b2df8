package refit

import (
	"errors"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/rank"
)

// LSRRankName is the configuration's name of least-squares kernel ranking.
const LSRRankName = "lsrrank"

// LSRRankParams are the parameters of type "lsrrank": least-squares
// regularised ranking (seed 001) with one kernel.
type LSRRankParams struct {
	Kernel     RankKernel `yaml:"kernel"`
	RankParams `yaml:",inline"`
	// Levels m ≥ 2: targets are the integers 1..m and the model also
	// publishes a level from thresholds on the score (0 = off: any real
	// target, score only).
	Levels int `yaml:"levels"`
}

// DefaultLSRRankParams returns the defaults of type "lsrrank".
func DefaultLSRRankParams() LSRRankParams {
	return LSRRankParams{Kernel: defaultRankKernel(), RankParams: defaultRankParams()}
}

// Complete applies the defaults that depend on the kernel's type and the
// solver.
func (p *LSRRankParams) Complete(_ int, given func(string) bool) {
	p.Kernel.complete(p.Solver, given)
	p.RankParams.complete(given)
}

// Validate checks the parameters for inputs of dimension dim.
func (p *LSRRankParams) Validate(dim int) error {
	var errs []error
	p.Kernel.validate(&errs, p.Solver)
	p.RankParams.validate(&errs, dim)
	checkLevels(&errs, p.Levels)
	return errors.Join(errs...)
}

// LSRRankType is the "lsrrank" model type.
func LSRRankType() *online.Type {
	return online.Define(online.Def[LSRRankParams]{
		Name:     LSRRankName,
		Doc:      "least-squares kernel ranking refitted from a window: `solver: exact` (one m×m Cholesky) or `features` (random features, running D×D sums); with `levels` also a level 1..m",
		Defaults: DefaultLSRRankParams,
		Traits:   func(p *LSRRankParams) online.Traits { return rankTraits(online.Ranking, p.Levels) },
		Examples: func() []LSRRankParams {
			p := DefaultLSRRankParams()
			p.Kernel = RankKernel{Type: "rbf", Gamma: 0.5}
			p.Window.Events, p.Refit.EveryEvents = 30, 12
			levels := p
			levels.Levels = 3
			features := p
			features.Solver, features.Kernel.Features, features.Kernel.Seed = SolverFeatures, 16, 3
			linear := p
			linear.Kernel = RankKernel{Type: "linear"}
			auto := levels // gamma auto (rank_auto.go)
			auto.Kernel.Gamma = 0
			featuresAuto := features // its warm-up fixes the map's width (rank_auto.go)
			featuresAuto.Kernel.Gamma = 0
			return []LSRRankParams{p, levels, features, linear, auto, featuresAuto}
		},
		New:     newLSRRank,
		Restore: func(b []byte) (online.Model, error) { return restore(b, LSRRankName, newLSRRank) },
		// The random-feature solver of lsrrank, mlsrrank and krr wrote its
		// state under this tag before the envelope; such a state decodes
		// only into its configured model (online.ErrNeedsConfig).
		LegacyTags: []string{"rfrank"},
	})
}

func newLSRRank(dim int, p *LSRRankParams) (online.Model, error) {
	return newRankModel(LSRRankName, p, dim, 0, &p.RankParams, p.Kernel.kernels(), rank.LSRRank, p.Kernel.Features, p.Kernel.Seed, p.Levels)
}

// AutoKeys: kernel.gamma takes auto (0), the default of the rbf kernel
// with solver exact (rank_auto.go).
func (p *LSRRankParams) AutoKeys() []string { return []string{"kernel.gamma"} }
