package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"qshare"
	"qshare/trainingjob"
)

// PlaceholderImage is the TrainingImage of the payloads that submit builds.
// qshare's executors run the command on the host, so the image only
// documents that no SageMaker image was chosen.
const PlaceholderImage = "qshare.local/placeholder:latest"

// submitOptions are the flags of `qshare submit`.
type submitOptions struct {
	queue             string
	share             string
	shareIdentifier   string
	name              string
	priority          int
	instanceType      string
	instanceCount     int
	env               []string
	retryAttempts     int
	preemptionRetries int
	timeout           time.Duration
	tags              []string
	payloadFile       string
	image             string
	checkpointDir     string
}

var submitOpts submitOptions

var submitCmd = &cobra.Command{
	Use:   "submit --queue QUEUE --share SHARE --instance-type TYPE [flags] [-- COMMAND [ARGS...]]",
	Short: "Submit a training job to a quota share",
	Long: `Submit a training job (a SageMaker training service job) to a job queue and
one of its quota shares.

submit builds the SageMaker CreateTrainingJob payload from its flags: the
command after -- becomes AlgorithmSpecification.ContainerEntrypoint and
ContainerArguments, --env the Environment, --instance-type and
--instance-count the ResourceConfig, --timeout the StoppingCondition, --name
the TrainingJobName (when it is one: 1 to 63 letters, digits and hyphens).
With --payload FILE it sends a payload you wrote, as it is (use - for
standard input).

The job's capacity is its instance count of its instance type; the share's
limits, its strategy and the job's priority decide when it runs.`,
	Example: `  # One ml.g5.xlarge for an hour, at priority 5, in share QS1 of queue training:
  qshare submit --queue training --share QS1 --instance-type ml.g5.xlarge \
      --priority 5 --name resnet-1 --timeout 1h --env EPOCHS=10 -- python train.py --lr 0.1

  # Send a payload file as it is:
  qshare submit --queue training --share QS2 --payload job.json`,
	Args: cobra.ArbitraryArgs,
	RunE: clientRun(func(cmd *cobra.Command, s *session, args []string) error {
		in, err := buildSubmit(cmd.Flags(), submitOpts, args, cmd.InOrStdin())
		if err != nil {
			return err
		}
		out, err := s.api.SubmitServiceJob(cmd.Context(), in)
		if err != nil {
			return err
		}
		return s.emit(out, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "job %s submitted: %s\n", aws.ToString(out.JobName), aws.ToString(out.JobId))
			return err
		})
	}),
}

func init() {
	defineSubmitFlags(submitCmd.Flags(), &submitOpts)
	addClientFlags(submitCmd)
	_ = submitCmd.RegisterFlagCompletionFunc("queue", completeQueues)
	_ = submitCmd.RegisterFlagCompletionFunc("share", completeShares)
	rootCmd.AddCommand(submitCmd)
}

// defineSubmitFlags defines the flags of submit on f, bound to o.
func defineSubmitFlags(f *pflag.FlagSet, o *submitOptions) {
	f.StringVarP(&o.queue, "queue", "q", "", "the job queue (a name or an ARN; required)")
	f.StringVarP(&o.share, "share", "s", "", "the quota share (required on a queue with a quota-share policy)")
	f.StringVar(&o.shareIdentifier, "share-identifier", "", "the fair-share identifier (on a queue with a fair-share policy)")
	f.StringVar(&o.name, "name", "", "the job name, also the TrainingJobName when it can be one (default: the command's name and a random suffix)")
	f.IntVarP(&o.priority, "priority", "p", 0, "the scheduling priority, 0 to 9999: higher runs first within the share")
	f.StringVar(&o.instanceType, "instance-type", "", "the instance type of ResourceConfig, such as ml.g5.xlarge (required without --payload)")
	f.IntVar(&o.instanceCount, "instance-count", 1, "the instance count of ResourceConfig")
	f.StringArrayVarP(&o.env, "env", "e", nil, "an environment variable of the job, KEY=VALUE (repeatable)")
	f.IntVar(&o.retryAttempts, "retry-attempts", 0, "how many times the job may run, 1 to 10, retries included (default: once)")
	f.IntVar(&o.preemptionRetries, "preemption-retries", 0, "how many preemptions the job survives before it fails; 0 fails it on the first (when unset: any number)")
	f.DurationVar(&o.timeout, "timeout", 0, "the longest one attempt may run, such as 90m (StoppingCondition and timeoutConfig)")
	f.StringArrayVar(&o.tags, "tag", nil, "a tag of the job, KEY=VALUE (repeatable)")
	f.StringVar(&o.payloadFile, "payload", "", "send this CreateTrainingJob payload file as it is (- for standard input)")
	f.StringVar(&o.image, "image", PlaceholderImage, "the TrainingImage of the payload")
	f.StringVar(&o.checkpointDir, "checkpoint-dir", "", "CheckpointConfig.LocalPath: the job's checkpoint directory, kept across attempts")
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parsePairs reads KEY=VALUE flags into a map, rejecting malformed ones.
func parsePairs(flag string, kvs []string, keyRE *regexp.Regexp) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, qshare.Errorf(qshare.EINVALID, "--%s %q is not KEY=VALUE: write for example --%s EPOCHS=10", flag, kv, flag)
		}
		if keyRE != nil && !keyRE.MatchString(k) {
			return nil, qshare.Errorf(qshare.EINVALID, "--%s key %q is not a valid variable name: use letters, digits and _, not starting with a digit", flag, k)
		}
		m[k] = v
	}
	return m, nil
}

// buildSubmit turns the flags and arguments of submit into the request.
// It checks what the CLI can check, with the rules the server applies, so
// that mistakes are reported before anything is sent.
func buildSubmit(flags *pflag.FlagSet, o submitOptions, args []string, stdin io.Reader) (*batch.SubmitServiceJobInput, error) {
	changed := func(name string) bool { return flags.Changed(name) }
	if o.queue == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "--queue is required: name the job queue to submit to")
	}
	in := &batch.SubmitServiceJobInput{
		JobQueue:       aws.String(o.queue),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining,
	}
	if o.share != "" {
		in.QuotaShareName = aws.String(o.share)
	}
	if o.shareIdentifier != "" {
		in.ShareIdentifier = aws.String(o.shareIdentifier)
	}
	if changed("priority") {
		if err := qshare.ValidatePriority("--priority", int64(o.priority)); err != nil {
			return nil, err
		}
		in.SchedulingPriority = aws.Int32(int32(o.priority))
	}
	if changed("retry-attempts") {
		if o.retryAttempts < 1 || o.retryAttempts > qshare.MaxRetryAttempts {
			return nil, qshare.Errorf(qshare.EINVALID, "--retry-attempts %d is out of range: use 1 to %d (the first run included)", o.retryAttempts, qshare.MaxRetryAttempts)
		}
		in.RetryStrategy = &types.ServiceJobRetryStrategy{Attempts: aws.Int32(int32(o.retryAttempts))}
	}
	if changed("preemption-retries") {
		if o.preemptionRetries < 0 {
			return nil, qshare.Errorf(qshare.EINVALID, "--preemption-retries %d is not valid: use 0 (fail on the first preemption) or more", o.preemptionRetries)
		}
		in.PreemptionConfiguration = &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: aws.Int32(int32(o.preemptionRetries))}
	}
	tags, err := parsePairs("tag", o.tags, nil)
	if err != nil {
		return nil, err
	}
	if err := qshare.ValidateTags("--tag", tags); err != nil {
		return nil, err
	}
	in.Tags = tags

	var payload []byte
	var name string
	if o.payloadFile != "" {
		for _, f := range []string{"instance-type", "instance-count", "env", "timeout", "image", "checkpoint-dir"} {
			if changed(f) {
				return nil, qshare.Errorf(qshare.EINVALID, "--%s cannot be combined with --payload: write it into the payload file instead", f)
			}
		}
		if len(args) > 0 {
			return nil, qshare.Errorf(qshare.EINVALID, "a command (%s) cannot be combined with --payload: write it into the payload's AlgorithmSpecification instead", strings.Join(args, " "))
		}
		if payload, err = readPayload(o.payloadFile, stdin); err != nil {
			return nil, err
		}
		req, err := trainingjob.Parse(string(payload))
		if err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "%s: %s", o.payloadFile, qshare.ErrorMessageOf(err))
		}
		if _, err := req.Demand(); err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "%s: %s", o.payloadFile, qshare.ErrorMessageOf(err))
		}
		name = req.TrainingJobName
	} else {
		name = o.name
		if name == "" {
			name = defaultJobName(args)
		}
		if payload, err = buildPayload(o, name, args); err != nil {
			return nil, err
		}
	}
	if o.name != "" {
		name = o.name
	}
	if name == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "the job has no name: give --name, or a TrainingJobName in the payload")
	}
	if err := qshare.ValidateName("--name", name); err != nil {
		return nil, err
	}
	if len(payload) > qshare.MaxPayloadBytes {
		return nil, qshare.Errorf(qshare.EINVALID, "the payload has %d bytes: at most %d are allowed (shorten the command or the environment)", len(payload), qshare.MaxPayloadBytes)
	}
	in.JobName = aws.String(name)
	in.ServiceRequestPayload = aws.String(string(payload))
	if o.timeout > 0 {
		in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(int32(timeoutSeconds(o.timeout)))}
	}
	return in, nil
}

// buildPayload builds the CreateTrainingJob request of a job from flags.
func buildPayload(o submitOptions, name string, args []string) ([]byte, error) {
	if o.instanceType == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "--instance-type is required: name the instance type the job runs on, such as ml.g5.xlarge (or give --payload FILE)")
	}
	if o.instanceCount < 1 {
		return nil, qshare.Errorf(qshare.EINVALID, "--instance-count %d is not valid: it must be at least 1", o.instanceCount)
	}
	if o.timeout < 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "--timeout %s is not valid: give a positive duration such as 90m", o.timeout)
	}
	env, err := parsePairs("env", o.env, envKeyRE)
	if err != nil {
		return nil, err
	}
	count := int64(o.instanceCount)
	req := trainingjob.Request{
		AlgorithmSpecification: trainingjob.AlgorithmSpecification{
			TrainingImage:     o.image,
			TrainingInputMode: "File",
		},
		ResourceConfig: trainingjob.ResourceConfig{InstanceType: o.instanceType, InstanceCount: &count, VolumeSizeInGB: 30},
		Environment:    env,
	}
	// A job name may hold '_' and 128 characters, a TrainingJobName
	// neither; one that cannot be a TrainingJobName is left out, and the
	// server names the attempt after the job.
	if trainingjob.ValidTrainingJobName(name) {
		req.TrainingJobName = name
	}
	if len(args) > 0 {
		req.AlgorithmSpecification.ContainerEntrypoint = args[:1]
		if len(args) > 1 {
			req.AlgorithmSpecification.ContainerArguments = args[1:]
		}
	}
	if o.timeout > 0 {
		secs := timeoutSeconds(o.timeout)
		req.StoppingCondition = &trainingjob.StoppingCondition{MaxRuntimeInSeconds: &secs}
	}
	if o.checkpointDir != "" {
		req.CheckpointConfig = &trainingjob.CheckpointConfig{LocalPath: o.checkpointDir}
	}
	return json.Marshal(req)
}

// timeoutSeconds rounds a timeout up to whole seconds.
func timeoutSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// readPayload reads a payload file, or standard input for "-".
func readPayload(path string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, qshare.MaxPayloadBytes+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "cannot read the payload: %v", err)
	}
	return b, nil
}

var nameCharRE = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// defaultJobName names a job after its command, with a random suffix so
// that two submits of one command do not share a name.
func defaultJobName(args []string) string {
	base := "job"
	if len(args) > 0 {
		b := filepath.Base(args[0])
		b = strings.TrimSuffix(b, filepath.Ext(b))
		if len(args) > 1 && (b == "python" || b == "python3" || b == "bash" || b == "sh") {
			b2 := filepath.Base(args[1])
			b = strings.TrimSuffix(b2, filepath.Ext(b2))
		}
		if b = strings.Trim(nameCharRE.ReplaceAllString(b, "-"), "-"); b != "" {
			base = b[:min(len(b), 100)]
		}
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	return base + "-" + hex.EncodeToString(r[:])
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
