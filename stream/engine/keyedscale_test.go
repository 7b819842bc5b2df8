package engine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
)

// BenchmarkHotKey is the per-event path (Worker.Prepare, then Shard.Apply:
// decode, score, publish, learn) of a linear MAM with d = 8 as one global
// model and as a key-scoped model whose key is in memory (a hot key among
// 1 000, max_keys 10 000). Target: the hot key within 1.2× of the global
// model, 0 allocs/op for both.
func BenchmarkHotKey(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := benchEvents(rng, 64, 8, 'g', func(int) []byte { return []byte("user-42") })
	for _, keyed := range []bool{false, true} {
		name := "global"
		if keyed {
			name = "hot-key"
		}
		b.Run(name, func(b *testing.B) {
			keys := 0
			if keyed {
				keys = 10_000
			}
			benchKeyed(b, 8, keys, msgs, 1000, func(i int) []byte { return fmt.Appendf(nil, "user-%d", 1000+i) })
		})
	}
}

// BenchmarkManyKeys is the per-event path of `streamer bench`'s key-scoped
// case (internal/bench/testdata/keyed-mam.yaml): a linear MAM with d = 32
// per key, 10 000 keys all in memory, each event's key drawn uniformly, so
// that its instance is mostly out of the caches, as it is in the service
// (keys); and the same events through one global model (global), so that
// the difference is what the key costs. 0 allocs/op.
func BenchmarkManyKeys(b *testing.B) {
	const dim, keys = 32, 10_000
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := benchEvents(rng, 4096, dim, 'f', func(int) []byte { return fmt.Appendf(nil, "k%d", rng.IntN(keys)) })
	b.Run("global", func(b *testing.B) { benchKeyed(b, dim, 0, msgs, 0, nil) })
	b.Run("keys", func(b *testing.B) {
		benchKeyed(b, dim, 2*keys, msgs, keys, func(i int) []byte { return fmt.Appendf(nil, "k%d", i) })
	})
}

// benchEvents returns n labelled events of dim normal features, written
// formatted as format ('g': 6 digits; 'f': 6 decimals), with the keys key(i)
// returns.
func benchEvents(rng *rand.Rand, n, dim int, format byte, key func(i int) []byte) []kafka.Message {
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		v := []byte(`{"features":[`)
		for j := range dim {
			if j > 0 {
				v = append(v, ',')
			}
			v = strconv.AppendFloat(v, rng.NormFloat64(), format, 6, 64)
		}
		v = append(v, `],"label":`...)
		v = strconv.AppendInt(v, int64(1-2*(i%2)), 10)
		msgs[i] = kafka.Message{Topic: "events", Key: key(i), Value: append(v, '}')}
	}
	return msgs
}

// benchKeyed times a shard with a linear MAM of dim features, key-scoped
// with maxKeys instances in memory (0: one global instance), on msgs in
// turn (len a power of two), after warm events (msgs[0]'s) with the keys
// warmKey(0 … warm−1).
func benchKeyed(b *testing.B, dim, maxKeys int, msgs []kafka.Message, warm int, warmKey func(i int) []byte) {
	factory := func() (online.Model, error) {
		return online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	}
	m, _ := factory()
	nm := NamedModel{Name: "m", Model: m, Fingerprint: "fp", New: factory}
	if maxKeys > 0 {
		nm.Factory, nm.MaxKeys = factory, maxKeys
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim}, []NamedModel{nm}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s := instanceShard(b, e)
	w, sink := e.NewWorker(), &memSink{}
	for i := range warm {
		msg := msgs[0]
		msg.Key = warmKey(i)
		w.Prepare(&msg)
		s.Apply(w, &msg, sink)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		msg := &msgs[i&(len(msgs)-1)]
		w.Prepare(msg)
		s.Apply(w, msg, sink)
		i++
	}
}
