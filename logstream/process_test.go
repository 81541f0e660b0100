package logstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/process"
)

// The process executor's supervisors are this test binary.
func TestMain(m *testing.M) {
	process.MaybeSupervise()
	os.Exit(m.Run())
}

// processServer serves the logs of attempts that a real process executor
// runs; run starts a job's attempt and records it as the daemon would.
type processServer struct {
	t   *testing.T
	ex  *process.Executor
	js  *jobs
	srv *httptest.Server
}

func newProcessServer(t *testing.T, o process.Options) *processServer {
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	o.GPUs, o.PollInterval = []string{"none"}, 10*time.Millisecond
	ex, err := process.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	js := &jobs{m: map[string]*qshare.Job{}}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, &Handler{Job: js.get, Logs: ex.Logs, Poll: 10 * time.Millisecond})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &processServer{t: t, ex: ex, js: js, srv: srv}
}

// run starts attempt 1 of job with the shell command cmd, and marks the
// attempt stopped in the job table when it ends.
func (p *processServer) run(job, cmd string) {
	p.t.Helper()
	payload := fmt.Sprintf(`{"TrainingJobName":"t","AlgorithmSpecification":{"TrainingImage":"x","ContainerEntrypoint":["/bin/sh","-c",%q]},"ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":1}}`, cmd)
	s := executor.Spec{JobID: job, JobName: job, AttemptID: job + "-1", Attempt: 1, Queue: "q", Share: "s", Demand: qshare.Capacity{"ml.m5.large": 1}, Payload: payload}
	h, err := p.ex.Start(context.Background(), s)
	if err != nil {
		p.t.Fatal(err)
	}
	p.js.mu.Lock()
	p.js.m[job] = &qshare.Job{ID: job, Name: job, Status: qshare.JobRunning, Attempts: []qshare.Attempt{{N: 1, ID: s.AttemptID, StartedAt: h.StartedAt, LogPath: h.LogPath}}}
	p.js.mu.Unlock()
	go func() {
		p.ex.Wait(context.Background(), s.AttemptID)
		p.js.update(job, func(j *qshare.Job) { j.Attempts[0].StoppedAt = time.Now(); j.Status = qshare.JobSucceeded })
	}()
}

// The endpoint and the process executor together: a follow from the
// attempt's start gets every line, in order, across the log's rotations,
// and ends when the attempt does; a plain GET afterwards gets them again.
func TestProcessExecutorLogs(t *testing.T) {
	p := newProcessServer(t, process.Options{LogMaxBytes: 2048, LogKeep: 8})
	pad := strings.Repeat("x", 56)
	p.run("loud", `i=1; while [ $i -le 200 ]; do echo "line $i `+pad+`"; i=$((i+1)); [ $((i % 50)) = 0 ] && sleep 0.05; done; true`)
	var want strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&want, "line %d %s\n", i, pad)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, q := range []string{"?follow=true", ""} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.srv.URL+PathPrefix+"loud"+q, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) != want.String() {
			t.Errorf("GET %s = %d %v, %d bytes; want the 200 lines (%d bytes)", q, resp.StatusCode, err, len(b), want.Len())
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(p.js.m["loud"].Attempts[0].LogPath), "output.log.3")); err != nil {
		t.Errorf("the log did not rotate, so the test shows nothing: %v", err)
	}
}

// A job replaces its output.log with a link to a file outside (standing for
// /etc/hostname): the endpoint served that file (issue 14, finding 3). Now
// it refuses with a ClientException that names no server path, and the
// supervisor does not write the job's output through the link either.
func TestAttackLogLink(t *testing.T) {
	data := t.TempDir()
	victim := filepath.Join(t.TempDir(), "hostname")
	const content = "secret-host-name\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProcessServer(t, process.Options{DataDir: data})
	// The data directory by its host path: as root the job sees its own
	// directory at /opt/ml, but the host's paths stay reachable.
	p.run("evil", `ln -s "`+victim+`" "`+data+`/attempts/$QSHARE_ATTEMPT_ID/output.log" && echo written-through`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		j, _ := p.js.get("evil")
		if !j.Attempts[0].StoppedAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the attempt did not end")
		}
	}
	for _, q := range []string{"", "?follow=true"} {
		status, typ, msg := get(t, p.srv, "evil", q)
		if status != 400 || typ != "ClientException" || strings.Contains(msg, content) || strings.Contains(msg, data) || !strings.Contains(msg, "not served") {
			t.Errorf("GET %s = %d %s %q; want a 400 ClientException that serves nothing and names no server path", q, status, typ, msg)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != content {
		t.Errorf("the job's output was written through the link: the file outside holds %q", b)
	}
}
