package stream

import (
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestApplyQueue: the slots of several partitions' goroutines reach the
// applier each partition's in the order put, none lost or twice, whether
// the applier waits on an empty queue or finds slots queued; a close
// ends a wait.
func TestApplyQueue(t *testing.T) {
	q := newApplyQueue()
	const producers, each = 3, 20000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.put(&slot{msg: kafka.Message{Partition: p, Offset: int64(i)}})
				if i%1000 == 0 {
					time.Sleep(time.Millisecond) // let the applier find it empty
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

	q = newApplyQueue()
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
