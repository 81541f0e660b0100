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

// stopAlone runs command under the wrapper w as a container's first
// process (a group of its own, so that a signal reaches the wrapper
// alone), waits for the program to print "ready", sends the wrapper
// SIGTERM, and returns how the wrapper ended (within, else the test
// fails) and its log.
func stopAlone(t *testing.T, w data.Wrapper, command []string, within time.Duration) (*os.ProcessState, string) {
	t.Helper()
	self, _ := os.Executable()
	argv, env, err := data.Wrap(self, command, os.Environ(), w)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	log, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	out := func() string { b, _ := os.ReadFile(log.Name()); return string(b) }
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
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() //nolint:errcheck // ProcessState says
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("the wrapper had not ended %v after the stop:\n%s", within, out())
	}
	return cmd.ProcessState, out()
}

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
	// Nothing to move: the wrapper stages and uploads nothing, and the
	// endpoint is never called.
	w := data.Wrapper{Plan: data.Plan{Instances: 1}, Endpoint: data.Endpoint{URL: "http://127.0.0.1:1", AccessKeyID: "x", SecretAccessKey: "x"},
		Root: root, FailureFile: filepath.Join(root, "output", "failure"), ForwardSignals: true}
	script := `trap 'echo term > "$1"; exit 0' TERM; echo ready; while :; do sleep 0.1; done`
	st, log := stopAlone(t, w, []string{"/bin/sh", "-c", script, "sh", got}, time.Minute)
	if !st.Success() {
		t.Fatalf("the wrapper: %v\n%s", st, log)
	}
	if b, _ := os.ReadFile(got); string(b) != "term\n" {
		t.Errorf("the program's trap wrote %q", b)
	}
}

// TestRunKillsAtStopGrace: a pod's wrapper with a StopGrace passes the
// stop on to a program that ignores it, kills the program's group when
// that grace ends (before the pod's own grace period, which covers the
// upload too, would end everything), and then uploads the model the
// program left, as SageMaker does after its kill; it dies by SIGKILL, as
// the program did. A failed upload is the failure file's reason.
func TestRunKillsAtStopGrace(t *testing.T) {
	t.Parallel()
	s := embedded(t)
	s.put(t, "out", nil)
	for _, tc := range []struct{ name, out string }{{"uploaded", "s3://out"}, {"nobucket", "s3://no-such-bucket"}} {
		t.Run(tc.name, func(t *testing.T) {
			root, d, _ := job(t)
			p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"`+tc.out+`"}}`, 0, 1, d)
			failure := filepath.Join(root, "output", "failure")
			w := data.Wrapper{Plan: p, Endpoint: s.ep, Root: root, FailureFile: failure, ForwardSignals: true, StopGrace: 300 * time.Millisecond}
			// The sleep inherits the ignored SIGTERM: the whole group must be killed.
			script := `trap "" TERM; echo weights > "$1/model.bin"; echo ready; sleep 300 & wait`
			st, log := stopAlone(t, w, []string{"/bin/sh", "-c", script, "sh", d.Model}, 30*time.Second)
			if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !strings.Contains(log, data.AfterKillLine) {
				t.Fatalf("the wrapper ended %v, want killed after its upload:\n%s", st, log)
			}
			if tc.name == "nobucket" {
				if b, _ := os.ReadFile(failure); !strings.HasPrefix(string(b), data.AfterKillReason(data.KilledReason, "")+"; after the kill, the model was not uploaded: ") || !strings.Contains(string(b), "NoSuchBucket") {
					t.Fatalf("failure file %q, want the failed upload's reason", b)
				}
				return
			}
			if m := untar(t, s.get(t, "out", "awsbatchtrain-1/output/model.tar.gz")); m["model.bin"] != "weights\n" {
				t.Fatalf("model.tar.gz holds %v:\n%s", m, log)
			}
		})
	}
}
