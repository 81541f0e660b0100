package sagemaker

import (
	"encoding/json"
	"math"
	"strings"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/trainingjob"
)

// The training job statuses of SageMaker (TrainingJobStatus).
const (
	statusInProgress = "InProgress"
	statusCompleted  = "Completed"
	statusFailed     = "Failed"
	statusStopping   = "Stopping"
	statusStopped    = "Stopped"
)

// timeoutReason starts the status reason of an attempt that ran past its
// job's attempt duration: SageMaker's job is then Stopped
// (MaxRuntimeExceeded), not Failed.
const timeoutReason = daemon.TimeoutReason

// echoed are the members of a CreateTrainingJob request that
// DescribeTrainingJob gives back as they were sent: the attempt's request
// is the job's payload, so its own fields come back as the SDK sent them.
var echoed = []string{
	"AlgorithmSpecification", "RoleArn", "HyperParameters", "InputDataConfig",
	"OutputDataConfig", "ResourceConfig", "VpcConfig", "StoppingCondition",
	"EnableNetworkIsolation", "EnableInterContainerTrafficEncryption",
	"EnableManagedSpotTraining", "CheckpointConfig", "DebugHookConfig",
	"ExperimentConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig",
	"ProfilerConfig", "ProfilerRuleConfigurations", "Environment",
	"RetryStrategy", "RemoteDebugConfig", "InfraCheckConfig",
}

// transition is one SecondaryStatusTransitions entry.
type transition struct {
	Status        string `json:"Status"`
	StartTime     epoch  `json:"StartTime"`
	EndTime       *epoch `json:"EndTime,omitempty"`
	StatusMessage string `json:"StatusMessage,omitempty"`
}

// epoch is a time as awsJson1_1 sends it: seconds since the Unix epoch,
// with milliseconds.
type epoch time.Time

// MarshalJSON writes the seconds with three decimals.
func (e epoch) MarshalJSON() ([]byte, error) {
	ms := time.Time(e).UnixMilli()
	return json.Marshal(float64(ms) / 1000)
}

func ep(t time.Time) *epoch {
	if t.IsZero() {
		return nil
	}
	e := epoch(t)
	return &e
}

// view is what DescribeTrainingJob and ListTrainingJobs say of one
// attempt: the attempt is the training job.
type view struct {
	job        *qshare.Job
	att        qshare.Attempt
	name, arn  string
	status     string
	secondary  string
	failure    string
	lastChange time.Time
}

// viewOf reads attempt a of job j as a SageMaker training job.
func viewOf(j *qshare.Job, a qshare.Attempt) view {
	v := view{job: j, att: a, arn: a.ResourceARN, name: trainingjob.NameOfARN(a.ResourceARN)}
	latest := j.LatestAttempt() != nil && j.LatestAttempt().ID == a.ID
	v.lastChange = latestTime(a.ScheduledAt, a.StartedAt, a.StoppedAt)
	switch {
	case a.StoppedAt.IsZero() && latest && (j.IsTerminated || a.StatusReason != ""):
		// A stop is decided (terminate, preemption, timeout) and not done.
		v.status, v.secondary = statusStopping, "Stopping"
	case a.StoppedAt.IsZero() && (a.StartedAt.IsZero() || j.Status == qshare.JobScheduled || j.Status == qshare.JobStarting):
		v.status, v.secondary = statusInProgress, "Starting"
	case a.StoppedAt.IsZero():
		v.status, v.secondary = statusInProgress, "Training"
	case a.ExitCode != nil && *a.ExitCode == 0 && !a.Preempted:
		v.status, v.secondary = statusCompleted, "Completed"
	case a.Preempted, strings.HasPrefix(a.StatusReason, timeoutReason),
		latest && j.IsTerminated && a.ExitCode == nil:
		v.status, v.secondary = statusStopped, "Stopped"
		if strings.HasPrefix(a.StatusReason, timeoutReason) {
			v.secondary = "MaxRuntimeExceeded"
		}
	default:
		v.status, v.secondary = statusFailed, "Failed"
		v.failure = a.StatusReason
		if v.failure == "" {
			v.failure = "The training job's attempt ended without a reason"
		}
	}
	return v
}

func latestTime(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// transitions are the attempt's SecondaryStatusTransitions, from what the
// store knows of it: scheduled (Starting), its process started
// (Downloading, then Training: the executor stages the input channels
// before it reports the start, so Downloading takes no time of its own in
// this record), and how it ended.
func (v view) transitions() []transition {
	a := v.att
	out := []transition{{Status: "Starting", StartTime: epoch(a.ScheduledAt), StatusMessage: "Preparing the instances for training"}}
	if a.StartedAt.IsZero() {
		if !a.StoppedAt.IsZero() {
			out[0].EndTime = ep(a.StoppedAt)
			return append(out, v.end(a.StoppedAt))
		}
		return out
	}
	out[0].EndTime = ep(a.StartedAt)
	out = append(out,
		transition{Status: "Downloading", StartTime: epoch(a.StartedAt), EndTime: ep(a.StartedAt), StatusMessage: "Downloading the input data"},
		transition{Status: "Training", StartTime: epoch(a.StartedAt), StatusMessage: "Training in progress"})
	if a.StoppedAt.IsZero() {
		if v.status == statusStopping {
			out[len(out)-1].EndTime = ep(v.lastChange)
			out = append(out, transition{Status: "Stopping", StartTime: epoch(v.lastChange), StatusMessage: a.StatusReason})
		}
		return out
	}
	out[len(out)-1].EndTime = ep(a.StoppedAt)
	if v.status == statusCompleted {
		out = append(out, transition{Status: "Uploading", StartTime: epoch(a.StoppedAt), EndTime: ep(a.StoppedAt), StatusMessage: "Uploading the generated training model"})
	}
	return append(out, v.end(a.StoppedAt))
}

// end is the last transition of an ended attempt.
func (v view) end(at time.Time) transition {
	msg := v.att.StatusReason
	if v.status == statusCompleted {
		msg = "Training job completed"
	}
	return transition{Status: v.secondary, StartTime: epoch(at), EndTime: ep(at), StatusMessage: msg}
}

// seconds is the attempt's training time, rounded up to whole seconds,
// once it has ended after starting; 0 otherwise.
func (v view) seconds() int64 {
	a := v.att
	if a.StartedAt.IsZero() || a.StoppedAt.IsZero() || a.StoppedAt.Before(a.StartedAt) {
		return 0
	}
	return int64(math.Max(1, math.Ceil(a.StoppedAt.Sub(a.StartedAt).Seconds())))
}

// describe is the DescribeTrainingJob answer: the members qshare knows of
// the attempt, and the request's own members from the job's payload, which
// it returns too, decoded by member.
func (v view) describe() (map[string]any, map[string]json.RawMessage) {
	out := map[string]any{}
	var payload map[string]json.RawMessage
	if json.Unmarshal([]byte(v.job.Payload), &payload) == nil {
		for _, k := range echoed {
			if raw, ok := payload[k]; ok && string(raw) != "null" {
				out[k] = raw
			}
		}
	}
	out["TrainingJobName"] = v.name
	out["TrainingJobArn"] = v.arn
	out["TrainingJobStatus"] = v.status
	out["SecondaryStatus"] = v.secondary
	out["SecondaryStatusTransitions"] = v.transitions()
	out["ModelArtifacts"] = map[string]string{"S3ModelArtifacts": modelArtifacts(payload, v.name)}
	out["CreationTime"] = epoch(v.att.ScheduledAt)
	out["LastModifiedTime"] = epoch(v.lastChange)
	if t := ep(v.att.StartedAt); t != nil {
		out["TrainingStartTime"] = t
	}
	if t := ep(v.att.StoppedAt); t != nil {
		out["TrainingEndTime"] = t
	}
	if s := v.seconds(); s > 0 || !v.att.StoppedAt.IsZero() {
		out["TrainingTimeInSeconds"] = s
		out["BillableTimeInSeconds"] = s
	}
	if v.failure != "" {
		out["FailureReason"] = v.failure
	}
	return out, payload
}

// modelArtifacts is where SageMaker puts the model of the training job
// named name: OutputDataConfig.S3OutputPath/<name>/output/model.tar.gz, the
// place the data contract uploads it to. Without an S3OutputPath it is "".
func modelArtifacts(payload map[string]json.RawMessage, name string) string {
	var out struct {
		S3OutputPath string `json:"S3OutputPath"`
	}
	if json.Unmarshal(payload["OutputDataConfig"], &out) != nil || out.S3OutputPath == "" {
		return ""
	}
	return strings.TrimRight(out.S3OutputPath, "/") + "/" + name + "/output/model.tar.gz"
}

// summary is one entry of ListTrainingJobs.
type summary struct {
	TrainingJobName   string `json:"TrainingJobName"`
	TrainingJobArn    string `json:"TrainingJobArn"`
	CreationTime      epoch  `json:"CreationTime"`
	TrainingEndTime   *epoch `json:"TrainingEndTime,omitempty"`
	LastModifiedTime  epoch  `json:"LastModifiedTime"`
	TrainingJobStatus string `json:"TrainingJobStatus"`
	SecondaryStatus   string `json:"SecondaryStatus"`
}

func (v view) summary() summary {
	return summary{TrainingJobName: v.name, TrainingJobArn: v.arn, CreationTime: epoch(v.att.ScheduledAt),
		TrainingEndTime: ep(v.att.StoppedAt), LastModifiedTime: epoch(v.lastChange),
		TrainingJobStatus: v.status, SecondaryStatus: v.secondary}
}
