package engine

import (
	"bytes"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
)

// TestShardsInParallel runs three partitions' shards on three goroutines,
// as the pipeline does (each event prepared without a lock, applied under
// its shard's lock), while checkpoints capture and settle the shards and
// the metrics are scraped. Each shard ends exactly as when its partition
// runs alone, and the merge of all partitions equals a serial run's (run
// with -race, it checks that shards share nothing unguarded).
func TestShardsInParallel(t *testing.T) {
	const parts = 3
	events := partEvents(6000, parts)
	run := func(parallel bool) *node {
		reg := prometheus.NewRegistry()
		e := partitionedEngineReg(t, reg)
		n := newNode(e)
		for p := range parts {
			if _, _, err := n.restorePart(p, nil); err != nil {
				t.Fatal(err)
			}
		}
		if !parallel {
			sink := &memSink{}
			for _, ev := range events {
				msg := ev.msg
				n.Process(&msg, sink)
			}
			return n
		}
		locks := make([]sync.Mutex, parts)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for p := range parts {
			wg.Go(func() {
				w, sink := e.NewWorker(), &memSink{}
				s := n.shards[p]
				for _, ev := range events {
					if ev.part != p {
						continue
					}
					msg := ev.msg
					w.Prepare(&msg)
					locks[p].Lock()
					s.Apply(w, &msg, sink)
					locks[p].Unlock()
				}
			})
		}
		var bg sync.WaitGroup
		bg.Go(func() { // checkpoints and scrapes meanwhile
			for {
				select {
				case <-stop:
					return
				default:
				}
				for p := range parts {
					locks[p].Lock()
					c, err := n.shards[p].Capture()
					locks[p].Unlock()
					if err != nil {
						t.Error(err)
						return
					}
					if err := n.shards[p].Durable(c); err != nil {
						t.Error(err)
						return
					}
					locks[p].Lock()
					n.shards[p].Settle(c)
					locks[p].Unlock()
				}
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
				}
				_ = e.Refitting()
				time.Sleep(time.Millisecond)
			}
		})
		wg.Wait()
		close(stop)
		bg.Wait()
		return n
	}
	serial, parallel := run(false), run(true)
	for p := range parts {
		got, err := parallel.capturePart(p)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := serial.capturePart(p)
		for i := range got {
			if got[i].Name == "per_key" {
				if g, w := parallel.keyStates(t, p, "per_key"), serial.keyStates(t, p, "per_key"); !maps.Equal(g, w) || len(g) == 0 {
					t.Errorf("partition %d: per-key states differ from the serial run's", p)
				}
				continue
			}
			if got[i].Name == "global" {
				continue // the merge below; a partition's own statistics are order-independent sums
			}
			if !bytes.Equal(got[i].Data, want[i].Data) {
				t.Errorf("partition %d, model %s: state differs from the serial run's", p, got[i].Name)
			}
		}
	}
	g, w := model(t, parallel, "global").merged.View(), model(t, serial, "global").merged.View()
	if g.Examples() != int64(len(events)) {
		t.Fatalf("merge has %d examples, want %d", g.Examples(), len(events))
	}
	// The merge learned the partitions' events interleaved in another
	// order: equal up to rounding.
	if err := online.StateClose(g, w, 1e-9); err != nil {
		t.Fatalf("merge differs from the serial run's: %v", err)
	}
}

// TestInstanceShardWorkers: in instance scope one shard holds every
// partition; each partition's worker prepares its events (the rbf feature
// map) without a lock while the others apply theirs under the shard's
// lock. Every event is learned once, and the state equals that of the same
// events applied serially in the order the lock admitted them.
func TestInstanceShardWorkers(t *testing.T) {
	const parts = 3
	events := partEvents(3000, parts)
	newShard := func() *Shard {
		m, err := online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1, Features: 64, Seed: 5}, Balance: true, Delta: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2}, []NamedModel{{Name: "m", Model: m, Fingerprint: "fp"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return instanceShard(t, e)
	}
	s := newShard()
	var mu sync.Mutex
	var order []int // events in the order applied
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			w, sink := s.e.NewWorker(), &memSink{}
			for i, ev := range events {
				if ev.part != p {
					continue
				}
				msg := ev.msg
				w.Prepare(&msg)
				mu.Lock()
				s.Apply(w, &msg, sink)
				order = append(order, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ref := newShard()
	sink := &memSink{}
	for _, i := range order {
		msg := events[i].msg
		ref.Process(&msg, sink)
	}
	got, want := s.models[0].h.Instance(), ref.models[0].h.Instance()
	if got.Examples() != int64(len(events)) {
		t.Fatalf("%d examples, want %d", got.Examples(), len(events))
	}
	a, _ := got.MarshalBinary()
	b, _ := want.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatal("state differs from the serial run in the same order")
	}
}

// BenchmarkShardWorkers is the engine's per-event work (decode, rbf
// D = 256 feature map, score, learn, encode) of one instance-scope shard
// fed by its partitions' workers: "serial" runs everything under the lock
// (the path before shards), "workers" prepares outside it, as the
// pipeline does, with one goroutine per partition (GOMAXPROCS of them).
// Target: workers ≥ 1.4× serial's events/s on 2 cores, 0 allocs/op.
func BenchmarkShardWorkers(b *testing.B) {
	for _, mode := range []string{"serial", "workers"} {
		b.Run(mode, func(b *testing.B) {
			m, _ := online.NewMAM(32, online.MAMParams{Kernel: online.KernelSpec{Type: "rbf", Gamma: 1.0 / 32, Features: 256, Seed: 1}, Balance: true, Delta: 0.05})
			e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 32}, []NamedModel{{Name: "m", Model: m}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			s, _ := e.NewShard("")
			if _, _, err := s.Restore(nil, nil); err != nil {
				b.Fatal(err)
			}
			msgs := make([]kafka.Message, 64)
			for i := range msgs {
				msgs[i] = kafka.Message{Topic: "events", Key: []byte("user-42"), Value: event32(i)}
			}
			var mu sync.Mutex
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w, sink := e.NewWorker(), &memSink{}
				i := 0
				for pb.Next() {
					msg := &msgs[i&63]
					if mode == "serial" {
						mu.Lock()
						w.Prepare(msg)
						s.Apply(w, msg, sink)
						mu.Unlock()
					} else {
						w.Prepare(msg)
						mu.Lock()
						s.Apply(w, msg, sink)
						mu.Unlock()
					}
					i++
				}
			})
		})
	}
}
