package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
)

// pb appends protocol buffer fields: varints (wire 0) and bytes (wire 2).
type pb []byte

func (b pb) varint(num int, v uint64) pb {
	b = binary.AppendUvarint(b, uint64(num)<<3)
	return binary.AppendUvarint(b, v)
}

func (b pb) bytes(num int, v []byte) pb {
	b = binary.AppendUvarint(b, uint64(num)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// TestCPUByGoroutineLabels: a profile written as runtime/pprof writes one
// (values packed, labels as string indices, the string table after the
// samples; a fixed64 field to skip) is summed by its labels' values, the
// samples without a stage under "".
func TestCPUByGoroutineLabels(t *testing.T) {
	strs := []string{"", "samples", "count", "cpu", "nanoseconds", "stage", "apply", "shard", "instance", "fetch", "partition", "0", "1"}
	idx := func(s string) uint64 {
		for i, x := range strs {
			if x == s {
				return uint64(i)
			}
		}
		t.Fatalf("no string %q", s)
		return 0
	}
	label := func(k, v string) []byte { return pb(nil).varint(1, idx(k)).varint(2, idx(v)) }
	sample := func(cpu uint64, labels ...[]byte) []byte {
		var packed []byte
		packed = binary.AppendUvarint(packed, 1)
		packed = binary.AppendUvarint(packed, cpu)
		s := pb(nil).bytes(1, binary.AppendUvarint(nil, 7)).bytes(2, packed)
		for _, l := range labels {
			s = s.bytes(3, l)
		}
		return s
	}
	var p pb
	p = p.bytes(1, pb(nil).varint(1, idx("samples")).varint(2, idx("count")))
	p = p.bytes(1, pb(nil).varint(1, idx("cpu")).varint(2, idx("nanoseconds")))
	p = p.bytes(2, sample(30e6, label("stage", "apply"), label("shard", "instance")))
	p = p.bytes(2, sample(10e6, label("stage", "apply"), label("shard", "instance")))
	p = p.bytes(2, sample(20e6, label("partition", "1"), label("stage", "fetch")))
	p = p.bytes(2, sample(10e6, label("stage", "fetch"), label("partition", "0")))
	p = p.bytes(2, sample(50e6))                         // no labels: the broker
	p = p.bytes(2, sample(5e6, label("partition", "0"))) // no stage: the rest too
	p = append(binary.AppendUvarint(p, 9<<3|1), make([]byte, 8)...)
	for _, s := range strs {
		p = p.bytes(6, []byte(s))
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(p)
	zw.Close()
	got, err := cpuByGoroutineLabels(gz.Bytes(), []string{"stage", "partition", "shard"})
	if err != nil {
		t.Fatal(err)
	}
	want := []GoroutineCPU{{"", 55 * time.Millisecond}, {"stage=apply shard=instance", 40 * time.Millisecond},
		{"stage=fetch partition=1", 20 * time.Millisecond}, {"stage=fetch partition=0", 10 * time.Millisecond}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	st := StageCPU(got)
	if st["apply"] != 40*time.Millisecond || st["fetch"] != 30*time.Millisecond || st[""] != 55*time.Millisecond {
		t.Errorf("by stage %v", st)
	}
	if _, err := cpuByGoroutineLabels([]byte("not gzip"), []string{"stage"}); err == nil {
		t.Error("garbage parsed")
	}
}

// TestCPUByGoroutineLabelsLive: a real CPU profile of a goroutine labelled
// as the service labels its stages is read back with those labels.
func TestCPUByGoroutineLabelsLive(t *testing.T) {
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		t.Fatalf("start the CPU profiler (not with go test -cpuprofile): %v", err)
	}
	pprof.Do(context.Background(), pprof.Labels("stage", "apply", "shard", "3"), func(context.Context) {
		x := 1.0
		for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
			for range 1000 {
				x = x*1.0000001 + 1e-9
			}
		}
		sink = x
	})
	pprof.StopCPUProfile()
	got, err := cpuByGoroutineLabels(prof.Bytes(), []string{"stage", "partition", "shard"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.Labels == "stage=apply shard=3" && g.CPU > 0 {
			return
		}
	}
	t.Fatalf("no CPU under stage=apply shard=3: %v", got)
}

var sink float64

// TestBenchStages: with Stages, each measured run's CPU is kept by the
// service's goroutine labels: a score run has its applier and its
// fetchers (the stages that take most of its CPU: the others may get no
// 10 ms sample in so short a run); the report prints the table.
func TestBenchStages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Events: 100000, Dim: 4, Partitions: 2, Rounds: 1, Stages: true,
		Kernel: online.KernelSpec{Type: online.KernelLinear}})
	if err != nil {
		t.Fatal(err) // also when go test -cpuprofile holds the profiler: Stages needs it
	}
	r, ok := rep.Rounds[0].Result(Score)
	if !ok || len(r.Goroutines) == 0 {
		t.Fatalf("score run: %+v", r)
	}
	var labels []string
	for _, g := range r.Goroutines {
		labels = append(labels, g.Labels)
	}
	for _, want := range []string{"stage=apply partition=", "stage=fetch partition="} {
		found := false
		for _, l := range labels {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("score run: no CPU under %q (labels %q)", want, labels)
		}
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "| score |") || !strings.Contains(text.String(), "busiest goroutine") {
		t.Errorf("report:\n%s", text.String())
	}
	// The per-stage table: the score run's fetchers and appliers were busy.
	_, perStage, ok := strings.Cut(text.String(), "The busiest goroutine of each stage")
	_, row, _ := strings.Cut(perStage, "| score |")
	row, _, _ = strings.Cut(row, "\n")
	cells := strings.Split(strings.Trim(row, " |"), "|")
	if !ok || len(cells) != 5 {
		t.Fatalf("no per-stage row for score in:\n%s", text.String())
	}
	for i, stage := range []string{"fetch", "apply"} {
		if v, err := strconv.ParseFloat(strings.TrimSpace(cells[i]), 64); err != nil || !(v > 0 && v <= 1.05) {
			t.Errorf("score: busiest %s goroutine's share %q, want in (0, 1]", stage, cells[i])
		}
	}
}
