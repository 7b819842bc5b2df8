package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The measurement behind kernel.orthogonal (docs/math.md §2a), run with
//
//	ORTHO_EXPERIMENT=1 go test ./online -run TestOrthogonalExperiment -v -timeout 60m
//
// (about 6 minutes on 2 cores; ORTHO_SETS=ripley,heart_scale chooses the
// data sets, ORTHO_GAP_SEEDS=n and ORTHO_SEEDS=n the number of map seeds
// of the two tables, default 40 and 10). It logs two tables and asserts
// nothing:
//
//   - the gap to the exact kernel: on each data set standardised, the mean
//     of (<φ(x), φ(x')> − K(x, x'))² over 2000 pairs, averaged over
//     kernel.seed 1..40 (fewer seeds leave the small-D and laplacian
//     ratios noisy: the squared errors are heavy-tailed across maps), for
//     D = 64, 256, 1024 with independent (iid) and
//     orthogonal frequencies; rbf with γ = c/S and laplacian with
//     γ = sqrt(c/S) (S = median‖x − x'‖²/2 ≈ d, the unit of gamma auto's
//     grid), c = 1/4, 1, 4, 16. "random" pairs are drawn uniformly; "near"
//     pairs join a random point to one of its 10 nearest neighbours (among
//     2000 points), the pairs that carry a narrow kernel's scores (a random
//     pair of a narrow kernel has K ≈ 0);
//   - the holdout error of the balanced mam (D = 1024, streamed once with
//     running standardisation, the protocol and splits of
//     TestMAMAutoQuality), gamma auto and the fixed rbf gammas c/S,
//     c = 1/8, 1, 4, iid and orthogonal, averaged over the 10 splits and
//     kernel.seed 1..10, with the difference orthogonal − iid and its
//     standard error across seeds (a seed's map is shared by its splits, so
//     the seeds are the independent replicates).

func TestOrthogonalExperiment(t *testing.T) {
	if os.Getenv("ORTHO_EXPERIMENT") == "" {
		t.Skip("set ORTHO_EXPERIMENT=1 to run the measurement of orthogonal random features")
	}
	sets := []string{"ripley", "heart_scale", "breast_cancer", "letter"}
	if s := os.Getenv("ORTHO_SETS"); s != "" {
		sets = strings.Split(s, ",")
	}
	seeds := func(env string, def int) int {
		s := os.Getenv(env)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("%s=%q: want an integer ≥ 2", env, s)
		}
		return n
	}
	gapSeeds, nseeds := seeds("ORTHO_GAP_SEEDS", 40), seeds("ORTHO_SEEDS", 10)
	data := make([]aqData, len(sets))
	for i, name := range sets {
		data[i] = aqLoad(t, name, 0)
	}

	t.Logf("Gap to the exact kernel: mean of (K̂ − K)² over 2000 pairs, ×1e-4, mean of seeds 1..%d (ratio: orthogonal/iid)", gapSeeds)
	t.Log("| data | d | kernel | c | pairs | D = 64 iid | orth | ratio | D = 256 iid | orth | ratio | D = 1024 iid | orth | ratio |")
	t.Log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, d := range data {
		all := make([]int, len(d.x))
		for i := range all {
			all[i] = i
		}
		xs := exStandardize(d.x, all)
		S := aqScale(d.x, all)
		pairs := map[string][][2]int{"random": orthoRandomPairs(xs), "near": orthoNearPairs(xs)}
		for _, kt := range []string{KernelRBF, KernelLaplacian} {
			for _, c := range []float64{0.25, 1, 4, 16} {
				gamma := c / S
				if kt == KernelLaplacian {
					gamma = math.Sqrt(c / S)
				}
				for _, pk := range []string{"random", "near"} {
					row := orthoGapRow(t, xs, pairs[pk], KernelSpec{Type: kt, Gamma: gamma}, gapSeeds)
					t.Logf("| %s | %d | %s | %g | %s |%s", d.name, len(d.x[0]), kt, c, pk, row)
				}
			}
		}
	}

	t.Logf("Holdout error (%%) of the balanced mam, D = 1024, mean of 10 splits × seeds 1..%d; Δ = orth − iid ± its standard error across seeds", nseeds)
	t.Log("| data | gamma | iid | orth | Δ |")
	t.Log("|---|---|---|---|---|")
	cs := []float64{0, 0.125, 1, 4} // 0: auto; else the fixed rbf gamma c/S
	for _, d := range data {
		ns := len(d.splits)
		scale := make([]float64, ns)
		aqParallel(ns, func(s int) { scale[s] = aqScale(d.x, d.splits[s][0]) })
		nc := 2 * len(cs)
		errs := make([]float64, nseeds*ns*nc) // [seed][split][config·2 + orth]
		aqParallel(len(errs), func(i int) {
			seed, s, c := i/(ns*nc), i/nc%ns, i%nc
			p := aqParams(0)
			if g := cs[c/2]; g > 0 {
				p = aqParams(g / scale[s])
			}
			p.Kernel.Seed = uint64(seed) + 1
			p.Kernel.Orthogonal = c%2 == 1
			errs[i], _ = aqError(t, p, d.x, d.y, d.splits[s][0], d.splits[s][1])
		})
		for ci, c := range cs {
			var iid, orth float64
			diff := make([]float64, nseeds) // per seed, mean over the splits
			for seed := range nseeds {
				for s := range ns {
					at := (seed*ns+s)*nc + 2*ci
					iid += errs[at]
					orth += errs[at+1]
					diff[seed] += (errs[at+1] - errs[at]) / float64(ns)
				}
			}
			n := float64(nseeds * ns)
			mean, sd := orthoMeanSD(diff)
			name := "auto"
			if c > 0 {
				name = fmt.Sprintf("%g/S", c)
			}
			t.Logf("| %s | %s | %.2f | %.2f | %+.2f ± %.2f |", d.name, name, 100*iid/n, 100*orth/n, 100*mean, 100*sd/math.Sqrt(float64(nseeds)))
		}
	}
}

// orthoMeanSD returns the mean and the sample standard deviation of v.
func orthoMeanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)-1))
}

const orthoPairs = 2000

// orthoRandomPairs draws orthoPairs pairs of distinct rows.
func orthoRandomPairs(xs [][]float64) [][2]int {
	r := rand.New(rand.NewPCG(7, 0x9a1))
	pairs := make([][2]int, orthoPairs)
	for p := range pairs {
		i := r.IntN(len(xs))
		j := r.IntN(len(xs) - 1)
		if j >= i {
			j++
		}
		pairs[p] = [2]int{i, j}
	}
	return pairs
}

// orthoNearPairs draws orthoPairs pairs (x, one of the 10 nearest
// neighbours of x among at most 2000 rows).
func orthoNearPairs(xs [][]float64) [][2]int {
	r := rand.New(rand.NewPCG(8, 0x9a1))
	pool := r.Perm(len(xs))[:min(len(xs), 2000)]
	pairs := make([][2]int, orthoPairs)
	type nb struct {
		d float64
		j int
	}
	near := make([]nb, 0, len(pool))
	for p := range pairs {
		i := pool[r.IntN(len(pool))]
		near = near[:0]
		for _, j := range pool {
			if j != i {
				near = append(near, nb{sqDist(xs[i], xs[j]), j})
			}
		}
		slices.SortFunc(near, func(a, b nb) int {
			if a.d != b.d {
				if a.d < b.d {
					return -1
				}
				return 1
			}
			return a.j - b.j
		})
		pairs[p] = [2]int{i, near[r.IntN(min(10, len(near)))].j}
	}
	return pairs
}

// orthoGapRow returns the table cells of one (data, kernel, pairs): for
// each D, the mean squared error of K̂ (×1e-4) of the iid and the
// orthogonal map, mean over kernel.seed 1..nseeds, and their ratio.
func orthoGapRow(t *testing.T, xs [][]float64, pairs [][2]int, k KernelSpec, nseeds int) string {
	kern, err := NewKernel(k, len(xs[0]))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(pairs))
	for p, ij := range pairs {
		want[p] = kern.Eval(xs[ij[0]], xs[ij[1]])
	}
	Ds := []int{64, 256, 1024}
	res := make([]float64, len(Ds)*2*nseeds) // [D][orth][seed]
	aqParallel(len(res), func(job int) {
		di, orth, seed := job/(2*nseeds), job/nseeds%2 == 1, uint64(job%nseeds)+1
		km := k
		km.Features, km.Seed, km.Orthogonal = Ds[di], seed, orth
		fm, err := NewFeatureMap(km, len(xs[0]))
		if err != nil {
			panic(err)
		}
		a, b := make([]float64, fm.Dim()), make([]float64, fm.Dim())
		var sum float64
		for p, ij := range pairs {
			fm.Map(a, xs[ij[0]])
			fm.Map(b, xs[ij[1]])
			e := dot(a, b) - want[p]
			sum += e * e
		}
		res[job] = sum / float64(len(pairs))
	})
	var out strings.Builder
	for di := range Ds {
		var mse [2]float64
		for o := range 2 {
			for s := range nseeds {
				mse[o] += res[(di*2+o)*nseeds+s] / float64(nseeds)
			}
		}
		fmt.Fprintf(&out, " %.3g | %.3g | %.2f |", 1e4*mse[0], 1e4*mse[1], mse[1]/mse[0])
	}
	return out.String()
}
