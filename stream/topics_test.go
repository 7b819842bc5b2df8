package stream

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
)

// TestServiceTopics: the topics the service uses, with their keys: the
// response topic only with ranking requests on and apart from the output
// topic, the changelog when set.
func TestServiceTopics(t *testing.T) {
	names := func(ts []ServiceTopic) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Key+"="+x.Name)
		}
		return out
	}
	cfg := config.Default()
	base := []string{"kafka.input_topic=events", "kafka.output_topic=scores", "kafka.dlq_topic=events.dlq"}
	if got := names(ServiceTopics(cfg)); !slices.Equal(got, base) {
		t.Errorf("defaults: %q", got)
	}
	cfg.Rank.ResponseTopic = "ranked" // rank.model unset: requests off
	if got := names(ServiceTopics(cfg)); !slices.Equal(got, base) {
		t.Errorf("response topic, requests off: %q", got)
	}
	cfg.Rank.Model = "m"
	cfg.Snapshot.ChangelogTopic = "streamer.state"
	got := ServiceTopics(cfg)
	if want := append(slices.Clone(base), "rank.response_topic=ranked", "snapshot.changelog_topic=streamer.state"); !slices.Equal(names(got), want) {
		t.Errorf("response and changelog topics: %q, want %q", names(got), want)
	}
	if !got[4].Changelog || got[3].Changelog {
		t.Errorf("only the changelog is marked so: %+v", got)
	}
	cfg.Rank.ResponseTopic = cfg.Kafka.OutputTopic
	if got := names(ServiceTopics(cfg)); len(got) != 4 || slices.Contains(got, "rank.response_topic=scores") {
		t.Errorf("response topic = output topic: %q", got)
	}
	cfg.Rank.LogTopic = "ranklog"
	if got := names(ServiceTopics(cfg)); !slices.Contains(got, "rank.log_topic=ranklog") {
		t.Errorf("log topic: %q", got)
	}
	cfg.Rank.Model = ""
	if got := names(ServiceTopics(cfg)); slices.Contains(got, "rank.log_topic=ranklog") {
		t.Errorf("log topic, requests off: %q", got)
	}
}

// TestMissingTopicSaysHowToCreate: a topic the config names that does not
// exist stops start-up naming the key, the topic, the broker's error and
// the command that creates the topics.
func TestMissingTopicSaysHowToCreate(t *testing.T) {
	b, err := StartBroker(0, TopicSpec{Name: "events", Partitions: 1}, TopicSpec{Name: "events.dlq", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := config.Default()
	cfg.Kafka.Brokers = b.Addrs()
	err = (*KafkaSecurity)(nil).CheckAccess(context.Background(), cfg, AuthCheckTimeout)
	r, ok := errors.AsType[*BrokerRefusal](err)
	if !ok || r.Key != "kafka.output_topic" || r.Code != kafka.UnknownTopicOrPartition {
		t.Fatalf("CheckAccess: %v, want a refusal of kafka.output_topic", err)
	}
	for _, w := range []string{`kafka.output_topic: topic "scores" does not exist`, "create it with: streamer topics create --config <your config>", "UNKNOWN_TOPIC_OR_PARTITION"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
}

// TestBrokerDeleteRecords: the embedded broker reports a group's committed
// offsets, and deletes a partition's records below an offset (a reader
// from the first offset then starts there), refusing one past its end.
func TestBrokerDeleteRecords(t *testing.T) {
	b, err := StartBroker(0, TopicSpec{Name: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if err := b.SetTopicConfig(ctx, "t", "segment.bytes", "4096"); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "t", BatchSize: 10, BatchTimeout: time.Millisecond}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 100 {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if got := b.Committed("g", "t"); len(got) != 0 {
		t.Errorf("committed before any commit: %v", got)
	}
	rd := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), GroupID: "g", Topic: "t", StartOffset: kafka.FirstOffset, MaxWait: 50 * time.Millisecond})
	defer rd.Close()
	var last kafka.Message
	for range 60 {
		if last, err = rd.FetchMessage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rd.CommitMessages(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := b.Committed("g", "t"); len(got) != 1 || got[0] != 60 {
		t.Fatalf("committed %v, want partition 0 at 60", got)
	}
	if err := b.DeleteRecords("t", 0, 60); err != nil {
		t.Fatal(err)
	}
	conn, err := kafka.DialLeader(ctx, "tcp", b.Addrs()[0], "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if first, err := conn.ReadFirstOffset(); err != nil || first != 60 {
		t.Errorf("first offset after deleting below 60: %d, %v", first, err)
	}
	if err := b.DeleteRecords("t", 0, 101); err == nil || !strings.Contains(err.Error(), "t/0") {
		t.Errorf("deleting past the end: %v, want an error naming t/0", err)
	}
}
