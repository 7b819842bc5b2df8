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

// column is one measure of the summary table.
type column struct {
	name string
	get  func(*Measures) string
}

func fmtPtr(v *float64, prec int) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}

var columns = []column{
	{"n", func(m *Measures) string { return strconv.FormatInt(m.N, 10) }},
	{"error", func(m *Measures) string { return fmtPtr(m.Error, 4) }},
	{"log_loss", func(m *Measures) string { return fmtPtr(m.LogLoss, 4) }},
	{"mean_mistake_bound", func(m *Measures) string { return fmtPtr(m.MeanMistakeBound, 4) }},
	{"bound_violations", func(m *Measures) string {
		if m.BoundViolations == nil {
			return ""
		}
		return strconv.Itoa(*m.BoundViolations)
	}},
	{"kendall_tau", func(m *Measures) string { return fmtPtr(m.KendallTau, 4) }},
	{"mae", func(m *Measures) string { return fmtPtr(m.MAE, 4) }},
	{"zero_one", func(m *Measures) string { return fmtPtr(m.ZeroOne, 4) }},
	{"events_per_s", func(m *Measures) string { return strconv.FormatFloat(m.EventsPerS, 'f', 0, 64) }},
	{"rejected", func(m *Measures) string { return strconv.FormatInt(m.Rejected, 10) }},
}

type htmlRow struct {
	Model, Type, Section string
	Cells                []string
}

type htmlModel struct {
	Name, Type string
	Plots      []template.HTML
}

type htmlPage struct {
	Config  string
	Data    []*DataInfo
	Columns []string
	Rows    []htmlRow
	Models  []htmlModel
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
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
.plots svg { width: 31em; height: auto; }
h2 { margin-top: 1.5em; border-bottom: 1px solid #ccc; }
</style>
</head>
<body>
<h1>streamer eval</h1>
<p>{{if .Config}}Configuration <code>{{.Config}}</code>. {{end}}{{range .Data}}<code>{{.Path}}</code> ({{.Format}}, {{.Rows}} rows{{if .Unlabelled}}, {{.Unlabelled}} unlabelled{{end}}{{range $r, $n := .Skipped}}, {{$n}} skipped: {{$r}}{{end}}). {{end}}
Prequential: every row is scored, then learned. Holdout: rows scored only, by the models learned from the data file.</p>
<table>
<tr><th>model</th><th>type</th><th>section</th>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td class="l">{{.Model}}</td><td class="l">{{.Type}}</td><td class="l">{{.Section}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{range .Models}}<h2>{{.Name}} <small>({{.Type}})</small></h2>
<div class="plots">
{{range .Plots}}<div>{{.}}</div>
{{end}}</div>
{{end}}</body>
</html>
`))

// WriteHTML writes a self-contained HTML page: a summary table, then per
// model the plots (inline SVG) of quality over the stream, bound against
// observed violation rate, and score histograms per class or level.
func (r *Report) WriteHTML(w io.Writer) error {
	pg := htmlPage{Config: r.Config.Path}
	for _, sec := range []string{sectionPrequential, sectionHoldout} {
		if d := r.Data[sec]; d != nil {
			pg.Data = append(pg.Data, d)
		}
	}
	// Only the columns some model has.
	used := make([]bool, len(columns))
	for _, name := range r.order {
		mr := r.Models[name]
		for _, ms := range []*Measures{mr.Prequential, mr.Holdout} {
			if ms == nil {
				continue
			}
			for i, c := range columns {
				if c.get(ms) != "" {
					used[i] = true
				}
			}
		}
	}
	for i, c := range columns {
		if used[i] {
			pg.Columns = append(pg.Columns, c.name)
		}
	}
	for _, name := range r.order {
		mr := r.Models[name]
		for _, sec := range []struct {
			name string
			ms   *Measures
		}{{sectionPrequential, mr.Prequential}, {sectionHoldout, mr.Holdout}} {
			if sec.ms == nil {
				continue
			}
			row := htmlRow{Model: name, Type: mr.typ, Section: sec.name}
			for i, c := range columns {
				if used[i] {
					row.Cells = append(row.Cells, c.get(sec.ms))
				}
			}
			pg.Rows = append(pg.Rows, row)
		}
		hm := htmlModel{Name: name, Type: mr.typ}
		for _, mk := range []func(string, plotData) (*plot.Plot, error){qualityPlot, boundPlot, histPlot} {
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
