package bench

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

// TestBenchRunSmoke runs the whole bench on a few events: a warm-up
// round that is discarded, two measured rounds in the scheduled orders,
// every pipeline in every round, finite ratios, and a report that encodes.
func TestBenchRunSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const events = 2000
	rep, err := Run(ctx, Config{Events: events, Dim: 4, Partitions: 2, Rounds: 2, Warmup: 1,
		SnapshotEvery: 20 * time.Millisecond, Kernel: online.KernelSpec{Type: online.KernelLinear}})
	if err != nil {
		t.Fatal(err)
	}
	pipelines := []string{PassThrough, Score, ScoreSnapshot}
	if !slices.Equal(rep.Setup.Pipelines, pipelines) || rep.Setup.Labels != "±1" || rep.Setup.Models != "linear MAM" {
		t.Errorf("setup %+v", rep.Setup)
	}
	if len(rep.Warmup) != 1 || rep.Warmup[0].Round != 0 {
		t.Fatalf("warm-up rounds %+v, want one, numbered 0", rep.Warmup)
	}
	if len(rep.Rounds) != 2 {
		t.Fatalf("%d measured rounds, want 2", len(rep.Rounds))
	}
	sched := Schedule(3, 2)
	for i, rd := range rep.Rounds {
		if rd.Round != i+1 {
			t.Errorf("round %d numbered %d", i+1, rd.Round)
		}
		for pos, p := range sched[i] {
			if rd.Order[pos] != pipelines[p] {
				t.Errorf("round %d order %v, want schedule %v", rd.Round, rd.Order, sched[i])
			}
		}
		for _, p := range pipelines {
			r, ok := rd.Result(p)
			if !ok {
				t.Fatalf("round %d has no %s", rd.Round, p)
			}
			if r.Events != events || r.Records != events || r.Round != rd.Round || rd.Order[r.Position] != p {
				t.Errorf("round %d %s: %+v", rd.Round, p, r)
			}
			if !(r.Rate() > 0) || math.IsInf(r.Rate(), 0) {
				t.Errorf("round %d %s: rate %v", rd.Round, p, r.Rate())
			}
		}
		for _, d := range Ratios {
			if v, ok := rd.Ratios[d.Name]; !ok || !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("round %d: ratio %s = %v (present %v)", rd.Round, d.Name, v, ok)
			}
		}
	}
	if len(rep.Summary.Pipelines) != 3 || len(rep.Summary.Ratios) != 2 {
		t.Errorf("summary %+v", rep.Summary)
	}
	for _, r := range rep.Summary.Ratios {
		if r.N != 2 || len(r.PerRound) != 2 || !(r.Min <= r.Median && r.Median <= r.Max) {
			t.Errorf("ratio %+v", r)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("report does not encode: %v", err)
	}
}

// TestCountingSinkLanes: the bench's counting sink hands each partition
// the publisher's lane (the service's path: one of its queues, buffers a
// run at a time), and its lanes count into the sink's counts, dead
// letters with the first one's reason.
func TestCountingSinkLanes(t *testing.T) {
	var acked atomic.Int64
	pub := stream.NewPublisher(stream.PublisherConfig{BatchSize: 10, Discard: true}, nil, func(n int) { acked.Add(int64(n)) }, nil)
	defer pub.Close(context.Background())
	sink := newCountingSink(pub)
	lanes := []stream.Sink{sink.Lane(0), sink.Lane(1)}
	for i, l := range lanes {
		c, ok := l.(*countingSink)
		if !ok || c.bufferingSink == bufferingSink(pub) || c.sinkCounts != sink.sinkCounts {
			t.Fatalf("lane %d: %T %+v, want a counting sink around the publisher's lane", i, l, l)
		}
		if bufs := c.Buffers(nil, 64); len(bufs) != 64 {
			t.Fatalf("lane %d: %d buffers, want 64", i, len(bufs))
		}
	}
	lanes[0].(*countingSink).PublishBatch([]kafka.Message{{Topic: "out", Value: []byte("a")}, {Topic: "out", Value: []byte("b")}})
	lanes[1].Publish(kafka.Message{Topic: "out", Value: []byte("c")})
	dead := kafka.Message{Topic: dlqTopic, Value: []byte("x"), Headers: []kafka.Header{{Key: engine.HeaderReason, Value: []byte("not_json")}}}
	lanes[1].Publish(dead)
	if got := sink.records.Load(); got != 4 {
		t.Errorf("%d records counted, want 4", got)
	}
	if sink.dead.Load() != 1 || !strings.Contains(sink.reason(), "not_json") {
		t.Errorf("dead letters %d (%q), want 1 not_json", sink.dead.Load(), sink.reason())
	}
	for deadline := time.Now().Add(10 * time.Second); acked.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if acked.Load() != 4 {
		t.Errorf("%d records acknowledged, want 4", acked.Load())
	}
}
