package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// WriteText writes the report as Markdown tables: one row per measured
// round, then per pipeline the median and spread of events/s, then the
// within-round ratios, then any warnings.
func (rep *Report) WriteText(w io.Writer) {
	s := rep.Setup
	snap := "no snapshots"
	if s.SnapshotEveryS > 0 {
		snap = "snapshots every " + time.Duration(s.SnapshotEveryS*float64(time.Second)).String()
	}
	cal := "calibration off"
	if s.CalibrationWindow > 0 {
		cal = fmt.Sprintf("calibration window %d refitted every %d", s.CalibrationWindow, s.CalibrationEvery)
		if s.CalibrationMinIntervalS > 0 {
			cal += fmt.Sprintf(" and at most every %v", time.Duration(s.CalibrationMinIntervalS*float64(time.Second)))
		}
	}
	fmt.Fprintf(w, "\nend-to-end throughput, %d events, %s, %s, labels %s, %d partitions, %s, %s, GOMAXPROCS=%d\n",
		s.Events, s.Input.Describe(s.Dim), s.Models, s.Labels, s.Partitions, snap, cal, s.GOMAXPROCS)
	if s.DataPath.Input != "" {
		fmt.Fprintln(w, s.DataPath.Describe())
	}
	fmt.Fprintf(w, "%d rounds after %d discarded warm-up round(s); the pipelines' order rotates and reverses from round to round\n\n",
		len(rep.Rounds), len(rep.Warmup))

	var ratios []RatioDef
	for _, d := range Ratios {
		if slices.Contains(s.Pipelines, d.Num) && slices.Contains(s.Pipelines, d.Den) {
			ratios = append(ratios, d)
		}
	}
	fmt.Fprint(w, "| round | order |")
	for _, p := range s.Pipelines {
		fmt.Fprintf(w, " %s events/s |", p)
	}
	for _, d := range ratios {
		fmt.Fprintf(w, " %s |", d.Name)
	}
	fmt.Fprintf(w, "\n|%s\n", strings.Repeat("---|", 2+len(s.Pipelines)+len(ratios)))
	for _, rd := range rep.Rounds {
		fmt.Fprintf(w, "| %d | %s |", rd.Round, strings.Join(rd.Order, " → "))
		for _, p := range s.Pipelines {
			if r, ok := rd.Result(p); ok {
				fmt.Fprintf(w, " %.0f |", r.Rate())
			} else {
				fmt.Fprint(w, " — |")
			}
		}
		for _, d := range ratios {
			fmt.Fprintf(w, " %.2f |", rd.Ratios[d.Name])
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "\n| pipeline | median events/s | p25–p75 | spread (p75−p25)/median | min–max | median CPU µs/event (process) | median lock wait µs/event | median heap allocations/event (process) |\n|---|---|---|---|---|---|---|---|\n")
	for _, p := range rep.Summary.Pipelines {
		fmt.Fprintf(w, "| %s | %.0f | %.0f–%.0f | %.0f%% | %.0f–%.0f | %.2f | %.2f | %.2f |\n", p.Pipeline, p.Median, p.P25, p.P75, 100*p.RelIQR, p.Min, p.Max, p.CPUPerEvent, p.LockWaitPerEvent, p.AllocsPerEvent)
	}
	if len(rep.Summary.Ratios) > 0 {
		fmt.Fprintf(w, "\n| ratio, within each round | median | p25–p75 | min–max |\n|---|---|---|---|\n")
		for _, r := range rep.Summary.Ratios {
			fmt.Fprintf(w, "| %s | %.2f | %.2f–%.2f | %.2f–%.2f |\n", r.Ratio, r.Median, r.P25, r.P75, r.Min, r.Max)
		}
	}
	rep.writeStages(w)
	for _, warn := range rep.Summary.Warnings {
		fmt.Fprintf(w, "\nwarning: %s\n", warn)
	}
}

// stageNames are the columns of writeStages: the service's stages
// (stream/internal/stage), the embedded broker, then the rest of the
// process.
var stageNames = []string{"fetch", "apply", "publish", "calibration", "checkpoint", "broker", ""}

// oneGoroutine says whether a GoroutineCPU's labels are those of one
// goroutine, or of a set that works in parallel and never bounds the rate
// alone (the broker's connections: stage=broker without goroutine=loop).
func oneGoroutine(labels string) bool {
	return labelValue(labels, "stage") != "broker" || labelValue(labels, "goroutine") != ""
}

// writeStages writes, when the runs were profiled (Config.Stages), each
// pipeline's CPU per event by stage and its busiest goroutine: medians
// over the measured rounds.
func (rep *Report) writeStages(w io.Writer) {
	type busy struct {
		labels string
		share  float64
	}
	header := false
	stageBusy := map[string]map[string][]float64{} // pipeline → stage → per round, the share of its busiest goroutine
	for _, p := range rep.Setup.Pipelines {
		per := map[string][]float64{}
		stageBusy[p] = map[string][]float64{}
		var bs []busy
		for _, rd := range rep.Rounds {
			r, ok := rd.Result(p)
			if !ok || len(r.Goroutines) == 0 || r.Events == 0 || r.Elapsed <= 0 {
				continue
			}
			sc := StageCPU(r.Goroutines)
			for _, s := range stageNames {
				per[s] = append(per[s], float64(sc[s])/1e3/float64(r.Events))
			}
			var b busy
			most := map[string]float64{}
			for _, g := range r.Goroutines {
				stage := labelValue(g.Labels, "stage")
				if stage == "" || !oneGoroutine(g.Labels) {
					continue
				}
				sh := g.CPU.Seconds() / r.Elapsed.Seconds()
				if sh > b.share {
					b = busy{g.Labels, sh}
				}
				most[stage] = max(most[stage], sh)
			}
			for _, st := range stageNames[:len(stageNames)-1] {
				stageBusy[p][st] = append(stageBusy[p][st], most[st])
			}
			bs = append(bs, b)
		}
		if len(bs) == 0 {
			continue
		}
		if !header {
			fmt.Fprint(w, "\nCPU µs per event by stage of the service (medians over the rounds; from a CPU profile of each run, 10 ms samples),\n"+
				"and its busiest goroutine: the most CPU over the run's time (1.00: never idle, it bounds events/s whatever the cores)\n\n"+
				"| pipeline | fetch, decode | apply | publish | calibration refits | checkpoints | embedded broker | rest of the process (clients, GC) | busiest goroutine | its share of the run |\n"+
				"|---|---|---|---|---|---|---|---|---|---|\n")
			header = true
		}
		fmt.Fprintf(w, "| %s |", p)
		for _, s := range stageNames {
			xs := per[s]
			slices.Sort(xs)
			fmt.Fprintf(w, " %.2f |", Quantile(xs, 0.5))
		}
		slices.SortFunc(bs, func(a, b busy) int {
			switch {
			case a.share < b.share:
				return -1
			case a.share > b.share:
				return 1
			}
			return 0
		})
		mid := bs[(len(bs)-1)/2]
		fmt.Fprintf(w, " %s | %.2f |\n", mid.labels, mid.share)
	}
	if !header {
		return
	}
	// Per stage, its busiest goroutine: a stage whose busiest goroutine
	// is near 1.00 cannot go faster with more cores, whatever the others.
	fmt.Fprint(w, "\nThe busiest goroutine of each stage: its CPU over the run's time (medians over the rounds; 0: no sample);\n"+
		"the broker's is its request loop, which handles every client's requests in turn\n\n"+
		"| pipeline | fetch, decode | apply | publish | calibration refits | checkpoints | embedded broker |\n|---|---|---|---|---|---|---|\n")
	for _, p := range rep.Setup.Pipelines {
		if len(stageBusy[p]["fetch"]) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s |", p)
		for _, st := range stageNames[:len(stageNames)-1] {
			xs := stageBusy[p][st]
			slices.Sort(xs)
			fmt.Fprintf(w, " %.2f |", Quantile(xs, 0.5))
		}
		fmt.Fprintln(w)
	}
}
