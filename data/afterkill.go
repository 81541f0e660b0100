package data

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// UploadAfterKillLimit bounds the upload that follows a stop's kill (an
// executor's run of UploadOnlyCommand, or Run's after it killed the
// program at the end of Wrapper.StopGrace): the attempt's capacity stays
// held until it ends.
const UploadAfterKillLimit = 10 * time.Minute

// AfterKillLine is the line that an upload after a stop's kill starts
// with in the job's log.
const AfterKillLine = "qshare: the stop's grace period ended in a kill; uploading the model, the output and the checkpoints"

// KilledReason is the reason of an attempt whose program was killed at the
// end of a stop's grace period, in every executor.
const KilledReason = "Essential process killed by signal SIGKILL at the end of the stop grace period"

// AfterKillReason is the reason of an attempt killed at the end of a
// stop's grace period (reason) whose upload after the kill failed
// (uploadErr, "" when it did not).
func AfterKillReason(reason, uploadErr string) string {
	if uploadErr == "" {
		return reason
	}
	return reason + "; after the kill, the model was not uploaded: " + uploadErr
}

// UploadAfterKill runs the wrapper of a command that Wrap wrapped (command
// and env as Wrap returned them) in its upload-only mode
// (UploadOnlyCommand), in dir, as a process group of its own whose output
// goes to out, for at most UploadAfterKillLimit. It runs with the rights
// of the caller: an executor's step runner, which runs as the job does.
// It returns "" when the upload succeeded or the command was not wrapped,
// else why it failed (the wrapper's last line).
func UploadAfterKill(command, env []string, dir string, out io.Writer) string {
	argv, env, ok := UploadOnlyCommand(command, env)
	if !ok {
		return ""
	}
	fmt.Fprintln(out, AfterKillLine)
	last := &LastLine{W: out}
	cmd := exec.Command(argv[0])
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, last, last
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "the upload could not start: " + err.Error()
	}
	timer := time.AfterFunc(UploadAfterKillLimit, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) //nolint:errcheck // it may have ended
	err := cmd.Wait()
	late := !timer.Stop()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // whatever it left behind
	switch {
	case late:
		return fmt.Sprintf("the upload did not end within %s", UploadAfterKillLimit)
	case err == nil:
		return ""
	}
	if l := last.Last(); l != "" {
		return strings.TrimPrefix(l, "qshare: ")
	}
	return "the upload ended in failure: " + err.Error()
}

// LastLine writes to W and keeps the last line written that is not blank
// (up to 1 KiB of it): the reason that a wrapper says last.
type LastLine struct {
	W    io.Writer
	mu   sync.Mutex
	line []byte // the last complete line
	cur  []byte // the line being written
}

func (l *LastLine) Write(p []byte) (int, error) {
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
	return l.W.Write(p)
}

// Last returns the last line that is not blank, without its newline.
func (l *LastLine) Last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(bytes.TrimSpace(l.cur)) > 0 {
		return string(l.cur)
	}
	return string(l.line)
}
