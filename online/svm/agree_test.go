package svm

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// agreeCase is one row of testdata/golden/golden.tsv (see tests/svmbench/make_golden.sh).
type agreeCase struct {
	name, train, test, kernel string
	c, gamma, obj, rho        float64
	nsv, nbsv, iter           int
	firstLabelPos             bool
}

func readGolden(t *testing.T) []agreeCase {
	t.Helper()
	f, err := os.Open("testdata/golden/golden.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []agreeCase
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		r := strings.Split(sc.Text(), "\t")
		if len(r) != 12 {
			t.Fatalf("golden.tsv: bad row %q", sc.Text())
		}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		out = append(out, agreeCase{
			name: r[0], train: r[1], test: r[2], kernel: r[3], c: num(r[4]), gamma: num(r[5]),
			obj: num(r[6]), rho: num(r[7]), nsv: int(num(r[8])), nbsv: int(num(r[9])),
			firstLabelPos: strings.HasPrefix(r[10], "1"), iter: int(num(r[11])),
		})
	}
	return out
}

// csvFor maps the LIBSVM file names of golden.tsv to the CSV copies of the same data.
func csvFor(name string) string {
	if name == "heart_scale" {
		return "heart_scale.csv"
	}
	return name + ".csv"
}

func (c agreeCase) params() Params {
	p := Params{C: c.c}
	if c.kernel == "rbf" {
		p.Kernel = Kernel{Type: RBF, Gamma: c.gamma}
	}
	return p
}

func readPred(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, s := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// compareWithLibsvm trains on c and checks the acceptance criteria against LIBSVM's figures.
func compareWithLibsvm(t *testing.T, c agreeCase, pred []float64) {
	X, y := loadCSV(t, csvFor(c.train))
	Xt, _ := loadCSV(t, csvFor(c.test))
	m, err := Train(context.Background(), X, y, c.params(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rho := c.rho
	if !c.firstLabelPos {
		rho = -rho
	}
	if len(pred) != len(Xt) {
		t.Fatalf("%d predictions for %d test rows", len(pred), len(Xt))
	}
	agree := 0
	for i, x := range Xt {
		if m.Predict(x) == pred[i] {
			agree++
		}
	}
	frac := float64(agree) / float64(len(Xt))
	relObj := math.Abs(m.Obj-c.obj) / math.Abs(c.obj)
	t.Logf("%-15s obj %.6f vs %.6f (rel %.1e)  rho %.6f vs %.6f  nSV %d vs %d  nBSV %d vs %d  iter %d vs %d  agree %.4f",
		c.name, m.Obj, c.obj, relObj, m.Rho(), rho, m.NSV(), c.nsv, m.NBSV, c.nbsv, m.Iter, c.iter, frac)
	if relObj > 1e-3 {
		t.Errorf("%s: dual objective %v, LIBSVM %v (relative difference %.2e > 1e-3)", c.name, m.Obj, c.obj, relObj)
	}
	if d := math.Abs(float64(m.NSV() - c.nsv)); d > 0.02*float64(c.nsv) {
		t.Errorf("%s: nSV %d, LIBSVM %d (more than 2%% apart)", c.name, m.NSV(), c.nsv)
	}
	if frac < 0.995 {
		t.Errorf("%s: predictions agree with svm-predict on %.4f of the test rows < 0.995", c.name, frac)
	}
}

// TestAgreementGolden compares with svm-train/svm-predict's answers recorded in testdata/golden
// by tests/svmbench/make_golden.sh. heart_scale has no test split: its training set is the test
// set; ripley uses its given test set.
func TestAgreementGolden(t *testing.T) {
	for _, c := range readGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			compareWithLibsvm(t, c, readPred(t, filepath.Join("testdata/golden", c.name+".pred")))
		})
	}
}

// TestAgreementLive re-runs svm-train and svm-predict on the golden cases when they are installed.
func TestAgreementLive(t *testing.T) {
	train, err1 := exec.LookPath("svm-train")
	predict, err2 := exec.LookPath("svm-predict")
	if err1 != nil || err2 != nil {
		t.Skip("svm-train/svm-predict (Debian package libsvm-tools) not installed")
	}
	dir := t.TempDir()
	writeSVM := func(name string) string {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
		X, y := loadCSV(t, csvFor(name))
		if err := os.WriteFile(path, libsvmFormat(X, y), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range readGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			tr, te := writeSVM(c.train), writeSVM(c.test)
			model := filepath.Join(dir, c.name+".model")
			args := []string{"-s", "0", "-c", fmt.Sprint(c.c), "-e", "0.001", "-m", "100", "-h", "1"}
			if c.kernel == "rbf" {
				args = append(args, "-t", "2", "-g", strconv.FormatFloat(c.gamma, 'g', -1, 64))
			} else {
				args = append(args, "-t", "0")
			}
			out, err := exec.Command(train, append(args, tr, model)...).Output()
			if err != nil {
				t.Fatal(err)
			}
			live := c
			if live.obj, live.rho, live.nsv, live.nbsv, live.iter, err = parseTrainOutput(string(out)); err != nil {
				t.Fatal(err)
			}
			lab, _ := os.ReadFile(model)
			live.firstLabelPos = strings.Contains(string(lab), "\nlabel 1 ")
			predFile := filepath.Join(dir, c.name+".pred")
			if err := exec.Command(predict, te, model, predFile).Run(); err != nil {
				t.Fatal(err)
			}
			compareWithLibsvm(t, live, readPred(t, predFile))
		})
	}
}

// libsvmFormat writes rows in LIBSVM's sparse text format, every feature included.
func libsvmFormat(X [][]float64, y []float64) []byte {
	var b []byte
	for i, x := range X {
		b = strconv.AppendFloat(b, y[i], 'g', -1, 64)
		for j, v := range x {
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(j+1), 10)
			b = append(b, ':')
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, '\n')
	}
	return b
}

// parseTrainOutput reads obj, rho, nSV, nBSV and #iter from svm-train's output.
func parseTrainOutput(s string) (obj, rho float64, nsv, nbsv, iter int, err error) {
	found := 0
	for _, line := range strings.Split(s, "\n") {
		if _, e := fmt.Sscanf(line, "obj = %g, rho = %g", &obj, &rho); e == nil {
			found++
		}
		if _, e := fmt.Sscanf(line, "nSV = %d, nBSV = %d", &nsv, &nbsv); e == nil {
			found++
		}
		if _, e := fmt.Sscanf(line, "optimization finished, #iter = %d", &iter); e == nil {
			found++
		}
	}
	if found != 3 {
		err = fmt.Errorf("svm-train output not understood: %q", s)
	}
	return
}

// TestAgreementLiveExtra covers per-class C (svm-train -w) and the polynomial and sigmoid
// kernels against a live svm-train on heart_scale (training set as test set).
func TestAgreementLiveExtra(t *testing.T) {
	train, err1 := exec.LookPath("svm-train")
	predict, err2 := exec.LookPath("svm-predict")
	if err1 != nil || err2 != nil {
		t.Skip("svm-train/svm-predict (Debian package libsvm-tools) not installed")
	}
	dir := t.TempDir()
	X, y := loadCSV(t, "heart_scale.csv")
	data := filepath.Join(dir, "heart")
	if err := os.WriteFile(data, libsvmFormat(X, y), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		p    Params
	}{
		{"rbf_weighted", []string{"-t", "2", "-g", "0.2", "-c", "2", "-w1", "3", "-w-1", "0.5"},
			Params{Kernel: Kernel{Type: RBF, Gamma: 0.2}, C: 2, CPos: 6, CNeg: 1}},
		{"poly3", []string{"-t", "1", "-d", "3", "-g", "0.1", "-r", "1", "-c", "1"},
			Params{Kernel: Kernel{Type: Polynomial, Gamma: 0.1, Coef0: 1, Degree: 3}, C: 1}},
		{"sigmoid", []string{"-t", "3", "-g", "0.01", "-r", "-0.5", "-c", "1"},
			Params{Kernel: Kernel{Type: Sigmoid, Gamma: 0.01, Coef0: -0.5}, C: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			model := filepath.Join(dir, c.name+".model")
			out, err := exec.Command(train, append(c.args, "-e", "0.001", "-m", "100", data, model)...).Output()
			if err != nil {
				t.Fatal(err)
			}
			ac := agreeCase{name: c.name, firstLabelPos: true}
			if ac.obj, ac.rho, ac.nsv, ac.nbsv, ac.iter, err = parseTrainOutput(string(out)); err != nil {
				t.Fatal(err)
			}
			predFile := filepath.Join(dir, c.name+".pred")
			if err := exec.Command(predict, data, model, predFile).Run(); err != nil {
				t.Fatal(err)
			}
			pred := readPred(t, predFile)
			m, err := Train(context.Background(), X, y, c.p, nil)
			if err != nil {
				t.Fatal(err)
			}
			agree := 0
			for i, x := range X {
				if m.Predict(x) == pred[i] {
					agree++
				}
			}
			frac := float64(agree) / float64(len(X))
			rel := math.Abs(m.Obj-ac.obj) / math.Abs(ac.obj)
			t.Logf("%-13s obj %.6f vs %.6f (rel %.1e)  rho %.6f vs %.6f  nSV %d vs %d  iter %d vs %d  agree %.4f",
				c.name, m.Obj, ac.obj, rel, m.Rho(), ac.rho, m.NSV(), ac.nsv, m.Iter, ac.iter, frac)
			if rel > 1e-3 || math.Abs(float64(m.NSV()-ac.nsv)) > 0.02*float64(ac.nsv) || frac < 0.995 {
				t.Errorf("%s: disagrees with svm-train", c.name)
			}
		})
	}
}
