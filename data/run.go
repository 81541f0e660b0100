package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// WrapEnv is the environment variable that turns the qshare binary into
// the wrapper of a job's program (see Wrap and MaybeRun): its value is the
// wrapper's configuration as JSON. The wrapper removes it before it starts
// the program, and a payload cannot set it (its Environment may set no
// QSHARE_ variable).
const WrapEnv = "QSHARE_DATA_RUN"

// ProgressLine starts each line of the wrapper's progress in the job's log
// ("qshare: Downloading input data: 3.1 GB of 8.0 GB"), and StagedLine is
// the line it writes once the data is in and the program starts: an
// executor that reads the log (the process executor's PendingReason)
// knows the staging from them.
const (
	ProgressLine = "qshare: Downloading input data: "
	StagedLine   = "qshare: input data staged; starting the program"
)

// DefaultCheckpointEvery is how often the wrapper looks for changed
// checkpoint files while the program runs.
const DefaultCheckpointEvery = 10 * time.Second

// Wrapper is the wrapper's configuration.
type Wrapper struct {
	Plan     Plan     `json:"plan"`
	Endpoint Endpoint `json:"endpoint"`
	// Root is the directory the wrapper writes and reads beneath (the
	// job's directory); every path of Plan.Dirs lies beneath it.
	Root string `json:"root"`
	// FailureFile is SM_OUTPUT_DIR/failure: where the wrapper puts its
	// reason when a transfer fails, for the executor to report.
	FailureFile string `json:"failureFile"`
	// CheckpointEvery is how often checkpoints are looked at while the
	// program runs; zero means DefaultCheckpointEvery.
	CheckpointEvery time.Duration `json:"checkpointEvery,omitempty"`
	// ForwardSignals passes the SIGTERM or SIGINT the wrapper gets on to
	// the program: for a wrapper that is a container's first process,
	// which alone gets the stop (the Kubernetes executor's), where a
	// process group's stop reaches the program by itself.
	ForwardSignals bool `json:"forwardSignals,omitempty"`
	// StopGrace, with ForwardSignals, is how long the program has after
	// the first SIGTERM or SIGINT: then the wrapper kills the program's
	// process group (the program leads one of its own) and uploads the
	// model, the output and the checkpoints as after any end. A wrapper
	// that is a container's first process dies with the container at the
	// end of the pod's grace period; the Kubernetes executor makes that
	// period StopGrace and UploadAfterKillLimit, so that the program's
	// grace ends first and the upload has the rest. Zero: the wrapper
	// waits for the program, however long.
	StopGrace time.Duration `json:"stopGrace,omitempty"`
	// UploadOnly runs no program: the wrapper saves the checkpoints and
	// uploads the model and the output, as Run does after the program
	// exited (RunUpload). The process executor's supervisor runs it so
	// after a stop's grace period ended in a kill of the job's process
	// group, the first wrapper with it (UploadOnlyCommand).
	UploadOnly bool `json:"uploadOnly,omitempty"`
}

// Wrap returns the command and environment that run command under the
// wrapper: self (the qshare binary, or any binary that calls MaybeRun
// first thing) with command as its arguments, and env with WrapEnv set to
// w. The wrapper runs as the job does (same user, same process group),
// so the executor's stop reaches it and the program alike.
func Wrap(self string, command, env []string, w Wrapper) ([]string, []string, error) {
	b, err := json.Marshal(w)
	if err != nil {
		return nil, nil, err
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, WrapEnv+"=") {
			out = append(out, kv)
		}
	}
	return append([]string{self}, command...), append(out, WrapEnv+"="+string(b)), nil
}

// MaybeRun runs the wrapper and exits the process if WrapEnv is set, and
// returns at once otherwise. qshare's main calls it first thing, as it
// calls process.MaybeSupervise; so does a test binary whose executor
// wraps commands.
func MaybeRun() {
	v, ok := os.LookupEnv(WrapEnv)
	if !ok {
		return
	}
	os.Unsetenv(WrapEnv)
	var w Wrapper
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		fmt.Fprintf(os.Stderr, "qshare: %s is not a wrapper configuration: %v\n", WrapEnv, err)
		os.Exit(70)
	}
	if w.UploadOnly {
		os.Exit(RunUpload(w))
	}
	os.Exit(Run(w, os.Args[1:]))
}

// UploadOnlyCommand returns the command and environment that run the
// wrapper of a command that Wrap wrapped (command and env as Wrap
// returned them) in its UploadOnly mode: the same binary, the same
// configuration otherwise, no program. ok is false when env holds no
// wrapper configuration: the command was not wrapped.
func UploadOnlyCommand(command, env []string) (_, _ []string, ok bool) {
	if len(command) == 0 {
		return nil, nil, false
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		v, found := strings.CutPrefix(kv, WrapEnv+"=")
		if !found {
			out = append(out, kv)
			continue
		}
		var w Wrapper
		if json.Unmarshal([]byte(v), &w) != nil {
			return nil, nil, false
		}
		w.UploadOnly = true
		b, err := json.Marshal(w)
		if err != nil {
			return nil, nil, false
		}
		out = append(out, WrapEnv+"="+string(b))
		ok = true
	}
	if !ok {
		return nil, nil, false
	}
	return []string{command[0]}, out, true
}

// RunUpload is Run's last part alone: it saves w's checkpoints and
// uploads its model and output, and returns 0, or says why not on stderr
// (its last line, "qshare: " and the reason) and returns 1. It leaves the
// failure file alone: the program's reason stays the attempt's, and the
// executor that ran it adds this one.
func RunUpload(w Wrapper) int {
	fsys, err := DirFS(w.Root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "qshare: InternalServerError: %s: the job's directory: %v\n", uploadFailed, err)
		return 1
	}
	defer CloseFS(fsys)
	ctx := context.Background()
	c, err := NewClient(ctx, w.Endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "qshare: InternalServerError: "+uploadFailed+": "+err.Error())
		return 1
	}
	if err := saveAndUpload(ctx, c, c.NewCheckpointer(fsys, w.Plan), fsys, w.Plan); err != nil {
		fmt.Fprintln(os.Stderr, "qshare: "+Reason(err))
		return 1
	}
	return 0
}

// saveAndUpload saves the checkpoints that changed (k) and uploads p's
// model and output, the one even when the other fails, and returns the
// first error.
func saveAndUpload(ctx context.Context, c *Client, k *Checkpointer, fsys FS, p Plan) error {
	_, uerr := k.Save(ctx)
	if err := c.Upload(ctx, fsys, p); err != nil && uerr == nil {
		uerr = err
	}
	if p.Output != nil && uerr == nil {
		fmt.Printf("qshare: uploaded the model and output to %s\n", p.Output)
	}
	return uerr
}

// Run stages the plan's channels and checkpoints, runs command, copies
// checkpoints while it runs, and uploads the model, the output and the
// checkpoints once it has exited, whatever its exit code. It returns the
// exit code for the wrapper's process, and, when the program was ended by
// a signal, ends the wrapper by the same signal, so that the executor sees
// the program's end. A transfer that fails puts its reason in the failure
// file (unless the program failed and wrote its own) and fails the
// attempt; its progress and errors go to the job's log (stdout, stderr).
func Run(w Wrapper, command []string) int {
	if len(command) == 0 {
		fmt.Fprintln(os.Stderr, "qshare: the wrapper was given no command")
		return 70
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	var child atomic.Pointer[os.Process]
	var graceOver atomic.Bool
	killAtGrace := w.ForwardSignals && w.StopGrace > 0
	go func() {
		for first := true; ; first = false {
			sig := <-sigs
			if first {
				close(stopped) // the program got the same signal from its group's stop, or gets it here
				if killAtGrace {
					time.AfterFunc(w.StopGrace, func() {
						graceOver.Store(true)
						killGroup(child.Load())
					})
				}
			}
			if p := child.Load(); p != nil && w.ForwardSignals {
				p.Signal(sig) //nolint:errcheck // the program may have ended
			}
		}
	}()
	fsys, err := DirFS(w.Root)
	if err != nil {
		return failWith(nil, w, fmt.Sprintf("InternalServerError: %s: the job's directory: %v", downloadFailed, err), 70)
	}
	defer CloseFS(fsys)
	c, err := NewClient(ctx, w.Endpoint)
	if err != nil {
		return failWith(fsys, w, "InternalServerError: "+downloadFailed+": "+err.Error(), 70)
	}
	// A stop while the data comes in ends the staging: nothing runs.
	stageCtx, stageCancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stopped:
			stageCancel()
		case <-stageCtx.Done():
		}
	}()
	err = stageIn(stageCtx, c, fsys, w.Plan)
	stageCancel()
	select {
	case <-stopped:
		fmt.Fprintln(os.Stderr, "qshare: stopped while staging the input data; the program was not started")
		return dieBy(syscall.SIGTERM)
	default:
	}
	if err != nil {
		return failWith(fsys, w, Reason(err), 1)
	}
	fmt.Println(StagedLine)
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if killAtGrace {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed as a group at StopGrace's end
	}
	if err := cmd.Start(); err != nil {
		return failWith(fsys, w, fmt.Sprintf("CannotStartError: %v", err), 127)
	}
	child.Store(cmd.Process)
	select {
	case <-stopped:
		if w.ForwardSignals { // a stop between the staging's end and the start
			cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // the program may have ended
		}
		if graceOver.Load() {
			killGroup(cmd.Process)
		}
	default:
	}
	k := c.NewCheckpointer(fsys, w.Plan)
	keepCtx, keepCancel := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		every := w.CheckpointEvery
		if every <= 0 {
			every = DefaultCheckpointEvery
		}
		k.Keep(keepCtx, every, func(err error) { fmt.Fprintln(os.Stderr, "qshare: checkpoint upload: "+Reason(err)+" (trying again)") })
	}()
	werr := cmd.Wait()
	keepCancel()
	<-kept
	var ws syscall.WaitStatus
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		ws = st
	} else if werr != nil {
		return failWith(fsys, w, "the program's end is unknown: "+werr.Error(), 1)
	}
	// The model goes up whatever the exit: SageMaker uploads after a
	// failure and after a stop too.
	killed := graceOver.Load() && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	if killed {
		fmt.Println(AfterKillLine)
	}
	uerr := saveAndUpload(ctx, c, k, fsys, w.Plan)
	switch {
	case killed && uerr != nil:
		// The executor reads the failure file of a killed attempt for
		// this reason alone (KilledReason).
		failWith(fsys, w, AfterKillReason(KilledReason, Reason(uerr)), 1)
		return dieBy(syscall.SIGKILL)
	case ws.Signaled():
		if uerr != nil {
			fmt.Fprintln(os.Stderr, "qshare: "+Reason(uerr))
		}
		return dieBy(ws.Signal())
	case ws.ExitStatus() != 0:
		if uerr != nil {
			fmt.Fprintln(os.Stderr, "qshare: "+Reason(uerr))
		}
		return ws.ExitStatus()
	case uerr != nil:
		return failWith(fsys, w, Reason(uerr), 1)
	}
	return 0
}

// stageIn stages the plan's channels and restores its checkpoints,
// saying how far it is on stdout (ProgressLine).
func stageIn(ctx context.Context, c *Client, fsys FS, p Plan) error {
	if len(p.Channels) > 0 {
		fmt.Println("qshare: staging the input channels")
	}
	err := c.Stage(ctx, fsys, p, func(p Progress) { fmt.Println("qshare: " + p.String()) }) // ProgressLine
	if err == nil {
		err = c.RestoreCheckpoints(ctx, fsys, p)
	}
	return err
}

// RunStage is Run's first half alone, for an executor that stages apart
// from the program (the Kubernetes executor's init container, `qshare
// data stage`): it stages w's channels and restores its checkpoints
// beneath w.Root, and returns 0, or puts the reason in the failure file
// and returns 1 (70 when the wrapper cannot start at all).
func RunStage(w Wrapper) int {
	fsys, err := DirFS(w.Root)
	if err != nil {
		return failWith(nil, w, fmt.Sprintf("InternalServerError: %s: the job's directory: %v", downloadFailed, err), 70)
	}
	defer CloseFS(fsys)
	ctx := context.Background()
	c, err := NewClient(ctx, w.Endpoint)
	if err != nil {
		return failWith(fsys, w, "InternalServerError: "+downloadFailed+": "+err.Error(), 70)
	}
	if err := stageIn(ctx, c, fsys, w.Plan); err != nil {
		return failWith(fsys, w, Reason(err), 1)
	}
	fmt.Println("qshare: input data staged")
	return 0
}

// failWith says reason on stderr and in the failure file, and returns
// code.
func failWith(fsys FS, w Wrapper, reason string, code int) int {
	fmt.Fprintln(os.Stderr, "qshare: "+reason)
	if fsys != nil && w.FailureFile != "" {
		if f, err := fsys.OpenFile(w.FailureFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
			fmt.Fprintln(f, reason)
			f.Close()
		}
	}
	return code
}

// killGroup kills the process group that p leads, if p is not nil.
func killGroup(p *os.Process) {
	if p != nil {
		fmt.Fprintln(os.Stderr, "qshare: the stop's grace period has ended; killing the program")
		syscall.Kill(-p.Pid, syscall.SIGKILL) //nolint:errcheck // it may have ended
	}
}

// dieBy ends the process by sig, as the program ended; it returns an exit
// code only if that fails.
func dieBy(sig syscall.Signal) int {
	signal.Reset(sig)
	if err := syscall.Kill(os.Getpid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return 128 + int(sig)
	}
	time.Sleep(time.Second)
	return 128 + int(sig)
}
