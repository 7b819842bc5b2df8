package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is an in-process broker that speaks the real Kafka wire protocol
// over TCP on 127.0.0.1 (franz-go's kfake). The demo, the bench command and
// the end-to-end tests run against it exactly as they would against a real
// cluster: every client talks to it through a socket.
type Broker struct {
	c *kfake.Cluster
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
}

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
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("stream: start embedded broker: %w", err)
	}
	b := &Broker{c: c}
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
func (b *Broker) Close() { b.c.Close() }

// CreateTopic creates a topic with the given number of partitions.
func (b *Broker) CreateTopic(ctx context.Context, name string, partitions int) error {
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}},
	})
	if err != nil {
		return fmt.Errorf("stream: create topic %s: %w", name, err)
	}
	if err := resp.Errors[name]; err != nil {
		return fmt.Errorf("stream: create topic %s: %w", name, err)
	}
	return nil
}

func (b *Broker) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: time.Second}
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
