// Command sdk drives qshare with the AWS SDK for Go v2, exactly as it would
// drive AWS Batch: it creates a scheduling policy, a service environment, a
// job queue and a quota share, submits a service job, and waits for it.
//
//	go run ./examples/sdk -endpoint http://127.0.0.1:8750
//
// Run it against `qshare serve --executor simulated`, or against the default
// process executor (the job then runs `echo hello from qshare`).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:8750", "the qshare server")
	flag.Parse()
	ctx := context.Background()

	// Any static credentials will do: qshare on loopback does not check them.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("qshare", "qshare", "")))
	if err != nil {
		log.Fatal(err)
	}
	client := batch.NewFromConfig(cfg, func(o *batch.Options) { o.BaseEndpoint = aws.String(*endpoint) })

	policy, err := client.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{
		Name:             aws.String("sdk-policy"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo},
	})
	must(err)
	env, err := client.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{
		ServiceEnvironmentName: aws.String("sdk-pool"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(2)}},
	})
	must(err)
	// Resources are CREATING until the scheduler has them, then VALID: wait,
	// as the AWS samples do, before using them.
	waitValid("service environment", func() string {
		out, err := client.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{*env.ServiceEnvironmentName}})
		must(err)
		return string(out.ServiceEnvironments[0].Status)
	})
	queue, err := client.CreateJobQueue(ctx, &batch.CreateJobQueueInput{
		JobQueueName:            aws.String("sdk-queue"),
		JobQueueType:            types.JobQueueTypeSagemakerTraining,
		Priority:                aws.Int32(1),
		SchedulingPolicyArn:     policy.Arn,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: env.ServiceEnvironmentArn}},
	})
	must(err)
	waitValid("job queue", func() string {
		out, err := client.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{*queue.JobQueueName}})
		must(err)
		return string(out.JobQueues[0].Status)
	})
	share, err := client.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{
		QuotaShareName:               aws.String("research"),
		JobQueue:                     queue.JobQueueArn,
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, BorrowLimit: aws.Int32(100)},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateEnabled},
	})
	must(err)
	waitValid("quota share", func() string {
		out, err := client.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: share.QuotaShareArn})
		must(err)
		return string(out.Status)
	})

	// The payload is a SageMaker CreateTrainingJob request.
	payload := `{"TrainingJobName":"hello",
	  "AlgorithmSpecification":{"TrainingImage":"local","ContainerEntrypoint":["echo"],"ContainerArguments":["hello from qshare"]},
	  "ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},
	  "Environment":{"QSHARE_SIM_DURATION":"1s"}}`
	job, err := client.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName:               aws.String("hello"),
		JobQueue:              queue.JobQueueArn,
		QuotaShareName:        aws.String("research"),
		SchedulingPriority:    aws.Int32(5),
		ServiceJobType:        types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(payload),
	})
	must(err)
	fmt.Println("submitted", *job.JobName)

	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		d, err := client.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: job.JobId})
		must(err)
		if d.Status == types.ServiceJobStatusSucceeded || d.Status == types.ServiceJobStatusFailed {
			fmt.Println("job", *d.JobName, "ended", d.Status)
			return
		}
	}
	log.Fatal("the job did not end within a minute")
}

// waitValid polls a resource's status until it is VALID, for at most a minute.
func waitValid(what string, status func() string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		switch s := status(); s {
		case "VALID":
			return
		case "INVALID":
			log.Fatalf("the %s is INVALID: see the server's log", what)
		}
	}
	log.Fatalf("the %s did not become VALID within a minute", what)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
