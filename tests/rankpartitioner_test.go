package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestRankPartitionerCheck: the producers map keys to the input's four
// partitions with murmur2. An instance told rank.partitioner fnv1a
// (key-scoped rank model: POST /v1/rank finds a key's state by that
// mapping) counts, within seconds of the traffic, the keyed events that
// came on another partition than fnv1a maps them to
// (streamer_rank_partitioner_mismatch_total, of
// streamer_rank_partitioner_checked_total), logs it, and says it in
// /readyz's body while staying ready (200); an instance told murmur2, in
// another group on the same events, checks as many and reports none.
func TestRankPartitionerCheck(t *testing.T) {
	b := startBroker(t, 4)
	cfg := func(group, partitioner string) string {
		c := strings.ReplaceAll(strings.ReplaceAll(rankConfig, "group: rank", "group: "+group), "%DIR%", "")
		c = strings.Replace(c, "snapshot:\n  dir: \n  every: 100ms\n", "", 1)
		c = strings.Replace(c, "response_topic: ranked\n", "partitioner: "+partitioner+"\n", 1)
		return strings.Replace(c, "level: warn", "level: info", 1)
	}
	wrong := startStreamer(t, b, cfg("wrong", "fnv1a"))
	right := startStreamer(t, b, cfg("right", "murmur2"))
	if code, body := wrong.readyzBody(); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz before any event: %d %q", code, body)
	}
	const n = 400
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		y := 2*(i%2) - 1
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprint("user-", i%97)), Value: eventJSON(fmt.Sprint("e", i), []float64{1, 0, float64(i % 3), 0}, &y)}
	}
	start := time.Now()
	produce(t, b, "events", msgs)
	for _, p := range []*proc{wrong, right} {
		waitFor(t, 30*time.Second, "the events checked", func() bool {
			return p.metric(t, "streamer_rank_partitioner_checked_total", "") == n
		})
	}
	t.Logf("every event checked %v after the first was produced", time.Since(start).Round(time.Millisecond))
	mismatched := wrong.metric(t, "streamer_rank_partitioner_mismatch_total", "")
	if mismatched < n/2 || mismatched == n {
		t.Errorf("fnv1a against murmur2: %v of %d mismatched, want about 3/4", mismatched, n)
	}
	if m := right.metric(t, "streamer_rank_partitioner_mismatch_total", ""); m != 0 {
		t.Errorf("murmur2 against murmur2: %v mismatched", m)
	}
	code, body := wrong.readyzBody()
	want := fmt.Sprintf("ready\nwarning: rank.partitioner fnv1a maps %d of the %d keyed input events checked to another partition than the one they came on (key \"user-", int(mismatched), n)
	if code != 200 || !strings.HasPrefix(body, want) {
		t.Errorf("/readyz: %d %q, want 200 %q…", code, body, want)
	}
	if code, body := right.readyzBody(); code != 200 || body != "ready\n" {
		t.Errorf("/readyz of the right one: %d %q", code, body)
	}
	if logs := wrong.logs.String(); strings.Count(logs, "rank.partitioner does not map keys") != 1 {
		t.Errorf("the warning logged %d times, want once:\n%s", strings.Count(logs, "rank.partitioner does not map keys"), logs)
	}
	for _, p := range []*proc{wrong, right} {
		if err := p.stop(t); err != nil {
			t.Fatalf("exit: %v", err)
		}
	}
}
