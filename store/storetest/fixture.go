package storetest

import (
	"fmt"
	"time"

	"qshare"
)

// base is the suite's reference time: not UTC, with nanoseconds, so that a
// store that drops either is caught.
var base = time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.FixedZone("UTC+5:30", 5*3600+1800))

func ptr[T any](v T) *T { return &v }

// FullEnvironment returns a service environment with every field set.
func FullEnvironment(name string) qshare.ServiceEnvironment {
	return qshare.ServiceEnvironment{
		Name:         name,
		ARN:          "arn:aws:batch:us-east-1:000000000000:service-environment/" + name,
		Type:         "SAGEMAKER_TRAINING",
		State:        qshare.Enabled,
		Status:       qshare.StatusValid,
		StatusReason: "Service environment is valid ✓",
		CapacityLimits: []qshare.CapacityLimit{
			{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 8},
			{CapacityUnit: "ml.p4d.24xlarge", MaxCapacity: 2},
		},
		Tags:      map[string]string{"team": "ml", "cost-center": "42", "": "empty key"},
		CreatedAt: base,
	}
}

// FullPolicy returns a scheduling policy with every field set, both kinds
// of policy included.
func FullPolicy(name string) qshare.SchedulingPolicy {
	return qshare.SchedulingPolicy{
		Name:             name,
		ARN:              "arn:aws:batch:us-east-1:000000000000:scheduling-policy/" + name,
		QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"},
		FairsharePolicy:  []byte(`{"shareDecaySeconds":3600,"computeReservation":1,"shareDistribution":[{"shareIdentifier":"A*","weightFactor":0.5}]}`),
		Tags:             map[string]string{"owner": "platform"},
		CreatedAt:        base.Add(time.Second),
	}
}

// FullQueue returns a job queue with every field set.
func FullQueue(name string) qshare.JobQueue {
	return qshare.JobQueue{
		Name:                name,
		ARN:                 "arn:aws:batch:us-east-1:000000000000:job-queue/" + name,
		Type:                "SAGEMAKER_TRAINING",
		State:               qshare.Disabled,
		Status:              qshare.StatusUpdating,
		StatusReason:        "updating",
		Priority:            9999,
		SchedulingPolicyARN: "arn:aws:batch:us-east-1:000000000000:scheduling-policy/p",
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{
			{Order: 1, ServiceEnvironment: "arn:aws:batch:us-east-1:000000000000:service-environment/a"},
			{Order: 2, ServiceEnvironment: "arn:aws:batch:us-east-1:000000000000:service-environment/b"},
		},
		JobStateTimeLimitActions: []qshare.JobStateTimeLimitAction{
			{Reason: qshare.ReasonQuotaManagementLimitExceeded, State: "RUNNABLE", MaxTimeSeconds: 600, Action: "TERMINATE"},
		},
		Tags:      map[string]string{"a": "1"},
		CreatedAt: base.Add(2 * time.Second),
	}
}

// FullShare returns a quota share with every field set.
func FullShare(queue, name string) qshare.QuotaShare {
	return qshare.QuotaShare{
		Name:              name,
		ARN:               "arn:aws:batch:us-east-1:000000000000:job-queue/" + queue + "/quota-share/" + name,
		JobQueue:          queue,
		CapacityLimits:    []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 4}},
		Strategy:          qshare.StrategyLendAndBorrow,
		BorrowLimit:       qshare.BorrowUnlimited,
		InSharePreemption: qshare.Enabled,
		State:             qshare.Enabled,
		Status:            qshare.StatusValid,
		Tags:              map[string]string{"x": "y"},
		CreatedAt:         base.Add(3 * time.Second),
	}
}

// FullPlan returns a capacity plan with every field set.
func FullPlan(name string) qshare.CapacityPlan {
	return qshare.CapacityPlan{
		Name:           name,
		ARN:            "arn:aws:sagemaker:us-east-1:000000000000:training-plan/" + name,
		JobQueue:       "queue-a",
		QuotaShare:     "share-a",
		InstanceType:   "ml.p5.48xlarge",
		InstanceCount:  16,
		StartTime:      base.Add(time.Hour),
		EndTime:        base.Add(14 * 24 * time.Hour),
		WarningSeconds: ptr(int64(600)),
		CreatedAt:      base.Add(4 * time.Second),
	}
}

// FullJob returns a job with every field set, two attempts included, created
// at created.
func FullJob(id string, created time.Time) qshare.Job {
	return qshare.Job{
		ID:              id,
		ARN:             "arn:aws:batch:us-east-1:000000000000:service-job/" + id,
		Name:            "train-" + id,
		JobQueue:        "q",
		QuotaShare:      "research",
		ShareIdentifier: "blue",
		CapacityPlan:    "arn:aws:sagemaker:us-east-1:000000000000:training-plan/plan-a",
		ServiceJobType:  "SAGEMAKER_TRAINING",
		Priority:        17,
		Status:          qshare.JobRunning,
		StatusReason:    "Essential container in task exited; \"quoted\" \\ and\nnewline",
		Payload:         `{"TrainingJobName":"t-` + id + `","ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":2},"Note":"é ✓ \u2028 <&>"}`,
		Demand:          qshare.Capacity{"ml.g5.xlarge": 2, "ml.m5.large": 1},
		RetryStrategy: &qshare.RetryStrategy{
			Attempts: 3,
			EvaluateOnExit: []qshare.EvaluateOnExit{
				{Action: "RETRY", OnStatusReason: "Host EC2*"},
				{Action: "EXIT", OnStatusReason: "*"},
			},
		},
		PreemptionRetries:      ptr(2),
		AttemptDurationSeconds: 3600,
		Tags:                   map[string]string{"project": "llm", "run": id},
		ClientToken:            "token-" + id,
		RequestHash:            "sha256:0123456789abcdef",
		CreatedAt:              created,
		ScheduledAt:            created.Add(time.Millisecond),
		StartedAt:              created.Add(2 * time.Millisecond),
		StoppedAt:              created.Add(time.Hour + 7),
		RunnableSince:          created.Add(time.Nanosecond),
		IsTerminated:           true,
		Attempts: []qshare.Attempt{
			{
				N: 1, ID: id + "-1", ResourceARN: "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + id + "-1",
				ScheduledAt: created.Add(time.Millisecond), StartedAt: created.Add(2 * time.Millisecond),
				StoppedAt: created.Add(time.Minute), StatusReason: "preempted by share research",
				Preempted: true, ExitCode: ptr(137), LogPath: "/var/lib/qshare/logs/" + id + "-1.log",
				Executor: []byte{0, 1, 0xfe, 0xff, '\n', '"'}, ExecutorName: "gpu-box",
			},
			{
				N: 2, ID: id + "-2", ResourceARN: "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + id + "-2",
				ScheduledAt: created.Add(2 * time.Minute), StartedAt: created.Add(3 * time.Minute),
				StoppedAt: created.Add(time.Hour), StatusReason: "Essential container exited",
				Preempted: true, ExitCode: ptr(1), LogPath: "/var/lib/qshare/logs/" + id + "-2.log",
				Executor: []byte(`{"pid":4242,"start":1234567}`), ExecutorName: "prod-k8s",
			},
		},
		Preemptions:    1,
		FailedAttempts: 1,
		Version:        5,
	}
}

// job returns a small job, as a submit writes it: queued, no attempts.
func job(i int, created time.Time) qshare.Job {
	id := fmt.Sprintf("job-%06d", i)
	return qshare.Job{
		ID:             id,
		ARN:            "arn:aws:batch:us-east-1:000000000000:service-job/" + id,
		Name:           id,
		JobQueue:       "q",
		QuotaShare:     "s",
		ServiceJobType: "SAGEMAKER_TRAINING",
		Priority:       i % 10,
		Status:         qshare.JobSubmitted,
		Payload:        `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`,
		Demand:         qshare.Capacity{"ml.g5.xlarge": 1},
		CreatedAt:      created,
		Version:        1,
	}
}

// JobIDs returns the set of the IDs of jobs, for a test that checks which
// jobs a Load found.
func JobIDs(jobs []qshare.Job) map[string]bool {
	ids := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		ids[j.ID] = true
	}
	return ids
}
