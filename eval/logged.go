package eval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/wire"
)

// Off-policy evaluation of a logged stream (streamer eval --log). The
// input is a dump of the service's input topic (events, ranking requests,
// delayed labels; one record value a line) and a dump of its response
// topic. RunLog builds the engine from the configuration exactly as the
// service does and replays the input through it, one shard, in the file's
// order, with RankConfig.Replay: each ranking request carries the decision
// the service logged for it (its response's first item and that item's
// propensity, injected as the request's "logged" member), which the engine
// shows first instead of drawing its own. Every model re-learns from the
// log as the service did, so the off-policy estimates (Engine.OPE) are
// those of the configured champion's greedy order, and of a configured
// challenger's, as they would have been at each request, from the logged
// decisions and their labels.
//
// Requests whose decision is not known (no id, no response with their id,
// or a response whose first item is none of the request's candidates) are
// not replayed, and their labels with them: a request replayed with the
// replay's own draw would add samples of the replay's policy, not the
// log's. Both are counted.

// Log formats (LogOptions.Format): a line is the record's value (LogValue),
// key<TAB>value (LogKeyed: kcat -f '%k\t%s\n'), or
// timestamp<TAB>key<TAB>value with the record's timestamp in milliseconds
// since the epoch (LogTimed: kcat -f '%T\t%k\t%s\n').
const (
	LogValue = "value"
	LogKeyed = "keyed"
	LogTimed = "timed"
)

// OPEJSON is the name of the report RunLog's report writes (WriteDir).
const OPEJSON = "ope.json"

// DefaultBoots is LogOptions.Boots' default: the bootstrap resamples of
// each interval.
const DefaultBoots = 1000

// LogOptions says what RunLog replays.
type LogOptions struct {
	Log       string // the input topic's records, one a line
	Responses string // the response topic's records, one a line
	Format    string // LogValue ("" too), LogKeyed or LogTimed
	// ConfigPath is recorded in the report (informational).
	ConfigPath string
	// MaxSkipped is the fraction of the log's lines that may be skipped
	// (not JSON, or refused by the engine as the service would
	// dead-letter them) before RunLog fails (0: DefaultMaxSkipped; 1
	// accepts any).
	MaxSkipped float64
	// Boots and Seed draw the bootstrap intervals (Engine.OPE; Boots 0:
	// DefaultBoots). The same seed and log give the same report.
	Boots int
	Seed  uint64
	// Progress, when non-nil, receives a line at every 10% of the log.
	Progress io.Writer
}

// LogReport is the result of RunLog. Its JSON form is ope.json.
type LogReport struct {
	Config    string    `json:"config,omitempty"`
	Log       string    `json:"log"`
	Responses string    `json:"responses"`
	Format    string    `json:"format"`
	Counts    LogCounts `json:"counts"`
	// Skipped counts the log's skipped lines by reason: not_json (not a
	// JSON object) or the dead-letter reason the engine refused it with.
	Skipped      map[string]int64 `json:"skipped,omitempty"`
	FirstSkipped string           `json:"first_skipped,omitempty"`
	// LoggedBy counts the ranking responses read by the model that
	// ranked them in the log (a response's "model"): more than one when
	// a challenger was promoted during the log.
	LoggedBy map[string]int64 `json:"logged_by,omitempty"`
	// Promote is rank.challenger.promote as configured; the replay always
	// runs as manual (no promotion: the champion stays the rank model).
	// Wins, with a challenger, is when the challenger's lower bound had
	// first stayed above 0 for rank.challenger.hold labelled first items:
	// where promote auto would have promoted it (and manual reports it).
	Promote string   `json:"promote,omitempty"`
	Wins    *LogWins `json:"wins"`
	Boots   int      `json:"boots"`
	Seed    uint64   `json:"seed"`
	// OPE is the engine's off-policy report at the end of the replay.
	OPE engine.OPEReport `json:"-"`
	// Warnings about the input (requests without a logged decision, the
	// engine's warnings).
	Warnings []string `json:"warnings,omitempty"`
}

// LogCounts are what the replay read and did.
type LogCounts struct {
	Lines int64 `json:"lines"` // non-blank lines of the log, skipped ones included
	// Events are the lines fed that are neither requests nor labels.
	Events int64 `json:"events"`
	// Requests are the ranking requests read; RequestsLogged were
	// replayed with their logged decision; the others were dropped:
	// without a response (no id, or no response with it) or whose
	// response's first item is none of their candidates.
	Requests             int64 `json:"requests"`
	RequestsLogged       int64 `json:"requests_logged"`
	RequestsNoResponse   int64 `json:"requests_without_response"`
	RequestsNotCandidate int64 `json:"requests_logged_item_not_candidate"`
	// Labels are the delayed labels of shown items ({"id", "item",
	// "label"}); LabelsDropped those of dropped requests, not fed.
	// ImpressionLabels are the delayed labels of events ({"id", "label"}).
	Labels           int64 `json:"labels"`
	LabelsDropped    int64 `json:"labels_of_dropped_requests"`
	ImpressionLabels int64 `json:"impression_labels"`
	// The engine's outcomes of the label-only events fed (both kinds):
	// streamer_labels_total.
	LabelsJoined  int64 `json:"labels_joined"`
	LabelsUnknown int64 `json:"labels_unknown_id"`
	LabelsLate    int64 `json:"labels_too_late"`
	Skipped       int64 `json:"skipped"`
	// The response file: its non-blank lines, the ranking responses
	// among them, the ids answered more than once (the last answer
	// kept), and the other lines (score records, not JSON), ignored.
	ResponseLines    int64 `json:"response_lines"`
	Responses        int64 `json:"responses"`
	ResponsesRepeat  int64 `json:"responses_repeated"`
	ResponsesIgnored int64 `json:"response_lines_ignored"`
}

// LogWins is where the challenger first won (LogReport.Wins).
type LogWins struct {
	Challenger string  `json:"challenger"`
	Samples    float64 `json:"samples"` // labelled first items replayed when it did
	Difference float64 `json:"difference"`
	Lower      float64 `json:"lower"`
}

// logged is a response's first item and its propensity, as the response
// wrote it (the request's "logged" member is spliced from these bytes).
type logged struct {
	item []byte // JSON string, quoted
	prop []byte // JSON number
	name string // the item, unquoted
}

// RunLog replays opt.Log, with the decisions of opt.Responses, through
// the engine cfg configures (types: the model types) and reports the
// off-policy estimates.
func RunLog(ctx context.Context, cfg config.Config, types *online.Registry, opt LogOptions) (*LogReport, error) {
	switch opt.Format {
	case "":
		opt.Format = LogValue
	case LogValue, LogKeyed, LogTimed:
	default:
		return nil, fmt.Errorf("eval: log format %q: want %s, %s or %s", opt.Format, LogValue, LogKeyed, LogTimed)
	}
	if opt.Boots <= 0 {
		opt.Boots = DefaultBoots
	}
	if err := replayable(cfg); err != nil {
		return nil, err
	}
	rep := &LogReport{Config: opt.ConfigPath, Log: opt.Log, Responses: opt.Responses, Format: opt.Format,
		Skipped: map[string]int64{}, LoggedBy: map[string]int64{}, Boots: opt.Boots, Seed: opt.Seed}
	in, err := os.Open(opt.Log)
	if err != nil {
		return nil, fmt.Errorf("eval: --log: %w", err)
	}
	defer in.Close()
	resps, byModel, err := readResponses(opt.Responses, &rep.Counts)
	if err != nil {
		return nil, err
	}

	// The engine, as the service builds it, replaying.
	ecfg, models, err := engine.FromConfig(cfg, types)
	if err != nil {
		return nil, err
	}
	ecfg.Rank.Replay = true
	rep.Promote = cfg.Rank.Challenger.Promote
	if cfg.Rank.Challenger.Model == "" {
		rep.Promote = ""
	}
	ecfg.Rank.Promote = engine.PromoteManual // the champion stays the rank model; Wins says what auto would have done
	lh := &logHandler{}
	ecfg.Log = slog.New(lh)
	reg := prometheus.NewRegistry()
	e, err := engine.New(ecfg, models, reg)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	sh, err := e.EmptyShard()
	if err != nil {
		return nil, err
	}
	defer sh.Close()
	var w *engine.Worker
	if opt.Format == LogTimed {
		w = e.NewWorker()
	}

	rp := &replay{cfg: cfg, opt: opt, rep: rep, resps: resps, keys: map[string]string{}, dropped: map[string]bool{},
		sink: &replaySink{dlq: cfg.Kafka.DLQTopic}}
	var size int64
	if fi, err := in.Stat(); err == nil {
		size = fi.Size()
	}
	r := bufio.NewReaderSize(in, 256<<10)
	var read int64
	nextPct := 10
	var line []byte
	for n := int64(0); ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		line, err = readLine(r, line[:0])
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("eval: --log: %w", err)
		}
		read += int64(len(line))
		msg, at, ok := rp.parse(line, n)
		if ok {
			before := rp.sink.rejected
			if at.IsZero() {
				sh.Process(&msg, rp.sink)
			} else {
				w.Prepare(&msg)
				sh.ApplyAt(w, &msg, rp.sink, at)
			}
			rp.fed(rp.sink.rejected > before)
			if e.CheckpointWanted() {
				// Key-scoped models hold their changed keys' states until
				// a checkpoint writes them to the key store (in memory).
				c, err := sh.Capture()
				if err == nil {
					err = sh.Durable(c)
					sh.Settle(c)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		if opt.Progress != nil && size > 0 && int(100*read/size) >= nextPct {
			fmt.Fprintf(opt.Progress, "replay: %d%% (%d lines)\n", nextPct, rep.Counts.Lines)
			for nextPct <= int(100*read/size) {
				nextPct += 10
			}
		}
		if err == io.EOF {
			break
		}
	}
	c := &rep.Counts
	for reason, n := range rp.sink.reasons {
		rep.Skipped[reason] += n
	}
	if rep.FirstSkipped == "" {
		rep.FirstSkipped = rp.sink.first
	}
	for _, n := range rep.Skipped {
		c.Skipped += n
	}
	max := opt.MaxSkipped
	if max <= 0 {
		max = DefaultMaxSkipped
	}
	switch {
	case c.Lines == 0:
		return nil, fmt.Errorf("eval: %s: no records", opt.Log)
	case c.Skipped == c.Lines || float64(c.Skipped) > max*float64(c.Lines):
		return nil, fmt.Errorf("eval: %s: %d of %d lines skipped (%s), more than %g%% (--max-skipped); the first: %s",
			opt.Log, c.Skipped, c.Lines, reasonList(rep.Skipped), 100*max, rep.FirstSkipped)
	case c.Requests == 0:
		return nil, fmt.Errorf("eval: %s: no ranking requests (records with \"candidates\"): is it a dump of the input topic (%s)?", opt.Log, cfg.Kafka.InputTopic)
	case c.RequestsLogged == 0:
		return nil, fmt.Errorf("eval: none of the %d ranking requests of %s has a response in %s (%d ranking responses): is it a dump of the response topic (rank.response_topic, else kafka.output_topic) of the run that read the log?",
			c.Requests, opt.Log, opt.Responses, c.Responses)
	}
	if n := c.RequestsNoResponse + c.RequestsNotCandidate; n > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf(
			"%d of %d ranking requests were not replayed (%d without an id or a response, %d whose response's first item is none of their candidates), nor their %d labels: the estimates are over the %d requests whose logged decision is known",
			n, c.Requests, c.RequestsNoResponse, c.RequestsNotCandidate, c.LabelsDropped, c.RequestsLogged))
	}
	for m, n := range byModel {
		rep.LoggedBy[m] = n
	}
	if len(byModel) > 1 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf(
			"the log was ranked by more than one model (%s: a promotion or a rollback); the replay's champion, %s, is the configured rank model throughout",
			reasonList(byModel), cfg.Rank.Model))
	}
	c.LabelsJoined, c.LabelsUnknown, c.LabelsLate = labelOutcomes(reg)
	rep.OPE = e.OPE(opt.Boots, opt.Seed)
	if d := rep.OPE.Difference; d != nil && d.Won != nil {
		rep.Wins = &LogWins{Challenger: rep.OPE.Challenger, Samples: float64(d.Won.Samples), Difference: d.Won.Mean, Lower: d.Won.Lower}
	}
	lh.mu.Lock()
	rep.Warnings = append(rep.Warnings, lh.warnings...)
	if lh.more > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d more warnings of the engine", lh.more))
	}
	lh.mu.Unlock()
	if rep.OPE.Labels == 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf(
			"no label reached a replayed request's first item (%d labels of shown items read): the estimates are empty; are the labels in the log, with the requests' ids and items?", c.Labels))
	}
	return rep, nil
}

// replayable checks that the configuration can join labels to the items
// requests show: without both windows no label reaches a request's item.
func replayable(cfg config.Config) error {
	switch {
	case cfg.Rank.Model == "":
		return errors.New("eval: --log: rank.model is not set: the configuration ranks no requests (set it as in the service that wrote the log)")
	case !cfg.Labels.JoinWindow.Enabled():
		return errors.New("eval: --log: labels.join_window is off: without a join window no label can reach a request's item, and there is nothing to estimate (set labels.join_window and rank.join as in the service that wrote the log)")
	case cfg.Rank.Join.Events == 0:
		return errors.New("eval: --log: rank.join.events is 0: the items requests show are not kept, so no label can reach a request's item (set rank.join as in the service that wrote the log)")
	}
	return nil
}

// replay is a replay in progress.
type replay struct {
	cfg   config.Config
	opt   LogOptions
	rep   *LogReport
	resps map[string]logged
	// keys are the keys of the requests and unlabelled events with an id
	// (LogValue: their "key" member), the keys of their labels.
	keys    map[string]string
	dropped map[string]bool // ids of requests not replayed
	sink    *replaySink
	kind    int // of the line fed
	value   []byte
}

// Kinds of line.
const (
	kindEvent = iota
	kindRequest
	kindLabel
	kindImpressionLabel
)

// logLine is what the replay reads of a record's value.
type logLine struct {
	ID         json.RawMessage `json:"id"`
	Key        json.RawMessage `json:"key"`
	Item       json.RawMessage `json:"item"`
	Label      json.RawMessage `json:"label"`
	Features   json.RawMessage `json:"features"`
	Candidates json.RawMessage `json:"candidates"`
}

// parse reads line n of the log into the record to feed (at: its time in
// LogTimed, else zero), or reports false for a line not fed (blank,
// skipped, or a request or label dropped).
func (rp *replay) parse(line []byte, n int64) (kafka.Message, time.Time, bool) {
	var msg kafka.Message
	var at time.Time
	if len(bytes.TrimSpace(line)) == 0 {
		return msg, at, false
	}
	c := &rp.rep.Counts
	c.Lines++
	value := line
	hasKey := false
	switch rp.opt.Format {
	case LogTimed:
		ts, rest, ok := bytes.Cut(value, []byte{'\t'})
		ms, err := strconv.ParseInt(string(ts), 10, 64)
		if !ok || err != nil {
			rp.skip("bad_line", fmt.Sprintf("line %d: want timestamp<TAB>key<TAB>value (--log-format %s)", n+1, LogTimed))
			return msg, at, false
		}
		at, value = time.UnixMilli(ms), rest
		fallthrough
	case LogKeyed:
		key, rest, ok := bytes.Cut(value, []byte{'\t'})
		if !ok {
			rp.skip("bad_line", fmt.Sprintf("line %d: want key<TAB>value (--log-format %s)", n+1, rp.opt.Format))
			return msg, at, false
		}
		msg.Key, value, hasKey = key, rest, true
	}
	value = bytes.TrimSpace(value)
	var ll logLine
	if err := json.Unmarshal(value, &ll); err != nil || len(value) == 0 || value[0] != '{' {
		detail := "not a JSON object"
		if err != nil {
			detail = err.Error()
		}
		rp.skip(string(wire.ReasonNotJSON), fmt.Sprintf("line %d: %s", n+1, detail))
		return msg, at, false
	}
	msg.Topic, msg.Offset, msg.Value = rp.cfg.Kafka.InputTopic, n, value
	id, hasID := jsonString(ll.ID)
	key, valueKey := jsonString(ll.Key)
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	switch {
	case present(ll.Candidates):
		rp.kind = kindRequest
		c.Requests++
		lg, ok := rp.resps[id]
		if !hasID || !ok {
			c.RequestsNoResponse++
			if hasID {
				rp.dropped[id] = true
			}
			return msg, at, false
		}
		if !isCandidate(ll.Candidates, lg.name) {
			c.RequestsNotCandidate++
			rp.dropped[id] = true
			return msg, at, false
		}
		// The logged decision, spliced before the request's final '}'.
		end := bytes.LastIndexByte(value, '}')
		v := append(rp.value[:0], value[:end]...)
		v = append(v, `,"logged":{"item":`...)
		v = append(v, lg.item...)
		v = append(v, `,"propensity":`...)
		v = append(v, lg.prop...)
		v = append(v, "}}"...)
		rp.value, msg.Value = v, v
		delete(rp.dropped, id)
		if !hasKey && valueKey {
			msg.Key = []byte(key)
		}
		if len(msg.Key) > 0 {
			rp.keys[id] = string(msg.Key)
		}
	case !present(ll.Features) && present(ll.Label) && hasID:
		rp.kind = kindImpressionLabel
		if present(ll.Item) {
			rp.kind = kindLabel
			c.Labels++
			if rp.dropped[id] {
				c.LabelsDropped++
				return msg, at, false
			}
		} else {
			c.ImpressionLabels++
		}
		if !hasKey {
			// A label's key is its request's or impression's when it has
			// none of its own (the service's producers key it so).
			if valueKey {
				msg.Key = []byte(key)
			} else if k, ok := rp.keys[id]; ok {
				msg.Key = []byte(k)
			}
		}
	default:
		rp.kind = kindEvent
		if !hasKey && valueKey {
			msg.Key = []byte(key)
		}
		if hasID && !present(ll.Label) && len(msg.Key) > 0 {
			rp.keys[id] = string(msg.Key)
		}
	}
	return msg, at, true
}

// fed counts the line fed (rejected: the engine refused it).
func (rp *replay) fed(rejected bool) {
	c := &rp.rep.Counts
	switch {
	case rejected:
		// Counted by the sink's reasons; not an event, request or label.
		switch rp.kind {
		case kindRequest:
			c.Requests--
		case kindLabel:
			c.Labels--
		case kindImpressionLabel:
			c.ImpressionLabels--
		}
	case rp.kind == kindRequest:
		c.RequestsLogged++
	case rp.kind == kindEvent:
		c.Events++
	}
}

// skip counts a line skipped before the engine saw it.
func (rp *replay) skip(reason, detail string) {
	rp.rep.Skipped[reason]++
	if rp.rep.FirstSkipped == "" {
		rp.rep.FirstSkipped = detail
	}
}

// readResponses reads the response topic's ranking responses: per request
// id, the last response's first item and propensity; and the responses
// by the model that ranked them.
func readResponses(path string, c *LogCounts) (map[string]logged, map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("eval: --responses: %w", err)
	}
	defer f.Close()
	out := map[string]logged{}
	byModel := map[string]int64{}
	r := bufio.NewReaderSize(f, 256<<10)
	var line []byte
	var resp struct {
		ID     *string `json:"id"`
		Model  string  `json:"model"`
		Ranked []struct {
			Item       json.RawMessage `json:"item"`
			Propensity json.RawMessage `json:"propensity"`
		} `json:"ranked"`
	}
	for {
		line, err = readLine(r, line[:0])
		if err != nil && err != io.EOF {
			return nil, nil, fmt.Errorf("eval: --responses: %w", err)
		}
		if v := bytes.TrimSpace(line); len(v) > 0 {
			// keyed and timed dumps: the value is after the last tab
			// (JSON escapes the tabs of its strings).
			if i := bytes.LastIndexByte(v, '\t'); i >= 0 {
				v = v[i+1:]
			}
			c.ResponseLines++
			resp.ID, resp.Model, resp.Ranked = nil, "", resp.Ranked[:0]
			if json.Unmarshal(v, &resp) != nil || resp.ID == nil || len(resp.Ranked) == 0 {
				c.ResponsesIgnored++ // a score record, or not a response
			} else if lg, ok := loggedOf(resp.Ranked[0].Item, resp.Ranked[0].Propensity); !ok {
				c.ResponsesIgnored++
			} else {
				c.Responses++
				if _, dup := out[*resp.ID]; dup {
					c.ResponsesRepeat++
				}
				out[*resp.ID] = lg
				byModel[resp.Model]++
			}
		}
		if err == io.EOF {
			break
		}
	}
	return out, byModel, nil
}

// loggedOf is a response's first item (a JSON string) and propensity (a
// number in (0, 1]), or false.
func loggedOf(item, prop json.RawMessage) (logged, bool) {
	name, ok := jsonString(item)
	p, err := strconv.ParseFloat(string(prop), 64)
	if !ok || err != nil || !(p > 0 && p <= 1) {
		return logged{}, false
	}
	return logged{item: slices.Clone(item), prop: slices.Clone(prop), name: name}, true
}

// isCandidate reports whether item is one of a request's candidates.
func isCandidate(cands json.RawMessage, item string) bool {
	var cs []struct {
		Item *string `json:"item"`
	}
	if json.Unmarshal(cands, &cs) != nil {
		return false
	}
	return slices.ContainsFunc(cs, func(c struct {
		Item *string `json:"item"`
	}) bool {
		return c.Item != nil && *c.Item == item
	})
}

// jsonString is r as a JSON string's value, or false.
func jsonString(r json.RawMessage) (string, bool) {
	if len(r) == 0 || r[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		return "", false
	}
	return s, true
}

// readLine appends the next line of r to buf, without its line end.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		buf = bytes.TrimRight(buf, "\r\n")
		return buf, err
	}
}

// labelOutcomes are streamer_labels_total's joined, unknown_id and
// too_late.
func labelOutcomes(reg *prometheus.Registry) (joined, unknown, late int64) {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "streamer_labels_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := int64(m.GetCounter().GetValue())
			for _, l := range m.GetLabel() {
				if l.GetName() != "outcome" {
					continue
				}
				switch l.GetValue() {
				case "joined":
					joined = v
				case "unknown_id":
					unknown = v
				case "too_late":
					late = v
				}
			}
		}
	}
	return
}

// reasonList is "reason n, …", sorted.
func reasonList(m map[string]int64) string {
	out := make([]string, 0, len(m))
	for r, n := range m {
		out = append(out, fmt.Sprintf("%s %d", r, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// replaySink discards the engine's records, counting its dead letters
// (the lines it refused) by reason.
type replaySink struct {
	dlq      string
	buf      []byte
	rejected int64
	reasons  map[string]int64
	first    string
}

func (s *replaySink) Buffer() []byte { return s.buf[:0] }

func (s *replaySink) Publish(m kafka.Message) {
	if m.Topic != s.dlq {
		if cap(m.Value) > cap(s.buf) {
			s.buf = m.Value[:0] // a buffer of ours (Buffer), grown
		}
		return
	}
	reason, detail, offset := engine.DeadLetterHeader(&m, engine.HeaderReason), engine.DeadLetterHeader(&m, engine.HeaderDetail), engine.DeadLetterHeader(&m, engine.HeaderOffset)
	if s.reasons == nil {
		s.reasons = map[string]int64{}
	}
	s.rejected++
	s.reasons[reason]++
	if s.first == "" {
		n, _ := strconv.ParseInt(offset, 10, 64)
		s.first = fmt.Sprintf("line %d: %s: %s", n+1, reason, detail)
	}
}

// logHandler keeps the engine's warnings (at most maxWarnings).
type logHandler struct {
	mu       sync.Mutex
	warnings []string
	more     int
}

const maxWarnings = 20

func (h *logHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *logHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logHandler) WithGroup(string) slog.Handler                { return h }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Level < slog.LevelWarn {
		return nil
	}
	if len(h.warnings) >= maxWarnings {
		h.more++
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.warnings = append(h.warnings, "engine: "+b.String())
	return nil
}

// jnum is a float64 that encodes NaN and infinities as null.
type jnum float64

func (n jnum) MarshalJSON() ([]byte, error) {
	if f := float64(n); math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(n))
}

// opeJSON is ope.json's "ope": the engine's report.
type opeJSON struct {
	Labels     int64           `json:"labels"`
	Champion   string          `json:"champion"`
	Challenger string          `json:"challenger,omitempty"`
	Logged     jnum            `json:"logged"`
	Agreement  jnum            `json:"agreement"`
	Estimates  []estimateJSON  `json:"estimates"`
	Difference *differenceJSON `json:"difference,omitempty"`
}

type estimateJSON struct {
	Policy    string `json:"policy"`
	Estimator string `json:"estimator"`
	Value     jnum   `json:"value"`
	Lower     jnum   `json:"lower"`
	Upper     jnum   `json:"upper"`
}

type differenceJSON struct {
	Estimator  string  `json:"estimator"`
	Mean       jnum    `json:"mean"`
	Lower      jnum    `json:"lower"`
	Upper      jnum    `json:"upper"`
	Confidence float64 `json:"confidence"`
	Ahead      int64   `json:"ahead"`
	Hold       int64   `json:"hold"`
}

// MarshalJSON is ope.json: the report with the engine's estimates under
// "ope".
func (r *LogReport) MarshalJSON() ([]byte, error) {
	type plain LogReport
	o := r.OPE
	j := opeJSON{Labels: o.Labels, Champion: o.Champion, Challenger: o.Challenger, Logged: jnum(o.Logged), Agreement: jnum(o.Agreement),
		Estimates: []estimateJSON{}}
	for _, est := range o.Estimates {
		j.Estimates = append(j.Estimates, estimateJSON{Policy: est.Policy, Estimator: est.Estimator,
			Value: jnum(est.Value), Lower: jnum(est.Lower), Upper: jnum(est.Upper)})
	}
	if d := o.Difference; d != nil {
		j.Difference = &differenceJSON{Estimator: d.Estimator, Mean: jnum(d.Mean), Lower: jnum(d.Lower), Upper: jnum(d.Upper),
			Confidence: d.Confidence, Ahead: d.Ahead, Hold: d.Hold}
	}
	return json.Marshal(struct {
		*plain
		OPE opeJSON `json:"ope"`
	}{(*plain)(r), j})
}

// MarshalJSON writes a LogWins' NaNs (an attribute the engine did not
// log) as null.
func (w LogWins) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Challenger string `json:"challenger"`
		Samples    jnum   `json:"samples"`
		Difference jnum   `json:"difference"`
		Lower      jnum   `json:"lower"`
	}{w.Challenger, jnum(w.Samples), jnum(w.Difference), jnum(w.Lower)})
}

// WriteDir writes dir/ope.json (dir is made if missing).
func (r *LogReport) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, OPEJSON), append(b, '\n'), 0o644)
}

// WriteSummary prints the replay's counts, a table of the estimates
// (policy × estimator: value and interval) and, with a challenger, its
// difference to the champion.
func (r *LogReport) WriteSummary(w io.Writer) error {
	c := &r.Counts
	o := &r.OPE
	var b bytes.Buffer
	fmt.Fprintf(&b, "log %s: %d lines: %d events, %d ranking requests (%d replayed with their logged decision, %d without a response, %d whose logged item is no candidate), %d labels of shown items (%d of requests not replayed), %d labels of events, %d skipped\n",
		r.Log, c.Lines, c.Events, c.Requests, c.RequestsLogged, c.RequestsNoResponse, c.RequestsNotCandidate, c.Labels, c.LabelsDropped, c.ImpressionLabels, c.Skipped)
	fmt.Fprintf(&b, "labels joined %d, unknown id %d, too late %d; ranking responses %d (ids answered again: %d, the last answer kept)", c.LabelsJoined, c.LabelsUnknown, c.LabelsLate, c.Responses, c.ResponsesRepeat)
	if len(r.LoggedBy) > 0 {
		names := make([]string, 0, len(r.LoggedBy))
		for m := range r.LoggedBy {
			names = append(names, m)
		}
		slices.Sort(names)
		b.WriteString("; logged by")
		for i, m := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s %d", m, r.LoggedBy[m])
		}
	}
	b.WriteByte('\n')
	fmt.Fprintf(&b, "champion %s", o.Champion)
	if o.Challenger != "" {
		fmt.Fprintf(&b, ", challenger %s", o.Challenger)
	}
	fmt.Fprintf(&b, ": %d labelled first items, logged mean reward %s, greedy agreement %s\n\n", o.Labels, fmtNum(o.Logged), fmtNum(o.Agreement))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tmodel\testimator\tvalue\t95% interval\t")
	for _, est := range o.Estimates {
		model := o.Champion
		if est.Policy == "challenger" {
			model = o.Challenger
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t[%s, %s]\t\n", est.Policy, model, est.Estimator, fmtNum(est.Value), fmtNum(est.Lower), fmtNum(est.Upper))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d := o.Difference; d != nil {
		verdict := "its lower bound is not above 0"
		if d.Lower > 0 {
			verdict = "its lower bound is above 0: the challenger is better"
		}
		fmt.Fprintf(&b, "\nchallenger − champion (%s − %s, %s, over %d labelled first items): %s; %g%% confidence sequence: [%s, %s]: %s\n",
			o.Challenger, o.Champion, d.Estimator, o.Samples, fmtSigned(d.Mean), 100*d.Confidence, fmtSigned(d.Lower), fmtSigned(d.Upper), verdict)
		fmt.Fprintf(&b, "promote %s (configured): replayed as manual, %s ranked throughout; ", r.Promote, o.Champion)
		verb := "would have been reported winning"
		if r.Promote == engine.PromoteAuto {
			verb = "would have been promoted"
		}
		if wn := r.Wins; wn != nil {
			fmt.Fprintf(&b, "the challenger %s after %.0f labelled first items (difference %s, lower bound %s, held %d)\n", verb, wn.Samples, fmtSigned(wn.Difference), fmtSigned(wn.Lower), d.Hold)
		} else {
			fmt.Fprintf(&b, "the challenger's lower bound never stayed above 0 for %d labelled first items (rank.challenger.hold): no promotion\n", d.Hold)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// fmtNum is v with 4 decimals, "—" for NaN.
func fmtNum(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// fmtSigned is v with its sign and 4 decimals, "—" for NaN.
func fmtSigned(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%+.4f", v)
}
