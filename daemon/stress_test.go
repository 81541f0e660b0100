package daemon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/executor"
	"qshare/executor/simulated"
)

// checkingExecutor wraps an executor and checks, in real time, that the
// attempts it runs never hold more than limit: an attempt holds its demand
// from Start until its Wait has returned to the daemon.
type checkingExecutor struct {
	executor.Executor
	limit qshare.Capacity

	mu       sync.Mutex
	used     qshare.Capacity
	demand   map[string]qshare.Capacity
	running  map[string]string // job -> attempt, to catch two attempts of one job
	problems []string
}

func (e *checkingExecutor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	e.mu.Lock()
	if _, ok := e.demand[s.AttemptID]; !ok {
		e.demand[s.AttemptID] = s.Demand
		e.used.Add(s.Demand)
		for t, n := range e.used {
			if n > e.limit[t] {
				e.problems = append(e.problems, fmt.Sprintf("%d %s in use, limit %d (starting %s)", n, t, e.limit[t], s.AttemptID))
			}
		}
		if other, ok := e.running[s.JobID]; ok {
			e.problems = append(e.problems, fmt.Sprintf("job %s starts %s while %s runs", s.JobID, s.AttemptID, other))
		}
		e.running[s.JobID] = s.AttemptID
	}
	e.mu.Unlock()
	return e.Executor.Start(ctx, s)
}

func (e *checkingExecutor) Wait(ctx context.Context, id string) (executor.Exit, error) {
	x, err := e.Executor.Wait(ctx, id)
	if err == nil {
		e.mu.Lock()
		if d, ok := e.demand[id]; ok && d != nil {
			for t, n := range d {
				e.used[t] -= n
			}
			e.demand[id] = nil
			for job, a := range e.running {
				if a == id {
					delete(e.running, job)
				}
			}
		}
		e.mu.Unlock()
	}
	return x, err
}

// TestStressNoOverAdmission drives the daemon with a random workload of
// borrowing, reclaiming and in-share preempting jobs, random priority changes
// and terminations, and checks in real time that capacity is never over-used
// and no job runs two attempts at once, and at the end that every job
// finished.
func TestStressNoOverAdmission(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a few seconds of random load")
	}
	const g5 = "ml.g5.xlarge"
	limit := qshare.Capacity{g5: 6}
	ex := &checkingExecutor{Executor: simulated.New(simulated.Options{StopGrace: 20 * time.Millisecond}), limit: limit,
		used: qshare.Capacity{}, demand: map[string]qshare.Capacity{}, running: map[string]string{}}
	inst := open(t, t.TempDir(), ex)
	defer inst.close()
	d := inst.d
	ctx := context.Background()
	setupQueue(t, d, 6)
	borrow := int64(100)
	for _, s := range []daemon.ShareInput{
		{Name: "A", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: &borrow, InSharePreemption: qshare.Enabled},
		{Name: "B", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Enabled},
		{Name: "C", Strategy: qshare.StrategyLendAndBorrow, InSharePreemption: qshare.Disabled},
	} {
		s.Queue = "q"
		s.CapacityLimits = []qshare.CapacityLimit{{CapacityUnit: g5, MaxCapacity: 2}}
		_, err := d.CreateShare(ctx, s)
		must(t, err)
	}

	r := rand.New(rand.NewPCG(3, 4))
	var ids []string
	for i := range 300 {
		share := []string{"A", "B", "C"}[r.IntN(3)]
		prio := int64(r.IntN(5))
		p := fmt.Sprintf(`{"ResourceConfig":{"InstanceType":%q,"InstanceCount":%d},"Environment":{"QSHARE_SIM_DURATION":"%dms"}}`,
			g5, 1+r.IntN(2), 5+r.IntN(40))
		var rs *qshare.RetryStrategy
		if r.IntN(4) == 0 {
			rs = &qshare.RetryStrategy{Attempts: 2}
		}
		j, err := d.Submit(ctx, daemon.SubmitInput{Name: fmt.Sprint("j", i), Queue: "q", QuotaShare: share, ServiceJobType: "SAGEMAKER_TRAINING",
			Payload: p, Priority: &prio, RetryStrategy: rs})
		must(t, err)
		ids = append(ids, j.ID)
		switch r.IntN(12) {
		case 0:
			must(t, d.Terminate(ctx, ids[r.IntN(len(ids))], "random termination"))
		case 1, 2:
			_, err := d.UpdatePriority(ctx, ids[r.IntN(len(ids))], int64(r.IntN(5)))
			if err != nil && qshare.ErrorCodeOf(err) != qshare.ECONFLICT { // a finished job
				t.Fatal(err)
			}
		}
		if i%10 == 0 {
			time.Sleep(time.Duration(r.IntN(15)) * time.Millisecond)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for {
			j, err := d.Job(id)
			must(t, err)
			if j.Status.Terminal() {
				if j.Status == qshare.JobFailed && !j.IsTerminated {
					t.Errorf("job %s failed: %s", j.Name, j.StatusReason)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s is still %s (%s)", j.Name, j.Status, j.StatusReason)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for _, p := range ex.problems {
		t.Error(p)
	}
	preempted := 0
	for _, id := range ids {
		j, _ := d.Job(id)
		preempted += j.Preemptions
	}
	t.Logf("%d jobs finished, %d preemptions", len(ids), preempted)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
