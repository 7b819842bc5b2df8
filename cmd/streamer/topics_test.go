package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	meta "github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream"
)

// runTopics runs `streamer topics` with args and returns its stdout and
// error.
func runTopics(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"topics"}, args...))
	err := root.Execute()
	t.Logf("streamer topics %s:\n%s%s(err %v)", strings.Join(args, " "), out.String(), errOut.String(), err)
	return out.String(), err
}

// topicBroker starts an embedded broker with no topics, and checks that it
// does not create topics a client asks about (the test would otherwise
// pass whether or not the command creates them).
func topicBroker(t *testing.T) *stream.Broker {
	t.Helper()
	b, err := stream.StartBroker(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	for _, a := range b.Addrs() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("the broker listens on %s, not 127.0.0.1", a)
		}
	}
	tr := &kafka.Transport{ClientID: "topics-test"}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tr.RoundTrip(ctx, kafka.TCP(b.Addrs()...), &meta.Request{TopicNames: []string{"probe"}, AllowAutoTopicCreation: true}); err != nil {
		t.Fatal(err)
	}
	if got := describeTopics(t, b, "probe"); got["probe"].exists {
		t.Fatal("the embedded broker auto-creates topics")
	}
	return b
}

// topicState is a topic as the broker describes it.
type topicState struct {
	exists                  bool
	partitions, replication int
	cleanupPolicy           string
}

// describeTopics asks b about the topics without creating any.
func describeTopics(t *testing.T, b *stream.Broker, names ...string) map[string]topicState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &kafka.Transport{ClientID: "topics-test", MetadataTopics: names}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Transport: tr}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]topicState{}
	for _, tp := range md.Topics {
		if tp.Error != nil || len(tp.Partitions) == 0 {
			continue
		}
		st := topicState{exists: true, partitions: len(tp.Partitions), replication: len(tp.Partitions[0].Replicas)}
		dc, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: tp.Name, ConfigNames: []string{"cleanup.policy"}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range dc.Resources {
			for _, e := range r.ConfigEntries {
				if e.ConfigName == "cleanup.policy" {
					st.cleanupPolicy = e.ConfigValue
				}
			}
		}
		out[tp.Name] = st
	}
	return out
}

// configTopics returns every topic key the config package defines that
// cfg sets (a string field whose YAML key ends in _topic, found by
// reflection, so that a topic key added later is checked too), by key.
// rank.response_topic counts only when ranking requests are on and it is
// not the output topic (the service does not use it otherwise).
func configTopics(cfg config.Config) map[string]string {
	out := map[string]string{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			p := strings.TrimPrefix(path+"."+key, ".")
			switch fv := v.Field(i); {
			case fv.Kind() == reflect.Struct:
				walk(fv, p)
			case fv.Kind() == reflect.String && strings.HasSuffix(key, "_topic") && fv.String() != "":
				out[p] = fv.String()
			}
		}
	}
	walk(reflect.ValueOf(cfg), "")
	if t, ok := out["rank.response_topic"]; ok && (!cfg.Rank.Enabled() || t == cfg.Kafka.OutputTopic) {
		delete(out, "rank.response_topic")
	}
	return out
}

// TestTopicsCreate: for each shipped config pointed at an embedded broker
// that does not auto-create topics, `topics create` makes every topic the
// config names (each key of the config package ending in _topic that the
// config sets) with the partitions asked for, the changelog compacted with
// one partition; run again, it reports them as existing and exits 0.
func TestTopicsCreate(t *testing.T) {
	for _, c := range []struct {
		config    string
		changelog string // STREAMER_SNAPSHOT_CHANGELOG_TOPIC
		want      []string
	}{
		{"recommendation-ratings.yaml", "", []string{"ratings", "rating-scores", "ratings.dlq", "ranked"}},
		{"recommendation.yaml", "", []string{"impressions", "impression-scores", "impressions.dlq"}},
		{"streamer.yaml", "", []string{"events", "scores", "events.dlq"}},
		{"streamer.yaml", "streamer.state", []string{"events", "scores", "events.dlq", "streamer.state"}},
	} {
		name := strings.TrimSuffix(c.config, ".yaml")
		if c.changelog != "" {
			name += "+changelog"
		}
		t.Run(name, func(t *testing.T) {
			b := topicBroker(t)
			t.Setenv("STREAMER_KAFKA_BROKERS", strings.Join(b.Addrs(), ","))
			t.Setenv("STREAMER_SNAPSHOT_CHANGELOG_TOPIC", c.changelog)
			path := "../../configs/" + c.config
			cfg, err := config.Load(path, []string{"STREAMER_SNAPSHOT_CHANGELOG_TOPIC=" + c.changelog}, newModelTypes())
			if err != nil {
				t.Fatal(err)
			}
			named := configTopics(cfg)
			var names []string
			for _, n := range named {
				names = append(names, n)
			}
			slices.Sort(names)
			if want := slices.Sorted(slices.Values(c.want)); !slices.Equal(names, want) {
				t.Fatalf("the config names %v (%v), the test expects %v", names, named, want)
			}
			if got := describeTopics(t, b, names...); len(got) != 0 {
				t.Fatalf("topics exist before the command: %v", got)
			}

			out, err := runTopics(t, "create", "--config", path, "--partitions", "4")
			if err != nil {
				t.Fatalf("topics create: %v", err)
			}
			got := describeTopics(t, b, names...)
			for key, n := range named {
				st := got[n]
				wantParts, wantLine := 4, fmt.Sprintf("created %s (4 partitions, replication 1)\n", n)
				if key == "snapshot.changelog_topic" {
					wantParts, wantLine = 1, fmt.Sprintf("created %s (1 partition, replication 1, cleanup.policy=compact)\n", n)
					if st.cleanupPolicy != "compact" {
						t.Errorf("%s: cleanup.policy %q, want compact", n, st.cleanupPolicy)
					}
				}
				if !st.exists || st.partitions != wantParts || st.replication != 1 {
					t.Errorf("%s (%s) after topics create: %+v, want %d partitions, replication 1", n, key, st, wantParts)
				}
				if !strings.Contains(out, wantLine) {
					t.Errorf("the output has no %q", wantLine)
				}
			}
			if n := strings.Count(out, "\n"); n != len(names) {
				t.Errorf("%d lines, want one per topic (%d)", n, len(names))
			}

			// Again: every topic exists, nothing changes, exit 0.
			out, err = runTopics(t, "create", "--config", path, "--partitions", "2")
			if err != nil {
				t.Fatalf("topics create again: %v", err)
			}
			for key, n := range named {
				want := fmt.Sprintf("exists %s (4 partitions, replication 1)\n", n)
				if key == "snapshot.changelog_topic" {
					want = fmt.Sprintf("exists %s (1 partition, replication 1)\n", n)
				}
				if !strings.Contains(out, want) {
					t.Errorf("the second run's output has no %q", want)
				}
			}
			if strings.Contains(out, "created") {
				t.Errorf("the second run created topics")
			}
			if got := describeTopics(t, b, names...); got[c.want[0]].partitions != 4 {
				t.Errorf("the second run changed %s: %+v", c.want[0], got[c.want[0]])
			}
		})
	}
}

// TestTopicsCreateDryRunAndErrors: --dry-run creates nothing and says what
// it would create and what exists; a replication factor the single broker
// cannot give fails each topic, naming it and the broker's error (exit
// status 1), and creates none; a topic that exists is no error meanwhile.
func TestTopicsCreateDryRunAndErrors(t *testing.T) {
	b := topicBroker(t)
	t.Setenv("STREAMER_KAFKA_BROKERS", strings.Join(b.Addrs(), ","))
	path := "../../configs/recommendation.yaml"
	if err := b.CreateTopic(context.Background(), "impressions", 2); err != nil {
		t.Fatal(err)
	}

	out, err := runTopics(t, "create", "-c", path, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	want := "exists impressions (2 partitions, replication 1)\n" +
		"would create impression-scores (3 partitions, the brokers' default replication)\n" +
		"would create impressions.dlq (3 partitions, the brokers' default replication)\n"
	if out != want {
		t.Errorf("--dry-run:\n%s\nwant\n%s", out, want)
	}
	if got := describeTopics(t, b, "impression-scores", "impressions.dlq"); len(got) != 0 {
		t.Errorf("--dry-run created %v", got)
	}

	out, err = runTopics(t, "create", "-c", path, "--replication-factor", "3")
	if err == nil || !strings.Contains(err.Error(), "2 of 3 topics not created: impression-scores, impressions.dlq") {
		t.Errorf("replication 3 on one broker: error %v, want the two topics not created", err)
	}
	for _, w := range []string{
		"exists impressions (2 partitions, replication 1)\n",
		"failed impression-scores: kafka.output_topic: not created: ",
		"failed impressions.dlq: kafka.dlq_topic: not created: ",
		"INVALID_REPLICATION_FACTOR",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the output has no %q", w)
		}
	}
	if got := describeTopics(t, b, "impression-scores", "impressions.dlq"); len(got) != 0 {
		t.Errorf("created %v with replication 3 on one broker", got)
	}

	if _, err := runTopics(t, "create", "-c", path, "--partitions", "0"); err == nil || !strings.Contains(err.Error(), "--partitions 0") {
		t.Errorf("--partitions 0: %v", err)
	}
	t.Setenv("STREAMER_KAFKA_BROKERS", "127.0.0.1:1")
	if _, err := runTopics(t, "create", "-c", path, "--timeout", "5s"); err == nil || !strings.Contains(err.Error(), "no broker of [127.0.0.1:1] answered") {
		t.Errorf("no broker: %v", err)
	}
}

// TestTopicsCreateSASL: the command connects as the service does, with
// kafka.sasl: as a superuser it creates the topics; as alice, who may
// describe every topic but create none, the topics that exist are
// reported as existing and the one missing fails with the brokers'
// TOPIC_AUTHORIZATION_FAILED; with a wrong password it stops at once,
// saying the authentication failed.
func TestTopicsCreateSASL(t *testing.T) {
	const adminPW, alicePW = "admin-secret-1", "alice-secret-2"
	b, err := stream.StartBrokerWith(stream.BrokerConfig{
		SASL: []stream.SASLUser{{Mechanism: config.SASLScramSHA256, User: "admin", Password: adminPW}},
		ACLs: true,
		Users: []stream.ACLUser{{SASLUser: stream.SASLUser{Mechanism: config.SASLScramSHA256, User: "alice", Password: alicePW},
			Grants: []stream.Grant{{Resource: "topic", Name: "*", Operation: "describe"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	t.Setenv("STREAMER_KAFKA_BROKERS", strings.Join(b.Addrs(), ","))
	t.Setenv("STREAMER_KAFKA_SASL_MECHANISM", config.SASLScramSHA256)
	path := "../../configs/streamer.yaml"

	t.Setenv("STREAMER_KAFKA_SASL_USERNAME", "admin")
	t.Setenv("STREAMER_KAFKA_SASL_PASSWORD", adminPW)
	out, err := runTopics(t, "create", "-c", path, "--replication-factor", "1")
	if err != nil || out != "created events (3 partitions, replication 1)\ncreated scores (3 partitions, replication 1)\ncreated events.dlq (3 partitions, replication 1)\n" {
		t.Fatalf("as admin: %v\n%s", err, out)
	}
	// The broker's own admin client agrees: the topic is there.
	if err := b.CreateTopic(context.Background(), "events", 1); err == nil || !strings.Contains(err.Error(), "Topic Already Exists") {
		t.Errorf("creating events again: %v, want it to exist", err)
	}

	t.Setenv("STREAMER_KAFKA_SASL_USERNAME", "alice")
	t.Setenv("STREAMER_KAFKA_SASL_PASSWORD", alicePW)
	t.Setenv("STREAMER_SNAPSHOT_CHANGELOG_TOPIC", "streamer.state")
	out, err = runTopics(t, "create", "-c", path)
	if err == nil || !strings.Contains(err.Error(), "1 of 4 topics not created: streamer.state") {
		t.Errorf("as alice: error %v, want streamer.state not created", err)
	}
	for _, w := range []string{"exists events (3 partitions, replication 1)\n", "exists scores ", "exists events.dlq ",
		"failed streamer.state: snapshot.changelog_topic: not created: ", "TOPIC_AUTHORIZATION_FAILED"} {
		if !strings.Contains(out, w) {
			t.Errorf("as alice: the output has no %q", w)
		}
	}

	t.Setenv("STREAMER_KAFKA_SASL_PASSWORD", "wrong")
	out, err = runTopics(t, "create", "-c", path)
	if err == nil || !strings.Contains(err.Error(), "SASL authentication failed") || out != "" {
		t.Errorf("wrong password: error %v, output %q", err, out)
	}
}

// TestSnapshotChangelogNoTopic: `snapshot changelog` on a topic that does
// not exist says so at once; it waited a minute for the partition's
// leader and then said only "context deadline exceeded".
func TestSnapshotChangelogNoTopic(t *testing.T) {
	b := topicBroker(t)
	start := time.Now()
	err := inspectChangelog(context.Background(), io.Discard, newModelTypes(), b.Addrs(), "no.such.changelog")
	if err == nil || !strings.Contains(err.Error(), "no.such.changelog: no such topic") {
		t.Fatalf("%v: want no such topic", err)
	}
	t.Logf("answered in %v: %v", time.Since(start).Round(time.Millisecond), err)
}
