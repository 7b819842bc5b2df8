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
)

// summaryColumn is one column of the terminal summary.
type summaryColumn struct {
	name string
	get  func(*Measures) string
}

// summaryColumns are the terminal summary's measures; a column no model
// has is left out. The error shown is decided_error, beside the
// abstentions: the two together are what error (in the report) merges.
var summaryColumns = []summaryColumn{
	{"rows", func(m *Measures) string { return strconv.FormatInt(m.N, 10) }},
	{"error", func(m *Measures) string { return fmtPtr(m.DecidedError, 4) }},
	{"95% CI", func(m *Measures) string { return fmtCI(m.DecidedErrorCI, 4) }},
	{"abstain", fmtAbstentions},
	{"auc", fmtAUC},
	{"log_loss", func(m *Measures) string { return fmtPtr(m.LogLoss, 4) }},
	{"tau_b", func(m *Measures) string { return fmtPtr(m.KendallTau, 4) }},
	{"zero_one", func(m *Measures) string { return fmtPtr(m.ZeroOne, 4) }},
	{"mae", func(m *Measures) string { return fmtPtr(m.MAE, 4) }},
	{"rmse", func(m *Measures) string { return fmtPtr(m.RMSE, 4) }},
}

// WriteSummary writes a compact table for a terminal: a row per model and
// section (prequential, holdout) with the rows judged, the error over the
// rows with a decision and its 95% Wilson interval, the abstentions ("no
// decision"), the ROC AUC ("n/a" with one class), the log loss for models
// with a probability, and for ordinal, ranking and regression models
// Kendall's τ-b, the zero-one and mean absolute level errors and the RMSE,
// as they apply. Columns no model has are left out; "-" marks a measure
// that does not apply to a row's model.
func (r *Report) WriteSummary(w io.Writer) error {
	type row struct {
		model, typ, section string
		ms                  *Measures
	}
	var rows []row
	for _, name := range r.order {
		mr := r.Models[name]
		for _, sec := range []struct {
			name string
			ms   *Measures
		}{{sectionPrequential, mr.Prequential}, {sectionHoldout, mr.Holdout}} {
			if sec.ms != nil {
				rows = append(rows, row{name, mr.typ, sec.name, sec.ms})
			}
		}
	}
	var cols []summaryColumn
	for _, c := range summaryColumns {
		for _, rw := range rows {
			if c.get(rw.ms) != "" {
				cols = append(cols, c)
				break
			}
		}
	}
	table := [][]string{{"model", "type", "section"}}
	for _, c := range cols {
		table[0] = append(table[0], c.name)
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
		table = append(table, cells)
	}
	if err := writeTable(w, table, 3); err != nil {
		return err
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
