package process

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"qshare/data"
)

// SupervisorEnv is the environment variable that turns a binary into the
// supervisor of a process executor: its value is the executor's data
// directory. The executor re-executes its own binary (Options.Supervisor)
// with it set, once, and sends it every attempt to run.
const SupervisorEnv = "QSHARE_SUPERVISE"

// DefaultCgroupRoot is where the supervisor looks for the cgroup hierarchy
// that attempts' cgroups are made in, unless Options.CgroupRoot names
// another place (see cgroup_linux.go).
const DefaultCgroupRoot = "/sys/fs/cgroup"

// cgroupRootEnv carries Options.CgroupRoot to the supervisor, which
// removes it from its environment before it starts anything.
const cgroupRootEnv = "QSHARE_CGROUP_ROOT"

// MaybeSupervise runs the supervisor and exits the process if SupervisorEnv
// is set, runs the data wrapper of a job's program if data.WrapEnv is
// (data.MaybeRun), and returns at once otherwise. Every binary that creates a process
// executor must call it first thing: qshare's main does, through an init
// function, and a test binary does in TestMain.
//
// Jobs never see SupervisorEnv: the executor builds their environment
// without it (the server's QSHARE_* variables are never passed, and a
// payload that sets it is refused), and the supervisor removes it from its
// own environment before it starts anything.
func MaybeSupervise() {
	data.MaybeRun() // the wrapper of a job's program (dataWrap) is this binary too
	if dir := os.Getenv(SupervisorEnv); dir != "" {
		// Nothing the supervisor was started with reaches a job, whoever
		// started it.
		CloseInheritedOnExec()
		os.Unsetenv(SupervisorEnv)
		os.Exit(Supervise(dir))
	}
}

// Files of an attempt directory.
const (
	// fileLaunched is the attempt's record, created exclusively by the
	// supervisor before it forks the job: one JSON object a line, the
	// launchRecord, then {"started":…} after the fork, then {"exit":…} when
	// the job's processes are all gone (see records.go).
	fileLaunched = "launched"
	fileStop     = "stop.json"      // a stop request: written by the executor before it signals
	fileSupLog   = "supervisor.log" // the supervisor's own errors, in the data directory
	fileOutput   = "output.log"     // the job's stdout and stderr

	// Written by versions before the record held them all, and still read:
	fileConfig  = "supervisor.json" // what to run: written by the executor before the launch
	fileStarted = "started.json"    // the job's and the supervisor's identities, after the fork
	fileExit    = "exit.json"       // how the job ended
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
	// User is whom the job runs as (--run-as); nil: the supervisor's user.
	User *jobUser `json:"user,omitempty"`
	// OptML is the job's directory, to bind at /opt/ml in a mount
	// namespace of the attempt's own (see optml_linux.go); "": none.
	OptML string `json:"optml,omitempty"`
}

// started is the content of started.json.
type started struct {
	Supervisor identity  `json:"supervisor"`
	Job        identity  `json:"job"`
	At         time.Time `json:"at"`
}

// stopRequest is the content of stop.json: a stop asked for At, whose
// grace period is Grace. The Slurm and container executors keep the same
// record of their attempts' stops (Beneath.KeepStop).
type stopRequest struct {
	Grace time.Duration `json:"grace"`
	At    time.Time     `json:"at"`
}

// left is the grace period that the stop has left at now: its deadline
// (At and Grace, or def where Grace is not set) less now, at least zero.
// A record without At (a stop.json of an older version) has all of it.
func (r stopRequest) left(now time.Time, def time.Duration) time.Duration {
	g := r.Grace
	if g <= 0 {
		g = def
	}
	if r.At.IsZero() {
		return g
	}
	return max(0, r.At.Add(g).Sub(now))
}

// keepStop records at path a stop with the given grace period, asked for
// now, unless a stop is recorded there already, and returns the grace
// period that the recorded stop has left. A stop asked for again (the
// daemon issues it again after a restart, with a grace of its own) so
// keeps the deadline that the first one set: the server's restart does not
// give the job a grace period anew.
//
// A record is taken only if it is the server's own file (its owner the
// server's user, checked on the descriptor it is read from): in an
// attempt's directory that belongs to the job's user (the Slurm
// executor's), the user could have put one there with a deadline of its
// choosing, so as never to be killed. Another's record is replaced.
func keepStop(fs dataFS, path string, grace time.Duration, now time.Time) (time.Duration, error) {
	if f, err := fs.OpenFile(path, os.O_RDONLY, 0); err == nil {
		var prev stopRequest
		own := false
		if st, err := f.Stat(); err == nil {
			sys, _ := st.Sys().(*syscall.Stat_t)
			own = sys != nil && int(sys.Uid) == os.Geteuid()
		}
		ok := own && json.NewDecoder(io.LimitReader(f, 4096)).Decode(&prev) == nil && !prev.At.IsZero()
		f.Close()
		if ok {
			return prev.left(now, grace), nil
		}
	}
	return grace, writeJSONAtomic(fs, path, stopRequest{Grace: grace, At: now.UTC()})
}

// exitRecord is the content of exit.json.
type exitRecord struct {
	ExitCode int       `json:"exitCode"`
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason"`
	Stopped  bool      `json:"stopped,omitempty"`
	At       time.Time `json:"at"`
}

// The supervisor's replies to a start request.
const (
	replyStarted = "started" // the job runs; started.json is written
	replyExited  = "exited"  // the job could not start; exit.json is written
	replyAlready = "already" // another supervisor launched this attempt
)

// request is one line the executor writes to the supervisor's stdin.
type request struct {
	Op  string `json:"op"` // "start" or "stop"
	Dir string `json:"dir"`
	// Config is what a start runs. It travels with the request instead of
	// through a file: the launch record keeps what recovery needs of it.
	// Without it (an older executor), the supervisor reads supervisor.json.
	Config *supervisorConfig `json:"config,omitempty"`
}

// event is one line the supervisor writes to its stdout.
type event struct {
	Dir   string `json:"dir"`
	Event string `json:"event"` // replyStarted, replyExited, replyAlready, "error", or eventEnded
	Msg   string `json:"msg,omitempty"`
	// Started and Exit carry what the supervisor appended to the attempt's
	// record (replyStarted; replyExited and eventEnded), so that the
	// executor need not read it back.
	Started *started    `json:"started,omitempty"`
	Exit    *exitRecord `json:"exit,omitempty"`
}

// eventEnded says an attempt's processes are all gone and exit.json is written.
const eventEnded = "ended"

// supervisor is the state of the supervisor process.
type supervisor struct {
	self    identity
	dataDir string
	fs      dataFS
	logf    func(format string, args ...any)

	outMu sync.Mutex
	out   *bufio.Writer

	mu       sync.Mutex
	jobs     map[string]*supJob // by attempt directory
	byPID    map[int]*supJob
	draining bool // stdin is closed: no new jobs; exit when none is left
	kick     chan struct{}
	idle     chan struct{} // closed when draining and no job is left

	// cgroups is where attempts' cgroups are made (see cgroup_linux.go);
	// noCg is why attempts get no cgroup (nil: they do), warned about once.
	cgroups *cgroupHost
	noCg    error
	warned  bool
}

// supJob is one attempt the supervisor runs.
type supJob struct {
	dir    string
	cfg    supervisorConfig
	pid    int // leader, and its process group
	log    *rotatingLog
	rec    *os.File // the attempt's record (launched), open for appending
	copied chan struct{}

	leaderDone chan struct{}
	status     syscall.WaitStatus
	cg         *attemptCgroup // nil: contained by its process group only

	// guarded by supervisor.mu
	stopping bool
	killed   bool
	timer    *time.Timer
}

// Supervise runs the supervisor process and returns its exit code. It reads
// start and stop requests, one JSON object a line, from stdin, and reports on
// stdout. When stdin closes (the server exited or was killed), it takes no
// new jobs and exits once the ones it runs have ended. SIGUSR1 makes it look
// for stop.json in the directories of its attempts: that is how a restarted
// server, which has no pipe to it, stops an attempt it recovered.
//
// It is a child subreaper, so descendants of its jobs that lose their parent
// become its children and are reaped. An attempt has ended when its process
// group is empty: the leader exited and every process left in the group is
// gone (killed at once after a natural exit, like a container whose init
// exits; given the rest of the grace period during a stop).
func Supervise(dataDir string) int {
	if !filepath.IsAbs(dataDir) {
		fmt.Fprintf(os.Stderr, "qshare: %s=%q is not the absolute path of a data directory; the supervisor does not start\n", SupervisorEnv, dataDir)
		return 2
	}
	cgroupRoot := os.Getenv(cgroupRootEnv)
	os.Unsetenv(cgroupRootEnv)
	fs := newDataFS(dataDir)
	logPath := filepath.Join(dataDir, fileSupLog)
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if f, err := fs.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
			fmt.Fprintf(f, "%s supervisor %d: %s\n", time.Now().UTC().Format(time.RFC3339Nano), os.Getpid(), fmt.Sprintf(format, args...))
			f.Close()
		}
	}
	// Handlers, not SIG_IGN: handlers are reset by exec, so jobs start with
	// default dispositions. A closed stdout, a terminal or a stray SIGTERM
	// must not end the supervisor while it runs jobs.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGUSR1)
	if err := becomeSubreaper(); err != nil {
		logf("cannot become a child subreaper: %v", err)
		return 2
	}
	self, err := identify(os.Getpid())
	if err != nil {
		logf("cannot read my own start time: %v", err)
		return 2
	}
	s := &supervisor{self: self, dataDir: dataDir, fs: fs, logf: logf, out: bufio.NewWriter(os.Stdout), jobs: map[string]*supJob{}, byPID: map[int]*supJob{},
		kick: make(chan struct{}, 1), idle: make(chan struct{})}
	if s.cgroups, s.noCg = openCgroups(cgroupRoot); s.noCg == nil && os.Geteuid() != 0 {
		s.noCg = errors.New("the supervisor does not run as root")
	}
	go s.reap()
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGUSR1 {
				s.scanStops()
			}
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	// A start request carries the job's whole environment: allow far more
	// than any environment (a line too long would end the loop, as if the
	// server had gone).
	in.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			logf("bad request %q: %v", in.Text(), err)
			continue
		}
		switch r.Op {
		case "start":
			go s.start(r.Dir, r.Config)
		case "stop":
			go s.stopFromFile(r.Dir)
		}
	}
	if err := in.Err(); err != nil {
		logf("reading requests: %v; taking no more jobs", err)
	}
	s.mu.Lock()
	s.draining = true
	if len(s.jobs) == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	<-s.idle
	if s.noCg == nil {
		s.cgroups.removeParent(dataDir)
	}
	return 0
}

func (s *supervisor) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

func (s *supervisor) emit(ev event) {
	b, _ := json.Marshal(ev)
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.out.Write(append(b, '\n'))
	s.out.Flush() // fails once the server is gone; that is fine
}

// reap waits for every child: job leaders, and orphans adopted as subreaper.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: no child now; wait for the next fork
			<-s.kick
			continue
		}
		s.mu.Lock()
		j := s.byPID[pid]
		delete(s.byPID, pid)
		s.mu.Unlock()
		if j != nil {
			j.status = ws
			close(j.leaderDone)
		}
	}
}

func (s *supervisor) start(dir string, cfgp *supervisorConfig) {
	reply := func(ev string, msg string) { s.emit(event{Dir: dir, Event: ev, Msg: msg}) }
	var cfg supervisorConfig
	if cfgp != nil {
		cfg = *cfgp
	} else if err := readJSON(s.fs, filepath.Join(dir, fileConfig), &cfg); err != nil {
		s.logf("cannot read %s: %v", filepath.Join(dir, fileConfig), err)
		reply("error", err.Error())
		return
	}
	if s.isDraining() {
		reply("error", "the supervisor is shutting down")
		return
	}
	// Who launches it, so that a server that recovers the attempt from its
	// directory alone knows whom to ask before the job is recorded, and what
	// the attempt holds. The same file gets the job's identity and its end.
	lr := launchRecord{Supervisor: s.self, At: time.Now().UTC(), Dir: dir, GPUs: cfg.GPUs, JobGrace: cfg.JobGrace}
	live := ""
	if cfg.AttemptID != "" && pathComponent("attempt ID", cfg.AttemptID) == nil {
		live = filepath.Join(s.dataDir, dirLive, cfg.AttemptID)
	}
	rec, err := createRecord(s.fs, dir, lr, live)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			reply(replyAlready, "")
			return
		}
		reply("error", err.Error())
		return
	}
	fail := func(reason string) {
		x := exitRecord{ExitCode: 127, Reason: reason, At: time.Now().UTC()}
		err := appendRecord(rec, recordLine{Exit: &x})
		rec.Close()
		if err != nil {
			s.logf("cannot record the end of %s: %v", dir, err)
			reply("error", err.Error())
			return
		}
		s.emit(event{Dir: dir, Event: replyExited, Exit: &x})
	}
	log := openRotatingLog(s.fs, cfg.Log, cfg.LogMaxBytes, cfg.LogKeep) // created at the job's first output
	// A job of another user is looked for by the kernel as that user (see
	// forkAs): the supervisor, often root, never stats a path for it.
	path, cands, err := locate(cfg)
	if err != nil {
		log.Close()
		fail(fmt.Sprintf("CannotStartError: %v", err))
		return
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		log.Close()
		fail(fmt.Sprintf("CannotStartError: %v", err))
		return
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		log.Close()
		fail(fmt.Sprintf("CannotStartError: %v", err))
		return
	}
	j := &supJob{dir: dir, cfg: cfg, log: log, rec: rec, copied: make(chan struct{}), leaderDone: make(chan struct{})}
	// Hold the lock across the fork, so the reaper cannot reap the leader
	// before it is registered under its pid.
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		pr.Close()
		pw.Close()
		log.Close()
		rec.Close()
		// It never ran: a later start may run it.
		if live != "" {
			s.fs.Remove(live)
		}
		s.fs.Remove(filepath.Join(dir, fileLaunched))
		reply("error", "the supervisor is shutting down")
		return
	}
	attr := jobAttr(cfg, devnull, pw)
	j.cg = s.enterCgroup(cfg.AttemptID, attr.Sys)
	pid, path, err := s.fork(cfg, path, cands, attr)
	s.leaveCgroup(j.cg)
	if err == nil {
		j.pid = pid
		s.jobs[dir] = j
		s.byPID[pid] = j
	}
	s.mu.Unlock()
	pw.Close()
	if err != nil {
		pr.Close()
		log.Close()
		if j.cg != nil {
			// Nothing was forked into it.
			if rerr := j.cg.remove(); rerr != nil {
				s.logf("%s: removing the cgroup of an attempt that did not start: %v", dir, rerr)
			}
		}
		if errors.Is(err, errUnseen) {
			fail(fmt.Sprintf("CannotStartError: %v", err))
		} else {
			fail(fmt.Sprintf("CannotStartError: cannot run %s: %v", path, err))
		}
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	job, err := identify(pid)
	if err != nil {
		job = identity{PID: pid, BootID: bootIDOnce} // it cannot be gone: it is not reaped yet
	}
	sr := started{Supervisor: s.self, Job: job, At: time.Now().UTC()}
	if err := appendRecord(rec, recordLine{Started: &sr}); err != nil {
		s.logf("cannot record the start of %s: %v", dir, err)
	}
	go func() {
		defer close(j.copied)
		if _, err := io.Copy(log, pr); err != nil {
			s.logf("%s: copying the job's output: %v", dir, err)
			io.Copy(io.Discard, pr) // keep draining, so the job never blocks on a full pipe
		}
		pr.Close()
	}()
	s.emit(event{Dir: dir, Event: replyStarted, Started: &sr})
	// A stop may have been asked for while it started.
	if s.fs.Exists(filepath.Join(dir, fileStop)) {
		s.stopFromFile(dir)
	}
	s.watch(j)
}

// locate finds cfg's program: for a job of another user, the candidates
// that the kernel tries as that user (see forkAs); else its path.
func locate(cfg supervisorConfig) (path string, cands []string, err error) {
	if asOther := cfg.User != nil && cfg.User.UID != uint32(os.Geteuid()); asOther {
		cands, err = candidates(cfg.Command, cfg.Env, cfg.Dir)
		return "", cands, err
	}
	path, err = lookPath(cfg.Command, cfg.Env, cfg.Dir)
	return path, nil, err
}

// jobAttr is how cfg's command is started: in a process group of its
// own, as the job's user, in the job's directory, its stdin devnull and
// its stdout and stderr out.
func jobAttr(cfg supervisorConfig, devnull, out *os.File) *syscall.ProcAttr {
	sys := &syscall.SysProcAttr{Setpgid: true}
	if u := cfg.User; u != nil {
		// Set before the chdir to the job's directory, which is then
		// entered with the job's rights, not the supervisor's.
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	return &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []uintptr{devnull.Fd(), out.Fd(), out.Fd()},
		Sys:   sys,
	}
}

// fork starts cfg's command, found by locate (path or cands), with attr,
// and returns its pid and the path that ran.
func (s *supervisor) fork(cfg supervisorConfig, path string, cands []string, attr *syscall.ProcAttr) (pid int, _ string, err error) {
	switch {
	case cfg.OptML != "":
		if cands == nil {
			cands = []string{path}
		}
		return s.forkOptML(cfg, cands, attr)
	case cands != nil:
		pid, path, err = forkAs(cands, cfg.Command, attr)
	default:
		pid, err = syscall.ForkExec(path, cfg.Command, attr)
	}
	return pid, path, err
}

// watch waits for the end of j's process group and records it.
func (s *supervisor) watch(j *supJob) {
	<-j.leaderDone
	s.mu.Lock()
	stopping := j.stopping
	s.mu.Unlock()
	if !stopping {
		syscall.Kill(-j.pid, syscall.SIGKILL)
		if j.cg != nil {
			if err := j.cg.kill(); err != nil {
				s.logf("%s: %v", j.dir, err)
			}
		}
	}
	for d := time.Millisecond; syscall.Kill(-j.pid, 0) == nil; d = min(2*d, 50*time.Millisecond) {
		time.Sleep(d)
	}
	s.killStrays(j)
	if j.cg != nil {
		// Whatever left the group ends with the attempt.
		if err := j.cg.kill(); err != nil {
			s.logf("%s: %v", j.dir, err)
		}
		if err := j.cg.remove(); err != nil {
			s.logf("%s: removing the attempt's cgroup: %v", j.dir, err)
		}
	}
	s.mu.Lock()
	if j.timer != nil {
		j.timer.Stop()
	}
	stopping, killed := j.stopping, j.killed
	s.mu.Unlock()
	select {
	case <-j.copied:
	case <-time.After(5 * time.Second):
		s.logf("%s: the job's output pipe is still open after its process group ended; closing the log", j.dir)
	}
	var uploadErr string
	if killed {
		uploadErr = s.uploadAfterKill(j)
	}
	j.log.Close()

	rec := exitRecord{Stopped: stopping, At: time.Now().UTC()}
	switch ws := j.status; {
	case ws.Exited():
		rec.ExitCode = ws.ExitStatus()
		rec.Reason = fmt.Sprintf("Essential process exited with code %d", rec.ExitCode)
	case ws.Signaled():
		rec.ExitCode = -1
		rec.Signal = signalName(ws.Signal())
		rec.Reason = "Essential process terminated by signal " + rec.Signal
		if killed && ws.Signal() == syscall.SIGKILL {
			rec.Reason = data.KilledReason
		}
	default:
		rec.ExitCode = -1
		rec.Reason = "Essential process ended in an unknown way"
	}
	if rec.ExitCode != 0 || rec.Signal != "" {
		if line := firstLine(s.fs, j.cfg.FailureFile); line != "" {
			rec.Reason = line
		}
	}
	rec.Reason = data.AfterKillReason(rec.Reason, uploadErr)
	if err := appendRecord(j.rec, recordLine{Exit: &rec}); err != nil {
		s.logf("%s: cannot record the end in %s: %v", j.dir, fileLaunched, err)
	}
	j.rec.Close()
	s.emit(event{Dir: j.dir, Event: eventEnded, Exit: &rec})
	s.mu.Lock()
	delete(s.jobs, j.dir)
	if s.draining && len(s.jobs) == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// killStrays kills what is left of j outside its process group: processes
// that left the group (setsid, a double fork) and, once their parent died,
// became the supervisor's children (it is a subreaper). They are told apart
// from other jobs' processes by the QSHARE_ATTEMPT_ID in their environment.
func (s *supervisor) killStrays(j *supJob) {
	mark := []byte("\x00" + "QSHARE_ATTEMPT_ID=" + j.cfg.AttemptID + "\x00")
	for round := 0; round < 100; round++ {
		found := false
		for _, pid := range ownChildren() {
			s.mu.Lock()
			_, leader := s.byPID[pid]
			s.mu.Unlock()
			if leader {
				continue
			}
			env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, env...), mark) {
				continue
			}
			syscall.Kill(pid, syscall.SIGKILL)
			found = true
		}
		if !found {
			return
		}
		time.Sleep(time.Duration(round+1) * time.Millisecond) // their children come to us next
	}
	s.logf("%s: processes that left the job's process group survive SIGKILL", j.dir)
}

// ownChildren lists the supervisor's children, from every thread's
// /proc/self/task/<tid>/children.
func ownChildren() []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// stopFromFile stops the attempt in dir with the grace period of its
// stop.json: SIGTERM to its process group now, SIGKILL when the grace ends.
func (s *supervisor) stopFromFile(dir string) {
	var req stopRequest
	if err := readJSON(s.fs, filepath.Join(dir, fileStop), &req); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[dir]
	if j == nil || j.stopping {
		return
	}
	// The deadline counts from the request, not from now: a supervisor
	// that reads the file late (it was busy, or the request came again
	// after the server's restart) does not lengthen the grace period.
	grace := req.left(time.Now(), j.cfg.Grace)
	j.stopping = true
	syscall.Kill(-j.pid, syscall.SIGTERM)
	if j.cg != nil { // and what left the group
		for _, pid := range j.cg.procs() {
			if pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	}
	j.timer = time.AfterFunc(grace, func() {
		s.mu.Lock()
		j.killed = true
		s.mu.Unlock()
		syscall.Kill(-j.pid, syscall.SIGKILL)
		if j.cg != nil {
			j.cg.kill()
		}
	})
}

// scanStops applies the stop.json of every running attempt not yet stopping.
func (s *supervisor) scanStops() {
	s.mu.Lock()
	var dirs []string
	for d, j := range s.jobs {
		if !j.stopping {
			dirs = append(dirs, d)
		}
	}
	s.mu.Unlock()
	for _, d := range dirs {
		s.stopFromFile(d)
	}
}

// firstLine returns the first non-empty line of the file at path, cut to 1
// KiB. The file is the job's (SM_OUTPUT_DIR/failure), read by a supervisor
// that may run as root: it is read only if it is a regular file beneath the
// data directory, reached without a link, and has no other hard link (a job
// could have linked a file that only root may read).
func firstLine(fs dataFS, path string) string {
	if path == "" {
		return ""
	}
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || nlink(st) != 1 {
		return ""
	}
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

// errUnseen is the one reason of a job of another user whose program was
// not found, or could not be run, by that user: whether a path exists
// where the user may not look, or is a directory or not executable, is
// not told apart (the supervisor, often root, could tell, and so would
// tell the user what it may not see).
var errUnseen = errors.New("no such program that the job's user may run")

// candidates returns the paths that execvp would try for the program of
// cmd, in order, with the job's PATH; a name with a slash is taken
// relative to the job's directory. It looks at no file.
func candidates(cmd []string, env []string, dir string) ([]string, error) {
	if len(cmd) == 0 || cmd[0] == "" {
		return nil, errors.New("the command is empty: set AlgorithmSpecification.ContainerEntrypoint")
	}
	name := cmd[0]
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return []string{name}, nil
	}
	var out []string
	for _, d := range filepath.SplitList(envPath(env)) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		out = append(out, filepath.Join(d, name))
	}
	return out, nil
}

// forkAs starts the job (attr.Sys carries its user's credentials) from
// the first of cands that execve accepts in the child, after the change
// of user: the kernel looks each path up with the job's rights, so the
// supervisor probes nothing as root. Paths the user cannot reach, that do
// not exist, or that it may not run are passed over, as execvp does; when
// none is left, the error wraps errUnseen, the one reason for all of them.
func forkAs(cands, argv []string, attr *syscall.ProcAttr) (int, string, error) {
	for _, p := range cands {
		pid, err := syscall.ForkExec(p, argv, attr)
		if err == nil {
			return pid, p, nil
		}
		if notThisOne(err) {
			continue
		}
		return 0, p, err
	}
	return 0, "", fmt.Errorf("cannot run %q: %w", argv[0], errUnseen)
}

// notThisOne reports whether an exec of a candidate failed in a way that
// lets the next candidate be tried, as a shell does along PATH.
func notThisOne(err error) bool {
	switch err {
	case syscall.ENOENT, syscall.ENOTDIR, syscall.EACCES, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EISDIR, syscall.EPERM, syscall.ENOEXEC:
		return true
	}
	return false
}

// envPath returns the value of PATH in env ("" without one).
func envPath(env []string) string {
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[len("PATH="):]
		}
	}
	return path
}

// lookPath finds the program of a command the way a shell would, with the
// job's PATH; a name with a slash is taken relative to the job's directory.
// It is for a job of the supervisor's own user, whose view it shares.
func lookPath(cmd []string, env []string, dir string) (string, error) {
	cands, err := candidates(cmd, env, dir)
	if err != nil {
		return "", err
	}
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
	name := cmd[0]
	if strings.Contains(name, "/") {
		if err := check(cands[0]); err != nil {
			return "", fmt.Errorf("cannot run %q: %w", name, err)
		}
		return cands[0], nil
	}
	for _, p := range cands {
		if check(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable file %q not found in PATH (%s): install it on this host or give its full path in ContainerEntrypoint", name, envPath(env))
}

// enterCgroup makes the cgroup of attempt id and sees that the job forked
// next with sys starts there, before it can fork anything itself: on v2,
// sys clones it into the cgroup; on v1, the supervisor moves into the
// cgroup (the caller holds s.mu: no other job is forked meanwhile) and
// leaveCgroup moves it back. It returns nil, and the attempt is contained
// by its process group only, where cgroups cannot be made; the first
// time, the supervisor log says why.
func (s *supervisor) enterCgroup(id string, sys *syscall.SysProcAttr) *attemptCgroup {
	if s.noCg != nil || id == "" {
		s.warnNoCgroup(s.noCg)
		return nil
	}
	cg, err := s.cgroups.newAttempt(s.dataDir, id)
	if err == nil && cg.v2 {
		cg.cloneInto(sys)
		return cg
	}
	if err == nil {
		if err = cg.enter(os.Getpid()); err != nil {
			s.leaveCgroup(cg)
			cg.remove()
		}
	}
	if err != nil {
		s.warnNoCgroup(err)
		return nil
	}
	return cg
}

// leaveCgroup moves the supervisor back to its own cgroups after a fork
// from inside cg (nothing when cg is nil).
func (s *supervisor) leaveCgroup(cg *attemptCgroup) {
	if cg == nil {
		return
	}
	if cg.v2 {
		cg.forked()
		return
	}
	for _, d := range s.cgroups.home {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			s.logf("cannot leave the attempt's cgroup for %s: %v", d, err)
		}
	}
}

// warnNoCgroup says once why attempts are contained by their process
// group only.
func (s *supervisor) warnNoCgroup(err error) {
	if s.warned || err == nil {
		return
	}
	s.warned = true
	s.logf("WARNING: attempts run without a cgroup of their own (%v): a job's processes are contained by its process group only, and one that leaves it (setsid) may outlive the attempt", err)
}
