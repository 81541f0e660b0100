package serveproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"qshare/internal/longtest"
)

// The tests run this test binary as the server: with FAKE_SERVE set,
// TestMain plays a `qshare serve` that prints its arguments and
// environment, says where it listens (unless told not to), and exits on a
// signal (unless told to ignore it).
func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv("FAKE_SERVE"); ok {
		fakeServe(mode)
		return
	}
	os.Exit(m.Run())
}

func fakeServe(mode string) {
	fmt.Fprintf(os.Stderr, "args %s\n", strings.Join(os.Args[1:], " "))
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "QSHARE_") || strings.HasPrefix(kv, "EXTRA=") {
			fmt.Fprintf(os.Stderr, "env %s\n", kv)
		}
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot open the store")
		os.Exit(1)
	case "mute":
		time.Sleep(time.Minute)
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	// The address comes in two writes, as a slow pipe may deliver it.
	fmt.Print("qshare: listening on http://127.0.0.1:")
	fmt.Println("4321 (executor process, data in somewhere)")
	for s := range sig {
		fmt.Fprintf(os.Stderr, "got %v\n", s)
		if mode != "stubborn" {
			os.Exit(0)
		}
	}
}

func start(t *testing.T, mode string, o Options) (*Server, error) {
	t.Helper()
	return startCtx(context.Background(), t, mode, o)
}

func startCtx(ctx context.Context, t *testing.T, mode string, o Options) (*Server, error) {
	t.Helper()
	t.Setenv("FAKE_SERVE", mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Binary = exe
	if o.DataDir == "" {
		o.DataDir = filepath.Join(t.TempDir(), "data")
	}
	return Start(ctx, o)
}

func TestStartStop(t *testing.T) {
	t.Setenv("QSHARE_ADDR", "0.0.0.0:80")
	s, err := start(t, "serve", Options{Args: []string{"--executor", "process"}, Env: []string{"EXTRA=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Endpoint != "http://127.0.0.1:4321" {
		t.Errorf("Endpoint %q", s.Endpoint)
	}
	if fi, err := os.Stat(s.DataDir); err != nil || !fi.IsDir() {
		t.Errorf("the data directory was not made: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	log := s.Log()
	for _, want := range []string{"args serve --addr 127.0.0.1:0 --data-dir " + s.DataDir + " --executor process\n",
		"env EXTRA=1\n", "listening on http://127.0.0.1:4321", "got interrupt\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "QSHARE_") {
		t.Errorf("the server got the QSHARE_* settings of its parent:\n%s", log)
	}
	if s.Err() != nil {
		t.Errorf("Err after a clean stop: %v", s.Err())
	}
}

func TestOutputAndStopSignal(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	s, err := start(t, "serve", Options{Output: w, StopSignal: syscall.SIGTERM})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(out.String(), "listening on") || !strings.Contains(out.String(), "got terminated") {
		t.Errorf("Output got:\n%s", out.String())
	}
	if s.Log() != out.String() {
		t.Errorf("Log %q, want the tail of the output %q", s.Log(), out.String())
	}
}

func TestStopKillsAStubbornServer(t *testing.T) {
	s, err := start(t, "stubborn", Options{StopWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Errorf("Stop of a server that ignores SIGINT: %v", err)
	}
	if s.Err() == nil {
		t.Error("Err is nil after a kill")
	}
}

func TestKillAndRestartOnTheSameDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for i := 0; i < 2; i++ {
		s, err := start(t, "stubborn", Options{DataDir: dir, Group: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Kill()
		select {
		case <-s.Done():
		default:
			t.Fatal("Done is open after Kill")
		}
	}
}

func TestStartFails(t *testing.T) {
	_, err := start(t, "exit", Options{})
	if err == nil || !strings.Contains(err.Error(), "exited before it listened") || !strings.Contains(err.Error(), "cannot open the store") {
		t.Errorf("a server that exits at once: %v", err)
	}
	_, err = start(t, "mute", Options{StartWait: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not say where it listens") {
		t.Errorf("a server that never listens: %v", err)
	}
	if _, err := Start(context.Background(), Options{}); err == nil {
		t.Error("Start without a data directory")
	}
}

func TestContextStopsTheServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := startCtx(ctx, t, "serve", Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the server runs on after its context is done")
	}
	if !strings.Contains(s.Log(), "got interrupt") {
		t.Errorf("not stopped by SIGINT:\n%s", s.Log())
	}
}

func TestOutliveContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := startCtx(ctx, t, "serve", Options{OutliveContext: true})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-s.Done():
		t.Fatalf("the server stopped with its context:\n%s", s.Log())
	case <-time.After(500 * time.Millisecond):
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(s.Log(), "got interrupt"); n != 1 {
		t.Errorf("the server got %d interrupts, want the one of Stop:\n%s", n, s.Log())
	}
}

func TestLogKeepsTheTail(t *testing.T) {
	o := &output{w: writerFunc(func(p []byte) (int, error) { return len(p), nil })}
	line := strings.Repeat("x", 99) + "\n"
	for i := 0; i < 1000; i++ {
		o.Write([]byte(line))
	}
	if n := len(o.String()); n < tailSize/2 || n > 2*tailSize {
		t.Errorf("kept %d bytes of 100000", n)
	}
	if !strings.HasPrefix(o.String(), "x") {
		t.Error("the tail does not start at a line")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// StartTest's server is stopped when its test ends; Command runs a program
// in the directory given with QSHARE_ENDPOINT set to the server's, and
// returns its two outputs and its exit status.
func TestStartTestAndCommand(t *testing.T) {
	t.Setenv("FAKE_SERVE", "serve")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var s *Server
	t.Run("server", func(t *testing.T) {
		s = StartTest(t, Options{Binary: exe, DataDir: filepath.Join(t.TempDir(), "data")})
		dir := t.TempDir()
		out, errOut, err := s.Command("/bin/sh", dir, "-c", `echo "$QSHARE_ENDPOINT"; pwd; echo oops >&2; exit 3`)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("exit: %v, want status 3", err)
		}
		if out != "http://127.0.0.1:4321\n"+dir+"\n" || errOut != "oops\n" {
			t.Errorf("stdout %q, stderr %q", out, errOut)
		}
	})
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		t.Fatal("the server still runs after its test ended")
	}
	if !strings.Contains(s.Log(), "got interrupt\n") {
		t.Errorf("the server was not stopped with Stop's signal:\n%s", s.Log())
	}
}

// TestGoTestRun: under go test, the go command that runs this binary is
// named by its pid and start time, the same for every package of the run;
// run by hand (another parent), nothing is named, and Build always asks
// go build.
func TestGoTestRun(t *testing.T) {
	run := goTestRun()
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", os.Getppid()))
	if filepath.Base(exe) != "go" {
		if run != "" {
			t.Errorf("run by %s, not a go command, goTestRun = %q, want none", exe, run)
		}
		t.Skip("this test binary was not run by go test")
	}
	var pid, start int
	if n, err := fmt.Sscanf(run, "%d %d", &pid, &start); n != 2 || err != nil || pid != os.Getppid() || start <= 0 {
		t.Errorf("goTestRun = %q, want the go command's pid %d and its start time", run, os.Getppid())
	}
	if again := goTestRun(); again != run {
		t.Errorf("goTestRun changed within a run: %q, then %q", run, again)
	}
	// A child of this binary (not a go command) names none.
	cmd := exec.Command(os.Args[0], "-test.run=^TestGoTestRunChild$")
	cmd.Env = append(os.Environ(), "GO_TEST_RUN_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "goTestRun=\"\"") {
		t.Errorf("run by a test binary: %v\n%s", err, out)
	}
}

func TestGoTestRunChild(t *testing.T) {
	if os.Getenv("GO_TEST_RUN_CHILD") != "1" {
		t.Skip("run by TestGoTestRun")
	}
	fmt.Printf("goTestRun=%q\n", goTestRun())
}

// TestCopyExecutableWhileForking: a binary that CopyExecutable has just
// copied runs at once, while other goroutines start processes without
// pause. A copy written through a descriptor of this process failed here
// with "text file busy" within the first 60 runs in each of three tries
// (the child of a fork made while the file was open still held it), as a
// CI run's bench test did; the copy by a child process of its own passed
// 600 runs.
func TestCopyExecutableWhileForking(t *testing.T) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true program to copy")
	}
	var forking atomic.Bool
	forking.Store(true)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for forking.Load() {
				exec.Command(prog).Run()
			}
		})
	}
	t.Cleanup(func() { forking.Store(false); wg.Wait() })
	dir := t.TempDir()
	to := filepath.Join(dir, "true")
	for i := range longtest.Pick(60, 600) {
		if err := CopyExecutable(prog, to); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(to).CombinedOutput(); err != nil {
			t.Fatalf("run %d of the copy: %v %s", i, err, out)
		}
	}
	script := filepath.Join(dir, "written")
	if err := WriteExecutable(script, []byte("#!/bin/sh\necho written\n")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script).Output(); err != nil || string(out) != "written\n" {
		t.Fatalf("the written script: %q %v", out, err)
	}
	if _, err := os.Stat(script + ".part"); !os.IsNotExist(err) {
		t.Errorf("WriteExecutable left its part file: %v", err)
	}
}
