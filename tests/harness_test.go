// Package tests holds black-box end-to-end tests: the real streamer binary
// as a subprocess against an in-process Kafka-protocol broker (kfake) over
// TCP on 127.0.0.1.
//
// Parallel tests: a test that mostly waits (an outage, a stall, a
// shutdown timeout, a TLS handshake) or that drives its own crash loop
// calls t.Parallel, so that its waits overlap another test's work; each
// has its own broker, ports and directories. Tests that set environment
// variables cannot (t.Setenv) and run first, alone.
package tests

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream"
)

// binary is the streamer under test (built with -race when the tests are);
// fastBinary is always built without -race, for the long crash tests, whose
// 200 k events would take minutes under the race detector.
var binary, fastBinary string

// useFastBinary makes the rest of the test run fastBinary.
func useFastBinary(t *testing.T) {
	saved := binary
	binary = fastBinary
	t.Cleanup(func() { binary = saved })
}

func TestMain(m *testing.M) {
	if rankClientMode() {
		return // the process was TestRankLoad's client, not a test run
	}
	dir, err := os.MkdirTemp("", "streamer-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "streamer")
	fastBinary = binary
	builds := [][]string{{"build", "-o", binary}}
	if raceEnabled {
		builds[0] = append(builds[0], "-race")
		fastBinary = filepath.Join(dir, "streamer-norace")
		builds = append(builds, []string{"build", "-o", fastBinary})
	}
	// E2E_STREAMER_BINARY: a streamer already built from this tree without
	// -race (CI builds one first), used instead of building it again.
	if prebuilt := os.Getenv("E2E_STREAMER_BINARY"); prebuilt != "" {
		if raceEnabled {
			fastBinary, builds = prebuilt, builds[:1]
		} else {
			binary, fastBinary, builds = prebuilt, prebuilt, nil
		}
	}
	for _, args := range builds {
		cmd := exec.Command("go", append(args, "../cmd/streamer")...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build streamer:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type row struct {
	x     []float64
	label int
}

func readCSV(t *testing.T, path string) []row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, r := range recs[1:] {
		var rw row
		for _, s := range r[:len(r)-1] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			rw.x = append(rw.x, v)
		}
		if rw.label, err = strconv.Atoi(r[len(r)-1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, rw)
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBroker starts kfake with the usual topics.
func startBroker(t *testing.T, partitions int) *stream.Broker {
	t.Helper()
	b, err := stream.StartBroker(0,
		stream.TopicSpec{Name: "events", Partitions: partitions},
		stream.TopicSpec{Name: "scores", Partitions: partitions},
		stream.TopicSpec{Name: "events.dlq", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// startRankBroker is startBroker with 3 partitions and the topic
// "ranked", the rank.response_topic of the ranking tests' configs.
func startRankBroker(t *testing.T) *stream.Broker {
	t.Helper()
	b := startBroker(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.CreateTopic(ctx, "ranked", 3); err != nil {
		t.Fatal(err)
	}
	return b
}

type proc struct {
	cmd  *exec.Cmd
	http string
	done chan error
	logs *logBuf
}

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startStreamer writes cfgYAML (with %BROKERS% and %HTTP% substituted) and
// runs `streamer run --config` on it, waiting until /readyz says ready.
func startStreamer(t *testing.T, b *stream.Broker, cfgYAML string) *proc {
	t.Helper()
	return startStreamerArgs(t, b, cfgYAML)
}

// startStreamerArgs is startStreamer with extra arguments to `streamer run`.
func startStreamerArgs(t *testing.T, b *stream.Broker, cfgYAML string, extra ...string) *proc {
	t.Helper()
	p := spawnStreamer(t, strings.Join(b.Addrs(), ","), cfgYAML, extra...)
	waitFor(t, 30*time.Second, "streamer ready", func() bool { return p.readyz(t) == http.StatusOK })
	return p
}

// readyz returns the status of GET /readyz, 0 when it does not answer.
func (p *proc) readyz(t *testing.T) int {
	t.Helper()
	code, _ := p.readyzBody()
	return code
}

// readyzBody returns the status and body of GET /readyz (0 and "" when it
// does not answer).
func (p *proc) readyzBody() (int, string) {
	resp, err := http.Get("http://" + p.http + "/readyz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// spawnStreamer writes cfgYAML (with %BROKERS% replaced by brokers and
// %HTTP% by a free address) and starts `streamer run --config` on it
// without waiting for anything.
func spawnStreamer(t *testing.T, brokers, cfgYAML string, extra ...string) *proc {
	t.Helper()
	httpAddr := freeAddr(t)
	cfgYAML = strings.ReplaceAll(cfgYAML, "%BROKERS%", brokers)
	cfgYAML = strings.ReplaceAll(cfgYAML, "%HTTP%", httpAddr)
	path := filepath.Join(t.TempDir(), "streamer.yaml")
	if err := os.WriteFile(path, []byte(cfgYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"run", "--config", path}, extra...)...)
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, http: httpAddr, done: make(chan error, 1), logs: &logBuf{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.logs.mu.Lock()
			p.logs.b.WriteString(sc.Text() + "\n")
			p.logs.mu.Unlock()
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("streamer log:\n%s", p.logs.String())
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit error.
func (p *proc) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("streamer did not exit within 60s of SIGTERM")
		return nil
	}
}

// metrics returns the process's /metrics page.
func (p *proc) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// metric reads one sample from the process's /metrics.
func (p *proc) metric(t *testing.T, name string, labels string) float64 {
	t.Helper()
	body := p.metrics(t)
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, want+" ") {
			v, err := strconv.ParseFloat(strings.TrimPrefix(line, want+" "), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not found", want)
	return 0
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownTransport is a kafka-go transport for one test's writer. The
// package's default one, shared by every writer of the process, keeps
// each address's metadata for seconds, and the parallel tests' brokers
// take each other's ports once closed: a writer once sent to partition 2
// of a two-partition topic, from the metadata of a broker closed before
// on the same port.
func ownTransport(t *testing.T) *kafka.Transport {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func produce(t *testing.T, b *stream.Broker, topic string, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// consumer reads a topic from the beginning in its own group.
type consumer struct {
	r *kafka.Reader
}

func newConsumer(t *testing.T, b *stream.Broker, topic string) *consumer {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: "test-" + topic + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		Topic: topic, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	t.Cleanup(func() { r.Close() })
	return &consumer{r: r}
}

// read returns the next n messages, failing after timeout.
func (c *consumer) read(t *testing.T, n int, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := make([]kafka.Message, 0, n)
	for len(out) < n {
		m, err := c.r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, m)
	}
	return out
}

func eventJSON(id string, x []float64, label *int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":%q,"features":[`, id)
	for i, v := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	}
	b.WriteByte(']')
	if label != nil {
		fmt.Fprintf(&b, `,"label":%d`, *label)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// shipped is a configuration file of configs/ being edited for a test.
type shipped struct {
	t         *testing.T
	name, cfg string
}

// shippedConfig reads configs/name and makes it the test's, for
// startStreamer: the embedded broker, a free listen address, log level
// warn and a snapshot directory of the test's own.
func shippedConfig(t *testing.T, name string) *shipped {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	s := &shipped{t: t, name: name, cfg: string(b)}
	s.replace("brokers: [localhost:9092]", "brokers: [%BROKERS%]")
	s.replace(`listen: "127.0.0.1:9464"`, "listen: \"%HTTP%\"\nlog:\n  level: warn")
	s.replace("dir: state/snapshots", "dir: "+t.TempDir())
	return s
}

// replace replaces old by new once, failing the test where the file has no
// old (the shipped file changed under the test).
func (s *shipped) replace(old, new string) {
	s.t.Helper()
	if !strings.Contains(s.cfg, old) {
		s.t.Fatalf("configs/%s has no %q", s.name, old)
	}
	s.cfg = strings.Replace(s.cfg, old, new, 1)
}
