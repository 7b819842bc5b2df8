// Package modeltypes assembles the model types the service knows: one
// line per type. A model type is one file (its parameters, validation,
// construction and restore) plus its line here; the configuration, the
// service, eval, the snapshot tools and the experiment drivers find it
// through this registry.
package modeltypes

import (
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
)

// New returns the registry of every model type.
func New() *online.Registry {
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
