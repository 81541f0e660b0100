package process

import (
	"path/filepath"

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
func (e *Executor) dataWrap(s executor.Spec, req *trainingjob.Request, l layout, env []string) ([]string, []string, error) {
	p, err := data.NewPlan(req, data.Attempt{TrainingJobName: s.TrainingJobName(req), Instance: 0, Instances: 1},
		data.Dirs{Input: l.Input, Model: l.Model, OutputData: l.OutputData, Checkpoint: l.Checkpoint})
	if err != nil {
		return nil, nil, err
	}
	if p.Empty() {
		return req.Command(), env, nil
	}
	return data.Wrap(e.o.Supervisor[0], req.Command(), env, data.Wrapper{Plan: p, Endpoint: e.o.S3, Root: l.Job, FailureFile: filepath.Join(l.Output, "failure")})
}
