package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/wire"
)

// TestMemoryInputMatchesPreload: the events --no-broker generates in
// memory are the preload's, partition by partition and in order: the
// same keys and values, placed by the same balancer (dense events: no
// key, round robin; hashed events: the user's id as the key, hashed).
func TestMemoryInputMatchesPreload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, parts = 600, 3
	for _, c := range []struct {
		name   string
		models *Models
	}{
		{"dense", BuiltinMAM(4, online.KernelSpec{Type: online.KernelLinear})},
		{"hashed", &Models{Hash: &wire.HashConfig{Bits: 16, Seed: 1, MaxFeatures: 64, Namespaces: []string{"user", "item"}}, Ratings: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := stream.StartBroker(0, stream.TopicSpec{Name: inputTopic, Partitions: parts})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			pin, err := preload(ctx, b.Addrs(), inputTopic, n, c.models)
			if err != nil {
				t.Fatal(err)
			}
			mem, min, err := memoryInput(inputTopic, n, parts, c.models)
			if err != nil {
				t.Fatal(err)
			}
			if pj, mj := mustJSON(t, pin), mustJSON(t, min); pj != mj {
				t.Errorf("input: preload %s, memory %s", pj, mj)
			}
			if mem.Partitions() != parts || mem.Len() != n {
				t.Fatalf("memory: %d partitions, %d events", mem.Partitions(), mem.Len())
			}
			for p := range parts {
				conn, err := kafka.DialLeader(ctx, "tcp", b.Addrs()[0], inputTopic, p)
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				last, err := conn.ReadLastOffset()
				if err != nil {
					t.Fatal(err)
				}
				f := mem.Fetcher(p, kafka.FirstOffset)
				var got int64
				for got < last {
					batch := conn.ReadBatch(1, 10<<20)
					for {
						want, err := batch.ReadMessage()
						if err != nil {
							break
						}
						m, err := f.Next(ctx)
						if err != nil {
							t.Fatalf("partition %d: memory ends before the broker's offset %d: %v", p, want.Offset, err)
						}
						if m.Offset != want.Offset || m.HighWaterMark != last || !bytes.Equal(m.Key, want.Key) || !bytes.Equal(m.Value, want.Value) {
							t.Fatalf("partition %d offset %d: memory has %d %q %q (high watermark %d), the broker %q %q (%d)",
								p, want.Offset, m.Offset, m.Key, m.Value, m.HighWaterMark, want.Key, want.Value, last)
						}
						got = want.Offset + 1
					}
					batch.Close()
				}
				conn.Close()
				if last == 0 || got != last {
					t.Errorf("partition %d: %d of %d records compared", p, got, last)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBenchRunNoBroker runs the bench with its records from memory and
// its output discarded: every pipeline in every round processes every
// event and has every record acknowledged (Run also checks that each
// model learned every event), and the report says where the records came
// from and went, in text and JSON. Scale-out refuses it.
func TestBenchRunNoBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const events = 2000
	rep, err := Run(ctx, Config{Events: events, Dim: 4, Partitions: 3, Rounds: 2, Warmup: 1, NoBroker: true,
		SnapshotEvery: 20 * time.Millisecond, Kernel: online.KernelSpec{Type: online.KernelLinear}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.DataPath != (DataPath{Input: "memory", Output: "discarded"}) || rep.Setup.Input.Kind != denseKind {
		t.Errorf("setup %+v", rep.Setup)
	}
	if len(rep.Rounds) != 2 || len(rep.Warmup) != 1 {
		t.Fatalf("%d rounds, %d warm-up", len(rep.Rounds), len(rep.Warmup))
	}
	for _, rd := range append(rep.Warmup, rep.Rounds...) {
		for _, p := range []string{PassThrough, Score, ScoreSnapshot} {
			r, ok := rd.Result(p)
			if !ok {
				t.Fatalf("round %d has no %s", rd.Round, p)
			}
			if r.Events != events || r.Records != events || !(r.Rate() > 0) {
				t.Errorf("round %d %s: %+v", rd.Round, p, r)
			}
			if p != PassThrough && r.Learned["bench"] != events {
				t.Errorf("round %d %s: learned %v", rd.Round, p, r.Learned)
			}
		}
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "\ninput: memory, output: discarded") {
		t.Errorf("the text report does not say input: memory, output: discarded:\n%s", text.String())
	}
	if j := mustJSON(t, rep); !strings.Contains(j, `"data_path":{"input":"memory","output":"discarded"}`) {
		t.Errorf("JSON setup: %s", j[:min(len(j), 600)])
	}
	if _, _, err := ScaleOut(ctx, Config{Events: 10, NoBroker: true}, []int{1}); err == nil || !strings.Contains(err.Error(), "--no-broker") {
		t.Errorf("ScaleOut with NoBroker: %v, want a refusal", err)
	}
}

// TestScoreAllocatesNothingPerEvent: the service's path from fetch to
// publish (records from memory, output discarded), with a linear mam of
// 32 features and calibration on, allocates nothing per event. The
// process's heap allocations are counted over two runs of different
// lengths, so that what does not grow with the events (starting the
// pipeline, the consumer group, pools refilling after a collection)
// mostly cancels out: per extra event fewer than 0.25 must remain (runs
// here give −0.03 to 0.06), where one allocation per event, the least a
// per-event allocation could add, gives 1.
func TestScoreAllocatesNothingPerEvent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	allocs := func(events int) int64 {
		t.Helper()
		rep, err := Run(ctx, Config{Events: events, Dim: 32, Partitions: 4, Rounds: 1, Warmup: 0, NoBroker: true,
			Kernel:      online.KernelSpec{Type: online.KernelLinear},
			Calibration: engine.CalibrationConfig{Window: 2000, Every: 100, Delta: 0.05, MinInterval: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		r, ok := rep.Rounds[0].Result(Score)
		if !ok || r.Events != events {
			t.Fatalf("score: %+v", r)
		}
		return r.Allocs
	}
	const short, long = 30_000, 150_000
	a, b := allocs(short), allocs(long)
	perEvent := float64(b-a) / (long - short)
	t.Logf("heap allocations: %d over %d events, %d over %d: %.4f per extra event", a, short, b, long, perEvent)
	if perEvent >= 0.25 {
		t.Errorf("%.3f heap allocations per event on the service's path (%d over %d events, %d over %d): an allocation per event or per few",
			perEvent, a, short, b, long)
	}
}
