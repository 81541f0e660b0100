package process

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/gpu/gputest"
)

func TestGPUAssignment(t *testing.T) {
	gputest.FakeSMI(t, 8)
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.GPUs = nil })
	defer e.Close()
	if len(e.GPUs()) != 8 {
		t.Fatalf("found %d GPUs, want 8", len(e.GPUs()))
	}
	ctx := context.Background()
	sc := `echo "$CUDA_VISIBLE_DEVICES|$NVIDIA_VISIBLE_DEVICES|$SM_NUM_GPUS"; sleep 300`
	s1 := spec("g1", 1, payloadOf(sc, nil))
	s1.Demand = qshare.Capacity{"ml.g5.12xlarge": 1, "ml.g5.xlarge": 2} // 4 + 2
	h1, err := e.Start(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	s2 := spec("g2", 1, payloadOf(sc, nil))
	s2.Demand = qshare.Capacity{"ml.g5.2xlarge": 3} // 3: only 2 free
	if _, err := e.Start(ctx, s2); !errors.Is(err, gpu.ErrNoFreeGPUs) {
		t.Fatalf("Start with too few free GPUs = %v; want ErrNoFreeGPUs", err)
	}
	s2.Demand = qshare.Capacity{"ml.g5.2xlarge": 2}
	h2, err := e.Start(ctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	if e.FreeGPUs() != 0 {
		t.Errorf("%d GPUs free, want 0", e.FreeGPUs())
	}
	time.Sleep(200 * time.Millisecond)
	seen := map[string]bool{}
	for _, c := range []struct {
		h executor.Handle
		n int
	}{{h1, 6}, {h2, 2}} {
		b, _ := os.ReadFile(c.h.LogPath)
		f := strings.Split(strings.TrimSpace(string(b)), "|")
		if len(f) != 3 {
			t.Fatalf("log %q", b)
		}
		ids := strings.Split(f[0], ",")
		if len(ids) != c.n || f[1] != f[0] || f[2] != strconv.Itoa(c.n) {
			t.Errorf("attempt %s sees %q; want %d GPU UUIDs in both variables and SM_NUM_GPUS", c.h.AttemptID, b, c.n)
		}
		for _, id := range ids {
			if !strings.HasPrefix(id, "GPU-fake-") || seen[id] {
				t.Errorf("GPU %q given twice or unknown", id)
			}
			seen[id] = true
		}
	}
	// Recovery re-claims the GPUs from the handle.
	e.Close()
	e2 := newExecutor(t, e.o.DataDir, func(o *Options) { o.GPUs = nil })
	defer e2.Close()
	for _, h := range []executor.Handle{h1, h2} {
		if r, err := e2.Recover(ctx, h); r != executor.Running || err != nil {
			t.Fatalf("Recover = %v, %v", r, err)
		}
	}
	if e2.FreeGPUs() != 0 {
		t.Errorf("after recovery %d GPUs are free, want 0", e2.FreeGPUs())
	}
	for _, s := range []executor.Spec{s1, s2} {
		e2.Stop(ctx, s.AttemptID, time.Second)
		if _, err := e2.Wait(ctx, s.AttemptID); err != nil {
			t.Fatal(err)
		}
	}
	if e2.FreeGPUs() != 8 {
		t.Errorf("after the ends %d GPUs are free, want 8", e2.FreeGPUs())
	}
	// The first executor's supervisors were its children; reap them.
	for _, s := range []executor.Spec{s1, s2} {
		e.Wait(ctx, s.AttemptID)
	}
}

func TestGPUValidateAndCapacity(t *testing.T) {
	gputest.FakeSMI(t, 8)
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.GPUs = nil })
	if err := e.Validate(payloadOf("true", nil), qshare.Capacity{"ml.p4d.24xlarge": 2}); qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "16 GPUs") {
		t.Errorf("Validate(16 GPUs on an 8-GPU host) = %v", err)
	}
	if err := e.Validate(payloadOf("true", nil), qshare.Capacity{"ml.p4d.24xlarge": 1}); err != nil {
		t.Errorf("Validate(8 GPUs) = %v", err)
	}
	if w := e.CheckCapacity(qshare.Capacity{"ml.g5.xlarge": 8, "ml.m5.large": 100}); w != "" {
		t.Errorf("CheckCapacity(8 GPUs) = %q", w)
	}
	if w := e.CheckCapacity(qshare.Capacity{"ml.g5.12xlarge": 3}); !strings.Contains(w, "12 GPUs") || !strings.Contains(w, "only 8") {
		t.Errorf("CheckCapacity(12 GPUs) = %q", w)
	}
	none := newExecutor(t, t.TempDir(), nil) // --gpus none
	if w := none.CheckCapacity(qshare.Capacity{"ml.g5.xlarge": 1}); !strings.Contains(w, "no GPUs") {
		t.Errorf("CheckCapacity on a host without GPUs = %q", w)
	}
	if err := none.Validate(payloadOf("true", nil), qshare.Capacity{"ml.g5.xlarge": 1}); err != nil {
		t.Errorf("a GPU job on a host without GPUs is accepted (and runs without): %v", err)
	}
	// The instance-type file extends the table.
	f := filepath.Join(t.TempDir(), "types.yaml")
	os.WriteFile(f, []byte("instanceTypes:\n  my.box: 2\n"), 0o644)
	withFile := newExecutor(t, t.TempDir(), func(o *Options) { o.GPUs = nil; o.InstanceTypes = f })
	if w := withFile.CheckCapacity(qshare.Capacity{"my.box": 5}); !strings.Contains(w, "10 GPUs") {
		t.Errorf("CheckCapacity(5×my.box) = %q", w)
	}
}

// TestGPUNeverDoubleBooked starts, stops and lets end attempts of random GPU
// sizes from many goroutines. Each job takes an exclusive lock on a file per
// GPU it was given, held until its last process is gone, and exits 99 if a
// lock is taken: a GPU given to two live attempts at once fails the test.
// QSHARE_GPU_STRESS_JOBS sets the number of jobs (default 48).
func TestGPUNeverDoubleBooked(t *testing.T) {
	gputest.FakeSMI(t, 8)
	n := 48
	if v, err := strconv.Atoi(os.Getenv("QSHARE_GPU_STRESS_JOBS")); err == nil && v > 0 {
		n = v
	}
	locks := t.TempDir()
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.GPUs = nil })
	defer e.Close()
	sc := `for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do
  exec {fd}>"$LOCKS/$g"
  flock -n $fd || { echo "GPU $g is in use by another attempt"; exit 99; }
done
[ "$SM_NUM_GPUS" = "$WANT" ] || { echo "SM_NUM_GPUS=$SM_NUM_GPUS, want $WANT"; exit 98; }
sleep "$RUN" & wait $!`
	types := []struct {
		d    qshare.Capacity
		gpus int
	}{
		{qshare.Capacity{"ml.g5.xlarge": 1}, 1},
		{qshare.Capacity{"ml.g5.2xlarge": 2}, 2},
		{qshare.Capacity{"ml.g5.12xlarge": 1}, 4},
		{qshare.Capacity{"ml.g5.12xlarge": 1, "ml.g6.xlarge": 3}, 7},
		{qshare.Capacity{"ml.m5.large": 2}, 0},
	}
	var next atomic.Int64
	var started, stopped, noGPU atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for next.Add(1) <= int64(n) {
				ty := types[r.IntN(len(types))]
				run := time.Duration(20+r.IntN(200)) * time.Millisecond
				id := fmt.Sprintf("stress-%d-%d", w, next.Load())
				s := spec(id, 1, payloadOf([]string{"/bin/bash", "-c", sc}, func(p map[string]any) {
					p["Environment"] = map[string]string{"LOCKS": locks, "WANT": strconv.Itoa(ty.gpus), "RUN": secs(run)}
				}))
				s.Demand = ty.d
				for {
					_, err := e.Start(context.Background(), s)
					if errors.Is(err, gpu.ErrNoFreeGPUs) {
						noGPU.Add(1)
						time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("Start: %v", err)
						return
					}
					break
				}
				started.Add(1)
				if r.IntN(3) == 0 {
					time.Sleep(time.Duration(r.IntN(100)) * time.Millisecond)
					stopped.Add(1)
					if err := e.Stop(context.Background(), s.AttemptID, time.Duration(r.IntN(100))*time.Millisecond); err != nil {
						t.Errorf("Stop: %v", err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				x, err := e.Wait(ctx, s.AttemptID)
				cancel()
				if err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				if x.ExitCode == 99 || x.ExitCode == 98 {
					b, _ := os.ReadFile(filepath.Join(e.o.DataDir, "attempts", s.AttemptID, fileOutput))
					t.Errorf("attempt %s: %s", s.AttemptID, b)
				}
			}
		}(w)
	}
	wg.Wait()
	if e.FreeGPUs() != 8 {
		t.Errorf("%d of 8 GPUs free at the end", e.FreeGPUs())
	}
	t.Logf("%d attempts, %d stopped, %d starts refused for want of GPUs", started.Load(), stopped.Load(), noGPU.Load())
}
