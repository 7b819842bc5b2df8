package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream"
)

func newTopicsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "Manage the Kafka topics a config names",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTopicsCreateCmd())
	return cmd
}

func newTopicsCreateCmd() *cobra.Command {
	var path string
	opts := stream.TopicOptions{}
	cmd := &cobra.Command{
		Use:   "create --config FILE",
		Short: "Create the topics a config names (for clusters that do not auto-create them)",
		Long: `Create makes every topic the service uses with the config: kafka.input_topic,
kafka.output_topic, kafka.dlq_topic, rank.response_topic (when rank.model is
set and it is not the output topic) and snapshot.changelog_topic (when set:
one partition, cleanup.policy=compact, whatever --partitions says). It
connects to kafka.brokers as the service does, with kafka.tls and kafka.sasl,
and sends one CreateTopics request to the controller.

It prints a line per topic: "created NAME (P partitions, replication R)",
"exists NAME (...)" for a topic that exists already (left as it is), or
"failed NAME: ..." with the brokers' error. A topic that exists is not an
error: running it again is harmless. The exit status is 1 when a topic could
not be created or no broker answered, 0 otherwise.

With --dry-run it creates nothing and says which topics exist and which it
would create.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configPath(path)
			if err != nil {
				return err
			}
			if opts.Partitions == 0 || opts.Partitions < -1 {
				return fmt.Errorf("--partitions %d: want at least 1, or -1 for the brokers' default", opts.Partitions)
			}
			if opts.Replication == 0 || opts.Replication < -1 {
				return fmt.Errorf("--replication-factor %d: want at least 1, or -1 for the brokers' default", opts.Replication)
			}
			cfg, err := config.Load(path, os.Environ(), newModelTypes())
			if err != nil {
				return err
			}
			sec, err := stream.NewKafkaSecurity(cfg.Kafka)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := sec.CreateTopics(ctx, cfg.Kafka, stream.ServiceTopics(cfg), opts)
			if err != nil {
				return err
			}
			return printTopics(cmd.OutOrStdout(), res, opts.DryRun)
		},
	}
	f := cmd.Flags()
	configFlag(cmd, &path)
	f.IntVar(&opts.Partitions, "partitions", 3, "partitions of each topic but the changelog (one); -1: the brokers' num.partitions")
	f.IntVar(&opts.Replication, "replication-factor", -1, "replicas of each partition; -1: the brokers' default.replication.factor")
	f.BoolVar(&opts.DryRun, "dry-run", false, "create nothing: say which topics exist and which would be created")
	f.DurationVar(&opts.Timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// printTopics writes a line per topic and returns an error naming the
// topics that were not created.
func printTopics(w io.Writer, res []stream.TopicResult, dryRun bool) error {
	var failed []string
	for _, r := range res {
		var line string
		switch {
		case r.Err != nil:
			failed = append(failed, r.Name)
			line = fmt.Sprintf("failed %s: %v", r.Name, r.Err)
		case r.Existed:
			line = fmt.Sprintf("exists %s (%s)", r.Name, topicShape(r, false))
		case dryRun:
			line = fmt.Sprintf("would create %s (%s)", r.Name, topicShape(r, true))
		default:
			line = fmt.Sprintf("created %s (%s)", r.Name, topicShape(r, true))
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("topics create: %d of %d topics not created: %s", len(failed), len(res), strings.Join(failed, ", "))
	}
	return nil
}

// topicShape says a topic's partitions and replication, e.g.
// "3 partitions, replication 1", and with policy the changelog's
// cleanup.policy.
func topicShape(r stream.TopicResult, policy bool) string {
	var parts []string
	switch {
	case r.Partitions < 0:
		parts = append(parts, "the brokers' default partitions")
	case r.Partitions == 1:
		parts = append(parts, "1 partition")
	default:
		parts = append(parts, fmt.Sprintf("%d partitions", r.Partitions))
	}
	if r.Replication < 0 {
		parts = append(parts, "the brokers' default replication")
	} else {
		parts = append(parts, fmt.Sprintf("replication %d", r.Replication))
	}
	if r.Changelog && policy {
		parts = append(parts, "cleanup.policy=compact")
	}
	return strings.Join(parts, ", ")
}
