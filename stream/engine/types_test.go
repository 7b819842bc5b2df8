package engine

import (
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
)

// testTypes holds every model type, as cmd/streamer registers them.
var testTypes = online.MustRegistry(
	online.MAMType(), online.OMAMType(), online.LogisticType(), online.LDAType(), online.FMType(),
	refit.SVMType(), refit.LSRRankType(), refit.MLSRRankType(), refit.KRRType(), refit.LowRankType(), refit.AdaBoostType(),
)
