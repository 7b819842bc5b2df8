package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/streamer/streamer/online/ope"
)

// TestOPECollector: the off-policy metrics are online/ope's estimators
// over the labelled first items (the window holding them all), and the
// window keeps the newest opeWindow.
func TestOPECollector(t *testing.T) {
	o := &opeStats{}
	rng := rand.New(rand.NewPCG(4, 5))
	var samples []ope.Sample
	for range 500 {
		m := opeMark{first: true, prop: 0.81, greedy: rng.Float64() < 0.8, predShown: rng.Float64(), predTop: rng.Float64()}
		if !m.greedy {
			m.prop = 0.01
		}
		r := float64(rng.IntN(2))
		o.add(m, r)
		samples = append(samples, ope.Sample{Reward: r, Prop: m.prop, Match: m.greedy, PredLogged: m.predShown, PredTarget: m.predTop})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newOPECollector(&Engine{ope: o, defs: []*modelDef{{name: "m"}}}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = value(m)
		}
	}
	for _, e := range ope.Estimators {
		want := ope.Estimate(e, samples)
		if v := got["streamer_ope_value,estimator="+e.String()+",policy=greedy"]; math.Abs(v-want) > 1e-12 {
			t.Errorf("%s: %v, want %v", e, v, want)
		}
		lo, hi := got["streamer_ope_interval,bound=lower,estimator="+e.String()], got["streamer_ope_interval,bound=upper,estimator="+e.String()]
		if !(lo <= want && want <= hi && hi-lo < 1) {
			t.Errorf("%s: interval [%v, %v] around %v", e, lo, hi, want)
		}
	}
	for range opeWindow {
		o.add(opeMark{first: true, prop: 0.5, greedy: true}, 1)
	}
	if len(o.window) != opeWindow || o.window[0].Prop != 0.5 {
		t.Errorf("the window holds %d samples, the oldest of propensity %v: want the newest %d", len(o.window), o.window[0].Prop, opeWindow)
	}
}

func value(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}
