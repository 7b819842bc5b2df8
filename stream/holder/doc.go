// Package holder keeps one model's state in a shard of the streamer
// service: how an event reaches the model, how a ranking request reads it,
// and how its state is captured for a snapshot, made durable and restored.
// The shard (package stream) builds a Holder per model when it is made and
// drives it through the interface alone; it never asks which kind it has:
//
//   - a plain holder (NewPlain, holder.go): one instance of the model;
//   - a keyed holder (NewKeyed, keyed.go): a key-scoped model, one instance
//     per event key in a key table (table.go) that keeps at most max_keys
//     in memory, evicted by a second-chance sweep, and writes changed keys to
//     the key store (internal/keystore) once the snapshot that includes
//     them is durable; a key whose stored state cannot be read is failed
//     (faults.go); in instance scope the table is split into stripes, each
//     with its own lock, so that the partitions' lanes apply in parallel;
//   - a merged holder (NewMerged, merged.go): a mergeable mam in partition
//     scope, which learns into its partition's statistics and scores with
//     the merge of every partition's (Merge), those of the partitions other
//     instances own included;
//   - a merging holder (NewMerging, lanes.go): a mergeable mam in instance
//     scope, whose lanes (ForLane, Lane) learn in parallel, each into
//     statistics of its own, scoring with a view merged from all of them.
//
// An event's features reach every holder as one Input, dense (with the
// worker's preparation for the model) or hashed: the one place the two
// kinds part is Input's observe and peek.
package holder
