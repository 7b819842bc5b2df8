// Command rankbench times the exact kernel ranking refit of online/rank
// against scikit-learn's KernelRidge.fit on the same data and machine, and
// prints a Markdown table:
//
//	go run ./tests/rankbench                 # m = 2000, 4000
//	go run ./tests/rankbench -m 1000,2000 -reps 3
//
// The data are synthetic (d = 13, y = Σ sin((j+1)·x_j) + noise, seeded),
// written to a temporary CSV that both sides read. Go times rank.Fit (the
// kernel matrix and one Cholesky solve, as sklearn's fit does) for KRR,
// (K + λI)α = y — the same system as KernelRidge — and for LSRRank, the
// centred system. The Python side (time_sklearn.py) runs when python3 with
// scikit-learn is found (-python picks the interpreter); otherwise its
// column says "n/a". Golden values for the package tests come from
// golden.py in this directory.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/streamer/streamer/online/rank"
)

func main() {
	sizes := flag.String("m", "2000,4000", "comma-separated training sizes")
	reps := flag.Int("reps", 3, "repetitions (best time is reported)")
	gamma := flag.Float64("gamma", 0.05, "RBF gamma")
	lambda := flag.Float64("lambda", 1e-3, "λ (KernelRidge alpha for KRR; LSRRank λ)")
	python := flag.String("python", "", "python3 with scikit-learn (default: search python3 in PATH, then /usr/bin/python3)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the Go fits to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var ms []int
	for _, s := range strings.Split(*sizes, ",") {
		m, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || m < 2 {
			log.Fatalf("bad size %q", s)
		}
		ms = append(ms, m)
	}
	const d = 13
	maxM := 0
	for _, m := range ms {
		maxM = max(maxM, m)
	}
	X, y := synth(maxM, d)
	dir, err := os.MkdirTemp("", "rankbench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	csvPath := filepath.Join(dir, "data.csv")
	if err := writeCSV(csvPath, X, y, d); err != nil {
		log.Fatal(err)
	}
	py := findPython(*python)
	script := scriptPath()

	fmt.Printf("exact refit, d = %d, rbf γ = %g, λ = %g, best of %d; GOMAXPROCS %d, %s/%s\n\n",
		d, *gamma, *lambda, *reps, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	fmt.Println("| m | Go KRR fit | Go LSRRank fit | sklearn KernelRidge.fit | Go KRR / sklearn |")
	fmt.Println("|---:|---:|---:|---:|---:|")
	for _, m := range ms {
		krr := timeFit(X[:m*d], y[:m], d, rank.Config{Method: rank.KRR, Kernels: []rank.Kernel{{Gamma: *gamma}}, Lambda: *lambda}, *reps)
		lsr := timeFit(X[:m*d], y[:m], d, rank.Config{Method: rank.LSRRank, Kernels: []rank.Kernel{{Gamma: *gamma}}, Lambda: *lambda}, *reps)
		sk, ratio := "n/a", "n/a"
		if py != "" {
			if s, err := sklearnTime(py, script, csvPath, m, *gamma, *lambda, *reps); err != nil {
				log.Printf("sklearn timing: %v", err)
			} else {
				sk, ratio = fmtDur(s), fmt.Sprintf("%.2f×", krr.Seconds()/s.Seconds())
			}
		}
		fmt.Printf("| %d | %s | %s | %s | %s |\n", m, fmtDur(krr), fmtDur(lsr), sk, ratio)
	}
}

func synth(m, d int) ([]float64, []float64) {
	r := rand.New(rand.NewPCG(2024, 13))
	X, y := make([]float64, m*d), make([]float64, m)
	for i := range m {
		var s float64
		for j := range d {
			X[i*d+j] = r.NormFloat64()
			s += math.Sin(float64(j+1) * X[i*d+j])
		}
		y[i] = s + 0.3*r.NormFloat64()
	}
	return X, y
}

func writeCSV(path string, X, y []float64, d int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for j := range d {
		fmt.Fprintf(w, "x%d,", j+1)
	}
	fmt.Fprintln(w, "y")
	for i := range y {
		for j := range d {
			w.WriteString(strconv.FormatFloat(X[i*d+j], 'g', -1, 64))
			w.WriteByte(',')
		}
		w.WriteString(strconv.FormatFloat(y[i], 'g', -1, 64))
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func timeFit(X, y []float64, d int, cfg rank.Config, reps int) time.Duration {
	best := time.Duration(math.MaxInt64)
	for range reps {
		start := time.Now()
		if _, err := rank.Fit(context.Background(), X, d, y, cfg); err != nil {
			log.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

func findPython(flagged string) string {
	cands := []string{flagged}
	if flagged == "" {
		p, _ := exec.LookPath("python3")
		cands = []string{p, "/usr/bin/python3"}
	}
	for _, p := range cands {
		if p != "" && exec.Command(p, "-c", "import sklearn").Run() == nil {
			return p
		}
	}
	return ""
}

// scriptPath finds time_sklearn.py next to this source file (go run from
// the module root or from this directory).
func scriptPath() string {
	for _, p := range []string{"tests/rankbench/time_sklearn.py", "time_sklearn.py"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "tests/rankbench/time_sklearn.py"
}

func sklearnTime(py, script, csvPath string, m int, gamma, alpha float64, reps int) (time.Duration, error) {
	out, err := exec.Command(py, script, csvPath, strconv.Itoa(m), fmt.Sprint(gamma), fmt.Sprint(alpha), strconv.Itoa(reps)).Output()
	if err != nil {
		return 0, err
	}
	var r struct{ Seconds float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	return time.Duration(r.Seconds * float64(time.Second)), nil
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
