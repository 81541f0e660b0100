package container

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"qshare"
	"qshare/executor"
)

// logName is the file of instance k's log in the attempt's directory:
// output.log for algo-1, output-algo-K.log for the others.
func logName(k int) string {
	if k == 0 {
		return fileOutput
	}
	return fmt.Sprintf("output-algo-%d.log", k+1)
}

// copyLogs copies each container's log from the engine into the attempt's
// directory; with follow, until the container has ended. The engine keeps
// a container's whole log while the container exists, and the executor
// removes a container only after this copy has ended, so each copy writes
// the file afresh: a recovered attempt's log is whole, with nothing twice.
// A stream the engine breaks while the container runs is taken again.
// The copy of instance 0 closes a.logDone when it ends.
func (e *Executor) copyLogs(ctx context.Context, a *attempt, follow bool) {
	var wg sync.WaitGroup
	for k, name := range a.rec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var exited chan struct{}
			if k < len(a.exited) {
				exited = a.exited[k]
			}
			e.copyLog(ctx, name, filepath.Join(e.attemptDir(a.id), logName(k)), follow, exited)
		}()
	}
	wg.Wait()
	select {
	case <-a.logDone:
	default:
		close(a.logDone)
	}
}

func (e *Executor) copyLog(ctx context.Context, name, path string, follow bool, exited <-chan struct{}) {
	for try := 0; ; try++ {
		f, err := e.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			e.log.Warn("container executor: opening an attempt's log", "container", name, "err", err)
			return
		}
		rc, err := e.cli.ContainerLogs(ctx, name, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow})
		if err == nil {
			_, err = stdcopy.StdCopy(f, f, rc)
			rc.Close()
		}
		f.Close()
		if !follow || ctx.Err() != nil || isNotFound(err) {
			return
		}
		if err == nil {
			// The stream ended: with the container (its wait says so
			// within the second), or because the engine went away while
			// it runs.
			select {
			case <-exited:
				return
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			in, ierr := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if ierr == nil && (in.Container.State == nil || !in.Container.State.Running) {
				return
			}
			if isNotFound(ierr) {
				return
			}
		}
		// A stream that broke, or was not given, is asked again, whole:
		// the container, and so its log, stays until this copy has ended
		// (or the watch has given up on it).
		if !e.pause(ctx, try) {
			return
		}
	}
}

// Logs returns algo-1's output, from the copy in the attempt's directory:
// it serves attempts forgotten, recovered, or whose containers are gone.
func (e *Executor) Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error) {
	return e.InstanceLogs(ctx, attemptID, 0, follow)
}

// InstanceLogs is Logs of instance k (algo-(k+1)).
func (e *Executor) InstanceLogs(ctx context.Context, attemptID string, k int, follow bool) (io.ReadCloser, error) {
	if !nameRe.MatchString(attemptID) {
		return nil, executor.ErrUnknownAttempt
	}
	dir := e.attemptDir(attemptID)
	var rec record
	if err := e.readJSON(filepath.Join(dir, fileRecord), &rec); err != nil {
		return nil, executor.ErrUnknownAttempt
	}
	if k < 0 || k >= len(rec.Containers) {
		return nil, qshare.Errorf(qshare.EINVALID, "attempt %s has %d instances: there is no instance %d", attemptID, len(rec.Containers), k)
	}
	e.mu.Lock()
	a := e.attempts[attemptID]
	e.mu.Unlock()
	path := filepath.Join(dir, logName(k))
	lf, err := executor.OpenLogFile(func() (*os.File, error) { return e.fs.OpenLog(attemptID, path) }, func() bool { return e.logEnded(a, dir) })
	if err != nil {
		return nil, err
	}
	return executor.NewLogTail(ctx, lf, follow, 50*time.Millisecond), nil
}

// logEnded reports whether nothing more will be written to the logs of
// attempt a (nil: not in memory, its end is judged from its exit file),
// whose directory is dir.
func (e *Executor) logEnded(a *attempt, dir string) bool {
	if a != nil {
		select {
		case <-a.logDone:
			select {
			case <-a.Done:
				return true
			default:
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			return a.Ended
		default:
			return false
		}
	}
	return e.fs.IsFile(filepath.Join(dir, fileExit))
}
