package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/internal/banditsim"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/eval"
	"github.com/streamer/streamer/stream/engine"
)

// The off-policy evaluation of a logged stream (streamer eval --log). A
// small bandit world is logged by the engine in process, as the service
// would log it (its input records and its response records, written as
// kcat dumps them), and replayed by the command.

// evalLogConfig ranks by %RANK% (epsilon-greedy, ε 0.2) with %CHAL% as a
// challenger (promote manual): a global linear mam and a per-user one.
const evalLogConfig = `
labels:
  join_window: {events: 1000, time: 10m}
rank:
  model: %RANK%
  join: {events: 5000}
  explore: {policy: epsilon, epsilon: 0.2, seed: 7}
  challenger: {model: %CHAL%, promote: manual, hold: 500}
models:
  - {name: global, type: mam, kernel: {type: linear}, features: {dim: %DIM%}}
  - {name: peruser, type: mam, scope: key, kernel: {type: linear}, features: {dim: %DIM%}}
`

func logConfigYAML(rank, chal string, dim int) string {
	return strings.NewReplacer("%RANK%", rank, "%CHAL%", chal, "%DIM%", fmt.Sprint(dim)).Replace(evalLogConfig)
}

// loggedRun is what the logging service did: its input records and the
// records it wrote to its output topic (responses and score records),
// its own off-policy report at the end, and the truth.
type loggedRun struct {
	records   []kafka.Message // the input topic, in order (Time set)
	responses [][]byte        // the output topic's values, in order
	live      engine.OPEReport
	wins      float64 // labelled first items at the live engine's "challenger wins" (NaN: none)
	// truth is, per model, the mean click probability of its greedy
	// first item over the labelled requests, on the state each request
	// was ranked in.
	truth    map[string]float64
	requests int
}

// srecordSink keeps the records a shard publishes.
type srecordSink struct{ msgs []kafka.Message }

func (s *srecordSink) Buffer() []byte          { return nil }
func (s *srecordSink) Publish(m kafka.Message) { s.msgs = append(s.msgs, m) }

// logRun serves the world through an engine configured by yaml, in
// process: 100 labelled events, then requests (a random user, cands random
// items, k 1), one unlabelled impression every 20 requests; the click on
// each first item, and each impression's, comes back as a delayed label
// in batches of 250 requests, keyed by the user but naming no key (as a
// label-only producer sends it).
func logRun(t *testing.T, w *banditsim.World, yaml string, requests, cands int, seed uint64) loggedRun {
	t.Helper()
	types := newModelTypes()
	cfg, err := config.Parse([]byte(yaml), nil, types)
	if err != nil {
		t.Fatal(err)
	}
	ecfg, models, err := engine.FromConfig(cfg, types)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ecfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	e, err := engine.New(ecfg, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sh, err := e.EmptyShard()
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	run := loggedRun{truth: map[string]float64{}, requests: requests}
	sink := &srecordSink{}
	rng := rand.New(rand.NewPCG(seed, 2))
	clicks := rand.New(rand.NewPCG(seed, 3))
	feats := make([][]byte, len(w.Items))
	for v, x := range w.Items {
		feats[v], _ = json.Marshal(x)
	}
	start := time.UnixMilli(1_700_000_000_000)
	apply := func(key string, value []byte) {
		msg := kafka.Message{Topic: cfg.Kafka.InputTopic, Offset: int64(len(run.records)), Key: []byte(key), Value: value,
			Time: start.Add(time.Duration(len(run.records)) * 10 * time.Millisecond)}
		run.records = append(run.records, msg)
		sink.msgs = sink.msgs[:0]
		sh.Process(&msg, sink)
		for _, m := range sink.msgs {
			if m.Topic == cfg.Kafka.DLQTopic {
				t.Fatalf("dead letter for %s", value)
			}
			run.responses = append(run.responses, m.Value)
		}
	}
	label := func(u, v int) int {
		if clicks.Float64() < w.ClickProb(u, v) {
			return 1
		}
		return -1
	}
	for i := range 100 {
		u, v := rng.IntN(len(w.Users)), rng.IntN(len(w.Items))
		apply(fmt.Sprintf("u%d", u), fmt.Appendf(nil, `{"id":"e%d","key":"u%d","features":%s,"label":%d}`, i, u, feats[v], label(u, v)))
	}
	type pending struct {
		key   string
		value []byte
	}
	var labels []pending
	var body bytes.Buffer
	for r := range requests {
		u := rng.IntN(len(w.Users))
		key := fmt.Sprintf("u%d", u)
		if r%20 == 0 {
			v := rng.IntN(len(w.Items))
			apply(key, fmt.Appendf(nil, `{"id":"imp%d","key":"%s","features":%s}`, r, key, feats[v]))
			labels = append(labels, pending{key, fmt.Appendf(nil, `{"id":"imp%d","label":%d}`, r, label(u, v))})
		}
		perm := rng.Perm(len(w.Items))[:cands]
		body.Reset()
		fmt.Fprintf(&body, `{"id":"q%d","key":"%s","k":1,"candidates":[`, r, key)
		for c, v := range perm {
			if c > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"item":"i%d","features":%s}`, v, feats[v])
		}
		body.WriteString("]}")
		req := bytes.Clone(body.Bytes())
		for _, m := range []string{"global", "peruser"} {
			scores, err := sh.Scores(m, req)
			if err != nil {
				t.Fatal(err)
			}
			best := 0
			for i := range scores {
				if scores[i].Score > scores[best].Score {
					best = i
				}
			}
			var v int
			fmt.Sscanf(scores[best].Item, "i%d", &v)
			run.truth[m] += w.ClickProb(u, v)
		}
		apply(key, req)
		var resp struct {
			Ranked []struct{ Item string }
		}
		if err := json.Unmarshal(run.responses[len(run.responses)-1], &resp); err != nil || len(resp.Ranked) != 1 {
			t.Fatalf("request %d: %v %s", r, err, run.responses[len(run.responses)-1])
		}
		var shown int
		fmt.Sscanf(resp.Ranked[0].Item, "i%d", &shown)
		labels = append(labels, pending{key, fmt.Appendf(nil, `{"id":"q%d","item":"i%d","label":%d}`, r, shown, label(u, shown))})
		if (r+1)%250 == 0 || r == requests-1 {
			for _, l := range labels {
				apply(l.key, l.value)
			}
			labels = labels[:0]
		}
	}
	for m := range run.truth {
		run.truth[m] /= float64(requests)
	}
	run.live = e.OPE(eval.DefaultBoots, 1)
	run.wins = math.NaN()
	if m := regexp.MustCompile(`the challenger wins.* labels=(\d+)`).FindSubmatch(logs.Bytes()); m != nil {
		run.wins, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return run
}

// writeLog writes the run's input records as format ("value", "keyed" or
// "timed", as kcat's -f '%s\n', '%k\t%s\n', '%T\t%k\t%s\n' print them) and
// its output topic's values, into dir; it returns the two paths.
func (run *loggedRun) writeLog(t *testing.T, dir, format string) (input, responses string) {
	t.Helper()
	var in, out bytes.Buffer
	for _, m := range run.records {
		switch format {
		case "timed":
			fmt.Fprintf(&in, "%d\t%s\t", m.Time.UnixMilli(), m.Key)
		case "keyed":
			fmt.Fprintf(&in, "%s\t", m.Key)
		}
		in.Write(m.Value)
		in.WriteByte('\n')
	}
	for _, v := range run.responses {
		out.Write(v)
		out.WriteByte('\n')
	}
	input, responses = filepath.Join(dir, "input-"+format+".jsonl"), filepath.Join(dir, "responses.jsonl")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(responses, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return input, responses
}

// evalCmd runs `streamer eval -q args…`: its stdout, stderr and error.
func evalCmd(args ...string) (stdout, stderr string, err error) {
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"eval", "-q"}, args...))
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// opeFile is what the tests read of ope.json.
type opeFile struct {
	Format   string           `json:"format"`
	Counts   eval.LogCounts   `json:"counts"`
	Skipped  map[string]int64 `json:"skipped"`
	LoggedBy map[string]int64 `json:"logged_by"`
	Promote  string           `json:"promote"`
	Wins     *struct {
		Challenger string   `json:"challenger"`
		Samples    *float64 `json:"samples"`
	} `json:"wins"`
	OPE struct {
		Labels     int64    `json:"labels"`
		Champion   string   `json:"champion"`
		Challenger string   `json:"challenger"`
		Logged     *float64 `json:"logged"`
		Agreement  *float64 `json:"agreement"`
		Estimates  []struct {
			Policy, Estimator   string
			Value, Lower, Upper *float64
		} `json:"estimates"`
		Difference *struct {
			Estimator          string
			Mean, Lower, Upper *float64
			Ahead, Hold        int64
		} `json:"difference"`
	} `json:"ope"`
}

func readOPE(t *testing.T, dir string) opeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, eval.OPEJSON))
	if err != nil {
		t.Fatal(err)
	}
	var f opeFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return f
}

// val is a JSON number read back (null: NaN).
func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// same reports whether a and b are the same float64, bit for bit (NaNs
// alike).
func same(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
}

// TestEvalLogReproducesLive: the replay of a log with the configuration
// that wrote it (the same models, the same decisions, propensities and
// labels, in the same order) reproduces the logging engine's own
// off-policy report, from each of the three dump formats (the bare values:
// keys from the values' "key" members and the labels' requests and
// impressions). With calibration off, bit for bit: every estimate,
// interval, the challenger's difference, and where the challenger won.
// With calibration on, DR's direct method is the calibrated probability,
// whose table the engine fits in the background (as the service does):
// when a fit is swapped in depends on the goroutines' timing, in the
// logging run as in the replay, so only the estimates that do not use the
// reward model (IPS, SNIPS), the logged reward and the agreement are
// exact, and each DR and SNDR estimate lies within the live one's
// interval.
func TestEvalLogReproducesLive(t *testing.T) {
	const requests = 3000
	w := banditsim.New(20, 100, 8, 5)
	for _, calibrated := range []bool{false, true} {
		t.Run(fmt.Sprintf("calibration=%v", calibrated), func(t *testing.T) {
			yaml := logConfigYAML("global", "peruser", 8)
			if !calibrated {
				yaml += "calibration: {window: 0}\n"
			}
			run := logRun(t, w, yaml, requests, 20, 41)
			live := run.live
			if live.Labels != requests {
				t.Fatalf("live: %d labelled first items, want %d", live.Labels, requests)
			}
			t.Logf("live: logged %.4f, agreement %.4f, difference (dr) %+.4f [%+.4f, %+.4f], challenger wins at %v; truth: global %.4f, peruser %.4f",
				live.Logged, live.Agreement, live.Difference.Mean, live.Difference.Lower, live.Difference.Upper, run.wins, run.truth["global"], run.truth["peruser"])
			dir := t.TempDir()
			cfgPath := writeConfig(t, yaml)
			for _, format := range []string{"value", "keyed", "timed"} {
				input, responses := run.writeLog(t, dir, format)
				out := filepath.Join(dir, "out-"+format)
				stdout, stderr, err := evalCmd("-c", cfgPath, "--log", input, "--responses", responses, "--log-format", format, "-o", out)
				if err != nil {
					t.Fatalf("%s: %v\n%s%s", format, err, stdout, stderr)
				}
				if format == "value" {
					t.Logf("stdout:\n%s", stdout)
				}
				if stderr != "" {
					t.Errorf("%s: stderr: %s", format, stderr)
				}
				checkReplay(t, format, readOPE(t, out), run, !calibrated)
			}
		})
	}
}

// checkReplay compares a replay's report f with the logging run's: the
// counts, and the estimates bit for bit (exact) or as
// TestEvalLogReproducesLive says (calibration on).
func checkReplay(t *testing.T, format string, f opeFile, run loggedRun, exact bool) {
	t.Helper()
	live := run.live
	c := f.Counts
	requests := int64(run.requests)
	imps := (requests + 19) / 20
	if c.Requests != requests || c.RequestsLogged != requests || c.Labels != requests || c.ImpressionLabels != imps ||
		c.Events != 100+imps || c.LabelsJoined != requests+imps || c.Skipped != 0 || c.RequestsNoResponse != 0 || c.Responses != requests {
		t.Errorf("%s: counts %+v", format, c)
	}
	if f.Format != format || f.LoggedBy["global"] != requests || f.Promote != "manual" {
		t.Errorf("%s: format %q, logged by %v, promote %q", format, f.Format, f.LoggedBy, f.Promote)
	}
	o := f.OPE
	if o.Labels != live.Labels || o.Champion != live.Champion || o.Challenger != live.Challenger ||
		!same(val(o.Logged), live.Logged) || !same(val(o.Agreement), live.Agreement) {
		t.Errorf("%s: replay: %d labels, %s/%s, logged %v, agreement %v; live: %d, %s/%s, %v, %v", format,
			o.Labels, o.Champion, o.Challenger, val(o.Logged), val(o.Agreement), live.Labels, live.Champion, live.Challenger, live.Logged, live.Agreement)
	}
	if len(o.Estimates) != len(live.Estimates) {
		t.Fatalf("%s: %d estimates, live %d", format, len(o.Estimates), len(live.Estimates))
	}
	for i, est := range o.Estimates {
		l := live.Estimates[i]
		v, lo, hi := val(est.Value), val(est.Lower), val(est.Upper)
		switch {
		case est.Policy != l.Policy || est.Estimator != l.Estimator:
			t.Errorf("%s: estimate %d is %s %s, live %s %s", format, i, est.Policy, est.Estimator, l.Policy, l.Estimator)
		case exact || est.Estimator == "ips" || est.Estimator == "snips":
			if !same(v, l.Value) || !same(lo, l.Lower) || !same(hi, l.Upper) {
				t.Errorf("%s: %s %s: replay %v [%v, %v], live %v [%v, %v]", format, est.Policy, est.Estimator, v, lo, hi, l.Value, l.Lower, l.Upper)
			}
		default:
			if !(l.Lower <= v && v <= l.Upper) {
				t.Errorf("%s: %s %s: replay %v, outside the live estimate's interval %v [%v, %v]", format, est.Policy, est.Estimator, v, l.Value, l.Lower, l.Upper)
			}
		}
	}
	d, ld := o.Difference, live.Difference
	if d == nil || ld == nil {
		t.Fatalf("%s: difference: replay %+v, live %+v", format, d, ld)
	}
	if !exact {
		return
	}
	if !same(val(d.Mean), ld.Mean) || !same(val(d.Lower), ld.Lower) || !same(val(d.Upper), ld.Upper) || d.Ahead != ld.Ahead {
		t.Errorf("%s: difference: replay %v [%v, %v] ahead %d, live %v [%v, %v] ahead %d", format,
			val(d.Mean), val(d.Lower), val(d.Upper), d.Ahead, ld.Mean, ld.Lower, ld.Upper, ld.Ahead)
	}
	switch {
	case math.IsNaN(run.wins) && f.Wins != nil:
		t.Errorf("%s: the replay's challenger wins at %v, the live one never did", format, val(f.Wins.Samples))
	case !math.IsNaN(run.wins) && (f.Wins == nil || val(f.Wins.Samples) != run.wins || f.Wins.Challenger != "peruser"):
		t.Errorf("%s: the live challenger won at %v labelled first items, the replay's: %+v", format, run.wins, f.Wins)
	}
}

// TestEvalLogTruth: a log written by the global model's epsilon-greedy
// policy (ε 0.2, 20 random candidates of 100 items, 20 users, 3000
// requests), replayed with a configuration that ranks by the per-user
// model and challenges it with the global one: the estimates of each
// greedy policy are of the models re-learned from the log, whose greedy
// first items the simulation knows (the logging run's own models, which
// learned the same labels), and so their true value on the logged
// contexts. With calibration off (DR's direct method the models' own
// probability; the replay deterministic) each DR interval covers its
// policy's truth and the difference's interval the true difference. With
// calibration on (the default: DR's direct method the calibrated
// probability, whose table the engine fits in the background, so that DR
// moves by up to about 0.005 from run to run) the global policy's DR
// interval and the difference's cover their truths; the per-user policy's
// estimate (agreement 0.11: weights of 100) is logged, its interval's edge
// being about 0.01 from the truth in this log.
func TestEvalLogTruth(t *testing.T) {
	const requests = 3000
	w := banditsim.New(20, 100, 8, 5)
	for _, calibrated := range []bool{false, true} {
		t.Run(fmt.Sprintf("calibration=%v", calibrated), func(t *testing.T) {
			cal := ""
			if !calibrated {
				cal = "calibration: {window: 0}\n"
			}
			run := logRun(t, w, logConfigYAML("global", "peruser", 8)+cal, requests, 20, 43)
			dir := t.TempDir()
			cfgPath := writeConfig(t, logConfigYAML("peruser", "global", 8)+cal)
			input, responses := run.writeLog(t, dir, "value")
			out := filepath.Join(dir, "out")
			stdout, stderr, err := evalCmd("-c", cfgPath, "--log", input, "--responses", responses, "-o", out)
			if err != nil {
				t.Fatalf("%v\n%s%s", err, stdout, stderr)
			}
			t.Logf("stdout:\n%s", stdout)
			f := readOPE(t, out)
			if f.OPE.Champion != "peruser" || f.OPE.Challenger != "global" || f.OPE.Labels != requests {
				t.Fatalf("champion %s, challenger %s, %d labels", f.OPE.Champion, f.OPE.Challenger, f.OPE.Labels)
			}
			truth := map[string]float64{"greedy": run.truth["peruser"], "challenger": run.truth["global"]}
			for _, est := range f.OPE.Estimates {
				v, lo, hi := val(est.Value), val(est.Lower), val(est.Upper)
				tr := truth[est.Policy]
				t.Logf("%-10s %-5s %.4f [%.4f, %.4f], truth %.4f, error %+.4f", est.Policy, est.Estimator, v, lo, hi, tr, v-tr)
				if est.Estimator == "dr" && (!calibrated || est.Policy == "challenger") && !(lo <= tr && tr <= hi) {
					t.Errorf("%s: DR %.4f [%.4f, %.4f] does not cover the truth %.4f", est.Policy, v, lo, hi, tr)
				}
			}
			d := f.OPE.Difference
			td := run.truth["global"] - run.truth["peruser"]
			t.Logf("difference global − peruser: %+.4f [%+.4f, %+.4f], truth %+.4f", val(d.Mean), val(d.Lower), val(d.Upper), td)
			if !(val(d.Lower) <= td && td <= val(d.Upper)) {
				t.Errorf("the difference's interval [%+.4f, %+.4f] does not cover the truth %+.4f", val(d.Lower), val(d.Upper), td)
			}
		})
	}
}

// TestEvalLogErrors: each mistake is refused naming what to fix: a
// missing file, --log with --data, --log without --responses, a
// configuration that cannot join labels to requests' items (naming
// labels.join_window, rank.join.events, rank.model), a response file with
// none of the requests' ids, an unknown --log-format, and more skipped
// lines than --max-skipped.
func TestEvalLogErrors(t *testing.T) {
	w := banditsim.New(20, 100, 8, 5)
	yaml := logConfigYAML("global", "peruser", 8)
	run := logRun(t, w, yaml, 300, 20, 47)
	dir := t.TempDir()
	cfgPath := writeConfig(t, yaml)
	input, responses := run.writeLog(t, dir, "value")
	out := filepath.Join(dir, "out")
	// Score records only: none of the requests' responses.
	var scores bytes.Buffer
	for _, v := range run.responses {
		if !bytes.Contains(v, []byte(`"ranked"`)) {
			scores.Write(v)
			scores.WriteByte('\n')
		}
	}
	noResponses := filepath.Join(dir, "scores.jsonl")
	if err := os.WriteFile(noResponses, scores.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.jsonl")
	in, _ := os.ReadFile(input)
	if err := os.WriteFile(garbage, append([]byte("not json\n{\"id\":\n[1]\n"), in[:bytes.IndexByte(in, '\n')+1]...), 0o644); err != nil {
		t.Fatal(err)
	}
	noJoin := writeConfig(t, strings.Replace(yaml, "join_window: {events: 1000, time: 10m}", "{}", 1))
	noRankJoin := writeConfig(t, strings.Replace(yaml, "join: {events: 5000}", "join: {events: 0}", 1))
	noRank := writeConfig(t, strings.NewReplacer("  model: global\n", "", "  challenger: {model: peruser, promote: manual, hold: 500}\n", "").Replace(yaml))
	missing := filepath.Join(dir, "missing.jsonl")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing log", []string{"-c", cfgPath, "--log", missing, "--responses", responses, "-o", out}, []string{"--log", missing}},
		{"missing responses", []string{"-c", cfgPath, "--log", input, "--responses", missing, "-o", out}, []string{"--responses", missing}},
		{"log and data", []string{"-c", cfgPath, "--log", input, "--responses", responses, "--data", input, "-o", out}, []string{"--data", "--log", "mutually exclusive"}},
		{"no responses flag", []string{"-c", cfgPath, "--log", input, "-o", out}, []string{"--log needs --responses"}},
		{"responses without log", []string{"-c", cfgPath, "--data", input, "--responses", responses, "-o", out}, []string{"--responses", "go with --log"}},
		{"test with log", []string{"-c", cfgPath, "--log", input, "--responses", responses, "--test", input, "-o", out}, []string{"--test", "--data, not --log"}},
		{"no join window", []string{"-c", noJoin, "--log", input, "--responses", responses, "-o", out}, []string{"labels.join_window", "no label can reach a request's item"}},
		{"no rank join", []string{"-c", noRankJoin, "--log", input, "--responses", responses, "-o", out}, []string{"rank.join.events"}},
		{"no rank model", []string{"-c", noRank, "--log", input, "--responses", responses, "-o", out}, []string{"rank.model"}},
		{"no response ids", []string{"-c", cfgPath, "--log", input, "--responses", noResponses, "-o", out}, []string{"none of the", "ranking requests", noResponses, "response topic"}},
		{"log format", []string{"-c", cfgPath, "--log", input, "--responses", responses, "--log-format", "csv", "-o", out}, []string{`"csv"`, "keyed", "timed"}},
		{"too many skipped", []string{"-c", cfgPath, "--log", garbage, "--responses", responses, "-o", out}, []string{"3 of 4 lines skipped", "not_json 3", "--max-skipped", "line 1"}},
	} {
		stdout, stderr, err := evalCmd(c.args...)
		if err == nil {
			t.Errorf("%s: no error\n%s%s", c.name, stdout, stderr)
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not say %q", c.name, err, s)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(out, eval.OPEJSON)); err == nil {
		t.Errorf("a refused replay wrote %s", eval.OPEJSON)
	}
}

// TestEvalLogSkipsAndDrops: lines that are not JSON or that the engine
// refuses (as the service would dead-letter them) are skipped and counted
// by reason, within --max-skipped; requests without a response, and one
// whose response's first item is none of its candidates, are not replayed
// and their labels not fed (counted, and a warning); an id answered twice
// keeps the last answer.
func TestEvalLogSkipsAndDrops(t *testing.T) {
	w := banditsim.New(20, 100, 8, 5)
	yaml := logConfigYAML("global", "peruser", 8)
	run := logRun(t, w, yaml, 300, 20, 47)
	dir := t.TempDir()
	cfgPath := writeConfig(t, yaml)
	input, responses := run.writeLog(t, dir, "value")
	in, _ := os.ReadFile(input)
	in = append([]byte("not json\n\n[1, 2]\n{\"id\":\"bad\",\"key\":\"u1\",\"features\":[1,2],\"label\":1}\n"), in...)
	if err := os.WriteFile(input, in, 0o644); err != nil {
		t.Fatal(err)
	}
	var resp bytes.Buffer
	dropped, notCand := 0, 0
	for _, v := range run.responses {
		var r struct{ ID string }
		json.Unmarshal(v, &r)
		var q int
		if n, _ := fmt.Sscanf(r.ID, "q%d", &q); n == 1 && bytes.Contains(v, []byte(`"ranked"`)) {
			switch {
			case q%10 == 3:
				dropped++
				continue
			case q == 7:
				// Answered twice: first with an item that is no candidate,
				// then as logged (the last answer is kept).
				resp.Write(regexp.MustCompile(`"item":"i\d+"`).ReplaceAll(v, []byte(`"item":"nope"`)))
				resp.WriteByte('\n')
			case q == 8:
				notCand++
				v = regexp.MustCompile(`"item":"i\d+"`).ReplaceAll(v, []byte(`"item":"nope"`))
			}
		}
		resp.Write(v)
		resp.WriteByte('\n')
	}
	if err := os.WriteFile(responses, resp.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, err := evalCmd("-c", cfgPath, "--log", input, "--responses", responses, "-o", out)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	t.Logf("stdout:\n%sstderr:\n%s", stdout, stderr)
	f := readOPE(t, out)
	c := f.Counts
	replayed := int64(300 - dropped - notCand)
	if c.Requests != 300 || c.RequestsNoResponse != int64(dropped) || c.RequestsNotCandidate != int64(notCand) || c.RequestsLogged != replayed ||
		c.Labels != 300 || c.LabelsDropped != int64(dropped+notCand) || c.ResponsesRepeat != 1 || c.Skipped != 3 || c.Lines != int64(len(run.records)+3) {
		t.Errorf("counts %+v (dropped %d, not a candidate %d)", c, dropped, notCand)
	}
	if f.Skipped["not_json"] != 2 || f.Skipped["wrong_dimension"] != 1 || len(f.Skipped) != 2 {
		t.Errorf("skipped %v", f.Skipped)
	}
	if f.OPE.Labels != replayed {
		t.Errorf("%d labelled first items, want the %d replayed requests'", f.OPE.Labels, replayed)
	}
	if !strings.Contains(stderr, "warning:") || !strings.Contains(stderr, fmt.Sprintf("%d of 300 ranking requests were not replayed", dropped+notCand)) {
		t.Errorf("no warning of the requests not replayed: %q", stderr)
	}
}

// TestEvalLogTimedClock: with --log-format timed the join windows run on
// the records' timestamps: a label that came after rank.join.time (the
// join window's 1m) is not joined, as the service did not join it; the
// same log without timestamps (keyed) joins it, the replay being faster
// than the log.
func TestEvalLogTimedClock(t *testing.T) {
	yaml := `
labels:
  join_window: {events: 100, time: 1m}
rank:
  model: global
  explore: {policy: epsilon, epsilon: 0.2}
models:
  - {name: global, type: mam, kernel: {type: linear}, features: {dim: 2}}
`
	cfgPath := writeConfig(t, yaml)
	dir := t.TempDir()
	const t0 = 1_700_000_000_000
	req := func(id string) string {
		return `{"id":"` + id + `","key":"u1","k":1,"candidates":[{"item":"a","features":[1,0]},{"item":"b","features":[0,1]}]}`
	}
	lines := []struct {
		ms    int64
		value string
	}{
		{t0, req("q1")},
		{t0 + 1, req("q2")},
		{t0 + 2_000, `{"id":"q1","item":"a","label":1}`},
		{t0 + 2*3600_000, `{"id":"q2","item":"b","label":1}`},
	}
	var timed, keyed bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&timed, "%d\tu1\t%s\n", l.ms, l.value)
		fmt.Fprintf(&keyed, "u1\t%s\n", l.value)
	}
	responses := filepath.Join(dir, "responses.jsonl")
	os.WriteFile(responses, []byte(`{"id":"q1","key":"u1","model":"global","version":0,"ranked":[{"item":"a","score":0,"propensity":0.9}]}
{"id":"q2","key":"u1","model":"global","version":0,"ranked":[{"item":"b","score":0,"propensity":0.1}]}
`), 0o644)
	for _, c := range []struct {
		format      string
		log         []byte
		joined, ope int64
	}{{"timed", timed.Bytes(), 1, 1}, {"keyed", keyed.Bytes(), 2, 2}} {
		input := filepath.Join(dir, c.format+".log")
		if err := os.WriteFile(input, c.log, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, c.format)
		stdout, stderr, err := evalCmd("-c", cfgPath, "--log", input, "--responses", responses, "--log-format", c.format, "-o", out)
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", c.format, err, stdout, stderr)
		}
		f := readOPE(t, out)
		if f.Counts.LabelsJoined != c.joined || f.Counts.LabelsJoined+f.Counts.LabelsUnknown+f.Counts.LabelsLate != 2 || f.OPE.Labels != c.ope ||
			val(f.OPE.Logged) != 1 || f.OPE.Difference != nil || f.Wins != nil || f.Promote != "" {
			t.Errorf("%s: counts %+v, ope %+v, wins %+v, promote %q", c.format, f.Counts, f.OPE, f.Wins, f.Promote)
		}
		if c.format == "timed" {
			t.Logf("stdout:\n%s", stdout)
		}
	}
}
