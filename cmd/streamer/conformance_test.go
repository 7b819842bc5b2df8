package main

import (
	"testing"

	"github.com/streamer/streamer/online/onlinetest"
)

// TestModelTypesConform runs the conformance suite (online/onlinetest)
// over every model type the service registers: a type is tested by being
// registered.
func TestModelTypesConform(t *testing.T) {
	onlinetest.Run(t, newModelTypes())
}

// FuzzRestore fuzzes the restore of every registered type's encoding (and
// of the standardised wrapper around each).
func FuzzRestore(f *testing.F) {
	onlinetest.FuzzRestore(f, newModelTypes())
}
