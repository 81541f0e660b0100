package process

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/trainingjob"
)

// dataWrap returns the command and environment that the supervisor
// starts for an attempt: the payload's command, wrapped (data.Wrap) when
// the payload has S3 channels, an S3OutputPath or a CheckpointConfig.S3Uri.
// The wrapper is this binary, run as the job (its user, its process
// group, its directory): it stages the channels and checkpoints before the
// program starts, so the download counts against the job's run time and a
// stop ends it, and uploads the model, the output and the checkpoints
// after the program has exited. The attempt runs on one host, so it is
// instance 0 of 1 and gets every object of a sharded channel.
//
// It also says whether the wrapper downloads anything before the program
// starts (watchStaging then shows its progress).
func (e *Executor) dataWrap(s executor.Spec, req *trainingjob.Request, l layout, env []string) ([]string, []string, bool, error) {
	p, err := data.NewPlan(req, data.Attempt{TrainingJobName: s.TrainingJobName(req), Instance: 0, Instances: 1},
		data.Dirs{Input: l.Input, Model: l.Model, OutputData: l.OutputData, Checkpoint: l.Checkpoint})
	if err != nil {
		return nil, nil, false, err
	}
	if p.Empty() {
		return req.Command(), env, false, nil
	}
	ep := e.o.S3
	if e.o.S3Keys != nil {
		if ep.AccessKeyID, ep.SecretAccessKey, err = e.o.S3Keys.Grant(s.AttemptID); err != nil {
			return nil, nil, false, qshare.Errorf(qshare.EINTERNAL, "process executor: the S3 key of attempt %s: %v", s.AttemptID, err)
		}
	}
	cmd, env, err := data.Wrap(e.o.Supervisor[0], req.Command(), env, data.Wrapper{Plan: p, Endpoint: ep, Root: l.Job, FailureFile: filepath.Join(l.Output, "failure")})
	return cmd, env, len(p.Channels) > 0 || p.Checkpoints != nil, err
}

// revoke ends attempt id's S3 key, if it has one.
func (e *Executor) revoke(id string) {
	if e.o.S3Keys != nil {
		e.o.S3Keys.Revoke(id)
	}
}

// stagingProgress is what the executor last read of the staging of the
// attempts whose wrapper downloads: the attempt's PendingReason.
type stagingProgress struct {
	mu      sync.Mutex
	reason  map[string]string
	version atomic.Uint64
}

func (p *stagingProgress) set(id, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason == nil {
		p.reason = map[string]string{}
	}
	if p.reason[id] == reason {
		return
	}
	if reason == "" {
		delete(p.reason, id)
	} else {
		p.reason[id] = reason
	}
	p.version.Add(1)
}

// PendingReason says, while an attempt's wrapper downloads its input data
// and checkpoints, how far it is ("Downloading input data: 3.1 GB of 8.0
// GB"); "" once the program runs, or for an attempt that downloads
// nothing. The daemon shows it in the job's statusReason. It does not
// block.
func (e *Executor) PendingReason(attemptID string) string {
	e.staging.mu.Lock()
	defer e.staging.mu.Unlock()
	return e.staging.reason[attemptID]
}

// PendingReasonsVersion changes whenever a PendingReason may have.
func (e *Executor) PendingReasonsVersion() uint64 { return e.staging.version.Load() }

// stagingPoll is how often watchStaging reads the log's end.
const stagingPoll = 500 * time.Millisecond

// watchStaging follows the staging of attempt a in its log (the wrapper's
// progress lines, data.ProgressLine, then data.StagedLine) until the
// program starts or the attempt ends, for PendingReason.
func (e *Executor) watchStaging(a *attempt, log string) {
	e.staging.set(a.id, "Downloading input data")
	go func() {
		defer e.staging.set(a.id, "")
		t := time.NewTicker(stagingPoll)
		defer t.Stop()
		for {
			select {
			case <-a.Done:
				return
			case <-e.closed:
				return
			case <-t.C:
			}
			last, staged := e.lastStagingLine(log)
			if staged {
				return
			}
			if last != "" {
				e.staging.set(a.id, last)
			}
		}
	}()
}

// lastStagingLine reads the end of an attempt's log (the server's own
// file, opened beneath the data directory) and returns its last progress
// line, without "qshare: ", and whether the staging has ended.
func (e *Executor) lastStagingLine(log string) (string, bool) {
	f, err := e.fs.OpenFile(log, os.O_RDONLY, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	const tail = 8 << 10
	st, err := f.Stat()
	if err != nil {
		return "", false
	}
	if off := st.Size() - tail; off > 0 {
		f.Seek(off, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tail))
	last := ""
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == data.StagedLine:
			return "", true
		case strings.HasPrefix(line, data.ProgressLine):
			last = strings.TrimPrefix(line, "qshare: ")
		}
	}
	return last, false
}
