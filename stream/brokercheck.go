package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	meta "github.com/segmentio/kafka-go/protocol/metadata"

	"github.com/streamer/streamer/config"
)

// CreateTopicsCommand is the command that makes the topics a config
// names, as the service's messages suggest it.
const CreateTopicsCommand = "streamer topics create --config <your config>"

// topicUse is a topic the service uses, the key that names it and the
// access it needs ("READ", "WRITE", "READ and WRITE").
type topicUse struct {
	key, topic, needs string
}

// verb says what the access is for, as in "read", "write to".
func (u *topicUse) verb() string {
	switch u.needs {
	case "READ":
		return "read"
	case "WRITE":
		return "write to"
	case "CREATE":
		return "create"
	}
	return "use"
}

// CheckAccess asks the brokers, before the service consumes, whether they
// let this client at its topics and its consumer group. A topic the client
// may not even describe (TOPIC_AUTHORIZATION_FAILED) or a group it may not
// use (GROUP_AUTHORIZATION_FAILED) is a *BrokerRefusal naming the key.
// Brokers that do not answer are not an error here (CheckBrokers has
// warned; the service retries), nor are topics that do not exist. It
// creates nothing: the metadata it asks for does not create topics. The
// topics are cfg's ServiceTopics.
func (s *KafkaSecurity) CheckAccess(ctx context.Context, cfg config.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	k := cfg.Kafka
	var uses []topicUse
	var names []string
	for _, t := range ServiceTopics(cfg) {
		needs := "WRITE" // output, dead-letter, response topics
		switch {
		case t.Changelog:
			needs = "READ and WRITE"
		case t.Key == "kafka.input_topic":
			needs = "READ"
		}
		uses = append(uses, topicUse{t.Key, t.Name, needs})
		names = append(names, t.Name)
	}
	tr := s.Transport(k.ClientID)
	tr.MetadataTopics = names // explicit topics: per-topic errors, nothing created
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: timeout}
	res, err := tr.RoundTrip(ctx, client.Addr, &meta.Request{TopicNames: names})
	if err != nil {
		return nil // unreachable: retried in the background
	}
	md, ok := res.(*meta.Response)
	if !ok {
		return nil
	}
	for _, t := range md.Topics {
		for _, u := range uses {
			if t.Name != u.topic {
				continue
			}
			switch kafka.Error(t.ErrorCode) {
			case kafka.TopicAuthorizationFailed:
				return &BrokerRefusal{Key: u.key, Code: kafka.TopicAuthorizationFailed, Err: kafka.TopicAuthorizationFailed,
					Msg: fmt.Sprintf("the brokers do not let %s describe topic %q: grant it DESCRIBE and %s on the topic", s.principal(), u.topic, u.needs)}
			case kafka.UnknownTopicOrPartition:
				// The changelog topic is created by the service itself; the
				// others it only uses: a typo here would otherwise stall
				// everything silently (publishing retried forever).
				if u.key != "snapshot.changelog_topic" {
					return &BrokerRefusal{Key: u.key, Code: kafka.UnknownTopicOrPartition, Err: kafka.UnknownTopicOrPartition,
						Msg: fmt.Sprintf("topic %q does not exist: create it with: %s (it makes every topic the config names), or correct the name", u.topic, CreateTopicsCommand)}
				}
			}
		}
	}
	groups, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{k.Group}})
	if err == nil && len(groups.Groups) == 1 {
		err = groups.Groups[0].Error
	}
	if code, ok := brokerCode(err); ok && code == kafka.GroupAuthorizationFailed {
		return &BrokerRefusal{Key: "kafka.group", Code: code, Err: err,
			Msg: fmt.Sprintf("the brokers do not let %s use consumer group %q: grant it READ and DESCRIBE on the group, or use a group it may join", s.principal(), k.Group)}
	}
	return nil
}

// principal names the client as the brokers see it.
func (s *KafkaSecurity) principal() string {
	if s != nil && s.user != "" {
		return strconv.Quote("User:" + s.user)
	}
	return "the client"
}

// explainSessionTimeout completes the refusal of kafka.session_timeout
// with the range the brokers allow (group.min.session.timeout.ms,
// group.max.session.timeout.ms), read with DescribeConfigs when the
// brokers let the client.
func (s *KafkaSecurity) explainSessionTimeout(ctx context.Context, r *BrokerRefusal, k config.Kafka) {
	if r.Code != kafka.InvalidSessionTimeout {
		return
	}
	r.Msg = fmt.Sprintf("%v is outside the brokers' allowed range", k.SessionTimeout)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr := s.Transport(k.ClientID)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: 5 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil || len(md.Brokers) == 0 {
		r.Msg += " (group.min.session.timeout.ms … group.max.session.timeout.ms; the brokers' defaults are 6s … 30m)"
		return
	}
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(md.Brokers[0].ID),
		ConfigNames: []string{"group.min.session.timeout.ms", "group.max.session.timeout.ms"}}}})
	lo, hi := "?", "?"
	if err == nil {
		for _, rs := range res.Resources {
			for _, c := range rs.ConfigEntries {
				ms, perr := strconv.Atoi(c.ConfigValue)
				if perr != nil {
					continue
				}
				switch c.ConfigName {
				case "group.min.session.timeout.ms":
					lo = (time.Duration(ms) * time.Millisecond).String()
				case "group.max.session.timeout.ms":
					hi = (time.Duration(ms) * time.Millisecond).String()
				}
			}
		}
	}
	r.Msg += fmt.Sprintf(" (group.min.session.timeout.ms %s, group.max.session.timeout.ms %s): set kafka.session_timeout within it", lo, hi)
}

// isRefusal reports whether err is a BrokerRefusal.
func isRefusal(err error) bool {
	_, ok := errors.AsType[*BrokerRefusal](err)
	return ok
}

// DefaultMaxMessageBytes is Kafka's default max.message.bytes (and
// message.max.bytes): what a topic takes when the brokers cannot be asked.
const DefaultMaxMessageBytes = 1048588

// TopicLimits asks the brokers for each topic's max.message.bytes, the
// largest record batch it accepts. A topic whose limit is not known (the
// brokers do not answer, or do not say) gets DefaultMaxMessageBytes.
func (s *KafkaSecurity) TopicLimits(ctx context.Context, k config.Kafka, topics []string, timeout time.Duration) map[string]int {
	out := make(map[string]int, len(topics))
	for _, t := range topics {
		out[t] = DefaultMaxMessageBytes
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := s.Transport(k.ClientID)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: timeout}
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"max.message.bytes"}})
	}
	res, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return out
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			continue
		}
		for _, e := range r.ConfigEntries {
			if n, err := strconv.Atoi(e.ConfigValue); e.ConfigName == "max.message.bytes" && err == nil && n > 0 {
				out[r.ResourceName] = n
			}
		}
	}
	return out
}

// Partitions returns the number of partitions of k.InputTopic.
func (s *KafkaSecurity) Partitions(ctx context.Context, k config.Kafka, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, parts, err := s.inputPartitions(ctx, k, timeout)
	if err != nil {
		return 0, err
	}
	client.Transport.(*kafka.Transport).CloseIdleConnections()
	return len(parts), nil
}

// inputPartitions returns a client for k's brokers (close its transport's
// idle connections when done) and the partitions of k.InputTopic.
func (s *KafkaSecurity) inputPartitions(ctx context.Context, k config.Kafka, timeout time.Duration) (*kafka.Client, []int, error) {
	tr := s.Transport(k.ClientID)
	tr.MetadataTopics = []string{k.InputTopic} // nothing created
	client := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: timeout}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{k.InputTopic}})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, fmt.Errorf("metadata of %s: %w", k.InputTopic, err)
	}
	for _, t := range md.Topics {
		if t.Name != k.InputTopic {
			continue
		}
		if t.Error != nil {
			tr.CloseIdleConnections()
			return nil, nil, fmt.Errorf("metadata of %s: %w", k.InputTopic, t.Error)
		}
		parts := make([]int, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
		return client, parts, nil
	}
	tr.CloseIdleConnections()
	return nil, nil, fmt.Errorf("metadata of %s: topic not in the answer", k.InputTopic)
}

// CommittedOffsets returns the offsets the consumer group k.Group has
// committed on k.InputTopic, by partition (empty: none).
func (s *KafkaSecurity) CommittedOffsets(ctx context.Context, k config.Kafka, timeout time.Duration) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, parts, err := s.inputPartitions(ctx, k, timeout)
	if err != nil {
		return nil, err
	}
	defer client.Transport.(*kafka.Transport).CloseIdleConnections()
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: k.Group, Topics: map[string][]int{k.InputTopic: parts}})
	if err == nil {
		err = res.Error
	}
	if errors.Is(err, kafka.GroupIdNotFound) {
		return map[int]int64{}, nil // a group that never committed
	}
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", k.Group, err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[k.InputTopic] {
		if p.Error == nil && p.CommittedOffset >= 0 {
			out[p.Partition] = p.CommittedOffset
		}
	}
	return out, nil
}
