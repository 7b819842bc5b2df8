package stream

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// partitionStateLost is a partition with a committed offset but no state
// in the changelog.
type partitionStateLost struct {
	part   int
	offset int64
	topic  string
}

func (e *partitionStateLost) Error() string {
	return fmt.Sprintf("partition %d has a committed offset (%d) but no state in snapshot.changelog_topic %s: it is not consumed, since its models would start empty and what they learned would be lost; "+
		"restore the changelog, or accept the loss with --allow-empty-state, or reset the group's offsets", e.part, e.offset, e.topic)
}

// StateLostError stops start-up: snapshots are on, no valid state was
// found, and the consumer group has committed offsets, so starting would
// silently forget what the models learned from the events before them.
type StateLostError struct {
	Group, Topic string
	Committed    map[int]int64 // by partition
	Where        string        // where state was looked for
	Corrupt      int           // corrupt snapshot files moved aside
}

func (e *StateLostError) Error() string {
	corrupt := ""
	if e.Corrupt > 0 {
		corrupt = fmt.Sprintf(" (%d corrupt snapshot files moved aside as *.corrupt)", e.Corrupt)
	}
	parts := slices.Sorted(maps.Keys(e.Committed))
	offs := make([]string, len(parts))
	for i, p := range parts {
		offs[i] = fmt.Sprintf("%d@%d", p, e.Committed[p])
	}
	return fmt.Sprintf("snapshot: no valid state in %s%s, but consumer group %q has committed offsets on %q (partition@offset: %s): "+
		"starting would lose what the models learned from the events before them. Restore a snapshot there; or accept the loss: "+
		"run with --allow-empty-state (the models start empty at the committed offsets), or reset the group's offsets "+
		"(kafka-consumer-groups.sh --group %s --topic %s --reset-offsets --to-earliest --execute) to learn again from what the topic retains",
		e.Where, corrupt, e.Group, e.Topic, strings.Join(offs, " "), e.Group, e.Topic)
}
