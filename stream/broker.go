package stream

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is an in-process broker that speaks the real Kafka wire protocol
// over TCP on 127.0.0.1 (franz-go's kfake). The demo, the bench command and
// the end-to-end tests run against it exactly as they would against a real
// cluster: every client talks to it through a socket.
type Broker struct {
	c *kfake.Cluster
	// transport is the broker's own admin client (readiness, CreateTopic),
	// authenticated as the first SASL user and over TLS when enabled.
	transport *kafka.Transport
}

// TopicSpec names a topic to create and its partition count.
type TopicSpec struct {
	Name       string
	Partitions int
}

// BrokerConfig configures StartBrokerWith.
type BrokerConfig struct {
	Port              int // 0: a free port
	Topics            []TopicSpec
	MinSessionTimeout time.Duration // lowest consumer-group session timeout accepted (0: Kafka's 6s)

	// SASL, when non-empty, requires SASL authentication on the listener
	// and creates these users (kfake superusers: no ACLs apply).
	SASL []SASLUser
	// TLS, when set, makes the listener speak TLS with this server config
	// (its Certificates).
	TLS *tls.Config
	// ACLs, when set, makes the broker check ACLs: the SASL users above are
	// superusers, and Users may do only what their grants allow (SASL must
	// be on: the users authenticate to be told apart).
	ACLs  bool
	Users []ACLUser
	// MinSessionTimeoutConfig, when set, is the lowest consumer-group
	// session timeout accepted as a dynamic broker setting
	// (group.min.session.timeout.ms), which clients read back with
	// DescribeConfigs (MinSessionTimeout is not shown there).
	MinSessionTimeoutConfig time.Duration

	// AdminTLS is the client config of the broker's own admin connections
	// (readiness check, CreateTopic) when TLS is set, e.g. with a client
	// certificate if TLS requires one. nil: no client certificate, and the
	// listener's certificate is not verified (the client dials its own
	// in-process listener over loopback).
	AdminTLS *tls.Config
}

// SASLUser is a user of the embedded broker. Mechanism is spelled as in
// kafka.sasl.mechanism: plain, scram-sha-256 or scram-sha-512.
type SASLUser struct {
	Mechanism, User, Password string
}

// ACLUser is a SASL user subject to ACLs, with what it may do.
type ACLUser struct {
	SASLUser
	Grants []Grant
}

// Grant allows (or, with Deny, denies) an operation on a resource: Resource
// "topic", "group" or "cluster" (name "kafka-cluster"), Name a literal
// name or "*", Operation "read", "write", "describe", "create" or "all".
type Grant struct {
	Resource, Name, Operation string
	Deny                      bool
}

var (
	aclResources  = map[string]kmsg.ACLResourceType{"topic": kmsg.ACLResourceTypeTopic, "group": kmsg.ACLResourceTypeGroup, "cluster": kmsg.ACLResourceTypeCluster}
	aclOperations = map[string]kmsg.ACLOperation{"read": kmsg.ACLOperationRead, "write": kmsg.ACLOperationWrite,
		"describe": kmsg.ACLOperationDescribe, "create": kmsg.ACLOperationCreate, "all": kmsg.ACLOperationAll}
)

// StartBroker starts a one-node broker on a free 127.0.0.1 port (or on port
// when non-zero) and creates the given topics.
func StartBroker(port int, topics ...TopicSpec) (*Broker, error) {
	return StartBrokerWith(BrokerConfig{Port: port, Topics: topics})
}

// StartBrokerWith starts a one-node broker as cfg says.
func StartBrokerWith(cfg BrokerConfig) (*Broker, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID("streamer-embedded")}
	if cfg.Port != 0 {
		opts = append(opts, kfake.Ports(cfg.Port))
	}
	if cfg.MinSessionTimeout > 0 {
		opts = append(opts, kfake.GroupMinSessionTimeout(cfg.MinSessionTimeout))
	}
	for _, t := range cfg.Topics {
		opts = append(opts, kfake.SeedTopics(int32(t.Partitions), t.Name))
	}
	transport := &kafka.Transport{ClientID: "streamer-embedded-admin"}
	if len(cfg.SASL) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for i, u := range cfg.SASL {
			mech, err := saslMechanism(u.Mechanism, u.User, u.Password)
			if err != nil {
				return nil, fmt.Errorf("stream: embedded broker: SASL user %q: %s: %s", u.User, err.key, err.msg)
			}
			opts = append(opts, kfake.Superuser(strings.ToUpper(u.Mechanism), u.User, u.Password))
			if i == 0 {
				transport.SASL = mech
			}
		}
	}
	if cfg.ACLs {
		if len(cfg.SASL) == 0 {
			return nil, fmt.Errorf("stream: embedded broker: ACLs need SASL users")
		}
		opts = append(opts, kfake.EnableACLs())
	}
	for _, u := range cfg.Users {
		var acls []kfake.ACL
		for _, g := range u.Grants {
			rt, okR := aclResources[g.Resource]
			op, okO := aclOperations[g.Operation]
			if !okR || !okO {
				return nil, fmt.Errorf("stream: embedded broker: grant %+v: unknown resource or operation", g)
			}
			acls = append(acls, kfake.ACL{Resource: rt, Name: g.Name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: !g.Deny})
		}
		opts = append(opts, kfake.User(strings.ToUpper(u.Mechanism), u.User, u.Password, acls...))
	}
	if cfg.MinSessionTimeoutConfig > 0 {
		opts = append(opts, kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": strconv.FormatInt(cfg.MinSessionTimeoutConfig.Milliseconds(), 10)}))
	}
	if cfg.TLS != nil {
		opts = append(opts, kfake.TLS(cfg.TLS))
		transport.TLS = cfg.AdminTLS
		if transport.TLS == nil {
			transport.TLS = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} // its own in-process listener, over loopback
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("stream: start embedded broker: %w", err)
	}
	b := &Broker{c: c, transport: transport}
	if err := b.waitReady(10 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return b, nil
}

// Addrs returns the host:port addresses clients should bootstrap from.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Compact runs log compaction on every compacted topic now.
func (b *Broker) Compact() { b.c.Compact() }

// Close stops the broker and drops its data.
func (b *Broker) Close() {
	b.transport.CloseIdleConnections()
	b.c.Close()
}

// CreateTopic creates a topic with the given number of partitions and
// topic configs (e.g. "max.message.bytes": "4194304").
func (b *Broker) CreateTopic(ctx context.Context, name string, partitions int, configs ...kafka.ConfigEntry) error {
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second, Transport: b.transport}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs}},
	})
	if err != nil {
		return fmt.Errorf("stream: create topic %s: %w", name, err)
	}
	if err := resp.Errors[name]; err != nil {
		return fmt.Errorf("stream: create topic %s: %w", name, err)
	}
	return nil
}

// DeleteTopic deletes a topic.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second, Transport: b.transport}
	resp, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{name}})
	if err == nil {
		err = resp.Errors[name]
	}
	if err != nil {
		return fmt.Errorf("stream: delete topic %s: %w", name, err)
	}
	return nil
}

// SetTopicConfig sets a config of topic (as kafka-configs --alter does).
func (b *Broker) SetTopicConfig(ctx context.Context, topic, name, value string) error {
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second, Transport: b.transport}
	resp, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: name, Value: value, ConfigOperation: kafka.ConfigOperationSet}},
		}},
	})
	if err == nil && len(resp.Resources) > 0 {
		err = resp.Resources[0].Error
	}
	if err != nil {
		return fmt.Errorf("stream: set %s=%s on topic %s: %w", name, value, topic, err)
	}
	return nil
}

// DeleteRecords removes the records of a topic's partition below offset,
// as a DeleteRecords request (kafka-delete-records) does. The embedded
// broker keeps every record in memory and frees a log segment once all of
// its records are deleted, so a long run that trims what its consumers
// have read holds about a segment per partition (segment.bytes, a topic
// config) instead of the whole stream.
func (b *Broker) DeleteRecords(topic string, partition int, offset int64) error {
	if err := b.c.DeleteRecords(topic, int32(partition), offset); err != nil {
		return fmt.Errorf("stream: delete the records of %s/%d below offset %d: %w", topic, partition, offset, err)
	}
	return nil
}

// Committed returns a consumer group's committed offsets of a topic, by
// partition (none: the group has committed none).
func (b *Broker) Committed(group, topic string) map[int]int64 {
	out := map[int]int64{}
	if g := b.c.GroupInfo(group); g != nil {
		for p, c := range g.Commits[topic] {
			out[int(p)] = c.Offset
		}
	}
	return out
}

func (b *Broker) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: time.Second, Transport: b.transport}
	for {
		_, err := client.Metadata(context.Background(), &kafka.MetadataRequest{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stream: embedded broker not ready: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
