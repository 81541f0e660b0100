package process

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"qshare/data"
)

// uploadAfterKillLimit bounds the upload that follows a stop's kill: the
// attempt's capacity stays held until it ends.
const uploadAfterKillLimit = 10 * time.Minute

// uploadAfterKill runs the data wrapper of j again, in its upload-only
// mode (data.UploadOnlyCommand), after a stop whose grace period ended in
// the kill of j's process group, the wrapper with it: the model, the
// output and the last checkpoints go up as SageMaker uploads them after
// its kill. It runs as the job did (its user, its directory, its
// environment, at /opt/ml if the job was), with no program, for at most
// uploadAfterKillLimit, its output in the job's log. It returns "" when
// the upload succeeded or j was not wrapped, else why it failed.
func (s *supervisor) uploadAfterKill(j *supJob) string {
	argv, env, ok := data.UploadOnlyCommand(j.cfg.Command, j.cfg.Env)
	if !ok {
		return ""
	}
	cfg := j.cfg
	cfg.Command, cfg.Env = argv, env
	fmt.Fprintln(j.log, "qshare: the stop's grace period ended in a kill; uploading the model, the output and the checkpoints")
	fail := func(err error) string {
		msg := "the upload could not start: " + err.Error()
		fmt.Fprintln(j.log, "qshare: "+msg)
		return msg
	}
	path, cands, err := locate(cfg)
	if err != nil {
		return fail(err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	u := &supJob{leaderDone: make(chan struct{})}
	// Held across the fork, so the reaper cannot reap it unregistered.
	s.mu.Lock()
	pid, _, why, err := s.fork(cfg, path, cands, jobAttr(cfg, devnull, pw))
	if err == nil {
		s.byPID[pid] = u
	}
	s.mu.Unlock()
	pw.Close()
	if err != nil {
		pr.Close()
		return fail(err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	out := &lastLineWriter{w: j.log}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, pr)
		pr.Close()
	}()
	var late atomic.Bool
	timer := time.AfterFunc(uploadAfterKillLimit, func() {
		late.Store(true)
		syscall.Kill(-pid, syscall.SIGKILL)
	})
	startErr := ""
	if why != nil {
		startErr = why()
	}
	<-u.leaderDone
	timer.Stop()
	syscall.Kill(-pid, syscall.SIGKILL) // whatever it left behind
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	switch ws := u.status; {
	case startErr != "":
		return startErr
	case late.Load():
		return fmt.Sprintf("the upload did not end within %s", uploadAfterKillLimit)
	case ws.Exited() && ws.ExitStatus() == 0:
		return ""
	}
	if l := out.last(); l != "" {
		return strings.TrimPrefix(l, "qshare: ")
	}
	return "the upload ended in failure"
}

// lastLineWriter writes to w and keeps the last line written (up to 1
// KiB of it).
type lastLineWriter struct {
	w    io.Writer
	mu   sync.Mutex
	line []byte // the last complete line
	cur  []byte // the line being written
}

func (l *lastLineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	for _, b := range p {
		switch {
		case b == '\n':
			if len(bytes.TrimSpace(l.cur)) > 0 {
				l.line = append(l.line[:0], l.cur...)
			}
			l.cur = l.cur[:0]
		case len(l.cur) < 1<<10:
			l.cur = append(l.cur, b)
		}
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lastLineWriter) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(bytes.TrimSpace(l.cur)) > 0 {
		return string(l.cur)
	}
	return string(l.line)
}
