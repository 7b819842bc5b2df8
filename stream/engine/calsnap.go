package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/snapshot"
)

// A model's calibration is saved with an instance-scope shard's snapshot,
// one entry per calibrated model (CalibrationStateType, named
// CalibrationName(model), the model's fingerprint): the window's pairs,
// oldest first, how many pairs it was ever given, the labels' range and,
// for an ordinal model, the (level, label) pairs of its expected labels.
// The capture runs under the shard's exclusive lock, and an event's pair
// enters the window under the shard's lock too (judging, Shard.EndRun), so
// the saved window holds exactly the pairs of the events before the
// snapshot's offsets. A restore loads it and fits the table at once: the
// first records after a restart carry the certainty they would have
// carried without it, where the window used to start empty and records
// had none until calibration.every labelled events were paired again.
//
// Not saved: the live check's ring of published certainties (the
// streamer_calibration_* gauges start again from the restart) and, in
// partition scope, anything: there the calibration is the instance's,
// over the partitions it holds now, and a partition's snapshot cannot
// carry it without the other partitions' pairs beyond their own offsets.

// CalibrationStateType is the type of a snapshot entry that holds a
// model's calibration.
const CalibrationStateType = "calibration"

// CalibrationName is the name of the snapshot entry that holds model's
// calibration. (A model's name cannot contain ':'.)
func CalibrationName(model string) string { return "calibration:" + model }

// calibrationFormat is the version of the entry's encoding.
const calibrationFormat = 1

// calState is a decoded calibration entry.
type calState struct {
	kind   online.Kind
	added  int64
	seen   bool
	lo, hi float64
	pairs  []calibrate.Pair
	levels []levelLabel // ordinal: oldest first
}

type levelLabel struct {
	level int32
	raw   float64
}

// captureCalibration adds the calibrated models' entries to c (instance
// scope only; the caller holds the shard's lock).
func (s *Shard) captureCalibration(c *Checkpoint) {
	if s.scope != "" {
		return
	}
	for _, m := range s.models {
		cal := m.def.cal
		if cal == nil {
			continue
		}
		c.Models = append(c.Models, snapshot.Model{Name: CalibrationName(m.def.name), Type: CalibrationStateType,
			Fingerprint: m.def.fingerprint, Data: cal.encode()})
		c.deltas = append(c.deltas, nil)
		c.holders = append(c.holders, nil)
	}
}

// encode encodes c's window, count, range and level pairs.
func (c *calibration) encode() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	pairs := c.win.CopyTo(nil)
	var levels []levelLabel
	if m := c.means; m != nil {
		start := 0
		if m.n == len(m.lv) {
			start = m.next
		}
		for i := range m.n {
			k := (start + i) % len(m.lv)
			levels = append(levels, levelLabel{m.lv[k], m.raw[k]})
		}
	}
	b := make([]byte, 0, 3+3*8+4+16*len(pairs)+4+12*len(levels))
	b = append(b, calibrationFormat, byte(c.kind), b2b(c.seen))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.win.Added()))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.lo))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.hi))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(pairs)))
	for _, p := range pairs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Score))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Y))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(levels)))
	for _, l := range levels {
		b = binary.LittleEndian.AppendUint32(b, uint32(l.level))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l.raw))
	}
	return b
}

func b2b(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// errCalibration is wrapped by the errors of decodeCalibration.
var errCalibration = errors.New("calibration entry")

// decodeCalibration decodes an entry of captureCalibration's.
func decodeCalibration(b []byte) (*calState, error) {
	if len(b) < 3+3*8+4 {
		return nil, fmt.Errorf("%w: %d bytes, too short", errCalibration, len(b))
	}
	if b[0] != calibrationFormat {
		return nil, fmt.Errorf("%w: format %d, want %d", errCalibration, b[0], calibrationFormat)
	}
	st := &calState{kind: online.Kind(b[1]), seen: b[2] == 1}
	u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
	st.added = int64(u64(3))
	st.lo, st.hi = math.Float64frombits(u64(11)), math.Float64frombits(u64(19))
	i := 27
	n := int(binary.LittleEndian.Uint32(b[i:]))
	i += 4
	if n < 0 || len(b)-i < 16*n+4 {
		return nil, fmt.Errorf("%w: %d pairs in %d bytes", errCalibration, n, len(b)-i)
	}
	st.pairs = make([]calibrate.Pair, n)
	for k := range st.pairs {
		st.pairs[k] = calibrate.Pair{Score: math.Float64frombits(u64(i)), Y: math.Float64frombits(u64(i + 8))}
		i += 16
	}
	m := int(binary.LittleEndian.Uint32(b[i:]))
	i += 4
	if m < 0 || len(b)-i != 12*m {
		return nil, fmt.Errorf("%w: %d level pairs in %d bytes", errCalibration, m, len(b)-i)
	}
	st.levels = make([]levelLabel, m)
	for k := range st.levels {
		st.levels[k] = levelLabel{int32(binary.LittleEndian.Uint32(b[i:])), math.Float64frombits(u64(i + 4))}
		i += 12
	}
	if st.added < int64(n) {
		return nil, fmt.Errorf("%w: %d pairs given, %d held", errCalibration, st.added, n)
	}
	return st, nil
}

// CalibrationSummary describes a calibration entry's data: the pairs it
// holds and how many the window was given.
func CalibrationSummary(data []byte) (pairs int, added int64, err error) {
	st, err := decodeCalibration(data)
	if err != nil {
		return 0, 0, err
	}
	return len(st.pairs), st.added, nil
}

// restoreCalibration loads the calibration entries of byName (removed
// from it, those of models no longer configured included) into the
// models' calibrations and fits their tables: an entry of a model that
// starts empty (fresh), of another fingerprint or kind, or that does not
// decode, is skipped (the calibration starts empty, as it did before
// calibrations were saved; a decoding error is logged).
func (s *Shard) restoreCalibration(byName map[string]snapshot.Model, fresh []string) {
	for _, m := range s.models {
		d := m.def
		sv, ok := byName[CalibrationName(d.name)]
		if !ok || d.cal == nil || sv.Fingerprint != d.fingerprint || slices.Contains(fresh, d.name) {
			continue
		}
		st, err := decodeCalibration(sv.Data)
		if err == nil && st.kind != d.cal.kind {
			err = fmt.Errorf("%w: of a %v model, this one is %v", errCalibration, st.kind, d.cal.kind)
		}
		if err != nil {
			if l := s.e.cfg.Log; l != nil {
				l.Warn("restore: the model's calibration starts empty", "model", d.name, "err", err)
			}
			continue
		}
		d.cal.load(st)
	}
	maps.DeleteFunc(byName, func(_ string, sv snapshot.Model) bool { return sv.Type == CalibrationStateType })
}

// load sets c's window, count, range and level pairs to st's, unless c
// has been given pairs already, and fits its table at once.
func (c *calibration) load(st *calState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.win.Added() > 0 {
		return
	}
	c.win.Load(st.pairs, st.added)
	c.seen, c.lo, c.hi = st.seen, st.lo, st.hi
	if c.means != nil {
		for _, l := range st.levels {
			c.means.add(int(l.level), l.raw)
		}
	}
	c.fitNow()
}

// fitNow fits c's table on its window, on the caller's goroutine, and sets
// an ordinal model's expected labels (c.mu held): what the next refit would
// have fitted. A fit already running keeps its turn.
func (c *calibration) fitNow() {
	if c.means != nil {
		c.exp.Store(c.means.table())
	}
	if c.win.Len() == 0 || !c.fitting.CompareAndSwap(false, true) {
		return
	}
	pairs, first, lo, hi := c.fitInput()
	c.fit(pairs, first, lo, hi, true)
}
