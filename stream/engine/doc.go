// Package engine is the scoring state machine of the streamer service: it
// decodes and validates each event (stream/wire), scores it with every
// configured model, learns from it when labelled, attaches calibrated
// certainty and fallbacks, joins delayed labels, answers ranking requests,
// and produces the records to publish and the dead letters. It knows
// nothing of Kafka connections, consumer groups or offset commits: the
// pipeline (package stream) drives it.
//
// # Model state
//
// An Engine's state is in shards (Engine.NewShard): one for the instance,
// or one per input partition. A shard keeps every model's state in a
// holder (package stream/holder), chosen once when the shard is built: a
// plain holder (one instance of the model), a keyed one (key-scoped: an
// instance per event key, evicted to the key store) or a merged one
// (partition scope: the partition's own statistics, scoring through the
// merge of every partition's). The shard scores and learns, answers
// ranking requests, checkpoints and restores through the holder, never
// asking which one it has; an event's features reach every holder as one
// input, dense (with the model's preparation) or hashed. The engine is not
// told where state is kept: its first shard's scope (NewShard: "" for the
// instance, a partition's number) binds it, and every later shard must be
// of the same scope. The scope decides only the holders a shard gets,
// whose bound the judge checks live, and where a mergeable model's merged
// view comes from: the instance's lanes, or the partitions of the
// changelog. In instance scope each partition's applier applies through a
// lane of the shard (Shard.Lane), so the partitions apply in parallel.
//
// # Files
//
// An event's path through a shard (Shard.ApplyAt, shard.go), a phase
// over every model each, a file each: the worker's decoding and
// preparation (worker.go, before the shard's lock); score and learn (the
// holders); calibrated certainty (calibration.go); fallbacks
// (fallback.go); the records (outbox.go, encoded once the lock is
// released); counts and judging (shard.go; models.go at the run's end).
// A model's state in a shard, and its input, lock, score and learn, are
// shardModel's (shardmodel.go), which the ranking requests use too; a
// request's candidates as the models take them, profiles joined, are
// candidate.go's. Around it: the Engine and its configuration (engine.go, fromconfig.go
// from the service's configuration), a model's definition and metrics
// (models.go), a shard's state for checkpoints (shardstate.go; the
// calibrations' entries in calsnap.go), ranking
// requests (rank.go, explore.go), delayed labels (join.go), hashed
// features (hashed.go), failed keys and the key store's errors
// (keyfault.go, keymemory.go), per-partition histograms (histshards.go),
// setting a global model's state to a saved version (versions.go), the
// background refits' reports to the metrics (refitreport.go).
package engine
