package main

import (
	"context"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
)

func init() {
	opt := bench.E2EOptions{Jobs: 600, Clients: 4, Capacity: 64}
	var executor string
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Trivial jobs end to end through the process executor, side by side with Slurm",
		Long: `e2e starts a temporary qshare serve with the process executor (unless
--endpoint is given), creates one queue on 64 instances, and has --clients
AWS SDK clients submit --jobs jobs that run ` + "`true`" + ` (one instance each). It
reports jobs per second from the first submit to the last SUCCEEDED, and the
submit latency.

With --vs-slurm it then starts a throwaway single-node Slurm (64 CPU slots,
sched/backfill, select/cons_tres, no accounting; munged, slurmctld and slurmd
with a config in a temporary directory, on loopback ports) and runs the same
number of ` + "`sbatch --wrap true`" + ` jobs from the same number of clients, timed
until squeue shows the queue empty, and reports the ratio. This needs the
Slurm packages (apt-get install -y slurm-wlm munge) and root.

With --executor slurm the temporary server runs the jobs as batch jobs of
that same throwaway Slurm (started first), so that --vs-slurm compares
qshare in front of Slurm with Slurm alone, on one cluster: the cost of
going through qshare.

With --executor container the temporary server runs each job as a
container of a FROM-scratch image that holds one static program that
exits at once (imported into the engine; no registry), through the engine
at --container-host. The same number of containers of that image then run
as the engine's own ` + "`podman run --rm IMAGE /true`" + ` (Podman's service:
the local podman, same storage and runtime) or ` + "`docker -H HOST run --rm`" + `,
from the same number of clients, each client one container after the
other; qshare's clients do the same (submit, wait until the job has ended,
submit the next). Both sides' start latency runs to the container's start event from
the engine (its process runs): for qshare from the submit call, for the
engine's CLI from the command's launch. The ratios of the rates and of the
start latencies' p50 are reported.

With --with KIND the jobs run on the server's executor alone, then on
KIND alone; the faster of the two runs alone again with its jobs scaled to
the ratio of the two rates (at most 20000), so that each half would take
about as long as the other. Then one server with both executors
(qshare serve --executors, one environment and queue each) runs the two
halves at once: each half has its own --clients clients, submits its own
jobs (as many as alone) and waits for them itself, and its own rate runs
from its first submit to its own last end. The report gives both rates
alone and with both, their sums' ratio (the target is at least 0.9), how
long the halves overlapped, and the CPU per job of the server's process
tree.

--job-seconds S makes each job hold its instance for S seconds (sleep,
or the simulated executor's duration) instead of exiting at once: each
run's rate is then bounded by --capacity / S, as a cluster's is, rather
than by the machine's CPU. With --with, that shows whether one server
keeps both executors at their capacity's pace at once; with jobs that exit
at once on one machine, each half alone already takes every core.

The report also states the conditions that move these figures most: the
directory both halves keep their data under ($TMPDIR, else /tmp) and its
file system (every acknowledged submit waits for an fsync there: tmpfs
makes it free, a disk does not), and the load average as each half starts.`,
		Example: `  qshare bench e2e --jobs 600 --clients 4 --vs-slurm
  qshare bench e2e --jobs 2000 --clients 8 --runs 3 --json
  qshare bench e2e --jobs 300 --clients 4 --with simulated
  qshare bench e2e --executor container --container-host unix:///run/podman/podman.sock --jobs 100 --clients 4`,
		Args: cobra.NoArgs,
		RunE: benchRunE("qshare bench e2e", bench.E2ERows(), func(ctx context.Context, _ int) (any, error) {
			opt.Server.Executor = executor
			opt.Server.ContainerHost = opt.ContainerHost // the in-process server's; a child's is set by RunE2E
			if opt.With != "" {
				return bench.RunE2E(ctx, opt) // its own servers: one per executor, then one with both
			}
			return withServerFor(ctx, opt.Endpoint, opt.Server, 0, func(ep string) (any, error) {
				o := opt
				o.Endpoint = ep
				r, err := bench.RunE2E(ctx, o)
				if ep != "" && opt.Endpoint == "" {
					r.Executor = executor + " (in process)"
				}
				return r, err
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opt.Jobs, "jobs", opt.Jobs, "trivial jobs to run")
	f.IntVar(&opt.Clients, "clients", opt.Clients, "parallel submitting clients")
	f.IntVar(&opt.Capacity, "capacity", opt.Capacity, "instances (and Slurm CPU slots) the jobs run on")
	f.StringVar(&opt.With, "with", "", "a second executor `KIND` (simulated, process, container or slurm, the last on a throwaway Slurm of its own): run the jobs on each executor alone (the faster one again with its jobs scaled to the ratio of the two rates), then both halves at once on one server (qshare serve --executors), each with its own --clients clients, and report the sum of the halves' own rates over the sum of the two alone")
	f.Float64Var(&opt.JobSeconds, "job-seconds", 0, "seconds each job holds its instance (sleep; the simulated executor's duration) instead of exiting at once, so that the rate is the capacity's (--capacity / seconds) rather than the machine's CPU; not with --vs-slurm or the container executor")
	f.StringVar(&opt.ContainerHost, "container-host", "", "the container engine of --executor container (unix:///PATH or tcp://HOST:PORT; default: DOCKER_HOST, else the usual sockets)")
	f.BoolVar(&opt.VsSlurm, "vs-slurm", false, "run the same jobs through a local Slurm right after, and report the ratio")
	f.StringVar(&executor, "executor", "process", "executor of the temporary server (process runs `true`; simulated runs nothing; slurm runs `true` as batch jobs of a throwaway single-node Slurm, which then runs the same jobs given to it with sbatch when --vs-slurm is set; container runs a trivial image through --container-host, then the same count with the engine's own run --rm)")
	serverFlags(cmd, &opt.Endpoint, &opt.Server, &opt.Sign)
	benchCmd.AddCommand(cmd)
}
