package container

import (
	"context"
	"fmt"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/process"
	"qshare/trainingjob"
)

// arn is the training job ARN of an attempt, as the server's SageMaker
// endpoint names it.
func (e *Executor) arn(s executor.Spec) string {
	if s.ResourceARN != "" {
		return s.ResourceARN // the daemon's, as DescribeTrainingJob names it
	}
	return trainingjob.AttemptARN(e.o.Region, e.o.AccountID, trainingjob.AttemptName(s.JobName, s.JobID, s.Attempt))
}

// plan is the data contract's transfers of an attempt (Options.Data), nil
// when there are none. The instances of an attempt share the job's
// directory, so each sees every object of a channel (as FullyReplicated
// does; ShardedByS3Key is not split among them).
func (e *Executor) plan(s executor.Spec, req *trainingjob.Request, dirs process.JobDirs) (*data.Plan, error) {
	if e.o.Data == nil {
		return nil, nil
	}
	p, err := data.NewPlan(req, data.Attempt{TrainingJobName: trainingjob.NameOfARN(e.arn(s)), Instance: 0, Instances: 1},
		data.Dirs{Input: dirs.Input, Model: dirs.Model, OutputData: dirs.OutputData, Checkpoint: dirs.Checkpoint})
	if err != nil {
		return nil, err
	}
	if p.Empty() {
		return nil, nil
	}
	return &p, nil
}

// stageData carries out the first half of the data contract before the
// containers start: the S3 channels into input/data and the checkpoints
// from S3, through an FS that writes only beneath the job's directory and
// follows no link; the progress is the attempt's PendingReason. A failure
// is the job's (ClientError: …), not a lack of capacity.
func (e *Executor) stageData(ctx context.Context, s executor.Spec, p *data.Plan, dirs process.JobDirs) error {
	if p == nil {
		return nil
	}
	fsys, err := data.DirFS(dirs.Job)
	if err != nil {
		return qshare.Errorf(qshare.EINTERNAL, "container executor: opening the directory of job %s: %v", s.JobID, err)
	}
	defer data.CloseFS(fsys)
	progress := func(pr data.Progress) { e.progress(s.AttemptID, pr.String()) }
	defer e.progressDone(s.AttemptID)
	if err := e.o.Data.Stage(ctx, fsys, *p, progress); err != nil {
		return qshare.Errorf(qshare.EINVALID, "%s", data.Reason(err))
	}
	if err := e.o.Data.RestoreCheckpoints(ctx, fsys, *p); err != nil {
		return qshare.Errorf(qshare.EINVALID, "%s", data.Reason(err))
	}
	return nil
}

// upload carries out the second half once the containers have ended,
// whatever their exit: the model and output/data to S3OutputPath, the
// checkpoints a last time. An attempt that succeeded but whose upload
// failed has failed, with the upload's reason, as in SageMaker.
func (e *Executor) upload(ctx context.Context, a *attempt, x executor.Exit) executor.Exit {
	p := a.rec.Data
	if e.o.Data == nil || p == nil || a.rec.Job == "" {
		return x
	}
	fsys, err := data.DirFS(a.rec.Job)
	if err != nil {
		e.log.Warn("container executor: opening a job's directory for its upload", "attempt", a.id, "err", err)
		return x
	}
	defer data.CloseFS(fsys)
	err = e.o.Data.Upload(ctx, fsys, *p)
	if err == nil && p.Checkpoints != nil {
		_, err = e.o.Data.NewCheckpointer(fsys, *p).Save(ctx)
	}
	if err != nil {
		e.log.Warn("container executor: uploading an attempt's model and output", "attempt", a.id, "err", err)
		switch {
		case x.Succeeded():
			x.ExitCode, x.Reason = -1, data.Reason(err)
		case x.Reason == data.KilledReason: // as the other executors say it
			x.Reason = data.AfterKillReason(x.Reason, data.Reason(err))
		default:
			x.Reason = fmt.Sprintf("%s; then %s", x.Reason, data.Reason(err))
		}
	}
	return x
}
