package svm

import (
	"bufio"
	"context"
	"flag"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

var refresh = flag.Bool("refresh", false, "re-run tests/svmbench/sklearn_brier.py (needs /usr/bin/python3 with sklearn) before TestProbabilityBrier")

// TestProbabilityBrier compares the Brier score of p̂ on breast_cancer's fixed stratified 70/30
// split with sklearn's SVC(probability=True) (Platt scaling), golden figure in
// testdata/breast_cancer_brier.tsv.
func TestProbabilityBrier(t *testing.T) {
	if *refresh {
		if err := exec.Command("/usr/bin/python3", "-c", "import sklearn").Run(); err != nil {
			t.Fatalf("-refresh needs /usr/bin/python3 with scikit-learn: %v", err)
		}
		cmd := exec.Command("/usr/bin/python3", "../../tests/svmbench/sklearn_brier.py")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sklearn_brier.py: %v\n%s", err, out)
		}
	}
	X, y := loadCSV(t, "breast_cancer.csv")
	tr, te := readSplit(t)
	zscorePop(X, tr)
	golden := readBrierGolden(t)
	Xtr, ytr := subset(X, y, tr)
	p := Params{Kernel: Kernel{Type: RBF, Gamma: golden["gamma"]}, C: golden["C"]}
	pm, err := TrainProbability(context.Background(), Xtr, ytr, p, 20)
	if err != nil {
		t.Fatal(err)
	}
	var brier, errs float64
	for _, i := range te {
		ph := pm.Prob(X[i])
		o := 0.0
		if y[i] > 0 {
			o = 1
		}
		brier += (ph - o) * (ph - o)
		if (ph > 0.5) != (y[i] > 0) {
			errs++
		}
	}
	brier /= float64(len(te))
	errs /= float64(len(te))
	t.Logf("Brier: ours (H = 20) %.4f, sklearn SVC(probability=True) %.4f; test error ours %.4f, sklearn %.4f",
		brier, golden["brier"], errs, golden["test_error"])
	if math.Abs(brier-golden["brier"]) > 0.02 {
		t.Errorf("Brier score %.4f, sklearn %.4f: more than 0.02 apart", brier, golden["brier"])
	}
	// Monotone in π by construction: every p̂ is a grid midpoint.
	for _, i := range te[:10] {
		k := pm.Prob(X[i])*20 - 0.5
		if math.Abs(k-math.Round(k)) > 1e-9 || k < 0 || k > 19 {
			t.Fatalf("p̂ = %v is not (k+½)/H", pm.Prob(X[i]))
		}
	}
}

func TestProbabilityWarmStartSameSolution(t *testing.T) {
	X, y := loadCSV(t, "ripley_train.csv")
	p := Params{Kernel: Kernel{Type: RBF, Gamma: 2}, C: 1}
	pm, err := TrainProbability(context.Background(), X, y, p, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Each warm-started fit must reach the cold fit's objective.
	for h, m := range pm.Models {
		pi := float64(h+1) / 5
		w := make([]float64, len(y))
		for i := range y {
			if y[i] > 0 {
				w[i] = 2 * (1 - pi)
			} else {
				w[i] = 2 * pi
			}
		}
		cold, err := TrainWeighted(context.Background(), X, y, w, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rel := math.Abs(m.Obj-cold.Obj) / math.Abs(cold.Obj); rel > 1e-3 {
			t.Errorf("π = %v: warm obj %v, cold %v", pi, m.Obj, cold.Obj)
		}
		t.Logf("π = %.1f: obj %.4f (warm, %d iter) vs %.4f (cold, %d iter)", pi, m.Obj, m.Iter, cold.Obj, cold.Iter)
	}
}

func subset(X [][]float64, y []float64, idx []int) ([][]float64, []float64) {
	xs, ys := make([][]float64, len(idx)), make([]float64, len(idx))
	for k, i := range idx {
		xs[k], ys[k] = X[i], y[i]
	}
	return xs, ys
}

func readSplit(t *testing.T) (train, test []int) {
	t.Helper()
	b, err := os.ReadFile("testdata/breast_cancer_split.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		var idx []int
		for _, s := range f[1:] {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, v)
		}
		switch f[0] {
		case "train":
			train = idx
		case "test":
			test = idx
		}
	}
	return train, test
}

func readBrierGolden(t *testing.T) map[string]float64 {
	t.Helper()
	f, err := os.Open("testdata/breast_cancer_brier.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	head := strings.Split(sc.Text(), "\t")
	sc.Scan()
	vals := strings.Split(sc.Text(), "\t")
	out := map[string]float64{}
	for i, h := range head {
		if v, err := strconv.ParseFloat(vals[i], 64); err == nil {
			out[h] = v
		}
	}
	return out
}
