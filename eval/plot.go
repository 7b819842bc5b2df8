package eval

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/streamer/streamer/online"
)

// plotData is what the report's plots of one model are drawn from.
type plotData struct {
	ordinal bool
	// Quality over the prequential stream vs judged events: classifiers
	// windowed and cumulative error, ordinal models windowed τ-b and
	// zero-one error.
	curve, cumCurve series
	window          int
	holdout         *float64 // holdout error or τ, drawn as a level
	// Bound check: the final model's bound(ρ) and the observed fraction
	// of y·f ≤ −ρ over boundFrom (holdout when there is one).
	rho, bound, observed []float64
	boundFrom            string
	// Scores and true labels for the histograms, from histFrom.
	scores, truth []float64
	histFrom      string
	// Reliability curve (models with a probability), from histFrom.
	reliability []ReliabilityBin
}

func (st *modelState) plotData() plotData {
	d := plotData{ordinal: st.ordinal, window: st.window}
	if s := st.preqStats; s != nil {
		d.curve, d.cumCurve = s.curve, s.cumCurve
	}
	src, from := st.preqStats, sectionPrequential
	if st.holdStats != nil {
		src, from = st.holdStats, sectionHoldout
		d.holdout = st.finishedHoldout()
	}
	if src == nil {
		return d
	}
	d.scores, d.truth, d.histFrom = src.scores, src.truth, from
	d.reliability = src.rel.bins()
	if src.fine != nil && src.fine.Count() > 0 {
		d.rho, d.bound, d.boundFrom = src.fineGrid, src.finalBound, from
		d.observed = make([]float64, len(d.rho))
		for i := range d.rho {
			d.observed[i] = src.fine.Observed(i)
		}
	}
	return d
}

// finishedHoldout is the holdout quality drawn on the stream plot.
func (st *modelState) finishedHoldout() *float64 {
	s := st.holdStats
	if s.n == 0 {
		return nil
	}
	if st.ordinal {
		return num(online.KendallTauB(s.scores, s.truth))
	}
	return num(float64(s.wrong) / float64(s.n))
}

// Plot size in the report.
const (
	plotW = 4.2 * vg.Inch
	plotH = 2.9 * vg.Inch
)

var (
	colBlue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	colOrange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	colGreen  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	colGrey   = color.RGBA{R: 120, G: 120, B: 120, A: 255}
	palette   = []color.RGBA{
		colBlue, colOrange, colGreen,
		{R: 214, G: 39, B: 40, A: 255}, {R: 148, G: 103, B: 189, A: 255},
		{R: 140, G: 86, B: 75, A: 255}, {R: 227, G: 119, B: 194, A: 255},
		{R: 127, G: 127, B: 127, A: 255}, {R: 188, G: 189, B: 34, A: 255},
		{R: 23, G: 190, B: 207, A: 255},
	}
)

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

func line(xs, ys []float64, c color.Color, dashed bool) (*plotter.Line, error) {
	pts := make(plotter.XYs, len(xs))
	for i := range xs {
		pts[i] = plotter.XY{X: xs[i], Y: ys[i]}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	return l, nil
}

// qualityPlot draws quality over the stream; nil when there is no curve.
func qualityPlot(name string, d plotData) (*plot.Plot, error) {
	if len(d.curve.x) == 0 {
		return nil, nil
	}
	title, ylab := name+": prequential error", "error"
	cumName := "cumulative"
	if d.ordinal {
		title, ylab, cumName = name+": prequential Kendall τ-b", "τ-b, zero-one error", fmt.Sprintf("zero-one error, last %d", d.window)
	}
	p := newPlot(title, "labelled events", ylab)
	l, err := line(d.curve.x, d.curve.y, colBlue, false)
	if err != nil {
		return nil, err
	}
	winName := fmt.Sprintf("last %d", d.window)
	if d.ordinal {
		winName = fmt.Sprintf("τ-b, last %d", d.window)
	}
	p.Add(l)
	p.Legend.Add(winName, l)
	if len(d.cumCurve.x) > 0 {
		c, err := line(d.cumCurve.x, d.cumCurve.y, colOrange, true)
		if err != nil {
			return nil, err
		}
		p.Add(c)
		p.Legend.Add(cumName, c)
	}
	if d.holdout != nil {
		x0, x1 := d.curve.x[0], d.curve.x[len(d.curve.x)-1]
		h, err := line([]float64{x0, x1}, []float64{*d.holdout, *d.holdout}, colGreen, true)
		if err != nil {
			return nil, err
		}
		p.Add(h)
		p.Legend.Add(fmt.Sprintf("holdout %.3f", *d.holdout), h)
	}
	if !d.ordinal {
		p.Y.Min = 0
	}
	headroom(p, 3)
	return p, nil
}

// boundPlot draws the final model's bound(ρ) against the observed fraction
// of y·f ≤ −ρ; nil when the model has no bound.
func boundPlot(name string, d plotData) (*plot.Plot, error) {
	if len(d.rho) == 0 {
		return nil, nil
	}
	p := newPlot(name+": bound vs observed ("+d.boundFrom+")", "ρ", "P(y·f ≤ −ρ)")
	b, err := line(d.rho, d.bound, colOrange, false)
	if err != nil {
		return nil, err
	}
	o, err := line(d.rho, d.observed, colBlue, false)
	if err != nil {
		return nil, err
	}
	p.Add(b, o)
	p.Legend.Add("bound(ρ), final model", b)
	p.Legend.Add("observed", o)
	p.Y.Min, p.Y.Max = 0, 1
	p.X.Min, p.X.Max = 0, 1
	p.Legend.YOffs = -0.3 * plotH // between the curves
	return p, nil
}

// histPlot draws the score histograms per class (per level when ordinal),
// each normalised to fractions of its class.
func histPlot(name string, d plotData) (*plot.Plot, error) {
	if len(d.scores) == 0 {
		return nil, nil
	}
	// The range holds the central 96% of the scores (the few extreme
	// ones, typically from a young model, go to the edge bins).
	classes := map[float64]int{}
	for _, y := range d.truth {
		classes[y]++
	}
	sorted := slices.Clone(d.scores)
	slices.Sort(sorted)
	lo, hi := sorted[len(sorted)*2/100], sorted[(len(sorted)-1)*98/100]
	if !(hi > lo) {
		lo, hi = sorted[0], sorted[len(sorted)-1]
	}
	if !(hi > lo) {
		hi = lo + 1
	}
	keys := make([]float64, 0, len(classes))
	for k := range classes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	const bins = 40
	width := (hi - lo) / bins
	what := "class"
	if d.ordinal {
		what = "level"
	}
	p := newPlot(name+": scores per "+what+" ("+d.histFrom+")", "score", "fraction of "+what)
	for ci, k := range keys {
		counts := make([]float64, bins)
		for i, s := range d.scores {
			if d.truth[i] == k {
				counts[min(bins-1, max(0, int((s-lo)/width)))]++
			}
		}
		xs, ys := make([]float64, 0, bins+2), make([]float64, 0, bins+2)
		xs, ys = append(xs, lo), append(ys, 0)
		for b, c := range counts {
			xs = append(xs, lo+(float64(b)+0.5)*width)
			ys = append(ys, c/float64(classes[k]))
		}
		xs, ys = append(xs, hi), append(ys, 0)
		col := palette[ci%len(palette)]
		l, err := line(xs, ys, col, false)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.MidStep
		l.FillColor = color.NRGBA{R: col.R, G: col.G, B: col.B, A: 50}
		p.Add(l)
		label := strconv.FormatFloat(k, 'g', -1, 64)
		if !d.ordinal && k > 0 {
			label = "+" + label
		}
		p.Legend.Add(fmt.Sprintf("%s %s (%d)", what, label, classes[k]), l)
	}
	p.Y.Min = 0
	headroom(p, len(keys))
	return p, nil
}

// reliabilityPlot draws the reliability curve: per bin of the published
// probability of class +1, the observed fraction of +1 (with its 95% Wilson
// interval) against the bin's mean probability, and the diagonal of a
// calibrated model; nil when the model publishes no probability.
func reliabilityPlot(name string, d plotData) (*plot.Plot, error) {
	var pts plotter.XYs
	var errs plotter.YErrors
	var n int64
	for _, b := range d.reliability {
		if b.N == 0 || b.MeanProbability == nil || b.Observed == nil || b.ObservedCI == nil {
			continue
		}
		n += b.N
		pts = append(pts, plotter.XY{X: *b.MeanProbability, Y: *b.Observed})
		errs = append(errs, struct{ Low, High float64 }{*b.Observed - b.ObservedCI.Lo, b.ObservedCI.Hi - *b.Observed})
	}
	if len(pts) == 0 {
		return nil, nil
	}
	p := newPlot(name+": reliability ("+d.histFrom+")", "predicted probability of +1", "observed fraction of +1")
	diag, err := line([]float64{0, 1}, []float64{0, 1}, colGrey, true)
	if err != nil {
		return nil, err
	}
	obs, err := line(xsOf(pts), ysOf(pts), colBlue, false)
	if err != nil {
		return nil, err
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, err
	}
	sc.Color = colBlue
	sc.Shape = draw.CircleGlyph{}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{pts, errs})
	if err != nil {
		return nil, err
	}
	eb.Color = colBlue
	p.Add(diag, obs, sc, eb)
	p.Legend.Add("calibrated", diag)
	p.Legend.Add(fmt.Sprintf("observed, 95%% CI (%d rows)", n), obs)
	p.X.Min, p.X.Max = 0, 1
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false // bottom right: where a useful model has no bin
	p.Legend.YOffs = vg.Points(6)
	return p, nil
}

func xsOf(pts plotter.XYs) []float64 {
	out := make([]float64, len(pts))
	for i, p := range pts {
		out[i] = p.X
	}
	return out
}

func ysOf(pts plotter.XYs) []float64 {
	out := make([]float64, len(pts))
	for i, p := range pts {
		out[i] = p.Y
	}
	return out
}

// headroom raises the top of the y axis to leave room for a legend of
// entries lines.
func headroom(p *plot.Plot, entries int) {
	p.Y.Max += (0.1 + 0.1*float64(entries)) * (p.Y.Max - p.Y.Min)
}

// svgOf renders p as a standalone SVG document.
func svgOf(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// inlineSVG turns a standalone SVG document into an element for an HTML
// page: no XML declaration, comment or namespace declarations (HTML's
// parser puts <svg> in the SVG namespace by itself), so that the page has
// no external reference of any kind.
func inlineSVG(doc []byte) []byte {
	if i := bytes.Index(doc, []byte("<svg")); i >= 0 {
		doc = doc[i:]
	}
	for _, ns := range [][]byte{
		[]byte(`xmlns="http://www.w3.org/2000/svg"`),
		[]byte(`xmlns:xlink="http://www.w3.org/1999/xlink"`),
	} {
		doc = bytes.Replace(doc, ns, nil, 1)
	}
	return doc
}

// BoundPlotSVG renders the named model's bound-vs-observed plot as a
// standalone SVG document (nil when the model has no bound).
func (r *Report) BoundPlotSVG(model string) ([]byte, error) {
	mr, ok := r.Models[model]
	if !ok {
		return nil, fmt.Errorf("eval: no model %q in the report", model)
	}
	p, err := boundPlot(model, mr.plots)
	if err != nil || p == nil {
		return nil, err
	}
	return svgOf(p, plotW, plotH)
}
