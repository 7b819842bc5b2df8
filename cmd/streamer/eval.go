package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/eval"
)

func newEvalCmd() *cobra.Command {
	var opt eval.Options
	var path, out string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "eval --config C --data FILE [--test FILE] --out DIR",
		Short: "Evaluate the configured models over a file, without Kafka",
		Long: `Eval builds the configured models, fresh, and runs them over --data
prequentially (every row is scored, then learned) and, with --test, over a
holdout file (rows scored only, by the models learned from --data). It writes
DIR/report.json (measures per model and section) and DIR/report.html (a
self-contained page: summary table, confusion matrices, quality over the
stream, bound against observed violation rate, score histograms, reliability
curves), then prints a summary table and the two paths.

The summary has a table per kind of model (classifiers; ordinal models;
ranking and regression models), a row per model and section; report.html
shows the same tables with the same column names. Classifiers: n (rows
judged), error (an abstention, prediction 0 or "no decision", counts as a
mistake, as in the service's accuracy) and its 95% Wilson score interval,
abstained (count and share of n), decided error (over the rows with a
decision) and its interval, auc, log loss. Ordinal models: n, abstained,
tau_b (Kendall), zero-one and its interval, mae. Ranking and regression
models: n, tau_b, rmse.

The prequential measures depend on the order of --data. --shuffle runs its
rows in a random order drawn from --seed (the file is then read whole into
memory). Without --shuffle, eval warns on stderr when the labels look sorted:
at least 100 labelled rows and fewer label changes between consecutive rows
than 10% of the number expected in a random order.

Formats, from the extension or --format: csv (header row, numeric features,
label last), jsonl (wire-format events, one per line; events without a label
are scored only), libsvm ("label idx:val ...", 1-based indices, missing = 0).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configPath(path)
			if err != nil {
				return err
			}
			if opt.Data == "" || out == "" {
				return fmt.Errorf("--data and --out are required")
			}
			types := newModelTypes()
			cfg, err := config.Load(path, os.Environ(), types)
			if err != nil {
				return err
			}
			opt.ConfigPath = path
			if !quiet {
				opt.Progress = os.Stderr
				opt.Terminal = isTerminal(os.Stderr)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := eval.Run(ctx, cfg, types, opt)
			if err != nil {
				return err
			}
			for _, w := range rep.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			if err := rep.WriteDir(out); err != nil {
				return err
			}
			if err := rep.WriteSummary(cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(out, eval.ReportJSON))
			fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(out, eval.ReportHTML))
			return nil
		},
	}
	f := cmd.Flags()
	configFlag(cmd, &path)
	f.StringVar(&opt.Data, "data", "", "data file: scored then learned, row by row")
	f.StringVar(&opt.Test, "test", "", "holdout file: scored only, after learning --data")
	f.StringVar(&opt.Format, "format", "", "csv, jsonl or libsvm (default: from the extension)")
	f.StringVarP(&out, "out", "o", "", "output directory for report.json and report.html")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	f.BoolVar(&opt.Shuffle, "shuffle", false, "run the rows of --data in a random order drawn from --seed (for files sorted by label)")
	f.Int64Var(&opt.Seed, "seed", 1, "seed of --shuffle's order: the same seed, the same order")
	f.Float64Var(&opt.MaxSkipped, "max-skipped", eval.DefaultMaxSkipped, "fail when more than this fraction of a file's rows is skipped (malformed, wrong dimension); 1 accepts any")
	return cmd
}
