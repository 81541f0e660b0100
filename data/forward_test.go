package data_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"qshare/data"
)

// TestRunForwardsTheStop: a wrapper that is a container's first process
// (the Kubernetes executor's) alone gets the stop's SIGTERM; with
// ForwardSignals it passes it on to the program, and exits as the program
// did once it has ended. Only the wrapper is signalled here.
func TestRunForwardsTheStop(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "output"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(root, "got")
	self, _ := os.Executable()
	// Nothing to move: the wrapper stages and uploads nothing, and the
	// endpoint is never called.
	w := data.Wrapper{Plan: data.Plan{Instances: 1}, Endpoint: data.Endpoint{URL: "http://127.0.0.1:1", AccessKeyID: "x", SecretAccessKey: "x"},
		Root: root, FailureFile: filepath.Join(root, "output", "failure"), ForwardSignals: true}
	script := `trap 'echo term > "$1"; exit 0' TERM; echo ready; while :; do sleep 0.1; done`
	argv, env, err := data.Wrap(self, []string{"/bin/sh", "-c", script, "sh", got}, os.Environ(), w)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	log, err := os.Create(filepath.Join(root, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	out := func() string { b, _ := os.ReadFile(log.Name()); return string(b) }
	// A group of its own: the SIGTERM below reaches the wrapper alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // the test's end
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out(), "ready"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the program never started:\n%s", out())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the wrapper: %v\n%s", err, out())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the program never got the stop:\n%s", out())
	}
	if b, _ := os.ReadFile(got); string(b) != "term\n" {
		t.Errorf("the program's trap wrote %q", b)
	}
}
