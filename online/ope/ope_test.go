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
