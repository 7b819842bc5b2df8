package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
)

// ServiceTopic is a topic the service uses with a configuration.
type ServiceTopic struct {
	Key  string // the configuration key that names it, e.g. "kafka.input_topic"
	Name string
	// Changelog is snapshot.changelog_topic: one partition and
	// cleanup.policy=compact (the service creates it so when it is
	// missing, and refuses one that is not compacted).
	Changelog bool
}

// ServiceTopics returns the topics the service uses with cfg, in the order
// of their keys: kafka.input_topic, kafka.output_topic, kafka.dlq_topic,
// rank.response_topic when ranking requests are on and it is not the output
// topic, rank.log_topic when they are on and it is set, and
// snapshot.changelog_topic when set (with snapshot.scope
// partition too: every partition's state is in that one topic). These are
// the topics the service checks at start-up (CheckAccess) and `streamer
// topics create` makes.
func ServiceTopics(cfg config.Config) []ServiceTopic {
	k := cfg.Kafka
	out := []ServiceTopic{
		{Key: "kafka.input_topic", Name: k.InputTopic},
		{Key: "kafka.output_topic", Name: k.OutputTopic},
		{Key: "kafka.dlq_topic", Name: k.DLQTopic},
	}
	if t := responseTopic(cfg); t != "" {
		out = append(out, ServiceTopic{Key: "rank.response_topic", Name: t})
	}
	if t := cfg.Rank.LogTopic; cfg.Rank.Enabled() && t != "" {
		out = append(out, ServiceTopic{Key: "rank.log_topic", Name: t})
	}
	if t := cfg.Snapshot.ChangelogTopic; t != "" {
		out = append(out, ServiceTopic{Key: "snapshot.changelog_topic", Name: t, Changelog: true})
	}
	return out
}

// TopicResult is what CreateTopics did with one topic.
type TopicResult struct {
	ServiceTopic
	// Partitions and Replication are the topic's as the brokers describe
	// it (created now, or found); for a topic that is not there (a dry
	// run, a failure) those asked for, -1 the brokers' default.
	Partitions, Replication int
	Existed                 bool // it existed already: left as it is
	// Err is the brokers' refusal to create it, a *BrokerRefusal naming
	// the key and the broker's error code (it does not repeat Name); nil
	// when created or existing.
	Err error
}

// TopicOptions says how CreateTopics makes the topics.
type TopicOptions struct {
	// Partitions of every topic but the changelog (which has one); -1:
	// the brokers' num.partitions.
	Partitions int
	// Replication of every topic; -1: the brokers'
	// default.replication.factor.
	Replication int
	// DryRun creates nothing: the results say which topics exist (Existed)
	// and which would be created.
	DryRun bool
	// Timeout bounds the whole (0: 30 s).
	Timeout time.Duration
}

// CreateTopics makes the topics on k's brokers, connecting as the service
// does (kafka.tls, kafka.sasl), in one CreateTopics request to the
// controller: each with opts.Partitions and opts.Replication, the changelog
// with one partition and cleanup.policy=compact. A topic that exists is
// left as it is (Existed). The error is for the whole: no broker answered,
// or TLS or SASL failed (a *KafkaAuthError); a topic the brokers refuse to
// create has its Err.
func (s *KafkaSecurity) CreateTopics(ctx context.Context, k config.Kafka, topics []ServiceTopic, opts TopicOptions) ([]TopicResult, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if ok, err := s.reach(ctx, k.Brokers, k.ClientID); !ok || err != nil {
		if ok { // reached: TLS or SASL failed
			return nil, err
		}
		return nil, fmt.Errorf("kafka.brokers: no broker of %v answered%s: %w", k.Brokers, s.securityHint(), err)
	}
	names := make([]string, len(topics))
	res := make([]TopicResult, len(topics))
	req := &kafka.CreateTopicsRequest{}
	for i, t := range topics {
		names[i] = t.Name
		res[i] = TopicResult{ServiceTopic: t, Partitions: opts.Partitions, Replication: opts.Replication}
		tc := kafka.TopicConfig{Topic: t.Name, NumPartitions: opts.Partitions, ReplicationFactor: opts.Replication}
		if t.Changelog {
			res[i].Partitions, tc.NumPartitions = 1, 1
			tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
		}
		req.Topics = append(req.Topics, tc)
	}
	tr := s.Transport(k.ClientID)
	tr.MetadataTopics = names // explicit topics: nothing is created by asking
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: timeout}

	if !opts.DryRun {
		created, err := client.CreateTopics(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("kafka.brokers: create topics: %w", err)
		}
		for i := range res {
			err, ok := created.Errors[res[i].Name]
			switch {
			case !ok:
				res[i].Err = fmt.Errorf("the brokers did not answer for topic %q", res[i].Name)
			case errors.Is(err, kafka.TopicAlreadyExists):
				res[i].Existed = true
			case err != nil:
				res[i].Err = err
			}
		}
	}
	// What the topics are now. A topic the brokers would not let this
	// client create (no CREATE grant) but which exists is as good as
	// created: the service needs it to exist, not to create it.
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil && opts.DryRun {
		return nil, fmt.Errorf("kafka.brokers: metadata: %w", err)
	}
	for i := range res {
		r := &res[i]
		var found *kafka.Topic
		if md != nil {
			for j := range md.Topics {
				if t := &md.Topics[j]; t.Name == r.Name && t.Error == nil && len(t.Partitions) > 0 {
					found = t
				}
			}
		}
		if found != nil {
			r.Partitions, r.Replication = len(found.Partitions), len(found.Partitions[0].Replicas)
			if opts.DryRun || (r.Err != nil && isAuthorization(r.Err)) {
				r.Existed, r.Err = true, nil
			}
		}
		if r.Err != nil {
			r.Err = notCreated(r.ServiceTopic, r.Err)
		}
	}
	return res, nil
}

// notCreated is the error of topic t the brokers did not create: a
// *BrokerRefusal with t's key, their error code and their message, or the
// code's description without one (e.g. "kafka.output_topic: not created:
// the replication-factor is invalid (the brokers answered
// INVALID_REPLICATION_FACTOR [38])").
func notCreated(t ServiceTopic, err error) error {
	code, ok := brokerCode(err)
	if !ok {
		return fmt.Errorf("%s: not created: %w", t.Key, err)
	}
	detail := code.Description()
	if msg, found := strings.CutPrefix(err.Error(), code.Error()+": "); found && msg != "" {
		detail = msg // the broker's own message
	}
	return &BrokerRefusal{Key: t.Key, Code: code, Err: err, Msg: "not created: " + detail}
}

// isAuthorization reports whether err is the brokers' refusal of an
// operation to this client.
func isAuthorization(err error) bool {
	code, ok := brokerCode(err)
	return ok && (code == kafka.TopicAuthorizationFailed || code == kafka.ClusterAuthorizationFailed)
}
