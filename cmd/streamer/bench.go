package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream"
)

func newBenchCmd() *cobra.Command {
	var cfg stream.BenchConfig
	var kernel string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure end-to-end throughput on the embedded broker against a pass-through baseline",
		Long: `Bench preloads --events labelled events into an embedded Kafka-protocol broker,
then pushes them through two pipelines with the same client settings:
pass-through (consume → publish the same bytes) and score (consume → decode →
score → learn → publish), and prints events/s for each and their ratio.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			cfg.Kernel = online.KernelSpec{Type: kernel, Gamma: 1 / float64(cfg.Dim), Features: 256, Seed: 1}
			cfg.Progress = func(s string) { fmt.Fprintln(os.Stderr, s) }
			res, err := stream.Bench(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Printf("\nend-to-end throughput, %d events, d=%d, %s MAM, %d partitions, GOMAXPROCS=%d\n\n",
				cfg.Events, cfg.Dim, kernel, cfg.Partitions, runtime.GOMAXPROCS(0))
			fmt.Printf("| pipeline | events/s | seconds | ratio to pass-through |\n|---|---|---|---|\n")
			for _, r := range res {
				fmt.Printf("| %s | %.0f | %.2f | %.2f |\n", r.Mode, r.Rate(), r.Elapsed.Seconds(), r.Rate()/res[0].Rate())
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Events, "events", 1_000_000, "events to push through each pipeline")
	cmd.Flags().IntVar(&cfg.Dim, "dim", 32, "features per event")
	cmd.Flags().IntVar(&cfg.Partitions, "partitions", 3, "input topic partitions")
	cmd.Flags().StringVar(&kernel, "kernel", "linear", "MAM kernel: linear | rbf (D=256, gamma=1/dim)")
	return cmd
}
