package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/configs"
	"github.com/streamer/streamer/stream"
)

// streamer demo recommend: the recommendation loop of
// configs/recommendation-ratings.yaml on the embedded broker, with a
// simulated catalogue and users whose hidden tastes rate what they are
// shown.

const (
	recConfig     = "recommendation-ratings.yaml"
	recItems      = 300  // m1 … m300
	recUsers      = 100  // u1 … u100
	recSeed       = 36   // the catalogue and the tastes (the README's examples use its genres)
	recDims       = 4    // hidden taste dimensions
	recCandidates = 20   // candidates of each of the demo's requests
	recK          = 5    // items shown of each
	recWarmup     = 5000 // ratings produced at once at start
	recLabelDelay = time.Second
	recOutcomes   = 200  // requests in the screen's means of true ratings
	recRMSEWindow = 1000 // ratings in the running mean's RMSE (metrics.accuracy_window's default)
	recMinRating  = 0.5
	recMaxRating  = 5.0
)

// recGenres are the catalogue's genres.
var recGenres = []string{"Action", "Adventure", "Animation", "Children", "Comedy", "Crime", "Documentary",
	"Drama", "Fantasy", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "Western"}

type recOptions struct {
	duration     time.Duration
	listen       string
	brokerListen string
	rate         float64 // ratings per second of the background stream
	requestsRate float64 // ranking requests per second
	// fixedListen and fixedBroker: as demoOptions'.
	fixedListen, fixedBroker bool
}

func newDemoRecommendCmd() *cobra.Command {
	var o recOptions
	cmd := &cobra.Command{
		Use:   "recommend",
		Args:  cobra.NoArgs,
		Short: "Run the recommendation loop (ratings, POST /v1/rank, labels) on an embedded broker",
		Long: `Recommend starts an in-process Kafka-protocol broker on 127.0.0.1 with the topics of
configs/recommendation-ratings.yaml (ratings, rating-scores, ratings.dlq, ranked),
runs the real service on that configuration and simulates 300 movies (m1…m300, each with genres) and 100 users
(u1…u100) with hidden tastes: it produces 5000 ratings at once, then a stream of
ratings of random (user, movie) pairs (--rate), asks POST /v1/rank for 5 of 20
random candidates for a random user (--requests-rate) and, a second later, sends
the user's ratings of the movies shown as labels for the request. Every second
it shows requests/s and latency, ranked lists with the ratings they got, the
true mean rating of the served top 5 against a random order and the best order,
the service's off-policy estimates, the calibration of the liked model, the
RMSE of the rating model and the commands to join in (README, "Recommendations").`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !(o.rate >= 0 && o.requestsRate >= 0) || math.IsInf(o.rate+o.requestsRate, 0) {
				return fmt.Errorf("--rate %v, --requests-rate %v: each must be a finite number >= 0 (0: none of the demo's own)", o.rate, o.requestsRate)
			}
			o.fixedListen, o.fixedBroker = cmd.Flags().Changed("listen"), cmd.Flags().Changed("broker-listen")
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.duration)
				defer cancel()
			}
			return runDemoRecommend(ctx, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&o.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:9464", "address of POST /v1/rank and /metrics (the default falls back to a free port when taken; a given one must be free)")
	cmd.Flags().StringVar(&o.brokerListen, "broker-listen", "127.0.0.1:9092", "address of the embedded broker, for kcat or your own producer (127.0.0.1 only; the default falls back to a free port when taken; a given one must be free)")
	cmd.Flags().Float64Var(&o.rate, "rate", 100, "ratings per second of the demo's background stream after the first 5000 (0: none, only yours)")
	cmd.Flags().Float64Var(&o.requestsRate, "requests-rate", 20, "ranking requests per second the demo sends, each followed by its ratings (0: none, only yours)")
	return cmd
}

// recWorld is the simulated catalogue and users: rating = bias + user ·
// item + noise, clipped and rounded to half stars.
type recWorld struct {
	items []recItem
	users []recUser
	mean  float64
}

type recItem struct {
	id     string
	genres []string
	v      [recDims]float64
	bias   float64
}

type recUser struct {
	id   string
	w    [recDims]float64
	bias float64
}

func newRecWorld(seed uint64) *recWorld {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := &recWorld{mean: 3.4}
	gv := make([][recDims]float64, len(recGenres))
	for g := range gv {
		for d := range recDims {
			gv[g][d] = 0.7 * rng.NormFloat64()
		}
	}
	for i := range recItems {
		it := recItem{id: "m" + strconv.Itoa(i+1), bias: 0.35 * rng.NormFloat64()}
		gs := rng.Perm(len(recGenres))[:1+rng.IntN(3)]
		slices.Sort(gs)
		for _, g := range gs {
			it.genres = append(it.genres, recGenres[g])
			for d := range recDims {
				it.v[d] += gv[g][d] / float64(len(gs))
			}
		}
		for d := range recDims {
			it.v[d] += 0.35 * rng.NormFloat64()
		}
		w.items = append(w.items, it)
	}
	for u := range recUsers {
		us := recUser{id: "u" + strconv.Itoa(u+1), bias: 0.35 * rng.NormFloat64()}
		for d := range recDims {
			us.w[d] = 0.8 * rng.NormFloat64()
		}
		w.users = append(w.users, us)
	}
	return w
}

func (w *recWorld) raw(u, i int) float64 {
	it, us := &w.items[i], &w.users[u]
	r := w.mean + us.bias + it.bias
	for d := range recDims {
		r += us.w[d] * it.v[d]
	}
	return r
}

// truth is the user's expected rating of the item, without the noise.
func (w *recWorld) truth(u, i int) float64 {
	return min(recMaxRating, max(recMinRating, w.raw(u, i)))
}

// rate is a rating the user gives the item: with noise, in half stars.
func (w *recWorld) rate(rng *rand.Rand, u, i int) float64 {
	r := math.Round(2*(w.raw(u, i)+0.5*rng.NormFloat64())) / 2
	return min(recMaxRating, max(recMinRating, r))
}

// itemIndex is the index of item "m<n>", or −1.
func itemIndex(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "m"))
	if err != nil || !strings.HasPrefix(id, "m") || n < 1 || n > recItems {
		return -1
	}
	return n - 1
}

func appendItemFeatures(b []byte, it *recItem) []byte {
	b = append(b, `{"item":{"id":`...)
	b = strconv.AppendQuote(b, it.id)
	b = append(b, `,"genres":[`...)
	for j, g := range it.genres {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, g)
	}
	return append(b, "]}}"...)
}

// ratingEvent is a labelled event of the ratings topic, keyed by the user.
func (w *recWorld) ratingEvent(id string, u, i int, label float64) kafka.Message {
	b := []byte(`{"id":`)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"features":{"user":{"id":`...)
	b = strconv.AppendQuote(b, w.users[u].id)
	b = append(b, `},`...)
	f := appendItemFeatures(nil, &w.items[i])
	b = append(b, f[1:len(f)-1]...) // "item":{…}
	b = append(b, `},"label":`...)
	b = strconv.AppendFloat(b, label, 'f', -1, 64)
	b = append(b, '}')
	return kafka.Message{Key: []byte(w.users[u].id), Value: b}
}

// rankRequest is the body of POST /v1/rank for user u and the candidates.
func (w *recWorld) rankRequest(id string, u int, cands []int, k int) []byte {
	b := []byte(`{"id":`)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"key":`...)
	b = strconv.AppendQuote(b, w.users[u].id)
	b = append(b, `,"k":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `,"features":{"user":{"id":`...)
	b = strconv.AppendQuote(b, w.users[u].id)
	b = append(b, `}},"candidates":[`...)
	for j, i := range cands {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"item":`...)
		b = strconv.AppendQuote(b, w.items[i].id)
		b = append(b, `,"features":`...)
		b = appendItemFeatures(b, &w.items[i])
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// labelEvent is the rating of an item a request showed: the request's id
// and the item, keyed by the user (docs/wire.md, "Labels for shown items").
func labelEvent(reqID, user, item string, label float64) kafka.Message {
	b := []byte(`{"id":`)
	b = strconv.AppendQuote(b, reqID)
	b = append(b, `,"item":`...)
	b = strconv.AppendQuote(b, item)
	b = append(b, `,"label":`...)
	b = strconv.AppendFloat(b, label, 'f', -1, 64)
	b = append(b, '}')
	return kafka.Message{Key: []byte(user), Value: b}
}

// rankResponse is what the demo reads of POST /v1/rank's answer.
type rankResponse struct {
	ID       string `json:"id"`
	Key      string `json:"key"`
	Model    string `json:"model"`
	Fallback string `json:"fallback"`
	Ranked   []struct {
		Item       string  `json:"item"`
		Score      float64 `json:"score"`
		Prediction float64 `json:"prediction"` // the predicted rating: the score clipped to the ratings' range
		Propensity float64 `json:"propensity"`
		Certainty  struct {
			N        int64 `json:"n"`
			Interval *struct {
				Lower, Upper, Level float64
			} `json:"interval"`
		} `json:"certainty"`
	} `json:"ranked"`
}

// recRequest is one of the demo's requests and what came of it.
type recRequest struct {
	id      string
	user    int
	resp    rankResponse
	ratings []float64 // the ratings given to the items shown (once rated)
	rated   bool
}

// recStats is what the demo's own clients saw, for the screen.
type recStats struct {
	mu sync.Mutex
	// requests
	latencies []recLatency // the last 10 s
	answered  int
	errors    int
	lastErr   string
	outcomes  []recOutcome // the last recOutcomes requests
	recent    []*recRequest
	// ratings sent: a running mean's prequential errors
	sum, n float64
	sqErrs []float64 // ring of the last recRMSEWindow
	sqNext int
}

type recLatency struct {
	at time.Time
	d  time.Duration
}

type recOutcome struct{ served, random, best float64 }

// sent counts a rating sent (background or label) in the running mean's
// RMSE, judged before it is learned as the service judges its models.
func (s *recStats) sent(label float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n > 0 {
		e := label - s.sum/s.n
		if len(s.sqErrs) < recRMSEWindow {
			s.sqErrs = append(s.sqErrs, e*e)
		} else {
			s.sqErrs[s.sqNext] = e * e
			s.sqNext = (s.sqNext + 1) % recRMSEWindow
		}
	}
	s.sum += label
	s.n++
}

func runDemoRecommend(ctx context.Context, o recOptions, out io.Writer) error {
	raw, err := configs.FS.ReadFile(recConfig)
	if err != nil {
		return err
	}
	types := newModelTypes()
	base, err := config.Parse(raw, nil, types)
	if err != nil {
		return err
	}
	// One partition each: kcat's default partitioner and the Java
	// client's then agree with rank.partitioner on every key.
	var topics []stream.TopicSpec
	for _, t := range stream.ServiceTopics(base) { // those streamer topics create makes
		topics = append(topics, stream.TopicSpec{Name: t.Name, Partitions: 1})
	}
	broker, err := startDemoBroker(o.brokerListen, o.fixedBroker, topics)
	if err != nil {
		return err
	}
	defer broker.Close()
	brokers := strings.Join(broker.Addrs(), ",")
	svc, cfg, stop, err := startDemoService(ctx, "demo recommend", raw, brokers, o.listen, o.fixedListen)
	if err != nil || svc == nil {
		return err
	}
	defer stop()
	world := newRecWorld(recSeed)
	stats := &recStats{}
	var wg sync.WaitGroup
	svcErr := make(chan error, 1)
	wg.Add(3)
	go func() { defer wg.Done(); svcErr <- svc.Run(ctx) }()
	go func() {
		defer wg.Done()
		produceRatings(ctx, broker.Addrs(), cfg.Kafka.InputTopic, world, stats, o.rate)
	}()
	go func() {
		defer wg.Done()
		requestLoop(ctx, svc, broker.Addrs(), cfg.Kafka.InputTopic, world, stats, o.requestsRate)
	}()

	var lastConsumed float64
	var lastAnswered int
	showFrames(ctx, out, func(up, dt time.Duration) string {
		consumed := gauge(svc.Registry(), "streamer_events_consumed_total", nil)
		stats.mu.Lock()
		answered := stats.answered
		stats.mu.Unlock()
		rates := [2]float64{(consumed - lastConsumed) / dt.Seconds(), float64(answered-lastAnswered) / dt.Seconds()}
		lastConsumed, lastAnswered = consumed, answered
		return renderRecFrame(svc, cfg, world, stats, brokers, rates, consumed, up, o)
	})
	wg.Wait()
	if err := <-svcErr; err != nil {
		return err
	}
	fmt.Fprintln(out, "demo recommend stopped cleanly: producer flushed, offsets committed")
	return nil
}

// produceRatings sends recWarmup ratings at once, then rate a second, of
// random (user, item) pairs.
func produceRatings(ctx context.Context, brokers []string, topic string, world *recWorld, stats *recStats, rate float64) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	rng := rand.New(rand.NewPCG(recSeed, 1))
	var seq int
	next := func(n int) []kafka.Message {
		msgs := make([]kafka.Message, 0, n)
		for range n {
			seq++
			u, i := rng.IntN(recUsers), rng.IntN(recItems)
			r := world.rate(rng, u, i)
			stats.sent(r)
			msgs = append(msgs, world.ratingEvent("r-"+strconv.Itoa(seq), u, i, r))
		}
		return msgs
	}
	for sent := 0; sent < recWarmup; sent += 1000 {
		if err := w.WriteMessages(ctx, next(min(1000, recWarmup-sent))...); err != nil {
			if ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "demo recommend producer:", err)
			}
			return
		}
	}
	if rate <= 0 {
		return // paused: only the user's own ratings from now on
	}
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var due float64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due += rate * tick.Seconds()
		n := int(due)
		if n == 0 {
			continue
		}
		due -= float64(n)
		if err := w.WriteMessages(ctx, next(n)...); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "demo recommend producer:", err)
		}
	}
}

// requestLoop asks POST /v1/rank for recK of recCandidates random items
// for a random user, rate times a second, and recLabelDelay later sends the
// user's ratings of the items shown as labels for the request.
func requestLoop(ctx context.Context, svc *stream.Service, brokers []string, topic string, world *recWorld, stats *recStats, rate float64) {
	if rate <= 0 {
		return
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 2 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	labels := make(chan *recRequest, 1024)
	var lwg sync.WaitGroup
	lwg.Add(1)
	go func() {
		defer lwg.Done()
		rng := rand.New(rand.NewPCG(recSeed, 3))
		for r := range labels {
			msgs := make([]kafka.Message, 0, len(r.resp.Ranked))
			ratings := make([]float64, 0, len(r.resp.Ranked))
			for _, it := range r.resp.Ranked {
				i := itemIndex(it.Item)
				if i < 0 {
					continue
				}
				rt := world.rate(rng, r.user, i)
				stats.sent(rt)
				ratings = append(ratings, rt)
				msgs = append(msgs, labelEvent(r.id, world.users[r.user].id, it.Item, rt))
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() != nil {
					continue // drain
				}
				fmt.Fprintln(os.Stderr, "demo recommend labels:", err)
			}
			stats.mu.Lock()
			r.ratings, r.rated = ratings, true
			stats.mu.Unlock()
		}
	}()
	defer func() { lwg.Wait() }()
	var pending sync.WaitGroup
	defer func() { pending.Wait(); close(labels) }()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	url := "http://" + svc.Addr() + "/v1/rank"
	rng := rand.New(rand.NewPCG(recSeed, 2))
	idx := make([]int, recItems)
	for i := range idx {
		idx[i] = i
	}
	t := time.NewTicker(max(time.Microsecond, time.Duration(float64(time.Second)/rate)))
	defer t.Stop()
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !svc.Ready() {
			continue // 503 until the consumer group is joined
		}
		seq++
		u := rng.IntN(recUsers)
		for j := range recCandidates { // a partial shuffle: recCandidates distinct items
			k := j + rng.IntN(recItems-j)
			idx[j], idx[k] = idx[k], idx[j]
		}
		cands := slices.Clone(idx[:recCandidates])
		r := &recRequest{id: "q-" + strconv.Itoa(seq), user: u}
		body := world.rankRequest(r.id, u, cands, recK)
		t0 := time.Now()
		status, answer, err := postJSON(ctx, client, url, body)
		d := time.Since(t0)
		if err == nil && status == http.StatusOK {
			err = json.Unmarshal(answer, &r.resp)
		}
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("%d %s", status, bytes.TrimSpace(answer))
		}
		stats.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				stats.errors++
				stats.lastErr = err.Error()
			}
			stats.mu.Unlock()
			continue
		}
		stats.answered++
		stats.latencies = append(stats.latencies, recLatency{t0, d})
		stats.outcomes = append(stats.outcomes, outcomeOf(world, u, cands, &r.resp))
		if len(stats.outcomes) > recOutcomes {
			stats.outcomes = stats.outcomes[len(stats.outcomes)-recOutcomes:]
		}
		stats.recent = append(stats.recent, r)
		if len(stats.recent) > 64 {
			stats.recent = stats.recent[len(stats.recent)-64:]
		}
		stats.mu.Unlock()
		pending.Add(1)
		time.AfterFunc(recLabelDelay, func() { defer pending.Done(); labels <- r })
	}
}

func postJSON(ctx context.Context, client *http.Client, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// outcomeOf is the mean true rating of the items served, of a random
// order's top k (in expectation: the candidates' mean) and of the best
// order's.
func outcomeOf(world *recWorld, u int, cands []int, resp *rankResponse) recOutcome {
	var o recOutcome
	truths := make([]float64, len(cands))
	for j, i := range cands {
		truths[j] = world.truth(u, i)
		o.random += truths[j]
	}
	o.random /= float64(len(cands))
	k := len(resp.Ranked)
	if k == 0 {
		return o
	}
	for _, it := range resp.Ranked {
		if i := itemIndex(it.Item); i >= 0 {
			o.served += world.truth(u, i)
		}
	}
	o.served /= float64(k)
	slices.Sort(truths)
	for _, t := range truths[len(truths)-k:] {
		o.best += t
	}
	o.best /= float64(k)
	return o
}

func renderRecFrame(svc *stream.Service, cfg config.Config, world *recWorld, stats *recStats, brokers string,
	rates [2]float64, consumed float64, up time.Duration, o recOptions) string {
	var b strings.Builder
	reg := svc.Registry()
	model := cfg.Rank.Model
	fmt.Fprintf(&b, "streamer demo recommend — %d movies, %d users with hidden tastes, configs/%s (up %s)\n",
		recItems, recUsers, recConfig, up.Round(time.Second))
	fmt.Fprintf(&b, "broker %s  topics %s (ratings and labels in) → %s (scores), %s (dead letters)\n",
		brokers, cfg.Kafka.InputTopic, cfg.Kafka.OutputTopic, cfg.Kafka.DLQTopic)
	fmt.Fprintf(&b, "http://%s  POST /v1/rank  /metrics  ready=%v\n", svc.Addr(), svc.Ready())
	b.WriteString(movedNotice(o.brokerListen, brokers, o.listen, svc.Addr()))
	b.WriteString("\n")

	stats.mu.Lock()
	now := time.Now()
	cut := 0
	for cut < len(stats.latencies) && now.Sub(stats.latencies[cut].at) > 10*time.Second {
		cut++
	}
	stats.latencies = stats.latencies[cut:]
	lat := make([]float64, len(stats.latencies))
	for i, l := range stats.latencies {
		lat[i] = l.d.Seconds() * 1000
	}
	answered, errs, lastErr := stats.answered, stats.errors, stats.lastErr
	var mean recOutcome
	for _, oc := range stats.outcomes {
		mean.served += oc.served
		mean.random += oc.random
		mean.best += oc.best
	}
	nOut := len(stats.outcomes)
	var sq float64
	for _, e := range stats.sqErrs {
		sq += e
	}
	nSq := len(stats.sqErrs)
	var shown []recRequest
	for i := len(stats.recent) - 1; i >= 0 && len(shown) < 3; i-- {
		if r := stats.recent[i]; r.rated {
			shown = append(shown, *r)
		}
	}
	stats.mu.Unlock()

	ratingsNote := fmt.Sprintf("%.0f ratings/s sent", o.rate)
	if o.rate == 0 {
		ratingsNote = "no ratings of the demo's own after the first 5000: --rate 0"
	}
	fmt.Fprintf(&b, "events consumed %.0f  %.0f/s  (%s)  dead-lettered %.0f\n", consumed, rates[0], ratingsNote,
		gauge(reg, "streamer_events_rejected_total", nil))
	slices.Sort(lat)
	fmt.Fprintf(&b, "requests %.1f/s answered %d, errors %d   client latency p50 %s  p99 %s (last 10 s)\n",
		rates[1], answered, errs, msQuantile(lat, 0.5), msQuantile(lat, 0.99))
	if lastErr != "" {
		fmt.Fprintf(&b, "  last error: %.120s\n", lastErr)
	}
	fmt.Fprintf(&b, "labels for shown items: joined %.0f  unknown_id %.0f  too_late %.0f  waiting %.0f\n\n",
		gauge(reg, "streamer_labels_total", map[string]string{"outcome": "joined"}),
		gauge(reg, "streamer_labels_total", map[string]string{"outcome": "unknown_id"}),
		gauge(reg, "streamer_labels_total", map[string]string{"outcome": "too_late"}),
		gauge(reg, "streamer_join_pending", map[string]string{"source": "requests"}))

	if nOut > 0 {
		n := float64(nOut)
		fmt.Fprintf(&b, "true mean rating of the top %d (last %d requests, %d candidates each):\n", recK, nOut, recCandidates)
		fmt.Fprintf(&b, "  served (%s, %s)  %.2f   random order %.2f   best order %.2f   (%.0f%% of the possible gain)\n",
			model, exploreName(cfg), mean.served/n, mean.random/n, mean.best/n,
			100*(mean.served-mean.random)/max(1e-9, mean.best-mean.random))
	} else {
		if o.requestsRate == 0 {
			b.WriteString("true mean rating of the top 5: the demo sends no requests (--requests-rate 0)\n")
		} else {
			b.WriteString("true mean rating of the top 5: no request answered yet (waiting for the consumer group)\n")
		}
	}
	if opeN := gauge(reg, "streamer_ope_labels_total", nil); opeN > 0 {
		v := func(policy, est string) float64 {
			return gauge(reg, "streamer_ope_value", map[string]string{"policy": policy, "estimator": est})
		}
		fmt.Fprintf(&b, "off-policy (service, first items' ratings, n %.0f): logged %.2f   greedy ips %.2f ± %.2f  snips %.2f   agreement %.2f\n",
			opeN, v("logged", "observed"), v("greedy", "ips"), gauge(reg, "streamer_ope_ci95", nil), v("greedy", "snips"),
			gauge(reg, "streamer_ope_greedy_agreement", nil))
	} else {
		b.WriteString("off-policy (service): no label of a first item yet\n")
	}
	rm := map[string]string{"model": model}
	runMean := "—"
	if nSq > 0 {
		runMean = fmt.Sprintf("%.3f", math.Sqrt(sq/float64(nSq)))
	}
	fmt.Fprintf(&b, "RMSE (last %d ratings): %s %.3f   per_user %.3f   running mean %s   interval coverage %.2f\n",
		recRMSEWindow, model, gauge(reg, "streamer_model_rmse", rm), gauge(reg, "streamer_model_rmse", map[string]string{"model": "per_user"}),
		runMean, gauge(reg, "streamer_calibration_coverage", rm))
	b.WriteString(calibrationTable(reg, "liked"))

	level := "conformal"
	for _, r := range shown {
		for _, it := range r.resp.Ranked {
			if in := it.Certainty.Interval; in != nil {
				level = fmt.Sprintf("%.0f%%", 100*in.Level)
			}
		}
	}
	fmt.Fprintf(&b, "\nrecent ranked lists: item (genres) predicted rating [%s interval] propensity → the rating given a second later\n", level)
	if len(shown) == 0 {
		b.WriteString("  (none rated yet)\n")
	}
	for _, r := range shown {
		fb := ""
		if r.resp.Fallback != "" {
			fb = " (fallback " + r.resp.Fallback + ")"
		}
		fmt.Fprintf(&b, "  %s for %s%s:\n", r.id, world.users[r.user].id, fb)
		for j, it := range r.resp.Ranked {
			genres := ""
			if i := itemIndex(it.Item); i >= 0 {
				genres = strings.Join(world.items[i].genres, ",")
			}
			iv := "      —     "
			if in := it.Certainty.Interval; in != nil {
				iv = fmt.Sprintf("[%.2f, %.2f]", in.Lower, in.Upper)
			}
			given := "?"
			if j < len(r.ratings) {
				given = strconv.FormatFloat(r.ratings[j], 'f', 1, 64)
			}
			fmt.Fprintf(&b, "    %d. %-5s %-28s %5.2f %s  p %.3f  → %s\n", j+1, it.Item, genres, it.Prediction, iv, it.Propensity, given)
		}
	}

	b.WriteString("\njoin in (from the repository's root; README, \"Recommendations\"):\n")
	for _, c := range joinInCommands(world, cfg, strings.Split(brokers, ",")[0], svc.Addr()) {
		b.WriteString("  " + c + "\n")
	}
	return b.String()
}

// joinInCommands are the README's walk-through on the demo's addresses:
// a rating and its scores, a ranking, a label for an item it showed, the
// label's join and the off-policy estimates.
func joinInCommands(world *recWorld, cfg config.Config, broker, httpAddr string) []string {
	in, host := cfg.Kafka.InputTopic, "localhost:"+httpAddr[strings.LastIndexByte(httpAddr, ':')+1:]
	return []string{
		fmt.Sprintf("echo '%s' | kcat -P -b %s -t %s -k u42", world.ratingEvent("my-1", 41, 6, 4).Value, broker, in),
		fmt.Sprintf("kcat -C -u -b %s -t %s -o beginning -q | grep -m%d '\"my-1\"'", broker, cfg.Kafka.OutputTopic, len(cfg.Models)),
		fmt.Sprintf("curl -s %s/v1/rank --data @examples/rank-request.json", host),
		fmt.Sprintf("echo '%s' | kcat -P -b %s -t %s -k u42", labelEvent("my-q-1", "u42", world.items[6].id, 5).Value, broker, in),
		fmt.Sprintf("curl -s %s/metrics | grep '^streamer_labels_total'", host),
		fmt.Sprintf("curl -s %s/metrics | grep '^streamer_ope_value'", host),
		fmt.Sprintf("curl -s %s/v1/rank --data @examples/rank-by-id.json", host),
		fmt.Sprintf("curl -s %s/v1/profiles/item/m7 | grep -o '\"attributes\":{[^}]*}'", host),
	}
}

func exploreName(cfg config.Config) string {
	e := cfg.Rank.Explore
	if e.Policy == "epsilon" {
		return "epsilon " + strconv.FormatFloat(e.Epsilon, 'f', -1, 64)
	}
	return e.Policy
}

// msQuantile is the q-quantile of sorted milliseconds, formatted.
func msQuantile(sorted []float64, q float64) string {
	if len(sorted) == 0 {
		return "—"
	}
	i := min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)
	return fmt.Sprintf("%.2f ms", sorted[max(0, i)])
}

// calibrationTable shows a classifier's calibration as the service
// measures it: per decile of the published probability, the observed rate
// of positives against the mean Venn–Abers interval published.
func calibrationTable(reg prometheus.Gatherer, model string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (rating >= 4): accuracy %.3f; calibration per decile of the published p(liked) (observed in [lower, upper]?):\n",
		model, gauge(reg, "streamer_model_accuracy", map[string]string{"model": model}))
	var cols []string
	for d := range 10 {
		l := map[string]string{"model": model, "decile": strconv.Itoa(d)}
		n := gauge(reg, "streamer_calibration_events", l)
		if n == 0 {
			continue
		}
		cols = append(cols, fmt.Sprintf("%d: %.2f in [%.2f, %.2f] n %.0f", d,
			gauge(reg, "streamer_calibration_observed", l), gauge(reg, "streamer_calibration_lower", l),
			gauge(reg, "streamer_calibration_upper", l), n))
	}
	if len(cols) == 0 {
		b.WriteString("  not yet (from the 100th rating)\n")
	}
	for i := 0; i < len(cols); i += 3 {
		b.WriteString("  " + strings.Join(cols[i:min(len(cols), i+3)], "   ") + "\n")
	}
	return b.String()
}
