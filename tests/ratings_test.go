package tests

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/tests/internal/ratings"
)

const fmRatingsConfig = `
kafka:
  brokers: [%BROKERS%]
  group: ratings
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
models:
  # One factorization machine for every user: a bias per user and per
  # item, and the user × item interaction by latent factors.
  - name: rating
    type: fm
    loss: squared
    factorize: [[user, item]]
    features:
      hash: {bits: 16, seed: 1}
      namespaces: [user, item]
`

// ratingsWorld is TestFMRatingsOverKafka's stream: 200 users × 500 items,
// biases N(0, 0.5²), 5 latent factors whose interaction has standard
// deviation 1, noise 0.5; uniform random (user, item) pairs. The noise
// bounds any model's RMSE below by 0.5; the biases alone leave the
// interaction and the noise, √1.25 ≈ 1.12. (At 500 users × 2 000 items the
// same 100 000 ratings are too few for the factors: fm 1.05, biases 1.16.)
var ratingsWorld = ratings.World{Users: 200, Items: 500, Factors: 5, Base: 3, BiasSD: 0.5, InteractionSD: 1, Noise: 0.5, Seed: 2026}

// TestFMRatingsOverKafka: a factorization machine learns a synthetic rating
// world through the real binary over Kafka (3 partitions, events keyed by
// user with hashed user and item namespaces, labels the real-valued
// ratings). Every event is scored before it is learned; over the last half
// of the 100 000 ratings the fm's prequential RMSE is at most 0.65 and
// below 0.8 × that of the running mean with user and item biases learned
// by SGD (step 0.05), computed here on the same stream: the fm learns the
// interaction that biases cannot.
func TestFMRatingsOverKafka(t *testing.T) {
	useFastBinary(t)
	const n = 100_000
	rs := ratingsWorld.Ratings(n)
	b := startBroker(t, 3)
	p := startStreamer(t, b, fmRatingsConfig)
	start := time.Now()
	msgs := make([]kafka.Message, n)
	for i, r := range rs {
		msgs[i] = kafka.Message{Key: ratings.AppendKey(nil, r), Value: ratings.AppendEvent(nil, i, r, nil)}
	}
	produce(t, b, "events", msgs)
	col := ratings.NewCollector(n)
	readRecords(t, b, "scores", n, 2*time.Minute, func(m kafka.Message) {
		if _, _, err := col.Add(m.Value); err != nil {
			t.Fatal(err)
		}
	})
	elapsed := time.Since(start)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}

	base := ratings.RunBaselines(rs, nil, 0.05, math.Inf(-1), math.Inf(1))
	res := ratings.Judge(rs, col, base, ratings.Options{From: n / 2, Lo: math.Inf(-1), Hi: math.Inf(1)})
	mean, biases := ratings.BaselineRMSE(rs, base, n/2)
	all := ratings.Judge(rs, col, base, ratings.Options{Lo: math.Inf(-1), Hi: math.Inf(1)})
	if len(res) != 1 || res[0].Model != "rating" {
		t.Fatalf("records of models %+v, want the fm's alone", res)
	}
	fm := res[0]
	t.Logf("%d ratings (%d users × %d items) through the broker and back in %.1f s; fm: %s, %d records",
		n, ratingsWorld.Users, ratingsWorld.Items, elapsed.Seconds(), fm.Kind, fm.Records)
	t.Logf("prequential RMSE, last half (%d ratings): fm %.4f (%d predicted), running mean + biases %.4f, running mean %.4f; whole stream: fm %.4f, biases %.4f (noise floor 0.5)",
		n-n/2, float64(fm.RMSE), fm.Predicted, biases, mean, float64(all[0].RMSE), float64(all[0].BiasesRMSE))
	if fm.Kind != ratings.KindRating.String() || fm.Predicted != n-n/2 {
		t.Fatalf("the fm's records: kind %s, %d of the last %d events with a rating prediction; want a rating for each", fm.Kind, fm.Predicted, n-n/2)
	}
	if r := float64(fm.RMSE); !(r <= 0.65) || !(r < 0.8*biases) {
		t.Errorf("fm's RMSE over the last half %.4f: want ≤ 0.65 and < 0.8 × the bias baseline's %.4f (= %.4f)", r, biases, 0.8*biases)
	}
}

// readRecords reads n records of topic from the beginning, in a group of
// its own, without committing (the harness's consumer commits every
// message, too slow for 100 000), and hands each to add.
func readRecords(t *testing.T, b *stream.Broker, topic string, n int, timeout time.Duration, add func(kafka.Message)) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: "test-read-" + topic, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond, QueueCapacity: 10000})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for i := range n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("read %d of %d records of %s: %v", i, n, topic, err)
		}
		add(m)
	}
}
