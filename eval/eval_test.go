package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/streamer/streamer/config"
)

var update = flag.Bool("update", false, "rewrite docs/eval-ripley-bound.svg")

func loadConfig(t *testing.T, name string) config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join("testdata", name), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runEval runs Run and writes the report into a temporary directory; it
// returns the report and report.json decoded generically.
func runEval(t *testing.T, cfgName string, opt Options) (*Report, map[string]any, string) {
	t.Helper()
	rep, err := Run(context.Background(), loadConfig(t, cfgName), testTypes, opt)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	var js map[string]any
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	return rep, js, dir
}

// section returns report.json's models[model][sec].
func section(t *testing.T, js map[string]any, model, sec string) map[string]any {
	t.Helper()
	m, ok := js["models"].(map[string]any)[model].(map[string]any)
	if !ok {
		t.Fatalf("report.json has no model %q", model)
	}
	s, ok := m[sec].(map[string]any)
	if !ok {
		t.Fatalf("report.json: models.%s has no %s", model, sec)
	}
	return s
}

func TestRipley(t *testing.T) {
	rep, js, dir := runEval(t, "ripley.yaml", Options{
		Data: "testdata/ripley_train.csv", Test: "testdata/ripley_test.csv"})

	// Shape: models → name → exactly prequential and holdout.
	for name, m := range js["models"].(map[string]any) {
		var keys []string
		for k := range m.(map[string]any) {
			keys = append(keys, k)
		}
		if len(keys) != 2 || m.(map[string]any)["prequential"] == nil || m.(map[string]any)["holdout"] == nil {
			t.Errorf("models.%s has keys %v, want prequential and holdout", name, keys)
		}
	}

	h := section(t, js, "mam_rbf", "holdout")
	t.Logf("mam_rbf holdout: %v", h)
	t.Logf("mam_rbf prequential: %v", section(t, js, "mam_rbf", "prequential"))
	t.Logf("mam_linear holdout: %v", section(t, js, "mam_linear", "holdout"))
	if e := h["error"].(float64); e > 0.10 {
		t.Errorf("mam_rbf holdout error %.3f > 0.10", e)
	}
	if b := h["mean_mistake_bound"].(float64); !(b > 0 && b <= 1) {
		t.Errorf("mam_rbf mean_mistake_bound %v not in (0, 1]", b)
	}
	if n := h["n"].(float64); n != 1000 {
		t.Errorf("mam_rbf holdout n = %v, want 1000", n)
	}
	if v := h["bound_violations"].(float64); v != 0 {
		t.Errorf("mam_rbf holdout bound_violations = %v, want 0", v)
	}
	if _, ok := h["log_loss"]; ok {
		t.Errorf("log_loss reported for a model without probabilities")
	}
	if _, ok := h["kendall_tau"]; ok {
		t.Errorf("kendall_tau reported for a classifier")
	}
	for _, model := range []string{"mam_rbf", "mam_linear"} {
		for _, sec := range []string{"prequential", "holdout"} {
			s := section(t, js, model, sec)
			if s["events_per_s"].(float64) <= 0 {
				t.Errorf("%s %s: events_per_s %v", model, sec, s["events_per_s"])
			}
			if s["rejected"].(float64) != 0 {
				t.Errorf("%s %s: rejected %v", model, sec, s["rejected"])
			}
		}
	}
	if p := section(t, js, "mam_rbf", "prequential"); p["n"].(float64) != 250 {
		t.Errorf("prequential n = %v, want 250", p["n"])
	}
	if got := rep.ModelNames(); !reflect.DeepEqual(got, []string{"mam_rbf", "mam_linear"}) {
		t.Errorf("model names %v", got)
	}
	checkHTML(t, dir, 6) // 3 plots per model
}

// checkHTML checks that report.html exists, holds at least plots inline
// SVG elements and refers to nothing outside itself.
func checkHTML(t *testing.T, dir string, plots int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if n := strings.Count(html, "<svg"); n < plots {
		t.Errorf("report.html has %d <svg elements, want ≥ %d", n, plots)
	}
	for _, bad := range []string{"http:", "https:", "<script", "<link", "<img", "url("} {
		if strings.Contains(html, bad) {
			t.Errorf("report.html contains %q: not self-contained", bad)
		}
	}
	if !strings.Contains(html, `<table class="summary">`) {
		t.Errorf("report.html has no summary table")
	}
}

func TestBostonOrdinal(t *testing.T) {
	_, js, dir := runEval(t, "boston.yaml", Options{Data: "testdata/boston_ordinal.csv"})
	p := section(t, js, "omam_rbf", "prequential")
	t.Logf("omam_rbf prequential: %v", p)
	tau, ok := p["kendall_tau"].(float64)
	if !ok || tau < 0.5 {
		t.Errorf("prequential kendall_tau %v, want ≥ 0.5", p["kendall_tau"])
	}
	for _, k := range []string{"mae", "zero_one"} {
		if _, ok := p[k].(float64); !ok {
			t.Errorf("no %s", k)
		}
	}
	for _, k := range []string{"error", "mean_mistake_bound", "bound_violations", "log_loss"} {
		if _, ok := p[k]; ok {
			t.Errorf("%s reported for an ordinal model", k)
		}
	}
	if p["n"].(float64) != 506 {
		t.Errorf("n = %v, want 506", p["n"])
	}
	if _, ok := js["models"].(map[string]any)["omam_rbf"].(map[string]any)["holdout"]; ok {
		t.Errorf("holdout section without --test")
	}
	checkHTML(t, dir, 2) // quality over the stream and histograms per level
}

// TestFormatsAgree evaluates the same 50 Ripley rows as CSV, LIBSVM and
// JSON Lines (dense arrays and named objects, true/false labels): the rows
// read and the reports are identical.
func TestFormatsAgree(t *testing.T) {
	files := []string{"testdata/ripley_small.csv", "testdata/ripley_small.libsvm", "testdata/ripley_small.jsonl"}
	cfg := loadConfig(t, "ripley.yaml")
	names := cfg.Models[0].Features.Names
	var ref []Row
	for _, path := range files {
		format, err := FormatFromPath(path)
		if err != nil {
			t.Fatal(err)
		}
		rows := readAll(t, path, format, 2, names)
		if len(rows) != 50 {
			t.Fatalf("%s: %d rows, want 50", path, len(rows))
		}
		// Labels compared as the model sees them (false = 0 → −1).
		for i := range rows {
			if rows[i].Label == 0 {
				rows[i].Label = -1
			}
		}
		if ref == nil {
			ref = rows
		} else if !reflect.DeepEqual(rows, ref) {
			t.Errorf("%s: rows differ from the CSV's", path)
		}
	}
	var want map[string]any
	for _, path := range files {
		_, js, _ := runEval(t, "ripley.yaml", Options{Data: path, Test: path})
		got := js["models"].(map[string]any)
		for _, m := range got {
			for _, s := range m.(map[string]any) {
				delete(s.(map[string]any), "events_per_s") // wall time
			}
		}
		if want == nil {
			want = got
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: report %v\nwant (CSV) %v", path, got, want)
		}
	}
}

func readAll(t *testing.T, path, format string, dim int, names []string) []Row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := NewReader(format, f, dim, names, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for {
		var r Row
		err := rd.Next(&r)
		if err == io.EOF {
			return rows
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, r)
	}
}

func TestReaderRows(t *testing.T) {
	type want struct {
		x      []float64
		label  float64
		has    bool
		reason string // RowError reason, "" = a good row
	}
	tests := []struct {
		name, format, src string
		names             []string
		rows              []want
	}{
		{"csv", FormatCSV, "a,b,label\n1,2,1\n3,4,\n5,x,1\n1,2\n7,NaN,-1\n6,7,0\n", nil, []want{
			{x: []float64{1, 2}, label: 1, has: true},
			{x: []float64{3, 4}},
			{reason: ReasonBadNumber},
			{reason: "wrong_dimension"},
			{reason: "non_finite"},
			{x: []float64{6, 7}, label: 0, has: true},
		}},
		{"csv by name", FormatCSV, "b,a,label\n1,2,1\n", []string{"a", "b"}, []want{
			{x: []float64{2, 1}, label: 1, has: true},
		}},
		{"libsvm", FormatLIBSVM, "# comment\n+1 2:5\n\n-1 1:1 2:2 # trailing\n1 3:1\n0 1:x\n1 1:1e999\n", nil, []want{
			{x: []float64{0, 5}, label: 1, has: true},
			{x: []float64{1, 2}, label: -1, has: true},
			{reason: ReasonBadIndex},
			{reason: ReasonBadNumber},
			{reason: "non_finite"},
		}},
		{"jsonl", FormatJSONL, `{"features":[1,2],"label":true}` + "\n\n" + `{"features":[3,4]}` + "\n" +
			`{"features":[3,4,5],"label":1}` + "\n" + `not json` + "\n" + `{"features":{"b":1,"a":2},"label":null}`, []string{"a", "b"}, []want{
			{x: []float64{1, 2}, label: 1, has: true},
			{x: []float64{3, 4}},
			{reason: "wrong_dimension"},
			{reason: "not_json"},
			{x: []float64{2, 1}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd, err := NewReader(tc.format, strings.NewReader(tc.src), 2, tc.names, 0)
			if err != nil {
				t.Fatal(err)
			}
			var r Row
			for i, w := range tc.rows {
				err := rd.Next(&r)
				var re *RowError
				switch {
				case w.reason != "":
					if !errors.As(err, &re) || re.Reason != w.reason {
						t.Fatalf("row %d: error %v, want reason %s", i, err, w.reason)
					}
				case err != nil:
					t.Fatalf("row %d: %v", i, err)
				case !reflect.DeepEqual(r.X, w.x) || r.HasLabel != w.has || r.Label != w.label:
					t.Fatalf("row %d: %+v, want %+v", i, r, w)
				}
			}
			if err := rd.Next(&r); err != io.EOF {
				t.Fatalf("after the last row: %v, want EOF", err)
			}
		})
	}
	if _, err := NewReader(FormatCSV, strings.NewReader("a,b,c,label\n"), 2, nil, 0); err == nil {
		t.Errorf("csv header with 4 columns for dim 2: no error")
	}
}

// TestSkippedAndRejected: unusable rows are counted by reason in the data
// section, unlabelled rows are scored but not judged, and a label the
// model refuses (2) is counted as rejected.
func TestSkippedAndRejected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	src := `{"features":[0.1,0.2],"label":1}
{"features":[0.5,0.2],"label":-1}
{"features":[0.1,0.3]}
{"features":[0.1,0.3],"label":2}
{"features":[0.1],"label":1}
{"features":[0.2,0.2],"label":1}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, js, _ := runEval(t, "ripley.yaml", Options{Data: path, MaxSkipped: 0.2})
	p := section(t, js, "mam_rbf", "prequential")
	if p["n"].(float64) != 3 || p["rejected"].(float64) != 1 {
		t.Errorf("n %v rejected %v, want 3 and 1", p["n"], p["rejected"])
	}
	d := rep.Data[sectionPrequential]
	if d.Rows != 6 || d.Unlabelled != 1 || d.Skipped["wrong_dimension"] != 1 {
		t.Errorf("data: %+v", d)
	}
}

func TestFormatFromPath(t *testing.T) {
	for path, want := range map[string]string{
		"a.csv": FormatCSV, "b.CSV": FormatCSV, "c.jsonl": FormatJSONL, "d.json": FormatJSONL,
		"e.libsvm": FormatLIBSVM, "f.svm": FormatLIBSVM, "g.txt": FormatLIBSVM, "heart_scale": "",
	} {
		got, err := FormatFromPath(path)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("FormatFromPath(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, loadConfig(t, "ripley.yaml"), testTypes, Options{Data: "testdata/ripley_test.csv"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}

// TestDocsBoundPlot renders the example plot of docs/eval-ripley-bound.svg
// (the rbf MAM of testdata/ripley.yaml learned on Ripley's training set,
// bound against the observed fraction on the test set). Regenerate the file
// with
//
//	go test ./eval -run TestDocsBoundPlot -update
func TestDocsBoundPlot(t *testing.T) {
	rep, _, _ := runEval(t, "ripley.yaml", Options{
		Data: "testdata/ripley_train.csv", Test: "testdata/ripley_test.csv"})
	svg, err := rep.BoundPlotSVG("mam_rbf")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("<svg")) || len(svg) > 100<<10 {
		t.Fatalf("bound plot: %d bytes", len(svg))
	}
	path := filepath.Join("..", "docs", "eval-ripley-bound.svg")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, svg, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%v (regenerate with -update)", err)
	}
}

// TestProbabilityAndWrappedBound: a logistic model reports log_loss, and a
// standardised MAM (the Standardize wrapper) still gets its bound checked
// through the inner model.
func TestProbabilityAndWrappedBound(t *testing.T) {
	cfg, err := config.Parse([]byte(`
models:
  - name: logistic
    type: logistic
    features: {dim: 2}
    learning_rate: 0.1
    l2: 0.0001
  - name: mam_std
    type: mam
    kernel: {type: rbf, gamma: 1, features: 512, seed: 1}
    features: {dim: 2, standardize: true}
    balance: true
    delta: 0.05
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, testTypes, Options{Data: "testdata/ripley_train.csv", Test: "testdata/ripley_test.csv"})
	if err != nil {
		t.Fatal(err)
	}
	lg := rep.Models["logistic"].Holdout
	// (One SGD pass over Ripley's training set, sorted by class, leaves
	// logistic regression far from its batch optimum: no error threshold.)
	if lg.LogLoss == nil || !(*lg.LogLoss > 0 && *lg.LogLoss < 1) || lg.Error == nil {
		t.Errorf("logistic holdout: %+v", lg)
	}
	if lg.BoundViolations != nil || lg.MeanMistakeBound != nil {
		t.Errorf("logistic has bound measures: %+v", lg)
	}
	ms := rep.Models["mam_std"]
	for _, m := range []*Measures{ms.Prequential, ms.Holdout} {
		if m.BoundViolations == nil || *m.BoundViolations != 0 || m.Error == nil || *m.Error > 0.2 {
			t.Errorf("standardised mam: %+v", m)
		}
	}
}

func TestRipleySVM(t *testing.T) {
	_, js, _ := runEval(t, "ripley_svm.yaml", Options{Data: "testdata/ripley_train.csv", Test: "testdata/ripley_test.csv"})
	h := section(t, js, "svm", "holdout")
	// LIBSVM with -c 1 -g 0.5 on the whole training set: 10.3% test error.
	if e := h["error"].(float64); e > 0.11 {
		t.Errorf("svm holdout error %v > 0.11", e)
	}
	if v := h["bound_violations"].(float64); v != 0 {
		t.Errorf("svm holdout bound violations %v", v)
	}
	if _, ok := h["log_loss"]; !ok {
		t.Errorf("svm with probability has no log_loss: %v", h)
	}
	t.Logf("svm holdout: %v", h)
}

// TestTooManySkipped: a file whose rows are mostly unusable (here every
// LIBSVM row has an index beyond the dimension) fails with the counts and
// the first reason instead of a report about nothing; within the allowed
// fraction it runs.
func TestTooManySkipped(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.libsvm")
	if err := os.WriteFile(bad, []byte("1 1:0.5 7:1\n-1 3:0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("testdata/ripley.yaml", nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), cfg, testTypes, Options{Data: bad})
	if err == nil || !strings.Contains(err.Error(), "2 of 2 rows skipped") || !strings.Contains(err.Error(), "the first: line 1") {
		t.Fatalf("all rows skipped: %v; want the counts and the first reason", err)
	}
	empty := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(empty, []byte("xs,ys,label\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg, testTypes, Options{Data: empty}); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("no rows: %v", err)
	}
	// One bad row in 20: within the default 10%.
	var src strings.Builder
	src.WriteString("xs,ys,label\n")
	for i := range 19 {
		fmt.Fprintf(&src, "%g,%g,%d\n", float64(i%5)/5, float64(i%3)/3, 2*(i%2)-1)
	}
	src.WriteString("0.1,oops,1\n")
	few := filepath.Join(dir, "few.csv")
	if err := os.WriteFile(few, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg, testTypes, Options{Data: few}); err != nil {
		t.Fatalf("1 bad row in 20: %v", err)
	}
}

// TestLabelMapping: eval reads labels as the service does, through each
// model's label section: a ratings file feeds a regression model, a
// classifier with label.positive and an ordinal model with label.edges,
// and no model rejects a row (without label.positive the classifier
// rejects every rating but 1; with label.min and label.max a model
// rejects the ratings outside them).
func TestLabelMapping(t *testing.T) {
	var src strings.Builder
	src.WriteString("x0,x1,rating\n")
	for i := range 300 {
		y := 0.5 * float64(1+i%10)
		fmt.Fprintf(&src, "%g,%g,%g\n", y/5, 1-y/5, y)
	}
	path := filepath.Join(t.TempDir(), "ratings.csv")
	if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`models:
  - {name: plain, type: logistic, features: {dim: 2}}
  - {name: like, type: logistic, label: {positive: ">= 4"}, features: {dim: 2}}
  - {name: stars, type: omam, levels: 5, label: {edges: [1.5, 2.5, 3.5, 4.5]}, kernel: {type: linear}, features: {dim: 2}}
  - {name: rating, type: krr, solver: exact, window: {events: 100}, refit: {every_events: 50}, features: {dim: 2}}
  - {name: capped, type: krr, solver: exact, window: {events: 100}, refit: {every_events: 50}, label: {min: 1, max: 4}, features: {dim: 2}}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, testTypes, Options{Data: path, Format: "csv"})
	if err != nil {
		t.Fatal(err)
	}
	// capped reads the ratings 1..4 only: 0.5, 4.5 and 5 are 3 in 10.
	for name, want := range map[string]int64{"plain": 270, "like": 0, "stars": 0, "rating": 0, "capped": 90} {
		if got := rep.Models[name].Prequential.Rejected; got != want {
			t.Errorf("%s: %d rows rejected, want %d", name, got, want)
		}
	}
	if acc := rep.Models["like"].Prequential; acc.N != 300 {
		t.Errorf("like: %d rows judged, want 300", acc.N)
	}
}

// TestCSVUnclosedQuote: a quote that opens a field and is never closed
// swallows the rest of the file into that field; that is an error naming
// the line, not one skipped row (a report over the rows before it exited
// 0). A stray quote within one line is still a skipped row.
func TestCSVUnclosedQuote(t *testing.T) {
	src := "x,y,label\n0.1,0.2,1\n\"0.1,0.2,1\n0.3,0.4,-1\n0.5,0.6,1\n"
	rd, err := NewReader("csv", strings.NewReader(src), 2, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var r Row
	if err := rd.Next(&r); err != nil {
		t.Fatal(err)
	}
	err = rd.Next(&r)
	var re *RowError
	if err == nil || errors.As(err, &re) || !strings.Contains(err.Error(), "line 3: a quoted field is not closed") {
		t.Fatalf("an unclosed quote: %v, want an error naming line 3", err)
	}
	rd, err = NewReader("csv", strings.NewReader("x,y,label\n0.1,0\"2,1\n0.3,0.4,-1\n"), 2, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Next(&r); !errors.As(err, &re) || re.Line != 2 {
		t.Fatalf("a stray quote in a line: %v, want a skipped row", err)
	}
	if err := rd.Next(&r); err != nil || r.Label != -1 {
		t.Fatalf("the row after it: %v %+v", err, r)
	}
}
