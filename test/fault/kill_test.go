package fault

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare/internal/longtest"
	"qshare/internal/soak"
)

// TestKill9 kills the server with SIGKILL at random moments (20 times,
// QSHARE_KILLS to choose; in .ci/run's long step only) while clients submit checkpointing jobs,
// change priorities, terminate jobs and change a share's limit. After each
// restart every acknowledged submit and termination must be there; at the
// end every job must have finished as it should, no job may have run two
// attempts at once, and the event log must keep the guarantees.
func TestKill9(t *testing.T) {
	longtest.Only(t, "kills at random moments under load; in the README's command TestFailoverExecutors and TestEventLogReconciles here, and test/processe2e's TestKillAndRecover, kill the server with SIGKILL and check what it recovers")
	parallelBinary(t)
	kills := 20
	if v := os.Getenv("QSHARE_KILLS"); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QSHARE_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (QSHARE_SEED to repeat the kill moments)", seed)
	r := rand.New(rand.NewPCG(seed, 1))

	root := t.TempDir()
	data := filepath.Join(root, "data")
	traces := filepath.Join(root, "traces")
	os.MkdirAll(traces, 0o755)
	events := filepath.Join(root, "events.jsonl")
	ctx := context.Background()

	srv := startServer(t, data, "--events", events)
	applyConfig(t, srv.Endpoint, soak.FleetConfig(2))
	w := soak.NewWorkload(traces, 2)

	for k := 0; k < kills; k++ {
		c := client(srv.Endpoint)
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for s := 0; s < 3; s++ {
			rs := rand.New(rand.NewPCG(r.Uint64(), uint64(s)))
			wg.Go(func() {
				for wctx.Err() == nil {
					w.Submit(wctx, c, rs)
					sleepCtx(wctx, time.Duration(300+rs.IntN(500))*time.Millisecond)
				}
			})
		}
		rm := rand.New(rand.NewPCG(r.Uint64(), 99))
		wg.Go(func() {
			for wctx.Err() == nil {
				w.Mutate(wctx, c, rm, true)
				sleepCtx(wctx, time.Duration(50+rm.IntN(150))*time.Millisecond)
			}
		})
		time.Sleep(time.Duration(300+r.IntN(1500)) * time.Millisecond)
		srv.Kill() // requests in flight now fail, unacknowledged
		cancel()
		wg.Wait()

		srv = startServer(t, data, "--events", events)
		c = client(srv.Endpoint)
		if err := w.LearnLimit(ctx, c); err != nil {
			t.Fatalf("after kill %d: %v", k+1, err)
		}
		if err := w.CheckAcked(ctx, c); err != nil {
			t.Fatalf("after kill %d: %v", k+1, err)
		}
		w.CloseWindows()
		if _, vs := checkEventsPrefix(t, w, events); len(vs) > 0 {
			t.Fatalf("after kill %d, the event log so far breaks the guarantees:\n%s", k+1, strings.Join(vs, "\n"))
		}
	}

	c := client(srv.Endpoint)
	all, err := soak.WaitAllDone(ctx, c, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w.CloseWindows()
	o, problems := w.CheckFinal(ctx, c, all)
	for _, p := range problems {
		t.Error(p)
	}
	srv.Stop()
	sum, vs := checkEvents(t, w, events)
	for _, v := range vs {
		t.Error("event log: " + v)
	}
	st := w.Stats()
	t.Logf("%d kills; %d submits sent, %d acknowledged jobs, %d stored; %d succeeded, %d failed (%d terminated); %d resumes from a checkpoint, %d jobs ran their last step twice; %d priority updates, %d terminations, %d limit changes sent",
		kills, st.Submits, st.Acknowledged, o.Jobs, o.Succeeded, o.Failed, o.Terminated, o.Resumes, o.Reruns, st.PriorityOps, st.TermOps, st.LimitOps)
	t.Logf("event log: %d lines, %d starts, %d preemptions, %d finishes, %d failures; %d violations in windows of known limit", sum.Lines, sum.Starts, sum.Preempts, sum.Finishes, sum.Fails, len(vs))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
