package sim

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare"
	"qshare/config"
	"qshare/event"
)

// oversubscribe lets the random environments be smaller than what their
// shares own (on by default; the engine once left a RESERVE share's idle
// capacity unused there even by shares within their own limits).
var oversubscribe = flag.Bool("oversubscribe", true, "let random environments be smaller than the sum of their shares' limits")

// withGrace gives preempted jobs a grace period in some random runs (on by
// default; a reserved job once kept waiting for its stopping victims when
// capacity freed up otherwise).
var withGrace = flag.Bool("grace", true, "give preempted jobs a grace period in some random runs")

// reserveInShare lets RESERVE shares have in-share preemption ENABLED (on by
// default; a borrower once took such a share's idle capacity after an
// in-share preemption in it).
var reserveInShare = flag.Bool("reserve-inshare", true, "let RESERVE shares have in-share preemption ENABLED")

// TestRandomWorkloadsKeepGuarantees replays random workloads on random
// configurations (every strategy, borrow limits, oversubscribed
// environments, several instance types, multi-type jobs, priorities,
// preemption retries, a grace period, checkpoints and minimum run times
// before preemption) and checks each event
// log with the checker: whatever the engine decides, the log must show no
// broken guarantee, and the simulator's account of lent capacity must match
// the engine's view at every instant.
func TestRandomWorkloadsKeepGuarantees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		types := []string{"ml.g5.xlarge", "ml.p4d.24xlarge", "ml.trn1.32xlarge"}[:rapid.IntRange(1, 3).Draw(t, "types")]
		envCap := map[string]int64{}
		for _, ty := range types {
			envCap[ty] = int64(rapid.IntRange(1, 12).Draw(t, "env-"+ty))
		}
		cfg := &config.File{
			SchedulingPolicies: []config.Policy{{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}}},
		}
		var limits []qshare.CapacityLimit
		for _, ty := range types {
			limits = append(limits, qshare.CapacityLimit{CapacityUnit: ty, MaxCapacity: envCap[ty]})
		}
		cfg.ServiceEnvironments = []config.Environment{{Name: "env", CapacityLimits: limits}}
		one := int64(1)
		q := config.Queue{Name: "q", Priority: &one, SchedulingPolicy: "p", ServiceEnvironment: "env"}
		nShares := rapid.IntRange(1, 6).Draw(t, "shares")
		for i := 0; i < nShares; i++ {
			s := config.Share{Name: fmt.Sprintf("s%d", i), InSharePreemption: qshare.Disabled}
			if rapid.Bool().Draw(t, "inshare") {
				s.InSharePreemption = qshare.Enabled
			}
			s.Strategy = rapid.SampledFrom([]qshare.Strategy{qshare.StrategyReserve, qshare.StrategyLend, qshare.StrategyLendAndBorrow}).Draw(t, "strategy")
			if s.Strategy == qshare.StrategyReserve && !*reserveInShare {
				s.InSharePreemption = qshare.Disabled
			}
			if s.Strategy == qshare.StrategyLendAndBorrow && rapid.Bool().Draw(t, "has-borrow") {
				b := int64(rapid.SampledFrom([]int{-1, 0, 50, 100, 200}).Draw(t, "borrow"))
				s.BorrowLimit = &b
			}
			if rapid.IntRange(0, 2).Draw(t, "has-minrun") == 0 {
				// A minimum run time about as long as the jobs.
				s.Tags = map[string]string{qshare.TagMinRunTime: strconv.Itoa(rapid.IntRange(1, 40).Draw(t, "minrun"))}
			}
			for _, ty := range types {
				if len(s.CapacityLimits) == 0 || rapid.Bool().Draw(t, "has-type") {
					s.CapacityLimits = append(s.CapacityLimits, qshare.CapacityLimit{CapacityUnit: ty, MaxCapacity: int64(rapid.IntRange(1, 6).Draw(t, "limit"))})
				}
			}
			q.QuotaShares = append(q.QuotaShares, s)
		}
		cfg.JobQueues = []config.Queue{q}
		if !*oversubscribe {
			// Give the environment at least what its shares own.
			for i, ty := range types {
				var owned int64
				for _, s := range q.QuotaShares {
					owned += qshare.Limits(s.CapacityLimits)[ty]
				}
				if owned > envCap[ty] {
					envCap[ty] = owned
					cfg.ServiceEnvironments[0].CapacityLimits[i].MaxCapacity = owned
				}
			}
		}
		if err := cfg.Validate(config.Options{}); err != nil {
			t.Fatal(err)
		}
		nJobs := rapid.IntRange(1, 40).Draw(t, "jobs")
		var jobs []Job
		var at time.Duration
		for i := 0; i < nJobs; i++ {
			at += time.Duration(rapid.IntRange(0, 20).Draw(t, "gap")) * time.Second
			d := qshare.Capacity{}
			for _, ty := range types {
				if len(d) == 0 || rapid.IntRange(0, 3).Draw(t, "multi") == 0 {
					d[ty] = int64(rapid.IntRange(1, 4).Draw(t, "count"))
				}
			}
			retries := -1
			if rapid.IntRange(0, 4).Draw(t, "has-retries") == 0 {
				retries = rapid.IntRange(0, 2).Draw(t, "retries")
			}
			jobs = append(jobs, Job{
				ID: fmt.Sprintf("j%02d", i), Submit: at,
				Duration: time.Duration(rapid.IntRange(0, 60).Draw(t, "duration")) * time.Second,
				Queue:    "q", Share: fmt.Sprintf("s%d", rapid.IntRange(0, nShares-1).Draw(t, "share")),
				Priority: rapid.IntRange(0, 3).Draw(t, "priority"), Demand: d, PreemptionRetries: retries,
			})
		}
		grace := 0
		if *withGrace {
			grace = rapid.SampledFrom([]int{0, 0, 2}).Draw(t, "grace")
		}
		opts := Options{
			Grace:              time.Duration(grace) * time.Second,
			CheckpointInterval: time.Duration(rapid.SampledFrom([]int{0, 5}).Draw(t, "ckpt")) * time.Second,
			verify:             true,
		}
		var events bytes.Buffer
		opts.Events = &events
		rep, err := Run(context.Background(), cfg, jobs, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Jobs.Completed + rep.Jobs.Failed + rep.Jobs.Unfinished; got != nJobs {
			t.Fatalf("%d jobs accounted for, %d submitted: %+v\nevents:\n%s", got, nJobs, rep.Jobs, events.String())
		}
		vs, _, err := event.Check(cfg, bytes.NewReader(events.Bytes()), event.CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) > 0 {
			t.Fatalf("%d violations, first: %v\nevents:\n%s", len(vs), vs[0], events.String())
		}
	})
}
