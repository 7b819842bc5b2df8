package eval

import (
	"bytes"
	"context"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/streamer/streamer/config"
)

// mixedModels are one model of every kind on boston_ordinal (labels are
// levels 1..5): a classifier of the two top levels, an ordinal MAM, a
// ranking and a regression model.
const mixedModels = `models:
  - name: top_levels
    type: logistic
    label: {positive: ">= 4"}
    features: {dim: 13, standardize: true}
  - name: omam
    type: omam
    kernel: {type: rbf, gamma: 0.05, features: 256, seed: 1}
    levels: 5
    features: {dim: 13, standardize: true}
  - name: rank
    type: lsrrank
    window: {events: 1000}
    refit: {every_events: 100000}
    features: {dim: 13, standardize: true}
  - name: krr
    type: krr
    window: {events: 1000}
    refit: {every_events: 100000}
    features: {dim: 13, standardize: true}
`

// htmlTable is a table of report.html: its caption, header and cells, as
// text.
type htmlTable struct {
	caption string
	header  []string
	rows    [][]string
}

var (
	reSummaryTable = regexp.MustCompile(`(?s)<table class="summary">(.*?)</table>`)
	reCaption      = regexp.MustCompile(`(?s)<caption>(.*?)</caption>`)
	reRow          = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	reCell         = regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`)
)

// summaryTablesOf parses report.html's summary tables.
func summaryTablesOf(t *testing.T, page string) []htmlTable {
	t.Helper()
	var out []htmlTable
	for _, m := range reSummaryTable.FindAllStringSubmatch(page, -1) {
		var tb htmlTable
		if c := reCaption.FindStringSubmatch(m[1]); c != nil {
			tb.caption = html.UnescapeString(c[1])
		}
		for i, r := range reRow.FindAllStringSubmatch(m[1], -1) {
			var cells []string
			for _, c := range reCell.FindAllStringSubmatch(r[1], -1) {
				cells = append(cells, html.UnescapeString(c[1]))
			}
			if i == 0 {
				tb.header = cells
			} else {
				tb.rows = append(tb.rows, cells)
			}
		}
		out = append(out, tb)
	}
	if len(out) == 0 {
		t.Fatalf("report.html has no summary table:\n%s", page)
	}
	return out
}

// renderBoth returns the terminal summary and report.html of rep.
func renderBoth(t *testing.T, rep *Report) (string, string) {
	t.Helper()
	var term, page bytes.Buffer
	if err := rep.WriteSummary(&term); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	return term.String(), page.String()
}

// column returns the index of the column named name, -1 if none.
func (tb htmlTable) column(name string) int { return slices.Index(tb.header, name) }

// row returns the cells of model's section row.
func (tb htmlTable) row(t *testing.T, model, section string) []string {
	t.Helper()
	for _, r := range tb.rows {
		if r[0] == model && r[2] == section {
			return r
		}
	}
	t.Fatalf("table %q has no row %s %s", tb.caption, model, section)
	return nil
}

// TestSummaryMatchesHTML renders the terminal summary and report.html of
// the same reports, a classifier that abstains (the svm before its first
// refit) and one model of each kind, and checks that they agree: the
// terminal's tables are report.html's summary tables, in the same order,
// with the same headers and the same cells; report.html has one more, the
// bound, rejected labels and speed. In both, error counts the abstentions
// as mistakes (the report's error) and decided error leaves them out.
func TestSummaryMatchesHTML(t *testing.T) {
	svm, _, _ := runEval(t, "ripley_svm.yaml", Options{Data: writeShuffledRipley(t), Test: "testdata/ripley_test.csv"})
	mixed := runMixed(t)
	for _, c := range []struct {
		name     string
		rep      *Report
		captions []string
	}{
		{"svm", svm, []string{"classifiers"}},
		{"mixed", mixed, []string{"classifiers", "ordinal models", "ranking and regression models"}},
	} {
		term, page := renderBoth(t, c.rep)
		t.Logf("%s, terminal:\n%s", c.name, term)
		tables := summaryTablesOf(t, page)
		var captions []string
		for _, tb := range tables {
			captions = append(captions, tb.caption)
		}
		if want := append(slices.Clone(c.captions), "bound, rejected labels and speed"); !slices.Equal(captions, want) {
			t.Fatalf("%s: report.html's tables %q, want %q", c.name, captions, want)
		}
		lines := strings.Split(term, "\n")
		for i, tb := range tables[:len(tables)-1] {
			if i > 0 {
				if len(lines) == 0 || lines[0] != "" {
					t.Fatalf("%s: no blank line before the terminal's table %d:\n%s", c.name, i, term)
				}
				lines = lines[1:]
			}
			if len(lines) < 1+len(tb.rows) {
				t.Fatalf("%s: the terminal has no table %q:\n%s", c.name, tb.caption, term)
			}
			// The terminal's cells are separated by spaces: the same
			// headers and cells in the same order are the same fields.
			for j, cells := range append([][]string{tb.header}, tb.rows...) {
				if got, want := strings.Fields(lines[j]), strings.Fields(strings.Join(cells, " ")); !slices.Equal(got, want) {
					t.Errorf("%s, table %q: terminal line %q, report.html %q", c.name, tb.caption, lines[j], cells)
				}
			}
			lines = lines[1+len(tb.rows):]
		}
		if len(lines) > 0 && lines[0] != "" && strings.Contains(lines[0], "  ") {
			t.Errorf("%s: the terminal has a table report.html has not: %q", c.name, lines[0])
		}
	}

	// The meaning: error and decided error of the abstaining svm.
	cls := summaryTablesOf(t, func() string { _, p := renderBoth(t, svm); return p }())[0]
	for _, h := range []string{"n", "error", "error 95% CI", "abstained", "decided error", "decided 95% CI", "auc", "log loss"} {
		if cls.column(h) < 0 {
			t.Errorf("classifier table: no column %q in %q", h, cls.header)
		}
	}
	ms := svm.Models["svm"].Prequential
	row := cls.row(t, "svm", sectionPrequential)
	if *ms.Abstentions == 0 || *ms.Error == *ms.DecidedError {
		t.Fatalf("the svm does not abstain in the prequential section (error %v, decided %v)", *ms.Error, *ms.DecidedError)
	}
	for h, want := range map[string]string{
		"error": fmtPtr(ms.Error, 4), "error 95% CI": fmtCI(ms.ErrorCI, 4),
		"decided error": fmtPtr(ms.DecidedError, 4), "decided 95% CI": fmtCI(ms.DecidedErrorCI, 4),
		"abstained": fmtAbstentions(ms),
	} {
		if got := row[cls.column(h)]; got != want {
			t.Errorf("svm prequential %s: %q, want %q", h, got, want)
		}
	}

	// Each kind's measures in its own table only.
	_, page := renderBoth(t, mixed)
	tables := summaryTablesOf(t, page)
	for _, c := range []struct {
		table   int
		has     []string
		hasNot  []string
		model   string
		section string
	}{
		{0, []string{"error", "decided error", "auc"}, []string{"tau_b", "zero-one", "rmse"}, "top_levels", sectionHoldout},
		{1, []string{"abstained", "tau_b", "zero-one", "zero-one 95% CI", "mae"}, []string{"error", "auc", "rmse"}, "omam", sectionHoldout},
		{2, []string{"tau_b", "rmse"}, []string{"error", "abstained", "zero-one"}, "krr", sectionHoldout},
	} {
		tb := tables[c.table]
		for _, h := range c.has {
			if tb.column(h) < 0 {
				t.Errorf("table %q: no column %q in %q", tb.caption, h, tb.header)
			}
		}
		for _, h := range c.hasNot {
			if tb.column(h) >= 0 {
				t.Errorf("table %q has column %q: %q", tb.caption, h, tb.header)
			}
		}
		tb.row(t, c.model, c.section)
	}
	if got := tables[2].row(t, "krr", sectionHoldout)[tables[2].column("rmse")]; got != fmtPtr(mixed.Models["krr"].Holdout.RMSE, 4) {
		t.Errorf("krr holdout rmse %q, want %q", got, fmtPtr(mixed.Models["krr"].Holdout.RMSE, 4))
	}
	if got := tables[2].row(t, "rank", sectionHoldout)[tables[2].column("rmse")]; got != "-" {
		t.Errorf("the ranking model's rmse %q, want -", got)
	}
}

// Laptop screens: report.html's summary tables must fit 1280 CSS pixels,
// less the page's margins and a scroll bar, at the default 16 px font.
const (
	laptopWidth  = 1280.0
	pageMargins  = 2 * 1.5 * 16 // body { margin: 1.5em }
	scrollBar    = 16
	summaryFont  = 0.9 * 16 // table.summary th, td { font-size: 0.9em }
	cellChar     = 0.6      // em per character of a cell, generous for sans-serif digits and letters
	headerChar   = 0.65     // em per character of a (bold) header
	cellPadding  = 2 * 0.5  // em: padding 0.25em 0.5em
	maxColumns   = 11       // model, type, section and 8 measures
	maxHeaderRun = 10       // the longest word of a header, in characters
)

// minWidth estimates the narrowest a browser can lay tb out, in CSS
// pixels: per column the longest header word (headers wrap at spaces) or
// the longest cell (cells do not wrap), plus padding and border.
func minWidth(tb htmlTable) float64 {
	w := 1.0
	for j, h := range tb.header {
		col := 0.0
		for _, word := range strings.Fields(h) {
			col = max(col, float64(utf8.RuneCountInString(word))*headerChar*summaryFont)
		}
		for _, r := range tb.rows {
			col = max(col, float64(utf8.RuneCountInString(r[j]))*cellChar*summaryFont)
		}
		w += col + cellPadding*summaryFont + 1
	}
	return w
}

// TestReportFitsLaptop: report.html's summary tables are narrow enough for
// a laptop screen (eval-ripley's five classifiers ran off a 1400 px wide
// one in a single table of 18 columns): at most 11 columns a table, header
// words of at most 10 characters, an estimated narrowest layout within
// 1280 px less the margins, cells that do not wrap (so that the estimate
// holds), and each table in a box that scrolls sideways should a model's
// name be long.
func TestReportFitsLaptop(t *testing.T) {
	mixed := runMixed(t)
	ripley, _, _ := runEval(t, "ripley.yaml", Options{Data: writeShuffledRipley(t), Test: "testdata/ripley_test.csv"})
	svm, _, _ := runEval(t, "ripley_svm.yaml", Options{Data: writeShuffledRipley(t), Test: "testdata/ripley_test.csv"})
	budget := laptopWidth - pageMargins - scrollBar
	for name, rep := range map[string]*Report{"mixed": mixed, "ripley": ripley, "svm": svm} {
		_, page := renderBoth(t, rep)
		for _, css := range []string{
			".scroll { max-width: 100%; overflow-x: auto; }",
			"table.summary th, table.summary td { font-size: 0.9em; padding: 0.25em 0.5em; }",
			"table.summary td { white-space: nowrap;",
		} {
			if !strings.Contains(page, css) {
				t.Errorf("%s: report.html's style has no %q", name, css)
			}
		}
		if n, m := strings.Count(page, `<table class="summary">`), strings.Count(page, `<div class="scroll"><table class="summary">`); n != m {
			t.Errorf("%s: %d of %d summary tables are not in a scrolling box", name, n-m, n)
		}
		for _, tb := range summaryTablesOf(t, page) {
			if len(tb.header) > maxColumns {
				t.Errorf("%s, table %q: %d columns, want at most %d: %q", name, tb.caption, len(tb.header), maxColumns, tb.header)
			}
			for _, h := range tb.header {
				for _, word := range strings.Fields(h) {
					if utf8.RuneCountInString(word) > maxHeaderRun {
						t.Errorf("%s, table %q: header %q has a word of more than %d characters", name, tb.caption, h, maxHeaderRun)
					}
				}
			}
			w := minWidth(tb)
			t.Logf("%s, table %q: %d columns, about %.0f px at least (budget %.0f)", name, tb.caption, len(tb.header), w, budget)
			if w > budget {
				t.Errorf("%s, table %q is about %.0f px wide at least, more than a laptop's %.0f: %q", name, tb.caption, w, budget, tb.header)
			}
		}
	}
}

// runMixed evaluates mixedModels (a classifier, an ordinal model and a
// ranking model) on the ordinal Boston data, trained and tested on it.
func runMixed(t *testing.T) *Report {
	t.Helper()
	cfg, err := config.Parse([]byte(mixedModels), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := Run(context.Background(), cfg, testTypes, Options{Data: "testdata/boston_ordinal.csv", Test: "testdata/boston_ordinal.csv"})
	if err != nil {
		t.Fatal(err)
	}
	return mixed
}
