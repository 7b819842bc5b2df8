package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"strings"
	"time"
)

// Pipeline names.
const (
	PassThrough   = "passthrough"
	Score         = "score"
	ScoreSnapshot = "score+snapshot"
)

// SpreadWarning is the relative interquartile range, (p75 − p25) / median
// of a pipeline's events/s over the rounds, above which the report warns
// that its figures are unreliable.
const SpreadWarning = 0.20

// RatioDef is a ratio of two pipelines' events/s within one round.
type RatioDef struct {
	Name     string // "score/passthrough"
	Num, Den string // pipelines
}

// Ratios are the ratios a report gives: the scoring pipeline to
// pass-through (the end-to-end target) and snapshots' cost to scoring.
var Ratios = []RatioDef{
	{Name: Score + "/" + PassThrough, Num: Score, Den: PassThrough},
	{Name: ScoreSnapshot + "/" + Score, Num: ScoreSnapshot, Den: Score},
}

// Schedule returns the order of k pipelines (indices 0..k−1) in each of n
// rounds: rotations of 0..k−1, each followed by its reverse —
// for k = 3: ABC, CBA, BCA, ACB, CAB, BAC, then again. Every block of 2k
// rounds puts each pipeline in each position exactly twice, and for k ≤ 3
// it is every order once (so each pipeline also follows each other one
// equally often). In a partial block a pipeline's counts in the k
// positions differ by at most 2 (for 5 rounds of 3 pipelines: 1 or 2).
func Schedule(k, n int) [][]int {
	out := make([][]int, n)
	for r := range out {
		rot := (r / 2) % max(k, 1)
		row := make([]int, k)
		for i := range row {
			row[i] = (rot + i) % k
		}
		if r%2 == 1 {
			slices.Reverse(row)
		}
		out[r] = row
	}
	return out
}

// Result is one pipeline's run in one round.
type Result struct {
	Mode      string        // "passthrough", "score" or "score+snapshot"
	Round     int           // 1.. (0: a warm-up round)
	Position  int           // 0-based position in the round's order
	Snapshots int           // snapshots taken (score+snapshot)
	Events    int           // events consumed
	Records   int64         // records published and acknowledged (scores: events × models)
	Elapsed   time.Duration // first consumed event → last record acknowledged
	// CPU is the CPU time the whole process (the embedded broker's
	// goroutines included) used over Elapsed; 0 where it cannot be read.
	CPU time.Duration
	// LockWait is the time the process's goroutines spent blocked on
	// locks (sync.Mutex and sync.RWMutex, and the runtime's own) over
	// Elapsed, from runtime/metrics: where goroutines that could run in
	// parallel take turns, it grows with the cores.
	LockWait time.Duration
	// Allocs is the heap objects the process allocated over Elapsed
	// (runtime/metrics; the embedded broker's included, and kafka-go's:
	// --no-broker leaves mostly the service's own).
	Allocs int64
	// Learned is, for a score pipeline, the examples each model had
	// learned when the run ended (by model name; a key-scoped model's over
	// every key): Events each, or Run fails.
	Learned map[string]int64
	// Goroutines is, with Config.Stages, the run's CPU by goroutine labels
	// (stages.go), largest first; nil otherwise.
	Goroutines []GoroutineCPU
}

// CPUPerEvent is the process's CPU time per event, in µs (0 when CPU was
// not read). On a machine whose cores are all busy it is what bounds
// events/s, and it drifts less than events/s with other load.
func (r Result) CPUPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.CPU.Microseconds()) / float64(r.Events)
}

// LockWaitPerEvent is LockWait per event, in µs.
func (r Result) LockWaitPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.LockWait.Nanoseconds()) / 1e3 / float64(r.Events)
}

// AllocsPerEvent is Allocs per event.
func (r Result) AllocsPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.Allocs) / float64(r.Events)
}

// Rate is events per second.
func (r Result) Rate() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// resultJSON is a Result in the report's JSON.
type resultJSON struct {
	Pipeline   string           `json:"pipeline"`
	Position   int              `json:"position"`
	Events     int              `json:"events"`
	Records    int64            `json:"records"`
	Seconds    float64          `json:"seconds"`
	EventsPerS float64          `json:"events_per_s"`
	Snapshots  int              `json:"snapshots"`
	CPUS       float64          `json:"cpu_s"`             // the process's CPU time (user + system) over seconds
	CPUPerEv   float64          `json:"cpu_us_per_event"`  // cpu_s / events, in µs
	LockWaitS  float64          `json:"lock_wait_s"`       // goroutines blocked on locks (runtime/metrics /sync/mutex/wait/total)
	Allocs     int64            `json:"allocs"`            // heap objects the process allocated (runtime/metrics /gc/heap/allocs:objects)
	Learned    map[string]int64 `json:"learned,omitempty"` // score pipelines: examples learned, by model
	// --stages: the run's CPU by goroutine labels ("stage=apply partition=0",
	// "" for the rest of the process), largest first.
	Goroutines []goroutineJSON `json:"goroutines,omitempty"`
}

type goroutineJSON struct {
	Labels string  `json:"labels"`
	CPUS   float64 `json:"cpu_s"`
}

// MarshalJSON writes the result as the report's JSON schema says.
func (r Result) MarshalJSON() ([]byte, error) {
	var gs []goroutineJSON
	for _, g := range r.Goroutines {
		gs = append(gs, goroutineJSON{g.Labels, g.CPU.Seconds()})
	}
	return json.Marshal(resultJSON{r.Mode, r.Position, r.Events, r.Records, r.Elapsed.Seconds(), finite(r.Rate()), r.Snapshots,
		r.CPU.Seconds(), finite(r.CPUPerEvent()), r.LockWait.Seconds(), r.Allocs, r.Learned, gs})
}

// UnmarshalJSON reads what MarshalJSON writes (Round is not in it: the
// enclosing Round's).
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{Mode: j.Pipeline, Position: j.Position, Events: j.Events, Records: j.Records, Snapshots: j.Snapshots,
		Elapsed: time.Duration(j.Seconds * float64(time.Second)), CPU: time.Duration(j.CPUS * float64(time.Second)),
		LockWait: time.Duration(j.LockWaitS * float64(time.Second)), Allocs: j.Allocs, Learned: j.Learned}
	for _, g := range j.Goroutines {
		r.Goroutines = append(r.Goroutines, GoroutineCPU{Labels: g.Labels, CPU: time.Duration(g.CPUS * float64(time.Second))})
	}
	return nil
}

// Round is one round: every pipeline once, in Order.
type Round struct {
	Round   int                `json:"round"` // 1..; 0 for a warm-up round
	Order   []string           `json:"order"`
	Results []Result           `json:"results"` // in the order run
	Ratios  map[string]float64 `json:"ratios"`  // RatioDef.Name → ratio of this round's events/s
}

// Result returns the round's result of pipeline mode.
func (r Round) Result(mode string) (Result, bool) {
	for _, res := range r.Results {
		if res.Mode == mode {
			return res, true
		}
	}
	return Result{}, false
}

// ratios fills r.Ratios from r.Results.
func (r *Round) ratios() {
	r.Ratios = map[string]float64{}
	for _, d := range Ratios {
		num, ok1 := r.Result(d.Num)
		den, ok2 := r.Result(d.Den)
		if ok1 && ok2 {
			r.Ratios[d.Name] = finite(num.Rate() / den.Rate())
		}
	}
}

// Spread summarises values over the rounds: median and quartiles (linear
// interpolation between order statistics, as numpy's default) and the
// extremes.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P25    float64 `json:"p25"`
	P75    float64 `json:"p75"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// RelIQR is (p75 − p25) / median.
func (s Spread) RelIQR() float64 {
	if s.Median == 0 {
		return math.Inf(1)
	}
	return (s.P75 - s.P25) / s.Median
}

// SpreadOf summarises xs (N = 0 for none).
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	return Spread{N: len(v), Median: Quantile(v, 0.5), P25: Quantile(v, 0.25), P75: Quantile(v, 0.75), Min: v[0], Max: v[len(v)-1]}
}

// Quantile returns the p-quantile of sorted, interpolating linearly
// between the order statistics at (n−1)p.
func Quantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	h := float64(len(sorted)-1) * p
	lo := int(math.Floor(h))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// PipelineStats is one pipeline's events/s over the measured rounds.
type PipelineStats struct {
	Pipeline string  `json:"pipeline"`
	Spread           // events/s
	RelIQR   float64 `json:"rel_iqr"` // (p75 − p25) / median
	// CPUPerEvent is the median over the rounds of the process's CPU
	// time per event, in µs (0 where it could not be read).
	CPUPerEvent float64 `json:"cpu_us_per_event"`
	// LockWaitPerEvent is the median over the rounds of the time
	// goroutines spent blocked on locks per event, in µs.
	LockWaitPerEvent float64 `json:"lock_wait_us_per_event"`
	// AllocsPerEvent is the median over the rounds of the heap objects
	// the process allocated per event.
	AllocsPerEvent float64 `json:"allocs_per_event"`
}

// RatioStats is one ratio over the measured rounds, each round's ratio
// taken within that round.
type RatioStats struct {
	Ratio    string    `json:"ratio"`
	Spread             // of the per-round ratios
	PerRound []float64 `json:"per_round"`
}

// Summary is what the measured rounds say.
type Summary struct {
	Pipelines []PipelineStats `json:"pipelines"`
	Ratios    []RatioStats    `json:"ratios"`
	Warnings  []string        `json:"warnings"`
}

// Summarize summarises measured rounds (warm-up rounds excluded by the
// caller): per pipeline the median, quartiles and range of events/s; per
// ratio of Ratios the same over the ratios taken within each round; and a
// warning for every pipeline whose relative IQR exceeds threshold, naming
// likely causes.
func Summarize(rounds []Round, threshold float64) Summary {
	s := Summary{Pipelines: []PipelineStats{}, Ratios: []RatioStats{}, Warnings: []string{}}
	var modes []string
	shortest := time.Duration(math.MaxInt64)
	for _, r := range rounds {
		for _, res := range r.Results {
			if !slices.Contains(modes, res.Mode) {
				modes = append(modes, res.Mode)
			}
			shortest = min(shortest, res.Elapsed)
		}
	}
	slices.SortStableFunc(modes, func(a, b string) int { return modeRank(a) - modeRank(b) })
	var noisy []string
	for _, m := range modes {
		var rates, cpu, wait, allocs []float64
		for _, r := range rounds {
			if res, ok := r.Result(m); ok {
				rates = append(rates, res.Rate())
				cpu = append(cpu, res.CPUPerEvent())
				wait = append(wait, res.LockWaitPerEvent())
				allocs = append(allocs, res.AllocsPerEvent())
			}
		}
		sp := SpreadOf(rates)
		ps := PipelineStats{Pipeline: m, Spread: sp, RelIQR: finite(sp.RelIQR()), CPUPerEvent: finite(SpreadOf(cpu).Median),
			LockWaitPerEvent: finite(SpreadOf(wait).Median), AllocsPerEvent: finite(SpreadOf(allocs).Median)}
		s.Pipelines = append(s.Pipelines, ps)
		if sp.N > 1 && !(sp.RelIQR() <= threshold) {
			noisy = append(noisy, fmt.Sprintf("%s %.0f%%", m, 100*sp.RelIQR()))
		}
	}
	for _, d := range Ratios {
		var per []float64
		for _, r := range rounds {
			if v, ok := r.Ratios[d.Name]; ok {
				per = append(per, v)
			}
		}
		if len(per) == 0 {
			continue
		}
		s.Ratios = append(s.Ratios, RatioStats{Ratio: d.Name, Spread: SpreadOf(per), PerRound: per})
	}
	if len(noisy) > 0 {
		w := fmt.Sprintf("the rounds disagree: events/s varied by more than %.0f%% of the median (interquartile range: %s), so these figures are not reliable. "+
			"Likely causes: other load on the machine (other processes, a shared VM's neighbours, CPU frequency changes)", 100*threshold, strings.Join(noisy, ", "))
		if shortest < 5*time.Second {
			w += fmt.Sprintf(", or too few events (the shortest run took %.2f s: raise --events so that each run takes several seconds)", shortest.Seconds())
		} else {
			w += ", or too few events per run"
		}
		w += ". Re-run on an idle machine; more --rounds steadies the medians but not the spread."
		s.Warnings = append(s.Warnings, w)
	}
	return s
}

func modeRank(m string) int {
	switch m {
	case PassThrough:
		return 0
	case Score:
		return 1
	case ScoreSnapshot:
		return 2
	}
	return 3
}

// finite maps NaN and ±Inf (a zero-length run) to 0 so that JSON encodes.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// allocsMetric is the runtime's count of heap objects allocated.
const allocsMetric = "/gc/heap/allocs:objects"

// heapAllocs is the heap objects the process has allocated so far
// (runtime/metrics; 0 where the runtime does not keep it).
func heapAllocs() int64 {
	v := runtimeMetric(allocsMetric)
	if v.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(v.Uint64())
}

// runtimeMetric reads one runtime/metrics value (KindBad where the
// runtime does not keep it).
func runtimeMetric(name string) metrics.Value {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value
}

// lockWaitMetric is the runtime's total time goroutines have spent blocked
// on locks.
const lockWaitMetric = "/sync/mutex/wait/total:seconds"

// lockWait is the time the process's goroutines have spent blocked on
// locks so far (runtime/metrics; 0 where the runtime does not keep it).
func lockWait() time.Duration {
	v := runtimeMetric(lockWaitMetric)
	if v.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(v.Float64() * float64(time.Second))
}
