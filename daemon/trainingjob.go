package daemon

import (
	"strings"

	"qshare"
	"qshare/trainingjob"
)

// TrainingJob returns the job and the attempt that the SageMaker training
// job named name is (its ARN's last part, as trainingjob.AttemptName forms
// it), compared without case as SageMaker compares names. A name of the
// current form is found through its job ID at once; one of the older form
// (trainingjob.LegacyAttemptName), which jobs stored before it still hold,
// through an index of those names (d.legacy), also at once. It fails with ENOTFOUND, in
// SageMaker's words, when no attempt has that name.
func (d *Daemon) TrainingJob(name string) (*qshare.Job, qshare.Attempt, error) {
	notFound := qshare.Errorf(qshare.ENOTFOUND, "Requested resource not found: no training job is named %q", truncateID(name))
	if !trainingjob.ValidTrainingJobName(name) {
		return nil, qshare.Attempt{}, notFound
	}
	match := func(j *qshare.Job) (qshare.Attempt, bool) {
		for i := len(j.Attempts) - 1; i >= 0; i-- {
			if strings.EqualFold(trainingjob.NameOfARN(j.Attempts[i].ResourceARN), name) {
				return j.Attempts[i], true
			}
		}
		return qshare.Attempt{}, false
	}
	if id, n, ok := trainingjob.ParseAttemptName(name); ok {
		d.mu.RLock()
		j := d.jobs[id]
		d.mu.RUnlock()
		if j != nil && n <= len(j.Attempts) {
			if a, ok := match(j); ok {
				return j, a, nil
			}
		}
		return nil, qshare.Attempt{}, notFound
	}
	if !trainingjob.LegacyAttemptName(name) {
		return nil, qshare.Attempt{}, notFound
	}
	d.mu.RLock()
	j := d.jobs[d.legacy[strings.ToLower(name)]]
	d.mu.RUnlock()
	if j != nil {
		if a, ok := match(j); ok {
			return j, a, nil
		}
	}
	return nil, qshare.Attempt{}, notFound
}

// EachJob calls f with each job the daemon holds, in no set order, until
// f returns false. The jobs are the durable versions that DescribeServiceJob
// shows; f must not change them, and must not call the daemon (it runs
// under the daemon's read lock, which holds back the commits of the
// control loop while it runs, so it must be quick).
func (d *Daemon) EachJob(f func(*qshare.Job) bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, j := range d.jobs {
		if !f(j) {
			return
		}
	}
}

// TimeoutReason starts the status reason of an attempt that the daemon
// stopped because it ran past the job's attempt duration
// (timeoutConfig.attemptDurationSeconds), so that a view of the attempt
// (the SageMaker endpoint's Stopped, MaxRuntimeExceeded) can tell it from
// a failure.
const TimeoutReason = timeoutPrefix
