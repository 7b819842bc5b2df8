// Package stage sets the profiler labels of the service's goroutines:
// each long-lived goroutine on the events' path says what it does, so that
// a CPU profile splits the service's CPU by stage and shows a goroutine
// that is busy all the time, the limit of an instance's throughput
// whatever its cores (`streamer bench --stages`; `go tool pprof -tags
// FILE` of a --cpuprofile):
//
//	stage=fetch partition=N  a partition's consumer: fetch, decode, prepare (Pipeline.consume)
//	stage=apply partition=N  a partition's applier: score, learn (under its shard's lock), encode
//	stage=publish            the publisher's loops and the producer's goroutines they start
//	stage=calibration        a calibration refit
//	stage=checkpoint         the checkpoint loop
package stage

import (
	"context"
	"runtime/pprof"
)

// Set sets the labels kv of the calling goroutine, once, when it starts:
// nothing per event. They add to those of ctx (the caller's, e.g. the
// bench's pipeline=MODE); nil: none.
func Set(ctx context.Context, kv ...string) {
	if ctx == nil {
		ctx = context.Background()
	}
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels(kv...)))
}
