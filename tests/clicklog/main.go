// Command clicklog writes a synthetic click log, the reference data of
// issue 17 (hashed categorical features):
//
//	go run ./tests/clicklog -n 1000000 -seed 1 -out clicks.csv
//
// Each row is an impression with five categorical fields and its label:
//
//	country,device,category,user,item,click
//
// drawn Zipf-like (a few values most of the time, a long tail): country 10
// values, device 50, category 1 000, user 100 000, item 10 000. The click
// probability is σ(logit) with
//
//	logit = −1.6 + a[device][category] + small main effects of all five fields
//
// where the interaction a (device × category, N(0, 0.8²)) carries most of
// the signal and the main effects are N(0, 0.15²) (user N(0, 0.3²)). The
// log is a pure function of -n and -seed. The package's test
// (clicklog_test.go) fits the sparse hashed logistic regression of package
// online and scikit-learn's LogisticRegression on the same rows.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
)

// fieldNames are the categorical fields, in column order.
var fieldNames = [5]string{"country", "device", "category", "user", "item"}

// cardinality of each field.
var cardinality = [5]int{10, 50, 1000, 100000, 10000}

// zipfS is each field's Zipf exponent (P(k) ∝ (1+k)^-s).
var zipfS = [5]float64{1.5, 1.3, 1.1, 1.05, 1.1}

// mainSD is the standard deviation of each field's main effects.
var mainSD = [5]float64{0.15, 0.15, 0.15, 0.3, 0.15}

const (
	baseLogit = -1.6
	interSD   = 0.8 // device × category
	interA    = 1   // device
	interB    = 2   // category
)

// generator draws rows; its effects are fixed by the seed.
type generator struct {
	rng   *rand.Rand
	zipf  [5]*rand.Zipf
	main  [5][]float64
	inter []float64 // [device*1000 + category]
	perm  [5][]int  // rank → value id, so that value ids carry no order
}

func newGenerator(seed uint64) *generator {
	g := &generator{rng: rand.New(rand.NewPCG(seed, 0x636c69636b))}
	eff := rand.New(rand.NewPCG(seed, 0x656666656374))
	for f := range fieldNames {
		g.zipf[f] = rand.NewZipf(g.rng, zipfS[f], 1, uint64(cardinality[f]-1))
		g.main[f] = make([]float64, cardinality[f])
		for i := range g.main[f] {
			g.main[f][i] = mainSD[f] * eff.NormFloat64()
		}
		g.perm[f] = eff.Perm(cardinality[f])
	}
	g.inter = make([]float64, cardinality[interA]*cardinality[interB])
	for i := range g.inter {
		g.inter[i] = interSD * eff.NormFloat64()
	}
	return g
}

// row draws one impression: the five value ids, the click, and the true
// click probability.
func (g *generator) row() (v [5]int, click bool, p float64) {
	z := baseLogit
	for f := range fieldNames {
		v[f] = g.perm[f][g.zipf[f].Uint64()]
		z += g.main[f][v[f]]
	}
	z += g.inter[v[interA]*cardinality[interB]+v[interB]]
	p = 1 / (1 + math.Exp(-z))
	return v, g.rng.Float64() < p, p
}

// generate writes n rows with a header.
func generate(w io.Writer, n int, seed uint64) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	fmt.Fprintf(bw, "%s,%s,%s,%s,%s,click\n", fieldNames[0], fieldNames[1], fieldNames[2], fieldNames[3], fieldNames[4])
	g := newGenerator(seed)
	var buf []byte
	for range n {
		v, click, _ := g.row()
		buf = buf[:0]
		for _, x := range v {
			buf = strconv.AppendInt(buf, int64(x), 10)
			buf = append(buf, ',')
		}
		if click {
			buf = append(buf, '1', '\n')
		} else {
			buf = append(buf, '0', '\n')
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func main() {
	n := flag.Int("n", 1000000, "number of rows")
	seed := flag.Uint64("seed", 1, "random seed")
	out := flag.String("out", "-", "output CSV file (- for standard output)")
	flag.Parse()
	if err := run(*out, *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "clicklog:", err)
		os.Exit(1)
	}
}

func run(out string, n int, seed uint64) error {
	if out == "-" {
		return generate(os.Stdout, n, seed)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := generate(f, n, seed); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
