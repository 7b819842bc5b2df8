package adaboost

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// golden is testdata/golden.json, written by testdata/golden.py.
type golden struct {
	Versions map[string]string `json:"versions"`
	Seeds    []int             `json:"seeds"`
	Rounds   []int             `json:"rounds"`
	Eps      float64           `json:"eps"`
	Datasets map[string]struct {
		File   string `json:"file"`
		Rows   int    `json:"rows"`
		Splits []struct {
			Seed    int   `json:"seed"`
			Train   []int `json:"train"`
			Test    []int `json:"test"`
			Sklearn map[string]struct {
				TestError  float64 `json:"test_error"`
				Estimators int     `json:"estimators"`
			} `json:"sklearn"`
			Reference map[string]struct {
				TestError float64 `json:"test_error"`
				Rounds    int     `json:"rounds"`
				Stop      string  `json:"stop"`
				Trace     []struct {
					Feature   int     `json:"feature"`
					Threshold float64 `json:"threshold"`
					Polarity  int     `json:"polarity"`
					Err       float64 `json:"err"`
					Beta      float64 `json:"beta"`
				} `json:"trace"`
				TestScoresHead []float64 `json:"test_scores_head"`
			} `json:"reference"`
		} `json:"splits"`
	} `json:"datasets"`
}

func readGolden(t testing.TB) *golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// readCSV reads a data set of testdata (a header row, the label last) as
// row-major features and labels.
func readCSV(t testing.TB, name string) (X []float64, y []float64, d int) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	d = len(rows[0]) - 1
	for _, r := range rows[1:] {
		for j, s := range r {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			if j == d {
				y = append(y, v)
			} else {
				X = append(X, v)
			}
		}
	}
	return X, y, d
}

// take gathers rows idx of X (d columns) and y.
func take(X, y []float64, d int, idx []int) ([]float64, []float64) {
	xs, ys := make([]float64, 0, len(idx)*d), make([]float64, 0, len(idx))
	for _, i := range idx {
		xs = append(xs, X[i*d:(i+1)*d]...)
		ys = append(ys, y[i])
	}
	return xs, ys
}

// testError is the fraction of rows whose label is not sign(F) (F = 0
// counts as an error).
func testError(e *Ensemble, X, y []float64, d int) float64 {
	wrong := 0
	for i := range y {
		if float64(e.Label(X[i*d:(i+1)*d])) != y[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(len(y))
}

// TestQualityVsSklearn is the "done when" of the adaboost issue: boosting
// decision stumps (no members) on breast_cancer and heart_scale, with the
// stratified 70/30 splits of eval/testdata/README.md for seeds 0..39 (the
// row indices are those of testdata/golden.json, written by
// testdata/golden.py), for M = 50 and 100 rounds:
//
//   - every split's fit is the reference's of golden.py (the same
//     algorithm in numpy): the same number of rounds, the same test error,
//     and on seed 0 the same first rounds (feature, threshold, polarity;
//     error and β to 1e-12) and test scores (to 1e-9);
//   - the mean test error over the splits is within 0.5 point of
//     scikit-learn 1.2.1's AdaBoostClassifier(DecisionTreeClassifier(
//     max_depth=1), algorithm="SAMME", n_estimators=M).
//
// scikit-learn picks each stump by the weighted Gini impurity and this
// package by the weighted error (the algorithm of the seed paper): the
// splits' errors differ (a few points either way on heart_scale's 81 test
// rows), their means agree. Forty splits, not the README's ten: the
// standard error of the mean paired difference over ten splits is 0.3
// (breast_cancer) to 1.0 point (heart_scale), above the tolerance; the
// means over seeds 0..9 are logged too.
func TestQualityVsSklearn(t *testing.T) {
	g := readGolden(t)
	for _, name := range []string{"breast_cancer", "heart_scale"} {
		ds, ok := g.Datasets[name]
		if !ok {
			t.Fatalf("golden.json has no %s", name)
		}
		X, y, d := readCSV(t, ds.File)
		if len(y) != ds.Rows {
			t.Fatalf("%s: %d rows, golden %d", name, len(y), ds.Rows)
		}
		for _, M := range g.Rounds {
			key := strconv.Itoa(M)
			var ours, sk, ours10, sk10 float64
			for _, sp := range ds.Splits {
				Xtr, ytr := take(X, y, d, sp.Train)
				Xte, yte := take(X, y, d, sp.Test)
				e, err := Fit(context.Background(), Xtr, ytr, d, Config{Stumps: true, Rounds: M})
				if err != nil {
					t.Fatal(err)
				}
				ref, skl := sp.Reference[key], sp.Sklearn[key]
				got := testError(e, Xte, yte, d)
				if len(e.rounds) != ref.Rounds || e.stop.String() != ref.Stop || got != ref.TestError {
					t.Errorf("%s seed %d M %d: %d rounds (%v), test error %.4f; reference %d rounds (%s), %.4f",
						name, sp.Seed, M, len(e.rounds), e.stop, got, ref.Rounds, ref.Stop, ref.TestError)
				}
				if sp.Seed == 0 {
					checkTrace(t, name, e, ref.Trace, Xte, d, ref.TestScoresHead)
				}
				t.Logf("%s seed %2d M %3d: test error %.2f%% (sklearn %.2f%%, %d stumps)", name, sp.Seed, M, 100*got, 100*skl.TestError, skl.Estimators)
				ours += got / float64(len(ds.Splits))
				sk += skl.TestError / float64(len(ds.Splits))
				if sp.Seed < 10 {
					ours10 += got / 10
					sk10 += skl.TestError / 10
				}
			}
			t.Logf("%s M %d: mean test error over %d splits %.2f%%, sklearn SAMME %.2f%% (difference %+.2f points); seeds 0..9: %.2f%% vs %.2f%% (%+.2f)",
				name, M, len(ds.Splits), 100*ours, 100*sk, 100*(ours-sk), 100*ours10, 100*sk10, 100*(ours10-sk10))
			if math.Abs(ours-sk) > 0.005 {
				t.Errorf("%s M %d: mean test error %.2f%%, sklearn %.2f%%: more than 0.5 point apart", name, M, 100*ours, 100*sk)
			}
		}
	}
}

// checkTrace compares the first rounds and test scores with the
// reference's.
func checkTrace(t *testing.T, name string, e *Ensemble, trace []struct {
	Feature   int     `json:"feature"`
	Threshold float64 `json:"threshold"`
	Polarity  int     `json:"polarity"`
	Err       float64 `json:"err"`
	Beta      float64 `json:"beta"`
}, Xte []float64, d int, scores []float64) {
	t.Helper()
	if len(trace) == 0 {
		t.Fatalf("%s: golden has no trace", name)
	}
	for k, want := range trace {
		r := e.rounds[k]
		if r.Member != -1 || r.Feature != want.Feature || r.Threshold != want.Threshold || r.Polarity != want.Polarity ||
			math.Abs(r.Err-want.Err) > 1e-12 || math.Abs(r.Beta-want.Beta) > 1e-12 {
			t.Errorf("%s seed 0 round %d: %+v, reference %+v", name, k+1, r, want)
		}
	}
	for i, want := range scores {
		if got := e.Score(Xte[i*d : (i+1)*d]); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s seed 0 test row %d: F = %v, reference %v", name, i, got, want)
		}
	}
}

// TestLogisticLinkNotCalibrated measures the reliability of the logistic
// link p = 1/(1 + e^{−2F}) (the population minimiser of the exponential
// loss) on the test rows of the 40 splits of TestQualityVsSklearn, M =
// 100, in ten bins of p. The tolerance for publishing it as a probability
// would be: every bin with at least 20 rows within 0.1 of its observed
// frequency of +1. It is not met on either data set: the link is
// overconfident, by up to 0.36 in a bin on breast_cancer (p ≈ 0.86,
// observed 0.50) and 0.22 on heart_scale, so the model publishes no
// probability (docs/math.md); this test pins that finding.
func TestLogisticLinkNotCalibrated(t *testing.T) {
	g := readGolden(t)
	for _, name := range []string{"breast_cancer", "heart_scale"} {
		ds := g.Datasets[name]
		X, y, d := readCSV(t, ds.File)
		var sumP, sumY [10]float64
		var cnt [10]int
		var brier float64
		total := 0
		for _, sp := range ds.Splits {
			Xtr, ytr := take(X, y, d, sp.Train)
			Xte, yte := take(X, y, d, sp.Test)
			e, err := Fit(context.Background(), Xtr, ytr, d, Config{Stumps: true, Rounds: 100})
			if err != nil {
				t.Fatal(err)
			}
			for i := range yte {
				p := 1 / (1 + math.Exp(-2*e.Score(Xte[i*d:(i+1)*d])))
				b := min(int(p*10), 9)
				pos := 0.0
				if yte[i] > 0 {
					pos = 1
				}
				sumP[b] += p
				sumY[b] += pos
				cnt[b]++
				brier += (p - pos) * (p - pos)
				total++
			}
		}
		var ece, worst float64
		for b := range 10 {
			if cnt[b] == 0 {
				continue
			}
			gap := math.Abs(sumP[b]-sumY[b]) / float64(cnt[b])
			ece += gap * float64(cnt[b]) / float64(total)
			if cnt[b] >= 20 {
				worst = max(worst, gap)
			}
			t.Logf("%s bin %d: %4d rows, mean p %.3f, observed %.3f", name, b, cnt[b], sumP[b]/float64(cnt[b]), sumY[b]/float64(cnt[b]))
		}
		t.Logf("%s: expected calibration error %.3f, Brier %.4f, largest gap of a bin of ≥ 20 rows %.3f", name, ece, brier/float64(total), worst)
		if worst <= 0.1 {
			t.Errorf("%s: the logistic link is within 0.1 in every bin of ≥ 20 rows: reconsider publishing a probability", name)
		}
	}
}
