package bench

import (
	"errors"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream"
)

// DataPath says where a run's records come from and go to (Setup.DataPath):
// the embedded broker both ways, or (Config.NoBroker) from memory and
// discarded.
type DataPath struct {
	Input  string `json:"input"`  // "broker" or "memory"
	Output string `json:"output"` // "broker" or "discarded"
}

// The DataPath values.
const (
	pathBroker    = "broker"
	pathMemory    = "memory"
	pathDiscarded = "discarded"
)

func dataPath(noBroker bool) DataPath {
	if noBroker {
		return DataPath{Input: pathMemory, Output: pathDiscarded}
	}
	return DataPath{Input: pathBroker, Output: pathBroker}
}

// Describe is the report's words for the data path.
func (d DataPath) Describe() string {
	if d.Input == pathMemory {
		return "input: memory, output: discarded (no broker on the data path: the consumer group and its commits on the embedded broker)"
	}
	return "input: embedded broker, output: embedded broker"
}

// memoryInput generates the n events preload would write (the same
// source, keys and values, in the same order) and places each in the
// partition the preload's balancer gives it: kafka.Hash over partitions,
// the FNV-1a hash of the key, round robin in order without one (so event
// i of dense events is in partition i mod partitions). kafka-go's writer
// calls its balancer once per message in the order given, with the
// partitions 0..n−1, so each partition holds the preload's records in
// the preload's order. It returns the source of the input topic and what
// the events hold.
func memoryInput(topic string, n, partitions int, models *Models) (*stream.MemorySource, Input, error) {
	src, err := newSource(models)
	if err != nil {
		return nil, Input{}, err
	}
	ids := make([]int, partitions)
	parts := make([][]kafka.Message, partitions)
	for p := range ids {
		ids[p] = p
		parts[p] = make([]kafka.Message, 0, n/partitions+1)
	}
	bal := &kafka.Hash{}
	for i := range n {
		k, v, err := src.next(i)
		if err != nil {
			return nil, Input{}, err
		}
		m := kafka.Message{Key: k, Value: v}
		p := bal.Balance(m, ids...)
		parts[p] = append(parts[p], m)
	}
	return stream.NewMemorySource(topic, parts), src.input(), nil
}

// errNoBrokerScale refuses Config.NoBroker to ScaleOut, which measures
// instances that share their state through a changelog topic on the
// broker and counts its progress by the input topic's partition ends
// (partitionEnds): its data path is the broker's by design.
var errNoBrokerScale = errors.New("bench: --no-broker does not apply to --instances: scale-out measures instances that share their state through the broker's changelog")
