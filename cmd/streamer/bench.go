package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/internal/bench"
	"github.com/streamer/streamer/online"
)

func newBenchCmd() *cobra.Command {
	var cfg bench.Config
	var kernel string
	var instances []int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure end-to-end throughput on the embedded broker against a pass-through baseline",
		Long: `Bench preloads --events labelled events into an embedded Kafka-protocol broker,
then pushes them through two pipelines with the same client settings:
pass-through (consume → publish the same bytes) and score (consume → decode →
score → learn → publish), and prints events/s for each and their ratio.

With --instances 1,2,3 it instead runs the score pipeline with partitioned
state (snapshot.scope: partition) as that many instances of one consumer
group, and prints events/s for each count and the changelog's bytes per
event.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			cfg.Kernel = online.KernelSpec{Type: kernel}
			if kernel == "rbf" {
				cfg.Kernel = online.KernelSpec{Type: kernel, Gamma: 1 / float64(cfg.Dim), Features: 256, Seed: 1}
			}
			cfg.Progress = func(s string) { fmt.Fprintln(os.Stderr, s) }
			if len(instances) > 0 {
				return benchScale(ctx, cfg, kernel, instances)
			}
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Printf("\nend-to-end throughput, %d events, d=%d, %s MAM, %d partitions, GOMAXPROCS=%d\n\n",
				cfg.Events, cfg.Dim, kernel, cfg.Partitions, runtime.GOMAXPROCS(0))
			fmt.Printf("| round | pipeline | events/s | seconds | ratio to pass-through |\n|---|---|---|---|---|\n")
			best, rates := map[string]float64{}, map[string][]float64{}
			base := 0.0
			for _, r := range res {
				if r.Mode == "passthrough" {
					base = r.Rate()
				}
				fmt.Printf("| %d | %s | %.0f | %.2f | %.2f |\n", r.Round, r.Mode, r.Rate(), r.Elapsed.Seconds(), r.Rate()/base)
				best[r.Mode] = max(best[r.Mode], r.Rate())
				rates[r.Mode] = append(rates[r.Mode], r.Rate())
			}
			fmt.Printf("\nbest of %d: pass-through %.0f events/s, score %.0f events/s (%.2f of pass-through)",
				cfg.Rounds, best["passthrough"], best["score"], best["score"]/best["passthrough"])
			if cfg.SnapshotEvery > 0 {
				fmt.Printf(", score+snapshot every %s %.0f events/s (%.2f of score)", cfg.SnapshotEvery,
					best["score+snapshot"], best["score+snapshot"]/best["score"])
			}
			fmt.Println()
			med := func(m string) float64 { v := slices.Clone(rates[m]); slices.Sort(v); return v[len(v)/2] }
			fmt.Printf("median of %d: pass-through %.0f, score %.0f (%.2f)", cfg.Rounds, med("passthrough"), med("score"),
				med("score")/med("passthrough"))
			if cfg.SnapshotEvery > 0 {
				fmt.Printf(", score+snapshot %.0f (%.2f of score)", med("score+snapshot"), med("score+snapshot")/med("score"))
			}
			fmt.Println()
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Events, "events", 1_000_000, "events to push through each pipeline")
	cmd.Flags().IntVar(&cfg.Rounds, "rounds", 3, "rounds; each runs pass-through then score on fresh consumer groups")
	cmd.Flags().DurationVar(&cfg.SnapshotEvery, "snapshot-every", time.Second, "also run score with snapshots at this period (0 = skip)")
	cmd.Flags().IntVar(&cfg.Dim, "dim", 32, "features per event")
	cmd.Flags().IntVar(&cfg.Partitions, "partitions", 3, "input topic partitions")
	cmd.Flags().StringVar(&kernel, "kernel", "linear", "MAM kernel: linear | rbf (D=256, gamma=1/dim)")
	cmd.Flags().IntSliceVar(&instances, "instances", nil, "scale-out: instance counts to measure, e.g. 1,2,3 (partitioned state; --partitions 6 suits up to 6)")
	return cmd
}

func benchScale(ctx context.Context, cfg bench.Config, kernel string, instances []int) error {
	for _, k := range instances {
		if k < 1 || k > cfg.Partitions {
			return fmt.Errorf("--instances: %d is outside 1..%d (--partitions)", k, cfg.Partitions)
		}
	}
	res, err := bench.ScaleOut(ctx, cfg, instances)
	if err != nil {
		return err
	}
	fmt.Printf("\nscale-out, %d events, d=%d, %s MAM, %d partitions, snapshots every %s, GOMAXPROCS=%d\n\n",
		cfg.Events, cfg.Dim, kernel, cfg.Partitions, cfg.SnapshotEvery, runtime.GOMAXPROCS(0))
	fmt.Printf("| round | instances | events/s | events/s once stable | seconds | score records | snapshots | changelog bytes | changelog bytes/event |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range res {
		fmt.Printf("| %d | %d | %.0f | %.0f | %.2f | %d | %d | %d | %.3g |\n", i/len(instances)+1, r.Instances, r.Rate(), r.StableRate(),
			r.Elapsed.Seconds(), r.Scored, r.Snapshots, r.ChangelogBytes, float64(r.ChangelogBytes)/float64(r.Events))
	}
	return nil
}
