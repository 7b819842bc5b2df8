package main

import (
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
)

// newModelTypes assembles the model types the service knows: one line per
// type. A model type is one file (its parameters, validation, construction
// and restore) plus its line here; the configuration, the service, eval and
// the snapshot tools find it through this registry.
func newModelTypes() *online.Registry {
	return online.MustRegistry(
		online.MAMType(),
		online.OMAMType(),
		online.LogisticType(),
		online.LDAType(),
		online.FMType(),
		refit.SVMType(),
		refit.LSRRankType(),
		refit.MLSRRankType(),
		refit.KRRType(),
		refit.LowRankType(),
		refit.AdaBoostType(),
	)
}
