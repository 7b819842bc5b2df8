package stream

import (
	"bytes"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
			if _, _, err := n.RestorePartition(p, nil); err != nil {
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
		got, err := parallel.CapturePartition(p)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := serial.CapturePartition(p)
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
	g, w := model(t, parallel, "global").merged.g, model(t, serial, "global").merged.g
	if g.Examples() != int64(len(events)) {
		t.Fatalf("merge has %d examples, want %d", g.Examples(), len(events))
	}
	// The merge learned the partitions' events interleaved in another
	// order: equal up to rounding.
	if err := online.StateClose(g, w, 1e-9); err != nil {
		t.Fatalf("merge differs from the serial run's: %v", err)
	}
}
