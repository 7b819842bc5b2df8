package engine

import (
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

// TestWorkerHashedHoldsNoPreparation: a worker (one per prepared-event
// slot, 32 per partition) holds a dense preparation buffer per preparing
// model only for dense features: Prepare skips hashed events, so with
// features.hash it holds none (it held 2^bits floats per model and slot).
// A hashed event still reaches the model through the shard.
func TestWorkerHashedHoldsNoPreparation(t *testing.T) {
	const bits = 16
	p := online.OMAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Levels: 3, Normalize: true}
	for _, hashed := range []bool{false, true} {
		cfg := Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 1 << bits, MaxMessageBytes: 1 << 16}
		if hashed {
			cfg.Hash = &wire.HashConfig{Bits: bits, Seed: 1, MaxFeatures: 64}
		}
		om, err := online.NewOMAM(1<<bits, p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(cfg, []NamedModel{{Name: "ranks", Model: om}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := e.NewWorker()
		if got := len(w.prep[0]); hashed && got != 0 || !hashed && got != om.PreparedLen() {
			t.Fatalf("hashed %v: a preparation buffer of %d floats", hashed, got)
		}
		if !hashed {
			continue
		}
		s := instanceShard(t, e)
		msg := &kafka.Message{Topic: "events", Value: []byte(`{"id":"a","features":{"user":"u1","item":"i2"},"label":2}`)}
		w.Prepare(msg)
		s.Apply(w, msg, &memSink{})
		if om.Examples() != 1 {
			t.Fatalf("the hashed event was not learned: %d examples", om.Examples())
		}
	}
}
