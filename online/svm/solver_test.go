package svm

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamer/streamer/online/internal/sparse"
)

func TestKernelEval(t *testing.T) {
	a, b := []float64{1, 2, 0}, []float64{0.5, -1, 3}
	// <a,b> = 0.5 − 2 + 0 = −1.5; ‖a − b‖² = 0.25 + 9 + 9 = 18.25.
	cases := []struct {
		k    Kernel
		want float64
	}{
		{Kernel{Type: Linear}, -1.5},
		{Kernel{Type: Polynomial, Gamma: 2, Coef0: 1, Degree: 3}, -8}, // (−3 + 1)³
		{Kernel{Type: RBF, Gamma: 0.1}, math.Exp(-1.825)},
		{Kernel{Type: Laplacian, Gamma: 0.1}, math.Exp(-0.1 * math.Sqrt(18.25))},
		{Kernel{Type: Sigmoid, Gamma: 0.5, Coef0: 0.25}, math.Tanh(-0.5)},
	}
	for _, c := range cases {
		if got := c.k.Eval(a, b); math.Abs(got-c.want) > 1e-14 {
			t.Errorf("%v: K = %v, want %v", c.k.Type, got, c.want)
		}
	}
}

// TestOtherKernels trains with the kernels without golden files and checks the KKT conditions
// through Decision: y_i f(x_i) ≥ 1 − eps for α_i = 0, ≤ 1 + eps for α_i = C, ≈ 1 for free α_i.
func TestOtherKernels(t *testing.T) {
	X, y := loadCSV(t, "heart_scale.csv")
	for _, k := range []Kernel{
		{Type: Polynomial, Gamma: 1.0 / 13, Coef0: 1, Degree: 3},
		{Type: Laplacian, Gamma: 0.3},
		{Type: Sigmoid, Gamma: 0.01, Coef0: -0.5},
		{Type: RBF, Gamma: 0.2},
	} {
		m, err := Train(context.Background(), X, y, Params{Kernel: k, C: 2, CNeg: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sumAY float64
		viol := 0.0
		for i, x := range X {
			a := m.Alpha[i]
			c := 2.0
			if y[i] < 0 {
				c = 1
			}
			sumAY += a * y[i]
			if a < 0 || a > c {
				t.Fatalf("%v: α_%d = %v outside [0, %v]", k.Type, i, a, c)
			}
			yf := y[i] * m.Decision(x)
			switch {
			case a == 0:
				viol = max(viol, 1-yf)
			case a == c:
				viol = max(viol, yf-1)
			default:
				viol = max(viol, math.Abs(yf-1))
			}
		}
		t.Logf("%-10v obj %.4f nSV %d nBSV %d iter %d, max KKT violation %.2e", k.Type, m.Obj, m.NSV(), m.NBSV, m.Iter, viol)
		if math.Abs(sumAY) > 1e-9 {
			t.Errorf("%v: Σα y = %v", k.Type, sumAY)
		}
		if viol > 2e-3 && k.Type != Sigmoid { // eps bounds the violation of the pair (m(α) − M(α) < eps)
			t.Errorf("%v: KKT violation %v", k.Type, viol)
		}
	}
}

func TestW2(t *testing.T) {
	X, y := loadCSV(t, "ripley_train.csv")
	k := Kernel{Type: RBF, Gamma: 3}
	m, err := Train(context.Background(), X, y, Params{Kernel: k, C: 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var w2 float64
	for i, a := range m.SV {
		for j, b := range m.SV {
			w2 += m.Coef[i] * m.Coef[j] * k.Eval(a, b)
		}
	}
	if rel := math.Abs(m.W2()-w2) / w2; rel > 1e-5 {
		t.Errorf("W2() = %v, direct Σ = %v (rel %.1e)", m.W2(), w2, rel)
	}
}

func TestWarmStart(t *testing.T) {
	X, y := loadCSV(t, "heart_scale.csv")
	p := Params{Kernel: Kernel{Type: RBF, Gamma: 0.2}, C: 4}
	cold, err := Train(context.Background(), X, y, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	warm, err := Train(context.Background(), X, y, p, cold.Alpha)
	if err != nil {
		t.Fatal(err)
	}
	if warm.Iter > cold.Iter/10 || math.Abs(warm.Obj-cold.Obj) > 1e-6*math.Abs(cold.Obj) {
		t.Errorf("warm start from the solution: %d iterations (cold %d), obj %v vs %v", warm.Iter, cold.Iter, warm.Obj, cold.Obj)
	}
	// An infeasible start (out of the box, unbalanced) is projected and still converges.
	bad := make([]float64, len(y))
	for i := range bad {
		bad[i] = float64(i%7) - 1
	}
	m, err := Train(context.Background(), X, y, p, bad)
	if err != nil {
		t.Fatal(err)
	}
	if rel := math.Abs(m.Obj-cold.Obj) / math.Abs(cold.Obj); rel > 1e-3 {
		t.Errorf("from an infeasible start: obj %v, cold %v", m.Obj, cold.Obj)
	}
	c := make([]float64, len(y))
	for i := range c {
		c[i] = 4
	}
	ProjectFeasible(bad, y, c)
	var s float64
	for i, a := range bad {
		if a < 0 || a > 4 {
			t.Fatalf("projected α_%d = %v", i, a)
		}
		s += a * y[i]
	}
	if math.Abs(s) > 1e-9 {
		t.Errorf("projected Σα y = %v", s)
	}
}

func TestCancel(t *testing.T) {
	X, y := loadCSV(t, "heart_scale.csv")
	p := Params{Kernel: Kernel{Type: Linear}, C: 1000}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if m, err := Train(ctx, X, y, p, nil); !errors.Is(err, context.Canceled) || m != nil {
		t.Fatalf("cancelled before: model %v, err %v", m, err)
	}
	// Mid-solve: random labels on 4 000 random points need many thousand
	// iterations over 4 000-long kernel rows (seconds), far past the deadline.
	r := rand.New(rand.NewPCG(1, 2))
	X, y = make([][]float64, 4000), make([]float64, 4000)
	for i := range X {
		X[i] = []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		y[i] = float64(2*r.IntN(2) - 1)
	}
	p = Params{Kernel: Kernel{Type: RBF, Gamma: 2}, C: 1e4, Eps: 1e-6}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	m, err := Train(ctx, X, y, p, nil)
	if err == nil {
		t.Fatalf("a hard problem finished before the 20 ms deadline (%v, %d iterations): the test needs a harder one", time.Since(t0), m.Iter)
	}
	if !errors.Is(err, context.DeadlineExceeded) || m != nil {
		t.Fatalf("model %v, err %v", m, err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("returned %v after the deadline", d)
	}
}

func TestTrainErrors(t *testing.T) {
	ctx := context.Background()
	X := [][]float64{{0}, {1}}
	for name, f := range map[string]func() error{
		"empty":     func() error { _, err := Train(ctx, nil, nil, Params{}, nil); return err },
		"labels":    func() error { _, err := Train(ctx, X, []float64{1, 0}, Params{}, nil); return err },
		"one class": func() error { _, err := Train(ctx, X, []float64{1, 1}, Params{}, nil); return err },
		"gamma": func() error {
			_, err := Train(ctx, X, []float64{1, -1}, Params{Kernel: Kernel{Type: RBF}}, nil)
			return err
		},
		"C": func() error { _, err := Train(ctx, X, []float64{1, -1}, Params{C: -1}, nil); return err },
		"NaN": func() error {
			_, err := Train(ctx, [][]float64{{0}, {math.NaN()}}, []float64{1, -1}, Params{}, nil)
			return err
		},
		"ragged": func() error {
			_, err := Train(ctx, [][]float64{{0}, {1, 2}}, []float64{1, -1}, Params{}, nil)
			return err
		},
		"weights": func() error {
			_, err := TrainWeighted(ctx, X, []float64{1, -1}, []float64{1, 0}, Params{}, nil)
			return err
		},
		"warm len": func() error { _, err := Train(ctx, X, []float64{1, -1}, Params{}, []float64{1}); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSmallCache forces evictions and given-up rows: the answer must not change.
func TestSmallCache(t *testing.T) {
	X, y := loadCSV(t, "heart_scale.csv")
	p := Params{Kernel: Kernel{Type: RBF, Gamma: 0.5}, C: 10}
	big, err := Train(context.Background(), X, y, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.CacheBytes = 1 // clamps to LIBSVM's minimum of 2l entries: two rows
	small, err := Train(context.Background(), X, y, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.NoShrinking = true
	noShrink, err := Train(context.Background(), X, y, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Model{small, noShrink} {
		if math.Abs(m.Obj-big.Obj) > 1e-6*math.Abs(big.Obj) || m.NSV() != big.NSV() {
			t.Errorf("obj %v nSV %d, with the big cache %v %d", m.Obj, m.NSV(), big.Obj, big.NSV())
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	X, y := loadCSV(t, "ripley_train.csv")
	m, err := Train(context.Background(), X, y, Params{Kernel: Kernel{Type: Polynomial, Gamma: 0.5, Coef0: 1, Degree: 2}, C: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Model
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	b2, _ := got.MarshalBinary()
	if !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
	if got.Kernel != m.Kernel || got.B != m.B || got.Obj != m.Obj || got.W2() != m.W2() || got.NSV() != m.NSV() ||
		got.NBSV != m.NBSV || got.Iter != m.Iter || got.Converged != m.Converged || len(got.Alpha) != len(m.Alpha) {
		t.Fatalf("decoded %+v", got)
	}
	for _, x := range X[:20] {
		if got.Decision(x) != m.Decision(x) {
			t.Fatal("decoded model scores differently")
		}
	}
	for _, cut := range []int{0, 3, 10, len(b) / 2, len(b) - 1} {
		if err := new(Model).UnmarshalBinary(b[:cut]); err == nil {
			t.Errorf("truncated to %d bytes: no error", cut)
		}
	}
	b[40] ^= 1
	if err := new(Model).UnmarshalBinary(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("flipped bit: %v", err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	m := &Model{Kernel: Kernel{Type: RBF, Gamma: 1}, Dim: 2, SV: [][]float64{{1, 2}}, SVIndex: []int{0}, Coef: []float64{0.5}, Alpha: []float64{0.5, 0}}
	b, _ := m.MarshalBinary()
	f.Add(b)
	b, _ = fixedModels()["format_v2_sparse.bin"].MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Model
		if m.UnmarshalBinary(b) == nil {
			b2, _ := m.MarshalBinary()
			if !bytes.Equal(b, b2) {
				t.Fatal("round trip differs")
			}
		}
	})
}

func TestDecisionZeroAlloc(t *testing.T) {
	X, y := loadCSV(t, "ripley_train.csv")
	m, err := Train(context.Background(), X, y, Params{Kernel: Kernel{Type: RBF, Gamma: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { m.Decision(X[3]) }); a != 0 {
		t.Errorf("Decision allocates %v times", a)
	}
}

// TestLinearDecisionPrimal: a dense linear model scores through its primal
// weights w = Σ_i c_i·SV_i (O(d)), which agree with the sum over the
// support vectors to rounding (1e-12 of Σ_i |c_i <SV_i, x>|) on every row
// of breast_cancer (30 features, hundreds of support vectors); a decoded
// model scores the same bits, and Decision allocates nothing.
func TestLinearDecisionPrimal(t *testing.T) {
	X, y := loadCSV(t, "breast_cancer.csv")
	all := make([]int, len(X))
	for i := range all {
		all[i] = i
	}
	zscore(X, all)
	m, err := Train(context.Background(), X, y, Params{Kernel: Kernel{Type: Linear}, C: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.w == nil || m.NSV() < 20 {
		t.Fatalf("w %v, %d support vectors", m.w != nil, m.NSV())
	}
	m2 := decoded(t, m)
	for i, x := range X {
		var sum, mag float64
		for k, sv := range m.SV {
			v := m.Coef[k] * dot(x, sv)
			sum += v
			mag += math.Abs(v)
		}
		sum += m.B
		f := m.Decision(x)
		if math.Abs(f-sum) > 1e-12*(mag+math.Abs(m.B)) {
			t.Fatalf("row %d: Decision %v, the sum over support vectors %v", i, f, sum)
		}
		if f2 := m2.Decision(x); math.Float64bits(f2) != math.Float64bits(f) {
			t.Fatalf("row %d: decoded model %v, trained %v", i, f2, f)
		}
	}
	if a := testing.AllocsPerRun(100, func() { m.Decision(X[3]) }); a != 0 {
		t.Errorf("Decision allocates %v times", a)
	}
}

// TestSparseLinearDecisionPrimal: a linear model of hashed rows (2^18
// indices) scores through dense primal weights, O(entries) per event:
// within 1e-12 of the sum over its support vectors (Σ_i |c_i <SV_i, x>|),
// dense and sparse inputs; a decoded model scores the same bits; no
// allocation.
func TestSparseLinearDecisionPrimal(t *testing.T) {
	X, y := hashedClicks(1, 1500, 30, 18)
	m, err := TrainSparse(context.Background(), X, 1<<18, y, Params{Kernel: Kernel{Type: Linear}, C: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.w == nil || m.NSV() < 100 {
		t.Fatalf("w %v, %d support vectors", m.w != nil, m.NSV())
	}
	m2 := decoded(t, m)
	Xt, _ := hashedClicks(2, 200, 30, 18)
	buf := make([]float64, m.NSV())
	dense := make([]float64, 1<<18)
	for i, x := range Xt {
		var sum, mag float64
		for k, sv := range m.SparseSV {
			v := m.Coef[k] * sparse.Dot(x, sv)
			sum += v
			mag += math.Abs(v)
		}
		sum += m.B
		f := m.DecisionSparse(x, buf)
		if math.Abs(f-sum) > 1e-12*(mag+math.Abs(m.B)) {
			t.Fatalf("row %d: DecisionSparse %v, the sum over support vectors %v", i, f, sum)
		}
		clear(dense)
		for k, j := range x.Idx {
			dense[j] = x.Val[k]
		}
		if fd := m.Decision(dense); math.Abs(fd-sum) > 1e-12*(mag+math.Abs(m.B)) {
			t.Fatalf("row %d: Decision of the dense row %v, want %v", i, fd, sum)
		}
		if f2 := m2.DecisionSparse(x, buf); math.Float64bits(f2) != math.Float64bits(f) {
			t.Fatalf("row %d: decoded model %v, trained %v", i, f2, f)
		}
	}
	if a := testing.AllocsPerRun(100, func() { m.DecisionSparse(Xt[0], buf) }); a != 0 {
		t.Errorf("DecisionSparse allocates %v times", a)
	}
}

// decoded returns m encoded and decoded again.
func decoded(t *testing.T, m *Model) *Model {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Model
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return &out
}
