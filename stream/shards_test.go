package stream

import (
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestSlotQueue: the slots of several partitions' goroutines reach the
// taker each partition's in the order put, one at a time or in runs, none
// lost or twice, whether the taker waits on an empty queue or finds slots
// queued; a close ends a wait.
func TestSlotQueue(t *testing.T) {
	q := newSlotQueue()
	const producers, each = 3, 20000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var run []*slot // partition 0 puts runs of 7 (putAll)
			for i := range each {
				s := &slot{msg: kafka.Message{Partition: p, Offset: int64(i)}}
				if p > 0 {
					q.put(s)
				} else if run = append(run, s); len(run) == 7 || i == each-1 {
					q.putAll(run)
					run = run[:0]
				}
				if i%1000 == 0 {
					time.Sleep(time.Millisecond) // let the taker find it empty
				}
			}
		}()
	}
	go func() { wg.Wait(); q.close() }()
	next := make([]int64, producers)
	var batch []*slot
	for {
		var ok bool
		if batch, ok = q.take(batch[:0], true); !ok {
			break
		}
		if len(batch) == 0 {
			t.Fatal("take returned an empty batch")
		}
		batch, _ = q.take(batch, false) // appends what was put meanwhile, if anything
		for _, s := range batch {
			p := s.msg.Partition
			if s.msg.Offset != next[p] {
				t.Fatalf("partition %d: slot %d after %d", p, s.msg.Offset, next[p]-1)
			}
			next[p]++
		}
	}
	for p, n := range next {
		if n != each {
			t.Fatalf("partition %d: %d slots taken, want %d", p, n, each)
		}
	}

	q = newSlotQueue()
	done := make(chan bool)
	go func() {
		_, ok := q.take(nil, true)
		done <- ok
	}()
	time.Sleep(10 * time.Millisecond)
	q.close()
	if <-done {
		t.Fatal("take on a closed, empty queue reported slots")
	}
}
