package slurm

import (
	"context"
	"fmt"
	"strings"
	"time"

	slurmexec "qshare/executor/slurm"
	"qshare/fanout"
)

// RunOptions configure a throughput run.
type RunOptions struct {
	// Jobs is the number of `sbatch --wrap true` jobs; Clients the number
	// of parallel submitters (at least 1).
	Jobs    int
	Clients int
	// Poll is how often squeue is asked whether the queue is empty; 100 ms
	// when zero. Asking costs the controller work, so not much more often.
	Poll time.Duration
}

// Result is what a throughput run measured.
type Result struct {
	Jobs    int
	Clients int
	// Wall runs from the first submit to the first squeue that found the
	// queue empty (it was asked at most Poll after the last job left).
	Wall time.Duration
	// SubmitWall runs from the first submit to the return of the last.
	SubmitWall time.Duration
	// SubmitLatencies holds the duration of each sbatch command, the
	// client's fork and exec included, as a Slurm user experiences it.
	SubmitLatencies []time.Duration
	// Completed is the number of jobs squeue still listed as COMPLETED
	// when the queue emptied; -1 when it no longer listed them all.
	Completed int
}

// JobsPerSecond is Jobs over Wall.
func (r Result) JobsPerSecond() float64 { return float64(r.Jobs) / r.Wall.Seconds() }

// SubmitsPerSecond is Jobs over SubmitWall.
func (r Result) SubmitsPerSecond() float64 { return float64(r.Jobs) / r.SubmitWall.Seconds() }

// Run submits opt.Jobs trivial jobs from opt.Clients parallel clients and
// waits until the queue is empty. It fails if a submit fails, or if a job
// did not complete successfully.
func (c *Cluster) Run(ctx context.Context, opt RunOptions) (Result, error) {
	if opt.Jobs < 1 || opt.Clients < 1 {
		return Result{}, fmt.Errorf("slurm: need at least one job and one client, got %d and %d", opt.Jobs, opt.Clients)
	}
	if opt.Poll == 0 {
		opt.Poll = 100 * time.Millisecond
	}
	if out, err := c.command(ctx, "squeue", "-h", "-o", "%i"); err != nil {
		return Result{}, fmt.Errorf("slurm: %w", err)
	} else if n, err := CountQueued(out); err != nil || n != 0 {
		return Result{}, fmt.Errorf("slurm: the queue must be empty before a run (%d jobs, %v)", n, err)
	}

	res := Result{Jobs: opt.Jobs, Clients: opt.Clients, SubmitLatencies: make([]time.Duration, opt.Jobs), Completed: -1}
	start := time.Now()
	if err := fanout.Each(ctx, opt.Clients, opt.Jobs, func(ctx context.Context, i int) error {
		t := time.Now()
		out, err := c.command(ctx, "sbatch", "--parsable", "--wrap", "true")
		res.SubmitLatencies[i] = time.Since(t)
		if err == nil {
			_, err = slurmexec.ParseJobID(out)
		}
		if err != nil {
			return fmt.Errorf("slurm: submit %d: %w", i+1, err)
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.SubmitWall = time.Since(start)
	for {
		asked := time.Now()
		out, err := c.command(ctx, "squeue", "-h", "-o", "%i")
		if err != nil {
			return res, fmt.Errorf("slurm: %w", err)
		}
		n, err := CountQueued(out)
		if err != nil {
			return res, err
		}
		if n == 0 {
			res.Wall = asked.Sub(start)
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(opt.Poll):
		}
	}
	// Finished jobs stay listed for MinJobAge (300 s by default): check
	// they all succeeded.
	if out, err := c.command(ctx, "squeue", "-h", "-t", "all", "-o", "%T"); err == nil {
		states := countStates(out)
		total := 0
		for _, n := range states {
			total += n
		}
		if total >= opt.Jobs {
			res.Completed = states["COMPLETED"]
			if res.Completed < opt.Jobs {
				return res, fmt.Errorf("slurm: only %d of %d jobs COMPLETED (states %v)", res.Completed, opt.Jobs, states)
			}
		}
	}
	return res, nil
}

// countStates counts the lines of `squeue -o %T` output by state.
func countStates(out string) map[string]int {
	m := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			m[line]++
		}
	}
	return m
}
