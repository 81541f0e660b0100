package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
)

func init() {
	opt := bench.KubeOptions{Jobs: 2000, Clients: 8, Capacity: 200}
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "One-pod jobs through the Kubernetes executor into a test API server",
		Long: `kube starts a test Kubernetes control plane (etcd and kube-apiserver, built
by .ci/build-kube; QSHARE_KUBE_BIN says where) with the tests' played
kubelet and scheduler on four nodes, and a temporary qshare serve
--executor kubernetes on it; it creates one queue on --capacity instances,
and has --clients AWS SDK clients submit --jobs one-pod jobs, each of which
the played kubelet ends 1 s after it starts it. It reports jobs per second
from the first submit to the last SUCCEEDED, the time from each submit to
the watch seeing its pod (p50, p99), and qshare serve's CPU per job.

With --vs-kueue it then runs Kueue's controller (v0.17.0, built as
../shared/recipes/kueue.md says; QSHARE_KUEUE_BIN says where) against a
control plane of its own, started as qshare's was (four nodes, nothing
else), with a ClusterQueue of --capacity CPUs, creates the same
number of suspended one-CPU Jobs from the same number of clients, and times
them from the first creation to the last admission (the Job unsuspended);
it reports the ratio. Each admitted Job then makes its pod, as the Job
controller would (played by the bench), which the played kubelet runs for
--run as it runs qshare's: the API server has the same pods to bind and
update in both halves. --kueue-without-pods leaves the pods out, as
Kueue's half was measured until 5 December 2026 (then on qshare's control
plane). Kueue's metrics certificate goes to its fixed path,
/etc/kueue/metrics/certs, so this needs root.`,
		Example: `  qshare bench kube --jobs 2000 --capacity 2000 --vs-kueue
  qshare bench kube --jobs 500 --clients 4 --json`,
		Args: cobra.NoArgs,
		RunE: benchRunE("qshare bench kube", bench.RowsOf(bench.KubeResult{}), func(ctx context.Context, _ int) (any, error) {
			return bench.RunKube(ctx, opt)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opt.Jobs, "jobs", opt.Jobs, "one-pod jobs to run")
	f.IntVar(&opt.Clients, "clients", opt.Clients, "parallel submitting clients")
	f.IntVar(&opt.Capacity, "capacity", opt.Capacity, "instances the jobs run on (the environment's limit)")
	f.BoolVar(&opt.VsKueue, "vs-kueue", false, "then run the same count of suspended Jobs through Kueue on a control plane of its own, and report the ratio")
	f.BoolVar(&opt.KueueWithoutPods, "kueue-without-pods", false, "with --vs-kueue: Kueue's admitted Jobs make no pods (the API server has no pod work in Kueue's half)")
	f.DurationVar(&opt.Run, "run", time.Second, "how long the played kubelet runs each pod")
	f.StringVar(&opt.Server.Binary, "qshare", "", "qshare binary to run as the temporary server (default: this one)")
	f.StringVar(&opt.Server.LogLevel, "server-log-level", "warn", "--log-level of the temporary server")
	benchCmd.AddCommand(cmd)
}
