// Package stream is the Kafka adapter of the streamer service: it consumes
// the input topic as a member of a consumer group, decodes and validates
// each event (stream/wire), scores it with every configured model and
// publishes the scores (Engine), learns from labelled events, dead-letters
// bad input, makes model state durable with the offsets it includes
// (StateStore over package snapshot) and commits offsets only after that.
// Service wires it all together with the HTTP endpoints; the models come
// from a model registry (online.Registry) and the configuration from
// package config. The embedded Kafka-protocol broker used by `streamer
// demo` and the tests is StartBroker.
//
// # Goroutines
//
// A Service's Run starts, and stops before it returns:
//
//   - the HTTP server (/metrics, /healthz, /readyz, optional pprof);
//   - the Pipeline's consumer-group loop (Run's own goroutine), which joins
//     generations; per generation, kafka-go's Generation runs one goroutine
//     per assigned partition (consume: fetch, then Process in offset order)
//     and one checkpoint loop (every snapshot.every and snapshot.every_events:
//     pause the partitions to capture the engine's state and mark the
//     publisher's stream, resume them, await the deliveries before the
//     mark, make the state durable, commit the offsets it includes). Processing
//     of all partitions is serialised by the pipeline's lock: the Engine is
//     not safe for concurrent use;
//   - with snapshot.scope partition, the follower of the changelog topic
//     (followRemote), which merges other instances' partition statistics
//     every snapshot.remote_refresh;
//   - the Publisher's batching loop (NewPublisher starts it, Close stops it
//     after delivering what was queued): it sends batches asynchronously
//     and re-queues failed ones, never dropping a record;
//   - per refitted model (or per partition's instance of one), its refit
//     goroutine and, with refit.every, its ticker (Engine.Start and
//     Engine.Close; online/refit).
//
// Shutdown (context cancelled): the consumer loop stops fetching, each
// partition goroutine finishes the message in hand, the last checkpoint is
// taken and committed, the refits are cancelled, the publisher delivers
// what is queued, and the HTTP server shuts down.
package stream
