package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"qshare"
	"qshare/config"
	"qshare/sim"
)

type simulateFlags struct {
	config, trace, traceFormat string
	report, events, plots      string
	checkpoint, grace          time.Duration
	whatIf                     []string
	compare, skipBad, timing   bool
	quiet                      bool
	maxShares                  int
	phillyNode                 string
	phillyGPU                  string
	phillyExclude              []string
	workload                   string
	output                     string
	start                      string
}

func init() {
	var f simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate --config FILE --trace FILE",
		Short: "Replay a job trace through the scheduler under a virtual clock, and answer \"what if?\"",
		Long: `simulate replays a trace of jobs through the same engine that "qshare serve"
uses, under a virtual clock: a month of a large cluster replays in seconds.
It prints a table per quota share (waits, preemptions, capacity used,
borrowed, lent and idle) and can write a JSON report, the event log, and
SVG plots with an index.html.

The trace is a CSV with a header row; columns in any order, unknown ones
ignored:
  job_id, submit_s, duration_s, quota_share, instance_type, instance_count
  optional: priority (0), job_queue (the config's only queue),
            preemption_retries (unlimited)
A job that needs several instance types has one row per type; lines
starting with # are comments. With
--trace-format philly it reads the Philly trace (job_id,submit_s,gpus,
duration_s,vc) and puts each job in the share named after its VC.

--what-if KEY=VALUE changes the configuration for this run (repeatable):
  share.[QUEUE/]NAME.strategy=RESERVE|LEND|LEND_AND_BORROW
  share.[QUEUE/]NAME.maxCapacity.TYPE=N    (0 removes the type)
  share.[QUEUE/]NAME.borrowLimit=N | inSharePreemption=E | state=S
  share.[QUEUE/]NAME.minRunTime=DURATION   (10m, or seconds; 0 removes it)
  share.*.FIELD=VALUE                      (every quota share)
  env.NAME.maxCapacity.TYPE=N | env.NAME.state=S
  queue.NAME.priority=N | queue.NAME.state=S
  plan.NAME=TYPE:COUNT@START/LENGTH[:share=[QUEUE/]SHARE][:warning=DUR]
                                           a capacity plan, e.g.
                                           plan.p5=ml.p5.48xlarge:16@2026-12-01T00:00/14d:share=QS1
                                           (START on the clock of --start; plan.NAME=none removes one)
With --compare it runs the configuration as written and as changed, and
reports the differences (--events and --plots then show the changed run).

The same inputs give byte-identical reports and events (wall-clock figures
are added only with --timing).`,
		Example: `  # Replay a trace and write everything
  qshare simulate --config examples/three-shares.yaml --trace examples/three-shares-trace.csv \
    --report report.json --events events.jsonl --plots plots/

  # What if QS1 reserved its capacity instead of lending it?
  qshare simulate --config examples/three-shares.yaml --trace examples/three-shares-trace.csv \
    --what-if share.QS1.strategy=RESERVE --compare

  # The zero-overhead baseline of Kueue's scheduler benchmark
  qshare simulate --workload kueue-baseline

  # The Philly trace, with preempted jobs checkpointing every 30 minutes
  qshare simulate --config examples/philly/philly.yaml --trace-format philly \
    --trace ../shared/data/philly/philly_vc_labeled.csv --checkpoint-interval 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "the configuration file (the YAML or JSON that qshare apply takes)")
	fl.StringVar(&f.trace, "trace", "", "the trace CSV file")
	fl.StringVar(&f.traceFormat, "trace-format", "csv", "the trace format: csv or philly")
	fl.StringVar(&f.report, "report", "", "write the report as JSON to this file")
	fl.StringVar(&f.events, "events", "", "write the event log (JSON lines) to this file")
	fl.StringVar(&f.plots, "plots", "", "write SVG plots and index.html to this directory")
	fl.DurationVar(&f.checkpoint, "checkpoint-interval", 0, "how often jobs checkpoint; a preempted job loses the work since its last checkpoint (0: never, it starts over)")
	fl.DurationVar(&f.grace, "grace", 0, "how long a preempted job takes to stop; it holds its capacity until then")
	fl.StringArrayVar(&f.whatIf, "what-if", nil, "change the configuration for this run: KEY=VALUE (repeatable)")
	fl.BoolVar(&f.compare, "compare", false, "run the configuration as written and with the --what-if changes, and compare")
	fl.BoolVar(&f.skipBad, "skip-bad-rows", false, "run without the trace rows that cannot be used (they are listed on stderr)")
	fl.BoolVar(&f.timing, "timing", false, "add wall-clock figures (engine decisions per second) to the report")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fl.IntVar(&f.maxShares, "max-shares-per-queue", qshare.DefaultQuotaSharesPerQueue, "the most quota shares a job queue may have (a server's configured limit)")
	fl.StringVar(&f.phillyGPU, "philly-gpu-type", "ml.g5.xlarge", "philly format: the instance type of one GPU")
	fl.StringVar(&f.phillyNode, "philly-node-type", "", "philly format: an 8-GPU instance type for jobs of 8 GPUs or more (default: every GPU is one --philly-gpu-type instance)")
	fl.StringArrayVar(&f.phillyExclude, "philly-exclude", nil, "philly format: leave out the jobs of this VC (repeatable), e.g. unknown")
	fl.StringVar(&f.start, "start", "", "the wall time of the trace's t=0, against which capacity plans' windows are placed (2026-12-01T00:00, UTC; default 2000-01-01); give check-events the same --origin")
	fl.StringVarP(&f.output, "output", "o", "table", "what to print on stdout: table (the summary), json or yaml (the report)")
	fl.StringVar(&f.workload, "workload", "", "replay a built-in workload instead of --config and --trace: kueue-baseline or kueue-large-scale (Kueue's scheduler benchmarks)")
	cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	cmd.MarkFlagFilename("trace", "csv")
	cmd.MarkFlagDirname("plots")
	rootCmd.AddCommand(cmd)
}

// loadConfigFile parses a configuration file for the simulator or the checker.
func loadConfigFile(path string, maxShares int) (*config.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "cannot read the configuration: %v", err)
	}
	return config.Parse(path, data, config.Options{MaxSharesPerQueue: maxShares})
}

func runSimulate(cmd *cobra.Command, f simulateFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	if f.compare && len(f.whatIf) == 0 {
		return qshare.Errorf(qshare.EINVALID, "--compare needs at least one --what-if KEY=VALUE to compare with")
	}
	var (
		base *config.File
		jobs []sim.Job
		err  error
	)
	switch {
	case f.workload != "":
		if f.config != "" || f.trace != "" {
			return qshare.Errorf(qshare.EINVALID, "--workload replaces --config and --trace: give one or the other")
		}
		var w *sim.Workload
		switch f.workload {
		case "kueue-baseline":
			w = sim.KueueBaseline()
		case "kueue-large-scale":
			w = sim.KueueLargeScale()
		default:
			return qshare.Errorf(qshare.EINVALID, "--workload %q is not known: use kueue-baseline or kueue-large-scale", f.workload)
		}
		base, jobs = w.Config, w.Jobs
		f.maxShares = max(f.maxShares, w.MaxSharesPerQueue)
		f.config, f.trace = w.Name, w.Name
	case f.config == "" || f.trace == "":
		return qshare.Errorf(qshare.EINVALID, "give --config FILE and --trace FILE (or --workload NAME)")
	default:
		if base, err = loadConfigFile(f.config, f.maxShares); err != nil {
			return err
		}
		if jobs, err = readTrace(cmd.ErrOrStderr(), f, base); err != nil {
			return err
		}
	}
	opts := config.Options{MaxSharesPerQueue: f.maxShares}
	cfg := base
	if len(f.whatIf) > 0 {
		if cfg, err = base.WhatIf(f.whatIf, opts); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stderr := cmd.ErrOrStderr()
	progress := func(label string) func(done, total int) {
		if f.quiet {
			return nil
		}
		if file, ok := stderr.(*os.File); !ok || !isatty.IsTerminal(file.Fd()) {
			return nil
		}
		return func(done, total int) {
			const width = 30
			n := 0
			if total > 0 {
				n = done * width / total
			}
			fmt.Fprintf(stderr, "\r%s [%s%s] %3d%% %d/%d jobs", label, strings.Repeat("#", n), strings.Repeat(".", width-n), done*100/max(total, 1), done, total)
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	}
	var start time.Time
	switch {
	case f.start != "":
		if start, err = config.ParseTime(f.start); err != nil {
			return qshare.Errorf(qshare.EINVALID, "--start: %v", err)
		}
	case len(cfg.CapacityPlans) > 0:
		return qshare.Errorf(qshare.EINVALID, "the configuration has capacity plans, whose windows are absolute times: give --start, the wall time of the trace's t=0 (e.g. --start 2026-11-20T00:00)")
	}
	simOpts := func(label string, events io.Writer) sim.Options {
		return sim.Options{CheckpointInterval: f.checkpoint, Grace: f.grace, Timing: f.timing, Events: events, Progress: progress(label),
			Outcomes: f.workload != "", Start: start}
	}

	var events io.Writer
	if f.events != "" {
		file, err := os.Create(f.events)
		if err != nil {
			return qshare.Errorf(qshare.EINVALID, "cannot write the event log: %v", err)
		}
		defer file.Close()
		events = file
	}
	var baseRep *sim.Report
	if f.compare {
		// Each run gets its own copy of the jobs: a run owns its input.
		if baseRep, err = sim.Run(ctx, base, append([]sim.Job(nil), jobs...), simOpts("base   ", nil)); err != nil {
			return err
		}
	}
	label := "replay "
	if f.compare {
		label = "what-if"
	}
	rep, err := sim.Run(ctx, cfg, jobs, simOpts(label, events))
	if err != nil {
		return err
	}
	if events != nil {
		if err := events.(*os.File).Close(); err != nil {
			return fmt.Errorf("writing the event log: %w", err)
		}
	}

	out := cmd.OutOrStdout()
	var (
		write   func(io.Writer) error
		summary func(io.Writer) error
		value   any
	)
	if f.compare {
		c := sim.Compare(config.Describe(base, cfg), baseRep, rep)
		write, summary, value = c.WriteJSON, c.WriteSummary, c
	} else {
		write, summary, value = rep.WriteJSON, rep.WriteSummary, rep
	}
	if err := emitAs(out, f.output, value, summary); err != nil {
		return err
	}
	if f.workload != "" && f.output == "table" {
		m := sim.AdmissionMeans(rep)
		fmt.Fprintf(out, "\nmean time to first start: large %.1fs, medium %.1fs, small %.1fs\n", m["large"], m["medium"], m["small"])
	}
	if f.report != "" {
		if err := writeFile(f.report, write); err != nil {
			return err
		}
	}
	if f.plots != "" {
		title := filepath.Base(f.trace) + " on " + filepath.Base(f.config)
		if len(f.whatIf) > 0 {
			title += " (what if " + strings.Join(f.whatIf, ", ") + ")"
		}
		if err := sim.WritePlots(f.plots, title, rep); err != nil {
			return fmt.Errorf("writing plots: %w", err)
		}
		if f.output == "table" {
			fmt.Fprintf(out, "\nplots: %s\n", filepath.Join(f.plots, "index.html"))
		}
	}
	return nil
}

func checkOutput(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return qshare.Errorf(qshare.EINVALID, "--output %q is not known: use table, json or yaml", format)
}

// emitAs prints v as JSON or YAML (with the JSON field names), or calls
// table for the human form.
func emitAs(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		y, err := yaml.Marshal(generic)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	return table(w)
}

func writeFile(path string, write func(io.Writer) error) error {
	file, err := os.Create(path)
	if err != nil {
		return qshare.Errorf(qshare.EINVALID, "cannot write %s: %v", path, err)
	}
	if err := write(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

func readTrace(stderr io.Writer, f simulateFlags, cfg *config.File) ([]sim.Job, error) {
	file, err := os.Open(f.trace)
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "cannot read the trace: %v", err)
	}
	defer file.Close()
	topts := sim.TraceOptions{Name: f.trace, SkipBadRows: f.skipBad}
	var jobs []sim.Job
	var bad []sim.RowError
	switch f.traceFormat {
	case "csv":
		jobs, bad, err = sim.ReadTrace(file, cfg, topts)
	case "philly":
		jobs, bad, err = sim.ReadPhilly(file, cfg, sim.PhillyOptions{TraceOptions: topts, GPUType: f.phillyGPU, NodeType: f.phillyNode, Exclude: f.phillyExclude})
	default:
		return nil, qshare.Errorf(qshare.EINVALID, "--trace-format %q is not known: use csv or philly", f.traceFormat)
	}
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "skipped %d bad rows of %s:\n", len(bad), f.trace)
		for i, r := range bad {
			if i == 20 {
				fmt.Fprintf(stderr, "  ... and %d more\n", len(bad)-20)
				break
			}
			fmt.Fprintf(stderr, "  %v\n", r)
		}
	}
	return jobs, nil
}
