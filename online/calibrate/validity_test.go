package calibrate_test

import (
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/online/refit"
)

// The validity protocol (issue 16, "Done when 1"): a data set is streamed
// prequentially through a model in 10 shuffles; every event is scored
// first (Observe returns the prediction made before learning), its score is
// looked up in the current IVAP table, then the (score, label) pair enters
// a window of the last ivapWindow pairs and the model learns. Every
// ivapEvery pairs the table is refitted on the window (synchronously here;
// the engine does it in the background). The (p, p0, p1, y) of the events
// scored after the first refit are pooled over the shuffles and split by p
// into the deciles [0, 0.1), …, [0.9, 1]; in each decile with at least
// minDecile events the observed positive rate r must lie in
// [mean p0 − 2·SE0, mean p1 + 2·SE1].
//
// Two deviations from the wording, both measured:
//
//   - SE0 = sqrt(p̄0(1 − p̄0)/count) and SE1 = sqrt(p̄1(1 − p̄1)/count), the
//     standard errors at the boundary being tested (a score test), not
//     sqrt(r(1 − r)/count): the latter is 0 when r is 0 or 1, and then
//     fails a decile of 1348 positives out of 1348 with mean p1 = 0.9998
//     (breast_cancer/svm), which a binomial rate of 0.9998 produces with
//     probability 0.76.
//   - The judged calibrator fits each table on the pairs of the later half
//     of the stream so far (Window.CopyRecentTo: the newest max(100,
//     ⌈added/2⌉) of the window), as the engine does. The literal protocol
//     (every pair of the window) runs on the same stream and its table is
//     logged but not judged: a model that is still learning fast makes
//     its old scores more pessimistic than its current ones, the pairs in
//     the window are then not exchangeable with the present, and the table
//     is underconfident (observed rates more extreme than p). On letter/mam
//     the literal protocol puts decile [0.2, 0.3) at 3.1 SE below mean p0
//     (all of it from events scored in the first 5000: events ≥ 5000 are
//     inside [p0, p1]), on breast_cancer/mam deciles [0, 0.1) and
//     [0.1, 0.2) at 4.1 and 3 SE below. Until 2026-11-27 the judged
//     calibrator (and the engine) kept instead the pairs scored before the
//     model had learned 200 events out of the window: as valid on these
//     sets, but heart_scale's 270 rows were left almost without a table,
//     and so would any stream's first 300 events. On seven more sets of
//     R's mlbench (IVAP_EXTRA below) the later-half rule left three
//     deciles of 14 cases 2.0–2.3 SE outside, the warm-up one (Pima/mam,
//     also outside under the later half) and no table at all on Sonar;
//     the literal protocol 17 deciles.
const (
	ivapWindow = 2000
	ivapEvery  = 100
	shuffles   = 10
	minDecile  = 100
	// widthFrom: the mean width p1 − p0 is judged over events scored by a
	// table fitted on at least this many pairs.
	widthFrom = 1000
	maxWidth  = 0.05
)

// Data paths, relative to this package.
const (
	breastPath = "../testdata/breast_cancer.csv"
	heartPath  = "../testdata/heart_scale.csv"
	bostonPath = "../testdata/boston_ordinal.csv"
	letterPath = "../../tests/svmbench/testdata/letter.csv"
)

// readCSV reads a CSV with a header row, the label in the last column.
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
		x, y = append(x, v[:len(v)-1]), append(y, v[len(v)-1])
	}
	return x, y
}

// order returns shuffle s of n rows; rows > 0 keeps the first rows of it
// (a random subsample).
func order(n int, s uint64, rows int) []int {
	p := rand.New(rand.NewPCG(s, 16)).Perm(n)
	if rows > 0 && rows < n {
		p = p[:rows]
	}
	return p
}

// parallel runs f(0..n−1) on GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// outcome is one event scored with a fitted table.
type outcome struct {
	p, lo, hi float64
	y         bool
	n         int // pairs the table was fitted on
}

// calibrator is the protocol's calibration side: a window, its table, and
// the outcomes of the events it scored.
type calibrator struct {
	recent bool // fit on the later half of the stream (CopyRecentTo), not the whole window
	w      *calibrate.Window
	table  *calibrate.VennAbers
	buf    []calibrate.Pair
	out    []outcome
}

func newCalibrator(recent bool) *calibrator {
	return &calibrator{recent: recent, w: calibrate.NewWindow(ivapWindow)}
}

// observe looks the score up in the current table (if any), then adds the
// pair to the window and refits every ivapEvery pairs.
func (c *calibrator) observe(score float64, positive bool) {
	if c.table != nil {
		p, lo, hi := c.table.Probability(score)
		c.out = append(c.out, outcome{p: p, lo: lo, hi: hi, y: positive, n: c.table.N()})
	}
	c.w.Add(score, positive)
	if c.w.Added()%ivapEvery == 0 {
		if c.recent {
			c.buf = c.w.CopyRecentTo(c.buf)
		} else {
			c.buf = c.w.CopyTo(c.buf)
		}
		c.table = calibrate.FitVennAbers(c.buf)
	}
}

// streamIVAP streams rows idx of (x, y) through model m (labels ±1) as the
// protocol says, into the calibrators. Events scored before the model has
// a fitted version (a refitted model's Version 0) are skipped: they carry
// no score of the model.
func streamIVAP(m online.Model, x [][]float64, y []float64, idx []int, cs ...*calibrator) {
	_, refitted := m.(*online.Standardized).Inner().(*refit.Model)
	for _, i := range idx {
		pred := m.Observe(x[i], y[i], true)
		if refitted && pred.Version == 0 {
			continue
		}
		for _, c := range cs {
			c.observe(pred.Score, y[i] > 0)
		}
	}
}

// decile is one row of the reliability table.
type decile struct {
	count               int
	p, lo, hi, rate     float64
	judged, ok          bool
	allowLow, allowHigh float64
}

// reliability pools outcomes into the deciles of p and judges them.
func reliability(out []outcome) (ds [10]decile, width, widthLarge float64, nLarge int) {
	for _, o := range out {
		b := min(int(o.p*10), 9)
		d := &ds[b]
		d.count++
		d.p += o.p
		d.lo += o.lo
		d.hi += o.hi
		if o.y {
			d.rate++
		}
		width += o.hi - o.lo
		if o.n >= widthFrom {
			widthLarge += o.hi - o.lo
			nLarge++
		}
	}
	for b := range ds {
		d := &ds[b]
		if d.count == 0 {
			continue
		}
		c := float64(d.count)
		d.p, d.lo, d.hi, d.rate = d.p/c, d.lo/c, d.hi/c, d.rate/c
		d.allowLow = d.lo - 2*math.Sqrt(d.lo*(1-d.lo)/c)
		d.allowHigh = d.hi + 2*math.Sqrt(d.hi*(1-d.hi)/c)
		d.judged = d.count >= minDecile
		d.ok = d.rate >= d.allowLow && d.rate <= d.allowHigh
	}
	if len(out) > 0 {
		width /= float64(len(out))
	}
	if nLarge > 0 {
		widthLarge /= float64(nLarge)
	}
	return ds, width, widthLarge, nLarge
}

// table formats the reliability table of out; verdicts say whether a
// decile outside its allowed range is a failure or only reported.
func table(title string, out []outcome, judged bool) (string, [10]decile, float64, int) {
	ds, width, widthLarge, nLarge := reliability(out)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d events scored with a table, pooled over %d shuffles\n", title, len(out), shuffles)
	fmt.Fprintf(&b, "  decile       count  mean p  mean [p0, p1]     observed  allowed\n")
	for i, d := range ds {
		if d.count == 0 {
			continue
		}
		verdict := "-"
		switch {
		case d.judged && d.ok:
			verdict = "ok"
		case d.judged && judged:
			verdict = "FAIL"
		case d.judged:
			verdict = "outside (not judged)"
		}
		fmt.Fprintf(&b, "  [%.1f, %.1f)  %6d  %.4f  [%.4f, %.4f]  %.4f    [%.4f, %.4f]  %s\n",
			float64(i)/10, float64(i+1)/10, d.count, d.p, d.lo, d.hi, d.rate, d.allowLow, d.allowHigh, verdict)
	}
	fmt.Fprintf(&b, "  mean width p1 − p0: %.4f over all; ", width)
	if nLarge > 0 {
		fmt.Fprintf(&b, "%.4f over the %d events scored by tables of ≥ %d pairs", widthLarge, nLarge, widthFrom)
	} else {
		fmt.Fprintf(&b, "no table of ≥ %d pairs", widthFrom)
	}
	return b.String(), ds, widthLarge, nLarge
}

// ivapCase is one (data set, model) of the protocol.
type ivapCase struct {
	data, model string
	path        string
	rows        int // per shuffle: a random subsample of this many rows (0: all)
	build       func(dim int) (online.Model, error)
	checkWidth  bool // judge the width of tables fitted on ≥ widthFrom pairs
}

// mamModel is the default mam (balanced, rbf random features, gamma auto),
// standardised online.
func mamModel(dim int) (online.Model, error) {
	m, err := online.NewMAM(dim, online.DefaultMAMParams())
	if err != nil {
		return nil, err
	}
	return online.Standardize(m), nil
}

// svmModel returns the refitted kernel SVM type (refit.SVMType: LIBSVM C-SVC,
// rbf, gamma 1/dim, C 1, guard 0.1), standardised, with a window of 2000
// labelled events refitted every `every` of them. Its refits run inline
// (the model is not started), so the stream is deterministic.
func svmModel(every int) func(dim int) (online.Model, error) {
	return func(dim int) (online.Model, error) {
		p := refit.DefaultSVMParams()
		p.Kernel.Gamma = 1 / float64(dim)
		p.Window.Events = 2000
		p.Refit.EveryEvents = every
		m, err := refit.SVMType().New(dim, &p)
		if err != nil {
			return nil, err
		}
		return online.Standardize(m), nil
	}
}

func runIVAPCase(t *testing.T, c ivapCase) {
	x, y := readCSV(t, c.path)
	judged := make([]*calibrator, shuffles)
	literal := make([]*calibrator, shuffles)
	parallel(shuffles, func(s int) {
		m, err := c.build(len(x[0]))
		if err != nil {
			panic(err)
		}
		judged[s], literal[s] = newCalibrator(true), newCalibrator(false)
		streamIVAP(m, x, y, order(len(x), uint64(s), c.rows), judged[s], literal[s])
	})
	var all, lit []outcome
	for s := range shuffles {
		all = append(all, judged[s].out...)
		lit = append(lit, literal[s].out...)
	}
	if len(all) == 0 {
		t.Fatal("no event scored with a fitted table")
	}
	name := c.data + " / " + c.model
	text, _, _, _ := table(name+", literal protocol (every pair of the window; not judged)", lit, false)
	t.Log(text)
	text, ds, widthLarge, nLarge := table(name+", the later half of the stream (judged)", all, true)
	t.Log(text)
	for i, d := range ds {
		if d.judged && !d.ok {
			t.Errorf("%s decile %d: observed rate %.4f outside [%.4f, %.4f] (%d events)", name, i, d.rate, d.allowLow, d.allowHigh, d.count)
		}
	}
	if c.checkWidth {
		if nLarge == 0 {
			t.Errorf("%s: no event scored by a table of ≥ %d pairs", name, widthFrom)
		} else if widthLarge > maxWidth {
			t.Errorf("%s: mean width %.4f > %v", name, widthLarge, maxWidth)
		}
	}
}

// TestIVAPValidity runs the protocol (see the constants) for mam and the
// refitted svm on breast_cancer, heart_scale and letter.
//
// What runs: mam on every row of each data set in 10 shuffles; svm (window
// 2000) on breast_cancer and heart_scale refitted every 50 labelled events
// (every 500 would leave them almost unscored), and on letter refitted
// every 500 events over a random subsample of 8000 of the 20 000 rows per
// shuffle (the full set would take a minute on two cores); svm is
// refit.SVMType with its defaults otherwise (rbf, gamma 1/dim, C 1, guard
// 0.1), refitting inline. The judged calibrator fits the later half of
// the stream (CopyRecentTo); the literal protocol's tables are logged
// beside. The width limit 0.05 is judged on letter only (the small sets
// never have a table of 1000 pairs; their widths are logged).
//
// IVAP_EXTRA=a.csv,b.csv adds data sets (features, then a ±1 label; a
// header row), mam and svm on each as on breast_cancer, and judged alike
// (docs/performance.md lists seven of R's mlbench: the
// online/testdata/mlbench_*.csv files and Satellite).
func TestIVAPValidity(t *testing.T) {
	cases := []ivapCase{
		{data: "breast_cancer", model: "mam", path: breastPath, build: mamModel},
		{data: "heart_scale", model: "mam", path: heartPath, build: mamModel},
		{data: "letter", model: "mam", path: letterPath, build: mamModel, checkWidth: true},
		{data: "breast_cancer", model: "svm", path: breastPath, build: svmModel(50)},
		{data: "heart_scale", model: "svm", path: heartPath, build: svmModel(50)},
		{data: "letter", model: "svm", path: letterPath, rows: 8000, build: svmModel(500), checkWidth: true},
	}
	if extra := os.Getenv("IVAP_EXTRA"); extra != "" {
		for _, path := range strings.Split(extra, ",") {
			name := strings.TrimSuffix(filepath.Base(path), ".csv")
			cases = append(cases,
				ivapCase{data: name, model: "mam", path: path, build: mamModel},
				ivapCase{data: name, model: "svm", path: path, build: svmModel(50)})
		}
	}
	for _, c := range cases {
		t.Run(c.data+"/"+c.model, func(t *testing.T) { runIVAPCase(t, c) })
	}
}
