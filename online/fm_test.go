package online

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/streamer/streamer/online/codec"
)

// fmBrute is ŷ of an FM computed the slow way: the pairwise sum over every
// pair of distinct entries (duplicates summed into their first
// occurrence), from the model's rows (or the initial factors of unseen
// indices) and an explicit pair rule.
func fmBrute(m *FM, idx []int32, val []float64, field []uint8) float64 {
	var ii []int32
	var xs []float64
	var fs []uint8
	for e, i := range idx {
		if p := slices.Index(ii, i); p >= 0 {
			xs[p] += val[e]
			continue
		}
		f := uint8(0)
		if field != nil {
			f = field[e]
		}
		ii, xs, fs = append(ii, i), append(xs, val[e]), append(fs, f)
	}
	// weight returns w, v and the scale s of index i, whose value is x
	// (a feature not learned yet takes |x| as its scale)
	weight := func(i int32, x float64) (float64, []float64, float64) {
		v := make([]float64, m.k)
		if r := m.rows.find(i); r >= 0 {
			row := m.rows.row(r)
			copy(v, row[fmRowV:])
			return row[fmRowW], v, row[fmRowS]
		}
		m.initFactors(v, i)
		return 0, v, math.Abs(x)
	}
	pairs := func(a, b uint8) bool {
		if m.k == 0 {
			return false
		}
		if len(m.p.Factorize) == 0 {
			return true
		}
		if a == 0 || b == 0 {
			return false
		}
		na, nb := m.p.namespaces[a-1], m.p.namespaces[b-1]
		for _, pr := range m.p.Factorize {
			if pr[0] == na && pr[1] == nb || pr[0] == nb && pr[1] == na {
				return true
			}
		}
		return false
	}
	var mean float64
	if !m.learnB && m.n > 0 {
		mean = (m.ySum + m.yComp) / float64(m.n)
	}
	y := m.b // the model's terms: σ·y + mean with target_scale std
	if !m.std {
		y += mean
	}
	for j := range ii {
		if xs[j] == 0 {
			continue
		}
		w, vj, sj := weight(ii[j], xs[j])
		y += w * xs[j] / sj
		for l := j + 1; l < len(ii); l++ {
			if xs[l] == 0 || !pairs(fs[j], fs[l]) {
				continue
			}
			_, vl, sl := weight(ii[l], xs[l])
			var s float64
			for f := range vj {
				s += vj[f] * vl[f]
			}
			y += s * (xs[j] / sj) * (xs[l] / sl)
		}
	}
	if m.std {
		return mean + m.scale*y
	}
	return y
}

// fmEvent draws a hashed event: a user entry (field 1), an item entry
// (field 2) and 0–3 genre entries (field 2), from small pools so that
// features repeat, sometimes with a duplicate index.
func fmEvent(rng *rand.Rand, dim int) ([]int32, []float64, []uint8) {
	idx := []int32{int32(rng.IntN(50)), int32(100 + rng.IntN(80))}
	val := []float64{1, -1}
	field := []uint8{1, 2}
	for range rng.IntN(4) {
		idx = append(idx, int32(200+rng.IntN(10)))
		val = append(val, 0.5)
		field = append(field, 2)
	}
	if rng.IntN(5) == 0 {
		idx = append(idx, idx[0])
		val = append(val, 0.25)
		field = append(field, 1)
	}
	for k := range idx {
		idx[k] = int32((int(idx[k]) * 7919) % dim)
	}
	return idx, val, field
}

// TestFMScoreMatchesPairwiseSum checks Rendle's identity with namespace
// pairs against the explicit pairwise sum, for every pairing mode and
// both losses, along a stream that learns.
func TestFMScoreMatchesPairwiseSum(t *testing.T) {
	const dim = 1 << 12
	modes := map[string]func(*FMParams){
		"all pairs":   func(*FMParams) {},
		"user x item": func(p *FMParams) { p.Factorize = [][]string{{"user", "item"}} },
		"item self":   func(p *FMParams) { p.Factorize = [][]string{{"item", "item"}} },
		"both":        func(p *FMParams) { p.Factorize = [][]string{{"item", "user"}, {"user", "user"}} },
		"logistic":    func(p *FMParams) { p.Loss = FMLogistic; p.Factorize = [][]string{{"user", "item"}} },
		"linear":      func(p *FMParams) { p.Factors = 0 },
		"learned w0":  func(p *FMParams) { p.LearnIntercept = true; p.Factorize = [][]string{{"user", "item"}} },
	}
	for name, set := range modes {
		t.Run(name, func(t *testing.T) {
			p := DefaultFMParams()
			p.Factors, p.InitStdev = 5, 0.3
			p.SetNamespaces([]string{"user", "item", "ctx"})
			set(&p)
			m, err := NewFM(dim, p)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for n := range 400 {
				idx, val, field := fmEvent(rng, dim)
				want := fmBrute(m, idx, val, field)
				y := float64(rng.IntN(5) + 1)
				if !m.sq {
					y = float64(2*rng.IntN(2) - 1)
				}
				pr := m.ObserveFields(idx, val, field, y, n%3 != 2)
				if math.Abs(pr.Score-want) > 1e-12*max(1, math.Abs(want)) {
					t.Fatalf("event %d: score %v, pairwise sum %v", n, pr.Score, want)
				}
			}
		})
	}
}

// TestFMFactorGradient checks ∂ŷ/∂vⱼ (the factor step's direction) against
// central differences of ŷ, with namespace pairs and a self pair: one SGD
// step of the factors with an isolated entry must move ŷ by −η·‖∂ŷ/∂v‖²·g
// to first order; here each coordinate's derivative is compared directly.
func TestFMFactorGradient(t *testing.T) {
	const dim = 1 << 10
	p := DefaultFMParams()
	p.Factors, p.InitStdev = 4, 0.5
	p.SetNamespaces([]string{"user", "item"})
	p.Factorize = [][]string{{"user", "item"}, {"item", "item"}}
	m, err := NewFM(dim, p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 { // learned rows
		idx, val, field := fmEvent(rng, dim)
		m.ObserveFields(idx, val, field, float64(rng.IntN(5)+1), true)
	}
	idx, val, field := []int32{3, 17, 40, 41}, []float64{1, 0.7, -0.4, 0.5}, []uint8{1, 2, 2, 2}
	for e, i := range idx {
		r := m.rows.find(i)
		if r < 0 {
			m.rows.add(i, nil)
			r = m.rows.find(i)
			m.rows.row(r)[fmRowS] = math.Abs(val[e])
			m.initFactors(m.rows.row(r)[fmRowV:], i)
		}
		row := m.rows.row(r)
		// analytic derivative, as learn computes it
		if !m.distinct(idx, val, field) {
			t.Fatal("distinct")
		}
		m.score()
		for f := range m.k {
			want := fmFactorDerivative(m, e, f) * m.scale // ŷ = mean + σ·(the model's terms) with target_scale std
			const h = 1e-6
			old := row[fmRowV+f]
			row[fmRowV+f] = old + h
			up := fmBrute(m, idx, val, field)
			row[fmRowV+f] = old - h
			down := fmBrute(m, idx, val, field)
			row[fmRowV+f] = old
			if num := (up - down) / (2 * h); math.Abs(num-want) > 1e-6 {
				t.Fatalf("entry %d factor %d: analytic %v, numeric %v", e, f, want, num)
			}
		}
	}
}

// TestFMFactorStepL2: with factor_l2 one labelled event moves each
// entry's factors by v −= step·(∂ℓ/∂v + λv), ∂ℓ/∂v = g·x·(t_a − [self]·v·x)
// (g the error over σ), step = η_v/(√H + ε) with H the AdaGrad sum of
// (‖∂ℓ/∂v‖² + λ²‖v‖²)/k, computed here from the sums as the
// model holds them before the event: for namespace pairs alone (the path
// that forms the gradient in its step) and with a self pair.
func TestFMFactorStepL2(t *testing.T) {
	const dim, lambda = 1 << 10, 0.3
	for _, self := range []bool{false, true} {
		p := DefaultFMParams()
		p.Factors, p.InitStdev, p.FactorL2 = 4, 0.5, lambda
		p.SetNamespaces([]string{"user", "item"})
		p.Factorize = [][]string{{"user", "item"}}
		if self {
			p.Factorize = append(p.Factorize, []string{"item", "item"})
		}
		m, err := NewFM(dim, p)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for range 200 {
			idx, val, field := fmEvent(rng, dim)
			m.ObserveFields(idx, val, field, float64(rng.IntN(5)+1), true)
		}
		idx, val, field := []int32{3, 17, 40, 41}, []float64{1, 0.7, -0.4, 0.5}, []uint8{1, 2, 2, 2}
		m.ObserveFields(idx, val, field, 4, true) // their rows, on their scales
		const y = 2.0
		if !m.distinct(idx, val, field) {
			t.Fatal("distinct")
		}
		g := max(-fmRobustClip, min((m.score()-y)/m.scale, fmRobustClip))
		k := m.k
		want := make([][]float64, len(idx))
		for e := range idx {
			row := m.row(&m.sc.ents[e])
			var d []float64
			var gg, vv float64
			for f := range k {
				df := g * fmFactorDerivative(m, e, f)
				d = append(d, df)
				gg += df * df
				vv += row[fmRowV+f] * row[fmRowV+f]
			}
			step := p.FactorRate / (math.Sqrt(row[fmRowGV]+(gg+lambda*lambda*vv)/float64(k)) + adagradEps)
			for f := range k {
				want[e] = append(want[e], row[fmRowV+f]-step*(d[f]+lambda*row[fmRowV+f]))
			}
		}
		m.ObserveFields(idx, val, field, y, true)
		for e, i := range idx {
			got := m.rows.row(m.rows.find(i))[fmRowV : fmRowV+k]
			for f := range k {
				if math.Abs(got[f]-want[e][f]) > 1e-12*(1+math.Abs(want[e][f])) {
					t.Fatalf("self pair %v, entry %d factor %d: %v, want %v", self, e, f, got[f], want[e][f])
				}
			}
		}
	}
}

// fmFactorDerivative returns ∂/∂v_f of the model's terms (before σ) at the
// scratch's entry e, as score left the sums: x·(Σ of the partner slots'
// S_b[f] − [self] v_f·x), computed from the pairing matrix.
func fmFactorDerivative(m *FM, e, f int) float64 {
	k, ns := m.k, m.nslots
	en := &m.sc.ents[e]
	a := int(en.slot)
	var tf float64
	for b := range ns {
		if m.adj[a*ns+b] {
			tf += m.sc.s[b*k+f]
		}
	}
	if m.self[a] {
		tf -= m.sc.u[e*k+f]
	}
	return en.xs * tf
}

// TestFMLearnedIntercept: with learn_intercept the squared loss's w₀
// starts at 0 and takes AdaGrad steps on g = ŷ − y (the label's running
// mean plays no part), step by step as a hand computation of the same
// updates (the feature's weight with its step floor); the state, w₀
// included, survives encoding.
func TestFMLearnedIntercept(t *testing.T) {
	p := DefaultFMParams()
	p.Factors, p.LearnIntercept, p.LearningRate, p.TargetScale = 0, true, 0.1, FMScaleNone
	m, err := NewFM(1<<10, p)
	if err != nil {
		t.Fatal(err)
	}
	var b, gb, w, gw float64 // w₀ and the one feature's weight, by hand
	for n, y := range []float64{4, 5, 1, 3.5, 2} {
		pr := m.ObserveSparse([]int32{7}, []float64{1}, y, true)
		if want := b + w; pr.Score != want {
			t.Fatalf("event %d: score %v, want %v (w₀ %v)", n, pr.Score, want, b)
		}
		g := pr.Score - y
		gw += g * g
		w -= max(0.1/(math.Sqrt(gw)+adagradEps), 0.1*DefaultFMStepFloor*min(1, DefaultFMStepFloorUntil/gw)) * g
		gb += g * g
		b -= 0.1 * g / (math.Sqrt(gb) + adagradEps)
	}
	if m.b != b || m.gb != gb {
		t.Fatalf("w₀ %v (G %v), want %v (G %v)", m.b, m.gb, b, gb)
	}
	// the running mean (3.1) would have put the first score near 3; here
	// w₀ moved 0.1 a step
	if b > 0.5 {
		t.Fatalf("w₀ = %v: not learned from 0 at learning_rate", b)
	}
	if got, want := PeekSparse(fmRestored(t, m), []int32{7}, []float64{1}).Score, b+w; got != want {
		t.Fatalf("restored score %v, want %v", got, want)
	}
	bad := DefaultFMParams()
	bad.Loss, bad.LearnIntercept = FMLogistic, true
	if _, err := NewFM(1<<10, bad); err == nil || !strings.Contains(err.Error(), "learn_intercept") {
		t.Fatalf("logistic with learn_intercept: %v", err)
	}
}

// TestFMUnlabelledStoresNothing: scoring (unlabelled events, peeks) keeps
// no state for unseen features, so requests cannot grow the model.
func TestFMUnlabelledStoresNothing(t *testing.T) {
	p := DefaultFMParams()
	p.TargetScale = FMScaleNone // (with std the first label learns no weights)
	m, err := NewFM(1<<20, p)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveSparse([]int32{1, 2}, []float64{1, 1}, 4, true)
	before, _ := m.MarshalBinary()
	for i := range 10000 {
		m.ObserveSparse([]int32{int32(1000 + i), 1}, []float64{1, 1}, 0, false)
		PeekSparse(m, []int32{int32(500000 + i)}, []float64{1})
	}
	after, _ := m.MarshalBinary()
	if !bytes.Equal(before, after) || m.Features() != 2 {
		t.Fatalf("unlabelled events changed the state: %d features", m.Features())
	}
}

// TestFMValueClipped: the squared loss's Value is ŷ clipped to the labels'
// range, absent before the first label.
func TestFMValueClipped(t *testing.T) {
	p := DefaultFMParams()
	p.LearningRate, p.TargetScale = 50, FMScaleNone // overshoots on purpose, from the first label
	m, err := NewFM(8, p)
	if err != nil {
		t.Fatal(err)
	}
	if pr := m.ObserveSparse([]int32{1}, []float64{1}, 3, true); pr.HasValue || pr.Score != 0 {
		t.Fatalf("first prediction %+v, want no value", pr)
	}
	// the first step overshoots: w = 50 (AdaGrad's first step is η), so
	// ŷ = 3 + 50 while every label seen was 3
	pr := m.ObserveSparse([]int32{1}, []float64{1}, 0, false)
	if !pr.HasValue || pr.Value != 3 || math.Abs(pr.Score-53) > 1e-6 {
		t.Fatalf("prediction %+v: want score 53 and value 3 (clipped to [3, 3])", pr)
	}
	m.ObserveSparse([]int32{1}, []float64{1}, 5, true)
	for range 20 {
		pr := m.ObserveSparse([]int32{1, 2}, []float64{1, 1}, 1e6, false)
		if !pr.HasValue || pr.Value < 3 || pr.Value > 5 {
			t.Fatalf("prediction %+v: value outside [3, 5]", pr)
		}
	}
}

// TestFMLearnsInteractions: on ratings generated by biases plus a rank-3
// user × item interaction, the fm's prequential error over the second half
// is far below a linear fm's (biases only) and close to the noise.
func TestFMLearnsInteractions(t *testing.T) {
	const users, items, k, n = 60, 80, 3, 40000
	rng := rand.New(rand.NewPCG(5, 6))
	draw := func(c int) [][]float64 {
		out := make([][]float64, c)
		for i := range out {
			out[i] = make([]float64, k+1)
			for f := range out[i] {
				out[i][f] = rng.NormFloat64() * 0.76 // k terms of variance 0.76⁴: interaction sd 1
			}
		}
		return out
	}
	us, is := draw(users), draw(items)
	run := func(factors int) float64 {
		p := DefaultFMParams()
		p.Factors = factors
		p.SetNamespaces([]string{"user", "item"})
		if factors > 0 {
			p.Factorize = [][]string{{"user", "item"}}
		}
		m, err := NewFM(1<<16, p)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, 8))
		var se float64
		for e := range n {
			u, i := r.IntN(users), r.IntN(items)
			y := 3 + 0.5*us[u][k] + 0.5*is[i][k] + 0.3*r.NormFloat64()
			for f := range k {
				y += us[u][f] * is[i][f]
			}
			pr := m.ObserveFields([]int32{int32(u), int32(1000 + i)}, []float64{1, 1}, []uint8{1, 2}, y, true)
			if e >= n/2 {
				se += (pr.Value - y) * (pr.Value - y)
			}
		}
		return math.Sqrt(se / (n / 2))
	}
	linear, fm := run(0), run(8)
	t.Logf("second-half RMSE: linear %.3f, fm %.3f (noise 0.3)", linear, fm)
	if !(fm < 0.5 && fm < 0.6*linear) {
		t.Errorf("fm RMSE %.3f, linear %.3f: want < 0.5 and < 0.6 × linear", fm, linear)
	}
}

// TestFMEncodingCountsRows: the encoding of a model over 2^20 indices
// holds its learned rows, not 2^20 of anything, and re-encodes exactly.
func TestFMEncodingCountsRows(t *testing.T) {
	m, err := NewFM(1<<20, DefaultFMParams())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		m.ObserveSparse([]int32{int32(i * 331 % (1 << 20)), 7}, []float64{1, 1}, float64(i%5+1), true)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Features(); f < 2999 || f > 3001 { // (the first label learns no weights: σ is not known yet)
		t.Fatalf("%d features", f)
	}
	// 2^20 indices, 3 001 learned: the encoding holds the rows, not 2^20 of anything
	if want := 3001 * (4 + 8*(fmRowV+DefaultFMFactors)); len(b) > want+512 {
		t.Fatalf("encoding %d bytes, want about %d", len(b), want)
	}
	r, err := MustRegistry(FMType()).Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := r.MarshalBinary()
	if !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
}

// BenchmarkFM30 scores and learns events of 30 hashed entries in a 2^20
// space with k = 16, drawn as a ratings stream draws them: a user (1 000,
// activity skewed as raters' is) with 10 attributes from small pools, and
// an item (10 000, popularity skewed: a few hot, many cold) with 3 genres
// of 20 and 15 tags of 2 000 (skewed); user × item factorized.
func BenchmarkFM30(b *testing.B) {
	p := DefaultFMParams()
	p.SetNamespaces([]string{"user", "item"})
	p.Factorize = [][]string{{"user", "item"}}
	m, err := NewFM(1<<20, p)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	zipf := func(n int, s float64) func() int {
		z := rand.NewZipf(rand.New(rand.NewPCG(uint64(n), 11)), s, 1, uint64(n-1))
		return func() int { return int(z.Uint64()) }
	}
	user, item, tag := zipf(1000, 1.1), zipf(10000, 1.1), zipf(2000, 1.1)
	// The events lie one after the other in three arrays, as a decoder
	// leaves them in its buffers (read in order, not scattered in memory).
	const nev = 1 << 14
	type ev struct {
		idx   []int32
		val   []float64
		field []uint8
		y     float64
	}
	evs := make([]ev, nev)
	var idx []int32
	var val []float64
	var field []uint8
	hash := func(ns, v int) int32 { return int32(fmix64(uint64(ns)<<40|uint64(v)) & (1<<20 - 1)) }
	starts := make([]int, nev+1)
	for i := range evs {
		add := func(ns, v int, f uint8) {
			idx, val, field = append(idx, hash(ns, v)), append(val, 1), append(field, f)
		}
		u, it := user(), item()
		add(1, u, 1)
		for a := range 10 { // user attributes: pools of 2..50 values
			add(2+a, (u*31+a)%(2+5*a), 1)
		}
		add(20, it, 2)
		for g := range 3 {
			add(21, (it*7+g*3)%20, 2)
		}
		for range 15 {
			add(22, tag(), 2)
		}
		evs[i].y = float64(1 + rng.IntN(5))
		starts[i+1] = len(idx)
	}
	for i := range evs {
		a, z := starts[i], starts[i+1]
		evs[i].idx, evs[i].val, evs[i].field = idx[a:z], val[a:z], field[a:z]
	}
	for _, e := range evs { // warm: every row exists
		m.ObserveFields(e.idx, e.val, e.field, e.y, true)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := &evs[i&(nev-1)]
		m.ObserveFields(e.idx, e.val, e.field, e.y, true)
		i++
	}
}

// TestFMRowsSmall: a model with a few features (a key-scoped one) holds
// rows for about those, not a large first chunk; rows keep their place as
// the chunks double.
func TestFMRowsSmall(t *testing.T) {
	p := DefaultFMParams()
	p.Factors, p.TargetScale = 0, FMScaleNone // rows from the first label on
	m, err := NewFM(1<<20, p)
	if err != nil {
		t.Fatal(err)
	}
	held := func() int {
		n := 0
		for _, c := range m.rows.chunks {
			n += len(c) / m.rows.stride
		}
		return n
	}
	m.ObserveSparse([]int32{5, 9, 700}, []float64{1, 1, 1}, 4, true)
	if h := held(); h != 16 {
		t.Fatalf("3 features hold %d rows, want the first chunk's 16", h)
	}
	for i := range 1000 {
		m.ObserveSparse([]int32{int32(1000 + i)}, []float64{1}, float64(i%5), true)
	}
	if h := held(); h < m.Features() || h > 2*m.Features() {
		t.Fatalf("%d features hold %d rows", m.Features(), h)
	}
	for r, i := range m.rows.idx {
		if got := m.rows.find(i); got != int32(r) {
			t.Fatalf("index %d: row %d, want %d", i, got, r)
		}
	}
}

// TestFMScaleInvariant: each feature's values are divided by the largest
// |x| learned for it, so a numeric feature sent in other units (an age in
// months rather than years) gives the same predictions, to rounding.
func TestFMScaleInvariant(t *testing.T) {
	p := DefaultFMParams()
	p.SetNamespaces([]string{"user", "item"})
	p.Factorize = [][]string{{"user", "item"}}
	run := func(unit float64) []float64 {
		m, err := NewFM(1<<16, p)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(11, 12))
		var out []float64
		for n := range 3000 {
			u, i := rng.IntN(40), rng.IntN(60)
			age := 18 + float64((u*7)%50)
			y := 3 + 0.02*(age-40) + 0.3*rng.NormFloat64()
			pr := m.ObserveFields([]int32{int32(u), 500, int32(1000 + i)}, []float64{1, age * unit, 1}, []uint8{1, 1, 2}, y, n%4 != 3)
			out = append(out, pr.Score)
		}
		return out
	}
	years, months := run(1), run(12)
	for n := range years {
		if math.Abs(years[n]-months[n]) > 1e-9*max(1, math.Abs(years[n])) {
			t.Fatalf("event %d: %v in years, %v in months", n, years[n], months[n])
		}
	}
}

// TestFMStepFloor: a weight's step is AdaGrad's η/√G, but at least
// step_floor·η while G ≤ step_floor_until and step_floor·η·until/G past
// it (a hand computation of the same updates, through both regimes);
// step_floor 0 is AdaGrad alone; and the floor is what lets a feature
// follow a change in its target that AdaGrad alone adapts to slowly.
func TestFMStepFloor(t *testing.T) {
	for _, c := range []struct {
		floor, until float64
	}{{DefaultFMStepFloor, 0}, {0.5, 2000}, {0, 0}} {
		p := DefaultFMParams()
		p.Factors, p.LearnIntercept, p.LearningRate, p.StepFloor, p.StepFloorUntil = 0, true, 0.1, c.floor, c.until
		p.TargetScale = FMScaleNone // the labels' own units: the hand computation below
		m, err := NewFM(1<<10, p)
		if err != nil {
			t.Fatal(err)
		}
		until := c.until
		if until == 0 {
			until = DefaultFMStepFloorUntil
		}
		var b, gb, w, gw float64
		floored, decayed := 0, 0
		for n := range 400 {
			y := float64(n%7) - 3 + 2*math.Sin(float64(n)) // labels in about [-5, 5]
			pr := m.ObserveSparse([]int32{7}, []float64{1}, y, true)
			if want := b + w; pr.Score != want {
				t.Fatalf("%+v, event %d: score %v, want %v", c, n, pr.Score, want)
			}
			g := pr.Score - y
			gw += g * g
			if c.floor == 0 { // AdaGrad's own update, to the bit
				w -= 0.1 * g / (math.Sqrt(gw) + adagradEps)
			} else {
				st := 0.1 / (math.Sqrt(gw) + adagradEps)
				if fl := 0.1 * c.floor * min(1, until/gw); fl > st {
					st = fl
					if gw > until {
						decayed++
					} else {
						floored++
					}
				}
				w -= st * g
			}
			gb += g * g
			b -= 0.1 * g / (math.Sqrt(gb) + adagradEps)
		}
		if m.b != b {
			t.Fatalf("%+v: w₀ %v, want %v", c, m.b, b)
		}
		if c.floor > 0 && (floored == 0 || decayed == 0) {
			t.Fatalf("%+v: the floor set %d steps below until and %d past it: the test does not reach both", c, floored, decayed)
		}
	}

	// Twenty items, each rated about its own mean with noise, 300 ratings
	// each in turn; halfway, item 0's mean moves up by 2 (its audience
	// changed). The squared error of item 0's next 60 ratings, with the
	// floor and with AdaGrad alone.
	after := func(floor float64) float64 {
		p := DefaultFMParams()
		p.Factors, p.StepFloor = 0, floor
		m, err := NewFM(1<<10, p)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var se float64
		for n := range 6000 + 20*60 {
			item := n % 20
			y := 1 + 0.15*float64(item) + 0.5*rng.NormFloat64()
			if item == 0 && n >= 6000 {
				y += 2
			}
			pr := m.ObserveSparse([]int32{int32(item)}, []float64{1}, y, true)
			if item == 0 && n >= 6000 {
				se += (pr.Score - y) * (pr.Score - y)
			}
		}
		return se / 60
	}
	with, without := after(DefaultFMStepFloor), after(0)
	if !(with < 0.8*without) {
		t.Errorf("item 0's squared error after its move: %.3f with the floor, %.3f without: the floor should follow it faster", with, without)
	}
	t.Logf("item 0's squared error after its move: %.3f with the floor, %.3f without", with, without)

	for _, bad := range []FMParams{{StepFloor: -0.1}, {StepFloor: 1.5}, {StepFloor: math.NaN()}, {StepFloorUntil: -1}, {StepFloorUntil: math.Inf(1)}} {
		p := DefaultFMParams()
		p.StepFloor, p.StepFloorUntil = bad.StepFloor, bad.StepFloorUntil
		if _, err := NewFM(1<<10, p); err == nil || !strings.Contains(err.Error(), "step_floor") {
			t.Errorf("step_floor %v, step_floor_until %v: %v", bad.StepFloor, bad.StepFloorUntil, err)
		}
	}
}

// TestFMTargetScale: with target_scale std the squared loss learns in
// units of the labels' running standard deviation, so a stream whose
// labels are a·y + c is predicted as a·ŷ + c, to rounding, with factors,
// fields, unlabelled events and learn_intercept (there c = 0: its w₀
// learns from 0); σ is the labels' standard deviation; until two labels
// differ the prediction is their mean and nothing else is learned; none
// (or the key left out of a logistic model) encodes as the model before
// the key.
func TestFMTargetScale(t *testing.T) {
	const dim = 1 << 12
	run := func(p FMParams, a, c float64) ([]float64, *FM) {
		m, err := NewFM(dim, p)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		var out []float64
		for n := range 3000 {
			idx, val, field := fmEvent(rng, dim)
			y := 3 + 0.4*float64(idx[0]%5) - 0.3*float64(idx[1]%3) + 0.5*rng.NormFloat64()
			out = append(out, m.ObserveFields(idx, val, field, a*y+c, n%5 != 4).Score)
		}
		return out, m
	}
	fields := DefaultFMParams()
	fields.Factors, fields.InitStdev = 5, 0.1
	fields.SetNamespaces([]string{"user", "item", "ctx"})
	fields.Factorize = [][]string{{"user", "item"}}
	intercept := fields
	intercept.LearnIntercept = true
	for _, tc := range []struct {
		name string
		p    FMParams
		a, c float64
	}{{"ratings x20 + 7", fields, 20, 7}, {"ratings x0.1 - 3", fields, 0.1, -3}, {"learn_intercept x40", intercept, 40, 0}} {
		base, m := run(tc.p, 1, 0)
		scaled, ms := run(tc.p, tc.a, tc.c)
		for n := 1; n < len(base); n++ { // (before the first label the score is 0 at any scale)
			if want := tc.a*base[n] + tc.c; math.Abs(scaled[n]-want) > 1e-9*max(1, math.Abs(want)) {
				t.Fatalf("%s, event %d: %v, want %v × %v + %v = %v", tc.name, n, scaled[n], tc.a, base[n], tc.c, want)
			}
		}
		if m.Features() == 0 || ms.Features() != m.Features() || math.Abs(ms.scale-tc.a*m.scale) > 1e-9*ms.scale {
			t.Fatalf("%s: %d and %d features, σ %v and %v", tc.name, m.Features(), ms.Features(), m.scale, ms.scale)
		}
	}

	// σ against a two-pass standard deviation of the labels learned
	m, err := NewFM(dim, DefaultFMParams())
	if err != nil {
		t.Fatal(err)
	}
	labels := [][]float64{{3}, {3}, {3}}
	if pr := m.ObserveSparse([]int32{1, 2}, []float64{1, 1}, 3, true); pr.Score != 0 || m.Features() != 0 {
		t.Fatalf("first label: %+v, %d features", pr, m.Features())
	}
	for range 2 {
		if pr := m.ObserveSparse([]int32{1, 2}, []float64{1, 1}, 3, true); pr.Score != 3 || m.Features() != 0 || m.scale != 0 {
			t.Fatalf("labels alike: score %v (want their mean, 3), %d features, σ %v", pr.Score, m.Features(), m.scale)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		y := 1e6 + 0.5*math.Round(rng.NormFloat64()*4) // a large mean, a small spread
		labels = append(labels, []float64{y})
		m.ObserveSparse([]int32{int32(rng.IntN(40)), 100}, []float64{1, 1}, y, true)
	}
	_, variance := stdTwoPass(labels, len(labels))
	if want := math.Sqrt(variance[0]); math.Abs(m.scale-want) > 1e-9*want {
		t.Fatalf("σ %v, want %v", m.scale, want)
	}
	if r := fmRestored(t, m); r.scale != m.scale {
		t.Fatalf("restored σ %v against %v", r.scale, m.scale)
	}

	// the keys' canonical values: none and the logistic loss complete to
	// the parameters of the model before target_scale (factor_l2 0
	// included), std to its own penalty
	noKey := DefaultFMParams()
	noKey.TargetScale, noKey.FactorL2 = "", 0
	for _, tc := range []struct {
		name  string
		loss  string
		value string
		given bool
		want  string
	}{{"none", FMSquared, FMScaleNone, true, ""}, {"std", FMSquared, FMScaleStd, false, FMScaleStd},
		{"logistic, left out", FMLogistic, FMScaleStd, false, ""}, {"logistic, given", FMLogistic, FMScaleStd, true, FMScaleStd}} {
		p := DefaultFMParams()
		p.Loss, p.TargetScale = tc.loss, tc.value
		p.Complete(0, func(k string) bool { return tc.given && k == "target_scale" })
		if p.TargetScale != tc.want {
			t.Errorf("%s: completed to %q, want %q", tc.name, p.TargetScale, tc.want)
		}
		if want := map[bool]float64{true: DefaultFMFactorL2Std}[tc.loss == FMSquared && tc.want == FMScaleStd]; p.FactorL2 != want {
			t.Errorf("%s: factor_l2 completed to %v, want %v", tc.name, p.FactorL2, want)
		}
		given := DefaultFMParams()
		given.Loss, given.TargetScale, given.FactorL2 = tc.loss, tc.value, 0.3
		if given.Complete(0, func(k string) bool { return k == "factor_l2" }); given.FactorL2 != 0.3 {
			t.Errorf("%s: a given factor_l2 0.3 completed to %v", tc.name, given.FactorL2)
		}
		q := noKey
		q.Loss = tc.loss
		if same := bytes.Equal(codec.AppendParams(nil, &p), codec.AppendParams(nil, &q)); same != (tc.want == "") {
			t.Errorf("%s: encodes as the parameters without the key: %v", tc.name, same)
		}
	}
	bad := DefaultFMParams()
	bad.TargetScale = "range"
	if _, err := NewFM(dim, bad); err == nil || !strings.Contains(err.Error(), "target_scale") {
		t.Fatalf("target_scale range: %v", err)
	}
}

// fmRestored returns m encoded and restored, after checking that its state
// is m's.
func fmRestored(t *testing.T, m *FM) *FM {
	t.Helper()
	enc, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := MustRegistry(FMType()).Restore(enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := StateClose(m, r, 0); err != nil {
		t.Fatal(err)
	}
	return r.(*FM)
}

// TestFMTargetScaleOutlier: one wild label (4000 among ratings of 1..5,
// where no label range dead-letters it) moves σ by a few percent, and the
// model predicts the rest of the stream within 5% of its RMSE without
// that label; the model that learns in the label's units does worse (its
// running mean takes the 4000).
func TestFMTargetScaleOutlier(t *testing.T) {
	const dim = 1 << 12
	run := func(scale string, wild bool) (rmse, sigma float64) {
		p := DefaultFMParams()
		p.Factors, p.TargetScale = 4, scale
		p.SetNamespaces([]string{"user", "item", "ctx"})
		p.Factorize = [][]string{{"user", "item"}}
		m, err := NewFM(dim, p)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(9, 10))
		var se float64
		for n := range 6000 {
			idx, val, field := fmEvent(rng, dim)
			y := min(5, max(1, math.Round(3+0.5*float64(idx[0]%5-2)+0.4*rng.NormFloat64())))
			if n == 1500 && wild {
				m.ObserveFields(idx, val, field, 4000, true)
				continue
			}
			pr := m.ObserveFields(idx, val, field, y, true)
			if n > 1500 {
				se += (pr.Score - y) * (pr.Score - y)
			}
		}
		return math.Sqrt(se / 4499), m.scale
	}
	cleanRMSE, clean := run(FMScaleStd, false)
	std, sigma := run(FMScaleStd, true)
	none, _ := run(FMScaleNone, true)
	t.Logf("after the wild label: RMSE %.3f (std; %.3f without it) and %.3f (none); σ %.4f against %.4f without it", std, cleanRMSE, none, sigma, clean)
	if !(sigma < 1.1*clean) {
		t.Errorf("σ %v after the wild label, %v without it", sigma, clean)
	}
	if !(std < 1.05*cleanRMSE) || !(std < none) {
		t.Errorf("RMSE after the wild label %v (std; %v without it) against %v (none)", std, cleanRMSE, none)
	}
}
