package main

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamer/streamer/tests/internal/seed001"
)

// synthetic is a ratings set with seed 001's shape: 80 users with 20–39
// ratings (the first reference group) and 40 with 50–90 (test users), on
// 150 movies, half stars from a two-factor taste model, so that a
// movie's ratings by the reference users say something about how a test
// user rates it.
func synthetic() *seed001.Data {
	rng := rand.New(rand.NewPCG(11, 12))
	const movies = 150
	mv := make([][2]float64, movies)
	for i := range mv {
		mv[i] = [2]float64{rng.NormFloat64(), rng.NormFloat64()}
	}
	var rs []seed001.Rating
	add := func(user, n int) {
		taste := [2]float64{rng.NormFloat64(), rng.NormFloat64()}
		for _, m := range rng.Perm(movies)[:n] {
			y := 3 + 0.8*(taste[0]*mv[m][0]+taste[1]*mv[m][1]) + 0.3*rng.NormFloat64()
			y = math.Min(5, math.Max(0.5, math.Round(2*y)/2))
			rs = append(rs, seed001.Rating{User: user, Movie: m, Value: y})
		}
	}
	for u := range 80 {
		add(u, 20+rng.IntN(20))
	}
	for u := 80; u < 120; u++ {
		add(u, 50+rng.IntN(41))
	}
	return seed001.FromRatings(rs)
}

// TestThroughTheService: the experiment through the service (profiles of
// the reference users' ratings, per-user lsrrank and mlsrrank refitted on
// score, over Kafka) gives the batch solution's MSD and M1D on every
// repetition, to rounding; and both models beat a constant prediction on
// data with a signal.
func TestThroughTheService(t *testing.T) {
	lsr := seed001.Params{Lambda: 0.01, Kernels: []seed001.Kernel{seed001.RBF(4, 1)}}
	mlsr := seed001.Params{Lambda: 0.01, Kernels: []seed001.Kernel{seed001.RBF(2, 2), seed001.RBF(8, 1)}}
	rep, err := run(context.Background(), synthetic(), options{reps: 2, groups: "0", refs: 300, tests: 300, seed: 3, partitions: 2,
		lsrParams: &lsr, mlsrParams: &mlsr})
	if err != nil {
		t.Fatal(err)
	}
	g := rep.Groups[0]
	if g.Refs != 80 || g.Tests != 40 {
		t.Fatalf("%d reference and %d test users, want 80 and 40", g.Refs, g.Tests)
	}
	for _, m := range g.Models {
		t.Logf("%s: service MSD %.4f M1D %.4f, batch MSD %.4f M1D %.4f, max relative difference %.2g; constant MSD %.4f",
			m.Model, m.Service.MSD, m.Service.M1D, m.Batch.MSD, m.Batch.M1D, m.MaxRelDiff, g.Const.MSD)
		if !(m.MaxRelDiff < 1e-6) {
			t.Errorf("%s: the service's MSD or M1D differs from the batch solution's by %.3g (relative)", m.Model, m.MaxRelDiff)
		}
		if !(m.Service.MSD < 0.9*g.Const.MSD) {
			t.Errorf("%s: MSD %.4f, a constant's %.4f", m.Model, m.Service.MSD, g.Const.MSD)
		}
	}
}
