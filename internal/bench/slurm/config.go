// Package slurm starts a throwaway, single-node Slurm cluster on this
// machine and measures its end-to-end throughput of trivial batch jobs: the
// anchor that `qshare bench e2e --vs-slurm` compares qshare against
// (../shared/BENCHMARKS.md §1).
//
// The cluster itself is executor/slurm/slurmtest's, which the Slurm
// executor's tests start too. Everything the cluster needs lives in one
// temporary directory: a fresh munge key, slurm.conf, state, spool, logs and pid files. The daemons
// (munged, slurmctld, slurmd) are children of the harness, listen on
// loopback ports chosen at start, and are stopped and the directory removed
// by Close, whatever happened before. Nothing outside the directory is
// written, and no system service is touched.
package slurm

import (
	"fmt"
	"strconv"
	"strings"

	"qshare/executor/slurm/slurmtest"
)

// Config is what slurm.conf says for the benchmark cluster (see
// slurmtest.Config, which renders it).
type Config = slurmtest.Config

// CountQueued counts the jobs listed by `squeue -h -o %i`: one id a line,
// blank lines ignored. Anything that is not a job id is an error, so that a
// message on stdout is never mistaken for an empty queue.
func CountQueued(out string) (int, error) {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// Array jobs print as 12_3 or 12_[4-9]; the part before _ is the id.
		id := line
		if i := strings.IndexByte(id, '_'); i >= 0 {
			id = id[:i]
		}
		if _, err := strconv.ParseInt(id, 10, 64); err != nil {
			return 0, fmt.Errorf("squeue printed %q; expected one job id a line", line)
		}
		n++
	}
	return n, nil
}

// NodeStates reads the output of `sinfo -h -N -o %T` and reports whether
// every node is idle, and the states seen (slurmtest.NodeStates).
func NodeStates(out string) (allIdle bool, states []string) { return slurmtest.NodeStates(out) }
