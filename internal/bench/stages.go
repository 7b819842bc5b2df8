package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Stage CPU: with Config.Stages each measured run is CPU-profiled on its
// own, and its samples summed by the goroutine labels the service sets
// (stream/internal/stage: stage=fetch partition=N, stage=apply partition=N,
// stage=publish, stage=calibration, stage=checkpoint) and the bench's
// embedded broker's (stage=broker; its request loop stage=broker
// goroutine=loop): the CPU of each goroutine of the events' path, of the
// broker, and of the rest of the process (the clients' own goroutines,
// the collector). A
// goroutine whose CPU over the run's elapsed time is near 1 is saturated:
// it bounds the events/s whatever the cores.

// brokerLoop tells the embedded broker's request loop (kfake's Cluster.run:
// one goroutine handles every request of every client, in turn) apart
// from its connections' goroutines, which share its label stage=broker:
// stage=broker goroutine=loop. With many cores, a loop near 1.00 of a
// run is what bounds the broker's events/s.
var brokerLoop = map[string]string{"github.com/twmb/franz-go/pkg/kfake.(*Cluster).run": "loop"}

// GoroutineCPU is the CPU a labelled goroutine (or the set of goroutines
// sharing its labels) used over a run.
type GoroutineCPU struct {
	Labels string        // "stage=apply shard=" (sorted key=value pairs); "" for samples without a stage
	CPU    time.Duration // from the profile's samples (10 ms each at the default rate)
}

// StageCPU sums a run's GoroutineCPU by stage (stage "" for the rest).
func StageCPU(gs []GoroutineCPU) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, g := range gs {
		out[labelValue(g.Labels, "stage")] += g.CPU
	}
	return out
}

// labelValue is the value of key in labels ("k=v k2=v2"), "" if absent.
func labelValue(labels, key string) string {
	for _, kv := range strings.Fields(labels) {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// cpuByGoroutineLabels sums the CPU time of a CPU profile (runtime/pprof's
// gzipped protocol buffer) by the values of the labels keys its samples
// carry (samples without keys[0] are summed under ""), largest first. A
// labelled sample whose outermost frame (the function its goroutine
// started in) is a key of roots gets the label goroutine=roots[that
// function] too: one goroutine told apart from the others that share its
// labels (the embedded broker's request loop among its connections').
// It reads the profile.proto fields it needs by hand: this module has no
// dependency that parses profiles.
func cpuByGoroutineLabels(profile []byte, keys []string, roots map[string]string) ([]GoroutineCPU, error) {
	zr, err := gzip.NewReader(bytes.NewReader(profile))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	type label struct{ key, str int64 }
	type sample struct {
		values    []uint64
		labels    []label
		locations []uint64 // the stack's location ids, the leaf first
	}
	var strs []string
	var types []int64 // sample_type's type string index, per value
	var samples []sample
	outer := map[uint64]uint64{} // location id → the function id of its outermost line
	funcs := map[uint64]int64{}  // function id → its name's string index
	err = fields(raw, func(num int, wire int, v uint64, b []byte) error {
		switch {
		case num == 1 && wire == 2: // sample_type: ValueType{type = 1, unit = 2}
			var t int64
			if err := fields(b, func(n, w int, v uint64, _ []byte) error {
				if n == 1 && w == 0 {
					t = int64(v)
				}
				return nil
			}); err != nil {
				return err
			}
			types = append(types, t)
		case num == 2 && wire == 2: // sample: location_id = 1, value = 2, label = 3
			var s sample
			if err := fields(b, func(n, w int, v uint64, bb []byte) error {
				var err error
				switch {
				case n == 1:
					s.locations, err = appendRepeated(s.locations, w, v, bb)
				case n == 2:
					s.values, err = appendRepeated(s.values, w, v, bb)
				case n == 3 && w == 2: // Label{key = 1, str = 2}
					var l label
					if err := fields(bb, func(n, w int, v uint64, _ []byte) error {
						switch {
						case n == 1 && w == 0:
							l.key = int64(v)
						case n == 2 && w == 0:
							l.str = int64(v)
						}
						return nil
					}); err != nil {
						return err
					}
					s.labels = append(s.labels, l)
				}
				return err
			}); err != nil {
				return err
			}
			samples = append(samples, s)
		case num == 4 && wire == 2 && len(roots) > 0: // location: id = 1, line = 4 (Line{function_id = 1}), the outermost last
			var id, fn uint64
			err := fields(b, func(n, w int, v uint64, bb []byte) error {
				switch {
				case n == 1 && w == 0:
					id = v
				case n == 4 && w == 2:
					return fields(bb, func(n, w int, v uint64, _ []byte) error {
						if n == 1 && w == 0 {
							fn = v
						}
						return nil
					})
				}
				return nil
			})
			if err != nil {
				return err
			}
			outer[id] = fn
		case num == 5 && wire == 2 && len(roots) > 0: // function: id = 1, name = 2
			var id uint64
			var name int64
			err := fields(b, func(n, w int, v uint64, _ []byte) error {
				switch {
				case n == 1 && w == 0:
					id = v
				case n == 2 && w == 0:
					name = int64(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			funcs[id] = name
		case num == 6 && wire == 2: // string_table
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	cpu := -1
	for i, t := range types {
		if str(t) == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, errors.New("profile: no cpu values (not a CPU profile)")
	}
	sums := map[string]int64{}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		var parts []string
		for _, k := range keys {
			for _, l := range s.labels {
				if str(l.key) == k {
					parts = append(parts, k+"="+str(l.str))
				}
			}
		}
		if len(parts) == 0 || !strings.HasPrefix(parts[0], keys[0]+"=") {
			parts = nil
		}
		if n := len(s.locations); n > 0 && parts != nil {
			if g, ok := roots[str(funcs[outer[s.locations[n-1]]])]; ok {
				parts = append(parts, "goroutine="+g)
			}
		}
		sums[strings.Join(parts, " ")] += int64(s.values[cpu])
	}
	out := make([]GoroutineCPU, 0, len(sums))
	for l, ns := range sums {
		out = append(out, GoroutineCPU{Labels: l, CPU: time.Duration(ns)})
	}
	slices.SortFunc(out, func(a, b GoroutineCPU) int {
		if a.CPU != b.CPU {
			return int(b.CPU - a.CPU)
		}
		return strings.Compare(a.Labels, b.Labels)
	})
	return out, nil
}

// appendRepeated appends an occurrence of a repeated varint field to
// dst: its value v (wire 0), or the values packed in b (wire 2).
func appendRepeated(dst []uint64, wire int, v uint64, b []byte) ([]uint64, error) {
	switch wire {
	case 0:
		return append(dst, v), nil
	case 2:
		return appendPacked(dst, b)
	}
	return dst, nil
}

// appendPacked appends the varints of a packed repeated field to dst.
func appendPacked(dst []uint64, b []byte) ([]uint64, error) {
	for len(b) > 0 {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return dst, errors.New("bad packed value")
		}
		dst = append(dst, x)
		b = b[k:]
	}
	return dst, nil
}

// fields calls f with each field of the protocol buffer message b: its
// number, wire type, the value of a varint (wire 0) and the bytes of a
// length-delimited one (wire 2). Fixed-width fields are skipped.
func fields(b []byte, f func(num, wire int, v uint64, bytes []byte) error) error {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad tag")
		}
		b = b[n:]
		num, wire := int(tag>>3), int(tag&7)
		switch wire {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return errors.New("bad varint")
			}
			b = b[n:]
			if err := f(num, wire, v, nil); err != nil {
				return err
			}
		case 1:
			if len(b) < 8 {
				return errors.New("short fixed64")
			}
			b = b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return errors.New("bad length")
			}
			if err := f(num, wire, 0, b[n:n+int(l)]); err != nil {
				return err
			}
			b = b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return errors.New("short fixed32")
			}
			b = b[4:]
		default:
			return fmt.Errorf("wire type %d", wire)
		}
	}
	return nil
}
