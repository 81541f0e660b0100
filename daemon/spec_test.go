package daemon_test

import (
	"context"
	"sync"
	"testing"

	"qshare"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/trainingjob"
)

// recordingExecutor keeps the Spec of every Start.
type recordingExecutor struct {
	executor.Executor
	mu    sync.Mutex
	specs []executor.Spec
}

func (e *recordingExecutor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	e.mu.Lock()
	e.specs = append(e.specs, s)
	e.mu.Unlock()
	return e.Executor.Start(ctx, s)
}

func (e *recordingExecutor) started() []executor.Spec {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]executor.Spec(nil), e.specs...)
}

// checkPayload fails unless every Spec carries its job's payload, one the
// executor can parse, and its demand: the executor parses the payload
// itself (the daemon does not keep the parse of a waiting job).
func checkPayload(t *testing.T, specs []executor.Spec, n int) {
	t.Helper()
	if len(specs) != n {
		t.Fatalf("%d attempts started, want %d", len(specs), n)
	}
	for _, s := range specs {
		r, err := trainingjob.Parse(s.Payload)
		must(t, err)
		if _, ok := r.Environment["QSHARE_SIM_DURATION"]; !ok || len(s.Demand) == 0 {
			t.Errorf("Spec of %s: payload %q, demand %v; want the submitted payload and its demand", s.AttemptID, s.Payload, s.Demand)
		}
	}
}

// TestSpecCarriesPayload: the daemon hands the executor the payload as
// submitted, and after a restart as the store kept it.
func TestSpecCarriesPayload(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingExecutor{Executor: simulated.New(simulated.Options{})}
	a := open(t, dir, rec)
	setup(t, a.d, 1, false)
	id := submit(t, a.d, "j", 0, `"QSHARE_SIM_DURATION":"1ms","QSHARE_SIM_EXIT_CODE":"0"`)
	waitFor(t, a.d, id, status(qshare.JobSucceeded), "SUCCEEDED")
	checkPayload(t, rec.started(), 1)
	a.close()

	// A job left STARTING is started again after the restart.
	block := &blockingExecutor{Executor: simulated.New(simulated.Options{}), started: make(chan string, 1)}
	b := open(t, dir, block)
	id = submit(t, b.d, "k", 0, `"QSHARE_SIM_DURATION":"1ms"`)
	<-block.started
	waitFor(t, b.d, id, status(qshare.JobStarting), "STARTING")
	b.close()

	rec = &recordingExecutor{Executor: simulated.New(simulated.Options{})}
	c := open(t, dir, rec)
	defer c.close()
	waitFor(t, c.d, id, status(qshare.JobSucceeded), "SUCCEEDED")
	checkPayload(t, rec.started(), 1)
}
