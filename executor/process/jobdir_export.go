//go:build unix

package process

import (
	"path/filepath"

	"qshare"
	"qshare/executor"
	"qshare/trainingjob"
)

// JobDirs are a job's directories on the host, laid out as the process
// executor lays them out (jobs/<jobID> beneath the data directory), for an
// executor that shows them to its job under other paths (the container
// executor binds them at /opt/ml).
type JobDirs struct {
	// Job is <data>/jobs/<jobID>.
	Job string
	// Input, Config (input/config), Data (input/data), Model, Output and
	// OutputData (output/data) are SageMaker's directories of the job.
	Input, Config, Data, Model, Output, OutputData string
	// Checkpoint is checkpoints, or CheckpointConfig.LocalPath beneath the
	// job's directory: the same for every attempt of the job.
	Checkpoint string
}

// RunUser is a Unix user that a job runs as: its uid, its primary gid and
// its other groups.
type RunUser struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32
}

// LookupUser finds the user name (a name or a numeric uid) as the process
// executor does for --run-as and a principal's unixUser: it must exist and
// must not be root. Its error is an EINVALID *qshare.Error naming field.
func LookupUser(field, name string) (*RunUser, error) {
	u, err := lookupUser(field, name)
	if err != nil {
		return nil, err
	}
	return &RunUser{Name: u.Name, UID: u.UID, GID: u.GID, Groups: u.Groups}, nil
}

// PrepareJob creates the directory of s's job beneath b's root and the
// SageMaker training toolkit's files in input/config
// (hyperparameters.json, a one-host resourceconfig.json of algo-1,
// inputdataconfig.json), exactly as the process executor does before it
// starts an attempt, and returns where they are. Nothing is written
// through a link a job planted: such a link fails it with an EINVALID
// *qshare.Error that names the path relative to the job's directory. With
// owner set, the job's directories are given to that user.
func PrepareJob(b *Beneath, s executor.Spec, req *trainingjob.Request, owner *RunUser) (JobDirs, error) {
	if err := pathComponent("job ID", s.JobID); err != nil {
		return JobDirs{}, err
	}
	if err := pathComponent("attempt ID", s.AttemptID); err != nil {
		return JobDirs{}, err
	}
	l, err := jobLayout(b.fs.root, s.JobID, s.AttemptID, req)
	if err != nil {
		return JobDirs{}, err
	}
	var ju *jobUser
	if owner != nil {
		ju = &jobUser{Name: owner.Name, UID: owner.UID, GID: owner.GID, Groups: owner.Groups}
	}
	if _, err := prepare(b.fs, l, s, req, nil, nil, ju); err != nil {
		if isLinkErr(err) {
			return JobDirs{}, qshare.Errorf(qshare.EINVALID, "%s: qshare follows no links in a job's directory, so the attempt is not started and nothing is written through it", linkIn(err, s.JobID))
		}
		return JobDirs{}, qshare.Errorf(qshare.EINTERNAL, "preparing the directory of job %s: %s", s.JobID, jobRel(err, s.JobID))
	}
	return JobDirs{Job: l.Job, Input: l.Input, Config: l.Config, Data: filepath.Join(l.Input, "data"), Model: l.Model,
		Output: l.Output, OutputData: l.OutputData, Checkpoint: l.Checkpoint}, nil
}

// FailureLine returns the first non-empty line (at most 1 KiB) of a job's
// failure file at path beneath b's root, SageMaker's SM_OUTPUT_DIR/failure,
// as the process executor reads it into an attempt's reason: only a
// regular file reached without a link and with no other hard link is
// read. It returns "" when there is none.
func FailureLine(b *Beneath, path string) string { return firstLine(b.fs, path) }

// ChannelPath returns the host directory of an input channel whose S3Uri
// is a local file:// URI, "" for another scheme (staged elsewhere), or an
// EINVALID *qshare.Error for a malformed local URI.
func ChannelPath(c trainingjob.Channel) (string, error) { return channelPath(c) }

// CheckJobDir checks at submit time what PrepareJob would refuse of a
// request: a CheckpointConfig.LocalPath outside the job's directory, or a
// malformed local (file://) channel URI. Its error is an EINVALID
// *qshare.Error naming the field.
func CheckJobDir(req *trainingjob.Request) error {
	if _, err := checkpointRel(req); err != nil {
		return err
	}
	for _, c := range req.InputDataConfig {
		if _, err := channelPath(c); err != nil {
			return err
		}
	}
	return nil
}
