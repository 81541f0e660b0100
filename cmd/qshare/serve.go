package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"qshare/server"
	_ "qshare/server/kubeexec" // --executor kubernetes
)

// qshare serve: its flags, QSHARE_* variables and config file, layered into
// server.Settings; the server itself is package server.

var serveFlags struct {
	config     string
	cpuProfile string
	s          server.Settings
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
		return server.Run(cmd.Context(), s, cmd.OutOrStdout())
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
	addServeFlags(serveCmd.Flags())
	rootCmd.AddCommand(serveCmd)
}

// addServeFlags defines qshare serve's flags on f, into serveFlags.
func addServeFlags(f *pflag.FlagSet) {
	d := server.DefaultSettings()
	f.StringVar(&serveFlags.config, "config", "", "YAML file with the settings below (keys "+server.ConfigKeys+")")
	f.StringVar(&serveFlags.s.Addr, "addr", d.Addr, "HOST:PORT to listen on (port 0 picks a free port); a loopback address, unless --auth and --tls-cert/--tls-key are given")
	f.StringVar(&serveFlags.s.DataDir, "data-dir", d.DataDir, "directory of the executor's files, and of the database unless --store names one")
	f.StringVar(&serveFlags.s.Store, "store", "", storeFlagUsage)
	f.StringVar(&serveFlags.s.Executor, "executor", d.Executor, "what runs the jobs: "+strings.Join(server.ExecutorNames(), " or "))
	f.StringVar(&serveFlags.s.Executors, "executors", "", "YAML `FILE` naming several executors, each with its kind and its own settings (runAs, gpus, slurmConfig, kubeconfig, ...); each service environment names its own with the tag qshare:executor (docs/executors.md). Replaces --executor")
	f.StringVar(&serveFlags.s.Region, "region", d.Region, "region in ARNs")
	f.StringVar(&serveFlags.s.AccountID, "account-id", d.AccountID, "account ID in ARNs (12 digits)")
	f.IntVar(&serveFlags.s.MaxSharesPerQueue, "max-quota-shares-per-queue", d.MaxSharesPerQueue, "most quota shares one job queue may have (AWS: 20)")
	f.StringVar(&serveFlags.s.LogLevel, "log-level", d.LogLevel, "debug, info, warn or error")
	f.StringVar(&serveFlags.s.GPUs, "gpus", "", "process and container executors: the GPUs jobs may use, as a comma-separated list of indexes or UUIDs (default: every GPU nvidia-smi lists)")
	f.StringVar(&serveFlags.s.InstanceTypes, "instance-types", "", "process and container executors: YAML file that overrides the GPUs per instance type table")
	f.StringVar(&serveFlags.s.StopGrace, "stop-grace", "", "grace period of a stop (preemption, termination, timeout) before a forced kill, e.g. 30s; empty: the executor's default")
	f.StringVar(&serveFlags.cpuProfile, "cpuprofile", "", "write a CPU profile of the server to `FILE` until it stops (go tool pprof FILE); for measuring, not a setting")
	f.StringVar(&serveFlags.s.Events, "events", "", "append the capacity event log (one JSON line per start, preemption, finish, failure, submit and priority change, and a lead line where the server begins to lead) to this file; check it with qshare check-events; \"store\": into the store, if it keeps one")
	f.StringVar(&serveFlags.s.JobRetention, "job-retention", d.JobRetention, "how long a finished (SUCCEEDED or FAILED) job is kept after it stopped, e.g. 7d, 36h; older ones are deleted; 0 keeps them forever")
	f.StringVar(&serveFlags.s.SimDuration, "sim-duration", "", "simulated executor: how long a job runs when its payload sets no QSHARE_SIM_DURATION (as with the SageMaker SDK's ModelTrainer), e.g. 60s; empty: 1s")
	f.StringVar(&serveFlags.s.RunAs, "run-as", "", "process and container executors: run every job as this unprivileged `USER` (a name or uid; the server must run as root); empty: as the server's user (the container executor: nobody, when the server is root)")
	f.StringArrayVar(&serveFlags.s.PassEnv, "pass-env", nil, "process executor: also pass the server's environment variable `NAME` to jobs (repeatable); by default jobs get only PATH, HOME, LANG and TZ of it")
	f.StringVar(&serveFlags.s.CgroupRoot, "cgroup-root", "", "process executor: the `DIR` where the cgroup hierarchy is mounted that each attempt gets a cgroup of its own in, killed whole at its end: a cgroup2 mount (v2), or v1's controller directories with freezer and pids (default: /sys/fs/cgroup); without one, attempts are contained by their process group only, with a warning (docs/security.md)")
	f.StringVar(&serveFlags.s.S3Endpoint, "s3-endpoint", "", "the `URL` of the S3-compatible store (MinIO, Ceph, SeaweedFS, versitygw) that jobs' input channels come from and their models, outputs and checkpoints go to, with the AWS SDK's credential chain as each job's user sees it (docs/data.md); empty: AWS's own S3")
	f.StringVar(&serveFlags.s.S3AbortIdleUploads, "s3-abort-idle-uploads", d.S3AbortIdleUploads, "the embedded S3 store aborts a multipart upload that no part has come to for this long, and removes its parts' files, as S3's lifecycle rule AbortIncompleteMultipartUpload does: a duration (24h, 90m) or days (2d); checked at start and every quarter of it (at most hourly); 0: never (docs/data.md)")
	f.StringVar(&serveFlags.s.SlurmConfig, "slurm-config", "", "slurm executor: YAML `FILE` mapping instance types to partitions, --gres, CPUs and memory, with the shared directory and the account (docs/slurm.md)")
	f.StringVar(&serveFlags.s.Kubeconfig, "kubeconfig", "", "kubernetes executor: kubeconfig `FILE` (default: the in-cluster config, then $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&serveFlags.s.Namespace, "namespace", "", "kubernetes executor: the `NAMESPACE` of the attempts' pods (default: the kubeconfig's, or the pod's own in a cluster, else default)")
	f.StringVar(&serveFlags.s.KubeConfig, "kube-config", "", "kubernetes executor: YAML `FILE` mapping instance types to node selectors, resources, tolerations and priority classes (docs/kubernetes.md)")
	f.StringVar(&serveFlags.s.ContainerHost, "container-host", "", "container executor: the Docker Engine API's `ADDRESS` (Docker Engine or podman system service), such as unix:///run/podman/podman.sock (default: DOCKER_HOST, else /var/run/docker.sock, else /run/podman/podman.sock)")
	f.StringVar(&serveFlags.s.Pull, "pull", "missing", "container executor: when to pull a job's image: missing, always or never")
	f.StringVar(&serveFlags.s.Metrics, "metrics", d.Metrics, "on: serve Prometheus metrics at GET /metrics (docs/metrics.md); off: serve none and measure nothing")
	f.StringVar(&serveFlags.s.AdvertiseAddr, "advertise-addr", "", "PostgreSQL store: the `URL` at which the other servers reach this one's API when it leads (default: http(s)://the listen address)")
	f.IntVar(&serveFlags.s.MaxConnections, "max-connections", d.MaxConnections, "most connections open at once, from all clients (at most half the process's descriptor limit); beyond it a new connection is reset at accept (docs/security.md)")
	f.IntVar(&serveFlags.s.MaxConnectionsPerPeer, "max-connections-per-peer", d.MaxConnectionsPerPeer, "most connections open at once from one peer: a local user (but the server's own and root), or the IP of another machine; beyond it the peer's new connections are reset at accept")
	f.IntVar(&serveFlags.s.Guard.AuditMaxMB, "audit-max-mb", d.Guard.AuditMaxMB, "rotate the --audit file when it reaches this many MiB: the full file is kept as FILE.TIME and none is removed; 0: never rotate")
	f.StringVar(&serveFlags.s.LeaderLease, "leader-lease", d.LeaderLease, "PostgreSQL store: a leader that stops renewing its database session for this long (paused, hung, cut off) loses the store to a standby, by the database's clock")
}

// storeFlagUsage is the help of --store.
const storeFlagUsage = "`URL` of the store: sqlite:///ABSOLUTE/PATH/qshare.db, sqlite:RELATIVE/PATH/qshare.db, or postgres://USER@HOST:PORT/DATABASE?sslmode=... (password from PGPASSWORD or ~/.pgpass; never printed) (default: the SQLite database DATA_DIR/state/qshare.db); the executor's files stay in --data-dir"

// resolveServeSettings layers defaults, the config file, the environment and
// the flags that were given.
func resolveServeSettings(cmd *cobra.Command) (server.Settings, error) {
	s := server.DefaultSettings()
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
			return s, fmt.Errorf("config file %s: %w (keys: %s)", path, err, server.ConfigKeys)
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
		{"executor", "QSHARE_EXECUTOR", &s.Executor, &fs.Executor}, {"executors", "QSHARE_EXECUTORS", &s.Executors, &fs.Executors}, {"region", "QSHARE_REGION", &s.Region, &fs.Region},
		{"account-id", "QSHARE_ACCOUNT_ID", &s.AccountID, &fs.AccountID}, {"log-level", "QSHARE_LOG_LEVEL", &s.LogLevel, &fs.LogLevel},
		{"stop-grace", "QSHARE_STOP_GRACE", &s.StopGrace, &fs.StopGrace}, {"events", "QSHARE_EVENTS", &s.Events, &fs.Events},
		{"gpus", "QSHARE_GPUS", &s.GPUs, &fs.GPUs}, {"instance-types", "QSHARE_INSTANCE_TYPES", &s.InstanceTypes, &fs.InstanceTypes},
		{"job-retention", "QSHARE_JOB_RETENTION", &s.JobRetention, &fs.JobRetention}, {"run-as", "QSHARE_RUN_AS", &s.RunAs, &fs.RunAs},
		{"metrics", "QSHARE_METRICS", &s.Metrics, &fs.Metrics}, {"slurm-config", "QSHARE_SLURM_CONFIG", &s.SlurmConfig, &fs.SlurmConfig},
		{"advertise-addr", "QSHARE_ADVERTISE_ADDR", &s.AdvertiseAddr, &fs.AdvertiseAddr}, {"leader-lease", "QSHARE_LEADER_LEASE", &s.LeaderLease, &fs.LeaderLease},
		{"kubeconfig", "QSHARE_KUBECONFIG", &s.Kubeconfig, &fs.Kubeconfig}, {"namespace", "QSHARE_NAMESPACE", &s.Namespace, &fs.Namespace},
		{"kube-config", "QSHARE_KUBE_CONFIG", &s.KubeConfig, &fs.KubeConfig}, {"s3-endpoint", "QSHARE_S3_ENDPOINT", &s.S3Endpoint, &fs.S3Endpoint},
		{"s3-abort-idle-uploads", "QSHARE_S3_ABORT_IDLE_UPLOADS", &s.S3AbortIdleUploads, &fs.S3AbortIdleUploads},
		{"sim-duration", "QSHARE_SIM_DURATION", &s.SimDuration, &fs.SimDuration}, {"cgroup-root", "QSHARE_CGROUP_ROOT", &s.CgroupRoot, &fs.CgroupRoot},
		{"container-host", "QSHARE_CONTAINER_HOST", &s.ContainerHost, &fs.ContainerHost}, {"pull", "QSHARE_PULL", &s.Pull, &fs.Pull},
	} {
		if v, ok := os.LookupEnv(e.env); ok {
			*e.dst = v
		}
		if f.Changed(e.flag) {
			*e.dst = *e.given
		}
	}
	resolveGuardSettings(cmd, &s.Guard)
	if f.Changed("executor") && s.Executors != "" {
		return s, errors.New("--executor and --executors both name the executors: give one (--executors FILE names each executor with its kind)")
	}
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
	for flag, e := range map[string]struct{ dst, given *int }{
		"max-quota-shares-per-queue": {&s.MaxSharesPerQueue, &fs.MaxSharesPerQueue},
		"max-connections":            {&s.MaxConnections, &fs.MaxConnections},
		"max-connections-per-peer":   {&s.MaxConnectionsPerPeer, &fs.MaxConnectionsPerPeer},
		"audit-max-mb":               {&s.Guard.AuditMaxMB, &fs.Guard.AuditMaxMB},
	} {
		if f.Changed(flag) {
			*e.dst = *e.given
		}
	}
	return s, nil
}

var guardFlags struct {
	allowOrigins, allowHosts []string
	auth, audit              string
}

func init() {
	f := serveCmd.Flags()
	f.StringArrayVar(&guardFlags.allowOrigins, "allow-origin", nil, "also serve browsers the pages of `ORIGIN` (scheme://host[:port]); repeatable. By default only the server's own pages may call it (docs/security.md)")
	f.StringVar(&guardFlags.auth, "auth", "", "turn authentication on: every request must carry an AWS Signature Version 4 of an access key in `FILE` (YAML or JSON, mode 600), and its principal's policies must allow it; reloaded on SIGHUP (docs/security.md)")
	f.StringVar(&guardFlags.audit, "audit", "", "append one JSON line per mutating request and per refused request (time, principal, source, action, resource, outcome, request ID) to `FILE`, made durable before the response (docs/security.md)")
	f.StringArrayVar(&guardFlags.allowHosts, "allow-host", nil, "also answer to `NAME` in the Host header (NAME: on any port, NAME:PORT: on that one), as behind a proxy; repeatable. By default only the listen address (loopback: localhost, 127.0.0.1, [::1]), against DNS rebinding")
}

// resolveGuardSettings layers QSHARE_ALLOW_ORIGIN and QSHARE_ALLOW_HOST
// (comma-separated) and then the flags over what the config file said.
func resolveGuardSettings(cmd *cobra.Command, g *server.GuardSettings) {
	for _, e := range []struct {
		flag, env string
		dst       *server.NameList
		given     []string
	}{
		{"allow-origin", "QSHARE_ALLOW_ORIGIN", &g.AllowOrigins, guardFlags.allowOrigins},
		{"allow-host", "QSHARE_ALLOW_HOST", &g.AllowHosts, guardFlags.allowHosts},
	} {
		if v, ok := os.LookupEnv(e.env); ok {
			*e.dst = server.JoinNames(strings.Split(v, ","))
		}
		if cmd.Flags().Changed(e.flag) {
			*e.dst = server.JoinNames(e.given)
		}
	}
	if v, ok := os.LookupEnv("QSHARE_AUTH"); ok {
		g.Auth = v
	}
	if cmd.Flags().Changed("auth") {
		g.Auth = guardFlags.auth
	}
	if v, ok := os.LookupEnv("QSHARE_AUDIT"); ok {
		g.Audit = v
	}
	if cmd.Flags().Changed("audit") {
		g.Audit = guardFlags.audit
	}
	resolveTLSSettings(cmd.Flags(), g)
}

var tlsFlags struct{ cert, key string }

func init() {
	f := serveCmd.Flags()
	f.StringVar(&tlsFlags.cert, "tls-cert", "", "serve HTTPS with the certificate (chain) in PEM `FILE`, read again with --tls-key on SIGHUP; with --tls-key, and with --auth, --addr may be a non-loopback address (docs/security.md)")
	f.StringVar(&tlsFlags.key, "tls-key", "", "the private key of --tls-cert, a PEM `FILE`")
}

// resolveTLSSettings layers QSHARE_TLS_CERT and QSHARE_TLS_KEY, then the
// flags, over the config file's tlsCert and tlsKey.
func resolveTLSSettings(f interface{ Changed(string) bool }, g *server.GuardSettings) {
	for _, e := range []struct {
		flag, env string
		dst       *string
		given     string
	}{{"tls-cert", "QSHARE_TLS_CERT", &g.TLSCert, tlsFlags.cert}, {"tls-key", "QSHARE_TLS_KEY", &g.TLSKey, tlsFlags.key}} {
		if v, ok := os.LookupEnv(e.env); ok {
			*e.dst = v
		}
		if f.Changed(e.flag) {
			*e.dst = e.given
		}
	}
}
