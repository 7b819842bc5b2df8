package refit

import (
	"errors"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/rank"
)

// KRRName is the configuration's name of kernel ridge regression.
const KRRName = "krr"

// KRRParams are the parameters of type "krr": kernel ridge regression,
// (K + λI)α = y in scikit-learn's KernelRidge(alpha=λ) scaling, no
// intercept; with solver features the same in the random features' space.
type KRRParams struct {
	Kernel     RankKernel `yaml:"kernel"`
	RankParams `yaml:",inline"`
}

// DefaultKRRParams returns the defaults of type "krr".
func DefaultKRRParams() KRRParams {
	return KRRParams{Kernel: defaultRankKernel(), RankParams: defaultRankParams()}
}

// Complete applies the defaults that depend on the kernel's type and the
// solver.
func (p *KRRParams) Complete(_ int, given func(string) bool) {
	p.Kernel.complete(p.Solver, given)
	p.RankParams.complete(given)
}

// Validate checks the parameters for inputs of dimension dim.
func (p *KRRParams) Validate(dim int) error {
	var errs []error
	p.Kernel.validate(&errs, p.Solver)
	p.RankParams.validate(&errs, dim)
	return errors.Join(errs...)
}

// KRRType is the "krr" model type.
func KRRType() *online.Type {
	return online.Define(online.Def[KRRParams]{
		Name:     KRRName,
		Doc:      "kernel ridge regression (K + λI)α = y refitted from a window, exact or with random features; the score is the predicted value",
		Defaults: DefaultKRRParams,
		Traits:   func(*KRRParams) online.Traits { return rankTraits(online.Regression, 0) },
		Examples: func() []KRRParams {
			p := DefaultKRRParams()
			p.Kernel = RankKernel{Type: "rbf", Gamma: 0.5}
			p.Window.Events, p.Refit.EveryEvents = 30, 12
			features := p
			features.Solver, features.Kernel.Features, features.Kernel.Seed = SolverFeatures, 16, 3
			auto := p // gamma auto (rank_auto.go)
			auto.Kernel.Gamma = 0
			featuresAuto := features // its warm-up fixes the map's width (rank_auto.go)
			featuresAuto.Kernel.Gamma = 0
			return []KRRParams{p, features, auto, featuresAuto}
		},
		New:     newKRR,
		Restore: func(b []byte) (online.Model, error) { return restore(b, KRRName, newKRR) },
	})
}

func newKRR(dim int, p *KRRParams) (online.Model, error) {
	return newRankModel(KRRName, p, dim, 0, &p.RankParams, p.Kernel.kernels(), rank.KRR, p.Kernel.Features, p.Kernel.Seed, 0)
}

// AutoKeys: kernel.gamma takes auto (0), the default of the rbf kernel
// with solver exact (rank_auto.go).
func (p *KRRParams) AutoKeys() []string { return []string{"kernel.gamma"} }
