package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
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
// (values and location ids packed, labels as string indices, locations and
// functions after the samples, then the string table; a fixed64 field to
// skip) is summed by its labels' values, the samples without a stage under
// "", and a labelled sample whose stack starts in a root function gets
// that root's goroutine label (the outermost line of its outermost
// location: inlined frames come first).
func TestCPUByGoroutineLabels(t *testing.T) {
	strs := []string{"", "samples", "count", "cpu", "nanoseconds", "stage", "apply", "shard", "instance", "fetch", "partition", "0", "1",
		"broker", "pkg.loop", "pkg.handle", "pkg.read", "pkg.inlined"}
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
	// stackSample is a sample whose stack is the locations locs, the leaf
	// first.
	stackSample := func(cpu uint64, locs []uint64, labels ...[]byte) []byte {
		var packed, ids []byte
		packed = binary.AppendUvarint(packed, 1)
		packed = binary.AppendUvarint(packed, cpu)
		for _, l := range locs {
			ids = binary.AppendUvarint(ids, l)
		}
		s := pb(nil).bytes(1, ids).bytes(2, packed)
		for _, l := range labels {
			s = s.bytes(3, l)
		}
		return s
	}
	sample := func(cpu uint64, labels ...[]byte) []byte { return stackSample(cpu, []uint64{7}, labels...) }
	// Functions 1–4: loop, handle, read, inlined; locations 7 (handle),
	// 8 (loop), 9 (read), 10 (inlined into read: outermost read).
	function := func(id uint64, name string) []byte { return pb(nil).varint(1, id).varint(2, idx(name)) }
	location := func(id uint64, fns ...uint64) []byte {
		l := pb(nil).varint(1, id).varint(2, 0x4000)
		for _, f := range fns {
			l = l.bytes(4, pb(nil).varint(1, f).varint(2, 10))
		}
		return l
	}
	broker := label("stage", "broker")
	var p pb
	p = p.bytes(1, pb(nil).varint(1, idx("samples")).varint(2, idx("count")))
	p = p.bytes(1, pb(nil).varint(1, idx("cpu")).varint(2, idx("nanoseconds")))
	p = p.bytes(2, sample(30e6, label("stage", "apply"), label("shard", "instance")))
	p = p.bytes(2, sample(10e6, label("stage", "apply"), label("shard", "instance")))
	p = p.bytes(2, sample(20e6, label("partition", "1"), label("stage", "fetch")))
	p = p.bytes(2, sample(10e6, label("stage", "fetch"), label("partition", "0")))
	p = p.bytes(2, sample(50e6))                               // no labels: the broker
	p = p.bytes(2, sample(5e6, label("partition", "0")))       // no stage: the rest too
	p = p.bytes(2, stackSample(70e6, []uint64{7, 8}, broker))  // handle, called by the loop
	p = p.bytes(2, stackSample(15e6, []uint64{8}, broker))     // the loop itself
	p = p.bytes(2, stackSample(25e6, []uint64{7, 10}, broker)) // a connection's reader (the inlined function's caller)
	p = p.bytes(2, stackSample(1e6, []uint64{8}))              // the loop's function, unlabelled: the rest
	p = append(binary.AppendUvarint(p, 9<<3|1), make([]byte, 8)...)
	for id, name := range map[uint64]string{1: "pkg.loop", 2: "pkg.handle", 3: "pkg.read", 4: "pkg.inlined"} {
		p = p.bytes(5, function(id, name))
	}
	p = p.bytes(4, location(7, 2)).bytes(4, location(8, 1)).bytes(4, location(9, 3)).bytes(4, location(10, 4, 3))
	for _, s := range strs {
		p = p.bytes(6, []byte(s))
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(p)
	zw.Close()
	got, err := cpuByGoroutineLabels(gz.Bytes(), []string{"stage", "partition", "shard"}, map[string]string{"pkg.loop": "loop", "pkg.inlined": "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	want := []GoroutineCPU{{"stage=broker goroutine=loop", 85 * time.Millisecond}, {"", 56 * time.Millisecond},
		{"stage=apply shard=instance", 40 * time.Millisecond}, {"stage=broker", 25 * time.Millisecond},
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
	if st["apply"] != 40*time.Millisecond || st["fetch"] != 30*time.Millisecond || st["broker"] != 110*time.Millisecond || st[""] != 56*time.Millisecond {
		t.Errorf("by stage %v", st)
	}
	// Without roots the loop is not told apart.
	got, err = cpuByGoroutineLabels(gz.Bytes(), []string{"stage", "partition", "shard"}, nil)
	if err != nil || got[0] != (GoroutineCPU{"stage=broker", 110 * time.Millisecond}) {
		t.Errorf("without roots: %v, %v", got, err)
	}
	if _, err := cpuByGoroutineLabels([]byte("not gzip"), []string{"stage"}, nil); err == nil {
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
	got, err := cpuByGoroutineLabels(prof.Bytes(), []string{"stage", "partition", "shard"}, nil)
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
// 10 ms sample in so short a run), and the embedded broker its request
// loop; the report prints the tables. Which goroutines get a sample in a
// run this short is chance (a CI run on a loaded host once found none in
// the broker's loop): a run that misses one is repeated, twice at most.
func TestBenchStages(t *testing.T) {
	var problems []string
	for attempt := 1; attempt <= 3; attempt++ {
		if problems = benchStages(t); len(problems) == 0 {
			return
		}
		t.Logf("run %d: %s", attempt, strings.Join(problems, "; "))
	}
	t.Errorf("three runs missed a stage; the last: %s", strings.Join(problems, "; "))
}

// benchStages runs TestBenchStages's bench once and returns what its
// report misses.
func benchStages(t *testing.T) []string {
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
	var problems, labels []string
	for _, g := range r.Goroutines {
		labels = append(labels, g.Labels)
	}
	for _, want := range []string{"stage=apply partition=", "stage=fetch partition=", "stage=broker goroutine=loop"} {
		found := false
		for _, l := range labels {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			problems = append(problems, fmt.Sprintf("score run: no CPU under %q (labels %q)", want, labels))
		}
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "| score |") || !strings.Contains(text.String(), "busiest goroutine") {
		t.Fatalf("report:\n%s", text.String())
	}
	// The per-stage table: the score run's fetchers and appliers were busy.
	_, perStage, ok := strings.Cut(text.String(), "The busiest goroutine of each stage")
	_, row, _ := strings.Cut(perStage, "| score |")
	row, _, _ = strings.Cut(row, "\n")
	cells := strings.Split(strings.Trim(row, " |"), "|")
	if !ok || len(cells) != 6 {
		t.Fatalf("no per-stage row for score in:\n%s", text.String())
	}
	for i, stage := range map[int]string{0: "fetch", 1: "apply", 5: "broker"} {
		if v, err := strconv.ParseFloat(strings.TrimSpace(cells[i]), 64); err != nil || !(v > 0 && v <= 1.05) {
			problems = append(problems, fmt.Sprintf("score: busiest %s goroutine's share %q, want in (0, 1]", stage, cells[i]))
		}
	}
	return problems
}
