package simulated

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"qshare/executor"
	"qshare/executor/executortest"
)

// payload renders a payload for a simulated job.
func payload(env map[string]string) string {
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        "sim",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "none"},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1},
		"Environment":            env,
	})
	return string(b)
}

func harness() executortest.Harness {
	return executortest.Harness{
		// It runs nothing, so nothing reaches a network.
		NetworkIsolation: true,
		New:              func(t testing.TB, dir string) executor.Executor { return New(Options{}) },
		Payload: func(t testing.TB, j executortest.Job) string {
			env := map[string]string{
				EnvDuration: j.Run.String(),
				EnvExitCode: fmt.Sprint(j.ExitCode),
			}
			switch j.OnStop {
			case executortest.StopCheckpoint:
				env[EnvOnStop] = "checkpoint"
				env[EnvStopDelay] = j.CheckpointTime.String()
			case executortest.StopIgnore:
				env[EnvOnStop] = "ignore"
			}
			for k, v := range j.Env {
				env[k] = v
			}
			return payload(env)
		},
		Slack: 5 * time.Second,
	}
}

func TestConformance(t *testing.T) { executortest.Run(t, harness()) }

func spec(id string, env map[string]string) executor.Spec {
	return executor.Spec{JobID: id, AttemptID: id + "-1", Attempt: 1, Payload: payload(env)}
}

func TestDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Options{})
		defer e.Close()
		t0 := time.Now()
		if _, err := e.Start(context.Background(), spec("a", nil)); err != nil {
			t.Fatal(err)
		}
		x, err := e.Wait(context.Background(), "a-1")
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != DefaultDuration || !x.Succeeded() {
			t.Errorf("default job: ran %v, exit %+v; want %v and success", d, x, DefaultDuration)
		}
	})
}

// TestDefaultDuration: Options.DefaultDuration (serve --sim-duration) is
// the run time of a payload that names none, and a payload's own
// QSHARE_SIM_DURATION still wins.
func TestDefaultDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Options{DefaultDuration: time.Minute})
		defer e.Close()
		for _, c := range []struct {
			env  map[string]string
			want time.Duration
		}{{nil, time.Minute}, {map[string]string{EnvDuration: "5s"}, 5 * time.Second}} {
			t0 := time.Now()
			id := fmt.Sprint(c.want)
			if _, err := e.Start(context.Background(), spec(id, c.env)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Wait(context.Background(), id+"-1"); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(t0); d != c.want {
				t.Errorf("payload %v: ran %v, want %v", c.env, d, c.want)
			}
		}
	})
}

// TestStopOutcomes checks the end of a stopped attempt for each reaction to
// a stop, on a virtual clock where durations are exact.
func TestStopOutcomes(t *testing.T) {
	cases := []struct {
		name   string
		env    map[string]string
		grace  time.Duration
		after  time.Duration // from the stop to the end
		code   int
		signal string
	}{
		{"die", nil, time.Minute, 0, -1, "SIGTERM"},
		{"checkpoint", map[string]string{EnvOnStop: "checkpoint", EnvStopDelay: "20s"}, time.Minute, 20 * time.Second, 0, ""},
		{"checkpoint too slow", map[string]string{EnvOnStop: "checkpoint", EnvStopDelay: "2m"}, time.Minute, time.Minute, -1, "SIGKILL"},
		{"ignore", map[string]string{EnvOnStop: "ignore"}, time.Minute, time.Minute, -1, "SIGKILL"},
		{"ignore, default grace", map[string]string{EnvOnStop: "ignore"}, 0, DefaultStopGrace, -1, "SIGKILL"},
		{"ignore, job grace", map[string]string{EnvOnStop: "ignore", EnvStopGrace: "45"}, 0, 45 * time.Second, -1, "SIGKILL"},
		{"ignore, the job's grace beats the caller's", map[string]string{EnvOnStop: "ignore", EnvStopGrace: "45"}, 10 * time.Second, 45 * time.Second, -1, "SIGKILL"},
		{"ignore, caller's grace beats the default", map[string]string{EnvOnStop: "ignore"}, 10 * time.Second, 10 * time.Second, -1, "SIGKILL"},
		{"ignore, ends on its own first", map[string]string{EnvOnStop: "ignore", EnvDuration: "30m30s", EnvExitCode: "7"}, time.Minute, 30 * time.Second, 7, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := New(Options{})
				defer e.Close()
				env := map[string]string{EnvDuration: "1h"}
				for k, v := range c.env {
					env[k] = v
				}
				ctx := context.Background()
				if _, err := e.Start(ctx, spec("j", env)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(30 * time.Minute) // stop half an hour before its natural end
				t0 := time.Now()
				if err := e.Stop(ctx, "j-1", c.grace); err != nil {
					t.Fatal(err)
				}
				x, err := e.Wait(ctx, "j-1")
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(t0); d != c.after {
					t.Errorf("ended %v after the stop, want %v", d, c.after)
				}
				if x.ExitCode != c.code || x.Signal != c.signal || !x.Stopped || !x.At.Equal(time.Now()) {
					t.Errorf("exit = %+v, want code %d signal %q stopped at %v", x, c.code, c.signal, time.Now())
				}
			})
		})
	}
}

func TestRecoverKeepsRemainingTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e1 := New(Options{})
		h, err := e1.Start(context.Background(), spec("r", map[string]string{EnvDuration: "10m", EnvExitCode: "3"}))
		if err != nil {
			t.Fatal(err)
		}
		e1.Close()
		time.Sleep(4 * time.Minute)
		e2 := New(Options{})
		defer e2.Close()
		if r, err := e2.Recover(context.Background(), h); r != executor.Running || err != nil {
			t.Fatalf("Recover = %v, %v", r, err)
		}
		t0 := time.Now()
		x, err := e2.Wait(context.Background(), "r-1")
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 6*time.Minute || x.ExitCode != 3 {
			t.Errorf("recovered attempt ended after %v with %+v; want 6m and code 3", d, x)
		}
		// Long after its end, a third executor finds it Exited.
		time.Sleep(time.Hour)
		e3 := New(Options{})
		defer e3.Close()
		if r, _ := e3.Recover(context.Background(), h); r != executor.Exited {
			t.Errorf("Recover after the end = %v, want Exited", r)
		}
		if y, _ := e3.Wait(context.Background(), "r-1"); y != x {
			t.Errorf("exit after recovery = %+v, want %+v", y, x)
		}
	})
}

func TestValidate(t *testing.T) {
	e := New(Options{})
	for _, env := range []map[string]string{
		{EnvDuration: "ten seconds"},
		{EnvDuration: "-1s"},
		{EnvExitCode: "256"},
		{EnvExitCode: "x"},
		{EnvOnStop: "explode"},
		{EnvStopDelay: "soon"},
		{EnvStopGrace: "-3"},
	} {
		err := e.Validate(payload(env), nil)
		if err == nil {
			t.Errorf("Validate(%v) accepted it", env)
			continue
		}
		for k := range env {
			if msg := err.Error(); !contains(msg, k) {
				t.Errorf("Validate(%v) = %q: the message does not name %s", env, msg, k)
			}
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestManyAttemptsNoGoroutines runs 20,000 attempts at once and checks that
// they cost no goroutine while they run, and that none is left after.
func TestManyAttemptsNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Options{})
		defer e.Close()
		before := runtime.NumGoroutine()
		const n = 20000
		for i := 0; i < n; i++ {
			env := map[string]string{EnvDuration: fmt.Sprintf("%dms", 1000+i%5000)}
			if _, err := e.Start(context.Background(), spec(fmt.Sprint(i), env)); err != nil {
				t.Fatal(err)
			}
		}
		if g := runtime.NumGoroutine(); g > before+10 {
			t.Errorf("%d goroutines for %d running attempts (was %d)", g, n, before)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for i := 0; i < n; i++ {
			if _, err := e.Wait(context.Background(), fmt.Sprint(i)+"-1"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// BenchmarkStartWait measures the cost of one simulated attempt, from Start
// to the end of Wait, with a zero duration.
func BenchmarkStartWait(b *testing.B) {
	e := New(Options{})
	defer e.Close()
	p := payload(map[string]string{EnvDuration: "0s"})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprint(i)
		if _, err := e.Start(ctx, executor.Spec{JobID: id, AttemptID: id, Payload: p}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Wait(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

func TestForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := New(Options{})
		defer e.Close()
		ctx := context.Background()
		e.Start(ctx, spec("f", map[string]string{EnvDuration: "1m"}))
		e.Forget("f-1") // running: kept
		if err := e.Stop(ctx, "f-1", 0); err != nil {
			t.Fatalf("Stop after Forget of a running attempt: %v", err)
		}
		if _, err := e.Wait(ctx, "f-1"); err != nil {
			t.Fatal(err)
		}
		e.Forget("f-1")
		if _, err := e.Wait(ctx, "f-1"); err != executor.ErrUnknownAttempt {
			t.Errorf("Wait after Forget = %v, want ErrUnknownAttempt", err)
		}
	})
}
