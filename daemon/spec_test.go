package daemon_test

import (
	"context"
	"reflect"
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

// checkParsed fails unless every Spec carries its payload parsed, as
// trainingjob.Parse reads it, so that the executor need not parse it.
func checkParsed(t *testing.T, specs []executor.Spec, n int) {
	t.Helper()
	if len(specs) != n {
		t.Fatalf("%d attempts started, want %d", len(specs), n)
	}
	for _, s := range specs {
		want, err := trainingjob.Parse(s.Payload)
		must(t, err)
		if s.Request == nil || !reflect.DeepEqual(s.Request, want) {
			t.Errorf("Spec.Request of %s = %+v; want %+v, the payload parsed", s.AttemptID, s.Request, want)
		}
	}
}

// TestSpecCarriesParsedPayload: the daemon hands the executor the payload
// it parsed at submit, and after a restart the one it parsed from the store.
func TestSpecCarriesParsedPayload(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingExecutor{Executor: simulated.New(simulated.Options{})}
	a := open(t, dir, rec)
	setup(t, a.d, 1, false)
	id := submit(t, a.d, "j", 0, `"QSHARE_SIM_DURATION":"1ms","QSHARE_SIM_EXIT_CODE":"0"`)
	waitFor(t, a.d, id, status(qshare.JobSucceeded), "SUCCEEDED")
	checkParsed(t, rec.started(), 1)
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
	checkParsed(t, rec.started(), 1)
}
