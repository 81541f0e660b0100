package logstream

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
)

// jobs is a job table that a test changes while the handler reads it, as
// the daemon's does.
type jobs struct {
	mu sync.Mutex
	m  map[string]*qshare.Job
}

func (js *jobs) get(ref string) (*qshare.Job, error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	j, ok := js.m[ref]
	if !ok {
		return nil, qshare.Errorf(qshare.ENOTFOUND, "Service job %s does not exist", ref)
	}
	c := *j
	c.Attempts = append([]qshare.Attempt(nil), j.Attempts...)
	return &c, nil
}

func (js *jobs) update(id string, fn func(j *qshare.Job)) {
	js.mu.Lock()
	defer js.mu.Unlock()
	fn(js.m[id])
}

// logs holds the attempts' output, by attempt ID, the way an executor's
// Logs serves it: these tests are about the endpoint (which attempt, when a
// follow moves on, the errors); how the process executor reads its files is
// tested in executor/process, and both together in TestProcessExecutorLogs.
type logs struct {
	mu    sync.Mutex
	out   map[string]*strings.Builder
	ended map[string]bool
	noLog map[string]bool
}

func (l *logs) write(id, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out[id] == nil {
		l.out[id] = &strings.Builder{}
	}
	l.out[id].WriteString(s)
}

func (l *logs) end(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended[id] = true
}

func (l *logs) Logs(ctx context.Context, id string, follow bool) (io.ReadCloser, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.noLog[id] {
		return nil, executor.ErrNoLog
	}
	if l.out[id] == nil && !l.ended[id] {
		l.out[id] = &strings.Builder{}
	}
	if l.out[id] == nil {
		return nil, executor.ErrUnknownAttempt
	}
	return &logReader{l: l, ctx: ctx, id: id, follow: follow, upto: map[bool]int{false: l.out[id].Len()}[follow]}, nil
}

type logReader struct {
	l      *logs
	ctx    context.Context
	id     string
	follow bool
	off    int
	upto   int
}

func (r *logReader) Read(p []byte) (int, error) {
	for {
		r.l.mu.Lock()
		s, ended := r.l.out[r.id].String(), r.l.ended[r.id]
		r.l.mu.Unlock()
		end := len(s)
		if !r.follow {
			end = r.upto
		}
		if r.off < end {
			n := copy(p, s[r.off:end])
			r.off += n
			return n, nil
		}
		if !r.follow || ended {
			return 0, io.EOF
		}
		select {
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (r *logReader) Close() error { return nil }

func setup(t *testing.T) (*jobs, *httptest.Server, *logs) {
	t.Helper()
	js := &jobs{m: map[string]*qshare.Job{}}
	ls := &logs{out: map[string]*strings.Builder{}, ended: map[string]bool{}, noLog: map[string]bool{}}
	h := &Handler{Job: js.get, Logs: ls.Logs, Poll: 10 * time.Millisecond}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return js, srv, ls
}

func get(t *testing.T, srv *httptest.Server, ref, query string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + PathPrefix + url.PathEscape(ref) + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := ReadError(resp)
		return resp.StatusCode, e.Type, e.Message
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, "", string(b)
}

func TestWholeLog(t *testing.T) {
	js, srv, ls := setup(t)
	ls.write("a1", "first attempt\n")
	ls.end("a1")
	ls.write("a2", "one\ntwo\nthree\n")
	now := time.Now()
	arn := "arn:aws:batch:us-east-1:000000000000:service-job/j1"
	js.m["j1"] = &qshare.Job{ID: "j1", Name: "train", Status: qshare.JobRunning, Attempts: []qshare.Attempt{
		{N: 1, ID: "a1", StartedAt: now, StoppedAt: now},
		{N: 2, ID: "a2", StartedAt: now},
	}}
	js.m[arn] = js.m["j1"]

	for _, tc := range []struct{ ref, query, want string }{
		{"j1", "", "one\ntwo\nthree\n"},
		{arn, "", "one\ntwo\nthree\n"},
		{"j1", "?attempt=1", "first attempt\n"},
		{"j1", "?attempt=2", "one\ntwo\nthree\n"},
		{"j1", "?attempt=1&follow=true", "first attempt\n"}, // it has stopped
	} {
		status, _, body := get(t, srv, tc.ref, tc.query)
		if status != 200 || body != tc.want {
			t.Errorf("GET %s%s = %d %q, want 200 %q", tc.ref, tc.query, status, body, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	js, srv, ls := setup(t)
	js.m["waiting"] = &qshare.Job{ID: "waiting", Name: "w", Status: qshare.JobRunnable}
	js.m["sim"] = &qshare.Job{ID: "sim", Name: "s", Status: qshare.JobRunning, Attempts: []qshare.Attempt{{N: 1, ID: "sim-1", StartedAt: time.Now()}}}
	ls.noLog["sim-1"] = true
	js.m["done"] = &qshare.Job{ID: "done", Name: "d", Status: qshare.JobSucceeded, Attempts: []qshare.Attempt{{N: 1, ID: "done-1", StartedAt: time.Now()}}}
	ls.write("done-1", "x\n")
	ls.end("done-1")
	js.m["gone"] = &qshare.Job{ID: "gone", Name: "g", Status: qshare.JobFailed, Attempts: []qshare.Attempt{{N: 1, ID: "gone-1", StoppedAt: time.Now()}}}
	ls.end("gone-1") // ended, and the executor has nothing of it
	for _, tc := range []struct{ ref, query, want string }{
		{"nope", "", "does not exist"},
		{"waiting", "", "has not started yet"},
		{"sim", "", "keeps no output"},
		{"sim", "?follow=true", "keeps no output"},
		{"gone", "", "has no log"},
		{"done", "?attempt=2", "attempt 2 does not exist"},
		{"done", "?attempt=2&follow=true", "attempt 2 does not exist"},
		{"done", "?attempt=0", "not valid"},
		{"done", "?follow=maybe", "not valid"},
		{"done", "?instance=-1", "not valid"},
		{"done", "?instance=1", "keeps one log per attempt"},
	} {
		status, typ, msg := get(t, srv, tc.ref, tc.query)
		if status != 400 || typ != "ClientException" || !strings.Contains(msg, tc.want) {
			t.Errorf("GET %s%s = %d %s %q, want 400 ClientException containing %q", tc.ref, tc.query, status, typ, msg, tc.want)
		}
	}
	resp, err := http.Post(srv.URL+PathPrefix+"done", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// As the API answers a wrong method: a ClientException, through the
	// one error table; Allow says which method is.
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Amzn-ErrorType") != "ClientException" || resp.Header.Get("Allow") != "GET" {
		t.Errorf("POST = %d %s, Allow %q; want 400 ClientException, Allow GET", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), resp.Header.Get("Allow"))
	}
}

// TestFollow follows a job from before its first attempt, through a second
// attempt, to its end.
func TestFollow(t *testing.T) {
	js, srv, ls := setup(t)
	js.m["j"] = &qshare.Job{ID: "j", Name: "train", Status: qshare.JobRunnable}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+PathPrefix+"j?follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, ReadError(resp))
	}
	lines := bufio.NewScanner(resp.Body)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stream ended (%v), want %q", lines.Err(), want)
		}
		if got := lines.Text(); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	// start and end play the daemon and the executor: attempt n of j starts
	// (j runs), or its log ends and it stops (j is then status).
	start := func(n int) {
		js.update("j", func(j *qshare.Job) {
			j.Status = qshare.JobRunning
			j.Attempts = append(j.Attempts, qshare.Attempt{N: n, ID: "j-" + strconv.Itoa(n), StartedAt: time.Now()})
		})
	}
	end := func(n int, status qshare.JobStatus) {
		ls.end("j-" + strconv.Itoa(n))
		js.update("j", func(j *qshare.Job) {
			j.Attempts[n-1].StoppedAt = time.Now()
			j.Status = status
		})
	}

	start(1)
	ls.write("j-1", "epoch 1\n")
	expect("epoch 1")
	ls.write("j-1", "epoch 2\n")
	expect("epoch 2")
	// Preempted: the attempt stops, a second one starts.
	ls.write("j-1", "checkpoint saved\n")
	end(1, qshare.JobRunnable)
	expect("checkpoint saved")
	ls.write("j-2", "resumed from checkpoint\n")
	start(2)
	expect("==> attempt 2 <==")
	expect("resumed from checkpoint")
	ls.write("j-2", "done\n")
	end(2, qshare.JobSucceeded)
	expect("done")
	if lines.Scan() {
		t.Fatalf("extra line %q after the job ended", lines.Text())
	}
}

// TestFollowStopsWhenClientLeaves checks that a follow ends when its
// client disconnects, not when the attempt does.
func TestFollowStopsWhenClientLeaves(t *testing.T) {
	js, srv, ls := setup(t)
	ls.write("j-1", "hello\n")
	js.m["j"] = &qshare.Job{ID: "j", Name: "train", Status: qshare.JobRunning, Attempts: []qshare.Attempt{{N: 1, ID: "j-1", StartedAt: time.Now()}}}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+PathPrefix+"j?follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	if line, _ := r.ReadString('\n'); line != "hello\n" {
		t.Fatalf("got %q", line)
	}
	cancel()
	resp.Body.Close()
	// The server notices: httptest.Server.Close (in cleanup) waits for
	// every handler to return, so a handler stuck in its loop fails the
	// test by timing out.
}

// TestFollowWaitsForTheLogPath covers the moment between an attempt's
// creation (SCHEDULED) and its start, when the executor has not yet said
// where its log goes.
func TestFollowWaitsForTheLogPath(t *testing.T) {
	js, srv, ls := setup(t)
	js.m["j"] = &qshare.Job{ID: "j", Name: "train", Status: qshare.JobScheduled, Attempts: []qshare.Attempt{{N: 1, ID: "j-1"}}}
	if status, _, msg := get(t, srv, "j", ""); status != 400 || !strings.Contains(msg, "is starting") {
		t.Errorf("GET of a starting attempt: %d %s", status, msg)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		ls.write("j-1", "started\n")
		js.update("j", func(j *qshare.Job) {
			j.Status = qshare.JobRunning
			j.Attempts[0].StartedAt = time.Now()
		})
		time.Sleep(50 * time.Millisecond)
		ls.end("j-1")
		js.update("j", func(j *qshare.Job) {
			j.Status = qshare.JobSucceeded
			j.Attempts[0].StoppedAt = time.Now()
		})
	}()
	if status, _, body := get(t, srv, "j", "?follow=true"); status != 200 || body != "started\n" {
		t.Errorf("follow = %d %q", status, body)
	}
}

// TestInstance reads one instance of a multi-instance attempt through
// InstanceLogs, the attempt's log being instance 0's.
func TestInstance(t *testing.T) {
	js, srv, ls := setup(t)
	ls.write("a1", "instance zero\n")
	ls.write("a1/2", "instance two\n")
	ls.end("a1")
	ls.end("a1/2")
	js.m["j"] = &qshare.Job{ID: "j", Name: "n", Status: qshare.JobSucceeded, Attempts: []qshare.Attempt{{N: 1, ID: "a1", StartedAt: time.Now()}}}
	h := &Handler{Job: js.get, Logs: ls.Logs, InstanceLogs: func(ctx context.Context, id string, k int, follow bool) (io.ReadCloser, error) {
		return ls.Logs(ctx, id+"/"+strconv.Itoa(k), follow)
	}}
	srv.Config.Handler = h
	for q, want := range map[string]string{"": "instance zero\n", "?instance=0": "instance zero\n", "?instance=2": "instance two\n", "?instance=2&follow=true": "instance two\n"} {
		if status, _, body := get(t, srv, "j", q); status != 200 || body != want {
			t.Errorf("GET j%s = %d %q, want %q", q, status, body, want)
		}
	}
}
