package kubetest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PlayCommand is the container command that the played kubelet runs as a
// Program: a container whose command is [PlayCommand] and whose arguments
// are Program.Args. Any other container runs as an empty Program (it exits
// 0 at once).
const PlayCommand = "/qshare-play"

// WrapperCommand is the Kubernetes executor's data wrapper in a pod
// (kubernetes.BinDir's qshare): a command [WrapperCommand, PlayCommand]
// plays the Program too, as the wrapper would run it; the wrapper itself,
// its transfers and its kill at the stop's grace, is not played (its
// tests run it outside a pod).
const WrapperCommand = "/opt/qshare/qshare"

// Program is what a played container does, in place of a real process.
type Program struct {
	// Run is how long it runs before it exits on its own.
	Run time.Duration
	// Exit is its exit code then.
	Exit int
	// OnStop is how it reacts to SIGTERM: "die" (the default: it dies of
	// the signal), "checkpoint" (it exits 0 after Checkpoint) or "ignore"
	// (it runs on until it is killed).
	OnStop string
	// Checkpoint is how long a "checkpoint" stop takes.
	Checkpoint time.Duration
	// Output is a line it writes to its standard output as it starts.
	Output string
	// Failure is what it writes to SageMaker's failure file,
	// /opt/ml/output/failure, before it exits on its own; the played
	// kubelet makes it the termination message when the pod's
	// terminationMessagePath names that file.
	Failure string
	// OOM makes it exceed its memory limit when it would exit on its own:
	// it is killed (exit code 137, reason OOMKilled).
	OOM bool
	// Save is what it writes to its checkpoint volume (the volume mounted
	// at $SM_CHECKPOINT_DIR) when it checkpoints on a stop. At its start
	// it writes "resumed from <what the volume holds>" to its standard
	// output when the volume holds something.
	Save string
	// Checkpoints makes Payload name a CheckpointConfig (SageMaker's
	// default LocalPath), so that the job has a checkpoint directory: the
	// Kubernetes executor makes its claim only then. It is the payload's,
	// not the container's, and Args leaves it out.
	Checkpoints bool
}

// Args returns the container arguments that make the played kubelet run p.
func (p Program) Args() []string {
	a := []string{"run=" + p.Run.String(), "exit=" + strconv.Itoa(p.Exit)}
	if p.OnStop != "" {
		a = append(a, "onstop="+p.OnStop)
	}
	if p.Checkpoint > 0 {
		a = append(a, "checkpoint="+p.Checkpoint.String())
	}
	if p.Output != "" {
		a = append(a, "output="+p.Output)
	}
	if p.Failure != "" {
		a = append(a, "failure="+p.Failure)
	}
	if p.OOM {
		a = append(a, "oom=true")
	}
	if p.Save != "" {
		a = append(a, "save="+p.Save)
	}
	return a
}

// ParseProgram reads a container's command and arguments as a Program.
func ParseProgram(command, args []string) (Program, error) {
	var p Program
	if len(command) == 2 && command[0] == WrapperCommand {
		command = command[1:]
	}
	if len(command) != 1 || command[0] != PlayCommand {
		return p, nil
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return p, fmt.Errorf("program argument %q is not key=value", a)
		}
		var err error
		switch k {
		case "run":
			p.Run, err = time.ParseDuration(v)
		case "exit":
			p.Exit, err = strconv.Atoi(v)
		case "onstop":
			p.OnStop = v
		case "checkpoint":
			p.Checkpoint, err = time.ParseDuration(v)
		case "output":
			p.Output = v
		case "failure":
			p.Failure = v
		case "oom":
			p.OOM = v == "true"
		case "save":
			p.Save = v
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return p, fmt.Errorf("program argument %q: %v", a, err)
		}
	}
	return p, nil
}

// Payload returns a CreateTrainingJob payload whose container runs p, on
// count instances of typ, with env as its Environment, a hyperparameter
// epochs=3, and a CheckpointConfig where p.Checkpoints says so.
func (p Program) Payload(typ string, count int, env map[string]string) string {
	m := map[string]any{
		"TrainingJobName": "t",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "example.com/train:1", "TrainingInputMode": "File",
			"ContainerEntrypoint": []string{PlayCommand}, "ContainerArguments": p.Args()},
		"RoleArn":         "arn:aws:iam::000000000000:role/test",
		"ResourceConfig":  map[string]any{"InstanceType": typ, "InstanceCount": count, "VolumeSizeInGB": 1},
		"Environment":     env,
		"HyperParameters": map[string]string{"epochs": "3"},
	}
	if p.Checkpoints {
		// No S3Uri: the checkpoints stay on the job's claim, and the pod
		// is the training container alone (with an S3Uri it would stage
		// and upload through qshare's image, which the played kubelet
		// does not run).
		m["CheckpointConfig"] = map[string]string{"LocalPath": "/opt/ml/checkpoints"}
	}
	b, _ := json.Marshal(m)
	return string(b)
}
