package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/configs"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

//go:embed data/ripley_train.csv
var ripleyCSV []byte

type demoOptions struct {
	duration     time.Duration
	rate         int
	listen       string
	brokerListen string
	noise        float64
	// fixedListen and fixedBroker: --listen and --broker-listen were
	// given, so a taken address is an error, not a move to a free port.
	fixedListen, fixedBroker bool
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Args:  cobra.NoArgs,
		Short: "Run the whole loop on an embedded Kafka-protocol broker",
		Long: `Demo starts an in-process Kafka-protocol broker on 127.0.0.1, streams Ripley's
two-class data into it (cycled, with small noise, 10% unlabelled, a few malformed
events to show the dead-letter topic), runs the real service against it with
configs/demo.yaml and shows live progress: events/s, prequential accuracy,
recent scores with their mistake bounds, and where /metrics is served.
--rate 0 produces nothing: the screen and the service still run, on your own
events only. "streamer demo recommend" runs the recommendation loop instead.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.rate < 0 {
				return fmt.Errorf("--rate %d: must be >= 0 (0: the demo produces nothing, only your events are processed)", o.rate)
			}
			o.fixedListen, o.fixedBroker = cmd.Flags().Changed("listen"), cmd.Flags().Changed("broker-listen")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.duration)
				defer cancel()
			}
			return runDemo(ctx, o, os.Stdout)
		},
	}
	cmd.Flags().DurationVar(&o.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	cmd.Flags().IntVar(&o.rate, "rate", 5000, "events per second to produce (0: none, only yours)")
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:9464", "address for /metrics, /healthz, /readyz (the default falls back to a free port when taken; a given one must be free)")
	cmd.Flags().StringVar(&o.brokerListen, "broker-listen", "127.0.0.1:9092", "address of the embedded broker, for kcat or your own producer (127.0.0.1 only; the default falls back to a free port when taken; a given one must be free)")
	cmd.Flags().Float64Var(&o.noise, "noise", 0.02, "standard deviation of the noise added to the cycled features")
	cmd.AddCommand(newDemoRecommendCmd())
	return cmd
}

// brokerPort is the port of --broker-listen: the embedded broker listens
// on 127.0.0.1 only.
func brokerPort(addr string) (int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("--broker-listen %q: %w", addr, err)
	}
	if host != "" && host != "127.0.0.1" && host != "localhost" {
		return 0, fmt.Errorf("--broker-listen %q: the embedded broker listens on 127.0.0.1 only", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("--broker-listen %q: bad port", addr)
	}
	return port, nil
}

type point struct {
	x     [2]float64
	label int
}

func loadRipley() ([]point, error) {
	rows, err := csv.NewReader(bytes.NewReader(ripleyCSV)).ReadAll()
	if err != nil {
		return nil, err
	}
	var pts []point
	for _, r := range rows[1:] {
		var p point
		for j := range 2 {
			if p.x[j], err = strconv.ParseFloat(r[j], 64); err != nil {
				return nil, err
			}
		}
		if p.label, err = strconv.Atoi(r[2]); err != nil {
			return nil, err
		}
		pts = append(pts, p)
	}
	return pts, nil
}

func runDemo(ctx context.Context, o demoOptions, out io.Writer) error {
	pts, err := loadRipley()
	if err != nil {
		return fmt.Errorf("demo data: %w", err)
	}
	broker, err := startDemoBroker(o.brokerListen, o.fixedBroker, []stream.TopicSpec{{Name: "events", Partitions: 3}, {Name: "scores", Partitions: 3}, {Name: "events.dlq", Partitions: 1}})
	if err != nil {
		return err
	}
	defer broker.Close()
	raw, err := configs.FS.ReadFile("demo.yaml")
	if err != nil {
		return err
	}
	brokers := strings.Join(broker.Addrs(), ",")
	svc, _, stop, err := startDemoService(ctx, "demo", raw, brokers, o.listen, o.fixedListen)
	if err != nil || svc == nil {
		return err
	}
	defer stop()
	moved := movedNotice(o.brokerListen, brokers, o.listen, svc.Addr())
	var wg sync.WaitGroup
	svcErr := make(chan error, 1)
	wg.Add(3)
	go func() { defer wg.Done(); svcErr <- svc.Run(ctx) }()
	go func() { defer wg.Done(); produceDemo(ctx, broker.Addrs(), pts, o) }()
	view := &scoreView{}
	go func() { defer wg.Done(); view.watch(ctx, broker.Addrs()) }()

	var lastConsumed float64
	showFrames(ctx, out, func(up, dt time.Duration) string {
		consumed := gauge(svc.Registry(), "streamer_events_consumed_total", nil)
		rate := (consumed - lastConsumed) / dt.Seconds()
		lastConsumed = consumed
		return renderFrame(svc, view, brokers, moved, rate, consumed, up, o.rate == 0)
	})
	wg.Wait()
	if err := <-svcErr; err != nil {
		return err
	}
	fmt.Fprintln(out, "demo stopped cleanly: producer flushed, offsets committed")
	return nil
}

func renderFrame(svc *stream.Service, view *scoreView, brokers, moved string, rate, consumed float64, up time.Duration, paused bool) string {
	var b strings.Builder
	reg := svc.Registry()
	fmt.Fprintf(&b, "streamer demo — embedded Kafka-protocol broker, Ripley's data (up %s)\n", up.Round(time.Second))
	fmt.Fprintf(&b, "broker: %s   try: kcat -b %s -C -t scores -o end\n", brokers, brokers)
	fmt.Fprintf(&b, "metrics: http://%s/metrics   health: /healthz  /readyz (ready=%v)\n", svc.Addr(), svc.Ready())
	b.WriteString(moved)
	b.WriteString("\n")
	fmt.Fprintf(&b, "events consumed %.0f   %.0f events/s   dead-lettered %.0f   published %.0f\n\n",
		consumed, rate, gauge(reg, "streamer_events_rejected_total", nil),
		gauge(reg, "streamer_records_published_total", nil))
	if paused {
		b.WriteString("the demo produces nothing (--rate 0): only the events you send are processed\n\n")
	}
	fmt.Fprintf(&b, "snapshots %.0f (model state with the offsets it includes, every 5s)\n\n", gauge(reg, "streamer_snapshots_total", nil))
	fmt.Fprintf(&b, "%-12s %10s %22s %8s\n", "model", "n", "prequential accuracy", "version")
	for _, name := range labelValues(reg, "streamer_model_examples", "model") {
		l := map[string]string{"model": name}
		fmt.Fprintf(&b, "%-12s %10.0f %22.4f %8.0f\n", name,
			gauge(reg, "streamer_model_examples", l), gauge(reg, "streamer_model_accuracy", l),
			gauge(reg, "streamer_model_version", l))
	}
	b.WriteString("\nrecent scores (read back from the output topic):\n")
	for _, r := range view.recent() {
		prob := "p(+1) not yet      " // before the model's first calibration fit
		if p := r.Certainty.Probability; p != nil {
			prob = fmt.Sprintf("p(+1) %.2f [%.2f, %.2f]", p.P, p.Lower, p.Upper)
		}
		fmt.Fprintf(&b, "  %-10s %-8s %-11s score %+.3f  pred %+d  %s  mistake_bound %.3f (δ %.2f, n %d)\n",
			r.ID, r.Key, r.Model, r.Score, r.Prediction, prob, r.Certainty.MistakeBound, r.Certainty.Delta, r.Certainty.N)
	}
	if d := view.lastDLQ(); d != "" {
		b.WriteString("\nlast dead-lettered event: " + d + "\n")
	}
	return b.String()
}

func produceDemo(ctx context.Context, brokers []string, pts []point, o demoOptions) {
	if o.rate <= 0 {
		return // paused: the service processes only the events others send
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "events", Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const tick = 20 * time.Millisecond
	perTick := max(1, o.rate*int(tick/time.Millisecond)/1000)
	t := time.NewTicker(tick)
	defer t.Stop()
	bad := []string{`{"id":"bad-json",`, `{"id":"bad-dim","features":[1,2,3],"label":1}`,
		`{"id":"bad-nan","features":[1e999,0.5],"label":1}`, `{"id":"bad-label","features":[0.1,0.2],"label":7}`}
	var seq int
	msgs := make([]kafka.Message, 0, perTick)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		msgs = msgs[:0]
		for range perTick {
			seq++
			key := []byte("user-" + strconv.Itoa(seq%50))
			if seq%997 == 0 {
				msgs = append(msgs, kafka.Message{Key: key, Value: []byte(bad[(seq/997)%len(bad)])})
				continue
			}
			p := pts[seq%len(pts)]
			v := fmt.Sprintf(`{"id":"e-%d","key":"%s","ts":"%s","features":[%.6f,%.6f]`, seq, key,
				time.Now().UTC().Format(time.RFC3339Nano), p.x[0]+o.noise*rng.NormFloat64(), p.x[1]+o.noise*rng.NormFloat64())
			if seq%10 != 0 {
				v += `,"label":` + strconv.Itoa(p.label)
			}
			msgs = append(msgs, kafka.Message{Key: key, Value: []byte(v + "}")})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "demo producer:", err)
		}
	}
}

type scoreRecord struct {
	ID         string  `json:"id"`
	Key        string  `json:"key"`
	Model      string  `json:"model"`
	Version    int64   `json:"version"`
	Score      float64 `json:"score"`
	Prediction int     `json:"prediction"`
	Certainty  struct {
		MistakeBound float64 `json:"mistake_bound"`
		Delta        float64 `json:"delta"`
		N            int64   `json:"n"`
		Probability  *struct {
			P     float64 `json:"p"`
			Lower float64 `json:"lower"`
			Upper float64 `json:"upper"`
		} `json:"probability"`
	} `json:"certainty"`
}

// scoreView reads the output and dead-letter topics back over Kafka, as any
// downstream consumer would.
type scoreView struct {
	mu   sync.Mutex
	last []scoreRecord
	dlq  string
}

func (v *scoreView) watch(ctx context.Context, brokers []string) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "streamer-demo-viewer",
		GroupTopics: []string{"scores", "events.dlq"}, StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond})
	defer r.Close()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return
		}
		v.mu.Lock()
		if m.Topic == "events.dlq" {
			reason := ""
			for _, h := range m.Headers {
				if h.Key == engine.HeaderReason {
					reason = string(h.Value)
				}
			}
			v.dlq = fmt.Sprintf("%s  reason=%s", m.Value, reason)
		} else {
			var s scoreRecord
			if json.Unmarshal(m.Value, &s) == nil {
				v.last = append(v.last, s)
				if len(v.last) > 6 {
					v.last = v.last[len(v.last)-6:]
				}
			}
		}
		v.mu.Unlock()
	}
}

func (v *scoreView) recent() []scoreRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]scoreRecord(nil), v.last...)
}

func (v *scoreView) lastDLQ() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dlq
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// gauge sums the current value of every series of the named metric whose
// labels include the given ones.
func gauge(g prometheus.Gatherer, name string, labels map[string]string) float64 {
	var sum float64
	eachMetric(g, name, func(m *dto.Metric) {
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				return
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	})
	return sum
}

func labelValues(g prometheus.Gatherer, name, label string) []string {
	var out []string
	eachMetric(g, name, func(m *dto.Metric) {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				out = append(out, lp.GetValue())
			}
		}
	})
	return out
}

func eachMetric(g prometheus.Gatherer, name string, fn func(*dto.Metric)) {
	mfs, err := g.Gather()
	if err != nil {
		return
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				fn(m)
			}
		}
	}
}

// startDemoBroker starts the embedded broker with topics on the port of
// listen (--broker-listen), or, unless fixed (the flag was given), on any
// free port when that one is taken (the screens say so, and where).
func startDemoBroker(listen string, fixed bool, topics []stream.TopicSpec) (*stream.Broker, error) {
	port, err := brokerPort(listen)
	if err != nil {
		return nil, err
	}
	broker, err := stream.StartBroker(port, topics...)
	if err != nil && port != 0 {
		if fixed {
			return nil, fmt.Errorf("--broker-listen %s: %w (another broker or demo? leave the flag out to take a free port)", listen, err)
		}
		broker, err = stream.StartBroker(0, topics...)
	}
	return broker, err
}

// movedNotice is the screens' line saying where the broker and the HTTP
// server listen when the default addresses were taken, so that the
// README's commands need the new ones; "" when both are where asked.
func movedNotice(wantBroker, brokers, wantHTTP, httpAddr string) string {
	var b strings.Builder
	for _, a := range [][3]string{{"broker", wantBroker, strings.Split(brokers, ",")[0]}, {"HTTP server", wantHTTP, httpAddr}} {
		_, want, _ := net.SplitHostPort(a[1])
		_, got, _ := net.SplitHostPort(a[2])
		if want != "0" && want != got {
			fmt.Fprintf(&b, "note: %s was taken (another demo or broker?), so the %s is on %s: use that address in the README's commands\n", a[1], a[0], a[2])
		}
	}
	return b.String()
}

// startDemoService starts the service on the config raw against brokers,
// its HTTP on listen (--listen) or, unless fixed (the flag was given), a
// free port when that one is taken, its state in a temporary directory
// that stop removes. A nil service and no error: ctx ended meanwhile.
func startDemoService(ctx context.Context, name string, raw []byte, brokers, listen string, fixed bool) (svc *stream.Service, cfg config.Config, stop func(), err error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	stateDir, err := os.MkdirTemp("", "streamer-"+strings.ReplaceAll(name, " ", "-"))
	if err != nil {
		return nil, cfg, nil, err
	}
	types := newModelTypes()
	tries := []string{listen, "127.0.0.1:0"}
	if fixed {
		tries = tries[:1]
	}
	for _, l := range tries {
		env := []string{"STREAMER_KAFKA_BROKERS=" + brokers, "STREAMER_HTTP_LISTEN=" + l, "STREAMER_SNAPSHOT_DIR=" + stateDir}
		if cfg, err = config.Parse(raw, env, types); err != nil {
			os.RemoveAll(stateDir)
			return nil, cfg, nil, err
		}
		if svc, err = stream.NewService(ctx, cfg, types, nil, log); err == nil {
			return svc, cfg, func() { os.RemoveAll(stateDir) }, nil
		}
		if ctx.Err() != nil {
			os.RemoveAll(stateDir)
			return nil, cfg, nil, nil
		}
	}
	os.RemoveAll(stateDir)
	if fixed {
		return nil, cfg, nil, fmt.Errorf("%s: --listen %s: %v (leave the flag out to take a free port)", name, listen, err)
	}
	return nil, cfg, nil, fmt.Errorf("%s: cannot listen on %s or a free port: %v", name, listen, err)
}

// showFrames writes the frame render returns every second until ctx ends
// (and once more then): on a terminal in place of the last, else one after
// the other. render gets the time since the start and since the last frame.
func showFrames(ctx context.Context, out io.Writer, render func(up, dt time.Duration) string) {
	tty := isTerminal(out)
	start := time.Now()
	last := start
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		now := time.Now()
		frame := render(now.Sub(start), now.Sub(last))
		last = now
		if tty {
			fmt.Fprint(out, "\033[H\033[2J", frame)
		} else {
			fmt.Fprintln(out, frame)
		}
	}
}
