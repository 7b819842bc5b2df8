package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/configs"
)

// TestDemoRecommendScreen: `streamer demo recommend` shows ranked lists
// and the ratings they got within 10 s of its first screen, and what it
// serves beats a random order of the same candidates.
func TestDemoRecommendScreen(t *testing.T) {
	out := &stampedWriter{}
	root := newRoot()
	root.SetOut(out)
	root.SetErr(os.Stderr)
	root.SetArgs([]string{"demo", "recommend", "--duration", "20s", "--listen", "127.0.0.1:0", "--broker-listen", "127.0.0.1:0"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	frames := out.frames("streamer demo recommend —")
	if len(frames) < 15 {
		t.Fatalf("%d screens in 20 s, want one a second:\n%s", len(frames), out.text())
	}
	rated := regexp.MustCompile(`(?m)^\s+1\. m\d+ .*\d\.\d\d \[\d\.\d\d, \d\.\d\d\]  p [01]\.\d{3}  → \d\.\d$`)
	first := -1
	for i, f := range frames {
		if rated.MatchString(f.text) {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("no screen shows a ranked list with its ratings:\n%s", frames[len(frames)-1].text)
	}
	if d := frames[first].at.Sub(frames[0].at); d > 10*time.Second {
		t.Errorf("the first ranked list with its ratings came %v after the first screen, want ≤ 10 s", d)
	}
	t.Logf("ranked lists with their ratings %v after the first screen", frames[first].at.Sub(frames[0].at).Round(time.Millisecond))
	last := frames[len(frames)-2].text // the last one before the stop
	m := regexp.MustCompile(`served \(rating, epsilon 0.05\)  (\d\.\d\d)   random order (\d\.\d\d)   best order (\d\.\d\d)`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("no mean true ratings on the screen:\n%s", last)
	}
	served, random, best := atof(t, m[1]), atof(t, m[2]), atof(t, m[3])
	if !(served > random+0.3 && best >= served) {
		t.Errorf("served %.2f, random order %.2f, best %.2f: want served > random + 0.3 and ≤ best", served, random, best)
	}
	for _, want := range []string{"errors 0", "unknown_id 0  too_late 0", "off-policy (service, first items' ratings, n ",
		"RMSE (last 1000 ratings): rating ", "liked (rating >= 4): accuracy ", "curl -s localhost:", "--data @examples/rank-request.json"} {
		if !strings.Contains(last, want) {
			t.Errorf("the screen lacks %q:\n%s", want, last)
		}
	}
	if !strings.Contains(out.text(), "demo recommend stopped cleanly") {
		t.Errorf("no clean stop:\n%s", out.text())
	}
	t.Logf("last screen:\n%s", last)
}

// TestDemoRateZero: `streamer demo --rate 0` produces nothing (it used to
// produce about 50 events/s); the screen still runs.
func TestDemoRateZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := runDemo(ctx, demoOptions{rate: 0, listen: "127.0.0.1:0", brokerListen: "127.0.0.1:0"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "the demo produces nothing (--rate 0)") || !strings.Contains(s, "events consumed 0 ") {
		t.Fatalf("with --rate 0 the screen should say the demo produces nothing, and nothing be consumed:\n%s", s)
	}
	root := newRoot()
	root.SetOut(io.Discard)
	root.SetArgs([]string{"demo", "--rate", "-1"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--rate -1") {
		t.Errorf("--rate -1: %v, want an error naming it", err)
	}
}

// TestReadmeRecommendations runs the README's "Recommendations"
// walk-through against the demo binary, command by command as the README
// writes them (kcat's producer and consumer done with kafka-go, curl with
// net/http, on the demo's actual addresses), and checks every output the
// README shows, the examples/ files and the label's join.
func TestReadmeRecommendations(t *testing.T) {
	blocks := readmeBlocks(t, "../../README.md", "## Recommendations")
	raw, err := configs.FS.ReadFile(recConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw, nil, newModelTypes())
	if err != nil {
		t.Fatal(err)
	}
	world := newRecWorld(recSeed)
	// The screen's commands to join in are the README's.
	var readme []string
	for _, b := range blocks {
		if b.lang == "sh" && !reGoRun.MatchString(b.lines[0]) {
			readme = append(readme, b.lines...)
		}
	}
	if screen := joinInCommands(world, cfg, "127.0.0.1:9092", "127.0.0.1:9464"); !slices.Equal(screen, readme) {
		t.Errorf("the demo's screen says to join in with\n%s\nthe README with\n%s", strings.Join(screen, "\n"), strings.Join(readme, "\n"))
	}
	d := &readmeDemo{t: t, cfg: cfg, world: world}
	defer d.stop()
	commands := runReadme(t, blocks, d.run)
	if d.cmd == nil || !d.ranked || !d.scored || d.labelled == 0 {
		t.Fatalf("the walk-through lacks a step: demo started %v, ranking %v, scores read %v, labels %d", d.cmd != nil, d.ranked, d.scored, d.labelled)
	}
	// Every label the walk-through sent joined its shown item.
	unknown, late := d.metric("streamer_labels_total", `outcome="unknown_id"`), d.metric("streamer_labels_total", `outcome="too_late"`)
	if unknown != 0 || late != 0 {
		t.Errorf("labels: unknown_id %v, too_late %v, want 0", unknown, late)
	}
	if n := d.metric("streamer_events_rejected_total", ""); n != 0 {
		t.Errorf("%v events dead-lettered", n)
	}
	t.Logf("%d README commands run", commands)
}

// runReadme runs the sh blocks of a README section line by line with run,
// and checks that what a block's lines print is what the text block after
// it shows (documentedPattern); it returns the number of lines run.
func runReadme(t *testing.T, blocks []readmeBlock, run func(line string) []string) int {
	t.Helper()
	commands := 0
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		if b.lang != "sh" {
			t.Fatalf("README block %d (%s) follows no sh block:\n%s", i, b.lang, strings.Join(b.lines, "\n"))
		}
		var out []string
		for _, line := range b.lines {
			commands++
			out = append(out, run(line)...)
		}
		if len(out) == 0 {
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1].lang != "text" {
			t.Fatalf("README: the commands\n%s\nprint %d lines, but no text block shows them", strings.Join(b.lines, "\n"), len(out))
		}
		i++
		want := blocks[i].lines
		if len(want) != len(out) {
			t.Errorf("README: %s\nprints %d lines, the README shows %d:\n%s", strings.Join(b.lines, "\n"), len(out), len(want), strings.Join(out, "\n"))
			continue
		}
		for j, w := range want {
			if !documentedPattern(w).MatchString(out[j]) {
				t.Errorf("README: %s\nprints\n  %s\nthe README shows\n  %s", strings.Join(b.lines, "\n"), out[j], w)
			}
		}
	}
	return commands
}

// readmeDemo runs the README's commands against a demo it starts.
type readmeDemo struct {
	t      *testing.T
	cfg    config.Config
	world  *recWorld
	cmd    *exec.Cmd
	done   chan error
	out    *stampedWriter
	broker string // the demo's actual addresses
	http   string
	// what the walk-through did
	produced map[string]int64 // end offsets after our records, by topic
	rankReq  []byte
	ranked   bool
	scored   bool
	labelled int
}

var (
	reGoRun    = regexp.MustCompile(`^go run \./cmd/streamer (demo recommend[^#]*?)\s*(#.*)?$`)
	reProduce  = regexp.MustCompile(`^echo '([^']*)' \| kcat -P -b 127\.0\.0\.1:9092 -t (\S+) -k (\S+)$`)
	reConsume  = regexp.MustCompile(`^kcat -C -u -b 127\.0\.0\.1:9092 -t (\S+) -o beginning -q \| grep -m(\d+) '([^']*)'$`)
	rePost     = regexp.MustCompile(`^curl -s localhost:9464(/\S+) --data @(\S+)$`)
	reGetGrep  = regexp.MustCompile(`^curl -s localhost:9464(/\S+) \| grep (-E |-o )?'([^']*)'$`)
	reAddrLine = regexp.MustCompile(`(?m)^broker (\S+)  topics .*\nhttp://(\S+)  POST /v1/rank`)
)

// run runs one README command line and returns what it prints.
func (d *readmeDemo) run(line string) []string {
	t := d.t
	t.Helper()
	if m := reGoRun.FindStringSubmatch(line); m != nil {
		d.start(strings.Fields(m[1]))
		return nil
	}
	if d.cmd == nil {
		t.Fatalf("README: %q before the demo is started", line)
	}
	switch {
	case reProduce.MatchString(line):
		m := reProduce.FindStringSubmatch(line)
		d.produce(m[2], m[3], m[1])
		return nil
	case reConsume.MatchString(line):
		m := reConsume.FindStringSubmatch(line)
		n, _ := strconv.Atoi(m[2])
		return d.consume(m[1], n, m[3])
	case rePost.MatchString(line):
		m := rePost.FindStringSubmatch(line)
		return d.post(m[1], filepath.Join("../..", m[2]))
	case reGetGrep.MatchString(line):
		m := reGetGrep.FindStringSubmatch(line)
		return d.getGrep(m[1], m[3], m[2] == "-o ")
	}
	t.Fatalf("README: a command the test cannot run (write it as the others are): %q", line)
	return nil
}

func (d *readmeDemo) start(args []string) {
	t := d.t
	bin := streamerBinary(t)
	args = append(args, "--listen", freeAddr(t), "--broker-listen", freeAddr(t), "--duration", "3m")
	d.cmd = exec.Command(bin, args...)
	d.out = &stampedWriter{}
	d.cmd.Stdout = d.out
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	// As a reader would: once the screen shows the service ready, its first
	// ratings learned and the liked model calibrated.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		frames := d.out.frames("streamer demo recommend —")
		if len(frames) > 0 {
			f := frames[len(frames)-1].text
			m := reAddrLine.FindStringSubmatch(f)
			c := regexp.MustCompile(`events consumed (\d+) `).FindStringSubmatch(f)
			if m != nil && c != nil && strings.Contains(f, "ready=true") && atof(t, c[1]) >= recWarmup &&
				!strings.Contains(f, "not yet (from the 100th rating)") {
				d.broker, d.http = m[1], m[2]
				t.Logf("demo recommend: broker %s, http %s", d.broker, d.http)
				return
			}
		}
		select {
		case err := <-d.done:
			t.Fatalf("the demo exited: %v\n%s", err, d.out.text())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("the demo shows no ready service with its first %d ratings learned within 30 s:\n%s", recWarmup, d.out.tail(60))
}

func (d *readmeDemo) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Errorf("the demo exited with %v after SIGINT", err)
		} else if !strings.Contains(d.out.text(), "demo recommend stopped cleanly") {
			d.t.Errorf("the demo did not stop cleanly:\n%s", d.out.tail(40))
		}
	case <-time.After(40 * time.Second):
		_ = d.cmd.Process.Kill()
		d.t.Errorf("the demo did not stop within 40 s of SIGINT")
	}
}

// produce is kcat -P: the record with the key.
func (d *readmeDemo) produce(topic, key, value string) {
	t := d.t
	if !json.Valid([]byte(value)) {
		t.Fatalf("README: the record %s is not JSON", value)
	}
	d.checkItems([]byte(value))
	var label struct {
		ID, Item string
		Label    *float64
	}
	_ = json.Unmarshal([]byte(value), &label)
	if label.Item != "" {
		// A label for an item the walk-through's request showed.
		var req struct{ ID, Key string }
		if err := json.Unmarshal(d.rankReq, &req); err != nil || label.ID != req.ID || key != req.Key {
			t.Fatalf("README: the label %s (key %s) is not for the request sent before (%s)", value, key, d.rankReq)
		}
		d.labelled++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(d.broker), Topic: topic, Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: []byte(value)}); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
	if d.produced == nil {
		d.produced = map[string]int64{}
	}
	d.produced[topic] = d.endOffset(topic)
}

// checkItems: the items the README names have the demo's genres.
func (d *readmeDemo) checkItems(body []byte) {
	type itemFeatures struct {
		Item struct {
			ID     string   `json:"id"`
			Genres []string `json:"genres"`
		} `json:"item"`
	}
	var v struct {
		Features   itemFeatures `json:"features"`
		Candidates []struct {
			Item     string       `json:"item"`
			Features itemFeatures `json:"features"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		d.t.Fatal(err)
	}
	check := func(id string, genres []string) {
		i := itemIndex(id)
		if i < 0 {
			d.t.Errorf("README: item %q is not in the demo's catalogue", id)
			return
		}
		if !slices.Equal(genres, d.world.items[i].genres) {
			d.t.Errorf("README: item %s has genres %v, the demo's %v", id, genres, d.world.items[i].genres)
		}
	}
	if it := v.Features.Item; it.ID != "" {
		check(it.ID, it.Genres)
	}
	for _, c := range v.Candidates {
		if c.Features.Item.ID == "" { // by id: its namespace is the service's (profiles)
			if itemIndex(c.Item) < 0 {
				d.t.Errorf("README: item %q is not in the demo's catalogue", c.Item)
			}
			continue
		}
		if c.Item != c.Features.Item.ID {
			d.t.Errorf("README: candidate %s has the features of item %s", c.Item, c.Features.Item.ID)
		}
		check(c.Features.Item.ID, c.Features.Item.Genres)
	}
}

func (d *readmeDemo) endOffset(topic string) int64 {
	conn, err := kafka.DialLeader(context.Background(), "tcp", d.broker, topic, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topic)
	if err != nil || len(parts) != 1 {
		d.t.Fatalf("topic %s: %d partitions (%v), want the demo's 1", topic, len(parts), err)
	}
	off, err := conn.ReadLastOffset()
	if err != nil {
		d.t.Fatal(err)
	}
	return off
}

// consume is kcat -C -o beginning | grep -m n: the first n records holding
// the pattern (a fixed string in the README).
func (d *readmeDemo) consume(topic string, n int, pattern string) []string {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{d.broker}, Topic: topic, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var out []string
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("reading %s for %s: %v (found %d of %d)", topic, pattern, err, len(out), n)
		}
		if bytes.Contains(m.Value, []byte(pattern)) {
			out = append(out, string(m.Value))
		}
	}
	if topic == d.cfg.Kafka.OutputTopic {
		// One score record per model, in the configuration's order.
		for i, s := range out {
			var rec struct{ Model string }
			_ = json.Unmarshal([]byte(s), &rec)
			if i >= len(d.cfg.Models) || rec.Model != d.cfg.Models[i].Name {
				t.Errorf("score record %d is of model %q, want the config's models in order", i, rec.Model)
			}
		}
		d.scored = len(out) == len(d.cfg.Models)
	}
	return out
}

// post is curl --data @file.
func (d *readmeDemo) post(path, file string) []string {
	t := d.t
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// curl --data drops the file's newlines.
	body = bytes.ReplaceAll(bytes.ReplaceAll(body, []byte("\r"), nil), []byte("\n"), nil)
	d.checkItems(body)
	resp, err := http.Post("http://"+d.http+path, "application/x-www-form-urlencoded", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s: %d %s", path, file, resp.StatusCode, answer)
	}
	if path == "/v1/rank" {
		d.checkRanking(body, answer)
		d.rankReq, d.ranked = body, true
	}
	return strings.Split(strings.TrimRight(string(answer), "\n"), "\n")
}

// checkRanking: k items of the candidates, each with a score and a
// propensity, for the request's id and key.
func (d *readmeDemo) checkRanking(req, answer []byte) {
	t := d.t
	var q struct {
		ID, Key    string
		K          int
		Candidates []struct{ Item string }
	}
	if err := json.Unmarshal(req, &q); err != nil {
		t.Fatal(err)
	}
	var a struct {
		ID, Key, Model string
		Ranked         []struct {
			Item       string
			Score      *float64
			Propensity *float64
		}
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		t.Fatalf("the ranking %s: %v", answer, err)
	}
	if a.ID != q.ID || a.Key != q.Key || a.Model != d.cfg.Rank.Model {
		t.Errorf("ranking %s for request id %q key %q, model %q", answer, q.ID, q.Key, d.cfg.Rank.Model)
	}
	if q.K == 0 || len(a.Ranked) != q.K {
		t.Errorf("ranking of %d items, the request asks k %d", len(a.Ranked), q.K)
	}
	seen := map[string]bool{}
	for _, it := range a.Ranked {
		if seen[it.Item] || !slices.ContainsFunc(q.Candidates, func(c struct{ Item string }) bool { return c.Item == it.Item }) {
			t.Errorf("ranked item %q repeated or not a candidate", it.Item)
		}
		seen[it.Item] = true
		if it.Score == nil || math.IsNaN(*it.Score) || it.Propensity == nil || *it.Propensity <= 0 || *it.Propensity > 1 {
			t.Errorf("ranked item %s: score %v, propensity %v", it.Item, it.Score, it.Propensity)
		}
	}
}

// getGrep is curl | grep: the lines of the answer the regular expression
// matches, once the service has consumed every record the walk-through
// produced (so that a metric counts them).
func (d *readmeDemo) getGrep(path, expr string, only bool) []string {
	t := d.t
	re, err := regexp.Compile(expr)
	if err != nil {
		t.Fatalf("README: grep %q: %v", expr, err)
	}
	if path == "/metrics" {
		want := d.produced[d.cfg.Kafka.InputTopic]
		deadline := time.Now().Add(20 * time.Second)
		for d.metric("streamer_events_consumed_total", "") < float64(want) {
			if time.Now().After(deadline) {
				t.Fatalf("the service has not consumed the %d records of %s within 20 s", want, d.cfg.Kafka.InputTopic)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var out []string
	for _, l := range strings.Split(d.get(path), "\n") {
		switch {
		case only: // grep -o: each match
			out = append(out, re.FindAllString(l, -1)...)
		case re.MatchString(l):
			out = append(out, l)
		}
	}
	return out
}

func (d *readmeDemo) get(path string) string {
	resp, err := http.Get("http://" + d.http + path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metric is the value of the series of name whose labels contain labels
// (e.g. `outcome="joined"`), summed.
func (d *readmeDemo) metric(name, labels string) float64 {
	var sum float64
	for _, l := range strings.Split(d.get("/metrics"), "\n") {
		series, value, ok := strings.Cut(l, " ")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		n, lbl, _ := strings.Cut(series, "{")
		if n != name || !strings.Contains(lbl, labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// documentedPattern is the regular expression of an output line as the
// README shows it: text as written, except "…" (anything: an abridged part
// or a value that varies) and numbers outside strings (any number, or
// null: values vary from run to run).
func documentedPattern(line string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	inStr := false
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRuneInString(line[i:])
		switch {
		case r == '…':
			b.WriteString(".*?")
		case r == '"':
			inStr = !inStr
			b.WriteByte('"')
		case !inStr && (r >= '0' && r <= '9' || r == '-' && i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '9') &&
			(i == 0 || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.", rune(line[i-1]))):
			j := i + 1
			for j < len(line) && strings.ContainsRune("0123456789.eE+-", rune(line[j])) {
				j++
			}
			b.WriteString(`(?:-?[0-9][0-9.eE+-]*|null)`)
			size = j - i
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
		i += size
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func TestDocumentedPattern(t *testing.T) {
	for _, c := range []struct {
		doc, out string
		ok       bool
	}{
		{`streamer_labels_total{outcome="joined"} 1467`, `streamer_labels_total{outcome="joined"} 3`, true},
		{`streamer_labels_total{outcome="joined"} 1467`, `streamer_labels_total{outcome="unknown_id"} 3`, false},
		{`streamer_ope_ci95 0.1`, `streamer_ope_ci95 0.25`, true},
		{`{"id":"my-1","score":-0.23,"x":{…},"at":"…"}`, `{"id":"my-1","score":1.5e-05,"x":{"a":1},"at":"2026"}`, true},
		{`{"id":"my-1","score":-0.23}`, `{"id":"my-2","score":1}`, false},
		{`{"item":"m…","n":5}`, `{"item":"m101","n":null}`, true},
	} {
		if got := documentedPattern(c.doc).MatchString(c.out); got != c.ok {
			t.Errorf("%s against %s: %v, want %v", c.doc, c.out, got, c.ok)
		}
	}
}

type readmeBlock struct {
	lang  string
	lines []string // without comments and blank lines for sh; continuation lines joined
}

// readmeBlocks returns the fenced code blocks of a README section.
func readmeBlocks(t *testing.T, path, heading string) []readmeBlock {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s: no section %q", path, heading)
	}
	s = s[i+1+len(heading):]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var blocks []readmeBlock
	var cur *readmeBlock
	cont := ""
	for _, line := range strings.Split(s, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil && cur.lang == "sh":
			if l := strings.TrimSpace(line); l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			if strings.HasSuffix(line, `\`) {
				cont += strings.TrimSuffix(line, `\`)
				continue
			}
			cur.lines = append(cur.lines, strings.Join(strings.Fields(cont+line), " "))
			cont = ""
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no code in section %q", path, heading)
	}
	return blocks
}

// streamerBinary is $E2E_STREAMER_BINARY (a streamer built from this
// tree), or one built into the test's directory.
func streamerBinary(t *testing.T) string {
	if bin := os.Getenv("E2E_STREAMER_BINARY"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "streamer")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func atof(t *testing.T, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// stampedWriter keeps what is written with the time of each write.
type stampedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []stampedWrite
}

type stampedWrite struct {
	at  time.Time
	off int
}

type frame struct {
	at   time.Time
	text string
}

func (w *stampedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, stampedWrite{time.Now(), w.buf.Len()})
	return w.buf.Write(p)
}

func (w *stampedWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *stampedWriter) tail(lines int) string {
	l := strings.Split(w.text(), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// frames splits the output into screens, each starting with header, with
// the time its first byte was written.
func (w *stampedWriter) frames(header string) []frame {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.buf.String()
	var out []frame
	for off := 0; ; {
		i := strings.Index(s[off:], header)
		if i < 0 {
			break
		}
		start := off + i
		end := len(s)
		if j := strings.Index(s[start+len(header):], header); j >= 0 {
			end = start + len(header) + j
		}
		at := time.Time{}
		for _, wr := range w.writes {
			if wr.off <= start {
				at = wr.at
			}
		}
		out = append(out, frame{at, s[start:end]})
		off = end
	}
	return out
}
