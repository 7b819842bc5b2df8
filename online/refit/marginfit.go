package refit

import (
	"math"

	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/svm"
)

// marginStats are what a large-margin fit (svm, lowrank) keeps of its
// training window for Corollary 1's clipped-margin bound.
type marginStats struct {
	avgClip float64 // (1/n) Σ g(yᵢ f(xᵢ)) over the training window
	w       float64 // the norm of the fitted weights (‖w‖, ‖U Vᵀ‖_F)
	tr      float64 // tr Ω of the window
	n       int
	delta   float64
}

// Bound is the certainty bound at margin rho (clipped at 1).
func (s *marginStats) Bound(rho float64) float64 {
	return svm.ClippedMarginBound(s.avgClip, s.w, s.tr, float64(s.n), s.delta, math.Min(rho, 1))
}

// The encoding of a large-margin fit (package online/codec's
// conventions): magic, u16 version, n u32, delta, avgClip, w, tr float64,
// the model as a frame (u32 length + its encoding), the probability's H
// u32 (0 = none), then H−1 model frames.

// appendFunc appends an encoding (a model's AppendBinary).
type appendFunc = func([]byte) ([]byte, error)

// appendMarginFit encodes a fit with its model m and, when h ≥ 2, the
// probability's weighted models probs.
func appendMarginFit(magic string, version uint16, s *marginStats, m appendFunc, h int, probs []appendFunc) ([]byte, error) {
	dst := append(make([]byte, 0, 512), magic...)
	dst = codec.AppendU16(dst, version)
	dst = codec.AppendU32(dst, uint32(s.n))
	for _, v := range []float64{s.delta, s.avgClip, s.w, s.tr} {
		dst = codec.AppendF64(dst, v)
	}
	dst, err := codec.AppendFrame(dst, m)
	if err != nil {
		return nil, err
	}
	dst = codec.AppendU32(dst, uint32(h))
	for _, p := range probs {
		if dst, err = codec.AppendFrame(dst, p); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// readMarginHead reads what appendMarginFit writes before the model
// frame; failures are recorded in r, naming typ.
func readMarginHead(r *codec.Reader, typ, magic string, version uint16) marginStats {
	if got := r.Take(len(magic)); r.Err() == nil && string(got) != magic {
		r.Failf("refit: %s: bad magic %q", typ, got)
	}
	if v := r.U16(); r.Err() == nil && v != version {
		r.Failf("refit: %s: format version %d (this build reads %d)", typ, v, version)
	}
	s := marginStats{n: int(r.U32())}
	for _, p := range []*float64{&s.delta, &s.avgClip, &s.w, &s.tr} {
		*p = r.F64()
	}
	return s
}

// readProbLevels reads the probability's H after the model frame: 0 for
// none, else in 2..maxProbLevels (failures recorded in r).
func readProbLevels(r *codec.Reader, typ string) int {
	h := int(r.U32())
	if h != 0 && r.Err() == nil && (h < 2 || h > maxProbLevels) {
		r.Failf("refit: %s: probability levels %d (2..%d)", typ, h, maxProbLevels)
	}
	if r.Err() != nil {
		return 0
	}
	return h
}
