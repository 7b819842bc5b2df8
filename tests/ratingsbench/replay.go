package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"gopkg.in/yaml.v3"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/tests/internal/ratings"
)

// serviceConfig is what the bench reads of the service's configuration:
// the topics to create on the embedded broker, the models (one score
// record each per event) and the rank model.
type serviceConfig struct {
	Kafka struct {
		Group       string `yaml:"group"`
		InputTopic  string `yaml:"input_topic"`
		OutputTopic string `yaml:"output_topic"`
		DLQTopic    string `yaml:"dlq_topic"`
	} `yaml:"kafka"`
	Rank struct {
		Model         string `yaml:"model"`
		ResponseTopic string `yaml:"response_topic"`
	} `yaml:"rank"`
	Models []struct {
		Name  string `yaml:"name"`
		Label struct {
			Positive string `yaml:"positive"`
		} `yaml:"label"`
	} `yaml:"models"`
}

// likedAt returns x of the first model whose label.positive is ">= x"
// (the rating a classifier calls liked), or def when none is.
func (c serviceConfig) likedAt(def float64) float64 {
	for _, m := range c.Models {
		s := strings.TrimSpace(m.Label.Positive)
		if rest, ok := strings.CutPrefix(s, ">="); ok {
			if x, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil && !math.IsNaN(x) && !math.IsInf(x, 0) {
				return x
			}
		}
	}
	return def
}

// readServiceConfig reads the keys of serviceConfig from the YAML file at
// path, with the service's defaults for those it does not set. The file is
// validated by the service itself when it starts.
func readServiceConfig(path string) (serviceConfig, error) {
	var c serviceConfig
	def := config.Default()
	c.Kafka.Group, c.Kafka.InputTopic, c.Kafka.OutputTopic, c.Kafka.DLQTopic = def.Kafka.Group, def.Kafka.InputTopic, def.Kafka.OutputTopic, def.Kafka.DLQTopic
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if len(c.Models) == 0 {
		return c, fmt.Errorf("%s: no models", path)
	}
	return c, nil
}

func (c serviceConfig) modelNames() []string {
	var out []string
	for _, m := range c.Models {
		out = append(out, m.Name)
	}
	return out
}

// replay is one run: a fresh embedded broker and a fresh service over the
// whole stream.
type replay struct {
	configPath string
	cfg        serviceConfig
	binary     string
	partitions int
	env        []string         // STREAMER_* overrides besides the broker, listen address and snapshot directory
	rs         []ratings.Rating // the ratings, in stream order: event i is rs[i]
	keys, vals [][]byte         // the events encoded beforehand (throughput runs), or nil: encoded as produced
	requests   []ratings.Request
	genres     ratings.Genres
	stall      time.Duration // fail when no record comes for this long
	progress   func(string)
	verbose    bool          // the service's log to stderr
	collect    bool          // decode every record (else read only the ids)
	backlog    int           // with collect, events produced ahead of those scored, at most
	trimEvery  time.Duration // how often consumed records are deleted from the broker (0: every 500 ms)
}

// replayResult is what a replay observed.
type replayResult struct {
	col         *ratings.Collector
	records     int
	dead        int
	deadReasons map[string]int
	elapsed     time.Duration // from the first event produced to the last record consumed
	cpu         time.Duration // the service's user + system CPU time
	served      [][]string    // per request, the items in the order served (nil: failed)
	servedBy    string        // the model named in the responses
	rankErrors  []string
	latency     []time.Duration // per request answered, client side
	trimmed     int64           // records deleted from the broker's log as they were consumed
}

// run runs the replay.
func (r *replay) run(ctx context.Context) (res *replayResult, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	topics := []stream.TopicSpec{{Name: r.cfg.Kafka.InputTopic, Partitions: r.partitions},
		{Name: r.cfg.Kafka.OutputTopic, Partitions: r.partitions}, {Name: r.cfg.Kafka.DLQTopic, Partitions: 1}}
	if t := r.cfg.Rank.ResponseTopic; t != "" && t != r.cfg.Kafka.OutputTopic {
		topics = append(topics, stream.TopicSpec{Name: t, Partitions: r.partitions})
	}
	b, err := stream.StartBroker(0, topics...)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	// The broker keeps every record in memory: in segments of segmentBytes,
	// each freed once trim has deleted all its records.
	for _, topic := range []string{r.cfg.Kafka.InputTopic, r.cfg.Kafka.OutputTopic} {
		if err := b.SetTopicConfig(ctx, topic, "segment.bytes", strconv.Itoa(segmentBytes)); err != nil {
			return nil, err
		}
	}

	svc, err := r.startService(ctx, b)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := svc.stop(); serr != nil && err == nil {
			err = serr
		}
		if res != nil {
			res.cpu = svc.cpu
		}
		if err != nil {
			err = fmt.Errorf("%w\nthe service's log ends with:\n%s", err, svc.logTail())
		}
	}()

	t := newTracker(len(r.rs), len(r.cfg.Models), r.partitions, r.collect)
	var wg sync.WaitGroup
	wg.Go(func() { r.trim(ctx, b, t) })
	for _, c := range []struct {
		topic string
		add   func(kafka.Message)
	}{{r.cfg.Kafka.OutputTopic, t.addScore}, {r.cfg.Kafka.DLQTopic, t.addDead}} {
		rd := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: "ratingsbench-" + c.topic, Topic: c.topic,
			StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond, QueueCapacity: 10000})
		wg.Go(func() {
			defer rd.Close()
			for {
				m, err := rd.FetchMessage(ctx)
				if err != nil {
					return // cancelled
				}
				c.add(m)
			}
		})
	}
	defer wg.Wait()
	defer cancel()

	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: r.cfg.Kafka.InputTopic, Balancer: &kafka.Murmur2Balancer{},
		BatchSize: 1000, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	// The events go in chunks. A replay that collects every record keeps
	// at most r.backlog events ahead of those scored, so that the broker
	// holds a bounded part of the stream whatever its length (trim deletes
	// the rest); a throughput run produces every event at once.
	produce := func(from, to int) error {
		const chunk = 10000
		for lo := from; lo < to; lo += chunk {
			hi := min(lo+chunk, to)
			if r.keys == nil {
				if err := t.wait(ctx, lo-r.backlog, r.stall); err != nil {
					return err
				}
			}
			msgs := make([]kafka.Message, 0, hi-lo)
			for i := lo; i < hi; i++ {
				if r.keys != nil {
					msgs = append(msgs, kafka.Message{Key: r.keys[i], Value: r.vals[i]})
					continue
				}
				msgs = append(msgs, kafka.Message{Key: ratings.AppendKey(nil, r.rs[i]), Value: ratings.AppendEvent(nil, i, r.rs[i], r.genres)})
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("produce events %d–%d: %w", lo, hi-1, err)
			}
		}
		return nil
	}

	res = &replayResult{served: make([][]string, len(r.requests))}
	client := &http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	next := 0
	for q, req := range r.requests {
		if err := produce(next, req.Index); err != nil {
			return nil, err
		}
		next = req.Index
		if err := t.wait(ctx, req.Index, r.stall); err != nil {
			return nil, err
		}
		items, model, lat, err := r.rank(ctx, client, svc.http, req)
		if err != nil {
			res.rankErrors = append(res.rankErrors, fmt.Sprintf("request at event %d: %v", req.Index, err))
			continue
		}
		res.served[q], res.servedBy = items, model
		res.latency = append(res.latency, lat)
		if q%200 == 199 {
			r.progress(fmt.Sprintf("  %d of %d ranking requests", q+1, len(r.requests)))
		}
	}
	if err := produce(next, len(r.rs)); err != nil {
		return nil, err
	}
	if err := t.wait(ctx, len(r.rs), r.stall); err != nil {
		return nil, err
	}
	t.mu.Lock()
	res.col, res.records, res.dead, res.deadReasons, res.trimmed = t.col, t.records, t.ndead, t.reasons, t.trimmed
	res.elapsed = t.last.Sub(start)
	t.mu.Unlock()
	return res, nil
}

// rank asks the service for the order of the request's candidates and
// returns the items in the order served.
func (r *replay) rank(ctx context.Context, client *http.Client, addr string, req ratings.Request) ([]string, string, time.Duration, error) {
	body := ratings.AppendRequest(nil, "r"+strconv.Itoa(req.Index), req.User, req.Items, r.genres)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/rank", bytes.NewReader(body))
	if err != nil {
		return nil, "", 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, "", 0, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	lat := time.Since(t0)
	if err != nil {
		return nil, "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", 0, fmt.Errorf("%s: %.300s", resp.Status, out)
	}
	var v struct {
		Model  string `json:"model"`
		Ranked []struct {
			Item string `json:"item"`
		} `json:"ranked"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, "", 0, fmt.Errorf("response %.300s: %w", out, err)
	}
	items := make([]string, len(v.Ranked))
	for j, it := range v.Ranked {
		items[j] = it.Item
	}
	return items, v.Model, lat, nil
}

// segmentBytes is the size of the embedded broker's log segments of the
// input and output topics: what trim can free at a time per partition.
const segmentBytes = 8 << 20

// trim deletes, every r.trimEvery until ctx is done, the input topic's
// records below the service's committed offsets and the output topic's
// below those the tracker has read, so that the embedded broker holds
// about a segment per partition of each, and the events ahead of the
// service, instead of the whole stream. It counts the records deleted in
// t.trimmed. A failure is logged and ends the trimming, not the run.
func (r *replay) trim(ctx context.Context, b *stream.Broker, t *tracker) {
	every := r.trimEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	done := map[string]map[int]int64{} // topic → partition → offset trimmed to
	below := func(topic string, upto map[int]int64) error {
		if done[topic] == nil {
			done[topic] = map[int]int64{}
		}
		for p, off := range upto {
			if from := done[topic][p]; off > from {
				if err := b.DeleteRecords(topic, p, off); err != nil {
					return err
				}
				done[topic][p] = off
				t.mu.Lock()
				t.trimmed += off - from
				t.mu.Unlock()
			}
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		t.mu.Lock()
		read := map[int]int64{}
		for p, off := range t.next {
			read[p] = off
		}
		t.mu.Unlock()
		err := below(r.cfg.Kafka.InputTopic, b.Committed(r.cfg.Kafka.Group, r.cfg.Kafka.InputTopic))
		if err == nil {
			err = below(r.cfg.Kafka.OutputTopic, read)
		}
		if err != nil {
			r.progress(fmt.Sprintf("warning: no longer trimming the broker's log: %v", err))
			return
		}
	}
}

// tracker follows the output and dead-letter topics: which events every
// model has scored (or the service dead-lettered), and the watermark
// below which all have. Without a collector (throughput runs) it reads
// only each record's id, so that decoding the records takes little of the
// CPU the service runs on.
type tracker struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every record
	col     *ratings.Collector
	count   []int32 // records per event (without a collector)
	dead    []bool
	models  int
	water   int // events [0, water) are scored by every model or dead
	records int
	ndead   int
	reasons map[string]int
	last    time.Time // the last record's arrival
	err     error     // the first undecodable record
	next    []int64   // per partition of the output topic, the offset after the last record read
	trimmed int64     // records deleted from the broker's log (trim)
}

func newTracker(n, models, partitions int, collect bool) *tracker {
	t := &tracker{changed: make(chan struct{}), models: models, dead: make([]bool, n), reasons: map[string]int{}, last: time.Now(),
		next: make([]int64, partitions)}
	if collect {
		t.col = ratings.NewCollector(n)
	} else {
		t.count = make([]int32, n)
	}
	return t
}

// recordID returns the id of a score record, which starts {"id":"…".
func recordID(v []byte) (int, bool) {
	const prefix = `{"id":"`
	if !bytes.HasPrefix(v, []byte(prefix)) {
		return 0, false
	}
	v = v[len(prefix):]
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(string(v[:end]))
	return i, err == nil
}

func (t *tracker) addScore(m kafka.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.records++
	if m.Partition >= 0 && m.Partition < len(t.next) {
		t.next[m.Partition] = max(t.next[m.Partition], m.Offset+1)
	}
	if t.col != nil {
		if _, _, err := t.col.Add(m.Value); err != nil && t.err == nil {
			t.err = err
		}
	} else if i, ok := recordID(m.Value); ok && i >= 0 && i < len(t.count) {
		t.count[i]++ // duplicates (at-least-once) count too: throughput runs only
	}
	t.advance()
}

func (t *tracker) addDead(m kafka.Message) {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(m.Value, &v)
	reason := "?"
	for _, h := range m.Headers {
		if h.Key == engine.HeaderReason {
			reason = string(h.Value)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ndead++
	t.reasons[reason]++
	if i, err := strconv.Atoi(v.ID); err == nil && i >= 0 && i < len(t.dead) {
		t.dead[i] = true
		if t.col != nil {
			t.col.Dead(i)
		}
	}
	t.advance()
}

// advance moves the watermark and wakes the waiters; t.mu is held.
func (t *tracker) advance() {
	for t.water < len(t.dead) {
		var k int
		if t.col != nil {
			k, _ = t.col.Scored(t.water)
		} else {
			k = int(t.count[t.water])
		}
		if !t.dead[t.water] && k < t.models {
			break
		}
		t.water++
	}
	t.last = time.Now()
	close(t.changed)
	t.changed = make(chan struct{})
}

// wait returns once events [0, upto) are all scored or dead-lettered, or
// an error when no record came for stall.
func (t *tracker) wait(ctx context.Context, upto int, stall time.Duration) error {
	for {
		t.mu.Lock()
		water, ch, last, err := t.water, t.changed, t.last, t.err
		t.mu.Unlock()
		if err != nil {
			return err
		}
		if water >= upto {
			return nil
		}
		quiet := time.Since(last)
		if quiet >= stall {
			return fmt.Errorf("no record for %s: events below %d are scored, waiting for those below %d", stall, water, upto)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(stall - quiet):
		}
	}
}

// service is the streamer subprocess.
type service struct {
	cmd  *exec.Cmd
	http string
	done chan struct{}
	cpu  time.Duration
	mu   sync.Mutex
	log  []byte // the last 64 KiB of its log
}

func (s *service) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, p...)
	if len(s.log) > 64<<10 {
		s.log = append(s.log[:0], s.log[len(s.log)-32<<10:]...)
	}
	return len(p), nil
}

func (s *service) logTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.log)
}

// startService runs `streamer run --config` with the configuration file
// as it is, but for the brokers, the HTTP listen address and the snapshot
// directory (a fresh temporary one), set by environment overrides; it
// returns once /readyz answers 200.
func (r *replay) startService(ctx context.Context, b *stream.Broker) (*service, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ratingsbench-state-")
	if err != nil {
		return nil, err
	}
	s := &service{http: addr, done: make(chan struct{})}
	cmd := exec.Command(r.binary, "run", "--config", r.configPath)
	cmd.Env = append(os.Environ(), "STREAMER_KAFKA_BROKERS="+joinComma(b.Addrs()), "STREAMER_HTTP_LISTEN="+addr,
		"STREAMER_SNAPSHOT_DIR="+dir)
	cmd.Env = append(cmd.Env, r.env...)
	cmd.Stdout = s
	cmd.Stderr = s
	if r.verbose {
		cmd.Stderr = io.MultiWriter(s, os.Stderr)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		os.RemoveAll(dir)
		close(s.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code := readyz(addr); code == http.StatusOK {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("the service exited before it was ready (%v):\n%s", cmd.ProcessState, s.logTail())
		case <-ctx.Done():
			_ = s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.stop()
			return nil, fmt.Errorf("the service was not ready after 60 s:\n%s", s.logTail())
		}
	}
}

// stop sends SIGTERM, waits for the exit (killing the process after 60 s)
// and reads its CPU time.
func (s *service) stop() error {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(60 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			return errors.New("the service did not stop within 60 s of SIGTERM")
		}
	}
	if ps := s.cmd.ProcessState; ps != nil {
		s.cpu = ps.UserTime() + ps.SystemTime()
		if !ps.Success() {
			return fmt.Errorf("the service exited: %v", ps)
		}
	}
	return nil
}

func readyz(addr string) int {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func joinComma(ss []string) string {
	var b []byte
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	return string(b)
}

// buildStreamer builds ./cmd/streamer of the module that holds the
// working directory into dir and returns the binary's path.
func buildStreamer(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(string(bytes.TrimSpace(out)))
	bin := filepath.Join(dir, "streamer")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/streamer")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/streamer in %s: %w", root, err)
	}
	return bin, nil
}

// keepModels writes a copy of the configuration at path that keeps only
// the named models (the rank section too when its model is kept) to a
// temporary file and returns its path. The copy has its aliases resolved
// and its comments dropped.
func keepModels(path string, names []string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	models, _ := doc["models"].([]any)
	var kept []any
	for _, name := range names {
		found := false
		for _, m := range models {
			if mm, ok := m.(map[string]any); ok && mm["name"] == name {
				kept, found = append(kept, mm), true
			}
		}
		if !found {
			return "", fmt.Errorf("%s: no model %q", path, name)
		}
	}
	doc["models"] = kept
	if rk, ok := doc["rank"].(map[string]any); ok && !slices.Contains(names, fmt.Sprint(rk["model"])) {
		delete(doc, "rank")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "ratingsbench-*.yaml")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(out); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
