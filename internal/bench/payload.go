package bench

import (
	"encoding/json"
	"fmt"

	"qshare/trainingjob"
)

// benchImage is recorded in payloads; no executor pulls it.
const benchImage = "qshare-bench:latest"

// Payload returns a SageMaker CreateTrainingJob request in JSON for count
// instances of instanceType that runs entrypoint (the process executor)
// with env in its Environment (QSHARE_SIM_DURATION for the simulated one).
func Payload(name, instanceType string, count int64, entrypoint []string, env map[string]string) string {
	return payloadWith(name, instanceType, count, entrypoint, env, nil)
}

// payloadWith is Payload, with edit (if not nil) given the request before
// it is marshalled.
func payloadWith(name, instanceType string, count int64, entrypoint []string, env map[string]string, edit func(*trainingjob.Request)) string {
	r := trainingjob.Request{
		TrainingJobName: name,
		AlgorithmSpecification: trainingjob.AlgorithmSpecification{
			TrainingImage:       benchImage,
			TrainingInputMode:   "File",
			ContainerEntrypoint: entrypoint,
		},
		ResourceConfig: trainingjob.ResourceConfig{InstanceType: instanceType, InstanceCount: &count, VolumeSizeInGB: 1},
		Environment:    env,
	}
	if edit != nil {
		edit(&r)
	}
	data, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("bench: a payload of plain strings failed to marshal: %v", err))
	}
	return string(data)
}
