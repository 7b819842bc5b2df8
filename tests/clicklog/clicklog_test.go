package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/online"
)

// hashedRow is one row's sparse hashed features and its label (±1).
type hashedRow struct {
	idx [6]int32
	val [6]float64
	y   float64
}

// hashRows reads the click log and hashes each row as the wire does: one
// feature per field (featureHash(field, value)) plus the device × category
// interaction (crossHash of the two fields' hashes).
func hashRows(t testing.TB, path string, n int) []hashedRow {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	rows := make([]hashedRow, 0, n)
	for len(rows) < n && sc.Scan() {
		p := strings.Split(sc.Text(), ",")
		if len(p) != 6 {
			t.Fatalf("row %d: %q", len(rows), sc.Text())
		}
		var r hashedRow
		var h [5]uint64
		for j, name := range fieldNames {
			h[j] = featureHash(name, p[j])
			r.idx[j], r.val[j] = hashEntry(h[j])
		}
		r.idx[5], r.val[5] = hashEntry(crossHash(h[interA], h[interB]))
		r.y = -1
		if p[5] == "1" {
			r.y = 1
		}
		rows = append(rows, r)
	}
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	return rows
}

// fitSparse streams passes over train through a sparse hashed logistic
// regression and returns its test log loss.
func fitSparse(train, test []hashedRow, p online.LogisticParams, passes int) float64 {
	m, err := online.NewLogistic(1<<hashBits, p)
	if err != nil {
		panic(err)
	}
	for range passes {
		for i := range train {
			r := &train[i]
			m.ObserveSparse(r.idx[:], r.val[:], r.y, true)
		}
	}
	return logLoss(m, test)
}

func logLoss(m *online.Logistic, test []hashedRow) float64 {
	var s float64
	for i := range test {
		r := &test[i]
		p := online.PeekSparse(m, r.idx[:], r.val[:]).Probability
		if r.y < 0 {
			p = 1 - p
		}
		s -= math.Log(max(p, 1e-15))
	}
	return s / float64(len(test))
}

// sklearnLogLoss runs sklearn_ref.py: LogisticRegression on the one-hot
// encoding of the same rows, for each C; it skips the test when python3
// or scikit-learn is missing.
func sklearnLogLoss(t *testing.T, path string, nTrain, nTest int, cs ...float64) map[float64]float64 {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s: the scikit-learn reference is not run", py)
	}
	args := []string{"sklearn_ref.py", path, strconv.Itoa(nTrain), strconv.Itoa(nTest)}
	for _, c := range cs {
		args = append(args, strconv.FormatFloat(c, 'g', -1, 64))
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(py, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 3 {
			t.Skipf("scikit-learn missing: %s", strings.TrimSpace(out.String()))
		}
		t.Fatalf("sklearn_ref.py: %v\n%s%s", err, out.String(), errb.String())
	}
	res := map[float64]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var c, ll float64
		if _, err := fmt.Sscan(line, &c, &ll); err != nil {
			t.Fatalf("sklearn_ref.py output %q: %v", line, err)
		}
		res[c] = ll
	}
	return res
}

// TestClickLogVsSklearn (issue 17, Done-when 1, first half): one pass of
// the sparse hashed logistic regression (online.Logistic.ObserveSparse, the
// default parameters η = 0.1, L2 = 1e-4, 2^18 hashed dimensions) over the
// first 200 000 rows of the synthetic click log (seed 1), test log loss on
// the next 50 000, against scikit-learn's LogisticRegression (lbfgs) on the
// one-hot encoding of the same five fields plus the device × category
// interaction, with C = 1/(n·L2) (the same penalty: ours is L2/2·‖w‖² per
// example) and with sklearn's default C = 1: within 0.01 of both.
//
//	go test ./tests/clicklog -run VsSklearn -v                   # 200k/50k, ~11 s
//	CLICKLOG_FULL=1 go test ./tests/clicklog -run VsSklearn -v   # 800k/200k of 1M, ~60 s
//
// Figures (seed 1; true probabilities / training click rate / ours one
// pass / sklearn C matched / sklearn C = 1):
//
//	200k/50k:  0.4355 / 0.4911 / 0.4579 / 0.4561 (C 0.05)   / 0.4580
//	800k/200k: 0.4352 / 0.4915 / 0.4562 / 0.4554 (C 0.0125) / 0.4496
//
// One pass suffices; on 200k rows a grid of η ∈ {0.05, 0.1, 0.2, 0.5},
// L2 ∈ {0, 1e-6, 1e-5, 1e-4} gave 0.4540–0.4722 in one pass (0.4533 at
// best in three), sklearn's best C over {0.05, …, 5} 0.4525 (C = 0.3).
func TestClickLogVsSklearn(t *testing.T) {
	nTrain, nTest := 200000, 50000
	if os.Getenv("CLICKLOG_FULL") != "" {
		nTrain, nTest = 800000, 200000
	}
	path := filepath.Join(t.TempDir(), "clicks.csv")
	if err := run(path, nTrain+nTest, 1); err != nil {
		t.Fatal(err)
	}
	rows := hashRows(t, path, nTrain+nTest)
	train, test := rows[:nTrain], rows[nTrain:]

	// Reference points: the true probabilities and the training click rate.
	g := newGenerator(1)
	var bayes, clicks float64
	for i := range nTrain + nTest {
		_, c, p := g.row()
		if c != (rows[i].y > 0) {
			t.Fatalf("row %d: the generator does not replay the file", i)
		}
		switch {
		case i < nTrain:
			if c {
				clicks++
			}
		case c:
			bayes -= math.Log(p)
		default:
			bayes -= math.Log(1 - p)
		}
	}
	rate := clicks / float64(nTrain)
	var constant float64
	for _, r := range test {
		if r.y > 0 {
			constant -= math.Log(rate)
		} else {
			constant -= math.Log(1 - rate)
		}
	}
	t.Logf("%d training, %d test rows: log loss of the true probabilities %.4f, of the training click rate %.4f",
		nTrain, nTest, bayes/float64(nTest), constant/float64(nTest))

	p := online.LogisticParams{LearningRate: online.DefaultLearningRate, L2: online.DefaultL2}
	start := time.Now()
	ours := fitSparse(train, test, p, 1)
	t.Logf("sparse hashed logistic (η %g, L2 %g, 2^%d dims), one pass: test log loss %.4f (%v)", p.LearningRate, p.L2, hashBits, ours, time.Since(start))

	matched := 1 / (float64(nTrain) * p.L2)
	start = time.Now()
	ref := sklearnLogLoss(t, path, nTrain, nTest, matched, 1)
	t.Logf("sklearn LogisticRegression one-hot: C = %g (matched) %.4f, C = 1 %.4f (%v)", matched, ref[matched], ref[1], time.Since(start))
	for _, c := range []float64{matched, 1} {
		ll, ok := ref[c]
		if !ok {
			t.Fatalf("no sklearn figure for C = %g: %v", c, ref)
		}
		if d := math.Abs(ours - ll); !(d <= 0.01) {
			t.Errorf("C = %g: |%.4f − %.4f| = %.4f > 0.01", c, ours, ll, d)
		}
	}
}
