package config

import (
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
)

// testTypes is the registry the tests parse with: every model type the
// service registers (cmd/streamer's newModelTypes).
var testTypes = online.MustRegistry(online.MAMType(), online.OMAMType(), online.LogisticType(), online.LDAType(), online.FMType(),
	refit.SVMType(), refit.LSRRankType(), refit.MLSRRankType(), refit.KRRType(), refit.LowRankType(), refit.AdaBoostType())
