// Command streamer learns online from Kafka: it consumes labelled events,
// scores every event with each configured model (publishing the score and a
// certainty bound), and learns from the labelled ones.
//
//	streamer run --config configs/streamer.yaml   the service against a Kafka cluster
//	streamer demo [--duration 30s]                everything on an embedded broker
//	streamer bench [--events 1000000]             end-to-end throughput vs pass-through
//	streamer models list|rollback                 model versions, and rollback to one
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "streamer:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "streamer",
		Short:         "Online kernel learning on Kafka streams, with certainty bounds",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newRunCmd(), newDemoCmd(), newBenchCmd(), newSnapshotCmd(), newEvalCmd(), newTopicsCmd(), newModelsCmd(), newVersionCmd())
	return root
}

func newLogger(c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsStrings}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// durationsAsStrings logs a time.Duration as "1.5s", never as a number
// of nanoseconds (which the JSON handler would print).
func durationsAsStrings(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// exitAfterStop ends the process with status 1 when it still runs
// shutdown_timeout and 5 s after ctx ends, saying so on a best-effort
// basis: the line is given a second, so that a log that blocks (stderr
// not read) cannot keep the process alive.
func exitAfterStop(ctx context.Context, log *slog.Logger, timeout time.Duration) {
	<-ctx.Done()
	time.Sleep(timeout + 5*time.Second)
	logged := make(chan struct{})
	go func() {
		log.Error("stop did not finish after shutdown_timeout: exiting", "shutdown_timeout", timeout.String())
		close(logged)
	}()
	select {
	case <-logged:
	case <-time.After(time.Second):
	}
	os.Exit(1)
}

func newRunCmd() *cobra.Command {
	var path string
	var faultPause time.Duration
	var allowEmpty bool
	cmd := &cobra.Command{
		Use:   "run",
		Args:  cobra.NoArgs,
		Short: "Run the service against a Kafka cluster",
		Long: `Run joins the consumer group on kafka.input_topic, scores every event with every
configured model, publishes scores to kafka.output_topic and bad events to
kafka.dlq_topic, and serves POST /v1/rank, /metrics, /healthz and /readyz on
http.listen (HTTPS with http.tls, bearer tokens with http.auth).
Environment variables STREAMER_<KEY> override config keys (see README).
SIGINT/SIGTERM stop consuming, flush the producer, take a last checkpoint,
commit and exit 0 (1 when something could not be saved or delivered within
shutdown_timeout, saying what).
SIGHUP reads the files of http.tls and http.auth again (they are also read
again when they change).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configPath(path)
			if err != nil {
				return err
			}
			types := newModelTypes()
			cfg, err := config.Load(path, os.Environ(), types)
			if err != nil {
				return err
			}
			log := newLogger(cfg.Log)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// SIGHUP reloads the HTTP certificate and tokens (and no longer
			// ends the process), from the start: start-up may wait long for
			// the brokers.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			opts := []stream.Option{stream.WithReloadSignal(hup)}
			if allowEmpty {
				opts = append(opts, stream.WithAllowEmptyState())
			}
			if faultPause > 0 {
				opts = append(opts, stream.WithSnapshotWriteHook(func() {
					log.Warn("fault: pausing snapshot write", "for", faultPause)
					time.Sleep(faultPause)
				}))
			}
			// The service bounds its own stop by shutdown_timeout; should
			// anything still hang, in start-up too (a store on a disk that
			// does not answer), the process ends a little later anyway.
			go exitAfterStop(ctx, log, cfg.ShutdownTimeout)
			svc, err := stream.NewService(ctx, cfg, types, nil, log, opts...)
			if err != nil {
				if ctx.Err() != nil { // SIGTERM while starting: nothing processed, nothing to flush
					log.Info("stopped during start-up", "was", err)
					return nil
				}
				return err
			}
			return svc.Run(ctx)
		},
	}
	configFlag(cmd, &path)
	cmd.Flags().BoolVar(&allowEmpty, "allow-empty-state", false, "start with empty models when no valid snapshot is found although the consumer group has committed offsets (the learned state is lost); without it start-up stops")
	// Fault injection for the crash tests: pause inside every snapshot write.
	cmd.Flags().DurationVar(&faultPause, "fault-snapshot-pause", 0, "testing only: pause inside each snapshot file write")
	_ = cmd.Flags().MarkHidden("fault-snapshot-pause")
	return cmd
}

// configFlag adds --config (-c) to a command that reads a service config.
func configFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "config", "c", "", "config file (YAML); default $"+config.EnvConfig)
}

// configPath is the config file a command reads: --config, else
// $STREAMER_CONFIG; an error when neither is set.
func configPath(flag string) (string, error) {
	if flag == "" {
		flag = os.Getenv(config.EnvConfig)
	}
	if flag == "" {
		return "", fmt.Errorf("--config (or %s) is required", config.EnvConfig)
	}
	return flag, nil
}
