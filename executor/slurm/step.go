package slurm

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"qshare/data"
	"qshare/executor"
	"qshare/executor/process"
)

// StepArg is the first argument with which the batch job's wrapper script
// runs the step runner on each node (srun starts it once per node): the
// executor's own binary, which must call MaybeStep first thing.
const StepArg = "__qshare_slurm_step"

// MaybeStep runs the step runner and exits when this process was started as
// one (os.Args[1] is StepArg); otherwise it returns at once. qshare's main
// and the tests' TestMain call it before anything else.
//
// The step runner is the per-node half of the SageMaker training contract:
// it reads the attempt's step.json, writes this node's
// hyperparameters.json, resourceconfig.json and inputdataconfig.json,
// sets SM_CURRENT_HOST and SM_HOSTS from the allocation, runs the job's
// command in the job's directory, and records how it ended in the attempt's
// directory. Everything it writes goes beneath the shared directory without
// following links. It keeps the environment out of any shell: values come
// from JSON, never from quoted text.
func MaybeStep() {
	data.MaybeRun() // the data wrapper that the runner puts around a job's command (wrapData) is this binary too
	if len(os.Args) >= 5 && os.Args[1] == StepArg {
		// slurmstepd's descriptors stay out of the job's command.
		process.CloseInheritedOnExec()
		os.Exit(runStep(os.Args[2], os.Args[3], os.Args[4]))
	}
}

// stepSpec is step.json: what the executor decided at Start for every node.
type stepSpec struct {
	Argv            []string          `json:"argv"`
	Env             []string          `json:"env"`
	JobDir          string            `json:"jobDir"`
	HyperParameters map[string]string `json:"hyperParameters"`
	InputData       map[string]any    `json:"inputData"`
	InstanceType    string            `json:"instanceType"`
	GPUs            int               `json:"gpus"`
	Exclusive       bool              `json:"exclusive"`
	// InBatch is true when the runner runs in the batch step (one node,
	// no srun): Slurm then signals the batch script alone (scancel
	// --batch), and the runner passes a SIGTERM on to the command's group.
	InBatch bool `json:"inBatch,omitempty"`
	// Data is the data wrapper's configuration (package data) for a job
	// whose payload names S3 channels, an S3OutputPath or checkpoints in
	// S3, as the executor planned it for instance 0; the runner makes it
	// this node's (wrapData). Its endpoint's static credentials, if any,
	// are why step.json is the job's user's alone (0600).
	Data *data.Wrapper `json:"data,omitempty"`
}

// exitRecord is exit-<host>.json: how the command ended on one node.
type exitRecord struct {
	Host     string `json:"host"`
	ExitCode int    `json:"exitCode"`
	Signal   string `json:"signal,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Upload is why the upload after a stop's kill failed (killFile).
	Upload string    `json:"upload,omitempty"`
	At     time.Time `json:"at"`
}

// killFile is the file of the attempt's directory that Stop writes at the
// end of a stop's grace period, just before it sends the step runners
// SIGCONT (a signal that a program which does not ask for it never sees):
// a runner that gets a SIGCONT while the file is there kills the
// command's process group, data wrapper and all, and the first node's
// runner then runs the wrapper alone to upload the model, the output and
// the checkpoints (data.UploadAfterKill), before it records the exit. A
// SIGCONT without the file (Slurm's resume of a suspended job) is left
// alone. Slurm's own SIGKILL (scancel --signal=KILL) would end the
// runner too, and the upload with it.
const killFile = "kill"

// stopFile is the file of the attempt's directory in which Stop records
// the stop and its grace period (process.Beneath.KeepStop), so that the
// executor of a restarted server kills the command when the first stop's
// grace period ends, not a whole one after the daemon asks again.
const stopFile = "stop.json"

// runStep is the step runner: root is the shared directory, attemptDir the
// attempt's directory inside it, hosts the allocation's nodes, one a line
// (scontrol show hostnames).
func runStep(root, attemptDir, hosts string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "qshare step: "+format+"\n", a...)
		return 70
	}
	if rel, err := filepath.Rel(root, attemptDir); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fail("the attempt's directory is not inside the shared directory")
	}
	// Every file the runner touches is in the attempt's directory, which
	// the job's user owns when the job runs as its principal's user
	// (above it, root's directories only let it pass through).
	fs := process.NewBeneath(attemptDir)
	// A stop (scancel --signal=TERM) reaches this runner as well as the
	// command in a step of srun's, and this runner alone in the batch
	// step, which passes it on; the runner stays to record the command's
	// end. A stop that comes before the command runs is passed on to it.
	term := make(chan os.Signal, 4)
	signal.Notify(term, syscall.SIGTERM)
	graceEnd := make(chan os.Signal, 4)
	signal.Notify(graceEnd, syscall.SIGCONT)
	b, err := fs.ReadFile(filepath.Join(attemptDir, "step.json"))
	if err != nil {
		return fail("reading the attempt's step.json: %v", err)
	}
	var sp stepSpec
	if err := json.Unmarshal(b, &sp); err != nil || len(sp.Argv) == 0 {
		return fail("step.json is not what the executor wrote: %v", err)
	}
	host := os.Getenv("SLURMD_NODENAME")
	if host == "" || strings.ContainsAny(host, "/\x00") {
		return fail("SLURMD_NODENAME %q does not name this node", host)
	}
	hostList := strings.Fields(hosts)
	if len(hostList) == 0 {
		hostList = []string{host}
	}
	cfgDir := filepath.Join(attemptDir, "config", host)
	if err := fs.MkdirAll(cfgDir, 0o755); err != nil {
		return fail("creating the node's config directory: %v", err)
	}
	rc := executor.NewResourceConfig(host, sp.InstanceType, hostList, "eth0")
	hp := sp.HyperParameters
	if hp == nil {
		hp = map[string]string{}
	}
	idc := sp.InputData
	if idc == nil {
		idc = map[string]any{}
	}
	for name, v := range map[string]any{"resourceconfig.json": rc, "hyperparameters.json": hp, "inputdataconfig.json": idc} {
		jb, _ := json.Marshal(v)
		if err := fs.WriteFile(filepath.Join(cfgDir, name), jb, 0o644); err != nil {
			return fail("writing %s: %v", name, err)
		}
	}
	hostsJSON, _ := json.Marshal(hostList)
	env := append([]string(nil), sp.Env...)
	env = append(env,
		"SM_CURRENT_HOST="+host,
		"SM_HOSTS="+string(hostsJSON),
		"SM_INPUT_CONFIG_DIR="+cfgDir,
		"SM_NUM_GPUS="+strconv.Itoa(sp.GPUs))
	if n := os.Getenv("SLURM_CPUS_ON_NODE"); n != "" {
		env = append(env, "SM_NUM_CPUS="+n)
	}
	// Slurm sets CUDA_VISIBLE_DEVICES where its gres plugin knows the
	// devices; a whole node's GPUs are the job's otherwise.
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		env = append(env, "CUDA_VISIBLE_DEVICES="+v)
	} else if sp.Exclusive && sp.GPUs > 0 {
		ids := make([]string, sp.GPUs)
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(ids, ","))
	}
	argv := sp.Argv
	// The first node's wrapper uploads (wrapData), after a kill too.
	uploads := sp.Data != nil && host == hostList[0] && sp.Data.Plan.Uploads()
	if sp.Data != nil {
		if argv, env, err = wrapData(*sp.Data, host, hostList, argv, env); err != nil {
			return fail("%v", err)
		}
	}
	rec := exitRecord{Host: host}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = sp.JobDir
	cmd.Stdin = nil
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	// The command leads a process group of its own, as under the process
	// executor: Slurm signals every process of the step whatever its
	// group, and the job's processes are one group to whoever looks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p := lookPathIn(argv[0], env); p != "" {
		cmd.Path = p
	}
	// The marker goes first: once the command may have printed anything,
	// Stop must know that it runs (and warn it) rather than cancel a job
	// it takes for pending. A stop that comes before the command runs is
	// passed on to it below.
	fs.WriteFileAtomic(filepath.Join(attemptDir, "started"), []byte(host+"\n")) //nolint:errcheck // Start waits no longer than StartWait without it
	if err := cmd.Start(); err != nil {
		rec.ExitCode = 127
		rec.Reason = fmt.Sprintf("CannotStartContainerError: %s: %v", sp.Argv[0], errNoPath(err))
		fmt.Fprintln(os.Stderr, rec.Reason)
	} else {
		select {
		case <-term:
			cmd.Process.Signal(syscall.SIGTERM)
		default:
		}
		var killed atomic.Bool
		go func() {
			for {
				select {
				case <-term:
					// In a step of its own (srun) Slurm signals every
					// process of the step itself; in the batch step only
					// the script, this runner.
					if sp.InBatch {
						syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) //nolint:errcheck // the group may be gone
					}
				case <-graceEnd:
					if fs.IsFile(filepath.Join(attemptDir, killFile)) {
						killed.Store(true)
						syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // the group may be gone
					}
				}
			}
		}()
		cmd.Wait()
		endStep(cmd.Process.Pid)
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			rec.ExitCode, rec.Signal = -1, signalName(ws.Signal())
		default:
			rec.ExitCode = ws.ExitStatus()
		}
		if killed.Load() && uploads {
			rec.Upload = data.UploadAfterKill(argv, env, sp.JobDir, os.Stdout)
		}
	}
	rec.At = time.Now().UTC()
	rb, _ := json.Marshal(rec)
	if err := fs.WriteFileAtomic(filepath.Join(attemptDir, "exit-"+host+".json"), rb); err != nil {
		return fail("recording the exit: %v", err)
	}
	if rec.Signal != "" {
		return 128 + int(signalNumber(rec.Signal))
	}
	return rec.ExitCode
}

// wrapData returns the command and environment that run argv on this node
// under the data wrapper, the process executor's (data.Wrap, data.Run):
// it stages this node's share of the channels (node k of the allocation's
// list is instance k) into a directory of the node's own,
// input/nodes/<host>/data/<channel> in the job's directory, which
// SM_INPUT_DIR and SM_CHANNEL_<NAME> then name, before the command starts;
// and the first node (algo-1, SageMaker's primary host) alone restores the
// checkpoints, copies them while the command runs, and uploads the model
// and the output once it has exited, since every node sees the same job
// directory. The wrapper is this binary (MaybeStep runs it), run with the
// job's rights; the endpoint and its credentials travel in its
// environment, which only the job's user and root can read, never on a
// command line.
func wrapData(w data.Wrapper, host string, hosts, argv, env []string) ([]string, []string, error) {
	k := slices.Index(hosts, host)
	if k < 0 {
		return nil, nil, fmt.Errorf("node %s is not in the allocation's list of nodes %v", host, hosts)
	}
	w.Plan.Instance, w.Plan.Instances = k, len(hosts)
	w.Plan.Dirs.Input = filepath.Join(w.Plan.Dirs.Input, "nodes", host)
	if k > 0 {
		w.Plan.Output, w.Plan.Checkpoints = nil, nil
	}
	if w.Plan.Empty() {
		return argv, env, nil
	}
	env = append(env, "SM_INPUT_DIR="+w.Plan.Dirs.Input)
	for _, c := range w.Plan.Channels {
		env = append(env, "SM_CHANNEL_"+executor.EnvName(c.Name)+"="+w.Plan.Dirs.Channel(c.Name))
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot find my own binary to run as the data wrapper: %v", err)
	}
	return data.Wrap(self, argv, env, w)
}

// lookPathIn finds name on the PATH of env, as the job's environment has
// it, so that a payload's PATH decides which program runs.
func lookPathIn(name string, env []string) string {
	if strings.Contains(name, "/") {
		return ""
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// errNoPath drops the path from an exec error for the job's reason.
func errNoPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	if ee, ok := err.(*exec.Error); ok {
		return ee.Err
	}
	return err
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

func signalNumber(name string) syscall.Signal {
	for s, n := range signalNames {
		if n == name {
			return s
		}
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(name, "SIG")); err == nil {
		return syscall.Signal(n)
	}
	return syscall.SIGKILL
}

// endStep ends what is left of the command (whose process group is pgid)
// once it has exited: under Slurm's own cgroup (proctrack/cgroup, or
// cgroup v2's slurmstepd scope), Slurm kills every process of the step
// when it ends, whatever group or session it took, and nothing is to do;
// elsewhere the command's process group is killed, as the process
// executor does without a cgroup (a process that left the group, with
// setsid, may then outlive the step: docs/security.md says so; the step's
// log, which is the job's output, is left as the job wrote it).
func endStep(pgid int) {
	if inSlurmCgroup() {
		return
	}
	syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck // the group may be gone
}

// inSlurmCgroup reports whether this process is in a cgroup that Slurm
// made for its step.
func inSlurmCgroup() bool {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) == 3 && (strings.Contains(parts[2], "/slurm/") || strings.Contains(parts[2], "slurmstepd")) {
			return true
		}
	}
	return false
}
