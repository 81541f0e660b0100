package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/spf13/cobra"

	"qshare"
	"qshare/config"
	"qshare/event"
	"qshare/plan"
	"qshare/postgres"
	"qshare/store"
)

func init() {
	var (
		cfgPath   string
		settle    float64
		maxShares int
		whatIf    []string
		origin    string
	)
	cmd := &cobra.Command{
		Use:   "check-events FILE|STORE_URL [--config CONFIG | --endpoint URL]",
		Short: "Check an event log against the scheduler's guarantees",
		Long: `check-events replays an event log (from "qshare simulate --events" or
"qshare serve --events", or the log a PostgreSQL store keeps with "qshare
serve --events store", given by its postgres:// URL) against a configuration, and reports every moment
the scheduler broke one of its guarantees, with the time and the jobs
involved:

  environment-capacity   usage of a type above the environment's limit
  share-limit            a LEND or RESERVE share above its own maxCapacity
  borrow-cap             a LEND_AND_BORROW share above maxCapacity + borrowLimit
  borrow-source          borrowed capacity that came from a RESERVE share's
                         idle capacity (or from nowhere)
  head-waits             a share's head job waiting while it fits its share's
                         own maxCapacity and the environment has free room
                         (capacity held by a stopping job is not free)
  reserve-preempted      a job of a RESERVE share without in-share
                         preemption preempted
  in-share-priority      an in-share preemption of an equal or higher priority
  reclaim-victim         a cross-share victim from a share within its own capacity
  preempted-for-nothing  a job preempted for another that then never started
                         (not when that job was terminated while the victim
                         was stopping)
  min-run-time           a victim chosen before it ran its share's minimum
                         run time (tag qshare:minRunTimeSeconds; --settle
                         is allowed for a server's log)
  protection-wait        a head job left waiting when the protection of a
                         victim it needs has ended (a reclaim would now
                         make room, and nothing happens at that instant,
                         or within --settle)
  capacity-plan          a capacity plan's job started outside its window
                         (start to end less warning) or beyond its count,
                         or something of the plan still holding capacity
                         after its end (--origin places the windows)
  double-hold            a job holding capacity twice at once
  log                    an inconsistent log (a line that cannot be read,
                         time going back, a job giving back what it does
                         not hold, an unknown share or queue)

A preemption is judged when it was decided: at its "stopping" line when the
log has one (a server's, or a simulation with a grace period), else at its
"preempt" line. A "fail" followed by a "start" of the same job is an
attempt that failed and was retried (or was lost and requeued). Jobs of a
queue without quota shares (an empty "share") are checked against the
environment's capacity only. A line that cannot be read is reported with
its line number, and the lines after it are still checked.

It exits with status 1 when it finds a violation. The configuration is the
file that "qshare apply" takes (--config), or, without --config, what the
server at --endpoint holds now. It must be the one the log was made under:
a log that spans configuration changes is checked against one of them.
--what-if KEY=VALUE (as "qshare simulate" takes it, repeatable) changes
the configuration, to check the log of a simulation run with the same
changes.`,
		Example: `  qshare simulate --config examples/three-shares.yaml --trace examples/three-shares-trace.csv --events events.jsonl
  qshare check-events events.jsonl --config examples/three-shares.yaml

  # A server's log: its pass runs a moment after the change that allows it
  qshare check-events /var/lib/qshare/events.jsonl --config fleet.yaml --settle 1 -o json

  # The log in a PostgreSQL store (serve --events store), across every leader
  qshare check-events 'postgres://qshare@db.internal:5432/qshare' --config fleet.yaml --settle 2

  # Against the configuration the local server holds
  qshare check-events /var/lib/qshare/events.jsonl --settle 1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := resolveClientOptions(cmd)
			if err != nil {
				return err
			}
			output := opts.output
			var cfg *config.File
			if cfgPath != "" {
				cfg, err = loadConfigFile(cfgPath, maxShares)
			} else {
				api, hc, cerr := clientsFor(cmd.Context(), opts)
				if cerr != nil {
					return cerr
				}
				cfg, err = configFromServer(cmd.Context(), api, &plan.PlanClient{Endpoint: opts.endpoint, HTTP: hc}, maxShares)
				if err != nil {
					err = userError(err, opts.endpoint)
				}
			}
			if err != nil {
				return err
			}
			if len(whatIf) > 0 {
				if cfg, err = cfg.WhatIf(whatIf, config.Options{MaxSharesPerQueue: maxShares}); err != nil {
					return err
				}
			}
			var in io.Reader = os.Stdin
			if u, ok := postgres.StoreURL(args[0]); ok {
				// The log a PostgreSQL store keeps (serve --events store):
				// the whole history, whichever server led.
				if in, err = storeEventLog(cmd.Context(), u.String()); err != nil {
					return err
				}
			} else if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return qshare.Errorf(qshare.EINVALID, "cannot read the event log: %v", err)
				}
				defer f.Close()
				in = f
			}
			copts := event.CheckOptions{Settle: settle}
			if origin != "" {
				if copts.Origin, err = config.ParseTime(origin); err != nil {
					return qshare.Errorf(qshare.EINVALID, "--origin: %v", err)
				}
			}
			vs, sum, err := event.Check(cfg, in, copts)
			if err != nil {
				return qshare.Errorf(qshare.EINVALID, "%s: %v", redactURL(args[0]), err)
			}
			out := cmd.OutOrStdout()
			if vs == nil {
				vs = []event.Violation{}
			}
			result := struct {
				Summary    event.Summary     `json:"summary"`
				Violations []event.Violation `json:"violations"`
			}{sum, vs}
			err = emitAs(out, output, result, func(w io.Writer) error {
				for _, v := range vs {
					fmt.Fprintln(w, v)
				}
				if sum.Violations > len(vs) {
					fmt.Fprintf(w, "... and %d more\n", sum.Violations-len(vs))
				}
				_, err := fmt.Fprintf(w, "%d lines, %d jobs, %d starts (%d retries), %d preemptions, %d finishes, %d failures: %d violations\n",
					sum.Lines, sum.Jobs, sum.Starts, sum.Retries, sum.Preempts, sum.Finishes, sum.Fails, sum.Violations)
				return err
			})
			if err != nil {
				return err
			}
			if sum.Violations > 0 {
				return errViolations
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfgPath, "config", "", "the configuration the log was made under (YAML or JSON); without it, the server's (--endpoint)")
	fl.Float64Var(&settle, "settle", 0, "seconds a fitting head job may wait before it counts (0 for a simulation's log)")
	fl.StringArrayVar(&whatIf, "what-if", nil, "change the configuration as \"qshare simulate --what-if\" does: KEY=VALUE (repeatable)")
	fl.IntVar(&maxShares, "max-shares-per-queue", qshare.DefaultQuotaSharesPerQueue, "the most quota shares a job queue may have (a server's configured limit)")
	fl.StringVar(&origin, "origin", "", "the wall time of the log's t=0, for capacity plans' windows: the simulation's --start (2026-11-20T00:00, UTC); default the Unix epoch, a server's log")
	addClientFlags(cmd)
	cmd.MarkFlagFilename("config", "yaml", "yml", "json")
	rootCmd.AddCommand(cmd)
}

// configFromServer reads the configuration a server holds (environments,
// scheduling policies, job queues and their quota shares) as a config.File,
// through the AWS Batch API, and validates it.
func configFromServer(ctx context.Context, api *batch.Client, plans plan.PlanAPI, maxShares int) (*config.File, error) {
	f := &config.File{}
	envs, err := allPages(ctx, batch.NewDescribeServiceEnvironmentsPaginator(api, &batch.DescribeServiceEnvironmentsInput{}),
		func(out *batch.DescribeServiceEnvironmentsOutput) []types.ServiceEnvironmentDetail {
			return out.ServiceEnvironments
		})
	if err != nil {
		return nil, err
	}
	for _, e := range envs {
		if e.Status == types.ServiceEnvironmentStatusDeleted {
			continue
		}
		env := config.Environment{Name: aws.ToString(e.ServiceEnvironmentName), State: qshare.State(e.State)}
		for _, l := range e.CapacityLimits {
			env.CapacityLimits = append(env.CapacityLimits, qshare.CapacityLimit{CapacityUnit: aws.ToString(l.CapacityUnit), MaxCapacity: int64(aws.ToInt32(l.MaxCapacity))})
		}
		f.ServiceEnvironments = append(f.ServiceEnvironments, env)
	}
	policies, err := allPages(ctx, batch.NewListSchedulingPoliciesPaginator(api, &batch.ListSchedulingPoliciesInput{}),
		func(out *batch.ListSchedulingPoliciesOutput) []types.SchedulingPolicyListingDetail {
			return out.SchedulingPolicies
		})
	if err != nil {
		return nil, err
	}
	var arns []string
	for _, p := range policies {
		arns = append(arns, aws.ToString(p.Arn))
	}
	for len(arns) > 0 {
		n := min(len(arns), 100)
		out, err := api.DescribeSchedulingPolicies(ctx, &batch.DescribeSchedulingPoliciesInput{Arns: arns[:n]})
		if err != nil {
			return nil, err
		}
		for _, p := range out.SchedulingPolicies {
			pol := config.Policy{Name: aws.ToString(p.Name)}
			if p.QuotaSharePolicy != nil {
				pol.QuotaSharePolicy = &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: string(p.QuotaSharePolicy.IdleResourceAssignmentStrategy)}
			} else {
				pol.FairsharePolicy = &config.FairsharePolicy{}
			}
			f.SchedulingPolicies = append(f.SchedulingPolicies, pol)
		}
		arns = arns[n:]
	}
	queues, err := allPages(ctx, batch.NewDescribeJobQueuesPaginator(api, &batch.DescribeJobQueuesInput{}),
		func(out *batch.DescribeJobQueuesOutput) []types.JobQueueDetail { return out.JobQueues })
	if err != nil {
		return nil, err
	}
	for _, jq := range queues {
		if jq.Status == types.JQStatusDeleted || jq.JobQueueType != types.JobQueueTypeSagemakerTraining {
			continue
		}
		prio := int64(aws.ToInt32(jq.Priority))
		q := config.Queue{Name: aws.ToString(jq.JobQueueName), Priority: &prio, State: qshare.State(jq.State), SchedulingPolicy: aws.ToString(jq.SchedulingPolicyArn)}
		if len(jq.ServiceEnvironmentOrder) > 0 {
			q.ServiceEnvironment = aws.ToString(jq.ServiceEnvironmentOrder[0].ServiceEnvironment)
		}
		shares, err := allPages(ctx, batch.NewListQuotaSharesPaginator(api, &batch.ListQuotaSharesInput{JobQueue: jq.JobQueueArn}),
			func(out *batch.ListQuotaSharesOutput) []types.QuotaShareDetail { return out.QuotaShares })
		if err != nil {
			return nil, err
		}
		for _, qs := range shares {
			s := config.Share{Name: aws.ToString(qs.QuotaShareName), State: qshare.State(qs.State)}
			for _, l := range qs.CapacityLimits {
				s.CapacityLimits = append(s.CapacityLimits, qshare.CapacityLimit{CapacityUnit: aws.ToString(l.CapacityUnit), MaxCapacity: int64(aws.ToInt32(l.MaxCapacity))})
			}
			if rs := qs.ResourceSharingConfiguration; rs != nil {
				s.Strategy = qshare.Strategy(rs.Strategy)
				if rs.BorrowLimit != nil && s.Strategy == qshare.StrategyLendAndBorrow {
					b := int64(aws.ToInt32(rs.BorrowLimit))
					s.BorrowLimit = &b
				}
			}
			if pc := qs.PreemptionConfiguration; pc != nil {
				s.InSharePreemption = qshare.State(pc.InSharePreemption)
			}
			// The minimum run time is a tag (qshare:minRunTimeSeconds),
			// which ListQuotaShares does not return.
			tags, err := api.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: qs.QuotaShareArn})
			if err != nil {
				return nil, err
			}
			if v, ok := tags.Tags[qshare.TagMinRunTime]; ok {
				s.Tags = map[string]string{qshare.TagMinRunTime: v}
			}
			q.QuotaShares = append(q.QuotaShares, s)
		}
		f.JobQueues = append(f.JobQueues, q)
	}
	// The capacity plans, from the server's extension endpoint (a server
	// without it has none).
	if ps, err := plans.Plans(ctx); err == nil {
		f.CapacityPlans = ps
	} else if qshare.ErrorCodeOf(err) == qshare.EDENIED {
		return nil, err
	}
	if err := f.Validate(config.Options{MaxSharesPerQueue: maxShares}); err != nil {
		return nil, fmt.Errorf("the server's configuration does not validate: %w", err)
	}
	return f, nil
}

// errViolations makes check-events exit non-zero after it has printed them.
var errViolations = violationsError{}

type violationsError struct{}

func (violationsError) Error() string { return "the event log breaks the scheduler's guarantees" }

// storeEventLog reads the whole event log a PostgreSQL store keeps, without
// taking the store (its leader may be running).
func storeEventLog(ctx context.Context, raw string) (io.Reader, error) {
	wa, err := postgres.NewWatcher(ctx, raw)
	if err != nil {
		return nil, err
	}
	defer wa.Close()
	var b bytes.Buffer
	if err := wa.WriteEvents(ctx, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// redactURL returns raw without a password, if it is a URL.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return store.RedactURL(u)
	}
	return raw
}
