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
// estimate; the self-normalised forms take their terms.
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
			if sn := map[Estimator]Estimator{IPS: SNIPS, DR: SNDR}[e]; Term(sn, &samples[i]) != Term(e, &samples[i]) {
				t.Fatalf("%s's term differs from %s's", sn, e)
			}
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

// TestSequence: the confidence sequence's interval holds its mean, is
// the mean alone for equal values, is about 4.0 σ/√n wide at n0 and level
// 0.95, and, looked at after every value of 2 000 null streams (mean 0),
// excludes 0 at any time in at most a few percent of them, where the
// fixed-n normal interval looked at as often does so in most.
func TestSequence(t *testing.T) {
	s := NewSequence(1000)
	for range 5 {
		s.Add(0.25)
	}
	if lo, hi := s.Interval(0.95); lo != 0.25 || hi != 0.25 {
		t.Errorf("equal values: [%v, %v], want [0.25, 0.25]", lo, hi)
	}
	s.Reset()
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1000 {
		s.Add(rng.NormFloat64())
	}
	lo, hi := s.Interval(0.95)
	if m := s.Mean(); !(lo < m && m < hi) || math.Abs((hi-lo)/2*math.Sqrt(1000)-4.0) > 0.3 {
		t.Errorf("at n0: mean %v, interval [%v, %v], half-width %.2f σ/√n, want about 4.0", m, lo, hi, (hi-lo)/2*math.Sqrt(1000))
	}
	const streams, n = 2000, 3000
	seqMisses, fixedMisses := 0, 0
	for range streams {
		s := NewSequence(1000)
		var sum, sum2 float64
		seqMiss, fixedMiss := false, false
		for i := 1; i <= n; i++ {
			v := rng.NormFloat64()
			s.Add(v)
			sum += v
			sum2 += v * v
			if i%10 != 0 || i < 20 {
				continue
			}
			if lo, hi := s.Interval(0.95); lo > 0 || hi < 0 {
				seqMiss = true
			}
			m := sum / float64(i)
			h := 1.96 * math.Sqrt((sum2-float64(i)*m*m)/float64(i-1)/float64(i))
			if m-h > 0 || m+h < 0 {
				fixedMiss = true
			}
		}
		if seqMiss {
			seqMisses++
		}
		if fixedMiss {
			fixedMisses++
		}
	}
	t.Logf("null streams whose interval excluded 0 at some look (every 10 values, %d values): sequence %d of %d, fixed-n normal %d", n, seqMisses, streams, fixedMisses)
	if float64(seqMisses) > 0.05*streams || float64(fixedMisses) < 0.2*streams {
		t.Errorf("excluded 0 at some look: sequence %d of %d (want ≤ 5%%), fixed-n %d (want ≥ 20%%: the looks matter)", seqMisses, streams, fixedMisses)
	}
}
