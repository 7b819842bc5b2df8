package wire

import (
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestPow5Table checks every entry of the Eisel–Lemire table against its
// definition (gen_pow5.go), computed here another way: q ≥ 0 truncates
// 5^q, −27 ≤ q < 0 rounds 2^b/5^−q up, q < −27 truncates it (the +1 of
// the generator never reaches the 128 bits kept).
func TestPow5Table(t *testing.T) {
	one := big.NewInt(1)
	for q := minPow5; q <= maxPow5; q++ {
		e := pow5[q-minPow5]
		T := new(big.Int).Lsh(new(big.Int).SetUint64(e[0]), 64)
		T.Or(T, new(big.Int).SetUint64(e[1]))
		if T.BitLen() != 128 {
			t.Fatalf("5^%d: %d bits", q, T.BitLen())
		}
		p := new(big.Int).Exp(big.NewInt(5), big.NewInt(int64(abs(q))), nil)
		if q >= 0 {
			// T·2^s ≤ 5^q < (T+1)·2^s for s = bitlen − 128 (or T = 5^q·2^−s).
			s := p.BitLen() - 128
			if s <= 0 {
				if new(big.Int).Lsh(p, uint(-s)).Cmp(T) != 0 {
					t.Fatalf("5^%d: %x", q, T)
				}
				continue
			}
			lo := new(big.Int).Lsh(T, uint(s))
			hi := new(big.Int).Lsh(new(big.Int).Add(T, one), uint(s))
			if lo.Cmp(p) > 0 || hi.Cmp(p) <= 0 {
				t.Fatalf("5^%d: %x does not truncate it", q, T)
			}
			continue
		}
		// 5^q = 2^−b'·(2^b'/5^−q): with b = bitlen(5^−q) + 127,
		// (T−1)·5^−q < 2^b ≤ T·5^−q for the ceiling, and
		// T·5^−q ≤ 2^b < (T+1)·5^−q for the floor.
		b := uint(p.BitLen() + 127)
		pow := new(big.Int).Lsh(one, b)
		tp := new(big.Int).Mul(T, p)
		t1p := new(big.Int).Mul(new(big.Int).Sub(T, one), p)
		tp1 := new(big.Int).Mul(new(big.Int).Add(T, one), p)
		if q >= -27 {
			if t1p.Cmp(pow) >= 0 || tp.Cmp(pow) < 0 {
				t.Fatalf("5^%d: %x is not the ceiling", q, T)
			}
		} else if tp.Cmp(pow) > 0 || tp1.Cmp(pow) <= 0 {
			t.Fatalf("5^%d: %x is not the floor", q, T)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestLog2Pow10 checks the binary exponent of eiselLemire: ⌊q·log2 10⌋ =
// (217706·q)>>16 over the table's range.
func TestLog2Pow10(t *testing.T) {
	for q := minPow5; q <= maxPow5; q++ {
		// ⌊q·log2 10⌋ = ⌊log2 10^q⌋: bitlen(10^q) − 1, or −bitlen(10^−q) for q < 0.
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(q))), nil)
		want := p.BitLen() - 1
		if q < 0 {
			want = -p.BitLen()
		}
		if got := (217706 * q) >> 16; got != want {
			t.Fatalf("q=%d: %d, want %d", q, got, want)
		}
	}
}

func TestLeadingDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var b [8]byte
		for i := range b {
			switch r.IntN(4) {
			case 0, 1:
				b[i] = '0' + byte(r.IntN(10))
			case 2:
				b[i] = byte(r.IntN(256))
			default:
				const odd = "/:.eE-+,] \x00\xff\xba\x80"
				b[i] = odd[r.IntN(len(odd))]
			}
		}
		n := 0
		for n < 8 && isDigit(b[n]) {
			n++
		}
		x := uint64(0)
		for i := 7; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		if got := leadingDigits(x); got != n {
			t.Fatalf("%q: %d digits, want %d", b[:], got, n)
		}
		if n == 0 {
			continue
		}
		want, _ := strconv.ParseUint(string(b[:n]), 10, 64)
		if got := digitsValue(x, n); got != want {
			t.Fatalf("%q: value %d, want %d", b[:n], got, want)
		}
	}
}

// numberEdges are literals where float parsing goes wrong: the ends of
// the fast paths, subnormals, overflow, exact ties and near ties, long
// significands, huge exponents.
var numberEdges = []string{
	"0", "-0", "0.0", "-0.0", "0e0", "0e-999999999999", "-0e99999999999999999999", "0.000000000000000000000000000000",
	"1", "-1", "9", "10", "1e0", "1E+2", "1e-2", "12.5e-3", "0.123456789", "1234.5678",
	"9007199254740991", "9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995",
	"18014398509481985", "18014398509481986", "18014398509481987",
	"90071992547409930e-1", "900719925474099300e-2", "9007199254740993000e-3", "9007199254740993.0", "9007199254740993.0000000000001",
	"9007199254740992.9999999999999", "4503599627370496.5", "4503599627370497.5", "4503599627370497.50000000001",
	"1e22", "1e23", "1e-22", "1e-23", "123456789e22", "9007199254740993e22", "9007199254740993e-22",
	"1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "-1.7976931348623159e308",
	"179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791.9999999",
	"1e308", "1e309", "1e-308", "2.2250738585072014e-308", "2.2250738585072011e-308", "2.2250738585072012e-308",
	"2.225073858507201136057409796709131975934819546351645648023426109724822222021076945516529523908135087914149158913039621106870086438694594645527657207407820621743379988141063267329253552286881372149012981122451451889849057222307285255133155755015914397476397983411801999323962548289017107081850690630666655994938275772572015763062690663332647565300009245888316433037779791869612049497390377829704905051080609940730262937128958950003583799967207254304360284078895771796150945516748243471030702609144621572289880258182545180325707018860872113128079512233426288368622321503775666622503982534335974568884423900265498198385487948292206894721689831099698365846814022854243330660339850886445804001034933970427567186443383770486037861622771738545623065874679014086723327636718749999999999999999999999999999999999999e-308",
	"5e-324", "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "2.47032822920623272e-324",
	"1e-324", "3e-324", "7.4109846876186982e-324", "1e-400", "-1e-400", "1e-99999", "1e99999", "1e-342", "1e-343", "1e308",
	"1e1048575", "1e1048576", "1e10485759", "1e-10485760", "1e99999999999999999999", "0e99999999999999999999",
	"0." + strings.Repeat("0", 1100) + "1e1100", "0." + strings.Repeat("0", 1100) + "1e1101", strings.Repeat("9", 1200) + "e-1200",
	"0.1", "0.2", "0.3", "0.7", "1.1", "3.14159265358979323846264338327950288", "2.718281828459045",
	"0.30000000000000004", "0.1000000000000000055511151231257827021181583404541015625",
	"0.1000000000000000055511151231257827021181583404541015624", "0.1000000000000000055511151231257827021181583404541015626",
	"1.00000000000000011102230246251565404236316680908203125", "1.00000000000000011102230246251565404236316680908203124",
	"1.00000000000000011102230246251565404236316680908203126",
	"9999999999999999999", "10000000000000000000", "99999999999999999999", "18446744073709551615", "18446744073709551616",
	"12345678901234567890123456789", "0.00000000000000000000000000000012345678901234567890123456789",
	"100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001e-90",
	"7.2057594037927933e16", "72057594037927933", "72057594037927932", "72057594037927931", "72057594037927935", "72057594037927937",
}

func TestParseNumberEdges(t *testing.T) {
	for _, lit := range numberEdges {
		for _, l := range []string{lit, "-" + strings.TrimPrefix(lit, "-")} {
			checkNumber(t, l)
		}
	}
	// Ties between two float64 values, as integers and with the point
	// moved: an odd 54-bit number times a power of two, or over one.
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		m := r.Uint64()>>10 | 1<<53 | 1 // odd, 54 bits
		k := r.IntN(11)
		if k <= 5 && r.IntN(2) == 0 {
			// m/2^k: exact in k decimals.
			v := new(big.Float).SetPrec(200).SetMantExp(new(big.Float).SetUint64(m), -k)
			checkNumber(t, v.Text('f', k))
			continue
		}
		v := new(big.Int).Lsh(new(big.Int).SetUint64(m), uint(k)).String()
		checkNumber(t, v)
		if p := r.IntN(len(v)); p > 0 {
			checkNumber(t, v[:p]+"."+v[p:]+"e"+strconv.Itoa(len(v)-p))
		}
	}
}

// checkNumber fails unless parseNumber gives strconv.ParseFloat's bits
// for lit (non_finite where strconv overflows) and reads it whole.
func checkNumber(t *testing.T, lit string) {
	t.Helper()
	if msg := numberMismatch(lit); msg != "" {
		t.Fatal(msg)
	}
}

func numberMismatch(lit string) string {
	src := []byte(lit + ",")
	got, end, st := parseNumber(src, 0)
	want, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil && !math.IsInf(want, 0):
		return lit + ": strconv: " + err.Error()
	case end != len(lit):
		return lit + ": read " + strconv.Itoa(end) + " bytes"
	case math.IsInf(want, 0):
		if st != numNonFinite {
			return lit + ": status " + strconv.Itoa(int(st)) + ", want non-finite"
		}
	case st != numOK || math.Float64bits(got) != math.Float64bits(want):
		return lit + ": got " + strconv.FormatFloat(got, 'g', -1, 64) + " status " + strconv.Itoa(int(st)) + ", strconv " + strconv.FormatFloat(want, 'g', -1, 64)
	}
	return ""
}

// numberGen appends a random number literal of one family to b.
type numberGen struct {
	name   string
	gen    func(r *rand.Rand, b []byte) []byte
	weight float64 // share of the literals, relative to the others' 1
}

func randFinite(r *rand.Rand) float64 {
	for {
		if f := math.Float64frombits(r.Uint64()); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
}

// realistic is a float64 as data has them: uniform, normal or
// log-uniform over a few decades.
func realistic(r *rand.Rand) float64 {
	switch r.IntN(4) {
	case 0:
		return r.Float64()
	case 1:
		return r.NormFloat64()
	case 2:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(13)-6))
	}
	return math.Exp(r.Float64()*40 - 20)
}

func (g numberGen) weightOr1() float64 {
	if g.weight == 0 {
		return 1
	}
	return g.weight
}

var numberGens = []numberGen{
	// Realistic floats printed as Go, Python, Java and JavaScript print
	// them (the shortest string that reads back: 1–17 digits).
	{name: "shortest", gen: func(r *rand.Rand, b []byte) []byte { return strconv.AppendFloat(b, realistic(r), 'g', -1, 64) }},
	// As C's %.17g or numpy print them: always 17 digits.
	{name: "17 digits", gen: func(r *rand.Rand, b []byte) []byte { return strconv.AppendFloat(b, realistic(r), 'g', 17, 64) }},
	// Short decimals (%.3f … %.9f) and integers.
	{name: "short", gen: func(r *rand.Rand, b []byte) []byte {
		if r.IntN(4) == 0 {
			v := r.Int64N(1 << uint(1+r.IntN(62)))
			if r.IntN(2) == 0 {
				v = -v
			}
			return strconv.AppendInt(b, v, 10)
		}
		return strconv.AppendFloat(b, realistic(r), 'f', 3+r.IntN(7), 64)
	}},
	// Any float64: all exponents, subnormals included, shortest or with
	// 1–25 digits.
	{name: "any bits", gen: func(r *rand.Rand, b []byte) []byte {
		f := randFinite(r)
		if r.IntN(2) == 0 {
			return strconv.AppendFloat(b, f, 'e', -1, 64)
		}
		return strconv.AppendFloat(b, f, 'e', r.IntN(25), 64)
	}},
	// Random digit strings: 1–40 digits, leading zeros, a point anywhere,
	// exponents over the whole range and beyond.
	{name: "digits", gen: func(r *rand.Rand, b []byte) []byte {
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		n := 1 + r.IntN(40)
		if r.IntN(3) == 0 {
			n = 15 + r.IntN(6) // around 19 digits
		}
		point := -1
		if r.IntN(3) > 0 {
			point = r.IntN(n)
		}
		if r.IntN(4) == 0 {
			b = append(b, "0."...)
			for k := r.IntN(30); k > 0; k-- {
				b = append(b, '0')
			}
			point = -1
		}
		zeroOK := len(b) > 0 && b[len(b)-1] == '.' // after "0.", any digit may lead
		for k := range n {
			c := byte('0' + r.IntN(10))
			if r.IntN(8) == 0 {
				c = "09"[r.IntN(2)] // runs of 0s and 9s
			}
			if k == 0 && c == '0' && !zeroOK && point != 0 && n > 1 {
				c = '1' // no leading zero before more integer digits
			}
			b = append(b, c)
			if k == point && k < n-1 {
				b = append(b, '.')
			}
		}
		if r.IntN(4) > 0 {
			b = append(b, "eE"[r.IntN(2)])
			if r.IntN(2) == 0 {
				b = append(b, "+-"[r.IntN(2)])
			}
			b = strconv.AppendInt(b, int64(r.IntN(720)), 10)
			if r.IntN(100) == 0 {
				b = append(b, "000000000000"...)
			}
		}
		return b
	}},
	// Long significands, 20–1 300 digits: random, or a digit then runs of
	// zeros or nines (where strconv misrounds beyond 800 digits: see
	// fastNumber), exponents around the significand's length.
	{name: "long", weight: 0.02, gen: func(r *rand.Rand, b []byte) []byte {
		n := 20 + r.IntN(1281)
		b = append(b, byte('1'+r.IntN(9)))
		mode := r.IntN(3)
		for range n - 1 {
			switch mode {
			case 0:
				b = append(b, byte('0'+r.IntN(10)))
			case 1:
				b = append(b, '0')
			default:
				b = append(b, '9')
			}
		}
		e := -n + r.IntN(40) - 20
		if r.IntN(3) == 0 {
			e = -n + r.IntN(700) - 350
		}
		return strconv.AppendInt(append(b, 'e'), int64(e), 10)
	}},
	// Halfway between two adjacent float64 values, exactly, or with the
	// exact expansion cut to 16–30 digits, or nudged up in its last digit.
	{name: "near ties", weight: 0.1, gen: func(r *rand.Rand, b []byte) []byte {
		f := math.Abs(randFinite(r))
		if r.IntN(2) == 0 {
			f = math.Abs(realistic(r))
		}
		g := math.Nextafter(f, math.Inf(1))
		if math.IsInf(g, 0) {
			return strconv.AppendFloat(b, f, 'e', -1, 64)
		}
		mid := new(big.Float).SetPrec(2100).SetFloat64(f)
		mid.Add(mid, new(big.Float).SetFloat64(g))
		mid.Quo(mid, big.NewFloat(2))
		s := mid.Text('e', 800)
		mant, exp, _ := strings.Cut(s, "e")
		mant = strings.TrimRight(mant, "0")
		switch r.IntN(3) {
		case 0: // exact
		case 1:
			if n := 16 + r.IntN(15); len(mant) > n+1 {
				mant = mant[:n+1]
			}
		default:
			if n := 16 + r.IntN(15); len(mant) > n+1 {
				d := []byte(mant[:n+1])
				if d[len(d)-1] < '9' {
					d[len(d)-1]++
				}
				mant = string(d)
			}
		}
		return append(append(append(b, mant...), 'e'), exp...)
	}},
}

// TestParseNumberRandom compares parseNumber with strconv.ParseFloat on
// random literals of every family of numberGens (the near ties, slow to
// make, a tenth as many, the long ones a fiftieth), 200 000 in all by
// default.
// WIRE_NUMBER_TESTS=300000000 runs hundreds of millions (on all cores).
func TestParseNumberRandom(t *testing.T) {
	total := 200000
	if testing.Short() {
		total = 20000
	}
	if s := os.Getenv("WIRE_NUMBER_TESTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("WIRE_NUMBER_TESTS=%q: %v", s, err)
		}
		total = n
	}
	workers := runtime.GOMAXPROCS(0)
	weights := 0.0
	for _, g := range numberGens {
		weights += g.weightOr1()
	}
	for gi, g := range numberGens {
		per := int(float64(total) * g.weightOr1() / weights / float64(workers))
		var wg sync.WaitGroup
		slow, clinger := make([]int, workers), make([]int, workers)
		fail := make([]string, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(gi), uint64(w)))
				var b []byte
				for range per {
					b = g.gen(r, b[:0])
					lit := string(b)
					if msg := numberMismatch(lit); msg != "" {
						fail[w] = msg
						return
					}
					if _, _, st := fastNumber(append(b, ','), 0); st == numSlow {
						slow[w]++
					}
					if !clingerOnly(lit) {
						clinger[w]++
					}
				}
			}()
		}
		wg.Wait()
		n, c := 0, 0
		for w := range workers {
			if fail[w] != "" {
				t.Fatalf("%s: %s", g.name, fail[w])
			}
			n, c = n+slow[w], c+clinger[w]
		}
		all := float64(per * workers)
		t.Logf("%-9s %d literals, %.4f%% left to strconv (%.4f%% with Clinger's fast path alone)", g.name, per*workers, 100*float64(n)/all, 100*float64(c)/all)
	}
}

// TestParseNumberPaths parses random strings of number bytes followed by
// one delimiter (where the words of eight bytes cannot be read: the byte
// loops) and by many (the words): the value, the end and the status must
// be the same both ways; a number read must be what the JSON grammar
// takes, followed by no digit unless it is a lone 0, and strconv's value.
func TestParseNumberPaths(t *testing.T) {
	grammar := regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	r := rand.New(rand.NewPCG(21, 22))
	const alphabet = "0123456789000111-+.eE"
	var lit []byte
	for range 300000 {
		lit = lit[:0]
		for n := r.IntN(24); n > 0; n-- {
			lit = append(lit, alphabet[r.IntN(len(alphabet))])
		}
		short := append(slices.Clip(lit), ',')
		long := append(slices.Clip(lit), ",,,,,,,,,,,,,,,,"...)
		v1, e1, s1 := parseNumber(short, 0)
		v2, e2, s2 := parseNumber(long, 0)
		if math.Float64bits(v1) != math.Float64bits(v2) || e1 != e2 || s1 != s2 {
			t.Fatalf("%q: (%v, %d, %d) with one delimiter, (%v, %d, %d) with more", lit, v1, e1, s1, v2, e2, s2)
		}
		if s1 != numOK {
			continue
		}
		num := string(lit[:e1])
		if !grammar.MatchString(num) {
			t.Fatalf("%q: read %q, not a JSON number", lit, num)
		}
		if e1 < len(lit) && isDigit(lit[e1]) && strings.TrimPrefix(num, "-") != "0" {
			t.Fatalf("%q: read %q, a digit left after it", lit, num)
		}
		if want, err := strconv.ParseFloat(num, 64); err != nil || math.Float64bits(v1) != math.Float64bits(want) {
			t.Fatalf("%q: %v, strconv %v (%v)", num, v1, want, err)
		}
	}
}

// clingerOnly tells whether Clinger's fast path alone (at most 19
// significant digits, a significand ≤ 2^53, a decimal exponent in
// [−22, 22]) takes lit, a valid literal: the decoder before Eisel–Lemire.
func clingerOnly(lit string) bool {
	lit = strings.TrimPrefix(lit, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(lit), "e")
	q := 0
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil {
			return false
		}
		q = e
	}
	if ip, fp, ok := strings.Cut(mant, "."); ok {
		q -= len(fp)
		mant = ip + fp
	}
	mant = strings.TrimLeft(mant, "0")
	if mant == "" {
		return true
	}
	if len(mant) > 19 {
		return false
	}
	w, _ := strconv.ParseUint(mant, 10, 64)
	return w <= 1<<53 && q >= -22 && q <= 22
}

// FuzzParseNumber compares parseNumber with strconv.ParseFloat on any
// bytes that strconv and the JSON grammar both take for a number, and
// shortNumber with parseNumber where it reads a number a comma follows.
func FuzzParseNumber(f *testing.F) {
	for _, s := range numberEdges {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		padded := append([]byte(lit), ",,,,,,,,,,,"...) // shortNumber reads eleven bytes
		if v, end, ok := shortNumber(padded, 0); ok && padded[end] == ',' {
			pv, pend, st := parseNumber(padded, 0)
			if st != numOK || pend != end || math.Float64bits(pv) != math.Float64bits(v) {
				t.Fatalf("%q: shortNumber %v to %d, parseNumber %v to %d (status %d)", lit, v, end, pv, pend, st)
			}
		}
		end, ok := scanNumber([]byte(lit), 0)
		_, pend, st := parseNumber([]byte(lit), 0)
		if !ok {
			if st == numOK || st == numNonFinite || pend != end {
				t.Fatalf("%q: status %d at %d, the grammar fails at %d", lit, st, pend, end)
			}
			return
		}
		if pend != end {
			t.Fatalf("%q: read %d bytes, the grammar %d", lit, pend, end)
		}
		if msg := numberMismatch(lit[:end]); msg != "" {
			t.Fatal(msg)
		}
	})
}

// numberBenchSets are the literals of BenchmarkParseNumber: the numbers of
// the decode benchmarks, and realistic ones as numberGens makes them.
func numberBenchSets() []struct {
	name string
	lits []string
} {
	r := rand.New(rand.NewPCG(7, 8))
	gen := func(g int) []string {
		out := make([]string, 256)
		for i := range out {
			out[i] = string(numberGens[g].gen(r, nil))
		}
		return out
	}
	return []struct {
		name string
		lits []string
	}{
		{"bench", []string{"0.123456789", "-12.5e-3", "1234.5678", "17", "1236.5678", "-2.702702703"}},
		{"shortest", gen(0)},
		{"17digits", gen(1)},
		{"short", gen(2)},
	}
}

// BenchmarkParseNumber parses number literals followed by a comma: per
// number, with strconv.ParseFloat alone for comparison.
func BenchmarkParseNumber(b *testing.B) {
	for _, set := range numberBenchSets() {
		srcs := make([][]byte, len(set.lits))
		for i, l := range set.lits {
			srcs[i] = []byte(l + ",")
		}
		b.Run(set.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, _, st := parseNumber(srcs[i%len(srcs)], 0); st != numOK {
					b.Fatal(st)
				}
				i++
			}
		})
		b.Run(set.name+"/strconv", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := strconv.ParseFloat(set.lits[i%len(set.lits)], 64); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestShortNumber: shortNumber takes exactly the literals -?d.d{1,7} that
// no digit, '.'-less exponent or end of input follows within its eleven
// bytes, with strconv's value and end; the others are left to fastNumber.
func TestShortNumber(t *testing.T) {
	lits := []string{"0.5", "-0.5", "1.2345678", "-9.9999999", "0.0000000", "-0.000000", "9.1",
		"1.23456789", "12.5", "-12.5", "0.", "1", ".5", "-.5", "1.5e3", "1.5E-3", "01.5", "--1.5", "+1.5", "1..5"}
	for _, lit := range lits {
		for _, tail := range []string{",", "]", " ,", "}", "e1,", "E1,", ".5,", ",1,2,3,4,5,6,7,8,9"} {
			src := []byte(lit + tail)
			v, end, ok := shortNumber(src, 0)
			digits := strings.TrimPrefix(lit, "-")
			form := len(digits) >= 3 && len(digits) <= 9 && isDigit(digits[0]) && digits[1] == '.' &&
				strings.Trim(digits[2:], "0123456789") == "" && tail[0]|0x20 != 'e'
			if want := form && len(src) >= 11; ok != want {
				t.Errorf("%q: short %v, want %v", src, ok, want)
			}
			if !ok {
				continue
			}
			want, _ := strconv.ParseFloat(lit, 64)
			if math.Float64bits(v) != math.Float64bits(want) || end != len(lit) {
				t.Errorf("%q: %v, end %d; want %v, end %d", src, v, end, want, len(lit))
			}
		}
	}
	if _, _, ok := shortNumber([]byte("1.5,2.5,3"), 4); ok {
		t.Error("read past the end of a short input") // fewer than eleven bytes from 4
	}
}
