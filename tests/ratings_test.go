package tests

import (
	"context"
	"math"
	"strings"
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

// TestRatingsConfigOverKafka: configs/recommendation-ratings.yaml as
// shipped (but for the brokers, the listen address and the snapshot
// directory) on ratingsWorld's stream clipped to the config's 0.5..5
// scale, through the real binary, with one rating off the scale midway,
// which must be dead-lettered naming the model's label range: over the
// last half, each of its models against the baselines a practitioner
// would try first, computed here on the same stream. The rating fm beats
// the biases; the per-user correction of the fm (per_user, residual) stays
// within 2% of the fm and beats the biases; the click model (liked, rating
// ≥ 4) beats the biases' predicted rating as a score, in ROC AUC and in
// accuracy at that baseline's best threshold, and the running rate in log
// loss.
func TestRatingsConfigOverKafka(t *testing.T) {
	useFastBinary(t)
	const n = 60_000
	cfg := shippedConfig(t, "recommendation-ratings.yaml")
	b, err := stream.StartBroker(0, stream.TopicSpec{Name: "ratings", Partitions: 3}, stream.TopicSpec{Name: "rating-scores", Partitions: 3},
		stream.TopicSpec{Name: "ratings.dlq", Partitions: 1}, stream.TopicSpec{Name: "ranked", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p := startStreamer(t, b, cfg.cfg)
	world := ratingsWorld
	world.Min, world.Max = 0.5, 5 // the config's label.min and label.max
	rs := world.Ratings(n)
	msgs := make([]kafka.Message, 0, n+1)
	for i, r := range rs {
		if i == n/2 {
			// A rating off the scale: dead-lettered, or every later
			// prediction would be off by 1e12/n and fail the checks below.
			msgs = append(msgs, kafka.Message{Key: ratings.AppendKey(nil, r),
				Value: []byte(`{"id":"off-scale","features":{"user":{"id":"1"},"item":{"id":"2"}},"label":1e12}`)})
		}
		msgs = append(msgs, kafka.Message{Key: ratings.AppendKey(nil, r), Value: ratings.AppendEvent(nil, i, r, nil)})
	}
	produce(t, b, "ratings", msgs)
	col := ratings.NewCollector(n)
	readRecords(t, b, "rating-scores", 3*n, 2*time.Minute, func(m kafka.Message) {
		if _, _, err := col.Add(m.Value); err != nil {
			t.Fatal(err)
		}
	})
	readRecords(t, b, "ratings.dlq", 1, time.Minute, func(m kafka.Message) {
		h := map[string]string{}
		for _, kv := range m.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if !strings.Contains(string(m.Value), `"off-scale"`) || h["streamer.reason"] != "bad_label" ||
			!strings.Contains(h["streamer.detail"], "outside model rating's label range [0.5, 5]") {
			t.Errorf("dead letter %s, headers %v: want the rating off the scale, bad_label, naming rating's range", m.Value, h)
		}
	})
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}

	const liked = 4
	inf := math.Inf(1)
	base := ratings.RunBaselines(rs, nil, 0.05, -inf, inf)
	res := map[string]ratings.Result{}
	for _, r := range ratings.Judge(rs, col, base, ratings.Options{From: n / 2, Lo: -inf, Hi: inf, Liked: liked}) {
		res[r.Model] = r
	}
	_, biases := ratings.BaselineRMSE(rs, base, n/2)
	cb := ratings.ClassifierBaselines(rs, base, liked, n/2)
	rate, byBiases := cb[0], cb[1]
	rating, perUser, click := res["rating"], res["per_user"], res["liked"]
	t.Logf("last %d ratings: RMSE rating %.4f, per_user %.4f, biases %.4f; liked: accuracy %.4f, log loss %.4f, AUC %.4f; %s: accuracy %.4f, AUC %.4f; %s: log loss %.4f",
		n-n/2, float64(rating.RMSE), float64(perUser.RMSE), biases, float64(click.Accuracy), float64(click.LogLoss), float64(click.AUC),
		byBiases.Name, float64(byBiases.Accuracy), float64(byBiases.AUC), rate.Name, float64(rate.LogLoss))
	if rating.Predicted != n-n/2 || perUser.Predicted != n-n/2 || click.Decisions != n-n/2 {
		t.Fatalf("records judged: rating %d, per_user %d, liked %d of %d", rating.Predicted, perUser.Predicted, click.Decisions, n-n/2)
	}
	if !(float64(rating.RMSE) < biases) {
		t.Errorf("rating's RMSE %.4f: want below the biases' %.4f", float64(rating.RMSE), biases)
	}
	if r := float64(perUser.RMSE); !(r <= 1.02*float64(rating.RMSE)) || !(r < biases) {
		t.Errorf("per_user's RMSE %.4f: want ≤ 1.02 × rating's %.4f and below the biases' %.4f", r, float64(rating.RMSE), biases)
	}
	if !(click.AUC > byBiases.AUC) || !(click.Accuracy > byBiases.Accuracy) || !(click.LogLoss < rate.LogLoss) {
		t.Errorf("liked: AUC %.4f, accuracy %.4f, log loss %.4f; want AUC and accuracy above the biases' score's %.4f and %.4f, log loss below the running rate's %.4f",
			float64(click.AUC), float64(click.Accuracy), float64(click.LogLoss), float64(byBiases.AUC), float64(byBiases.Accuracy), float64(rate.LogLoss))
	}
}
