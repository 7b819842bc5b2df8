package main

// An example model type, to show what adding one takes: this file (its
// parameters, validation, construction, encoding and restore: about 130
// lines of code), its test (TestExampleType below) and one registration
// line — here
// `append(newModelTypes().Types(), centroidType())`, in the service
// `centroidType(),` in newModelTypes. Nothing else in the codebase names it:
// the configuration decodes its key, the conformance suite, eval and the
// snapshot tools take it from the registry.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/eval"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/codec"
	"github.com/streamer/streamer/online/onlinetest"
)

// centroidParams are the parameters of type "centroid": its one key.
type centroidParams struct {
	// Shrink pulls both class means towards their average, in [0, 1).
	Shrink float64 `yaml:"shrink"`
}

func (p *centroidParams) Validate(int) error {
	if !(p.Shrink >= 0 && p.Shrink < 1) {
		return &online.SpecError{Field: "shrink", Problem: fmt.Sprintf("must be in [0, 1), got %v", p.Shrink)}
	}
	return nil
}

func centroidType() *online.Type {
	return online.Define(online.Def[centroidParams]{
		Name:     "centroid",
		Doc:      "example: nearest class mean",
		Defaults: func() centroidParams { return centroidParams{} },
		Traits:   func(*centroidParams) online.Traits { return online.Traits{Kind: online.Classifier} },
		New:      func(dim int, p *centroidParams) (online.Model, error) { return newCentroid(dim, *p), nil },
		Restore:  online.RestoreNew[centroid],
		Examples: func() []centroidParams { return []centroidParams{{}, {Shrink: 0.5}} },
	})
}

// centroid scores f(x) = <a − b, x> − (‖a‖² − ‖b‖²)/2, the class means a, b
// shrunk towards their average: positive when x is nearer a.
type centroid struct {
	p     centroidParams
	dim   int
	n     [2]int64     // −1, +1
	sum   [2][]float64 // Σ x per class
	ok    bool         // both classes seen
	scale [2]float64   // 1/n per class
}

func newCentroid(dim int, p centroidParams) *centroid {
	return &centroid{p: p, dim: dim, sum: [2][]float64{make([]float64, dim), make([]float64, dim)}}
}

func (m *centroid) Type() string    { return "centroid" }
func (m *centroid) Dim() int        { return m.dim }
func (m *centroid) Examples() int64 { return m.n[0] + m.n[1] }
func (m *centroid) Version() int64  { return 1 }

func (m *centroid) Label(v float64) (float64, bool) {
	switch v {
	case 1:
		return 1, true
	case -1, 0:
		return -1, true
	}
	return 0, false
}

func (m *centroid) Observe(x []float64, y float64, labelled bool) online.Prediction {
	if len(x) != m.dim {
		panic("centroid: Observe: wrong dimension")
	}
	var p online.Prediction
	p.N = m.Examples()
	finite := true
	if m.ok {
		s := m.p.Shrink / 2
		var f, na, nb float64
		for i, xi := range x {
			finite = finite && !math.IsNaN(xi) && !math.IsInf(xi, 0)
			mb, ma := m.sum[0][i]*m.scale[0], m.sum[1][i]*m.scale[1]
			a, b := (1-s)*ma+s*mb, (1-s)*mb+s*ma
			f += (a - b) * xi
			na, nb = na+a*a, nb+b*b
		}
		if f -= (na - nb) / 2; finite && !math.IsNaN(f) && !math.IsInf(f, 0) {
			p.Score = f
			p.Label = int(math.Copysign(1, f))
		}
	}
	for _, xi := range x {
		finite = finite && !math.IsNaN(xi) && math.Abs(xi) < 1e150
	}
	if labelled && finite {
		k := 0
		if y > 0 {
			k = 1
		}
		m.n[k]++
		for i, xi := range x {
			m.sum[k][i] += xi
		}
		m.refresh()
	}
	return p
}

func (m *centroid) refresh() {
	m.ok = m.n[0] > 0 && m.n[1] > 0
	for k := range m.n {
		m.scale[k] = 0
		if m.n[k] > 0 {
			m.scale[k] = 1 / float64(m.n[k])
		}
	}
}

func (m *centroid) MarshalBinary() ([]byte, error) {
	b := online.AppendHeader(nil, "centroid", &m.p, m.dim)
	b = codec.AppendI64(b, m.n[0])
	b = codec.AppendI64(b, m.n[1])
	return codec.AppendF64s(codec.AppendF64s(b, m.sum[0]), m.sum[1]), nil
}

func (m *centroid) UnmarshalBinary(b []byte) error {
	var p centroidParams
	dim, r := online.ReadHeader(b, "centroid", &p, nil)
	if r.Err() == nil && (dim < 1 || dim > 1<<20 || p.Validate(dim) != nil) {
		r.Failf("parameters %+v, dimension %d", p, dim)
	}
	nm := newCentroid(max(0, min(dim, 1<<20)), p)
	nm.n = [2]int64{r.I64(), r.I64()}
	if r.Need(16*nm.dim) && (nm.n[0] < 0 || nm.n[1] < 0) {
		r.Failf("counts %v", nm.n)
	}
	r.F64s(nm.sum[0])
	r.F64s(nm.sum[1])
	if err := r.End(); err != nil {
		return err
	}
	nm.refresh()
	*m = *nm
	return nil
}

// TestExampleType registers the example type beside the service's and
// runs it through everything a type gets by registration.
func TestExampleType(t *testing.T) {
	types := online.MustRegistry(append(newModelTypes().Types(), centroidType())...)

	t.Run("conformance", func(t *testing.T) { onlinetest.RunType(t, types, types.Lookup("centroid")) })

	t.Run("config", func(t *testing.T) {
		doc := "models:\n  - name: c\n    type: centroid\n    features: {dim: 2}\n    shrink: %s\n"
		cfg, err := config.Parse(fmt.Appendf(nil, doc, "0.25"), nil, types)
		if err != nil {
			t.Fatal(err)
		}
		if p := cfg.Models[0].Params.(*centroidParams); p.Shrink != 0.25 {
			t.Fatalf("decoded %+v", p)
		}
		other, _ := config.Parse(fmt.Appendf(nil, doc, "0.5"), nil, types)
		if other.Models[0].Fingerprint() == cfg.Models[0].Fingerprint() {
			t.Error("the new key does not change the fingerprint")
		}
		for value, want := range map[string]string{
			"2":    "config: models[0].shrink: must be in [0, 1), got 2 (line 5)",
			"lots": `config: models[0].shrink: "lots" is not a number (line 5)`,
		} {
			if _, err := config.Parse(fmt.Appendf(nil, doc, value), nil, types); err == nil || err.Error() != want {
				t.Errorf("shrink: %s: %v, want %s", value, err, want)
			}
		}
		_, err = config.Parse([]byte("models:\n  - {name: c, type: centroid, features: {dim: 2}, balance: true}\n"), nil, types)
		if err == nil || !strings.Contains(err.Error(), "models[0].balance: does not apply to model type centroid (it takes: name, type, features, scope, max_keys, label, fallback, residual, shrink)") {
			t.Errorf("a key of another type: %v", err)
		}
	})

	t.Run("eval", func(t *testing.T) {
		cfg, err := config.Parse([]byte("models:\n  - {name: c, type: centroid, features: {dim: 2}, shrink: 0.1}\n"), nil, types)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := eval.Run(context.Background(), cfg, types, eval.Options{Data: "../../eval/testdata/ripley_train.csv", Test: "../../eval/testdata/ripley_test.csv"})
		if err != nil {
			t.Fatal(err)
		}
		e := *rep.Models["c"].Holdout.Error
		t.Logf("nearest class mean on Ripley's test set: %.1f%% error", 100*e)
		if e > 0.3 {
			t.Errorf("test error %.3f", e)
		}
	})
}
