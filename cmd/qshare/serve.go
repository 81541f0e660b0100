package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"qshare"
	"qshare/datadir"
	"qshare/executor"
	"qshare/executor/process"
	"qshare/executor/simulated"
	"qshare/executor/slurm"
)

// serveSettings are the settings of qshare serve. Each comes, in rising
// order of precedence, from its default, the config file, a QSHARE_*
// environment variable, and a flag.
type serveSettings struct {
	Addr              string `yaml:"addr"`
	DataDir           string `yaml:"dataDir"`
	Store             string `yaml:"store"`
	Executor          string `yaml:"executor"`
	Region            string `yaml:"region"`
	AccountID         string `yaml:"accountId"`
	MaxSharesPerQueue int    `yaml:"maxQuotaSharesPerQueue"`
	LogLevel          string `yaml:"logLevel"`
	StopGrace         string `yaml:"stopGrace"`
	GPUs              string `yaml:"gpus"`
	InstanceTypes     string `yaml:"instanceTypes"`
	Events            string `yaml:"events"`
	JobRetention      string `yaml:"jobRetention"`
	Metrics           string `yaml:"metrics"`
	// RunAs and PassEnv are the process executor's: see process.Options.
	RunAs   string   `yaml:"runAs"`
	PassEnv []string `yaml:"passEnv"`
	// SlurmConfig is the Slurm executor's file: see slurm.Config.
	SlurmConfig string `yaml:"slurmConfig"`
	// AdvertiseAddr and LeaderLease are for several servers on one
	// PostgreSQL store (serve_leader.go).
	AdvertiseAddr string `yaml:"advertiseAddr"`
	LeaderLease   string `yaml:"leaderLease"`
	// Kubeconfig, Namespace and KubeConfig are the Kubernetes executor's
	// (serve_kube.go).
	Kubeconfig string `yaml:"kubeconfig"`
	Namespace  string `yaml:"namespace"`
	KubeConfig string `yaml:"kubeConfig"`

	// Guard holds the request guard's settings (serve_guard.go).
	Guard guardSettings `yaml:",inline"`
}

func defaultServeSettings() serveSettings {
	return serveSettings{Addr: "127.0.0.1:8750", DataDir: "./qshare-data", Executor: defaultExecutor, Region: "us-east-1",
		AccountID: "000000000000", MaxSharesPerQueue: qshare.DefaultQuotaSharesPerQueue, LogLevel: "info",
		JobRetention: defaultJobRetention, Metrics: "on", LeaderLease: defaultLeaderLease}
}

// serveConfigKeys lists the keys of serveSettings' YAML tags, for the help
// and for the error on an unknown key.
const serveConfigKeys = "addr, dataDir, store, executor, region, accountId, maxQuotaSharesPerQueue, logLevel, stopGrace, gpus, instanceTypes, events, jobRetention, metrics, runAs, passEnv, slurmConfig, advertiseAddr, leaderLease, kubeconfig, namespace, kubeConfig, " + guardConfigKeys

// defaultJobRetention is how long finished jobs are kept by default.
const defaultJobRetention = "7d"

// parseRetention reads a job retention: a Go duration (36h, 90m) or a whole
// number of days (7d); 0 keeps finished jobs forever.
func parseRetention(v string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("--job-retention %q is not valid: give a duration such as 7d, 36h or 90m, or 0 to keep finished jobs forever", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--job-retention %q is not valid: give a duration such as 7d, 36h or 90m, or 0 to keep finished jobs forever", v)
	}
	return d, nil
}

// defaultExecutor is the executor qshare serve uses unless told otherwise.
var defaultExecutor = "process"

// executors maps an --executor name to its constructor.
var executors = map[string]func(ctx context.Context, s serveSettings, grace time.Duration, log *slog.Logger) (executor.Executor, error){
	"simulated": func(ctx context.Context, s serveSettings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
		return simulated.New(simulated.Options{StopGrace: grace}), nil
	},
	"slurm": func(ctx context.Context, s serveSettings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
		if s.SlurmConfig == "" {
			return nil, fmt.Errorf("--executor slurm needs --slurm-config FILE: the YAML file that maps instance types to partitions (see docs/slurm.md)")
		}
		c, err := slurm.LoadConfig(s.SlurmConfig)
		if err != nil {
			return nil, err
		}
		return slurm.New(ctx, slurm.Options{Config: c, StopGrace: grace, Logger: log})
	},
	"process": func(ctx context.Context, s serveSettings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
		var gpus []string
		for _, g := range strings.Split(s.GPUs, ",") {
			if g = strings.TrimSpace(g); g != "" {
				gpus = append(gpus, g)
			}
		}
		if s.RunAs == "" && os.Geteuid() == 0 {
			log.Warn("qshare serve runs as root with the process executor and no --run-as: every job runs as root and can do anything on this host; give --run-as USER to run jobs as an unprivileged user")
		}
		return process.New(ctx, process.Options{DataDir: s.DataDir, StopGrace: grace, GPUs: gpus, InstanceTypes: s.InstanceTypes, Logger: log,
			RunAs: s.RunAs, PassEnv: s.PassEnv})
	},
}

var serveFlags struct {
	config     string
	cpuProfile string
	s          serveSettings
}

var serveCmd = &cobra.Command{
	Use:   "serve",
	Short: "Run the AWS Batch-compatible server",
	Long: `serve runs qshare's server: the AWS Batch service-job and quota-management API
over HTTP (POST /v1/<operation>), the scheduler, and the executor that runs
the jobs. Every resource and job is kept in the store, by default an SQLite
database in the data directory (--store names another), and every change is
durable before it is acknowledged; a restart recovers the jobs that were
running. One server owns a store at a time: on SQLite a second one on the
same store refuses to start; on PostgreSQL it stands by, forwards the API to
the leader (--advertise-addr), and takes over when the leader goes
(--leader-lease; docs/high-availability.md).

Without --auth, point an AWS SDK at it with any static credentials, for example in Go:
  batch.NewFromConfig(cfg, func(o *batch.Options){ o.BaseEndpoint = aws.String("http://127.0.0.1:8750") })

Settings come from flags, then QSHARE_* environment variables (QSHARE_ADDR,
QSHARE_DATA_DIR, QSHARE_STORE, QSHARE_EXECUTOR, QSHARE_REGION, QSHARE_ACCOUNT_ID,
QSHARE_MAX_QUOTA_SHARES_PER_QUEUE, QSHARE_LOG_LEVEL, QSHARE_STOP_GRACE,
QSHARE_EVENTS, QSHARE_GPUS, QSHARE_INSTANCE_TYPES, QSHARE_JOB_RETENTION, QSHARE_CONFIG), then the YAML config file (--config), then the defaults.

--auth FILE (QSHARE_AUTH; auth in the config file) turns authentication on:
every request must then be signed (AWS Signature Version 4) with an access
key of FILE, and allowed by its principal's IAM-style policies; SIGHUP
reloads FILE. qshare auth new-key makes a key. With the process executor,
each job then runs as its submitter's unixUser. Without --auth the server
serves only its own Unix user and root (on Linux). --tls-cert and --tls-key
(QSHARE_TLS_CERT, QSHARE_TLS_KEY) serve HTTPS; only with both --auth and TLS
may --addr be a non-loopback address. The server answers only to its own
address in the Host header, and refuses requests from web pages (Origin,
Sec-Fetch-Site) and bodies that are not application/json; --allow-host and
--allow-origin (QSHARE_ALLOW_HOST, QSHARE_ALLOW_ORIGIN, comma-separated;
allowHosts, allowOrigins in the config file) widen the Host and Origin rules.
See docs/security.md.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		s, err := resolveServeSettings(cmd)
		if err != nil {
			return err
		}
		if serveFlags.cpuProfile != "" {
			f, err := os.Create(serveFlags.cpuProfile)
			if err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		return runServe(cmd.Context(), s, cmd.OutOrStdout())
	},
}

func init() {
	serveCmd.Example = `  # Run on the embedded defaults: 127.0.0.1:8750, ./qshare-data, jobs as local processes
  qshare serve

  # No processes: each job "runs" for its payload's QSHARE_SIM_DURATION
  qshare serve --executor simulated --data-dir /tmp/qshare-demo

  # Two of the host's GPUs, a 30 s checkpoint grace, and an event log to check later
  qshare serve --gpus 0,1 --stop-grace 30s --events events.jsonl

  # The database on another disk; the jobs' files stay in ./qshare-data
  qshare serve --store sqlite:///var/lib/qshare/qshare.db`
	f := serveCmd.Flags()
	d := defaultServeSettings()
	f.StringVar(&serveFlags.config, "config", "", "YAML file with the settings below (keys "+serveConfigKeys+")")
	f.StringVar(&serveFlags.s.Addr, "addr", d.Addr, "HOST:PORT to listen on (port 0 picks a free port); a loopback address, unless --auth and --tls-cert/--tls-key are given")
	f.StringVar(&serveFlags.s.DataDir, "data-dir", d.DataDir, "directory of the executor's files, and of the database unless --store names one")
	f.StringVar(&serveFlags.s.Store, "store", "", storeFlagUsage)
	f.StringVar(&serveFlags.s.Executor, "executor", d.Executor, "what runs the jobs: "+strings.Join(executorNames(), " or "))
	f.StringVar(&serveFlags.s.Region, "region", d.Region, "region in ARNs")
	f.StringVar(&serveFlags.s.AccountID, "account-id", d.AccountID, "account ID in ARNs (12 digits)")
	f.IntVar(&serveFlags.s.MaxSharesPerQueue, "max-quota-shares-per-queue", d.MaxSharesPerQueue, "most quota shares one job queue may have (AWS: 20)")
	f.StringVar(&serveFlags.s.LogLevel, "log-level", d.LogLevel, "debug, info, warn or error")
	f.StringVar(&serveFlags.s.GPUs, "gpus", "", "process executor: the GPUs jobs may use, as a comma-separated list of indexes or UUIDs (default: every GPU nvidia-smi lists)")
	f.StringVar(&serveFlags.s.InstanceTypes, "instance-types", "", "process executor: YAML file that overrides the GPUs per instance type table")
	f.StringVar(&serveFlags.s.StopGrace, "stop-grace", "", "grace period of a stop (preemption, termination, timeout) before a forced kill, e.g. 30s; empty: the executor's default")
	f.StringVar(&serveFlags.cpuProfile, "cpuprofile", "", "write a CPU profile of the server to `FILE` until it stops (go tool pprof FILE); for measuring, not a setting")
	f.StringVar(&serveFlags.s.Events, "events", "", "append the capacity event log (one JSON line per start, preemption, finish, failure, submit and priority change) to this file; check it with qshare check-events; \"store\": into the store, if it keeps one")
	f.StringVar(&serveFlags.s.JobRetention, "job-retention", d.JobRetention, "how long a finished (SUCCEEDED or FAILED) job is kept after it stopped, e.g. 7d, 36h; older ones are deleted; 0 keeps them forever")
	f.StringVar(&serveFlags.s.RunAs, "run-as", "", "process executor: run every job as this unprivileged `USER` (a name or uid; the server must run as root); empty: as the server's user")
	f.StringArrayVar(&serveFlags.s.PassEnv, "pass-env", nil, "process executor: also pass the server's environment variable `NAME` to jobs (repeatable); by default jobs get only PATH, HOME, LANG and TZ of it")
	f.StringVar(&serveFlags.s.SlurmConfig, "slurm-config", "", "slurm executor: YAML `FILE` mapping instance types to partitions, --gres, CPUs and memory, with the shared directory and the account (docs/slurm.md)")
	f.StringVar(&serveFlags.s.Kubeconfig, "kubeconfig", "", "kubernetes executor: kubeconfig `FILE` (default: the in-cluster config, then $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&serveFlags.s.Namespace, "namespace", "", "kubernetes executor: the `NAMESPACE` of the attempts' pods (default: the kubeconfig's, or the pod's own in a cluster, else default)")
	f.StringVar(&serveFlags.s.KubeConfig, "kube-config", "", "kubernetes executor: YAML `FILE` mapping instance types to node selectors, resources, tolerations and priority classes (docs/kubernetes.md)")
	f.StringVar(&serveFlags.s.Metrics, "metrics", d.Metrics, "on: serve Prometheus metrics at GET /metrics (docs/metrics.md); off: serve none and measure nothing")
	f.StringVar(&serveFlags.s.AdvertiseAddr, "advertise-addr", "", "PostgreSQL store: the `URL` at which the other servers reach this one's API when it leads (default: http(s)://the listen address)")
	f.StringVar(&serveFlags.s.LeaderLease, "leader-lease", d.LeaderLease, "PostgreSQL store: a leader that stops renewing its database session for this long (paused, hung, cut off) loses the store to a standby, by the database's clock")
	rootCmd.AddCommand(serveCmd)
}

func executorNames() []string {
	var ns []string
	for n := range executors {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// resolveServeSettings layers defaults, the config file, the environment and
// the flags that were given.
func resolveServeSettings(cmd *cobra.Command) (serveSettings, error) {
	s := defaultServeSettings()
	path := serveFlags.config
	if !cmd.Flags().Changed("config") {
		path = os.Getenv("QSHARE_CONFIG")
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return s, fmt.Errorf("cannot read the config file: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
			return s, fmt.Errorf("config file %s: %w (keys: %s)", path, err, serveConfigKeys)
		}
	}
	// Each string setting: its environment variable, then its flag if given.
	f := cmd.Flags()
	fs := &serveFlags.s
	for _, e := range []struct {
		flag, env  string
		dst, given *string
	}{
		{"addr", "QSHARE_ADDR", &s.Addr, &fs.Addr}, {"data-dir", "QSHARE_DATA_DIR", &s.DataDir, &fs.DataDir},
		{"store", "QSHARE_STORE", &s.Store, &fs.Store},
		{"executor", "QSHARE_EXECUTOR", &s.Executor, &fs.Executor}, {"region", "QSHARE_REGION", &s.Region, &fs.Region},
		{"account-id", "QSHARE_ACCOUNT_ID", &s.AccountID, &fs.AccountID}, {"log-level", "QSHARE_LOG_LEVEL", &s.LogLevel, &fs.LogLevel},
		{"stop-grace", "QSHARE_STOP_GRACE", &s.StopGrace, &fs.StopGrace}, {"events", "QSHARE_EVENTS", &s.Events, &fs.Events},
		{"gpus", "QSHARE_GPUS", &s.GPUs, &fs.GPUs}, {"instance-types", "QSHARE_INSTANCE_TYPES", &s.InstanceTypes, &fs.InstanceTypes},
		{"job-retention", "QSHARE_JOB_RETENTION", &s.JobRetention, &fs.JobRetention}, {"run-as", "QSHARE_RUN_AS", &s.RunAs, &fs.RunAs},
		{"metrics", "QSHARE_METRICS", &s.Metrics, &fs.Metrics}, {"slurm-config", "QSHARE_SLURM_CONFIG", &s.SlurmConfig, &fs.SlurmConfig},
		{"advertise-addr", "QSHARE_ADVERTISE_ADDR", &s.AdvertiseAddr, &fs.AdvertiseAddr}, {"leader-lease", "QSHARE_LEADER_LEASE", &s.LeaderLease, &fs.LeaderLease},
		{"kubeconfig", "QSHARE_KUBECONFIG", &s.Kubeconfig, &fs.Kubeconfig}, {"namespace", "QSHARE_NAMESPACE", &s.Namespace, &fs.Namespace},
		{"kube-config", "QSHARE_KUBE_CONFIG", &s.KubeConfig, &fs.KubeConfig},
	} {
		if v, ok := os.LookupEnv(e.env); ok {
			*e.dst = v
		}
		if f.Changed(e.flag) {
			*e.dst = *e.given
		}
	}
	resolveGuardSettings(cmd, &s.Guard)
	const maxSharesEnv = "QSHARE_MAX_QUOTA_SHARES_PER_QUEUE"
	if v, ok := os.LookupEnv(maxSharesEnv); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, fmt.Errorf("environment variable %s=%q: give a whole number", maxSharesEnv, v)
		}
		s.MaxSharesPerQueue = n
	}
	if f.Changed("pass-env") {
		s.PassEnv = fs.PassEnv
	}
	if f.Changed("max-quota-shares-per-queue") {
		s.MaxSharesPerQueue = fs.MaxSharesPerQueue
	}
	return s, nil
}

// checkLoopback refuses any address that is not loopback: qshare serves no
// TLS yet, and anyone who can reach the port can run commands.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q is not HOST:PORT: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %q: qshare does not serve TLS yet, and its jobs run commands, so anyone who can reach the port could run programs on this machine. Listen on a loopback address such as 127.0.0.1:8750, and reach it from elsewhere through an SSH tunnel or an authenticating proxy", addr)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level %q is not valid: use debug, info, warn or error", s)
	}
	return l, nil
}

// runServe runs the server until ctx ends or SIGINT/SIGTERM arrives.
func runServe(ctx context.Context, s serveSettings, stdout io.Writer) error {
	return runServeReady(ctx, s, stdout, nil)
}

// runServeReady is runServe that also calls ready, when it is not nil, with the
// address it listens on once it is about to serve: how `bench
// --in-process` learns the port the kernel gave it.
func runServeReady(ctx context.Context, s serveSettings, stdout io.Writer, ready func(addr string)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := checkListenAddr(s); err != nil {
		return err
	}
	tlsConfig, certs, err := serverTLS(s)
	if err != nil {
		return err
	}
	level, err := parseLevel(s.LogLevel)
	if err != nil {
		return err
	}
	if s.MaxSharesPerQueue < 1 {
		return fmt.Errorf("--max-quota-shares-per-queue %d is not valid: give 1 or more", s.MaxSharesPerQueue)
	}
	if len(s.AccountID) != 12 || strings.Trim(s.AccountID, "0123456789") != "" {
		return fmt.Errorf("--account-id %q is not valid: give 12 digits", s.AccountID)
	}
	if s.Region == "" || strings.ContainsAny(s.Region, ":/ ") {
		return fmt.Errorf("--region %q is not valid: give a region name such as us-east-1", s.Region)
	}
	var grace time.Duration
	if s.StopGrace != "" {
		if grace, err = simulated.ParseGrace(s.StopGrace); err != nil {
			return fmt.Errorf("--stop-grace %q: %w", s.StopGrace, err)
		}
	}
	retention, err := parseRetention(s.JobRetention)
	if err != nil {
		return err
	}
	if s.Metrics != "on" && s.Metrics != "off" {
		return fmt.Errorf("--metrics %q is not valid: give on or off", s.Metrics)
	}
	newExec, ok := executors[s.Executor]
	if !ok {
		return fmt.Errorf("--executor %q is not known: use %s", s.Executor, strings.Join(executorNames(), " or "))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	setServeGC(log)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if certs != nil {
		certs.reloadOnHangup(ctx, log) // a renewed certificate without a restart (serve_tls.go)
	}

	// Listen first, so a busy port fails before the data is touched.
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w (is another qshare running? pick another port with --addr)", s.Addr, err)
	}
	defer ln.Close()
	guard, closeGuard, err := newGuard(ctx, ln, s, log)
	if err != nil {
		return err
	}
	defer closeGuard()
	// The data directory's layout and modes (package datadir), once the
	// settings are known good, before the store or the executor opens it.
	if err := datadir.Prepare(s.DataDir, datadir.Options{Shared: s.Executor == "process" && (s.Guard.Auth != "" || s.RunAs != ""), MoveStore: s.Store == ""}); err != nil {
		return err
	}

	sv := &server{s: s, log: log, grace: grace, retention: retention, newExec: newExec, tls: tlsConfig, stdout: stdout}
	return sv.run(ctx, ln, guard, ready)
}
