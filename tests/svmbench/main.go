// Command svmbench times online/svm's Train against LIBSVM's svm-train on the first 2 000, 5 000
// and 10 000 rows of the UCI letter data (z-scored, labels ±1, rbf, C = 1, gamma = 1/d, eps 1e-3,
// cache 100 MB) and prints a Markdown table. Run from the repository root:
//
//	go run ./tests/svmbench [-sizes 2000,5000,10000] [-data tests/svmbench/testdata/letter.csv]
//
// svm-train's wall time includes reading its input file, as in the shared reference figures;
// ours starts from rows in memory. CPU columns (user+system time, min over -reps) are printed too
// because wall time is unreliable on a loaded machine. Without svm-train on PATH its columns read "–".
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/streamer/streamer/online/svm"
)

func main() {
	data := flag.String("data", "tests/svmbench/testdata/letter.csv", "letter CSV (header, features, label last)")
	sizes := flag.String("sizes", "2000,5000,10000", "comma-separated row counts")
	reps := flag.Int("reps", 1, "repetitions per size (the minimum time is reported)")
	flag.Parse()

	X, y, err := readCSV(*data)
	if err != nil {
		log.Fatal(err)
	}
	trainBin, lookErr := exec.LookPath("svm-train")
	if lookErr != nil {
		fmt.Fprintln(os.Stderr, "svm-train not found on PATH (Debian package libsvm-tools): its columns are skipped")
	}
	dir, err := os.MkdirTemp("", "svmbench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	fmt.Println("| rows | ours (s) | svm-train (s) | ratio | ours CPU (s) | svm-train CPU (s) | CPU ratio | obj ours | obj svm-train | nSV ours | nSV svm-train | iter ours | iter svm-train |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > len(X) {
			log.Fatalf("bad size %q (data has %d rows)", f, len(X))
		}
		Xn := make([][]float64, n)
		for i := range Xn {
			Xn[i] = append([]float64(nil), X[i]...)
		}
		zscore(Xn)
		yn := y[:n]
		d := len(Xn[0])
		gamma := 1 / float64(d)
		p := svm.Params{Kernel: svm.Kernel{Type: svm.RBF, Gamma: gamma}, C: 1, Eps: 1e-3, CacheBytes: 100 << 20}

		ours, oursCPU := math.Inf(1), math.Inf(1)
		var m *svm.Model
		for r := 0; r < *reps; r++ {
			runtime.GC()
			c0 := cpuSelf()
			t0 := time.Now()
			m, err = svm.Train(context.Background(), Xn, yn, p, nil)
			if err != nil {
				log.Fatal(err)
			}
			ours = min(ours, time.Since(t0).Seconds())
			oursCPU = min(oursCPU, cpuSelf()-c0)
		}
		row := fmt.Sprintf("| %d | %.3f |", n, ours)
		if lookErr != nil {
			row += fmt.Sprintf(" – | – | %.3f | – | – | %.4f | – | %d | – | %d | – |", oursCPU, m.Obj, m.NSV(), m.Iter)
			fmt.Println(row)
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("letter%d", n))
		if err := os.WriteFile(path, libsvmFormat(Xn, yn), 0o644); err != nil {
			log.Fatal(err)
		}
		lib, libCPU := math.Inf(1), math.Inf(1)
		var out []byte
		for r := 0; r < *reps; r++ {
			cmd := exec.Command(trainBin, "-s", "0", "-t", "2", "-c", "1",
				"-g", strconv.FormatFloat(gamma, 'g', -1, 64), "-e", "0.001", "-m", "100", path, path+".model")
			t0 := time.Now()
			out, err = cmd.Output()
			if err != nil {
				log.Fatalf("svm-train: %v", err)
			}
			lib = min(lib, time.Since(t0).Seconds())
			libCPU = min(libCPU, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds())
		}
		obj, nsv, iter := parse(out)
		row += fmt.Sprintf(" %.3f | %.2f | %.3f | %.3f | %.2f | %.4f | %.4f | %d | %d | %d | %d |",
			lib, ours/lib, oursCPU, libCPU, oursCPU/libCPU, m.Obj, obj, m.NSV(), nsv, m.Iter, iter)
		fmt.Println(row)
	}
}

// cpuSelf returns this process's user+system CPU time in seconds.
func cpuSelf() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func readCSV(path string) (X [][]float64, y []float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(bufio.NewReader(f)).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	for _, r := range recs[1:] {
		row := make([]float64, len(r)-1)
		for j := range row {
			if row[j], err = strconv.ParseFloat(r[j], 64); err != nil {
				return nil, nil, err
			}
		}
		lab, err := strconv.ParseFloat(r[len(r)-1], 64)
		if err != nil {
			return nil, nil, err
		}
		X = append(X, row)
		y = append(y, lab)
	}
	return X, y, nil
}

// zscore standardises the columns of X in place (mean 0, standard deviation 1, n−1).
func zscore(X [][]float64) {
	n := float64(len(X))
	for j := range X[0] {
		var m, s float64
		for _, x := range X {
			m += x[j]
		}
		m /= n
		for _, x := range X {
			s += (x[j] - m) * (x[j] - m)
		}
		s = math.Sqrt(s / (n - 1))
		if s == 0 {
			s = 1
		}
		for _, x := range X {
			x[j] = (x[j] - m) / s
		}
	}
}

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

func parse(out []byte) (obj float64, nsv, iter int) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		s := string(line)
		var rho float64
		var nbsv int
		fmt.Sscanf(s, "obj = %g, rho = %g", &obj, &rho)
		fmt.Sscanf(s, "nSV = %d, nBSV = %d", &nsv, &nbsv)
		fmt.Sscanf(s, "optimization finished, #iter = %d", &iter)
	}
	return obj, nsv, iter
}
