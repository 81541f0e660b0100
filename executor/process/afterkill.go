package process

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"qshare/data"
)

// uploadAfterKill runs the data wrapper of j again, in its upload-only
// mode (data.UploadOnlyCommand), after a stop whose grace period ended in
// the kill of j's process group, the wrapper with it: the model, the
// output and the last checkpoints go up as SageMaker uploads them after
// its kill. It runs as the job did (its user, its directory, its
// environment, at /opt/ml if the job was), with no program, for at most
// data.UploadAfterKillLimit, its output in the job's log. It returns "" when
// the upload succeeded or j was not wrapped, else why it failed.
func (s *supervisor) uploadAfterKill(j *supJob) string {
	argv, env, ok := data.UploadOnlyCommand(j.cfg.Command, j.cfg.Env)
	if !ok {
		return ""
	}
	cfg := j.cfg
	cfg.Command, cfg.Env = argv, env
	fmt.Fprintln(j.log, data.AfterKillLine)
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
	pid, _, err := s.fork(cfg, path, cands, jobAttr(cfg, devnull, pw))
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
	out := &data.LastLine{W: j.log}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(out, pr)
		pr.Close()
	}()
	var late atomic.Bool
	timer := time.AfterFunc(data.UploadAfterKillLimit, func() {
		late.Store(true)
		syscall.Kill(-pid, syscall.SIGKILL)
	})
	<-u.leaderDone
	timer.Stop()
	syscall.Kill(-pid, syscall.SIGKILL) // whatever it left behind
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	switch ws := u.status; {
	case late.Load():
		return fmt.Sprintf("the upload did not end within %s", data.UploadAfterKillLimit)
	case ws.Exited() && ws.ExitStatus() == 0:
		return ""
	}
	if l := out.Last(); l != "" {
		return strings.TrimPrefix(l, "qshare: ")
	}
	return "the upload ended in failure"
}
