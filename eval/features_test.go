package eval

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// writeShuffledRipley writes Ripley's training rows (sorted by class in
// the file) in a fixed random order.
func writeShuffledRipley(t *testing.T) string {
	t.Helper()
	header, rows := readCSVLines(t, "testdata/ripley_train.csv")
	rng := rand.New(rand.NewPCG(7, 8))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	path := filepath.Join(t.TempDir(), "ripley_shuffled.csv")
	if err := os.WriteFile(path, []byte(header+"\n"+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// withoutTimes returns the report's models without the wall-time measure.
func withoutTimes(js map[string]any) map[string]any {
	models := js["models"].(map[string]any)
	for _, m := range models {
		for _, s := range m.(map[string]any) {
			delete(s.(map[string]any), "events_per_s")
		}
	}
	return models
}

// TestShuffleRows: the order is a permutation, the same for the same seed
// and another for another seed.
func TestShuffleRows(t *testing.T) {
	order := func(seed int64) []float64 {
		rows := make([]Row, 500)
		for i := range rows {
			rows[i].Label = float64(i)
		}
		shuffleRows(rows, seed)
		out := make([]float64, len(rows))
		for i, r := range rows {
			out[i] = r.Label
		}
		return out
	}
	a, b, c := order(1), order(1), order(2)
	if !slices.Equal(a, b) {
		t.Errorf("seed 1 twice: different orders")
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2: the same order")
	}
	sorted := slices.Clone(a)
	slices.Sort(sorted)
	for i, v := range sorted {
		if v != float64(i) {
			t.Fatalf("not a permutation: %v", sorted)
		}
	}
	if slices.IsSorted(a) {
		t.Errorf("seed 1 left the rows in order")
	}
}

// TestShuffle: Options.Shuffle runs the data file's rows in an order drawn
// from the seed: the same report for the same seed, another for another
// seed, every row run once (skipped and unlabelled rows counted as
// without), and shuffled/seed recorded.
func TestShuffle(t *testing.T) {
	// Ripley's training set with an unusable row and an unlabelled one.
	header, rows := readCSVLines(t, "testdata/ripley_train.csv")
	rows = append(rows, "0.1,oops,1", "0.2,0.3,")
	path := filepath.Join(t.TempDir(), "train.csv")
	if err := os.WriteFile(path, []byte(header+"\n"+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(seed int64) (*Report, map[string]any) {
		rep, js, _ := runEval(t, "ripley.yaml", Options{Data: path, Test: "testdata/ripley_test.csv", Shuffle: true, Seed: seed})
		return rep, withoutTimes(js)
	}
	r1, a := run(1)
	_, b := run(1)
	_, c := run(2)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("seed 1 twice: different reports")
	}
	if reflect.DeepEqual(a, c) {
		t.Errorf("seeds 1 and 2: the same report")
	}
	d := r1.Data[sectionPrequential]
	if !d.Shuffled || d.Seed == nil || *d.Seed != 1 || d.Rows != 252 || d.Unlabelled != 1 || d.Skipped[ReasonBadNumber] != 1 {
		t.Errorf("data: %+v", d)
	}
	if h := r1.Data[sectionHoldout]; h.Shuffled || h.Seed != nil {
		t.Errorf("holdout shuffled: %+v", h)
	}
	if n := r1.Models["mam_rbf"].Prequential.N; n != 250 {
		t.Errorf("prequential n %d, want 250", n)
	}
	// The order is not the file's: Ripley's file has one change of label.
	if c := *d.LabelChanges; c < 100 {
		t.Errorf("shuffled: %d label changes", c)
	}
	_, plain, _ := runEval(t, "ripley.yaml", Options{Data: path, Test: "testdata/ripley_test.csv"})
	if reflect.DeepEqual(withoutTimes(plain), a) {
		t.Errorf("shuffled and file order: the same report")
	}
}

// TestSortedLabelsWarning: Ripley's training file, sorted by class, gets
// the warning; the same rows in a random order, or run with Shuffle, do
// not.
func TestSortedLabelsWarning(t *testing.T) {
	rep, js, dir := runEval(t, "ripley.yaml", Options{Data: "testdata/ripley_train.csv"})
	d := rep.Data[sectionPrequential]
	if !d.LabelsLookSorted || *d.LabelChanges != 1 || math.Abs(*d.ExpectedLabelChanges-124.5) > 0.5 {
		t.Errorf("sorted file: %+v", d)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "labels look sorted") || !strings.Contains(rep.Warnings[0], "--shuffle") {
		t.Errorf("sorted file: warnings %q", rep.Warnings)
	}
	if w, ok := js["warnings"].([]any); !ok || len(w) != 1 {
		t.Errorf("report.json warnings: %v", js["warnings"])
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ReportHTML)); !bytes.Contains(b, []byte("labels look sorted")) {
		t.Errorf("report.html has no warning")
	}

	shuffled := writeShuffledRipley(t)
	rep, js, _ = runEval(t, "ripley.yaml", Options{Data: shuffled})
	if d := rep.Data[sectionPrequential]; d.LabelsLookSorted || len(rep.Warnings) != 0 || *d.LabelChanges < 50 {
		t.Errorf("shuffled file: %+v, warnings %q", d, rep.Warnings)
	}
	if _, ok := js["warnings"]; ok {
		t.Errorf("report.json has warnings for a shuffled file")
	}
	rep, _, _ = runEval(t, "ripley.yaml", Options{Data: "testdata/ripley_train.csv", Shuffle: true, Seed: 5})
	if len(rep.Warnings) != 0 || rep.Data[sectionPrequential].LabelsLookSorted {
		t.Errorf("--shuffle: warnings %q", rep.Warnings)
	}
	// Below SortedMinRows labelled rows, no judgement.
	rep, _, _ = runEval(t, "ripley.yaml", Options{Data: "testdata/ripley_small.csv"})
	if len(rep.Warnings) != 0 {
		t.Errorf("50 rows: warnings %q", rep.Warnings)
	}
}

// TestAbstentions: the svm of ripley_svm.yaml makes no decision until its
// first refit (100 events). Abstentions are counted apart: the report's
// counts equal those of a direct run of the same model over the same rows,
// decided_error is over the decided rows only, and error (as the service
// counts it) is the mistakes plus the abstentions over all rows.
func TestAbstentions(t *testing.T) {
	data := writeShuffledRipley(t)
	cfg := loadConfig(t, "ripley_svm.yaml")
	rep, js, dir := runEval(t, "ripley_svm.yaml", Options{Data: data})

	m, err := testTypes.New(cfg.Models[0].Spec())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := NewReader(FormatCSV, f, 2, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var n, abstain, mistakes int64
	var r Row
	for rd.Next(&r) == nil {
		y, _ := m.Label(r.Label)
		p := m.Observe(r.X, y, true)
		n++
		switch {
		case p.Label == 0:
			abstain++
		case float64(p.Label) != y:
			mistakes++
		}
	}
	if abstain < 100 || abstain == n {
		t.Fatalf("direct run: %d abstentions of %d; the test needs some of each", abstain, n)
	}
	ms := rep.Models["svm"].Prequential
	if ms.N != n || *ms.Abstentions != abstain {
		t.Errorf("n %d abstentions %d, want %d and %d", ms.N, *ms.Abstentions, n, abstain)
	}
	if want := float64(mistakes) / float64(n-abstain); math.Abs(*ms.DecidedError-want) > 1e-15 {
		t.Errorf("decided_error %v, want %v (%d mistakes over %d decided rows)", *ms.DecidedError, want, mistakes, n-abstain)
	}
	if want := float64(mistakes+abstain) / float64(n); math.Abs(*ms.Error-want) > 1e-15 {
		t.Errorf("error %v, want %v", *ms.Error, want)
	}
	if want := float64(abstain) / float64(n); *ms.AbstentionRate != want {
		t.Errorf("abstention_rate %v, want %v", *ms.AbstentionRate, want)
	}
	iv, _ := Wilson(mistakes, n-abstain, z95)
	if *ms.DecidedErrorCI != iv {
		t.Errorf("decided_error_ci %+v, want %+v", *ms.DecidedErrorCI, iv)
	}
	c := ms.Confusion
	if c.AbstainPositive+c.AbstainNegative != abstain || c.FP+c.FN != mistakes || c.TP+c.TN+c.FP+c.FN != n-abstain {
		t.Errorf("confusion %+v: abstentions %d, mistakes %d, n %d", *c, abstain, mistakes, n)
	}
	p := section(t, js, "svm", "prequential")
	for _, k := range []string{"abstentions", "abstention_rate", "decided_error", "decided_error_ci", "error_ci", "confusion", "roc_auc"} {
		if _, ok := p[k]; !ok {
			t.Errorf("report.json: no %s", k)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("<td>%d (%.1f%%)</td>", abstain, 100*float64(abstain)/float64(n)); !bytes.Contains(b, []byte(want)) {
		t.Errorf("report.html has no %s", want)
	}
	var sum bytes.Buffer
	if err := rep.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(" %d (%.1f%%) ", abstain, 100*float64(abstain)/float64(n)); !strings.Contains(sum.String(), want) {
		t.Errorf("summary has no %q:\n%s", want, sum.String())
	}
}

// TestClassifierMeasures: ROC AUC, confusion matrix, intervals and the
// reliability curve in a run: consistent with each other and the report's
// error, AUC null (not NaN) for a holdout of one class, absent for
// ordinal models; reliability only for a model with a probability.
func TestClassifierMeasures(t *testing.T) {
	// The holdout: Ripley's positive test rows only.
	header, rows := readCSVLines(t, "testdata/ripley_test.csv")
	var pos []string
	for _, r := range rows {
		if strings.HasSuffix(r, ",1") {
			pos = append(pos, r)
		}
	}
	posPath := filepath.Join(t.TempDir(), "pos.csv")
	if err := os.WriteFile(posPath, []byte(header+"\n"+strings.Join(pos, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, js, dir := runEval(t, "ripley_svm.yaml", Options{Data: writeShuffledRipley(t), Test: posPath})
	pre, hold := rep.Models["svm"].Prequential, rep.Models["svm"].Holdout
	if pre.ROCAUC == nil || !pre.ROCAUC.Valid || !(pre.ROCAUC.Value > 0.7 && pre.ROCAUC.Value <= 1) {
		t.Errorf("prequential AUC %+v", pre.ROCAUC)
	}
	if hold.ROCAUC == nil || hold.ROCAUC.Valid {
		t.Errorf("one-class holdout: AUC %+v, want undefined", hold.ROCAUC)
	}
	h := section(t, js, "svm", "holdout")
	if v, ok := h["roc_auc"]; !ok || v != nil {
		t.Errorf("report.json: one-class holdout roc_auc %v (present %v), want null", v, ok)
	}
	for _, ms := range []*Measures{pre, hold} {
		c := ms.Confusion
		if c.TP+c.FP+c.TN+c.FN+c.AbstainPositive+c.AbstainNegative != ms.N {
			t.Errorf("confusion %+v does not add up to n %d", *c, ms.N)
		}
		if want := float64(c.FP+c.FN+c.AbstainPositive+c.AbstainNegative) / float64(ms.N); math.Abs(*ms.Error-want) > 1e-15 {
			t.Errorf("error %v, confusion gives %v", *ms.Error, want)
		}
		if ms.ErrorCI == nil || !(ms.ErrorCI.Lo <= *ms.Error && *ms.Error <= ms.ErrorCI.Hi) {
			t.Errorf("error %v outside its interval %+v", *ms.Error, ms.ErrorCI)
		}
		// Reliability: the svm publishes a probability once fitted.
		if len(ms.Reliability) != ReliabilityBins {
			t.Fatalf("%d reliability bins", len(ms.Reliability))
		}
		var n int64
		for i, b := range ms.Reliability {
			n += b.N
			if b.Lo != float64(i)/10 || (b.N > 0 && (*b.MeanProbability < b.Lo || *b.MeanProbability > b.Hi)) {
				t.Errorf("bin %d: %+v", i, b)
			}
		}
		if n == 0 || n > ms.N {
			t.Errorf("reliability over %d rows of %d", n, ms.N)
		}
	}
	if c := hold.Confusion; c.FP+c.TN+c.AbstainNegative != 0 {
		t.Errorf("holdout of positives only: %+v", *c)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"svm: reliability (holdout)", "confusion, prequential", "confusion, holdout", "<td>n/a</td>"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("report.html has no %q", want)
		}
	}

	// No probability (mam): no reliability, no log loss; AUC and the
	// confusion matrix all the same.
	rep, _, dir = runEval(t, "ripley.yaml", Options{Data: "testdata/ripley_train.csv"})
	ms := rep.Models["mam_rbf"].Prequential
	if ms.Reliability != nil || ms.ROCAUC == nil || !ms.ROCAUC.Valid || ms.Confusion == nil {
		t.Errorf("mam: %+v", ms)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ReportHTML)); bytes.Contains(b, []byte("reliability")) {
		t.Errorf("report.html: reliability plot for models without a probability")
	}
	// Ordinal: no AUC, confusion or decided error; abstentions and the
	// zero-one interval.
	_, js, _ = runEval(t, "boston.yaml", Options{Data: "testdata/boston_ordinal.csv"})
	p := section(t, js, "omam_rbf", "prequential")
	for _, k := range []string{"roc_auc", "confusion", "decided_error", "reliability", "error_ci"} {
		if _, ok := p[k]; ok {
			t.Errorf("ordinal model has %s", k)
		}
	}
	for _, k := range []string{"abstentions", "zero_one_ci"} {
		if _, ok := p[k]; !ok {
			t.Errorf("ordinal model has no %s", k)
		}
	}
}

var progressLine = regexp.MustCompile(`^eval: +(\d+)% (\d+) rows [\d.]+s \((prequential|holdout)\)$`)

// TestProgressPercent: the percentages follow the rows given to the models
// (not the bytes read ahead by the reader, which for a small file is all
// of it at once), never go back or above 100, and end at 100 — over the
// data and the test file together, with the rows shuffled or not, and on a
// terminal.
func TestProgressPercent(t *testing.T) {
	// Rows of one length, so that bytes and rows are proportional.
	dir := t.TempDir()
	write := func(name string, n int) string {
		var b strings.Builder
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		for range n {
			fmt.Fprintf(&b, `{"features":[%.4f,%.4f],"label":%2d}`+"\n", rng.Float64(), rng.Float64(), 2*rng.IntN(2)-1)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data, test := write("data.jsonl", 6000), write("test.jsonl", 4000)
	const total = 10000
	for _, shuffle := range []bool{false, true} {
		var out bytes.Buffer
		if _, err := Run(context.Background(), loadConfig(t, "ripley.yaml"), testTypes,
			Options{Data: data, Test: test, Progress: &out, Shuffle: shuffle}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		last := -1
		for _, l := range lines {
			m := progressLine.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("shuffle %v: progress line %q", shuffle, l)
			}
			pct, _ := strconv.Atoi(m[1])
			rows, _ := strconv.Atoi(m[2])
			done := 100 * float64(rows) / total
			if pct <= last || pct > 100 || pct%10 != 0 {
				t.Errorf("shuffle %v: %d%% after %d%%", shuffle, pct, last)
			}
			// The line is printed when the fraction done passes pct.
			if float64(pct) > done+0.5 || float64(pct) < done-10.5 {
				t.Errorf("shuffle %v: %q: %d%% with %.1f%% of the rows run", shuffle, l, pct, done)
			}
			if (rows <= 6000) != (m[3] == "prequential") {
				t.Errorf("shuffle %v: %q: section", shuffle, l)
			}
			last = pct
		}
		if last != 100 || len(lines) < 8 {
			t.Errorf("shuffle %v: %d lines, the last at %d%%:\n%s", shuffle, len(lines), last, out.String())
		}
	}

	// Terminal: the bar's percentages.
	var out bytes.Buffer
	if _, err := Run(context.Background(), loadConfig(t, "ripley.yaml"), testTypes,
		Options{Data: data, Test: test, Progress: &out, Terminal: true}); err != nil {
		t.Fatal(err)
	}
	draws := regexp.MustCompile(`\] +(\d+)% (\d+) rows`).FindAllStringSubmatch(out.String(), -1)
	if len(draws) == 0 {
		t.Fatalf("terminal: no bar in %q", out.String())
	}
	last := -1
	for _, d := range draws {
		pct, _ := strconv.Atoi(d[1])
		if pct < last || pct > 100 {
			t.Errorf("terminal: %d%% after %d%%", pct, last)
		}
		last = pct
	}
	if last != 100 || draws[len(draws)-1][2] != strconv.Itoa(total) || !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("terminal: ends at %d%%, %s rows", last, draws[len(draws)-1][2])
	}
}

// TestProgressBounds: the display's fraction is clamped to the current
// file and to 1, never goes back, and is unknown (rows only) when a size
// is.
func TestProgressBounds(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false, 100, 100)
	p.file(sectionPrequential, 100)
	p.at(250, 10) // beyond the file (it grew): the file's end, 50%
	if p.percent() != 50 {
		t.Errorf("past the end of the first file: %d%%", p.percent())
	}
	p.at(20, 10) // never back
	if p.percent() != 50 {
		t.Errorf("went back: %d%%", p.percent())
	}
	p.endFile()
	p.file(sectionHoldout, 100)
	p.at(99, 10)
	if p.percent() != 99 {
		t.Errorf("99 of 200 bytes: %d%%", p.percent())
	}
	p.endFile()
	p.finish()
	p.done()
	if p.percent() != 100 || !strings.HasSuffix(out.String(), "eval: 100% 30 rows 0.0s (holdout)\n") || strings.Count(out.String(), "100%") != 1 {
		t.Errorf("finish: %d%%, output\n%s", p.percent(), out.String())
	}

	out.Reset()
	p = newProgress(&out, false, 100, 0) // the test file's size is unknown
	p.file(sectionPrequential, 100)
	p.at(100, 5)
	p.finish()
	if out.String() != "eval: 5 rows 0.0s\n" {
		t.Errorf("unknown size: %q", out.String())
	}
	var nilp *progress
	nilp.file("x", 1)
	nilp.at(1, 1)
	nilp.endFile()
	nilp.finish()
	nilp.done()
}

// TestSummary: one line per model and section, in columns, the values the
// report holds; measures no model has are left out.
func TestSummary(t *testing.T) {
	rep, _, _ := runEval(t, "ripley_svm.yaml", Options{Data: writeShuffledRipley(t), Test: "testdata/ripley_test.csv"})
	var b bytes.Buffer
	if err := rep.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want a header and 2", len(lines))
	}
	if f := strings.Fields(lines[0]); !slices.Equal(f, []string{"model", "type", "section", "n", "error", "error", "95%", "CI", "abstained", "decided", "error", "decided", "95%", "CI", "auc", "log", "loss"}) {
		t.Errorf("header %q", f)
	}
	for _, l := range lines[1:] {
		if utf8.RuneCountInString(l) != utf8.RuneCountInString(lines[0]) {
			t.Errorf("line %q is not as wide as the header %q", l, lines[0])
		}
	}
	h := rep.Models["svm"].Holdout
	want := fmt.Sprintf("svm  %s  holdout  ", rep.Config.Types["svm"])
	for _, v := range []string{"1000", fmtPtr(h.Error, 4), fmtCI(h.ErrorCI, 4), fmtAbstentions(h), fmtPtr(h.DecidedError, 4), fmtCI(h.DecidedErrorCI, 4), fmtAUC(h), fmtPtr(h.LogLoss, 4)} {
		want += v + " "
	}
	if got := strings.Join(strings.Fields(lines[2]), " ") + " "; got != strings.Join(strings.Fields(want), " ")+" " {
		t.Errorf("holdout line %q, want the fields of %q", lines[2], want)
	}

	// An ordinal and a ranking model: τ-b, zero-one, MAE; no error column.
	// (The ranking model refits at the end of --data only: τ-b on the
	// holdout.)
	for _, c := range []string{"boston.yaml", "boston_rank.yaml"} {
		rep, _, _ := runEval(t, c, Options{Data: "testdata/boston_ordinal.csv", Test: "testdata/boston_ordinal.csv"})
		b.Reset()
		if err := rep.WriteSummary(&b); err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", b.String())
		header := strings.Fields(strings.SplitN(b.String(), "\n", 2)[0])
		if !slices.Contains(header, "tau_b") || slices.Contains(header, "error") || slices.Contains(header, "auc") {
			t.Errorf("%s: header %q", c, header)
		}
	}
}
