package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

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
