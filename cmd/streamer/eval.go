package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/eval"
	"github.com/streamer/streamer/online"
)

func newEvalCmd() *cobra.Command {
	var opt eval.Options
	var lopt eval.LogOptions
	var path, out string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "eval --config C (--data FILE [--test FILE] | --log INPUT --responses RESPONSES) --out DIR",
		Short: "Evaluate the configured models over a file, or a logged stream's policies off-policy, without Kafka",
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
are scored only), libsvm ("label idx:val ...", 1-based indices, missing = 0).

Off-policy evaluation of a logged stream: with --log INPUT --responses
RESPONSES instead of --data, eval replays a dump of the service's input
topic (INPUT: events, ranking requests and delayed labels, one record value
a line) through the engine the config builds, exactly as the service runs
it, with the decision the service logged for each request (RESPONSES: a dump
of the response topic, rank.response_topic else kafka.output_topic; a
request's response's first item and its propensity) in place of its own.
Every model re-learns from the log, so it estimates, by IPS, SNIPS, DR and
SNDR with 95% bootstrap intervals (--boots resamples drawn from --seed), the
mean reward of the configured rank model's greedy order as it would have been
at each request, and of rank.challenger's with its difference to the
champion. Requests with no response (or no id) are not replayed, nor their
labels, and are counted. The replay never promotes (promote auto runs as
manual); the report says where auto would have. --log-format: value (a line
is the record's value; a record's key is its "key" member, a label's its
request's), keyed (key<TAB>value: kcat -f '%k\t%s\n') or timed
(timestamp-ms<TAB>key<TAB>value: kcat -f '%T\t%k\t%s\n', the join windows'
clock). It needs labels.join_window and rank.join. It writes DIR/ope.json and
prints the counts, a table of policy × estimator with value and interval, and
the challenger's difference (docs/operations.md, "Off-policy evaluation of a
logged stream").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !(opt.MaxSkipped >= 0 && opt.MaxSkipped <= 1) {
				return fmt.Errorf("--max-skipped %v: a fraction of the rows, in [0, 1] (1 accepts any)", opt.MaxSkipped)
			}
			path, err := configPath(path)
			if err != nil {
				return err
			}
			logMode, err := evalMode(cmd, &opt, &lopt, out)
			if err != nil {
				return err
			}
			types := newModelTypes()
			cfg, err := config.Load(path, os.Environ(), types)
			if err != nil {
				return err
			}
			if logMode {
				return evalLog(cmd, cfg, types, path, lopt, uint64(opt.Seed), opt.MaxSkipped, quiet, out)
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
			return writeReport(cmd, rep.Warnings, rep, out, eval.ReportJSON, eval.ReportHTML)
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
	f.Int64Var(&opt.Seed, "seed", 1, "seed of --shuffle's order, and of --log's bootstrap intervals: the same seed, the same order")
	f.Float64Var(&opt.MaxSkipped, "max-skipped", eval.DefaultMaxSkipped, "fail when more than this fraction of a file's rows is skipped (malformed, wrong dimension); 1 accepts any")
	f.StringVar(&lopt.Log, "log", "", "a dump of the input topic (one record a line): replayed for the off-policy estimates of the rank model's and challenger's greedy policies (instead of --data)")
	f.StringVar(&lopt.Responses, "responses", "", "with --log: a dump of the response topic, the logged decisions")
	f.StringVar(&lopt.Format, "log-format", eval.LogValue, "with --log: a line is the record's value (value), key<TAB>value (keyed) or timestamp-ms<TAB>key<TAB>value (timed)")
	f.IntVar(&lopt.Boots, "boots", eval.DefaultBoots, "with --log: bootstrap resamples of each interval (drawn from --seed)")
	return cmd
}

// evalMode checks eval's flags: --data's evaluation, or (true) --log's
// replay.
func evalMode(cmd *cobra.Command, opt *eval.Options, lopt *eval.LogOptions, out string) (bool, error) {
	f := cmd.Flags()
	switch {
	case opt.Data != "" && lopt.Log != "":
		return false, fmt.Errorf("--data and --log are mutually exclusive: --data judges the models on a file of events, --log replays a logged stream for the off-policy estimates")
	case lopt.Log == "" && (lopt.Responses != "" || f.Changed("log-format") || f.Changed("boots")):
		return false, fmt.Errorf("--responses, --log-format and --boots go with --log")
	case lopt.Log == "" && (opt.Data == "" || out == ""):
		return false, fmt.Errorf("--data (or --log) and --out are required")
	case lopt.Log == "":
		return false, nil
	case lopt.Responses == "" || out == "":
		return false, fmt.Errorf("--log needs --responses (a dump of the response topic: the logged decisions) and --out")
	case opt.Test != "" || opt.Shuffle || opt.Format != "":
		return false, fmt.Errorf("--test, --shuffle and --format go with --data, not --log (the log is replayed in its order; --log-format is its format)")
	}
	return true, nil
}

// evalLog replays a logged stream (eval --log) and writes and prints its
// off-policy estimates.
func evalLog(cmd *cobra.Command, cfg config.Config, types *online.Registry, path string, lopt eval.LogOptions, seed uint64, maxSkipped float64, quiet bool, out string) error {
	lopt.ConfigPath, lopt.Seed, lopt.MaxSkipped = path, seed, maxSkipped
	if !quiet {
		lopt.Progress = cmd.ErrOrStderr()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := eval.RunLog(ctx, cfg, types, lopt)
	if err != nil {
		return err
	}
	return writeReport(cmd, rep.Warnings, rep, out, eval.OPEJSON)
}

// writeReport prints a report's warnings on stderr, writes it into the
// directory out, prints its summary, then the paths of its files there.
func writeReport(cmd *cobra.Command, warnings []string, rep interface {
	WriteDir(string) error
	WriteSummary(io.Writer) error
}, out string, files ...string) error {
	for _, w := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
	}
	if err := rep.WriteDir(out); err != nil {
		return err
	}
	if err := rep.WriteSummary(cmd.OutOrStdout()); err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(out, f))
	}
	return nil
}
