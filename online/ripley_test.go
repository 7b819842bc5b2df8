package online

import (
	"encoding/csv"
	"math"
	"os"
	"sort"
	"strconv"
	"testing"
)

// readCSV reads a numeric CSV with a header row and the label in the last
// column.
func readCSV(t testing.TB, path string) (x [][]float64, y []float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows[1:] {
		v := make([]float64, len(row))
		for i, s := range row {
			if v[i], err = strconv.ParseFloat(s, 64); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		x = append(x, v[:len(v)-1])
		y = append(y, v[len(v)-1])
	}
	return x, y
}

// TestRipley trains the rbf MAM (gamma 10, D = 2048) on Ripley's 250
// training points (raw features, as in the reference figures of
// eval/testdata/README.md: the exact-kernel MAM errs on 8.3–8.6% of the 1000 test
// points at gamma 5–20) and checks the test error and the certainty bound.
func TestRipley(t *testing.T) {
	trX, trY := readCSV(t, "testdata/ripley_train.csv")
	teX, teY := readCSV(t, "testdata/ripley_test.csv")
	if len(trX) != 250 || len(teX) != 1000 {
		t.Fatalf("%d training and %d test rows", len(trX), len(teX))
	}
	const gamma = 10
	for _, bal := range []bool{false, true} {
		m, err := NewMAM(2, MAMParams{Balance: bal, Delta: 0.05,
			Kernel: KernelSpec{Type: KernelRBF, Gamma: gamma, Features: 2048, Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range trX {
			m.Observe(trX[i], trY[i], true)
		}
		margins := make([]float64, len(teX)) // y·f
		rhos := make([]float64, len(teX))
		bounds := make([]float64, len(teX))
		wrong := 0
		for i := range teX {
			p := m.Observe(teX[i], 0, false)
			if float64(p.Label) != teY[i] {
				wrong++
			}
			margins[i] = teY[i] * p.Score
			rhos[i] = math.Abs(p.Score)
			bounds[i] = p.MistakeBound
		}
		errRate := float64(wrong) / float64(len(teX))
		t.Logf("balance=%v: test error %.1f%% (exact kernel, plain: 8.3%%); M̂ = %.4f, R̂ = %.4f, bound at ρ = 0: %.3f",
			bal, 100*errRate, m.AverageMargin(), m.Rademacher(), m.Bound(0))
		if errRate > 0.10 {
			t.Errorf("balance=%v: test error %.1f%% > 10%%", bal, 100*errRate)
		}
		// Validity: for each test point's ρ, the fraction of test points with
		// y·f ≤ −ρ must not exceed bound(ρ).
		sort.Float64s(margins)
		var worstSlack = math.Inf(1)
		for i, rho := range rhos {
			frac := float64(sort.Search(len(margins), func(j int) bool { return margins[j] > -rho })) / float64(len(margins))
			if frac > bounds[i] {
				t.Fatalf("balance=%v: ρ = %v: empirical P(yf ≤ −ρ) = %v > bound %v", bal, rho, frac, bounds[i])
			}
			worstSlack = min(worstSlack, bounds[i]-frac)
		}
		t.Logf("balance=%v: bound valid at all %d test margins (smallest slack %.3f)", bal, len(rhos), worstSlack)
	}
}
