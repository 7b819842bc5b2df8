package online

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/streamer/streamer/online/internal/legacytest"
	"github.com/streamer/streamer/online/internal/vmath"
)

// toLegacyPred is p as the manifest records predictions.
func toLegacyPred(p Prediction) legacytest.Pred {
	return legacytest.Pred{Score: p.Score, Label: p.Label, MistakeBound: p.MistakeBound, HasBound: p.HasBound,
		Probability: p.Probability, HasProbability: p.HasProbability, N: p.N, Version: p.Version}
}

// TestLegacyV1: the version-1 encodings written before the model registry
// (testdata/legacy) restore through the registry into models of the same
// type, dimension and number of examples that make the recorded
// predictions on the recorded inputs; re-encoded (version 2) and restored
// again, they still do. The refitted models of the directory (svm,
// lsrrank, mlsrrank, krr, rfrank) are tested with their package.
//
// The predictions are bit-identical except for mam (not in the exact
// kernel mode) and omam with random features, whose kernels changed since
// the recording: the MAM's sums run in eight lanes with FMA (its scores
// within 1e-9 relative of the recorded ones), and random-feature maps store
// their frequencies in float32, which moves the map by the bound of
// legacyTolerance (1e-7 to 1e-5 absolute on these inputs).
func TestLegacyV1(t *testing.T) {
	dir := filepath.Join("testdata", "legacy")
	entries := legacytest.Load(t, dir)
	tested := map[string]int{}
	worst := map[string][2]float64{} // max |Δ score| and max tolerance
	defer func() {
		for name, w := range worst {
			t.Logf("%s: scores within %.3g of the recorded ones (bound %.3g + 1e-9 relative)", name, w[0], w[1])
		}
	}()
	for _, e := range entries {
		switch e.Type {
		case MAMName, OMAMName, LogisticName, LDAName:
		default:
			continue
		}
		tested[e.Type]++
		t.Run(e.Name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, e.File))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 6 || string(b[:4]) != formatMagic || binary.LittleEndian.Uint16(b[4:]) != legacyVersion1 {
				t.Fatalf("%s is not a version-1 encoding", e.File)
			}
			if len(e.Inputs) != 8 || len(e.Predictions) != len(e.Inputs) {
				t.Fatalf("manifest: %d inputs, %d predictions", len(e.Inputs), len(e.Predictions))
			}
			m, err := testTypes.Restore(b)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			check := func(what string, m Model) {
				t.Helper()
				if m.Type() != e.Type || m.Dim() != e.Dim || m.Examples() != e.Examples {
					t.Fatalf("%s: type %q dim %d examples %d, want %q %d %d", what, m.Type(), m.Dim(), m.Examples(), e.Type, e.Dim, e.Examples)
				}
				if _, std := m.(*Standardized); std != e.Standardize {
					t.Fatalf("%s: %T, standardize %v", what, m, e.Standardize)
				}
			}
			check("restored", m)
			// The parameters are those the configuration gives today.
			if got, want := modelParams(m), legacyConfigParams(t, e); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored parameters %+v, the configuration gives %+v", got, want)
			}
			// Version 2 of the same state, before the replay changes it.
			enc, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if binary.LittleEndian.Uint16(enc[4:]) != formatVersion {
				t.Fatalf("re-encoded as version %d", binary.LittleEndian.Uint16(enc[4:]))
			}
			m2, err := testTypes.Restore(enc)
			if err != nil {
				t.Fatalf("Restore of the re-encoding: %v", err)
			}
			check("re-encoded", m2)
			if err := StateClose(m, m2, 0); err != nil {
				t.Fatalf("re-encoded state: %v", err)
			}
			if enc2, _ := m2.MarshalBinary(); !bytes.Equal(enc, enc2) {
				t.Fatal("the version-2 re-encoding does not re-encode to itself")
			}
			for i, x := range e.Inputs {
				want := e.Predictions[i]
				tol, moved := legacyTolerance(m, x)
				got := toLegacyPred(m.Observe(x, 0, false))
				if !legacyClose(got, want, tol, moved) {
					t.Errorf("prediction %d: %+v, recorded %+v (tolerance %.3g)", i, got, want, tol)
				}
				if got := toLegacyPred(m2.Observe(x, 0, false)); !legacyClose(got, want, tol, moved) {
					t.Errorf("prediction %d after re-encoding: %+v, recorded %+v (tolerance %.3g)", i, got, want, tol)
				}
				if moved {
					w := worst[e.Name]
					worst[e.Name] = [2]float64{max(w[0], math.Abs(got.Score-want.Score)), max(w[1], tol)}
				}
			}
			// UnmarshalBinary of the legacy bytes into a configured model
			// of the same type replaces it with the same state.
			into := m2
			if err := into.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if again, _ := into.MarshalBinary(); !bytes.Equal(again, enc) {
				t.Fatal("UnmarshalBinary of the version-1 bytes differs from Restore")
			}
		})
	}
	for _, typ := range []string{MAMName, OMAMName, LogisticName, LDAName} {
		if tested[typ] == 0 {
			t.Errorf("no legacy encoding of type %s in the manifest", typ)
		}
	}
}

// legacyConfigParams returns the parameters (a value of the type's
// parameter struct) of the model configured by the entry, decoded as the
// configuration does and completed.
func legacyConfigParams(t *testing.T, e legacytest.Entry) any {
	t.Helper()
	p := testTypes.Lookup(e.Type).NewParams()
	given := e.DecodeParams(t, p)
	if c, ok := p.(Completer); ok {
		c.Complete(e.Dim, given)
	}
	if err := p.Validate(e.Dim); err != nil {
		t.Fatalf("manifest yaml: %v", err)
	}
	return reflect.ValueOf(p).Elem().Interface()
}

// legacyTolerance returns how far m's score of x may be from the one
// recorded (before the change of the kernels, see TestLegacyV1), moved
// false when it must be bit-identical. Call it before m.Observe(x): a
// Standardized wrapper moves on. The bounds, with δ(x) = 2⁻²⁴·argBound(x)
// ≥ ‖φ(x) − φ_recorded(x)‖ (TestProjectFloat32):
//
//   - mam, restored sums unchanged: f = (<w, φ> + b)·k with ‖w‖·k ≤ 1, so
//     |Δf| ≤ δ(x); plus 1e-9 relative for the sums' new order.
//   - mam with a window, learned again with the new map (relearnWindow):
//     each class mean moves by at most δ_w = max_i δ(x_i) over the window,
//     w by 2δ_w and b by (‖μ₊‖ + ‖μ₋‖)δ_w + δ_w² ≤ 2.1δ_w, so |Δf| ≤
//     (δ(x) + 4.1δ_w)/(√2‖w̃‖) + |f|·4.1δ_w/‖w̃‖ with ‖w̃‖ = sqrt(‖w‖² +
//     b²), below 5·max(δ(x), δ_w)·(1 + |f|)/‖w̃‖.
//   - omam with random features, normalised: s = <w, φ>/(W·<T, φ>) moves by
//     at most (‖w‖ + |s|·W·‖T‖)·δ(x)/(W·(|<T, φ>| − ‖T‖δ(x))); raw: s =
//     <w, φ>·k, by ‖w‖·k·δ(x).
func legacyTolerance(m Model, x []float64) (tol float64, moved bool) {
	if s, ok := m.(*Standardized); ok {
		mean, inv := make([]float64, len(x)), make([]float64, len(x))
		s.Transform(mean, inv)
		z := make([]float64, len(x))
		for i := range x {
			z[i] = (x[i] - mean[i]) * inv[i]
		}
		x, m = z, s.Inner()
	}
	switch m := m.(type) {
	case *MAM:
		delta := 0x1p-24 * (1 + 1e-9) * m.fm.argBound(x)
		if m.ring == nil {
			return delta, true
		}
		dw := 0.0
		for i := range int(m.n) {
			dw = max(dw, 0x1p-24*(1+1e-9)*m.fm.argBound(m.ring[i*m.dim:(i+1)*m.dim]))
		}
		wt := math.Sqrt(vmath.Dot(m.w, m.w) + m.b*m.b)
		phi := make([]float64, m.fm.Dim())
		m.fm.Map(phi, x)
		f := math.Abs(m.score(phi))
		return 5 * max(delta, dw) * (1 + f) / wt, true
	case *OMAM:
		if m.fm.omega == nil {
			return 0, false
		}
		delta := 0x1p-24 * (1 + 1e-9) * m.fm.argBound(x)
		phi := make([]float64, m.fm.Dim())
		m.fm.Map(phi, x)
		m.syncDense() // w and T: derived by the first dense score
		nw := math.Sqrt(dot(m.w, m.w))
		if !m.par.Normalize {
			return nw * m.k * delta, true
		}
		nt, den := math.Sqrt(dot(m.tot, m.tot)), math.Abs(dot(m.tot, phi))
		s := math.Abs(m.score(phi))
		return (nw + s*m.total*nt) * delta / (m.total * (den - nt*delta)), true
	}
	return 0, false
}

// legacyClose compares a prediction with the recorded one: bit for bit
// unless moved; then the score within tol plus 1e-9 relative, the bound
// within as much (it is 1-Lipschitz in the score's magnitude where it is
// below 1), the label the same unless the recorded score was within the
// tolerance of a level's threshold (of 0 for a classifier), the rest equal.
func legacyClose(got, want legacytest.Pred, tol float64, moved bool) bool {
	if !moved {
		return got.Same(want)
	}
	tol += 1e-9*math.Abs(want.Score) + 1e-15
	if !(math.Abs(got.Score-want.Score) <= tol) || !(math.Abs(got.MistakeBound-want.MistakeBound) <= tol+1e-9) {
		return false
	}
	if got.Label != want.Label && !(math.Abs(want.Score) <= tol || want.Label != -1 && want.Label != 1) {
		return false
	}
	return got.HasBound == want.HasBound && got.N == want.N && got.Version == want.Version &&
		got.HasProbability == want.HasProbability && got.Probability == want.Probability
}
