package slurm

import (
	"context"
	"time"

	"qshare/executor/slurm/slurmtest"
)

// Binaries lists the programs the harness runs.
var Binaries = slurmtest.Binaries

// InstallHint says how to get the binaries on the machines the benchmarks
// are written for.
const InstallHint = slurmtest.InstallHint + "; BENCHMARKS.md §1 measured 22.05"

// ErrNotInstalled is returned, wrapped with the missing programs, when Slurm
// or munge is not installed.
var ErrNotInstalled = slurmtest.ErrNotInstalled

// Available reports whether every program the harness needs is on PATH and
// it runs as root. Its error names the missing ones and says how to install
// them.
func Available() error { return slurmtest.Available() }

// Options configure Start.
type Options struct {
	// CPUs is the number of slots of the one node; 64 when zero.
	CPUs int
	// ReadyTimeout bounds the wait for the node to become idle; 60 s when zero.
	ReadyTimeout time.Duration
	// KeepDir leaves the temporary directory (logs included) after Close,
	// for debugging.
	KeepDir bool
}

// Cluster is a running single-node Slurm cluster (slurmtest's, which the
// Slurm executor's tests start too). Stop it with Close.
type Cluster struct {
	*slurmtest.Cluster
}

// Start starts a one-node cluster with one partition, "bench", and waits
// until the node is idle. On any error it tears down what it started.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	c, err := slurmtest.Start(ctx, slurmtest.Options{Nodes: 1, CPUs: opt.CPUs, Partition: "bench",
		ReadyTimeout: opt.ReadyTimeout, KeepDir: opt.KeepDir})
	if err != nil {
		return nil, err
	}
	return &Cluster{c}, nil
}

// command runs a Slurm client command against the cluster and returns its
// standard output.
func (c *Cluster) command(ctx context.Context, name string, args ...string) (string, error) {
	return c.Command(ctx, name, args...)
}

// Close stops the cluster and removes its directory; it is safe to call
// more than once, and on nil.
func (c *Cluster) Close() error {
	if c == nil || c.Cluster == nil {
		return nil
	}
	return c.Cluster.Close()
}
