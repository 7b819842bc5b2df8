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
	factory := func() (online.Model, error) {
		return online.NewMAM(8, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([]kafka.Message, 64)
	for i := range msgs {
		v := []byte(`{"features":[`)
		for j := range 8 {
			if j > 0 {
				v = append(v, ',')
			}
			v = strconv.AppendFloat(v, rng.NormFloat64(), 'g', 6, 64)
		}
		msgs[i] = kafka.Message{Topic: "events", Key: []byte("user-42"), Value: fmt.Appendf(v, `],"label":%d}`, 1-2*(i%2))}
	}
	for _, keyed := range []bool{false, true} {
		name := "global"
		if keyed {
			name = "hot-key"
		}
		b.Run(name, func(b *testing.B) {
			m, _ := factory()
			nm := NamedModel{Name: "m", Model: m, Fingerprint: "fp", New: factory}
			if keyed {
				nm.Factory, nm.MaxKeys = factory, 10_000
			}
			e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 8}, []NamedModel{nm}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			s, err := e.NewShard("")
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.Restore(nil, nil); err != nil {
				b.Fatal(err)
			}
			w, sink := e.NewWorker(), &memSink{}
			for i := range 1000 { // other keys in memory
				msg := msgs[0]
				msg.Key = fmt.Appendf(nil, "user-%d", 1000+i)
				w.Prepare(&msg)
				s.Apply(w, &msg, sink)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				msg := &msgs[i&63]
				w.Prepare(msg)
				s.Apply(w, msg, sink)
				i++
			}
		})
	}
}

// BenchmarkManyKeys is the per-event path of `streamer bench`'s key-scoped
// case (internal/bench/testdata/keyed-mam.yaml): a linear MAM with d = 32
// per key, 10 000 keys all in memory, each event's key drawn uniformly, so
// that its instance is mostly out of the caches, as it is in the service.
// 0 allocs/op.
func BenchmarkManyKeys(b *testing.B) {
	const dim, keys = 32, 10_000
	factory := func() (online.Model, error) {
		return online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([]kafka.Message, 4096)
	for i := range msgs {
		v := []byte(`{"features":[`)
		for j := range dim {
			if j > 0 {
				v = append(v, ',')
			}
			v = strconv.AppendFloat(v, rng.NormFloat64(), 'f', 6, 64)
		}
		msgs[i] = kafka.Message{Topic: "events", Key: fmt.Appendf(nil, "k%d", rng.IntN(keys)), Value: fmt.Appendf(v, `],"label":%d}`, 1-2*(i%2))}
	}
	m, _ := factory()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim},
		[]NamedModel{{Name: "m", Model: m, Fingerprint: "fp", New: factory, Factory: factory, MaxKeys: 2 * keys}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s, err := e.NewShard("")
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Restore(nil, nil); err != nil {
		b.Fatal(err)
	}
	w, sink := e.NewWorker(), &memSink{}
	for i := range keys { // every key in memory
		msg := msgs[0]
		msg.Key = fmt.Appendf(nil, "k%d", i)
		w.Prepare(&msg)
		s.Apply(w, &msg, sink)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		msg := &msgs[i&4095]
		w.Prepare(msg)
		s.Apply(w, msg, sink)
		i++
	}
}
