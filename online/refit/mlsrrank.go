package refit

import (
	"errors"
	"fmt"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/rank"
)

// MLSRRankName is the configuration's name of multiscale least-squares
// kernel ranking.
const MLSRRankName = "mlsrrank"

// MLSRRankParams are the parameters of type "mlsrrank": LSRRank on the
// combined kernel K̄ = Σ K_t / v_t of several rbf widths (seed 001,
// Theorem 1). With solver features each kernel gets 256 random
// frequencies (seed 1).
type MLSRRankParams struct {
	Kernels    []WeightedKernel `yaml:"kernels"`
	RankParams `yaml:",inline"`
	Levels     int `yaml:"levels"` // as lsrrank's
}

// WeightedKernel is one entry of mlsrrank's "kernels": an rbf kernel and
// its weight v ≥ 1.
type WeightedKernel struct {
	Type  string  `yaml:"type"`  // rbf (default; the only one)
	Gamma float64 `yaml:"gamma"` // > 0
	V     float64 `yaml:"v"`     // weight ≥ 1 (default 1)
}

// DefaultMLSRRankParams returns the defaults of type "mlsrrank" (kernels
// has none).
func DefaultMLSRRankParams() MLSRRankParams {
	return MLSRRankParams{RankParams: defaultRankParams()}
}

// Complete applies each kernel's defaults (type rbf, v 1) and the
// schedule's.
func (p *MLSRRankParams) Complete(_ int, given func(string) bool) {
	for i := range p.Kernels {
		k := &p.Kernels[i]
		if !given(fmt.Sprintf("kernels[%d].type", i)) {
			k.Type = "rbf"
		}
		if !given(fmt.Sprintf("kernels[%d].v", i)) {
			k.V = 1
		}
	}
	p.RankParams.complete(given)
}

// Validate checks the parameters for inputs of dimension dim.
func (p *MLSRRankParams) Validate(dim int) error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, specErrorf(key, format, args...)) }
	if len(p.Kernels) < 1 || len(p.Kernels) > 64 {
		add("kernels", "required: a list of 1 to 64 {type: rbf, gamma, v}, got %d", len(p.Kernels))
	}
	for i, k := range p.Kernels {
		kp := fmt.Sprintf("kernels[%d]", i)
		if k.Type != "rbf" {
			add(kp+".type", "%q is not rbf (the only kernel of mlsrrank)", k.Type)
		}
		if !positive(k.Gamma) {
			add(kp+".gamma", "must be a finite number > 0, got %v", k.Gamma)
		}
		if !(k.V >= 1) || !positive(k.V) {
			add(kp+".v", "must be a finite weight ≥ 1, got %v", k.V)
		}
	}
	p.RankParams.validate(&errs, dim)
	checkLevels(&errs, p.Levels)
	return errors.Join(errs...)
}

// MLSRRankType is the "mlsrrank" model type.
func MLSRRankType() *online.Type {
	return online.Define(online.Def[MLSRRankParams]{
		Name:     MLSRRankName,
		Doc:      "multiscale LSRRank: several rbf widths with weights v, K̄ = Σ K_t/v_t; solvers and levels as lsrrank",
		Defaults: DefaultMLSRRankParams,
		Traits:   func(p *MLSRRankParams) online.Traits { return rankTraits(online.Ranking, p.Levels) },
		Examples: func() []MLSRRankParams {
			p := DefaultMLSRRankParams()
			p.Kernels = []WeightedKernel{{Type: "rbf", Gamma: 0.2, V: 1}, {Type: "rbf", Gamma: 2, V: 2}}
			p.Window.Events, p.Refit.EveryEvents = 30, 12
			levels := p
			levels.Levels = 3
			// (The features solver, 256 frequencies per kernel, is checked in
			// this package's tests: its sums are too large for the suite's
			// truncation at every byte.)
			return []MLSRRankParams{p, levels}
		},
		New:     newMLSRRank,
		Restore: func(b []byte) (online.Model, error) { return restore(b, MLSRRankName, newMLSRRank) },
	})
}

func newMLSRRank(dim int, p *MLSRRankParams) (online.Model, error) {
	return newMLSRRankModel(dim, 0, p)
}

// newMLSRRankModel builds an mlsrrank; nnz > 0: of hashed features.
func newMLSRRankModel(dim, nnz int, p *MLSRRankParams) (online.Model, error) {
	ks := make([]rank.Kernel, len(p.Kernels))
	for i, k := range p.Kernels {
		ks[i] = rank.Kernel{Type: rank.RBF, Gamma: k.Gamma, V: k.V}
	}
	return newRankModel(MLSRRankName, p, dim, nnz, &p.RankParams, ks, rank.LSRRank, defaultMultiFeat, 1, p.Levels)
}
