// Package trainingjob reads the serviceRequestPayload of a service job: a
// SageMaker CreateTrainingJob request in JSON. The API uses it at submit time
// to find the job's demand (ResourceConfig); executors use it to find what to
// run (AlgorithmSpecification), its environment, hyperparameters, input
// channels, checkpoint path and stopping condition.
//
// Unknown members are ignored: Batch passes the payload through, and so does
// qshare, keeping it whole for the executor.
package trainingjob

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"qshare"
)

// Request is the part of a CreateTrainingJob request that qshare reads.
// EnableNetworkIsolation leaves the training containers no network but
// each other's (the container executor; the others refuse it).
type Request struct {
	TrainingJobName        string                 `json:"TrainingJobName,omitempty"`
	AlgorithmSpecification AlgorithmSpecification `json:"AlgorithmSpecification"`
	RoleArn                string                 `json:"RoleArn,omitempty"`
	EnableNetworkIsolation bool                   `json:"EnableNetworkIsolation,omitempty"`
	HyperParameters        map[string]string      `json:"HyperParameters,omitempty"`
	InputDataConfig        []Channel              `json:"InputDataConfig,omitempty"`
	OutputDataConfig       *OutputDataConfig      `json:"OutputDataConfig,omitempty"`
	ResourceConfig         ResourceConfig         `json:"ResourceConfig"`
	StoppingCondition      *StoppingCondition     `json:"StoppingCondition,omitempty"`
	Environment            map[string]string      `json:"Environment,omitempty"`
	CheckpointConfig       *CheckpointConfig      `json:"CheckpointConfig,omitempty"`
	Tags                   []Tag                  `json:"Tags,omitempty"`
}

// AlgorithmSpecification says what the training container runs.
type AlgorithmSpecification struct {
	TrainingImage       string   `json:"TrainingImage,omitempty"`
	TrainingInputMode   string   `json:"TrainingInputMode,omitempty"`
	ContainerEntrypoint []string `json:"ContainerEntrypoint,omitempty"`
	ContainerArguments  []string `json:"ContainerArguments,omitempty"`
}

// Channel is one input data channel.
type Channel struct {
	ChannelName string     `json:"ChannelName"`
	DataSource  DataSource `json:"DataSource"`
	// InputMode overrides AlgorithmSpecification.TrainingInputMode for
	// this channel: File, FastFile or Pipe.
	InputMode         string `json:"InputMode,omitempty"`
	ContentType       string `json:"ContentType,omitempty"`
	CompressionType   string `json:"CompressionType,omitempty"`
	RecordWrapperType string `json:"RecordWrapperType,omitempty"`
}

// DataSource locates a channel's data.
type DataSource struct {
	S3DataSource *S3DataSource `json:"S3DataSource,omitempty"`
	// FileSystemDataSource (EFS, FSx for Lustre) is read only to refuse
	// it: no executor mounts one.
	FileSystemDataSource map[string]any `json:"FileSystemDataSource,omitempty"`
}

// S3DataSource is an S3 (or, for local runs, file://) location.
type S3DataSource struct {
	S3DataType string `json:"S3DataType,omitempty"`
	S3Uri      string `json:"S3Uri"`
	// S3DataDistributionType is FullyReplicated (the default) or
	// ShardedByS3Key.
	S3DataDistributionType string `json:"S3DataDistributionType,omitempty"`
}

// OutputDataConfig is where SageMaker uploads the model and the output.
type OutputDataConfig struct {
	S3OutputPath string `json:"S3OutputPath,omitempty"`
	// CompressionType is GZIP (the default: model.tar.gz) or NONE (the
	// model's files as they are).
	CompressionType string `json:"CompressionType,omitempty"`
}

// ResourceConfig is the capacity the training job asks for: either one
// instance type and count, or instance groups.
type ResourceConfig struct {
	InstanceType   string          `json:"InstanceType,omitempty"`
	InstanceCount  *int64          `json:"InstanceCount,omitempty"`
	VolumeSizeInGB int64           `json:"VolumeSizeInGB,omitempty"`
	InstanceGroups []InstanceGroup `json:"InstanceGroups,omitempty"`
	// TrainingPlanArn names a training plan; in qshare, a capacity plan
	// (qshare.CapacityPlan) the job runs on, and only on.
	TrainingPlanArn string `json:"TrainingPlanArn,omitempty"`
}

// InstanceGroup is one group of a heterogeneous cluster.
type InstanceGroup struct {
	InstanceGroupName string `json:"InstanceGroupName,omitempty"`
	InstanceType      string `json:"InstanceType"`
	InstanceCount     *int64 `json:"InstanceCount,omitempty"`
}

// StoppingCondition bounds the training job's run time.
type StoppingCondition struct {
	// MaxRuntimeInSeconds is nil when the payload leaves it out (no limit);
	// a value given must be at least 1.
	MaxRuntimeInSeconds  *int64 `json:"MaxRuntimeInSeconds,omitempty"`
	MaxWaitTimeInSeconds int64  `json:"MaxWaitTimeInSeconds,omitempty"`
}

// CheckpointConfig names where checkpoints go. LocalPath is the directory
// inside the job's working directory that survives across attempts.
type CheckpointConfig struct {
	S3Uri     string `json:"S3Uri,omitempty"`
	LocalPath string `json:"LocalPath,omitempty"`
}

// Tag is a SageMaker tag.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// MaxInstanceCount bounds one InstanceCount, so that sums of counts can never
// overflow.
const MaxInstanceCount = 1 << 20

// Parse reads a payload and validates it (Validate). It fails with a
// *qshare.Error (EINVALID) when the payload is not a JSON object of the
// CreateTrainingJob shape, or breaks one of SageMaker's rules.
func Parse(payload string) (*Request, error) {
	r, err := decode(payload)
	if err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// ParseAccepted reads the payload of a job that a submit accepted, perhaps
// under the older, looser rules of an earlier version: the daemon after a
// restart, and an executor starting an attempt, use it. It decodes as Parse
// does but enforces only the rule that protects what runs, that the
// Environment sets none of qshare's own variables (PayloadControl), so
// that a job queued before an upgrade (a TrainingJobName with '_', a
// relative CheckpointConfig.LocalPath) still starts, and a job planted
// before it still cannot set QSHARE_SUPERVISE.
func ParseAccepted(payload string) (*Request, error) {
	r, err := decode(payload)
	if err != nil {
		return nil, err
	}
	if err := firstBad(r.Environment, reservedVariable); err != nil {
		return nil, err
	}
	return r, nil
}

// decode reads a payload into a Request, without validating it.
func decode(payload string) (*Request, error) {
	if strings.TrimSpace(payload) == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload is required: give a SageMaker CreateTrainingJob request as JSON")
	}
	// Fast path: json.Unmarshal accepts exactly the payloads that decode
	// without error and have nothing but space after the object, without a
	// Decoder and its buffer (half of a submit's parsing allocations).
	// Anything it refuses is parsed again below, so every error message
	// stays the Decoder's.
	var r Request
	if json.Unmarshal([]byte(payload), &r) == nil {
		return &r, nil
	}
	r = Request{}
	dec := json.NewDecoder(bytes.NewReader([]byte(payload)))
	if err := dec.Decode(&r); err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload is not a valid CreateTrainingJob request: %s", describeJSONError(err))
	}
	if dec.More() {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload has data after the JSON object: give exactly one object")
	}
	return &r, nil
}

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case asErr(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("member %s should be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("expected a JSON object, not a JSON %s", te.Value)
	case asErr(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	}
	return err.Error()
}

func jsonKind(k string) string {
	switch k {
	case "int64", "int", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "a " + k
}

// Demand returns the capacity the job needs, per instance type: the
// InstanceCount of ResourceConfig.InstanceType, or the InstanceCounts of the
// InstanceGroups summed per type. A missing InstanceCount means 1. It fails
// with EINVALID when no instance type can be found or a count is below 1.
func (r *Request) Demand() (qshare.Capacity, error) {
	rc := r.ResourceConfig
	d := qshare.Capacity{}
	count := func(field string, p *int64) (int64, error) {
		if p == nil {
			return 1, nil
		}
		if *p < 1 || *p > MaxInstanceCount {
			return 0, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload %s is %d: it must be from 1 to %d", field, *p, MaxInstanceCount)
		}
		return *p, nil
	}
	if len(rc.InstanceGroups) > 0 {
		if rc.InstanceType != "" {
			return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload ResourceConfig has both InstanceType and InstanceGroups: give one or the other")
		}
		if len(rc.InstanceGroups) > 5 {
			return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload ResourceConfig.InstanceGroups has %d groups: at most 5 are allowed", len(rc.InstanceGroups))
		}
		for i, g := range rc.InstanceGroups {
			if g.InstanceType == "" {
				return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload ResourceConfig.InstanceGroups[%d].InstanceType is required", i)
			}
			n, err := count(fmt.Sprintf("ResourceConfig.InstanceGroups[%d].InstanceCount", i), g.InstanceCount)
			if err != nil {
				return nil, err
			}
			d[g.InstanceType] += n
		}
		return d, nil
	}
	if rc.InstanceType == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload has no instance type: set ResourceConfig.InstanceType (and InstanceCount), or ResourceConfig.InstanceGroups")
	}
	n, err := count("ResourceConfig.InstanceCount", rc.InstanceCount)
	if err != nil {
		return nil, err
	}
	d[rc.InstanceType] = n
	return d, nil
}

// Command returns ContainerEntrypoint followed by ContainerArguments.
func (r *Request) Command() []string {
	cmd := append([]string(nil), r.AlgorithmSpecification.ContainerEntrypoint...)
	return append(cmd, r.AlgorithmSpecification.ContainerArguments...)
}

// MaxRuntimeSeconds returns StoppingCondition.MaxRuntimeInSeconds, or 0
// when the payload gives none.
func (r *Request) MaxRuntimeSeconds() int64 {
	if r.StoppingCondition == nil || r.StoppingCondition.MaxRuntimeInSeconds == nil {
		return 0
	}
	return *r.StoppingCondition.MaxRuntimeInSeconds
}
