// Package stream is the Kafka adapter of the streamer service: it consumes
// the input topic as a member of a consumer group, hands each event to the
// scoring engine (package stream/engine), which decodes and validates it
// (stream/wire), scores it with every configured model, learns from it
// when labelled and dead-letters bad input; it publishes the records, makes
// the engine's state durable with the offsets it includes (StateStore over
// package snapshot) and commits offsets only after that. Service wires it
// all together with the HTTP endpoints; the models come from a model
// registry (online.Registry) and the configuration from package config.
// The embedded Kafka-protocol broker used by `streamer demo` and the tests
// is StartBroker.
//
// # Packages
//
// The pipeline (this package) drives the engine's shards and knows nothing
// of the models: it gives a shard the events of its partitions, takes the
// records it produces, and captures, saves, settles and restores its state
// through engine.Shard's methods. The engine (stream/engine) is the
// scoring state machine: its shards (the unit of state: the instance's
// partitions, or one partition) keep each model's state in a holder
// (stream/holder: plain, key-scoped with its key table, merged) and take an
// event through the models; it knows nothing of Kafka connections,
// consumer groups or offsets' commits.
//
// # Files
//
// An event's path from fetch to offset commit, by the goroutines it
// passes, each stage in its own file:
//
//   - its partition's reader (consume.go): fetch (fetch.go, or source.go
//     from memory), decode and prepare (engine.Worker, no lock), then the
//     applier's queue;
//   - its partition's applier (applier.go): holding the shard's lock
//     shared, engine.Shard.ApplyAt takes the event through the models in
//     phases (score and learn in the holders, calibrated certainty,
//     fallbacks, records, counts and judging: a file each in stream/engine);
//     the lock released, the run's records are encoded (engine.Outbox) and
//     handed to the publisher (publisher.go, with bufcache.go), and the run
//     is tallied (applier.go);
//   - the publisher's loops (publisher.go): batches, delivery,
//     acknowledgements;
//   - the checkpoint loop (checkpoint.go): capture (engine.Shard.Capture),
//     await the deliveries, save (state.go), write the key store
//     (engine.Shard.Durable), commit the offsets.
//
// Around that path: the Pipeline and its consumer-group loop in
// pipeline.go, partition scope in partition.go, ranking requests over
// HTTP in rankhttp.go, the health of the saves in saves.go, the models'
// versions and rollbacks in versions.go (recorded by the checkpoint after
// its saves) and versionshttp.go, the wiring in service.go.
// Leaves that any of them may use: the monotonic clock and the pollers'
// back-off (clock.go), the errors of lost state (statelost.go).
//
// Calls between the files of the layer (this package, stream/engine,
// stream/holder, stream/profile, stream/wire) go one way along that path:
// no file calls into a file that has called it, directly or through the
// program's other packages, so an event's calls from fetch to offset
// commit enter each file without returning to one they left. A callback
// that would call back (a factory, an updater, a report hook, an error
// type) lives in a file of its own or in the package that owns its type.
// internal/tools/eventpath checks it on the whole program's call graph
// (CI runs it).
//
// # Goroutines
//
// A Service's Run starts, and stops before it returns:
//
//   - the HTTP server (/metrics, /healthz, /readyz, optional pprof);
//   - with http.tls or http.auth, or a reload signal (WithReloadSignal),
//     the loop that reads their files again when they change or on the
//     signal (httpsec.go; stopped with the HTTP server);
//   - the Pipeline's consumer-group loop (Run's own goroutine), which joins
//     generations; per generation, kafka-go's Generation runs per assigned
//     partition a reader goroutine (fetch from the partition's leader on
//     its own connection, decode and prepare each event with its own
//     Worker, no lock) feeding the partition's applier goroutine (apply
//     the prepared events in offset order, as many as are ready per
//     shared hold of the shard's lock, keeping their records' fields;
//     then, the lock released, encode the records, hand them to the
//     publisher as one run and free the events' slots). The appliers of
//     an instance-scope shard's partitions run in parallel, each through
//     a lane of the shard (Shard.Lane: scratch of its own, the shard's
//     holders and join buffers each behind its own lock, a key table's
//     behind its stripes' locks; with more than two cores a mergeable
//     mam's lanes learn in parallel, each with its own statistics and
//     merged view, package holder). An applier counts,
//     judges and calibrates a run of events at a time (Shard.EndRun) and
//     observes its histograms into its partition's shard (engine.HistShards);
//     and one checkpoint loop
//     (every snapshot.every and snapshot.every_events, or early when the
//     key-scoped models hold too many changed keys): one loop over the
//     shards — pause each to capture its state and offsets, wait until
//     the appliers have published the records of those offsets, mark the
//     publisher's stream, await the deliveries before the mark, make each
//     shard's snapshot durable, write its changed keys to the key store,
//     commit the offsets. A shard (the unit of state and of snapshots: in
//     instance scope all the instance's partitions, in partition scope
//     one) is applied to under its lock held shared, by one applier per
//     partition; captures and ranking requests hold it exclusively;
//     different shards run in parallel;
//   - with snapshot.scope partition, the follower of the changelog topic
//     (followRemote), which merges other instances' partition statistics
//     every snapshot.remote_refresh;
//   - the Publisher's batching loops, one per four GOMAXPROCS (at least
//     one, at most eight), each with its queue (NewPublisher starts them,
//     Close stops them after delivering what was queued): they send batches
//     asynchronously, each partition's records through one loop
//     (Publisher.Lane) in the order published, and one of them re-queues
//     failed ones, never dropping a record;
//   - per refitted model (or per partition's instance of one), its refit
//     goroutine and, with refit.every, its ticker (Engine.Start and
//     Engine.Close; online/refit).
//
// Shutdown (context cancelled): the consumer loop stops fetching, each
// partition waits until its applier has applied and published its events
// in hand and stops it, the last checkpoint is
// taken and committed, the refits are cancelled, the publisher delivers
// what is queued, and the HTTP server shuts down.
package stream
