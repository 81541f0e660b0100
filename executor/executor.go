// Package executor declares how qshare runs the attempts of service jobs. The
// daemon decides (through the engine) and an Executor carries out: it starts
// an attempt, stops it with a grace period, reports how it ended, and on a
// restart recovers the attempts that were running.
//
// Implementations live in their own packages (process/, simulated/, later
// kubernetes/ and slurm/) and must all pass the conformance suite in
// executortest/.
package executor

import (
	"context"
	"errors"
	"io"
	"time"

	"qshare"
	"qshare/trainingjob"
)

// Spec is everything an executor needs to start one attempt.
type Spec struct {
	JobID     string
	JobName   string
	AttemptID string
	// Attempt numbers the job's attempts from 1.
	Attempt int
	Queue   string
	Share   string
	// Demand is the capacity the attempt holds, per instance type.
	Demand qshare.Capacity
	// Payload is the SageMaker CreateTrainingJob request, as submitted.
	Payload string
	// ResourceARN is the attempt's training-job ARN (its
	// latestAttempt.serviceResourceId): the attempt's outputs go to S3
	// under the training job name it ends with (TrainingJobName).
	ResourceARN string
	// RunAs is the Unix user (a name or uid) the attempt's processes run
	// as: the unixUser of the principal that submitted the job, with
	// authentication on. Empty means the executor's own choice (the process
	// executor's --run-as, or the server's user). An executor that runs
	// processes and cannot run them as RunAs fails Start with an EINVALID
	// *qshare.Error that says why; one that runs no local processes (the
	// simulated executor) ignores it.
	RunAs string
	// Executor names the executor that runs the attempt in the server's
	// Set, as the daemon recorded it with the attempt ("" is DefaultName).
	// An executor itself ignores it; Set.ByAttempt routes Start by it.
	Executor string
}

// TrainingJobName returns the training job name of the attempt: the last
// part of ResourceARN, or, for a Spec without one, the name the daemon
// would give it (trainingjob.AttemptName of the payload's TrainingJobName
// or the job's name).
func (s Spec) TrainingJobName(req *trainingjob.Request) string {
	if s.ResourceARN != "" {
		return trainingjob.NameOfARN(s.ResourceARN)
	}
	name := s.JobName
	if req != nil && req.TrainingJobName != "" {
		name = req.TrainingJobName
	}
	return trainingjob.AttemptName(name, s.JobID, s.Attempt)
}

// Handle is what an executor returns for a started attempt. The daemon
// persists it with the attempt and gives it back to Recover after a restart.
type Handle struct {
	AttemptID string
	StartedAt time.Time
	// LogPath names where the attempt's output goes, if the executor keeps
	// it, for people reading the job's record: it is kept in the store as it
	// always was, but nobody outside the executor reads the log through it
	// (it need not be a local file); Executor.Logs serves the log.
	LogPath string
	// State is the executor's own record of the attempt (for example a pid
	// and the process's start time), opaque to everyone else.
	State []byte
}

// Exit is how an attempt ended.
type Exit struct {
	AttemptID string
	// ExitCode is the process's exit code, or -1 when it was ended by a signal.
	ExitCode int
	// Signal names the signal that ended it, if any ("SIGKILL").
	Signal string
	// Reason is the attempt's status reason: "Essential process exited with
	// code 3", the first line of a failure file, and so on.
	Reason string
	// Stopped is true when the attempt ended after a Stop.
	Stopped bool
	// Lost is true when the executor saw the attempt end but could not learn
	// how (its supervisor died before recording the exit): the daemon then
	// requeues the job, as it does for an attempt that Recover finds Lost.
	Lost bool
	At   time.Time
}

// Succeeded reports whether the attempt exited with code 0 on its own.
func (x Exit) Succeeded() bool { return x.ExitCode == 0 && x.Signal == "" && !x.Stopped }

// AwaitExit is the end of an implementation's Wait: it blocks until done is
// closed and returns *exit, which the executor sets before it closes done,
// or until ctx is done.
func AwaitExit(ctx context.Context, done <-chan struct{}, exit *Exit) (Exit, error) {
	select {
	case <-done:
		return *exit, nil
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}

// ErrUnknownAttempt is returned by Wait and Stop for an attempt the executor
// neither started nor recovered.
var ErrUnknownAttempt = errors.New("executor: unknown attempt")

// ErrNoLog is returned by Logs for an attempt whose output the executor
// does not keep (the simulated executor keeps none).
var ErrNoLog = errors.New("executor: the attempt keeps no log")

// Recovery is what Recover found about an attempt after a restart.
type Recovery int

// Recovery outcomes.
const (
	// Running: the attempt is still running and the executor re-attached to
	// it; Wait reports its end.
	Running Recovery = iota + 1
	// Exited: the attempt ended while the server was down; Wait returns its Exit at once.
	Exited
	// Lost: its fate cannot be known; the daemon requeues the job.
	Lost
)

// ValidatePayload is the Validate of an executor whose ValidateRequest
// (validate) does the checking: the payload parsed, then its request
// validated.
func ValidatePayload(payload string, demand qshare.Capacity, validate func(*trainingjob.Request, qshare.Capacity) error) error {
	req, err := trainingjob.Parse(payload)
	if err != nil {
		return err
	}
	return validate(req, demand)
}

// Executor runs attempts. Implementations are safe for concurrent use.
// These methods are everything the daemon and the server's log endpoint
// ask of an executor, and executortest tests each of them.
//
// Start and Stop are idempotent by attempt ID, so a daemon that crashed
// between persisting a decision and acting on it can simply act again.
type Executor interface {
	// Name identifies the executor ("process", "simulated").
	Name() string
	// Validate checks a job's payload at submit time; it returns a
	// *qshare.Error with code EINVALID that says what is wrong.
	Validate(payload string, demand qshare.Capacity) error
	// ValidateRequest is Validate for a payload that the caller has
	// already parsed with trainingjob.Parse (the daemon does, for the
	// demand), so that a submit parses its payload once: it returns what
	// Validate returns for that payload, and only reads req.
	ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error
	// Start prepares and launches an attempt and returns once it runs.
	// Starting an attempt ID that was already started returns its handle.
	Start(ctx context.Context, s Spec) (Handle, error)
	// Stop ends an attempt: a polite signal, then a forced kill after grace
	// (0 means the executor's default). It returns without waiting for the
	// end; Wait reports it. Stopping an attempt that has ended is a no-op.
	Stop(ctx context.Context, attemptID string, grace time.Duration) error
	// Wait blocks until the attempt has ended (its processes, and whatever
	// capacity it held, are gone) and returns how.
	Wait(ctx context.Context, attemptID string) (Exit, error)
	// Recover re-attaches to an attempt started before a restart.
	Recover(ctx context.Context, h Handle) (Recovery, error)
	// Forget drops an ended attempt from the executor's memory once the
	// daemon has recorded its end, so that a server that runs for months
	// does not keep every attempt it ever ran. After Forget, Wait and Stop
	// of the attempt return ErrUnknownAttempt; Logs may still serve its
	// log. Forgetting an attempt that has not ended, or that the executor
	// does not know, is a no-op.
	Forget(attemptID string)
	// Logs returns the attempt's output (stdout and stderr), oldest first,
	// from wherever the executor keeps it (files, a cluster's log API).
	// Without follow, the reader ends after what was written by the time
	// of the call. With follow, it also returns what is written later and
	// ends (io.EOF) once the attempt has ended and all its output has been
	// returned; cancelling ctx or closing the reader ends it early. An
	// attempt that has written nothing yet has an empty log, not an error.
	// Logs serves attempts started before a restart or forgotten as long
	// as the executor still has their output. It returns ErrNoLog when the
	// executor keeps no output for the attempt, ErrUnknownAttempt when it
	// knows nothing of it, and a *qshare.Error with code EINVALID when the
	// log cannot be served as it is (a job planted a link in its place).
	Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error)
	// Close releases the executor's resources. Attempts keep running.
	Close() error
}

// CapacityChecker is implemented by executors whose hosts have a fixed
// amount of some resource (GPUs). CheckCapacity returns a warning, or "",
// for a service environment with these limits.
type CapacityChecker interface {
	CheckCapacity(limits qshare.Capacity) string
}

// PendingReasoner is implemented by executors whose started attempts can
// wait in a scheduler of their own (a Slurm partition, a Kubernetes
// scheduler) before their processes run: Start has returned, the attempt
// holds its capacity in qshare, but nothing of it runs yet. The daemon
// shows the reason in the job's statusReason while it lasts.
//
// PendingReason returns why the attempt's processes do not run yet, in the
// words of the executor's scheduler ("Resources", "ReqNodeNotAvail"), or ""
// when they run, the attempt has ended, or the executor does not know it.
// It must not block: it returns what the executor last learned (the daemon
// calls it from its control loop), and it is safe for concurrent use.
type PendingReasoner interface {
	PendingReason(attemptID string) string
}

// PendingReasonsVersioner may be implemented by a PendingReasoner whose
// reasons change only on events it sees: PendingReasonsVersion returns a
// number that changes whenever the PendingReason of any attempt may have
// changed (a counter). The daemon then asks for the attempts' reasons only
// when it has changed, or when an attempt has started since it last
// asked, instead of asking for every running attempt on every cycle. It
// must not block, and it is safe for concurrent use.
type PendingReasonsVersioner interface {
	PendingReasonsVersion() uint64
}

// HealthReporter is implemented by executors that run attempts through a
// service of their own (Slurm's slurmctld, a Kubernetes API server) that
// can stop answering while the attempts go on. The daemon shows the answer
// in every service environment's statusReason while it lasts.
//
// Health returns "" while the service answers, else what is wrong and
// what it means for the attempts, in a sentence for people. It must not
// block: it returns what the executor last learned. It is safe for
// concurrent use.
type HealthReporter interface {
	Health() string
}

// Sweeper is implemented by executors whose attempts outlive the server in
// a system that others see (a Slurm cluster, a Kubernetes namespace), where
// something it started can be left without a record in the store (the
// server died between starting an attempt and recording it elsewhere, or
// the store was restored from a backup): nobody would wait for it, and it
// would hold capacity that qshare does not count.
//
// After a restart the daemon calls Sweep with the IDs of every attempt the
// store holds unfinished (whether or not it is started yet). Sweep ends
// whatever the executor started that is not among them, except attempts
// started or recovered through this executor since (so that a Sweep that
// is retried while the daemon starts new attempts never ends one), and
// returns the IDs of the attempts it ended. It is never adopted: a later
// Start or Recover of such an ID finds it ended.
type Sweeper interface {
	Sweep(ctx context.Context, keep map[string]bool) ([]string, error)
}

// JobFinisher is implemented by executors that keep something for a job
// across its attempts (a checkpoint volume). The daemon calls JobFinished
// once the job has reached SUCCEEDED or FAILED, after it has recorded the
// end; the executor then releases what it kept. A call for a job it knows
// nothing of is a no-op; it must not block.
type JobFinisher interface {
	JobFinished(jobID string)
}

// JobSweeper is implemented by JobFinishers whose kept things outlive the
// server in a system that others see (a checkpoint claim in a Kubernetes
// namespace): a job that ended while the server was down, or whose
// JobFinished had not done its work when the server stopped, would keep
// them forever, and nothing would ever call JobFinished for it again.
//
// After a restart the daemon calls SweepJobs, in the background and
// retried like Sweep, with the IDs of every job the store holds
// unfinished. The executor releases what it keeps for any other job,
// except the jobs it has started or recovered an attempt of since it was
// made, and returns the IDs of the jobs it released. An error means it
// could not look (its service does not answer); the daemon asks again.
type JobSweeper interface {
	SweepJobs(ctx context.Context, live map[string]bool) ([]string, error)
}

// InstanceLogger is implemented by executors that run an attempt of N
// instances as N separate processes with their own logs (the Kubernetes
// executor's pods). InstanceLogs is Logs of instance k (from 0; Logs is
// instance 0), with Logs's errors, and an EINVALID *qshare.Error for an
// instance the attempt does not have.
type InstanceLogger interface {
	InstanceLogs(ctx context.Context, attemptID string, instance int, follow bool) (io.ReadCloser, error)
}
