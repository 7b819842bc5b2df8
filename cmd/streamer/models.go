package main

import (
	"github.com/streamer/streamer/internal/modeltypes"
	"github.com/streamer/streamer/online"
)

// newModelTypes is the model types the service knows (internal/modeltypes,
// one line per type).
func newModelTypes() *online.Registry { return modeltypes.New() }
