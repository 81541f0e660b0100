// Package slurm starts a throwaway, single-node Slurm cluster on this
// machine and measures its end-to-end throughput of trivial batch jobs: the
// anchor that `qshare bench e2e --vs-slurm` compares qshare against
// (../shared/BENCHMARKS.md §1).
//
// Everything the cluster needs lives in one temporary directory: a fresh
// munge key, slurm.conf, state, spool, logs and pid files. The daemons
// (munged, slurmctld, slurmd) are children of the harness, listen on
// loopback ports chosen at start, and are stopped and the directory removed
// by Close, whatever happened before. Nothing outside the directory is
// written, and no system service is touched.
package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// Config is what slurm.conf says for the benchmark cluster. Paths are
// absolute and inside Dir.
type Config struct {
	// Dir is the cluster's temporary directory.
	Dir string
	// Host is this machine's short host name: slurmctld runs only where
	// SlurmctldHost names the local host, and slurmd finds its node by it.
	Host string
	// CtldPort and SlurmdPort are loopback TCP ports.
	CtldPort   int
	SlurmdPort int
	// CPUs is the number of CPU slots the one node declares (64 in the
	// benchmark), whatever the hardware has: SlurmdParameters=config_overrides
	// makes slurmd believe the configuration.
	CPUs int
}

// MungeSocket is the path of munged's socket.
func (c Config) MungeSocket() string { return c.Dir + "/munge/munge.socket" }

// ConfPath is the path of slurm.conf.
func (c Config) ConfPath() string { return c.Dir + "/slurm.conf" }

// SpoolDir is slurmd's spool directory.
func (c Config) SpoolDir() string { return c.Dir + "/spool" }

// StateDir is slurmctld's state save location.
func (c Config) StateDir() string { return c.Dir + "/state" }

// LogDir holds the daemons' logs.
func (c Config) LogDir() string { return c.Dir + "/log" }

// JobDir is the working directory of sbatch, where jobs write slurm-N.out.
func (c Config) JobDir() string { return c.Dir + "/jobs" }

// Render returns the text of slurm.conf: one node with CPUs slots in one
// partition, sched/backfill, select/cons_tres, no accounting, the default
// scheduler parameters, and every path and port local to the cluster.
// The plugins that need cgroups or a database are replaced by their
// no-op or /proc-based forms, so that the cluster runs in a container.
func (c Config) Render() string {
	var b strings.Builder
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	b.WriteString("# Written by qshare bench: a throwaway single-node cluster (BENCHMARKS.md §1).\n")
	kv("ClusterName", "qsharebench")
	kv("SlurmctldHost", c.Host+"(127.0.0.1)")
	kv("SlurmctldPort", c.CtldPort)
	kv("SlurmdPort", c.SlurmdPort)
	// Bind both daemons to the address the host name resolves to rather
	// than to every interface.
	kv("CommunicationParameters", "NoInAddrAny,NoCtldInAddrAny")
	kv("SlurmUser", "root")
	kv("SlurmdUser", "root")
	kv("AuthType", "auth/munge")
	kv("CredType", "cred/munge")
	kv("AuthInfo", "socket="+c.MungeSocket())
	kv("StateSaveLocation", c.StateDir())
	kv("SlurmdSpoolDir", c.SpoolDir())
	kv("SlurmctldPidFile", c.Dir+"/slurmctld.pid")
	kv("SlurmdPidFile", c.Dir+"/slurmd.pid")
	kv("SlurmctldLogFile", c.LogDir()+"/slurmctld.log")
	kv("SlurmdLogFile", c.LogDir()+"/slurmd.log")
	kv("SchedulerType", "sched/backfill")
	kv("SelectType", "select/cons_tres")
	kv("SelectTypeParameters", "CR_CPU")
	kv("SlurmdParameters", "config_overrides")
	kv("ProctrackType", "proctrack/linuxproc")
	kv("TaskPlugin", "task/none")
	kv("JobAcctGatherType", "jobacct_gather/none")
	kv("AccountingStorageType", "accounting_storage/none")
	kv("JobCompType", "jobcomp/none")
	kv("MpiDefault", "none")
	kv("ReturnToService", 2)
	fmt.Fprintf(&b, "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN\n", c.Host, c.CPUs)
	fmt.Fprintf(&b, "PartitionName=bench Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", c.Host)
	return b.String()
}

// ParseJobID reads the job id from the output of `sbatch --parsable`,
// which is "ID" or "ID;CLUSTER" followed by a newline.
func ParseJobID(out string) (int64, error) {
	s := strings.TrimSpace(out)
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("sbatch printed %q; expected a job id", strings.TrimSpace(out))
	}
	return id, nil
}

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

// NodeStates reads the output of `sinfo -h -N -o %T` (one state a line,
// such as idle, mixed, down*) and reports whether every node is idle, and
// the states seen.
func NodeStates(out string) (allIdle bool, states []string) {
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			states = append(states, line)
		}
	}
	if len(states) == 0 {
		return false, nil
	}
	for _, s := range states {
		if s != "idle" {
			return false, states
		}
	}
	return true, states
}
