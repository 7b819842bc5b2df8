package ope

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestEstimates: each estimator against its formula on a small log, by
// hand.
func TestEstimates(t *testing.T) {
	s := []Sample{
		{Reward: 1, Prop: 0.5, Match: true, PredLogged: 0.6, PredTarget: 0.6},
		{Reward: 0, Prop: 0.25, Match: false, PredLogged: 0.2, PredTarget: 0.7},
		{Reward: 0, Prop: 0.8, Match: true, PredLogged: 0.3, PredTarget: 0.3},
	}
	w := []float64{2, 0, 1.25}
	want := map[Estimator]float64{
		IPS:   (2*1 + 0 + 1.25*0) / 3,
		SNIPS: 2 / 3.25,
		DR:    ((0.6 + 2*(1-0.6)) + 0.7 + (0.3 + 1.25*(0-0.3))) / 3,
		SNDR:  (0.6+0.7+0.3)/3 + (2*(1-0.6)+1.25*(0-0.3))/(w[0]+w[1]+w[2]),
	}
	for e, v := range want {
		if got := Estimate(e, s); math.Abs(got-v) > 1e-15 {
			t.Errorf("%s: %v, want %v", e, got, v)
		}
	}
	if !math.IsNaN(Estimate(DR, nil)) || !math.IsNaN(Estimate(SNIPS, s[1:2])) || Estimate(SNDR, s[1:2]) != 0.7 {
		t.Error("no samples, or no weight: NaN, or the direct method's value for SNDR")
	}
}

// TestUnbiasedAndIntervals: on a synthetic log with known propensities
// (a uniform logging policy over 4 actions, a fixed target, Bernoulli
// rewards) IPS and DR average to the target's true value over many logs,
// DR with a decent reward model has the smaller variance, and 95%
// bootstrap intervals cover the truth about 95% of the time.
func TestUnbiasedAndIntervals(t *testing.T) {
	means := []float64{0.2, 0.5, 0.35, 0.8}
	const target, logs, n = 3, 300, 400
	rng := rand.New(rand.NewPCG(1, 2))
	var sum, sq, cover [4]float64
	for l := range logs {
		s := make([]Sample, n)
		for i := range s {
			a := rng.IntN(4)
			r := 0.0
			if rng.Float64() < means[a] {
				r = 1
			}
			// A reward model off by 0.05.
			s[i] = Sample{Reward: r, Prop: 0.25, Match: a == target, PredLogged: means[a] + 0.05, PredTarget: means[target] + 0.05}
		}
		boot := rand.New(rand.NewPCG(uint64(l), 3))
		for k, e := range Estimators {
			v := Estimate(e, s)
			sum[k] += v
			sq[k] += (v - means[target]) * (v - means[target])
			if lo, hi := Interval(e, s, 0.95, 200, boot); lo <= means[target] && means[target] <= hi {
				cover[k]++
			}
		}
	}
	for k, e := range Estimators {
		mean, mse := sum[k]/logs, sq[k]/logs
		t.Logf("%-5s mean %.4f (truth %.2f), MSE %.2e, coverage %.3f", e, mean, means[target], mse, cover[k]/logs)
		if (e == IPS || e == DR) && math.Abs(mean-means[target]) > 3*math.Sqrt(mse/logs) {
			t.Errorf("%s: mean %.4f over %d logs, truth %.2f: biased", e, mean, logs, means[target])
		}
		if c := cover[k] / logs; c < 0.9 || c > 0.99 {
			t.Errorf("%s: 95%% intervals cover the truth %.3f of the time", e, c)
		}
	}
	if sq[2] > 0.5*sq[0] {
		t.Errorf("DR's MSE %.2e is not below half IPS's %.2e with a good reward model", sq[2]/logs, sq[0]/logs)
	}
	if lo, hi := Interval(DR, []Sample{{Reward: 1, Prop: 1, Match: true}}, 0.95, 10, rand.New(rand.NewPCG(1, 1))); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Error("an interval from one sample")
	}
}

// TestTermsMeanIsEstimate: the mean of IPS's and DR's terms is their
// estimate.
func TestTermsMeanIsEstimate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	samples := make([]Sample, 300)
	for i := range samples {
		samples[i] = Sample{Reward: float64(rng.IntN(2)), Prop: 0.1 + 0.9*rng.Float64(), Match: rng.IntN(3) > 0,
			PredLogged: rng.Float64(), PredTarget: rng.Float64()}
	}
	for _, e := range []Estimator{IPS, DR} {
		sum := 0.0
		for i := range samples {
			sum += Term(e, &samples[i])
		}
		if got, want := sum/float64(len(samples)), Estimate(e, samples); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: mean of terms %v, estimate %v", e, got, want)
		}
	}
}

// TestDiffInterval: the difference of a policy with itself is exactly 0,
// and the interval of two policies' difference covers their estimates'
// difference.
func TestDiffInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := make([]Sample, 500)
	b := make([]Sample, 500)
	for i := range a {
		a[i] = Sample{Reward: float64(rng.IntN(2)), Prop: 0.5, Match: rng.IntN(2) == 0, PredLogged: 0.4, PredTarget: 0.4}
		b[i] = a[i]
		b[i].Match = rng.IntN(4) > 0
		b[i].PredTarget = 0.6
	}
	boot := rand.New(rand.NewPCG(1, 1))
	if lo, hi := DiffInterval(DR, a, a, 0.95, 100, boot); lo != 0 || hi != 0 {
		t.Errorf("a policy against itself: [%v, %v], want [0, 0]", lo, hi)
	}
	for _, e := range Estimators {
		d := Estimate(e, b) - Estimate(e, a)
		lo, hi := DiffInterval(e, a, b, 0.95, 200, boot)
		if !(lo <= d && d <= hi && hi-lo < 0.5) {
			t.Errorf("%s: difference %v, interval [%v, %v]", e, d, lo, hi)
		}
	}
	if lo, _ := DiffInterval(DR, a, b[:10], 0.95, 10, boot); !math.IsNaN(lo) {
		t.Errorf("unequal lengths: %v, want NaN", lo)
	}
}

// TestWindow: the window's mean and normal interval are those of its
// newest values, computed from scratch, through several passes of the
// ring.
func TestWindow(t *testing.T) {
	w := NewWindow(50)
	rng := rand.New(rand.NewPCG(7, 8))
	var all []float64
	for i := range 237 {
		v := rng.NormFloat64()*3 + 1e6*float64(i%2) // large values: rounding would show
		w.Add(v)
		all = append(all, v)
		tail := all[max(0, len(all)-50):]
		if w.Len() != len(tail) {
			t.Fatalf("after %d: %d values, want %d", i+1, w.Len(), len(tail))
		}
		var s, s2 float64
		for _, x := range tail {
			s += x
		}
		mean := s / float64(len(tail))
		for _, x := range tail {
			s2 += (x - mean) * (x - mean)
		}
		if math.Abs(w.Mean()-mean) > 1e-6 {
			t.Fatalf("after %d: mean %v, want %v", i+1, w.Mean(), mean)
		}
		if len(tail) < 2 {
			continue
		}
		h := 1.959963984540054 * math.Sqrt(s2/float64(len(tail)-1)/float64(len(tail)))
		lo, hi := w.Interval(0.95)
		if math.Abs(lo-(mean-h)) > 1e-6*(1+h) || math.Abs(hi-(mean+h)) > 1e-6*(1+h) {
			t.Fatalf("after %d: interval [%v, %v], want %v ± %v", i+1, lo, hi, mean, h)
		}
	}
	w.Reset()
	if w.Len() != 0 || !math.IsNaN(w.Mean()) {
		t.Errorf("after Reset: %d values, mean %v", w.Len(), w.Mean())
	}
}
