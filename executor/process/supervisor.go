package process

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SupervisorEnv is the environment variable that turns a binary into an
// attempt's supervisor: its value is the attempt directory. The executor
// re-executes its own binary (Options.Supervisor) with it set.
const SupervisorEnv = "QSHARE_SUPERVISE"

// MaybeSupervise runs the supervisor and exits the process if SupervisorEnv
// is set, and returns at once otherwise. Every binary that creates a process
// executor must call it first thing: qshare's main does, through an init
// function, and a test binary does in TestMain.
func MaybeSupervise() {
	if dir := os.Getenv(SupervisorEnv); dir != "" {
		os.Exit(Supervise(dir))
	}
}

// Files of an attempt directory.
const (
	fileConfig   = "supervisor.json" // what to run: written by the executor
	fileLaunched = "launched"        // created (O_EXCL) by the supervisor before it forks the job
	fileStarted  = "started.json"    // the job's and the supervisor's identities
	fileStop     = "stop.json"       // a stop request: written by the executor before it signals
	fileExit     = "exit.json"       // how the job ended: written by the supervisor last
	fileSupLog   = "supervisor.log"  // the supervisor's own errors
	fileOutput   = "output.log"      // the job's stdout and stderr
)

// supervisorConfig is what the executor tells the supervisor to run.
type supervisorConfig struct {
	AttemptID   string   `json:"attemptID"`
	Command     []string `json:"command"`
	Env         []string `json:"env"`
	Dir         string   `json:"dir"`
	Log         string   `json:"log"`
	LogMaxBytes int64    `json:"logMaxBytes"`
	LogKeep     int      `json:"logKeep"`
	// Grace is the grace period of a stop that does not give one.
	Grace time.Duration `json:"grace"`
	// FailureFile is SM_OUTPUT_DIR/failure.
	FailureFile string `json:"failureFile"`
	// GPUs and JobGrace are recorded for the executor (a Start repeated
	// after a restart reads them back); the supervisor does not use them.
	GPUs     []string      `json:"gpus,omitempty"`
	JobGrace time.Duration `json:"jobGrace,omitempty"`
}

// started is the content of started.json.
type started struct {
	Supervisor identity  `json:"supervisor"`
	Job        identity  `json:"job"`
	At         time.Time `json:"at"`
}

// stopRequest is the content of stop.json.
type stopRequest struct {
	Grace time.Duration `json:"grace"`
	At    time.Time     `json:"at"`
}

// exitRecord is the content of exit.json.
type exitRecord struct {
	ExitCode int       `json:"exitCode"`
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason"`
	Stopped  bool      `json:"stopped,omitempty"`
	At       time.Time `json:"at"`
}

// Supervisor replies on its stdout, one line, once the job runs (or will not).
const (
	replyStarted = "started" // the job runs; started.json is written
	replyExited  = "exited"  // the job could not start; exit.json is written
	replyAlready = "already" // another supervisor launched this attempt
)

// Supervise runs one attempt and returns the supervisor's exit code. It is
// the body of the supervisor process; see MaybeSupervise.
//
// It makes itself a child subreaper, so every descendant of the job that
// loses its parent becomes its child, and it returns only when none is left:
// the job's processes are really gone when exit.json appears.
func Supervise(dir string) int {
	logf := func(format string, args ...any) {
		if f, err := os.OpenFile(filepath.Join(dir, fileSupLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(f, time.Now().UTC().Format(time.RFC3339Nano)+" "+format+"\n", args...)
			f.Close()
		}
	}
	reply := func(s string) {
		fmt.Fprintln(os.Stdout, s)
		os.Stdout.Close()
	}
	// Handlers, not SIG_IGN: handlers are reset by exec, so the job starts
	// with default dispositions. SIGTERM asks for a stop; the others are
	// swallowed so that a closed reply pipe or a terminal cannot end us.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)

	var cfg supervisorConfig
	if err := readJSON(filepath.Join(dir, fileConfig), &cfg); err != nil {
		logf("cannot read %s: %v", fileConfig, err)
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		logf("cannot become a child subreaper: %v", err)
		return 2
	}
	lf, err := os.OpenFile(filepath.Join(dir, fileLaunched), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			reply(replyAlready)
			return 0
		}
		logf("cannot create %s: %v", fileLaunched, err)
		return 2
	}
	lf.Close()

	self, err := identify(os.Getpid())
	if err != nil {
		logf("cannot read my own start time: %v", err)
		return 2
	}
	fail := func(reason string) int {
		rec := exitRecord{ExitCode: 127, Reason: reason, At: time.Now().UTC()}
		if err := writeJSONAtomic(filepath.Join(dir, fileExit), rec); err != nil {
			logf("cannot write %s: %v", fileExit, err)
			return 2
		}
		reply(replyExited)
		return 0
	}

	log, err := openRotatingLog(cfg.Log, cfg.LogMaxBytes, cfg.LogKeep)
	if err != nil {
		return fail(fmt.Sprintf("CannotStartError: cannot open the log file: %v", err))
	}
	path, err := lookPath(cfg.Command, cfg.Env, cfg.Dir)
	if err != nil {
		log.Close()
		return fail(fmt.Sprintf("CannotStartError: %v", err))
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(fmt.Sprintf("CannotStartError: %v", err))
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(fmt.Sprintf("CannotStartError: %v", err))
	}
	pid, err := syscall.ForkExec(path, cfg.Command, &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []uintptr{devnull.Fd(), pw.Fd(), pw.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	pw.Close()
	devnull.Close()
	if err != nil {
		pr.Close()
		log.Close()
		return fail(fmt.Sprintf("CannotStartError: cannot run %s: %v", path, err))
	}
	job, err := identify(pid)
	if err != nil {
		// It exited and was reaped already? It cannot be reaped yet: it is
		// our child and we have not waited. Record what we can.
		job = identity{PID: pid, BootID: bootIDOnce}
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileStarted), started{Supervisor: self, Job: job, At: time.Now().UTC()}); err != nil {
		logf("cannot write %s: %v", fileStarted, err)
	}
	reply(replyStarted)

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if _, err := io.Copy(log, pr); err != nil {
			logf("copying the job's output: %v", err)
			io.Copy(io.Discard, pr) // keep draining, so the job never blocks on a full pipe
		}
		pr.Close()
	}()

	type reaped struct {
		pid    int
		status syscall.WaitStatus
	}
	reaps := make(chan reaped)
	go func() {
		defer close(reaps)
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil { // ECHILD: nothing left
				return
			}
			reaps <- reaped{p, ws}
		}
	}()

	var (
		leaderDone bool
		leader     syscall.WaitStatus
		stopping   bool
		killed     bool // SIGKILL sent at the end of the grace period
		kill       <-chan time.Time
	)
	killAll := func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		for _, c := range childrenOf(os.Getpid()) {
			syscall.Kill(c, syscall.SIGKILL)
		}
	}
loop:
	for {
		select {
		case s := <-sigs:
			if s != syscall.SIGTERM || stopping || leaderDone {
				continue
			}
			stopping = true
			grace := cfg.Grace
			var req stopRequest
			if readJSON(filepath.Join(dir, fileStop), &req) == nil && req.Grace > 0 {
				grace = req.Grace
			}
			syscall.Kill(-pid, syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			killed = true
			killAll()
		case r, ok := <-reaps:
			if !ok {
				break loop
			}
			if r.pid == pid {
				leaderDone, leader = true, r.status
			}
			if leaderDone && (!stopping || killed) {
				// The essential process is gone: like a container whose
				// init exits, whatever it left behind is killed. During a
				// stop, what it left behind keeps the rest of the grace
				// period to finish its checkpoint.
				killAll()
			}
		}
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		logf("the job's output pipe is still open after every process ended; closing the log")
	}
	log.Close()

	rec := exitRecord{Stopped: stopping, At: time.Now().UTC()}
	switch {
	case leader.Exited():
		rec.ExitCode = leader.ExitStatus()
		rec.Reason = fmt.Sprintf("Essential process exited with code %d", rec.ExitCode)
	case leader.Signaled():
		rec.ExitCode = -1
		rec.Signal = signalName(leader.Signal())
		rec.Reason = "Essential process terminated by signal " + rec.Signal
		if killed && leader.Signal() == syscall.SIGKILL {
			rec.Reason = "Essential process killed by signal SIGKILL at the end of the stop grace period"
		}
	default:
		rec.ExitCode = -1
		rec.Reason = "Essential process ended in an unknown way"
	}
	if rec.ExitCode != 0 || rec.Signal != "" {
		if line := firstLine(cfg.FailureFile); line != "" {
			rec.Reason = line
		}
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileExit), rec); err != nil {
		logf("cannot write %s: %v", fileExit, err)
		return 2
	}
	return 0
}

// firstLine returns the first non-empty line of the file at path, cut to 1 KiB.
func firstLine(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			if len(l) > 1024 {
				l = l[:1024]
			}
			return l
		}
	}
	return ""
}

// lookPath finds the program of a command the way a shell would, with the
// job's PATH; a name with a slash is taken relative to the job's directory.
func lookPath(cmd []string, env []string, dir string) (string, error) {
	if len(cmd) == 0 || cmd[0] == "" {
		return "", errors.New("the command is empty: set AlgorithmSpecification.ContainerEntrypoint")
	}
	name := cmd[0]
	check := func(p string) error {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", p)
		}
		if st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not executable", p)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := check(p); err != nil {
			return "", fmt.Errorf("cannot run %q: %v", name, err)
		}
		return p, nil
	}
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[len("PATH="):]
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if check(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable file %q not found in PATH (%s): install it on this host or give its full path in ContainerEntrypoint", name, path)
}
