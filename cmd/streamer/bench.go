package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/bench"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
)

func newBenchCmd() *cobra.Command {
	var cfg bench.Config
	var kernel, configPath, cpuProfile, mutexProfile, memProfile string
	var calWindow, calEvery int
	var calGap time.Duration
	var calDelta float64
	var asJSON bool
	var instances []int
	cmd := &cobra.Command{
		Use:   "bench",
		Args:  cobra.NoArgs,
		Short: "Measure end-to-end throughput on the embedded broker against a pass-through baseline",
		Long: `Bench preloads --events labelled events into an embedded Kafka-protocol broker,
then pushes them through pipelines with the same client settings: pass-through
(consume → publish the same bytes), score (consume → decode → score → learn →
publish) and, with --snapshot-every > 0, score+snapshot (score, and snapshot the
models to a temporary directory at that period).

It runs --warmup discarded rounds, then --rounds measured ones. Every round runs
each pipeline once over the whole input topic, on fresh models, a fresh
consumer group and a fresh output topic (deleted after the run). The order
changes from round to round: rotations of pass-through, score, score+snapshot,
each followed by its reverse (ABC, CBA, BCA, ACB, CAB, BAC, …), so that no
pipeline always runs on the warmer or the more tired machine; 6 rounds (4
without snapshots) put every pipeline in every position equally often. Timing
runs from a run's first consumed event to its last acknowledged record.

It prints each round's events/s and the ratios of that round (score /
pass-through, score+snapshot / score); then per pipeline the median,
interquartile range (p25–p75) and range of events/s over the rounds, and per
ratio the median and range of the within-round ratios: the performance targets
are about these ratios. When a pipeline's (p75−p25)/median exceeds 20% it warns
that the figures are not reliable and names likely causes.

The embedded broker shares the bench's process and heap: unless GOGC is set,
the bench runs at GOGC=400 so that collecting the broker's copy of the input
does not weigh on every run (about 3 GB of memory for a million events).

--stages CPU-profiles each measured run and adds a table of the CPU per event
of each stage of the service — fetch and decode (a goroutine per partition),
apply (a goroutine per partition: score and learn, each model behind its own
lock in instance scope, a key-scoped one behind its key's stripe's, encode),
publish (the publisher's loops, one per four GOMAXPROCS), calibration
refits, checkpoints — of the embedded broker, and of the rest of the process
(the clients, the collector), with the busiest goroutine's share of the run:
one near 1.00 is never idle and bounds events/s whatever the cores; and a
second table with each stage's busiest goroutine's share of the run. The
broker's is its request loop: one goroutine handles every client's requests
in turn (its connections' goroutines work in parallel), so with many cores
it bounds every pipeline's events/s at about 1 / (its CPU per event), its
share of the run divided by the run's events/s.

--merge-lanes on|off|auto: in instance scope, a mergeable global mam
(no window, no decay, no gamma auto) is learned by the partitions' lanes in
parallel, each into statistics and a merged view of its own published every
64 labelled events and when its queue empties (on), or by one instance the
lanes take turns at (off); auto, the service's default, is on with more
than two GOMAXPROCS.

--mutexprofile FILE records every contended lock of the bench's process
(runtime.SetMutexProfileFraction(1)) and writes the profile at the end (go
tool pprof -top FILE): where the lock-wait column's time goes.

--memprofile FILE records every heap allocation of the bench's process
(runtime.MemProfileRate = 1, which slows it: its events/s are not the
service's) and writes the profile at the end (go tool pprof
-sample_index=alloc_objects -top FILE): where the heap allocations per
event come from.

--no-broker takes the embedded broker off the data path, for the service's
own cost apart from the broker's (which, sharing the process, tops out
first on a machine with many cores): the events are generated once in memory
before the rounds (untimed) — the same events the preload writes, in the
same partitions (the preload's balancer: the key's FNV-1a hash, round robin
without a key, so dense event i is in partition i mod --partitions) and in
the same order — and every run's pipeline reads each partition from there
through the same fetch-to-publish path (the partition's goroutine, decode,
apply, the publisher's queues and batching loops) into a publisher that
discards what it publishes and acknowledges it at once. Pass-through is then
memory → publish the same bytes → discarded. The consumer group (membership,
offset commits) stays on the embedded broker. CPU per event is then the
service's alone (plus the group's heartbeats and commits, and the garbage
collector); events/s is what the service's path can do with a broker that
keeps up. The report says "input: memory, output: discarded". Not with
--instances.

--config FILE benchmarks the models of a service configuration (its models
list; the bench keeps its own broker, topics, producer settings and snapshot
directory) instead of the built-in MAM (--kernel, --dim). The events then have
the models' features.dim, and labels ±1, or the levels 1..m when a model is
ordinal (omam, or a ranking model with levels; m is the fewest levels among
them). A configuration mixing a classifier with an ordinal model is refused:
their labels have nothing in common.

With features.hash the events are instead users rating items, hashed as the
service hashes them (features.hash, namespaces, interactions, max_features):
  key u42: {"id": "b-1", "features": {"user": {"id": "u42"},
            "item": {"id": "i7", "genres": ["g3", "g11"]}}, "label": 4.5}
user ids of 10 000 users and item ids of 50 000 items drawn from Zipf
distributions (seeded), each item with 1–3 of 20 genres; the user's id is the
message key. The user's and the item's features go into the namespaces user
and item when features.namespaces lists them, else into its first
namespaces, else to the top level ("user": "u42", "item": "i7", "genres":
[…]). The labels are ratings 0.5..5 in half stars (a user bias plus an item
bias plus noise) when every model accepts them through its label mapping or
kind (regression models, classifiers with label.positive, ordinal models
with label.edges), else ±1 or levels as above. The report's setup says what
the events held: their features, the distinct users and items, the hashed
entries per event.

Every score run checks that each model learned every event
(streamer_model_examples; a key-scoped model's over every key) and that none
was dead-lettered.

The score pipelines keep the calibrated certainty as the service does by
default (a window of 2 000 pairs refitted every 100, at most every 10ms:
--calibration-window, --calibration-every, --calibration-min-interval;
--config: the file's calibration section), so the
figures are the default service's; --calibration-window 0 measures without
it. (Before 2026-11-27 the bench ran without calibration.)

--json writes the report as JSON to stdout (the text tables go to stderr):

  {"setup": {"events", "dim", "partitions", "rounds", "warmup_rounds",
             "data_path": {"input": "broker" | "memory" (--no-broker),
                           "output": "broker" | "discarded" (--no-broker)},
             "input": {"kind": "dense" | "hashed"; hashed: "bits",
                       "features" (["user.id", "item.id", "item.genres"]),
                       "users", "user_ids", "items", "item_ids" (ids drawn,
                       of ids possible), "genres", "entries_per_event" (mean
                       hashed entries, interactions included)},
             "snapshot_every_s" (0: no score+snapshot), "models",
             "labels" ("±1", "1..m" or "0.5..5 (ratings)"),
             "pipelines": ["passthrough", "score", "score+snapshot"],
             "gomaxprocs", "calibration_window" (0: off),
             "calibration_every", "calibration_min_interval_s"},
   "warmup": [round, …] (discarded; "round": 0),
   "rounds": [{"round": 1…, "order": [pipeline, …],
               "results": [{"pipeline", "position" (0-based, in "order"),
                            "events", "records" (acknowledged), "seconds",
                            "events_per_s", "snapshots", "cpu_s" (the
                            process's CPU time over "seconds", broker
                            included), "cpu_us_per_event", "lock_wait_s"
                            (time the process's goroutines were blocked
                            on locks, runtime/metrics), "allocs" (heap
                            objects the process allocated, runtime/metrics:
                            broker and kafka-go included), "learned"
                            (score pipelines: {model: examples learned})}, …],
               "ratios": {"score/passthrough": r, "score+snapshot/score": r}}, …],
   "summary": {"pipelines": [{"pipeline", "n", "median", "p25", "p75", "min",
                              "max" (events/s), "rel_iqr",
                              "cpu_us_per_event", "lock_wait_us_per_event",
                              "allocs_per_event" (medians)}, …],
               "ratios": [{"ratio", "n", "median", "p25", "p75", "min", "max",
                           "per_round": [r, …]}, …],
               "warnings": ["…", …]}}

Quartiles interpolate linearly between order statistics (numpy's default).
CPU is read with getrusage (0 where it cannot be): on a machine whose cores
the run keeps busy, CPU per event is what bounds events/s, and it varies less
than events/s when other load comes and goes. Heap allocations per event are
the whole process's: with the broker they are mostly kafka-go's (a fetched
record's value, the writer's per-record metadata lookup) and the embedded
broker's; --no-broker leaves the service's own path, which allocates nothing
per event: about 0.01 per event remain over a million events, its buffer
and run pools refilling after collections, and the consumer group's.

With --instances 1,2,3 it instead runs the score pipeline with partitioned
state (snapshot.scope: partition) as that many instances of one consumer
group, and prints events/s for each count and the changelog's bytes per
event. The counts run in the order given in every round, without warm-up or
interleaving; --json does not apply.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			if cfg.Events < 1 || cfg.Rounds < 1 || cfg.Warmup < 0 || cfg.Partitions < 1 {
				return fmt.Errorf("--events, --rounds and --partitions must be ≥ 1, --warmup ≥ 0")
			}
			if configPath != "" {
				if cmd.Flags().Changed("kernel") {
					return fmt.Errorf("--kernel applies to the built-in MAM, not to --config")
				}
				types := newModelTypes()
				c, err := config.Load(configPath, os.Environ(), types)
				if err != nil {
					return err
				}
				models, err := bench.FromConfig(c, types)
				if err != nil {
					return err
				}
				if cmd.Flags().Changed("dim") && cfg.Dim != models.Dim {
					return fmt.Errorf("--dim %d: the models of %s take features.dim %d", cfg.Dim, configPath, models.Dim)
				}
				models.Name = configPath + ": " + models.Name
				cfg.Models, cfg.Dim = models, models.Dim
				if !cmd.Flags().Changed("calibration-window") {
					calWindow = c.Calibration.Window
				}
				if !cmd.Flags().Changed("calibration-every") {
					calEvery = c.Calibration.Every
				}
				if !cmd.Flags().Changed("calibration-min-interval") {
					calGap = c.Calibration.MinInterval
				}
				calDelta = c.Calibration.Delta
			} else {
				if kernel != "linear" && kernel != "rbf" { // before the preload, not after it
					return fmt.Errorf("--kernel %q: the built-in MAM's kernel is linear or rbf", kernel)
				}
				cfg.Kernel = online.KernelSpec{Type: kernel}
				if kernel == "rbf" {
					cfg.Kernel = online.KernelSpec{Type: kernel, Gamma: 1 / float64(cfg.Dim), Features: 256, Seed: 1}
				}
				cfg.Models = bench.BuiltinMAM(cfg.Dim, cfg.Kernel)
			}
			if calWindow < 0 || calWindow > 0 && (calEvery < 1 || calGap < 0) {
				return fmt.Errorf("--calibration-window must be ≥ 0 (0 = off), --calibration-every ≥ 1 and --calibration-min-interval ≥ 0")
			}
			cfg.Calibration = engine.CalibrationConfig{Window: calWindow, Every: calEvery, Delta: calDelta, MinInterval: calGap}
			stderr := cmd.ErrOrStderr()
			cfg.Progress = func(s string) { fmt.Fprintln(stderr, s) }
			if cfg.Stages && (cpuProfile != "" || len(instances) > 0) {
				return fmt.Errorf("--stages profiles each run on its own: not with --cpuprofile or --instances")
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if mutexProfile != "" {
				// Every contended lock: where the lock wait column's time goes.
				defer runtime.SetMutexProfileFraction(runtime.SetMutexProfileFraction(1))
				defer func() {
					if err := writeProfile("mutex", mutexProfile); err != nil {
						fmt.Fprintf(stderr, "streamer: --mutexprofile: %v\n", err)
					}
				}()
			}
			if memProfile != "" {
				// Every allocation's stack, not one per 512 kB: the
				// per-event paths are to allocate nothing, and a rare
				// allocation per event shows as such.
				defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
				runtime.MemProfileRate = 1
				defer func() {
					if err := writeProfile("allocs", memProfile); err != nil {
						fmt.Fprintf(stderr, "streamer: --memprofile: %v\n", err)
					}
				}()
			}
			if len(instances) > 0 {
				if cfg.NoBroker {
					return fmt.Errorf("--no-broker does not apply to --instances: scale-out measures instances that share their state through the broker's changelog")
				}
				if asJSON {
					return fmt.Errorf("--json does not apply to --instances")
				}
				return benchScale(ctx, cmd.OutOrStdout(), cfg, instances)
			}
			rep, err := bench.Run(ctx, cfg)
			if err != nil {
				return err
			}
			var text io.Writer = cmd.OutOrStdout()
			if asJSON {
				text = stderr
			}
			rep.WriteText(text)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Events, "events", 1_000_000, "events to push through each pipeline")
	cmd.Flags().BoolVar(&cfg.Stages, "stages", false, "CPU-profile each measured run and report the CPU of each stage of the service (fetch, apply, publish, calibration, checkpoint) and of the embedded broker per event, and its busiest goroutine's share of the run (1 = never idle: it bounds events/s whatever the cores)")
	cmd.Flags().Var(mergeLanesFlag{&cfg.MergeLanes}, "merge-lanes", "auto | on | off: whether the partitions' lanes learn a mergeable global mam in parallel, each with a merged view of its own (auto: with GOMAXPROCS > 2), or take turns at one instance")
	cmd.Flags().BoolVar(&cfg.NoBroker, "no-broker", false, "no broker on the data path: each run reads the events from memory (generated once, before the rounds) and publishes to a discarding publisher; the consumer group stays on the embedded broker")
	cmd.Flags().IntVar(&cfg.Rounds, "rounds", 5, "measured rounds; each runs every pipeline once, in a balanced order")
	cmd.Flags().IntVar(&cfg.Warmup, "warmup", 1, "rounds run first and discarded")
	cmd.Flags().DurationVar(&cfg.SnapshotEvery, "snapshot-every", time.Second, "also run score with snapshots at this period (0 = skip)")
	cmd.Flags().IntVar(&cfg.Dim, "dim", 32, "features per event (the built-in MAM; --config: its features.dim)")
	cmd.Flags().IntVar(&cfg.Partitions, "partitions", 3, "input topic partitions")
	cmd.Flags().StringVar(&kernel, "kernel", "linear", "built-in MAM kernel: linear | rbf (D=256, gamma=1/dim)")
	cmd.Flags().StringVarP(&configPath, "config", "c", "", "benchmark the models of this config file (YAML) instead of the built-in MAM")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole bench (broker included) to this file (go tool pprof); the pipelines' goroutines carry the label pipeline=passthrough|score|score+snapshot (go tool pprof -tags FILE; -tagfocus pipeline=score)")
	cmd.Flags().StringVar(&mutexProfile, "mutexprofile", "", "write a profile of the whole bench's contended locks to this file (go tool pprof): where the lock wait column's time goes")
	cmd.Flags().StringVar(&memProfile, "memprofile", "", "write a profile of the whole bench's heap allocations to this file, every one recorded (slow: not for timing) (go tool pprof -sample_index=alloc_objects FILE): where the heap allocations column's come from")
	cmd.Flags().BoolVar(&asJSON, "json", false, "write the report as JSON to stdout (schema above), the tables to stderr")
	calDefault := config.Default().Calibration
	calDelta = calDefault.Delta
	cmd.Flags().IntVar(&calWindow, "calibration-window", calDefault.Window, "calibrated certainty: the window of (score, label) pairs, as calibration.window (0 = off; --config: its calibration)")
	cmd.Flags().IntVar(&calEvery, "calibration-every", calDefault.Every, "calibrated certainty: labelled pairs between refits, as calibration.every")
	cmd.Flags().DurationVar(&calGap, "calibration-min-interval", calDefault.MinInterval, "calibrated certainty: the least time between refits' starts, as calibration.min_interval (0 = every --calibration-every pairs)")
	cmd.Flags().IntSliceVar(&instances, "instances", nil, "scale-out: instance counts to measure, e.g. 1,2,3 (partitioned state; --partitions 6 suits up to 6)")
	return cmd
}

func benchScale(ctx context.Context, w io.Writer, cfg bench.Config, instances []int) error {
	for _, k := range instances {
		if k < 1 || k > cfg.Partitions {
			return fmt.Errorf("--instances: %d is outside 1..%d (--partitions)", k, cfg.Partitions)
		}
	}
	res, in, err := bench.ScaleOut(ctx, cfg, instances)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nscale-out, %d events, %s, %s, %d partitions, snapshots every %s, GOMAXPROCS=%d\n\n",
		cfg.Events, in.Describe(cfg.Dim), cfg.Models.Name, cfg.Partitions, cfg.SnapshotEvery, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "| round | instances | events/s | events/s once stable | seconds | score records | snapshots | changelog bytes | changelog bytes/event |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range res {
		fmt.Fprintf(w, "| %d | %d | %.0f | %.0f | %.2f | %d | %d | %d | %.3g |\n", i/len(instances)+1, r.Instances, r.Rate(), r.StableRate(),
			r.Elapsed.Seconds(), r.Scored, r.Snapshots, r.ChangelogBytes, float64(r.ChangelogBytes)/float64(r.Events))
	}
	return nil
}

// writeProfile writes the named runtime profile (pprof.Lookup) to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mergeLanesFlag is --merge-lanes (engine.MergeLanes).
type mergeLanesFlag struct{ v *engine.MergeLanes }

func (f mergeLanesFlag) String() string {
	if f.v == nil {
		return "auto"
	}
	return [...]string{"auto", "on", "off"}[*f.v]
}

func (f mergeLanesFlag) Set(s string) error {
	m, err := engine.ParseMergeLanes(s)
	if err == nil {
		*f.v = m
	}
	return err
}

func (mergeLanesFlag) Type() string { return "auto|on|off" }
