package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"qshare/sim"
)

// TestKeepSchedule checks that jobs are released no earlier than their
// submit times, in order, jobs due at the same time together, and that the
// gate is closed once all are released.
func TestKeepSchedule(t *testing.T) {
	jobs := []sim.Job{{Submit: 0}, {Submit: 0}, {Submit: 30 * time.Millisecond}, {Submit: 60 * time.Millisecond}}
	gate := newRelease()
	start := time.Now()
	done := make(chan struct{})
	go func() { keepSchedule(context.Background(), jobs, start, gate); close(done) }()
	for i, j := range jobs {
		if !gate.wait(i) {
			t.Fatalf("job %d was not released", i)
		}
		if at := time.Since(start); at < j.Submit {
			t.Errorf("job %d released at %v, before its submit time %v", i, at, j.Submit)
		}
	}
	<-done
	if gate.wait(len(jobs)) {
		t.Error("a job past the end was released")
	}
}

// TestKeepScheduleCancelled checks that a cancelled schedule closes the
// gate, so that clients waiting for later jobs return instead of hanging.
func TestKeepScheduleCancelled(t *testing.T) {
	jobs := []sim.Job{{Submit: 0}, {Submit: time.Hour}}
	gate := newRelease()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { keepSchedule(ctx, jobs, time.Now(), gate); close(done) }()
	if !gate.wait(0) {
		t.Fatal("job 0, due at once, was not released")
	}
	got := make(chan bool)
	go func() { got <- gate.wait(1) }()
	cancel()
	select {
	case ok := <-got:
		if ok {
			t.Error("job 1, due in an hour, was released")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a client waiting on a cancelled schedule did not return")
	}
	<-done
}

// TestParseStatCPU reads utime and stime from a /proc/PID/stat line whose
// command name holds spaces and parentheses.
func TestParseStatCPU(t *testing.T) {
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 100 1000 100 18446744073709551615"
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 325 * clockTick; got != want {
		t.Errorf("CPU %v, want %v (250 + 75 ticks)", got, want)
	}
	if _, err := parseStatCPU("4242 no name"); err == nil {
		t.Error("a line without a command name was accepted")
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("a short line was accepted")
	}
}

// TestProcessCPU checks that /proc and getrusage agree on this process's
// CPU time after it has burnt some, to a few clock ticks.
func TestProcessCPU(t *testing.T) {
	deadline := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	self := selfCPU()
	proc, err := processCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if proc <= 0 || self <= 0 {
		t.Fatalf("CPU from /proc %v, from getrusage %v", proc, self)
	}
	if d := proc - self; d > 5*clockTick || d < -100*time.Millisecond {
		t.Errorf("CPU from /proc %v, from getrusage %v (read just before)", proc, self)
	}
}

// TestScheduleRate checks the rate each Kueue workload's schedule asks for,
// worked out from BENCHMARKS.md §2. The last job of the baseline is the
// 50th large one of a queue (49 × 1.2 s = 58.8 s; the last small one is due
// at 34.9 s, the last medium at 49.5 s), so 15,000 / 58.8 s; of the
// large-scale one the 11th medium (10 × 300 ms = 3 s; small 2.04 s, large
// 2.1 s), so 50,000 / 3 s.
func TestScheduleRate(t *testing.T) {
	if got := scheduleRate(sim.KueueBaseline()); got != 255.1 {
		t.Errorf("baseline: %v submits/s, want 255.1 (15,000 / 58.8 s)", got)
	}
	if got := scheduleRate(sim.KueueLargeScale()); got != 16666.7 {
		t.Errorf("large-scale: %v submits/s, want 16,666.7 (50,000 / 3 s)", got)
	}
}
