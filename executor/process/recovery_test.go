package process

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/gpu/gputest"
)

// The server is killed with SIGKILL after the supervisor launched an
// attempt but before the daemon saved its handle: a new executor gets only
// the attempt ID. The attempt's GPU must stay its own before anyone asks
// about it, Recover must say Running, and the job must run once.
func TestRecoverAfterAKillDuringStart(t *testing.T) {
	gputest.FakeSMI(t, 1)
	dir := t.TempDir()
	ctx := context.Background()
	s := spec("crashed", 1, payloadOf(`trap 'exit 0' TERM; echo run >> "$SM_CHECKPOINT_DIR/runs"; while :; do sleep 0.05; done`, nil))
	s.Demand = qshare.Capacity{"ml.g5.xlarge": 1}
	startInServer(t, dir, s, testServerEnv+"_SMI=1") // its handle is never saved

	e := newExecutor(t, dir, func(o *Options) { o.GPUs = nil })
	defer e.Close()
	// The daemon may start new attempts before it gets to the old one.
	other := spec("other", 1, payloadOf(`sleep 300`, nil))
	other.Demand = qshare.Capacity{"ml.g5.xlarge": 1}
	if _, err := e.Start(ctx, other); !errors.Is(err, gpu.ErrNoFreeGPUs) {
		e.Stop(ctx, other.AttemptID, time.Millisecond)
		t.Errorf("Start of another attempt = %v; want ErrNoFreeGPUs: the running attempt's GPU was given twice", err)
	}
	if r, err := e.Recover(ctx, executor.Handle{AttemptID: s.AttemptID}); r != executor.Running || err != nil {
		t.Fatalf("Recover(no state) = %v, %v; want Running", r, err)
	}
	if got := e.alloc.Held(s.AttemptID); len(got) != 1 {
		t.Errorf("the recovered attempt holds GPUs %v; want its one GPU", got)
	}
	// Stopped once its script runs (its trap set), not while the shell is
	// still starting: a SIGTERM before the trap kills it. (Its sleeps are
	// short: one forked just as the SIGTERM comes may miss it, since the
	// shell's handler is still in place until the exec.)
	waitForLog(t, filepath.Join(dir, "jobs/crashed/checkpoints/runs"), "run\n", time.Minute)
	if x, err := stopAndWait(t, e, s.AttemptID, time.Minute); err != nil || !x.Stopped || x.ExitCode != 0 {
		t.Errorf("exit after Stop = %+v, %v; want stopped with code 0", x, err)
	}
	if e.FreeGPUs() != 1 {
		t.Errorf("%d GPUs free after the end, want 1", e.FreeGPUs())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "jobs/crashed/checkpoints/runs")); string(b) != "run\n" {
		t.Errorf("the job ran %d times", strings.Count(string(b), "run"))
	}
}

// Without its live/ link (forgotten, or from an older version) an attempt
// is found by looking under every job.
func TestRecoverWithoutStateOrLink(t *testing.T) {
	dir := t.TempDir()
	s := spec("unlinked", 1, payloadOf(`sleep 300`, nil))
	startInServer(t, dir, s)
	if err := os.Remove(filepath.Join(dir, dirLive, s.AttemptID)); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, dir, nil)
	defer e.Close()
	recoverAndStop(t, e, s.AttemptID, "no state, no link")
}

// recoverAndStop checks that Recover finds attempt id, from a handle without
// state (how says what else it lacks), Running, then stops it and checks
// that it ends stopped.
func recoverAndStop(t *testing.T, e *Executor, id, how string) {
	t.Helper()
	if r, err := e.Recover(context.Background(), executor.Handle{AttemptID: id}); r != executor.Running || err != nil {
		t.Fatalf("Recover(%s) = %v, %v; want Running", how, r, err)
	}
	if x, err := stopAndWait(t, e, id, time.Second); err != nil || !x.Stopped {
		t.Errorf("exit after Stop = %+v, %v", x, err)
	}
}

// An attempt prepared but never launched is Lost, and fenced off: a
// supervisor that still held its start request, or a later Start, cannot run
// it after the daemon requeued the job.
func TestRecoverFencesANeverLaunchedAttempt(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	s := spec("fence", 1, payloadOf(`touch "`+marker+`"`, nil))
	ad := oldAttemptDir(dir, s.JobID, s.AttemptID) // as an earlier version laid it out
	os.MkdirAll(ad, 0o755)
	cfg := supervisorConfig{AttemptID: s.AttemptID, Command: []string{"/bin/sh", "-c", `touch "` + marker + `"`}, Dir: dir, Log: filepath.Join(ad, fileOutput)}
	if err := writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileConfig), cfg); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, dir, nil)
	defer e.Close()
	ctx := context.Background()
	if r, err := e.Recover(ctx, executor.Handle{AttemptID: s.AttemptID}); r != executor.Lost || err != nil {
		t.Fatalf("Recover(never launched) = %v, %v; want Lost", r, err)
	}
	if lr, err := readLaunch(newDataFS(dir), ad); err != nil || !lr.Lost {
		t.Fatalf("launched after a Lost recovery = %+v, %v; want a tombstone", lr, err)
	}
	if _, err := e.Start(ctx, s); err == nil {
		t.Errorf("Start of an attempt declared lost succeeded")
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the attempt declared lost ran")
	}
}

// The records a supervisor leaves while it launches a job: launched names
// it, started.json is not written yet.
func TestRecoverDuringTheLaunch(t *testing.T) {
	ctx := context.Background()
	prepared := func(t *testing.T, dir, id string, sup identity) string {
		ad := filepath.Join(dir, "attempts", "j", id)
		os.MkdirAll(ad, 0o755)
		writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileConfig), supervisorConfig{AttemptID: id})
		b, _ := json.Marshal(launchRecord{Supervisor: sup, At: time.Now().UTC()})
		if err := createExclusive(newDataFS(dir), filepath.Join(ad, fileLaunched), b); err != nil {
			t.Fatal(err)
		}
		return ad
	}
	t.Run("SupervisorAlive", func(t *testing.T) {
		dir := t.TempDir()
		me, _ := identify(os.Getpid()) // plays the launching supervisor
		ad := prepared(t, dir, "j-a1", me)
		e := newExecutor(t, dir, nil)
		defer e.Close()
		if r, err := e.Recover(ctx, executor.Handle{AttemptID: "j-a1"}); r != executor.Running || err != nil {
			t.Fatalf("Recover = %v, %v; want Running (its supervisor is launching it)", r, err)
		}
		// The supervisor records the job, then its end.
		writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileStarted), started{Supervisor: me, Job: me, At: time.Now().UTC()})
		writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileExit), exitRecord{ExitCode: 2, Reason: "Essential process exited with code 2", At: time.Now().UTC()})
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if x, err := e.Wait(wctx, "j-a1"); err != nil || x.ExitCode != 2 {
			t.Errorf("exit = %+v, %v; want code 2", x, err)
		}
	})
	t.Run("SupervisorDiedAfterTheFork", func(t *testing.T) {
		dir := t.TempDir()
		id := uniqueID("j") + "-a2" // findAttemptProcess looks at every process
		dead := identity{PID: 1 << 22, Start: 1, BootID: bootIDOnce}
		prepared(t, dir, id, dead)
		job := exec.Command("/bin/sh", "-c", "sleep 300")
		job.Env = append(os.Environ(), "QSHARE_ATTEMPT_ID="+id)
		job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := job.Start(); err != nil {
			t.Fatal(err)
		}
		reaped := make(chan struct{})
		go func() { job.Wait(); close(reaped) }()
		defer job.Process.Kill()
		e := newExecutor(t, dir, nil)
		defer e.Close()
		if r, err := e.Recover(ctx, executor.Handle{AttemptID: id}); r != executor.Running || err != nil {
			t.Fatalf("Recover = %v, %v; want Running (its job runs)", r, err)
		}
		if err := e.Stop(ctx, id, time.Second); err != nil {
			t.Fatal(err)
		}
		<-reaped // the job was ours; a zombie would look alive to nobody, but reap it anyway
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if x, err := e.Wait(wctx, id); err != nil || !x.Stopped || !strings.HasPrefix(x.Reason, "Lost") {
			t.Errorf("exit = %+v, %v; want stopped, reason Lost", x, err)
		}
	})
}

// A supervisor that launches the job and dies without answering: Start
// must not fail (the daemon would start another attempt beside the job); it
// adopts what was launched. One that launches nothing: Start fails, and the
// attempt is fenced off so that nothing launches it later.
func TestStartSettlesWithASupervisorThatDies(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	ctx := context.Background()
	fake := func(t *testing.T, launch bool, id string) []string {
		sc := `read line; dir=$(printf '%s' "$line" | sed 's/^{"op":"start","dir":"\([^"]*\)".*/\1/'); `
		if launch {
			sc += `if [ ! -e "$dir/launched" ]; then : > "$dir/launched"; QSHARE_ATTEMPT_ID=` + id + ` setsid sleep 300 </dev/null >/dev/null 2>&1 & fi; `
		}
		return []string{"/bin/sh", "-c", sc + "exit 0"}
	}
	t.Run("Launched", func(t *testing.T) {
		s := spec(uniqueID("dies"), 1, payloadOf(`sleep 300`, nil)) // findAttemptProcess looks at every process
		e := newExecutor(t, t.TempDir(), func(o *Options) { o.Supervisor = fake(t, true, s.AttemptID) })
		defer e.Close()
		if _, err := e.Start(ctx, s); err != nil {
			t.Fatalf("Start = %v; want the launched job adopted", err)
		}
		if x, err := stopAndWait(t, e, s.AttemptID, time.Second); err != nil || !x.Stopped {
			t.Errorf("exit = %+v, %v; want stopped", x, err)
		}
		if job, ok := findAttemptProcess(s.AttemptID); ok {
			syscall.Kill(job.PID, syscall.SIGKILL)
			t.Errorf("the job still runs after Stop and Wait")
		}
	})
	t.Run("NothingLaunched", func(t *testing.T) {
		dir := t.TempDir()
		s := spec("never", 1, payloadOf(`sleep 300`, nil))
		e := newExecutor(t, dir, func(o *Options) { o.Supervisor = fake(t, false, s.AttemptID) })
		defer e.Close()
		if _, err := e.Start(ctx, s); err == nil {
			t.Fatalf("Start with a supervisor that launches nothing succeeded")
		}
		if lr, err := readLaunch(newDataFS(dir), filepath.Join(dir, "attempts", s.AttemptID)); err != nil || !lr.Lost {
			t.Errorf("launched = %+v, %v; want a tombstone", lr, err)
		}
	})
}

// A data directory from before live/ existed is indexed at New, so its
// running attempts are re-attached (and hold their GPUs) at once.
func TestNewIndexesAnOldDataDirectory(t *testing.T) {
	dir := t.TempDir()
	s := spec("old", 1, payloadOf(`sleep 300`, nil))
	ended := spec("oldended", 1, payloadOf(`true`, nil))
	startInServer(t, dir, s)
	startInServer(t, dir, ended)
	os.RemoveAll(filepath.Join(dir, dirLive))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if readRecords(newDataFS(dir), filepath.Join(dir, "attempts", ended.AttemptID)).exit != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the short attempt did not end")
		}
	}
	e := newExecutor(t, dir, nil)
	defer e.Close()
	if _, err := os.Readlink(filepath.Join(dir, dirLive, s.AttemptID)); err != nil {
		t.Errorf("no live link for the running attempt: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, dirLive, ended.AttemptID)); err == nil {
		t.Errorf("a live link for an attempt that had ended")
	}
	e.mu.Lock()
	_, attached := e.attempts[s.AttemptID]
	e.mu.Unlock()
	if !attached {
		t.Errorf("New did not re-attach to the running attempt")
	}
	recoverAndStop(t, e, s.AttemptID, "no state")
}

// The attempt's record: the launch line, then complete lines only; a line
// still being written (no newline yet) and a line that is not JSON are
// skipped; a launched file of an earlier version (one object, no newline)
// is the launch record alone.
func TestParseRecord(t *testing.T) {
	me := identity{PID: 7, Start: 8, BootID: "b"}
	launch := `{"supervisor":{"pid":7,"start":8,"bootID":"b"},"at":"2026-01-02T03:04:05Z","dir":"/d","gpus":["g0"],"jobGrace":5}`
	started := `{"started":{"supervisor":{"pid":7,"start":8,"bootID":"b"},"job":{"pid":9,"start":10,"bootID":"b"},"at":"2026-01-02T03:04:06Z"}}`
	exit := `{"exit":{"exitCode":3,"reason":"Essential process exited with code 3","at":"2026-01-02T03:04:07Z"}}`
	cases := []struct {
		name          string
		content       string
		started, exit bool
	}{
		{"launched", launch + "\n", false, false},
		{"started", launch + "\n" + started + "\n", true, false},
		{"ended", launch + "\n" + started + "\n" + exit + "\n", true, true},
		{"end half written", launch + "\n" + started + "\n" + exit[:20], true, false},
		{"start half written", launch + "\n" + started[:30], false, false},
		{"garbage line", launch + "\n" + "{oops\n" + exit + "\n", false, true},
		{"failed to start", launch + "\n" + exit + "\n", false, true},
	}
	for _, c := range cases {
		r := parseRecord([]byte(c.content))
		if r.launch == nil || r.launch.Supervisor != me || r.launch.Dir != "/d" || len(r.launch.GPUs) != 1 || r.launch.JobGrace != 5 {
			t.Errorf("%s: launch record %+v", c.name, r.launch)
		}
		if (r.started != nil) != c.started || (r.exit != nil) != c.exit {
			t.Errorf("%s: started %v, exit %v; want %v, %v", c.name, r.started != nil, r.exit != nil, c.started, c.exit)
		}
		if r.started != nil && r.started.Job.PID != 9 {
			t.Errorf("%s: started %+v", c.name, r.started)
		}
		if r.exit != nil && r.exit.ExitCode != 3 {
			t.Errorf("%s: exit %+v", c.name, r.exit)
		}
	}
	if r := parseRecord([]byte(launch)); r.launch.Supervisor != me || r.started != nil || r.exit != nil {
		t.Errorf("a launched file of an earlier version: %+v", r)
	}
	if r := parseRecord(nil); r.launch == nil || r.launch.Supervisor.PID != 0 {
		t.Errorf("an empty launched file: %+v; want a zero launch record", r.launch)
	}
}

// An attempt that an earlier version launched under its job's directory
// (attempts/<jobID>/<attemptID>, with supervisor.json, started.json and
// exit.json) and that ended: a repeated Start reports its end and does not
// run the job again.
func TestStartAdoptsAnAttemptOfAnEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	s := spec("old", 1, payloadOf(`touch "`+marker+`"`, nil))
	ad := oldAttemptDir(dir, s.JobID, s.AttemptID)
	os.MkdirAll(ad, 0o755)
	dead := identity{PID: 1 << 22, Start: 1, BootID: bootIDOnce}
	writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileConfig), supervisorConfig{AttemptID: s.AttemptID})
	b, _ := json.Marshal(launchRecord{Supervisor: dead, At: time.Now().UTC()})
	if err := createExclusive(newDataFS(dir), filepath.Join(ad, fileLaunched), b); err != nil {
		t.Fatal(err)
	}
	writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileStarted), started{Supervisor: dead, Job: dead, At: time.Now().UTC()})
	writeJSONAtomic(newDataFS(dir), filepath.Join(ad, fileExit), exitRecord{ExitCode: 3, Reason: "Essential process exited with code 3", At: time.Now().UTC()})
	e := newExecutor(t, dir, nil)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.LogPath, ad) {
		t.Errorf("log path %s is not in the attempt's directory %s", h.LogPath, ad)
	}
	if x, err := e.Wait(ctx, s.AttemptID); err != nil || x.ExitCode != 3 {
		t.Errorf("exit = %+v, %v; want the recorded code 3", x, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the job ran again")
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts", s.AttemptID)); err == nil {
		t.Errorf("a second directory was made for the attempt")
	}
}

// uniqueID returns an ID for a job or attempt that no other test run on the
// machine uses at the same time: findAttemptProcess, like recovery, finds an
// attempt's processes by the QSHARE_ATTEMPT_ID in their environment, among
// all the machine's processes, and a test binary run beside this one (by
// another checkout, or go test -count in parallel) would otherwise have its
// jobs taken for ours.
func uniqueID(prefix string) string {
	return prefix + strconv.Itoa(os.Getpid()) + "x" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
}
