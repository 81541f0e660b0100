// Package server is qshare serve assembled: the store and the executor
// the settings name, the daemon over them, leading or standing by on a
// shared store, and the HTTP server with one router into which each
// service registers (the AWS Batch API, qshare's extensions, the
// dashboard, metrics and the health probes), behind one guard and one
// authentication (package auth) in front of all of them. cmd/qshare only
// parses flags into Settings and calls Run.
package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"qshare"
	"qshare/auth"
	"qshare/config"
	"qshare/datadir"
	"qshare/executor"
	"qshare/executor/process"
	"qshare/executor/simulated"
	"qshare/executor/slurm"
)

// Settings are the settings of qshare serve. Each comes, in rising
// order of precedence, from its default, the config file, a QSHARE_*
// environment variable, and a flag.
type Settings struct {
	Addr     string `yaml:"addr"`
	DataDir  string `yaml:"dataDir"`
	Store    string `yaml:"store"`
	Executor string `yaml:"executor"`
	// Executors names the executors file (executors.go): several named
	// executors, each with its own settings. With it, Executor is unused.
	Executors         string `yaml:"executors"`
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
	// SimDuration is the simulated executor's run time of a job whose
	// payload names none (QSHARE_SIM_DURATION), as a Go duration.
	SimDuration string `yaml:"simDuration"`
	// RunAs and PassEnv are the process executor's: see process.Options.
	RunAs   string   `yaml:"runAs"`
	PassEnv []string `yaml:"passEnv"`
	// CgroupRoot is the process executor's: where the cgroup hierarchy
	// of the attempts' cgroups is mounted (see process.Options).
	CgroupRoot string `yaml:"cgroupRoot"`
	// S3Endpoint is the S3-compatible store that jobs' data comes from and
	// goes to (package data); empty: AWS's own S3.
	S3Endpoint string `yaml:"s3Endpoint"`
	// S3AbortIdleUploads is how long a multipart upload of the embedded
	// store may go without a part before it is aborted (a duration or
	// days, as JobRetention; 0: never).
	S3AbortIdleUploads string `yaml:"s3AbortIdleUploads"`
	// SlurmConfig is the Slurm executor's file: see slurm.Config.
	SlurmConfig string `yaml:"slurmConfig"`
	// AdvertiseAddr and LeaderLease are for several servers on one
	// PostgreSQL store (serve_leader.go).
	AdvertiseAddr string `yaml:"advertiseAddr"`
	LeaderLease   string `yaml:"leaderLease"`
	// MaxConnections and MaxConnectionsPerPeer bound the connections open
	// at once, from everyone and from one peer (a local user, or an IP):
	// see auth.ConnLimits. MaxConnections is lowered to half the process's
	// descriptor limit where that is less.
	MaxConnections        int `yaml:"maxConnections"`
	MaxConnectionsPerPeer int `yaml:"maxConnectionsPerPeer"`
	// Kubeconfig, Namespace and KubeConfig are the Kubernetes executor's
	// (server/kubeexec).
	Kubeconfig string `yaml:"kubeconfig"`
	Namespace  string `yaml:"namespace"`
	KubeConfig string `yaml:"kubeConfig"`

	// ContainerHost and Pull are the container executor's: see
	// container.Options.
	ContainerHost string `yaml:"containerHost"`
	Pull          string `yaml:"pull"`

	// Guard holds the request guard's settings (serve_guard.go).
	Guard GuardSettings `yaml:",inline"`

	// listenAddr is the address the server listens on, once it does (Addr
	// may name port 0): where executors find the embedded S3 store.
	listenAddr string
	// jobKeys are the embedded store's keys of running attempts, without
	// --auth (auth.JobKeys); nil with it.
	jobKeys *auth.JobKeys
}

// DefaultSettings returns the settings qshare serve has when nothing
// else is given: loopback port 8750, ./qshare-data, the process executor.
func DefaultSettings() Settings {
	return Settings{Addr: "127.0.0.1:8750", DataDir: "./qshare-data", Executor: defaultExecutor, Region: "us-east-1",
		AccountID: "000000000000", MaxSharesPerQueue: qshare.DefaultQuotaSharesPerQueue, LogLevel: "info",
		JobRetention: defaultJobRetention, S3AbortIdleUploads: defaultS3AbortIdleUploads, Metrics: "on", LeaderLease: defaultLeaderLease,
		MaxConnections: 4096, MaxConnectionsPerPeer: 512, Guard: GuardSettings{AuditMaxMB: 100}}
}

// ConfigKeys lists the keys of Settings' YAML tags, for the help
// and for the error on an unknown key.
const ConfigKeys = "addr, dataDir, store, executor, executors, region, accountId, maxQuotaSharesPerQueue, logLevel, stopGrace, gpus, instanceTypes, events, jobRetention, metrics, simDuration, runAs, passEnv, cgroupRoot, s3Endpoint, s3AbortIdleUploads, slurmConfig, advertiseAddr, leaderLease, kubeconfig, namespace, kubeConfig, containerHost, pull, maxConnections, maxConnectionsPerPeer, " + guardConfigKeys

// defaultJobRetention is how long finished jobs are kept by default.
const defaultJobRetention = "7d"

// maxRetentionDays bounds a retention given in days: a hundred years, well
// inside what a time.Duration holds (about 292 years), so that a large
// number of days cannot wrap around to a short or negative retention.
const maxRetentionDays = 36500

// parseRetention reads a job retention: a Go duration (36h, 90m) or a whole
// number of days (7d); 0 keeps finished jobs forever.
func parseRetention(v string) (time.Duration, error) {
	return parseAge("--job-retention", v, "to keep finished jobs forever")
}

// defaultS3AbortIdleUploads is --s3-abort-idle-uploads' default:
// s3.DefaultAbortIdleUploads.
const defaultS3AbortIdleUploads = "24h"

// parseAge reads the value v of flag: a Go duration or a whole number of
// days; 0 means never, which zero says.
func parseAge(flag, v, zero string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	d, err := config.ParseLength(v, maxRetentionDays)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not valid: give a duration such as 7d, 36h or 90m (at most %dd), or 0 %s", flag, v, maxRetentionDays, zero)
	}
	return d, nil
}

// defaultExecutor is the executor qshare serve uses unless told otherwise.
var defaultExecutor = "process"

// ExecutorFactory makes the executor of one kind from the server's
// settings (with the executor's own from the executors file), the stop
// grace and the server's logger.
type ExecutorFactory func(ctx context.Context, s Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error)

// RegisterExecutor adds an executor kind that --executor and the
// executors file can name; it is for the init of a package that the
// binary imports, such as server/kubeexec, which keeps client-go out of
// everything that links this package without it.
func RegisterExecutor(kind string, f ExecutorFactory) {
	if _, ok := executors[kind]; ok {
		panic("server: executor kind " + kind + " registered twice")
	}
	executors[kind] = f
}

// executors maps an --executor name to its constructor.
var executors = map[string]ExecutorFactory{
	"simulated": func(ctx context.Context, s Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
		var def time.Duration
		if s.SimDuration != "" {
			d, err := time.ParseDuration(s.SimDuration)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("--sim-duration %q is not valid: give a positive Go duration such as 60s or 5m", s.SimDuration)
			}
			def = d
		}
		return simulated.New(simulated.Options{StopGrace: grace, DefaultDuration: def}), nil
	},
	"slurm": func(ctx context.Context, s Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
		if s.SlurmConfig == "" {
			return nil, fmt.Errorf("--executor slurm needs --slurm-config FILE: the YAML file that maps instance types to partitions (see docs/slurm.md)")
		}
		c, err := slurm.LoadConfig(s.SlurmConfig)
		if err != nil {
			return nil, err
		}
		return slurm.New(ctx, slurm.Options{Config: c, StopGrace: grace, Logger: log, S3: s3Endpoint(s)})
	},
	"process": func(ctx context.Context, s Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
		gpus := splitList(s.GPUs)
		if s.RunAs == "" && os.Geteuid() == 0 {
			log.Warn("qshare serve runs as root with the process executor and no --run-as: every job runs as root and can do anything on this host; give --run-as USER to run jobs as an unprivileged user")
		}
		if u, err := url.Parse(s.S3Endpoint); s.S3Endpoint != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return nil, fmt.Errorf("--s3-endpoint %q is not an http:// or https:// URL of an S3-compatible store", s.S3Endpoint)
		}
		o := process.Options{DataDir: s.DataDir, StopGrace: grace, GPUs: gpus, InstanceTypes: s.InstanceTypes, Logger: log,
			RunAs: s.RunAs, PassEnv: s.PassEnv, S3: s3Endpoint(s), CgroupRoot: s.CgroupRoot}
		if s.jobKeys != nil && s.S3Endpoint == "" {
			o.S3Keys = s.jobKeys
		}
		return process.New(ctx, o)
	},
}

// checkPrivateFiles refuses to start with an --events or --audit log or an
// --auth file that someone else could read, change or replace where it is
// (datadir.CheckPrivateFile); the logs are created 0600 if missing.
func checkPrivateFiles(s Settings) error {
	for _, f := range []struct {
		flag, path string
		create     bool
	}{{"--events", s.Events, true}, {"--audit", s.Guard.Audit, true}, {"--auth", s.Guard.Auth, false}} {
		if f.path == "" || f.flag == "--events" && f.path == eventsInStore {
			continue
		}
		if err := datadir.CheckPrivateFile(f.flag, f.path, f.create); err != nil {
			return err
		}
	}
	return nil
}

// splitList splits a comma-separated setting (--gpus) into its non-empty
// entries.
func splitList(v string) []string {
	var out []string
	for _, g := range strings.Split(v, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// ExecutorNames returns the names --executor takes, sorted.
func ExecutorNames() []string {
	var ns []string
	for n := range executors {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
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

// Run runs the server until ctx ends or SIGINT/SIGTERM arrives.
func Run(ctx context.Context, s Settings, stdout io.Writer) error {
	return RunReady(ctx, s, stdout, nil)
}

// RunReady is Run that also calls ready, when it is not nil, with the
// address it listens on once it is about to serve: how `bench
// --in-process` learns the port the kernel gave it.
func RunReady(ctx context.Context, s Settings, stdout io.Writer, ready func(addr string)) error {
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
	if _, err := parseAge("--s3-abort-idle-uploads", s.S3AbortIdleUploads, "never to abort them"); err != nil {
		return err
	}
	if s.MaxConnections < 1 || s.MaxConnectionsPerPeer < 1 {
		return fmt.Errorf("--max-connections %d and --max-connections-per-peer %d are not valid: give 1 or more", s.MaxConnections, s.MaxConnectionsPerPeer)
	}
	if s.Guard.AuditMaxMB < 0 {
		return fmt.Errorf("--audit-max-mb %d is not valid: give 0 (never rotate) or more", s.Guard.AuditMaxMB)
	}
	if s.Metrics != "on" && s.Metrics != "off" {
		return fmt.Errorf("--metrics %q is not valid: give on or off", s.Metrics)
	}
	if s.Guard.Auth == "" {
		// Jobs that run as other users reach the embedded store with
		// keys of their own (s3.go).
		s.jobKeys = auth.NewJobKeys(filepath.Join(s.DataDir, datadir.StateDir, jobKeysFile), s.Region, s.AccountID)
	}
	named, err := serverExecutors(s)
	if err != nil {
		return err
	}
	if err := checkPrivateFiles(s); err != nil {
		return err
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
	guard, authn, closeGuard, err := newGuard(ctx, ln, s, log)
	if err != nil {
		return err
	}
	defer closeGuard()
	// The data directory's layout and modes (package datadir), once the
	// settings are known good, before the store or the executor opens it.
	shared := false
	for _, n := range named {
		shared = shared || n.s.Executor == "process" && (s.Guard.Auth != "" || n.s.RunAs != "")
	}
	if err := datadir.Prepare(s.DataDir, datadir.Options{Shared: shared, MoveStore: s.Store == ""}); err != nil {
		return err
	}

	// The guard at accept: other local users (without --auth) and peers
	// beyond the connection limits are reset before a byte is read.
	ln = guard.Listener(ln, auth.ConnLimits{Max: connLimit(s.MaxConnections, log), PerPeer: s.MaxConnectionsPerPeer})

	sv := &server{s: s, log: log, grace: grace, retention: retention, execs: named, tls: tlsConfig, stdout: stdout,
		router: &Router{auth: authn, noRoute: noRoute}}
	return sv.run(ctx, ln, guard, ready)
}

// connLimit returns want, or half the process's limit of open descriptors
// when that is less (the rest are the store's, the executor's and the
// jobs' logs'), so that the connection limit is reached before accept
// fails with "too many open files" for everyone.
func connLimit(want int, log *slog.Logger) int {
	if n := descriptorLimit(); n > 0 && uint64(want) > n/2 {
		log.Info("connection limit lowered to half the descriptor limit", "maxConnections", n/2, "asked", want)
		return int(max(n/2, 1))
	}
	return want
}
