package logstream

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare"
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

func setup(t *testing.T) (*jobs, *httptest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	js := &jobs{m: map[string]*qshare.Job{}}
	h := &Handler{Job: js.get, Poll: 10 * time.Millisecond}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return js, srv, dir
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
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
	js, srv, dir := setup(t)
	log1, log2 := filepath.Join(dir, "a1.log"), filepath.Join(dir, "a2.log")
	write(t, log1, "first attempt\n")
	// The second attempt's log was rotated twice: .2 is the oldest.
	write(t, log2+".2", "one\n")
	write(t, log2+".1", "two\n")
	write(t, log2, "three\n")
	now := time.Now()
	arn := "arn:aws:batch:us-east-1:000000000000:service-job/j1"
	js.m["j1"] = &qshare.Job{ID: "j1", Name: "train", Status: qshare.JobRunning, Attempts: []qshare.Attempt{
		{N: 1, LogPath: log1, StoppedAt: now},
		{N: 2, LogPath: log2},
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
	js, srv, dir := setup(t)
	js.m["waiting"] = &qshare.Job{ID: "waiting", Name: "w", Status: qshare.JobRunnable}
	js.m["sim"] = &qshare.Job{ID: "sim", Name: "s", Status: qshare.JobRunning, Attempts: []qshare.Attempt{{N: 1, StartedAt: time.Now()}}}
	js.m["done"] = &qshare.Job{ID: "done", Name: "d", Status: qshare.JobSucceeded, Attempts: []qshare.Attempt{{N: 1, LogPath: filepath.Join(dir, "x")}}}
	for _, tc := range []struct{ ref, query, want string }{
		{"nope", "", "does not exist"},
		{"waiting", "", "has not started yet"},
		{"sim", "", "keeps no output"},
		{"done", "?attempt=2", "attempt 2 does not exist"},
		{"done", "?attempt=2&follow=true", "attempt 2 does not exist"},
		{"done", "?attempt=0", "not valid"},
		{"done", "?follow=maybe", "not valid"},
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
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

// TestFollow follows a job from before its first attempt, through a log
// rotation and a second attempt, to its end.
func TestFollow(t *testing.T) {
	js, srv, dir := setup(t)
	js.m["j"] = &qshare.Job{ID: "j", Name: "train", Status: qshare.JobRunnable}
	log1, log2 := filepath.Join(dir, "1.log"), filepath.Join(dir, "2.log")

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

	write(t, log1, "")
	js.update("j", func(j *qshare.Job) {
		j.Status = qshare.JobRunning
		j.Attempts = append(j.Attempts, qshare.Attempt{N: 1, LogPath: log1})
	})
	appendTo(t, log1, "epoch 1\n")
	expect("epoch 1")
	// Rotate: the old file becomes .1 and a new one starts.
	appendTo(t, log1, "epoch 2\n")
	if err := os.Rename(log1, log1+".1"); err != nil {
		t.Fatal(err)
	}
	write(t, log1, "epoch 3\n")
	expect("epoch 2")
	expect("epoch 3")
	// Preempted: the attempt stops, a second one starts.
	appendTo(t, log1, "checkpoint saved\n")
	js.update("j", func(j *qshare.Job) {
		j.Attempts[0].StoppedAt = time.Now()
		j.Status = qshare.JobRunnable
	})
	expect("checkpoint saved")
	write(t, log2, "resumed from checkpoint\n")
	js.update("j", func(j *qshare.Job) {
		j.Status = qshare.JobRunning
		j.Attempts = append(j.Attempts, qshare.Attempt{N: 2, LogPath: log2})
	})
	expect("==> attempt 2 <==")
	expect("resumed from checkpoint")
	appendTo(t, log2, "done\n")
	js.update("j", func(j *qshare.Job) {
		j.Attempts[1].StoppedAt = time.Now()
		j.Status = qshare.JobSucceeded
	})
	expect("done")
	if lines.Scan() {
		t.Fatalf("extra line %q after the job ended", lines.Text())
	}
}

// TestFollowStopsWhenClientLeaves checks that a follow ends when its
// client disconnects, not when the attempt does.
func TestFollowStopsWhenClientLeaves(t *testing.T) {
	js, srv, dir := setup(t)
	log := filepath.Join(dir, "1.log")
	write(t, log, "hello\n")
	js.m["j"] = &qshare.Job{ID: "j", Name: "train", Status: qshare.JobRunning, Attempts: []qshare.Attempt{{N: 1, LogPath: log}}}
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
	js, srv, dir := setup(t)
	log := filepath.Join(dir, "1.log")
	js.m["j"] = &qshare.Job{ID: "j", Name: "train", Status: qshare.JobScheduled, Attempts: []qshare.Attempt{{N: 1}}}
	if status, _, msg := get(t, srv, "j", ""); status != 400 || !strings.Contains(msg, "is starting") {
		t.Errorf("GET of a starting attempt: %d %s", status, msg)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		write(t, log, "started\n")
		js.update("j", func(j *qshare.Job) {
			j.Status = qshare.JobRunning
			j.Attempts[0].StartedAt = time.Now()
			j.Attempts[0].LogPath = log
		})
		time.Sleep(50 * time.Millisecond)
		js.update("j", func(j *qshare.Job) {
			j.Status = qshare.JobSucceeded
			j.Attempts[0].StoppedAt = time.Now()
		})
	}()
	if status, _, body := get(t, srv, "j", "?follow=true"); status != 200 || body != "started\n" {
		t.Errorf("follow = %d %q", status, body)
	}
}
