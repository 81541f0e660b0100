package slurmtest

import (
	"fmt"
	"strconv"
	"strings"
)

// clusterName is the cluster's ClusterName, under which slurmdbd keeps
// its jobs.
const clusterName = "qsharetest"

// Config is what slurm.conf says for a throwaway cluster. Paths are
// absolute and inside Dir.
type Config struct {
	// Dir is the cluster's temporary directory.
	Dir string
	// Host is this machine's short host name: slurmctld runs only where
	// SlurmctldHost names the local host.
	Host string
	// CtldPort is slurmctld's loopback TCP port; SlurmdPorts has one port
	// for each node's slurmd.
	CtldPort    int
	SlurmdPorts []int
	// Options are what Start was given, its defaults filled in: the CPUs,
	// GPUs and partition of the nodes, and the Slurm parameters (MinJobAge,
	// MessageTimeout, Prompt) that slurm.conf sets.
	Options
	// DbdPort is slurmdbd's loopback TCP port where the cluster keeps
	// accounting (slurmdbd over a throwaway MariaDB); 0: no accounting.
	DbdPort int
}

// NodeNames returns the nodes' names: the host name for one node (as the
// benchmark has always had it), else n1, n2, ….
func (c Config) NodeNames() []string {
	if len(c.SlurmdPorts) <= 1 {
		return []string{c.Host}
	}
	var ns []string
	for i := range c.SlurmdPorts {
		ns = append(ns, "n"+strconv.Itoa(i+1))
	}
	return ns
}

// MungeSocket is the path of munged's socket.
func (c Config) MungeSocket() string { return c.Dir + "/munge/munge.socket" }

// ConfPath is the path of slurm.conf.
func (c Config) ConfPath() string { return c.Dir + "/slurm.conf" }

// SpoolDir is the spool directory of node n's slurmd.
func (c Config) SpoolDir(n string) string { return c.Dir + "/spool" + n }

// StateDir is slurmctld's state save location.
func (c Config) StateDir() string { return c.Dir + "/state" }

// LogDir holds the daemons' logs.
func (c Config) LogDir() string { return c.Dir + "/log" }

// DBDir is the MariaDB data directory of a cluster with accounting.
func (c Config) DBDir() string { return c.Dir + "/db" }

// DBSocket is the path of MariaDB's unix socket (it listens on no port).
func (c Config) DBSocket() string { return c.Dir + "/db.sock" }

// DbdConfPath is the path of slurmdbd.conf: slurmdbd reads it from the
// directory of SLURM_CONF.
func (c Config) DbdConfPath() string { return c.Dir + "/slurmdbd.conf" }

// JobDir is a directory readable by every job, the working directory of
// Command, where jobs submitted by hand write slurm-N.out.
func (c Config) JobDir() string { return c.Dir + "/jobs" }

// Render returns the text of slurm.conf: the nodes with CPUs slots (and
// GPUs fake GPUs) each, in one partition, sched/backfill,
// select/cons_tres, accounting through slurmdbd when DbdPort is set (else
// none), the default scheduler parameters, and
// every path and port local to the cluster. The plugins that need cgroups
// or a database are replaced by their no-op or /proc-based forms, so that
// the cluster runs in a container.
func (c Config) Render() string {
	var b strings.Builder
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	b.WriteString("# Written by qshare: a throwaway cluster for tests and benchmarks.\n")
	kv("ClusterName", clusterName)
	kv("SlurmctldHost", c.Host+"(127.0.0.1)")
	kv("SlurmctldPort", c.CtldPort)
	if len(c.SlurmdPorts) == 1 {
		kv("SlurmdPort", c.SlurmdPorts[0])
	}
	// Bind both daemons to the address the host name resolves to rather
	// than to every interface.
	kv("CommunicationParameters", "NoInAddrAny,NoCtldInAddrAny")
	kv("SlurmUser", "root")
	kv("SlurmdUser", "root")
	kv("AuthType", "auth/munge")
	kv("CredType", "cred/munge")
	kv("AuthInfo", "socket="+c.MungeSocket())
	kv("StateSaveLocation", c.StateDir())
	kv("SlurmdSpoolDir", c.Dir+"/spool%n")
	kv("SlurmctldPidFile", c.Dir+"/slurmctld.pid")
	kv("SlurmdPidFile", c.Dir+"/slurmd.%n.pid")
	kv("SlurmctldLogFile", c.LogDir()+"/slurmctld.log")
	kv("SlurmdLogFile", c.LogDir()+"/slurmd.%n.log")
	kv("SchedulerType", "sched/backfill")
	kv("SelectType", "select/cons_tres")
	kv("SelectTypeParameters", "CR_CPU")
	kv("SlurmdParameters", "config_overrides")
	kv("ProctrackType", "proctrack/linuxproc")
	kv("TaskPlugin", "task/none")
	kv("JobAcctGatherType", "jobacct_gather/none")
	if c.DbdPort > 0 {
		kv("AccountingStorageType", "accounting_storage/slurmdbd")
		kv("AccountingStorageHost", "localhost")
		kv("AccountingStoragePort", c.DbdPort)
		// With slurmdbd, the "password" is the munge socket that the
		// connections to it authenticate with (AuthInfo is not used there).
		kv("AccountingStoragePass", c.MungeSocket())
	} else {
		kv("AccountingStorageType", "accounting_storage/none")
	}
	kv("JobCompType", "jobcomp/none")
	kv("MpiDefault", "none")
	kv("ReturnToService", 2)
	// A killed job stays COMPLETING for about KillWait (30 s by default)
	// before Slurm reports it ended; tests need not wait that long.
	kv("KillWait", 1)
	if c.Prompt {
		kv("SchedulerParameters", "batch_sched_delay=0")
	}
	if c.MinJobAge > 0 {
		kv("MinJobAge", c.MinJobAge)
	}
	if c.MessageTimeout > 0 {
		kv("MessageTimeout", c.MessageTimeout)
	}
	if c.GPUs > 0 {
		kv("GresTypes", "gpu")
	}
	names := c.NodeNames()
	gres := ""
	if c.GPUs > 0 {
		gres = fmt.Sprintf(" Gres=gpu:%d", c.GPUs)
	}
	if len(names) == 1 {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=127.0.0.1 CPUs=%d%s State=UNKNOWN\n", names[0], c.CPUs, gres)
	} else {
		for i, n := range names {
			fmt.Fprintf(&b, "NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=4000%s State=UNKNOWN\n", n, c.SlurmdPorts[i], c.CPUs, gres)
		}
	}
	fmt.Fprintf(&b, "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", c.Partition, strings.Join(names, ","))
	return b.String()
}

// RenderDbd returns the text of slurmdbd.conf: slurmdbd on DbdPort of the
// loopback address, as root, over the MariaDB of DBSocket as its root
// user (socket authentication, no password; slurmdbd itself is given the
// socket in MYSQL_UNIX_PORT, as it has no setting for one).
func (c Config) RenderDbd() string {
	var b strings.Builder
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	b.WriteString("# Written by qshare: the accounting daemon of a throwaway cluster.\n")
	kv("AuthType", "auth/munge")
	kv("AuthInfo", "socket="+c.MungeSocket())
	kv("DbdHost", "localhost")
	kv("DbdAddr", "127.0.0.1")
	kv("DbdPort", c.DbdPort)
	kv("SlurmUser", "root")
	kv("PidFile", c.Dir+"/slurmdbd.pid")
	kv("LogFile", c.LogDir()+"/slurmdbd.log")
	kv("StorageType", "accounting_storage/mysql")
	kv("StorageHost", "localhost")
	kv("StorageUser", "root")
	kv("StorageLoc", "slurm_acct_db")
	return b.String()
}

// RenderGres returns the text of gres.conf: each node's fake GPUs as plain
// files in Dir (Slurm refuses a Count without File, and /dev/null).
func (c Config) RenderGres() string {
	var b strings.Builder
	for i, n := range c.NodeNames() {
		fmt.Fprintf(&b, "NodeName=%s Name=gpu File=%s/gpu[%d-%d]\n", n, c.Dir, i*c.GPUs, (i+1)*c.GPUs-1)
	}
	return b.String()
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
