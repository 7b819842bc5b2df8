package eval

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/streamer/streamer/online"
)

// column is one measure of the summary tables, the terminal's
// (WriteSummary) and report.html's: a column has the same header, the same
// meaning and the same text in both.
type column struct {
	name string
	get  func(*Measures) string // "" where the measure does not apply
}

// The columns of the summary tables. error is the service's error (an
// abstention, "no decision", counts as a mistake); decided error leaves
// the abstentions out, and abstained counts them: error·n = decided
// error·(n − abstained) + abstained.
var (
	colN            = column{"n", func(m *Measures) string { return strconv.FormatInt(m.N, 10) }}
	colError        = column{"error", func(m *Measures) string { return fmtPtr(m.Error, 4) }}
	colErrorCI      = column{"error 95% CI", func(m *Measures) string { return fmtCI(m.ErrorCI, 4) }}
	colAbstained    = column{"abstained", fmtAbstentions}
	colDecidedError = column{"decided error", func(m *Measures) string { return fmtPtr(m.DecidedError, 4) }}
	colDecidedCI    = column{"decided 95% CI", func(m *Measures) string { return fmtCI(m.DecidedErrorCI, 4) }}
	colAUC          = column{"auc", fmtAUC}
	colLogLoss      = column{"log loss", func(m *Measures) string { return fmtPtr(m.LogLoss, 4) }}
	colTau          = column{"tau_b", func(m *Measures) string { return fmtPtr(m.KendallTau, 4) }}
	colZeroOne      = column{"zero-one", func(m *Measures) string { return fmtPtr(m.ZeroOne, 4) }}
	colZeroOneCI    = column{"zero-one 95% CI", func(m *Measures) string { return fmtCI(m.ZeroOneCI, 4) }}
	colMAE          = column{"mae", func(m *Measures) string { return fmtPtr(m.MAE, 4) }}
	colRMSE         = column{"rmse", func(m *Measures) string { return fmtPtr(m.RMSE, 4) }}
)

// summarySpec is one summary table: the models of some kinds, and the
// measures that judge them. A table per kind keeps each narrow (a
// classifier has no τ-b, an ordinal model no AUC) and without empty cells.
type summarySpec struct {
	caption string
	kinds   []online.Kind
	columns []column
}

var summarySpecs = []summarySpec{
	{"classifiers", []online.Kind{online.Classifier},
		[]column{colN, colError, colErrorCI, colAbstained, colDecidedError, colDecidedCI, colAUC, colLogLoss}},
	{"ordinal models", []online.Kind{online.Ordinal},
		[]column{colN, colAbstained, colTau, colZeroOne, colZeroOneCI, colMAE}},
	{"ranking and regression models", []online.Kind{online.Ranking, online.Regression},
		[]column{colN, colTau, colRMSE}},
}

// detailColumns are report.html's last table, of every model: what the
// terminal leaves out.
var detailColumns = []column{
	{"mean mistake bound", func(m *Measures) string { return fmtPtr(m.MeanMistakeBound, 4) }},
	{"bound violations", func(m *Measures) string {
		if m.BoundViolations == nil {
			return ""
		}
		return strconv.Itoa(*m.BoundViolations)
	}},
	{"rejected", func(m *Measures) string { return strconv.FormatInt(m.Rejected, 10) }},
	{"events/s", func(m *Measures) string { return strconv.FormatFloat(m.EventsPerS, 'f', 0, 64) }},
}

// rowHead is the head of every summary table: the text columns.
var rowHead = []string{"model", "type", "section"}

// table is a summary table as both outputs show it: the header (model,
// type, section, then the measures) and a row of cells per model and
// section, "-" where a measure does not apply or is undefined.
type table struct {
	Caption string
	Header  []string
	Rows    [][]string
}

// sectionRow is one model's measures over one section.
type sectionRow struct {
	model, typ, section string
	kind                online.Kind
	ms                  *Measures
}

// sectionRows are the rows of the summary tables, per model in
// configuration order, prequential then holdout.
func (r *Report) sectionRows() []sectionRow {
	var rows []sectionRow
	for _, name := range r.order {
		mr := r.Models[name]
		for _, sec := range []struct {
			name string
			ms   *Measures
		}{{sectionPrequential, mr.Prequential}, {sectionHoldout, mr.Holdout}} {
			if sec.ms != nil {
				rows = append(rows, sectionRow{name, mr.typ, sec.name, mr.kind, sec.ms})
			}
		}
	}
	return rows
}

// makeTable lays out rows with the columns some row has (the others are
// left out).
func makeTable(caption string, rows []sectionRow, columns []column) table {
	var cols []column
	for _, c := range columns {
		for _, rw := range rows {
			if c.get(rw.ms) != "" {
				cols = append(cols, c)
				break
			}
		}
	}
	t := table{Caption: caption, Header: slices.Clone(rowHead)}
	for _, c := range cols {
		t.Header = append(t.Header, c.name)
	}
	for _, rw := range rows {
		cells := []string{rw.model, rw.typ, rw.section}
		for _, c := range cols {
			v := c.get(rw.ms)
			if v == "" {
				v = "-"
			}
			cells = append(cells, v)
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

// summaryTables are the summary tables, one per kind of model the report
// has, in the order of summarySpecs. A model of a kind no spec lists is in
// the first.
func (r *Report) summaryTables() []table {
	byTable := make([][]sectionRow, len(summarySpecs))
	for _, rw := range r.sectionRows() {
		i := slices.IndexFunc(summarySpecs, func(s summarySpec) bool { return slices.Contains(s.kinds, rw.kind) })
		byTable[max(i, 0)] = append(byTable[max(i, 0)], rw)
	}
	var out []table
	for i, s := range summarySpecs {
		if len(byTable[i]) > 0 {
			out = append(out, makeTable(s.caption, byTable[i], s.columns))
		}
	}
	return out
}

// detailTable is report.html's table of every model's bound, rejected
// labels and speed.
func (r *Report) detailTable() table {
	return makeTable("bound, rejected labels and speed", r.sectionRows(), detailColumns)
}

// WriteSummary writes the summary tables for a terminal, a blank line
// apart: one per kind of model (classifiers; ordinal models; ranking and
// regression models), a row per model and section (prequential, holdout).
// Classifiers: n (the rows judged), error (an abstention, prediction 0,
// counts as a mistake, as in the service's accuracy) and its 95% Wilson
// interval, the abstentions ("no decision"), the error over the rows with
// a decision and its interval, the ROC AUC ("n/a" with one class) and the
// log loss of the models with a probability. Ordinal models: n, the
// abstentions, Kendall's τ-b, the zero-one level error and its interval,
// the mean absolute level error. Ranking and regression models: n, τ-b and
// the RMSE. Columns no model of the table has are left out; "-" marks a
// measure that does not apply to a row's model or is undefined. report.html
// shows the same tables, with the same headers and cells.
func (r *Report) WriteSummary(w io.Writer) error {
	for i, t := range r.summaryTables() {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := writeTable(w, append([][]string{t.Header}, t.Rows...), len(rowHead)); err != nil {
			return err
		}
	}
	return r.writeFits(w)
}

// writeFits writes, under the table, what each fitted model says beyond
// its measures: an adaboost's weights (the largest |β| first, at most 8).
func (r *Report) writeFits(w io.Writer) error {
	for _, name := range r.order {
		f := r.Models[name].Fit
		if f != nil && len(f.Bandwidths) > 0 {
			var parts []string
			for _, b := range f.Bandwidths {
				e := "n/a"
				if b.Error != nil {
					e = fmt.Sprintf("%.3f", *b.Error)
				}
				parts = append(parts, fmt.Sprintf("%.4g (error %s, weight %.2f)", b.Gamma, e, b.Weight))
			}
			if _, err := fmt.Fprintf(w, "%s gamma auto: %s\n", name, strings.Join(parts, ", ")); err != nil {
				return err
			}
			continue
		}
		if f != nil && f.ChosenGamma != nil { // one width: omam, krr, lsrrank
			if _, err := fmt.Fprintf(w, "%s gamma auto: %.4g\n", name, *f.ChosenGamma); err != nil {
				return err
			}
			continue
		}
		if f != nil && f.Rank > 0 {
			conv := "converged"
			if f.Converged != nil && !*f.Converged {
				conv = "stopped at max_iterations"
			}
			if _, err := fmt.Fprintf(w, "%s: %d×%d rank %d, %d iterations (%s), objective %.6g\n", name, f.Rows, f.Cols, f.Rank, f.Iterations, conv, *f.Objective); err != nil {
				return err
			}
			continue
		}
		if f == nil || len(f.Weights) == 0 {
			continue
		}
		ws := slices.Clone(f.Weights)
		slices.SortStableFunc(ws, func(a, b FitWeight) int { return cmp.Compare(math.Abs(b.Beta), math.Abs(a.Beta)) })
		var parts []string
		for i, x := range ws {
			if i == 8 {
				parts = append(parts, fmt.Sprintf("… %d more", len(ws)-8))
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.3f", x.Name, x.Beta))
		}
		if _, err := fmt.Fprintf(w, "%s weights (β): %s\n", name, strings.Join(parts, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// writeTable writes cells aligned in columns two spaces apart: the first
// left columns (text) to the left, the others (numbers) to the right.
func writeTable(w io.Writer, table [][]string, left int) error {
	var width []int
	for _, cells := range table {
		for j, c := range cells {
			if j >= len(width) {
				width = append(width, 0)
			}
			width[j] = max(width[j], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, cells := range table {
		for j, c := range cells {
			pad := strings.Repeat(" ", width[j]-utf8.RuneCountInString(c))
			if j > 0 {
				b.WriteString("  ")
			}
			if j < left {
				b.WriteString(c)
				if j < len(cells)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad)
				b.WriteString(c)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
