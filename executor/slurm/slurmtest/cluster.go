// Package slurmtest starts a throwaway Slurm cluster on this machine, for
// the tests of the Slurm executor and for the benchmark harness
// (internal/bench/slurm): real munged, slurmctld and one slurmd per node,
// from Debian's slurm-wlm and munge, with every file in one temporary
// directory. With Options.Accounting it also keeps accounting, as a site
// with slurmdbd does: a MariaDB server of its own and slurmdbd over it, so
// that sacct answers.
//
// Several nodes can run on the one machine (NodeName=n1 … with one slurmd
// -N each on its own port), each with fake GPUs declared as gres over plain
// files, so that a multi-node job really is one task on each of several
// nodes (../shared/recipes/slurm.md). Nothing outside the directory is
// written and no system service is touched; Close stops every daemon and
// removes the directory.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"qshare/internal/freeport"
)

// Binaries lists the programs a cluster needs.
var Binaries = []string{"munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "sinfo", "scancel", "scontrol"}

// InstallHint says how to get the binaries.
const InstallHint = "install them with: apt-get install -y slurm-wlm munge (Debian/Ubuntu, Slurm 22.05)"

// ErrNotInstalled is returned, wrapped with the missing programs, when Slurm
// or munge is not installed or cannot run here.
var ErrNotInstalled = errors.New("slurm is not installed")

// Available reports whether every program a cluster needs is on PATH and
// this process runs as root (SlurmUser=root). Its error says what is
// missing and how to install it.
func Available() error {
	if err := notOnPath(Binaries, InstallHint); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w for this user: the cluster runs slurmctld and slurmd as SlurmUser=root and must itself be started as root", ErrNotInstalled)
	}
	return nil
}

// AccountingBinaries lists the programs that a cluster with accounting
// (Options.Accounting) needs beside Binaries.
var AccountingBinaries = []string{"mariadbd", "mariadb-install-db", "slurmdbd", "sacctmgr", "sacct"}

// AccountingInstallHint says how to get them.
const AccountingInstallHint = "install them with: apt-get install -y mariadb-server slurmdbd (Debian/Ubuntu; the package's own services need not run)"

// AccountingAvailable is Available for a cluster with accounting: it also
// needs MariaDB's server and slurmdbd.
func AccountingAvailable() error {
	if err := Available(); err != nil {
		return err
	}
	return notOnPath(AccountingBinaries, AccountingInstallHint)
}

// notOnPath names the programs of bins that are not on PATH, wrapping
// ErrNotInstalled, with how to install them; nil when all are.
func notOnPath(bins []string, hint string) error {
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not found on PATH; %s", ErrNotInstalled, strings.Join(missing, ", "), hint)
	}
	return nil
}

// Options configure Start.
type Options struct {
	// Nodes is the number of nodes; 1 when zero. One node is named after
	// this machine's host name (as the benchmark has it); several are
	// n1, n2, ….
	Nodes int
	// CPUs is the number of CPU slots of each node, whatever the hardware
	// has (SlurmdParameters=config_overrides makes slurmd believe the
	// configuration); 64 when zero.
	CPUs int
	// GPUs is the number of fake GPUs (gres gpu over plain files) of each
	// node; 0 declares none.
	GPUs int
	// Partition names the one partition, holding every node; "bench" when empty.
	Partition string
	// MinJobAge is how many seconds a finished job stays known to
	// slurmctld; 0: Slurm's default (300 s).
	MinJobAge int
	// MessageTimeout is Slurm's MessageTimeout in seconds, the time a
	// message's round trip may take; 0: Slurm's default (10 s). With
	// slurmctld down, a client command retries its connection for most
	// of it (squeue and sbatch fail after some 9 s by default, 2 s with
	// 3), so a test that stops slurmctld waits less with a smaller one.
	MessageTimeout int
	// Prompt has slurmctld schedule a submitted batch job within a second
	// (SchedulerParameters=batch_sched_delay=0), not up to 3 s later: for
	// tests, which wait on every job they submit. The benchmark leaves it
	// false, and every scheduler parameter at Slurm's default.
	Prompt bool
	// ReadyTimeout bounds the wait for the nodes to become idle; 60 s when zero.
	ReadyTimeout time.Duration
	// Accounting keeps accounting: the cluster gets a MariaDB server and a
	// slurmdbd of its own (AccountingStorageType=accounting_storage/slurmdbd),
	// so that sacct reports the jobs slurmctld has forgotten. Start fails,
	// wrapping ErrNotInstalled, where they are not installed.
	Accounting bool
	// KeepDir leaves the directory (logs included) after Close, for debugging.
	KeepDir bool
}

// Cluster is a running Slurm cluster. Stop it with Close.
type Cluster struct {
	cfg     Config
	env     []string
	procs   []*daemon
	keepDir bool
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	out  lockedBuffer
}

// lockedBuffer holds a daemon's standard output and error. os/exec copies
// them into it from a goroutine of its own for as long as the daemon runs,
// and a start that fails reads it (withLogs) before the daemons are
// stopped, so each access takes the lock.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start creates the cluster's directory, writes the munge key, slurm.conf
// and gres.conf, starts munged, (with accounting) MariaDB and slurmdbd,
// slurmctld and the slurmds, and waits until every node is idle. On any
// error it tears down what it started. A daemon that finds its port
// taken (freeport's ports are free only until they are closed: another
// program's outgoing connection may get one) makes it start again on
// other ports, three tries in all.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	if err := available(opt); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		c, err := start(ctx, opt)
		if err == nil || try == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return c, err
		}
	}
}

// start is one try of Start.
func start(ctx context.Context, opt Options) (c *Cluster, err error) {
	if opt.Nodes <= 0 {
		opt.Nodes = 1
	}
	if opt.CPUs == 0 {
		opt.CPUs = 64
	}
	if opt.Partition == "" {
		opt.Partition = "bench"
	}
	if opt.ReadyTimeout == 0 {
		opt.ReadyTimeout = 60 * time.Second
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("slurm: host name: %w", err)
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	nports := 1 + opt.Nodes
	if opt.Accounting {
		nports++ // slurmdbd's, the last
	}
	ports, err := freeport.Ports(nports)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "qshare-slurm-")
	if err != nil {
		return nil, fmt.Errorf("slurm: temporary directory: %w", err)
	}
	// Slurm's jobs run as root here but the directory must be reachable
	// by whoever reads it (the shared directory of jobs lives inside).
	os.Chmod(dir, 0o755)
	c = &Cluster{
		cfg:     Config{Dir: dir, Host: host, CtldPort: ports[0], SlurmdPorts: ports[1 : 1+opt.Nodes], Options: opt},
		keepDir: opt.KeepDir,
	}
	if opt.Accounting {
		c.cfg.DbdPort = ports[nports-1]
	}
	c.env = append(cleanEnv(), "SLURM_CONF="+c.cfg.ConfPath())
	defer func() {
		if err != nil {
			err = c.withLogs(err)
			c.Close()
			c = nil
		}
	}()
	if err := c.writeFiles(); err != nil {
		return c, err
	}
	// munged refuses to run as root from a directory under a
	// world-writable /tmp unless forced; the key and socket are ours alone.
	if err := c.spawn("munged", "munged", "--foreground", "--force",
		"--key-file="+dir+"/munge/munge.key",
		"--socket="+c.cfg.MungeSocket(),
		"--pid-file="+dir+"/munge/munged.pid",
		"--seed-file="+dir+"/munge/munged.seed",
		"--log-file="+c.cfg.LogDir()+"/munged.log"); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, 10*time.Second, "munged's socket", func() bool {
		_, err := os.Stat(c.cfg.MungeSocket())
		return err == nil
	}); err != nil {
		return c, err
	}
	if c.cfg.DbdPort > 0 {
		if err := c.startAccounting(ctx); err != nil {
			return c, err
		}
	}
	if err := c.spawn("slurmctld", "slurmctld", "-D", "-f", c.cfg.ConfPath()); err != nil {
		return c, err
	}
	for _, n := range c.cfg.NodeNames() {
		if err := c.spawn("slurmd "+n, "slurmd", "-D", "-f", c.cfg.ConfPath(), "-N", n); err != nil {
			return c, err
		}
	}
	var last []string
	err = c.waitFor(ctx, opt.ReadyTimeout, "the nodes to be idle", func() bool {
		out, err := c.Command(ctx, "sinfo", "-h", "-N", "-o", "%T")
		if err != nil {
			return false // slurmctld may not answer yet
		}
		idle, states := NodeStates(out)
		last = states
		return idle && len(states) == opt.Nodes
	})
	if err != nil && last != nil {
		err = fmt.Errorf("%w (node states %s)", err, strings.Join(last, ","))
	}
	return c, err
}

// available is Available, or AccountingAvailable for a cluster with
// accounting.
func available(opt Options) error {
	if opt.Accounting {
		return AccountingAvailable()
	}
	return Available()
}

// SkipUnavailable skips the test, saying what is missing, where the
// programs of a cluster with these options are not installed.
func SkipUnavailable(t testing.TB, opt Options) {
	t.Helper()
	if err := available(opt); err != nil {
		if opt.Accounting {
			t.Skipf("no Slurm with accounting (slurmdbd, MariaDB) here, so this test is skipped: %v", err)
		}
		t.Skipf("no Slurm here, so this test is skipped: %v", err)
	}
}

// StartT starts a cluster for a test and stops it at the test's end. It
// skips the test, saying why, where Slurm or munge (or, with accounting,
// MariaDB or slurmdbd) is not installed.
func StartT(t testing.TB, opt Options) *Cluster {
	t.Helper()
	SkipUnavailable(t, opt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, opt)
	if err != nil {
		t.Fatalf("starting a Slurm cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Config returns the cluster's configuration.
func (c *Cluster) Config() Config { return c.cfg }

// Env returns the environment for Slurm client commands: this process's,
// without SLURM_* variables, and with SLURM_CONF set to the cluster's.
func (c *Cluster) Env() []string { return append([]string(nil), c.env...) }

func (c *Cluster) writeFiles() error {
	for _, d := range []string{"munge", "state", "log", "jobs"} {
		if err := os.MkdirAll(filepath.Join(c.cfg.Dir, d), 0o700); err != nil {
			return fmt.Errorf("slurm: %w", err)
		}
	}
	os.Chmod(c.cfg.JobDir(), 0o755)
	// Jobs of other users (the executor's run-as test) use munge too:
	// they must reach its socket. The key stays root's alone (0400).
	os.Chmod(filepath.Join(c.cfg.Dir, "munge"), 0o755)
	for _, n := range c.cfg.NodeNames() {
		if err := os.MkdirAll(c.cfg.SpoolDir(n), 0o700); err != nil {
			return fmt.Errorf("slurm: %w", err)
		}
	}
	for i := 0; i < c.cfg.GPUs*len(c.cfg.NodeNames()); i++ {
		if err := os.WriteFile(filepath.Join(c.cfg.Dir, fmt.Sprintf("gpu%d", i)), nil, 0o644); err != nil {
			return fmt.Errorf("slurm: fake GPU: %w", err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("slurm: munge key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, "munge", "munge.key"), key, 0o400); err != nil {
		return fmt.Errorf("slurm: munge key: %w", err)
	}
	if err := os.WriteFile(c.cfg.ConfPath(), []byte(c.cfg.Render()), 0o644); err != nil {
		return fmt.Errorf("slurm: slurm.conf: %w", err)
	}
	if c.cfg.DbdPort > 0 {
		// slurmdbd refuses a slurmdbd.conf that others may read (it could
		// hold the database's password) or that is not its SlurmUser's.
		if err := os.WriteFile(c.cfg.DbdConfPath(), []byte(c.cfg.RenderDbd()), 0o600); err != nil {
			return fmt.Errorf("slurm: slurmdbd.conf: %w", err)
		}
		if err := os.MkdirAll(c.cfg.DBDir(), 0o700); err != nil {
			return fmt.Errorf("slurm: %w", err)
		}
	}
	if c.cfg.GPUs > 0 {
		if err := os.WriteFile(c.cfg.Dir+"/gres.conf", []byte(c.cfg.RenderGres()), 0o644); err != nil {
			return fmt.Errorf("slurm: gres.conf: %w", err)
		}
	}
	return nil
}

// spawn starts a daemon in the foreground as a child in its own process
// group, so that Close can stop it and everything it forked.
func (c *Cluster) spawn(name string, argv ...string) error {
	return c.spawnEnv(name, nil, argv...)
}

// spawnEnv is spawn with extra variables in the daemon's environment.
func (c *Cluster) spawnEnv(name string, extra []string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.cfg.Dir
	cmd.Env = append(c.Env(), extra...)
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = &d.out
	cmd.Stderr = &d.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("slurm: start %s: %w", name, err)
	}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	c.procs = append(c.procs, d)
	return nil
}

// waitFor polls ok every 50 ms until it is true, the timeout passes, ctx
// ends, or a daemon exits.
func (c *Cluster) waitFor(ctx context.Context, timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		for _, d := range c.procs {
			select {
			case <-d.done:
				return fmt.Errorf("slurm: %s exited while waiting for %s: %v", d.name, what, d.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm: timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// startAccounting starts what keeps the cluster's accounting, before
// slurmctld: a MariaDB server of its own (a fresh data directory, a unix
// socket, no network, no configuration file read) and slurmdbd over it.
func (c *Cluster) startAccounting(ctx context.Context) error {
	// Smaller redo logs than the default 96 MB: the database holds a few
	// jobs and is thrown away.
	small := "--innodb-log-file-size=8M"
	if _, err := c.Command(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+c.cfg.DBDir(), "--user=root",
		"--auth-root-authentication-method=socket", "--skip-test-db", small); err != nil {
		return fmt.Errorf("slurm: creating the accounting database: %w", err)
	}
	if err := c.spawn("mariadbd", "mariadbd", "--no-defaults", "--datadir="+c.cfg.DBDir(), "--socket="+c.cfg.DBSocket(),
		"--skip-networking", "--user=root", small, "--pid-file="+c.cfg.Dir+"/mariadbd.pid",
		"--log-error="+c.cfg.LogDir()+"/mariadbd.log"); err != nil {
		return err
	}
	if err := c.waitFor(ctx, 60*time.Second, "MariaDB's socket", func() bool {
		_, err := os.Stat(c.cfg.DBSocket())
		return err == nil
	}); err != nil {
		return err
	}
	if err := c.spawnEnv("slurmdbd", []string{"MYSQL_UNIX_PORT=" + c.cfg.DBSocket()}, "slurmdbd", "-D"); err != nil {
		return err
	}
	// slurmctld registers the cluster itself when it first connects
	// (22.05 does; no sacctmgr add cluster), and must find slurmdbd up.
	var last error
	if err := c.waitFor(ctx, 30*time.Second, "slurmdbd to answer", func() bool {
		_, last = c.Command(ctx, "sacctmgr", "--noheader", "--parsable2", "list", "cluster", "format=cluster")
		return last == nil
	}); err != nil {
		return fmt.Errorf("%w (%v)", err, last)
	}
	return nil
}

// Command runs a Slurm client command against the cluster, in its jobs
// directory, and returns its standard output.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env
	cmd.Dir = c.cfg.JobDir()
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// withLogs appends the tail of the daemons' logs to an error from Start, so
// that a cluster that would not come up says why.
func (c *Cluster) withLogs(err error) error {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(c.cfg.LogDir(), "*.log"))
	for _, p := range logs {
		data, _ := os.ReadFile(p)
		if t := tail(string(data), 8); t != "" {
			fmt.Fprintf(&b, "\n--- %s ---\n%s", filepath.Base(p), t)
		}
	}
	for _, d := range c.procs {
		if t := tail(d.out.String(), 4); t != "" {
			fmt.Fprintf(&b, "\n--- %s (stderr) ---\n%s", d.name, t)
		}
	}
	if b.Len() == 0 {
		return err
	}
	return fmt.Errorf("%w%s", err, b.String())
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// Close cancels any job left, stops the daemons in the reverse order of
// their start (SIGTERM, then SIGKILL to their process groups after 10 s)
// and removes the directory. It is safe to call more than once.
func (c *Cluster) Close() error {
	if c == nil {
		return nil
	}
	if slices.ContainsFunc(c.procs, func(d *daemon) bool { return d.name == "slurmctld" }) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.Command(ctx, "scancel", "--user=root") //nolint:errcheck // best effort; the daemons are killed next
		cancel()
	}
	// Stop in reverse order: the slurmds, slurmctld, slurmdbd, MariaDB,
	// munged.
	for i := len(c.procs) - 1; i >= 0; i-- {
		d := c.procs[i]
		pgid := d.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM) //nolint:errcheck
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
		}
		// Whatever is left in the group (a slurmstepd, say) goes too.
		syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck
		<-d.done
	}
	c.procs = nil
	if c.keepDir || c.cfg.Dir == "" {
		return nil
	}
	err := os.RemoveAll(c.cfg.Dir)
	c.cfg.Dir = ""
	return err
}

// cleanEnv is this process's environment without SLURM_* variables, so
// that a surrounding Slurm job or configuration cannot leak into the cluster.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") {
			env = append(env, kv)
		}
	}
	return env
}

// StopController stops slurmctld (SIGTERM to its process group, SIGKILL
// after 10 s) and leaves munged, the slurmds and the jobs running, as a
// controller that crashed or is down for maintenance would.
func (c *Cluster) StopController() error {
	for i, d := range c.procs {
		if d.name != "slurmctld" {
			continue
		}
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM) //nolint:errcheck
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck
			<-d.done
		}
		c.procs = append(c.procs[:i], c.procs[i+1:]...)
		return nil
	}
	return errors.New("slurm: slurmctld is not running")
}

// StartController starts slurmctld again (it recovers its jobs from its
// state directory) and waits until it answers.
func (c *Cluster) StartController(ctx context.Context) error {
	if err := c.spawn("slurmctld", "slurmctld", "-D", "-f", c.cfg.ConfPath()); err != nil {
		return err
	}
	return c.waitFor(ctx, 60*time.Second, "slurmctld to answer", func() bool {
		_, err := c.Command(ctx, "squeue", "-h", "-o", "%i")
		return err == nil
	})
}
