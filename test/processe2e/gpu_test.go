package processe2e_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor/gpu/gputest"
	"qshare/internal/longtest"
)

// gpuJob prints the GPUs it was given and holds each of them, as a
// directory $LOCKS/<uuid> made with mkdir (which fails if it exists), for
// as long as it runs; a job that finds one of its GPUs held by another
// prints CONFLICT and exits 99. On SIGTERM it takes 0.3 s to "checkpoint"
// before it lets its GPUs go, so a GPU handed out before the job's end
// would be caught.
const gpuJob = `echo "gpus=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES n=$SM_NUM_GPUS attempt=$QSHARE_ATTEMPT"
` + lockGPUs + `on_term() { sleep 0.3; release; echo "SIGTERM: released"; exit 0; }
trap on_term TERM; [ $stop = 1 ] && on_term
` + waitGate + `release; echo done
`

// lockGPUs is shell that holds each GPU in CUDA_VISIBLE_DEVICES as a lock
// file $LOCKS/<uuid> holding "pid attempt", created with O_EXCL (noclobber)
// by the shell itself, and defines release. A lock whose owner is still
// running means the GPU was given to two running attempts: the job prints
// CONFLICT and exits 99. A lock whose owner is gone is stale and taken over:
// a job stopped just as it finished may be killed before it removes it.
// Locking forks nothing (a stop signals the whole process group, and a
// child such as mkdir would die of it and look like a failed lock), and a
// SIGTERM meanwhile only sets stop=1: the script must then install its own
// handler and run it if stop is 1.
const lockGPUs = runningSh + `held=""
note() { echo "$(date +%s.%N) $QSHARE_ATTEMPT_ID $$ $*" >> "$LOCKS.journal"; }
release() { for u in $held; do rm -f "$LOCKS/$u"; note unlock $u; done; held=""; }
lock() {
  if { set -C; echo "$$ $QSHARE_ATTEMPT_ID" > "$LOCKS/$1"; } 2>/dev/null; then set +C; return 0; fi
  set +C
  opid=""; n=0
  while [ -z "$opid" ] && [ $n -lt 50 ]; do read opid oatt < "$LOCKS/$1"; n=$((n+1)); done
  if [ -n "$opid" ] && running "$opid"; then note conflict $1 $opid $oatt; echo "CONFLICT $1 held by $oatt (pid $opid, running)"; return 1; fi
  note stale $1 $opid $oatt
  echo "$$ $QSHARE_ATTEMPT_ID" >| "$LOCKS/$1"
}
stop=0; trap 'stop=1' TERM
note start "$CUDA_VISIBLE_DEVICES"
IFS=,; set -- $CUDA_VISIBLE_DEVICES; unset IFS
for u in "$@"; do
  lock $u || { release; exit 99; }
  held="$held $u"
  note lock $u
done
`

var gpusRE = regexp.MustCompile(`gpus=(\S*) nvidia=(\S*) n=(\d+)`)

// gpusOf returns the GPUs an attempt says it was given, checking that
// NVIDIA_VISIBLE_DEVICES and SM_NUM_GPUS agree with CUDA_VISIBLE_DEVICES.
func (s *server) gpusOf(id string, attempt int) []string {
	t := s.t
	t.Helper()
	out := s.awaitLog(id, attempt, "gpus=")
	m := gpusRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("job %s attempt %d: no GPU line in %q", id, attempt, out)
	}
	var gs []string
	if m[1] != "" {
		gs = strings.Split(m[1], ",")
	}
	if m[2] != m[1] || m[3] != strconv.Itoa(len(gs)) {
		t.Errorf("job %s attempt %d: CUDA_VISIBLE_DEVICES %q, NVIDIA_VISIBLE_DEVICES %q, SM_NUM_GPUS %s disagree", id, attempt, m[1], m[2], m[3])
	}
	return gs
}

// TestGPUAssignment runs qshare serve with a fake nvidia-smi that reports 8
// GPUs and an environment of one ml.g5.12xlarge (4 GPUs) and four
// ml.g5.xlarge (1 GPU each). A job of N instances of G GPUs gets exactly N×G
// GPUs (4, 2×1, 1, 1), concurrent jobs get distinct ones, a waiting job gets
// the GPU a finished job freed, and a job that preempts another gets the
// preempted job's GPUs only after that job's checkpoint is written and its
// process gone. The jobs themselves check that no GPU they hold is held by
// another job.
func TestGPUAssignment(t *testing.T) {
	skipShort(t)
	s := startServer(t, newDataDir(t), serverOpts{gpus: "-", pathPrefix: gputest.WriteFakeSMI(t, 8)})
	const big, small = "ml.g5.12xlarge", "ml.g5.xlarge"
	limits := map[string]int32{big: 1, small: 4}
	s.setup(limits, share{name: "gpu", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve, inShare: true})
	g := newGates(t)
	locks := t.TempDir()
	env := g.env("LOCKS", locks)
	submit := func(name, unit string, count int, prio int32) string {
		return s.submit(job{name: name, share: "gpu", unit: unit, count: count, priority: prio, env: env, script: gpuJob})
	}
	ids := map[string]string{}
	for _, j := range []struct {
		name, unit string
		count      int
	}{{"big", big, 1}, {"pair", small, 2}, {"a", small, 1}, {"b", small, 1}} {
		ids[j.name] = submit(j.name, j.unit, j.count, 1)
		s.awaitRunning(ids[j.name], 1)
	}
	ids["c"] = submit("c", small, 1, 1)

	got := map[string][]string{}
	all := map[string]string{}
	for name, want := range map[string]int{"big": 4, "pair": 2, "a": 1, "b": 1} {
		got[name] = s.gpusOf(ids[name], 1)
		if len(got[name]) != want {
			t.Errorf("%s got GPUs %v, want %d", name, got[name], want)
		}
		for _, u := range got[name] {
			if !regexp.MustCompile(`^GPU-fake-000[0-7]$`).MatchString(u) {
				t.Errorf("%s got %q, which nvidia-smi did not report", name, u)
			}
			if other, ok := all[u]; ok {
				t.Errorf("GPU %s given to both %s and %s", u, other, name)
			}
			all[u] = name
		}
	}
	if d := s.Describe(ids["c"]); d.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("c is %s, want RUNNABLE: every GPU is taken", d.Status)
	}

	// c runs in the capacity, and on the GPU, that a freed.
	g.release("a")
	s.AwaitStatus(ids["a"], types.ServiceJobStatusSucceeded)
	s.awaitRunning(ids["c"], 1)
	if gc := s.gpusOf(ids["c"], 1); !slices.Equal(gc, got["a"]) {
		t.Errorf("c got %v, want the GPU a freed, %v", gc, got["a"])
	}

	// big2 preempts big (in-share) and gets its GPUs once big has exited.
	ids["big2"] = submit("big2", big, 1, 9)
	d2 := s.awaitRunning(ids["big2"], 1)
	if g2 := s.gpusOf(ids["big2"], 1); !slices.Equal(slices.Sorted(slices.Values(g2)), slices.Sorted(slices.Values(got["big"]))) {
		t.Errorf("big2 got %v, want big's %v", g2, got["big"])
	}
	d := s.Await(ids["big"], "preempted", func(d *batch.DescribeServiceJobOutput) bool {
		return d.PreemptionSummary != nil && len(d.Attempts) >= 1 && d.Attempts[0].StoppedAt != nil
	})
	if stop, start := aws.ToInt64(d.Attempts[0].StoppedAt), aws.ToInt64(d2.Attempts[0].StartedAt); start < stop {
		t.Errorf("big2 started at %d, before big's attempt stopped at %d", start, stop)
	}
	if out := s.mustLogs(ids["big"], 1); !strings.HasSuffix(out, "SIGTERM: released\n") {
		t.Errorf("big was not stopped gracefully:\n%s", out)
	}

	g.release("all")
	for name, id := range ids {
		d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
		for n := 1; n <= len(d.Attempts); n++ {
			if out := s.mustLogs(id, n); strings.Contains(out, "CONFLICT") {
				t.Errorf("%s attempt %d found a GPU in use:\n%s", name, n, out)
			}
		}
	}
	if left, _ := os.ReadDir(locks); len(left) != 0 {
		// A job stopped just as it finished can die before it removes its
		// lock; the lock is stale, not a GPU in use.
		t.Logf("stale GPU locks left: %v", left)
	}
}

// TestGPURecovery: a GPU job keeps its GPUs across a kill -9 of the server.
// The restarted server claims them again before it starts anything, so a
// job submitted after the restart gets the other GPUs, and the recovered
// job's GPUs go to the next job only once it has ended.
func TestGPURecovery(t *testing.T) {
	skipShort(t)
	dataDir := newDataDir(t)
	smi := gputest.WriteFakeSMI(t, 8)
	s := startServer(t, dataDir, serverOpts{gpus: "-", pathPrefix: smi})
	const big = "ml.g5.12xlarge"
	limits := map[string]int32{big: 2}
	s.setup(limits, share{name: "gpu", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve})
	g := newGates(t)
	locks := t.TempDir()
	submit := func(s *server, name string) string {
		return s.submit(job{name: name, share: "gpu", unit: big, env: g.env("LOCKS", locks), script: gpuJob})
	}
	a := submit(s, "a")
	s.awaitRunning(a, 1)
	ga := s.gpusOf(a, 1)

	s.kill()
	s2 := startServer(t, dataDir, serverOpts{gpus: "-", pathPrefix: smi})
	b := submit(s2, "b")
	s2.awaitRunning(b, 1)
	gb := s2.gpusOf(b, 1)
	c := submit(s2, "c")
	if len(ga) != 4 || len(gb) != 4 || slices.ContainsFunc(gb, func(u string) bool { return slices.Contains(ga, u) }) {
		t.Fatalf("a (recovered) has %v and b (started after the restart) %v: want 4 distinct GPUs each", ga, gb)
	}
	if d := s2.Describe(c); d.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("c is %s while a and b hold every GPU", d.Status)
	}
	g.release("a")
	s2.AwaitStatus(a, types.ServiceJobStatusSucceeded)
	s2.awaitRunning(c, 1)
	if gc := s2.gpusOf(c, 1); !slices.Equal(slices.Sorted(slices.Values(gc)), slices.Sorted(slices.Values(ga))) {
		t.Errorf("c got %v, want the GPUs a freed, %v", gc, ga)
	}
	g.release("all")
	for _, id := range []string{a, b, c} {
		d := s2.AwaitStatus(id, types.ServiceJobStatusSucceeded)
		if out := s2.mustLogs(id, 1); len(d.Attempts) != 1 || strings.Contains(out, "CONFLICT") {
			t.Errorf("%s: %d attempts, log:\n%s", aws.ToString(d.JobName), len(d.Attempts), out)
		}
	}
}

// gpuTrainer is gpuJob that does $STEPS steps of 0.05 s, checkpoints its
// step on SIGTERM (after 0.1 s of "saving", still holding its GPUs), and
// resumes from the checkpoint.
const gpuTrainer = `step=0
if [ -f "$SM_CHECKPOINT_DIR/step" ]; then step=$(cat "$SM_CHECKPOINT_DIR/step"); fi
echo "gpus=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES n=$SM_NUM_GPUS attempt=$QSHARE_ATTEMPT from step $step"
` + lockGPUs + `on_term() { sleep 0.1; echo $step > "$SM_CHECKPOINT_DIR/step.tmp" && mv "$SM_CHECKPOINT_DIR/step.tmp" "$SM_CHECKPOINT_DIR/step"; release; echo "SIGTERM at step $step"; exit 0; }
trap on_term TERM; [ $stop = 1 ] && on_term
while [ $step -lt $STEPS ]; do step=$((step+1)); sleep 0.05 & wait $!; done
release; echo "done at step $step"
`

// TestGPURandom submits 8 GPU jobs (24 with QSHARE_LONG=1, as .ci/run's
// long step sets; 16 cost 3.7 s of CPU alone on the slower kind of 2-core
// machine, where the README's command was at its five minutes) of random
// sizes (1, 2 or 4 GPUs) and random priorities, a few milliseconds apart,
// into one share with in-share preemption, on a host of 8 (fake) GPUs and
// an environment of exactly 8. Jobs start, finish and preempt each other at random; each one
// holds its GPUs as mkdir locks while it runs and fails if one is taken.
// Every job must succeed, every attempt must have had exactly the GPUs it
// asked for and never a GPU another held, and no lock may be left. The seed
// is logged; QSHARE_E2E_SEED replays one.
func TestGPURandom(t *testing.T) {
	skipShort(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("QSHARE_E2E_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		must(t, err)
		seed = n
	}
	t.Logf("seed %d (QSHARE_E2E_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	s := startServer(t, newDataDir(t), serverOpts{gpus: "-", pathPrefix: gputest.WriteFakeSMI(t, 8)})
	const small, big = "ml.g5.xlarge", "ml.g5.12xlarge"
	limits := map[string]int32{small: 4, big: 1}
	s.setup(limits, share{name: "gpu", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve, inShare: true})
	locks := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(locks + ".journal")
			t.Logf("GPU lock journal (time, attempt, pid, event):\n%s", b)
		}
	})
	type sub struct {
		id   string
		gpus int
	}
	var jobs []sub
	n := longtest.Pick(8, 24)
	for i := range n {
		unit, count, gpus := small, 1, 1
		switch rng.IntN(3) {
		case 1:
			count, gpus = 2, 2
		case 2:
			unit, gpus = big, 4
		}
		id := s.submit(job{name: fmt.Sprintf("j%02d", i), share: "gpu", unit: unit, count: count, priority: int32(rng.IntN(5)),
			env: map[string]string{"LOCKS": locks, "STEPS": strconv.Itoa(4 + rng.IntN(12))}, script: gpuTrainer})
		jobs = append(jobs, sub{id, gpus})
		time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond) // spread the arrivals
	}
	preempted := 0
	for _, j := range jobs {
		d := s.AwaitStatus(j.id, types.ServiceJobStatusSucceeded)
		if d.PreemptionSummary != nil {
			preempted += int(aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount))
		}
		for n := 1; n <= len(d.Attempts); n++ {
			out, err := s.logs(j.id, n)
			if err != nil && !strings.Contains(err.Error(), "has no log") {
				t.Fatal(err)
			}
			if strings.Contains(out, "CONFLICT") {
				t.Errorf("%s attempt %d found a GPU in use:\n%s", aws.ToString(d.JobName), n, out)
			}
			m := gpusRE.FindStringSubmatch(out)
			if m == nil {
				// Stopped before its shell got to the first line.
				if r := aws.ToString(d.Attempts[n-1].StatusReason); !strings.HasPrefix(r, "Preempted") {
					t.Errorf("%s attempt %d printed nothing and was not preempted (%q)", aws.ToString(d.JobName), n, r)
				}
				continue
			}
			if gs := strings.Split(m[1], ","); len(gs) != j.gpus || m[2] != m[1] || m[3] != strconv.Itoa(j.gpus) {
				t.Errorf("%s attempt %d: CUDA_VISIBLE_DEVICES %q, NVIDIA_VISIBLE_DEVICES %q, SM_NUM_GPUS %s; want %d GPUs", aws.ToString(d.JobName), n, m[1], m[2], m[3], j.gpus)
			}
		}
	}
	t.Logf("%d jobs succeeded after %d preemptions", len(jobs), preempted)
	if left, _ := os.ReadDir(locks); len(left) != 0 {
		// A job stopped just as it finished can die before it removes its
		// lock; the lock is stale, not a GPU in use.
		t.Logf("stale GPU locks left: %v", left)
	}
}
