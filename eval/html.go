package eval

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
)

// Files written by WriteDir.
const (
	ReportJSON = "report.json"
	ReportHTML = "report.html"
)

// WriteDir writes report.json and report.html into dir, creating it.
func (r *Report) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	write := func(name string, fn func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("eval: %s: %w", name, err)
		}
		return f.Close()
	}
	if err := write(ReportJSON, r.WriteJSON); err != nil {
		return err
	}
	return write(ReportHTML, r.WriteHTML)
}

func fmtPtr(v *float64, prec int) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}

// fmtCI formats an interval as [lo, hi].
func fmtCI(iv *Interval, prec int) string {
	if iv == nil {
		return ""
	}
	return "[" + strconv.FormatFloat(iv.Lo, 'f', prec, 64) + ", " + strconv.FormatFloat(iv.Hi, 'f', prec, 64) + "]"
}

// fmtAbstentions formats abstentions as "count (rate%)".
func fmtAbstentions(m *Measures) string {
	if m.Abstentions == nil {
		return ""
	}
	s := strconv.FormatInt(*m.Abstentions, 10)
	if m.AbstentionRate != nil {
		s += " (" + strconv.FormatFloat(100**m.AbstentionRate, 'f', 1, 64) + "%)"
	}
	return s
}

// fmtAUC formats the ROC AUC; "n/a" when undefined (one class).
func fmtAUC(m *Measures) string {
	switch {
	case m.ROCAUC == nil:
		return ""
	case !m.ROCAUC.Valid:
		return "n/a"
	}
	return strconv.FormatFloat(m.ROCAUC.Value, 'f', 4, 64)
}

type htmlConfusion struct {
	Section string
	*Confusion
}

type htmlModel struct {
	Name, Type string
	Confusion  []htmlConfusion
	Plots      []template.HTML
}

type htmlPage struct {
	Config   string
	Data     []*DataInfo
	Warnings []string
	Tables   []table // the summary tables, then the detail table
	Models   []htmlModel
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>streamer eval{{if .Config}}: {{.Config}}{{end}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; }
td.l { text-align: left; }
.scroll { max-width: 100%; overflow-x: auto; }
table.summary { margin-bottom: 1em; }
table.summary th, table.summary td { font-size: 0.9em; padding: 0.25em 0.5em; }
table.summary th { vertical-align: bottom; }
table.summary td { white-space: nowrap; font-variant-numeric: tabular-nums; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
.plots svg { width: 31em; height: auto; }
h2 { margin-top: 1.5em; border-bottom: 1px solid #ccc; }
.warn { color: #8a4b00; background: #fff4e0; padding: 0.4em 0.6em; }
.confusion { display: flex; flex-wrap: wrap; gap: 1.5em; }
caption { text-align: left; font-weight: bold; padding-bottom: 0.2em; }
</style>
</head>
<body>
<h1>streamer eval</h1>
<p>{{if .Config}}Configuration <code>{{.Config}}</code>. {{end}}{{range .Data}}<code>{{.Path}}</code> ({{.Format}}, {{.Rows}} rows{{if .Unlabelled}}, {{.Unlabelled}} unlabelled{{end}}{{range $r, $n := .Skipped}}, {{$n}} skipped: {{$r}}{{end}}{{if .Shuffled}}, shuffled with seed {{.Seed}}{{end}}). {{end}}
Prequential: every row is scored, then learned. Holdout: rows scored only, by the models learned from the data file.
<b>error</b> counts "no decision" (prediction 0) as a mistake, as the service's accuracy does; <b>decided error</b> is the error over the rows with a decision, and <b>abstained</b> counts the others (and their share of n).
<b>zero-one</b> is an ordinal model's level error (level 0, "no decision", counts as wrong).
Intervals are 95% Wilson score intervals.
The terminal summary prints the same tables, all but the last.</p>
{{range .Warnings}}<p class="warn">Warning: {{.}}</p>
{{end}}
{{range .Tables}}<div class="scroll"><table class="summary">
<caption>{{.Caption}}</caption>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if lt $i 3}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table></div>
{{end}}
{{range .Models}}<h2>{{.Name}} <small>({{.Type}})</small></h2>
{{if .Confusion}}<div class="confusion">
{{range .Confusion}}<table>
<caption>confusion, {{.Section}}</caption>
<tr><th>label \ predicted</th><th>+1</th><th>−1</th><th>no decision</th></tr>
<tr><th>+1</th><td>{{.TP}}</td><td>{{.FN}}</td><td>{{.AbstainPositive}}</td></tr>
<tr><th>−1</th><td>{{.FP}}</td><td>{{.TN}}</td><td>{{.AbstainNegative}}</td></tr>
</table>
{{end}}</div>
{{end}}<div class="plots">
{{range .Plots}}<div>{{.}}</div>
{{end}}</div>
{{end}}</body>
</html>
`))

// WriteHTML writes a self-contained HTML page: the warnings, the summary
// tables (those of WriteSummary, with the same headers and cells, then a
// table of every model's bound, rejected labels and speed; each scrolls
// sideways within the page should it not fit), then per model the
// confusion matrices (classifiers) and the plots (inline SVG) of quality
// over the stream, bound against observed violation rate, score histograms
// per class or level, and the reliability curve (models with a
// probability).
func (r *Report) WriteHTML(w io.Writer) error {
	pg := htmlPage{Config: r.Config.Path, Warnings: r.Warnings}
	for _, sec := range []string{sectionPrequential, sectionHoldout} {
		if d := r.Data[sec]; d != nil {
			pg.Data = append(pg.Data, d)
		}
	}
	pg.Tables = append(r.summaryTables(), r.detailTable())
	for _, name := range r.order {
		mr := r.Models[name]
		hm := htmlModel{Name: name, Type: mr.typ}
		for _, sec := range []struct {
			name string
			ms   *Measures
		}{{sectionPrequential, mr.Prequential}, {sectionHoldout, mr.Holdout}} {
			if sec.ms != nil && sec.ms.Confusion != nil {
				hm.Confusion = append(hm.Confusion, htmlConfusion{sec.name, sec.ms.Confusion})
			}
		}
		for _, mk := range []func(string, plotData) (*plot.Plot, error){qualityPlot, boundPlot, histPlot, reliabilityPlot} {
			p, err := mk(name, mr.plots)
			if err != nil {
				return err
			}
			if p == nil {
				continue
			}
			doc, err := svgOf(p, plotW, plotH)
			if err != nil {
				return err
			}
			hm.Plots = append(hm.Plots, template.HTML(inlineSVG(doc))) // #nosec: our own SVG
		}
		pg.Models = append(pg.Models, hm)
	}
	return page.Execute(w, pg)
}
