package executor

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"qshare"
	"qshare/trainingjob"
)

// EnvStopGrace is the payload Environment key of a job's own grace period
// (seconds, or a Go duration such as 90s): how long its checkpoint on a
// stop takes. Every executor honours it over the server's setting.
const EnvStopGrace = "QSHARE_STOP_GRACE"

// DefaultStopGrace is every executor's grace period of a Stop when neither
// the caller, the job (EnvStopGrace) nor the executor's options set one.
const DefaultStopGrace = 120 * time.Second

// OrDefault returns v, or def when v is not positive: how the executors
// read an option (a count, a size, a duration) that was left out.
func OrDefault[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// NoNetworkIsolation refuses a payload that sets EnableNetworkIsolation,
// for an executor (named by name) whose jobs use the host's or the pod's
// network: the container executor honours it; a job that asks for it
// elsewhere would run with the network it asked not to have.
func NoNetworkIsolation(req *trainingjob.Request, name string) error {
	if !req.EnableNetworkIsolation {
		return nil
	}
	return qshare.Errorf(qshare.EINVALID, "serviceRequestPayload sets EnableNetworkIsolation, which the %s executor cannot honour: its jobs use the network of the machine they run on. Submit the job to a queue whose environment runs the container executor, or leave it unset", name)
}

// JobGrace returns the payload's own grace period (EnvStopGrace), 0 when it
// sets none, or an EINVALID *qshare.Error naming the field.
func JobGrace(req *trainingjob.Request) (time.Duration, error) {
	v, ok := req.Environment[EnvStopGrace]
	if !ok {
		return 0, nil
	}
	g, err := parseGrace(v)
	if err != nil {
		return 0, qshare.Errorf(qshare.EINVALID, "Environment.%s is %q: give a non-negative number of seconds or a Go duration such as 90s", EnvStopGrace, v)
	}
	return g, nil
}

func parseGrace(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("bad grace period")
	}
	return d, nil
}

// CheckEnvironment checks that the payload's Environment can be given to a
// process: names non-empty without '=' or NUL, values without NUL. It
// returns an EINVALID *qshare.Error naming the variable.
func CheckEnvironment(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return qshare.Errorf(qshare.EINVALID, "Environment has the variable name %q: a name must be non-empty and hold no '=' or NUL", k)
		}
		if strings.ContainsRune(v, 0) {
			return qshare.Errorf(qshare.EINVALID, "Environment.%s holds a NUL byte, which a process environment cannot carry", k)
		}
	}
	return nil
}

// TrainingDirs are an attempt's SageMaker directories as its processes see
// them. Config may be empty, for an executor that does not name it, and
// Checkpoint for an attempt that has no checkpoint directory (the
// Kubernetes executor gives one only to a payload with a
// CheckpointConfig, as SageMaker does).
type TrainingDirs struct {
	Model, Output, OutputData, Input, Config, Checkpoint string
}

// TrainingEnv returns the variables of SageMaker's training contract and
// qshare's own that an attempt's processes get, over the payload's
// Environment (which they win over): SM_HP_* and SM_HPS from the
// hyperparameters, the SM_* directories, SM_CURRENT_INSTANCE_TYPE,
// SM_CHANNELS, and QSHARE_JOB_ID, QSHARE_JOB_NAME, QSHARE_ATTEMPT,
// QSHARE_ATTEMPT_ID, QSHARE_JOB_QUEUE and QSHARE_QUOTA_SHARE. The host
// variables (SM_CURRENT_HOST, SM_HOSTS) are the executor's to add.
func TrainingEnv(s Spec, req *trainingjob.Request, d TrainingDirs, instanceType string) map[string]string {
	env := map[string]string{}
	for k, v := range req.Environment {
		env[k] = v
	}
	hps := map[string]any{}
	for k, v := range req.HyperParameters {
		var j any
		if json.Unmarshal([]byte(v), &j) == nil {
			hps[k] = j
		} else {
			hps[k] = v
		}
		env["SM_HP_"+EnvName(k)] = v
	}
	b, _ := json.Marshal(hps)
	env["SM_HPS"] = string(b)
	env["SM_MODEL_DIR"] = d.Model
	env["SM_OUTPUT_DIR"] = d.Output
	env["SM_OUTPUT_DATA_DIR"] = d.OutputData
	env["SM_INPUT_DIR"] = d.Input
	if d.Config != "" {
		env["SM_INPUT_CONFIG_DIR"] = d.Config
	}
	if d.Checkpoint != "" {
		env["SM_CHECKPOINT_DIR"] = d.Checkpoint
	}
	env["SM_CURRENT_INSTANCE_TYPE"] = instanceType
	var channels []string
	for _, c := range req.InputDataConfig {
		channels = append(channels, c.ChannelName)
	}
	b, _ = json.Marshal(channels)
	if channels == nil {
		b = []byte("[]")
	}
	env["SM_CHANNELS"] = string(b)
	env["QSHARE_JOB_ID"] = s.JobID
	env["QSHARE_JOB_NAME"] = s.JobName
	env["QSHARE_ATTEMPT"] = strconv.Itoa(s.Attempt)
	env["QSHARE_ATTEMPT_ID"] = s.AttemptID
	env["QSHARE_JOB_QUEUE"] = s.Queue
	env["QSHARE_QUOTA_SHARE"] = s.Share
	return env
}

// EnvList returns env as a process's environment: "NAME=value" strings,
// sorted by name, so that an attempt's environment is the same at every
// start.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// EnvName maps a hyperparameter or channel name to the part of a variable
// name SageMaker makes of it: upper case, with every character but letters,
// digits and '_' replaced by '_'.
func EnvName(s string) string {
	b := []byte(strings.ToUpper(s))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// InstanceOf returns the one instance type of a request and how many
// instances it runs: ResourceConfig.InstanceType, else the demand's first
// type, and the demand's count of it, else InstanceCount, else 1. It fails
// with an EINVALID *qshare.Error, naming the executor (who), when the
// demand holds more than one type.
func InstanceOf(req *trainingjob.Request, demand qshare.Capacity, who string) (string, int, error) {
	typ := req.ResourceConfig.InstanceType
	ts := demand.Types()
	if typ == "" && len(ts) > 0 {
		typ = ts[0]
	}
	if len(ts) > 1 {
		return "", 0, qshare.Errorf(qshare.EINVALID, "ResourceConfig: the %s executor runs one instance type per job, not %s", who, strings.Join(ts, " and "))
	}
	n := 0
	if req.ResourceConfig.InstanceCount != nil {
		n = int(*req.ResourceConfig.InstanceCount)
	}
	if v, ok := demand[typ]; ok && v > 0 {
		n = int(v)
	}
	return typ, max(n, 1), nil
}

// StopGrace is the grace period of a stop, by one rule for every
// executor: the job's own (EnvStopGrace), since the job knows how long its
// checkpoint takes; else the caller's; else the executor's own setting
// (fallback). Zero is unset at each step.
func StopGrace(job, caller, fallback time.Duration) time.Duration {
	switch {
	case job > 0:
		return job
	case caller > 0:
		return caller
	}
	return fallback
}

// EnvironmentAndGrace is CheckEnvironment of the payload's Environment,
// then JobGrace.
func EnvironmentAndGrace(req *trainingjob.Request) (time.Duration, error) {
	if err := CheckEnvironment(req.Environment); err != nil {
		return 0, err
	}
	return JobGrace(req)
}
