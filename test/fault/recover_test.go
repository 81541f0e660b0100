package fault

import (
	"context"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/process"
	"qshare/internal/soak"
)

// TestRecoverWithoutHandleState is the double run the soak found: the
// server commits a job as STARTING, calls the process executor's Start, and
// is killed before Start returns, so the attempt's executor state is never
// saved. A restarted executor is then asked to recover the attempt by its ID
// alone. The supervisor did launch it and it runs, so Recover must not
// answer Lost, or the daemon requeues the job and starts a second attempt
// beside the first (it did, until d5476c5).
func TestRecoverWithoutHandleState(t *testing.T) {
	parallelBinary(t)
	dir := t.TempDir()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	opts := process.Options{DataDir: dir, GPUs: []string{"0"}, Supervisor: []string{bin}, Logger: log}
	ex1, err := process.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	pidf := filepath.Join(dir, "pid")
	spec := executor.Spec{JobID: "job1", JobName: "job1", AttemptID: "job1-1", Attempt: 1, Queue: "q", Share: "A",
		Demand: qshare.Capacity{"ml.g5.xlarge": 1}, Payload: soak.ShellJob(`echo $$ > "$PIDF"; sleep 30`, 1, map[string]string{"PIDF": pidf})}
	if _, err := ex1.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	pid := pidsIn(t, waitFile(t, pidf, 10*time.Second))[0]
	defer func() {
		// Clean up whatever the executors left running.
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	ex1.Close() // the server goes away; the supervisor and the job stay

	ex2, err := process.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer ex2.Close()
	// What the daemon has after the crash: the attempt ID, no executor state.
	rec, err := ex2.Recover(ctx, executor.Handle{AttemptID: spec.AttemptID})
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatal("the job is not running any more; the reproduction needs it running")
	}
	if rec == executor.Lost {
		t.Errorf("Recover of a launched, running attempt without handle state says Lost: the daemon will requeue the job and run it twice at once (pid %d still runs)", pid)
	}
}
