package api_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/config"
	"qshare/engine"
)

// applyFile creates every resource of f on the server through the AWS SDK,
// as `qshare apply` would, and waits until each has settled.
func (s *server) applyFile(f *config.File) {
	t := s.t
	t.Helper()
	for _, e := range f.ServiceEnvironments {
		in := &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(e.Name),
			ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining}
		if e.State != "" {
			in.State = types.ServiceEnvironmentState(e.State)
		}
		for _, l := range e.CapacityLimits {
			in.CapacityLimits = append(in.CapacityLimits, types.CapacityLimit{CapacityUnit: aws.String(l.CapacityUnit), MaxCapacity: aws.Int32(int32(l.MaxCapacity))})
		}
		_, err := s.c.CreateServiceEnvironment(ctx, in)
		must(t, err)
	}
	policyARN := map[string]*string{}
	for _, p := range f.SchedulingPolicies {
		in := &batch.CreateSchedulingPolicyInput{Name: aws.String(p.Name)}
		if p.QuotaSharePolicy != nil {
			in.QuotaSharePolicy = &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategy(p.QuotaSharePolicy.IdleResourceAssignmentStrategy)}
		} else {
			in.FairsharePolicy = &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(int32(*p.FairsharePolicy.ShareDecaySeconds))}
		}
		out, err := s.c.CreateSchedulingPolicy(ctx, in)
		must(t, err)
		policyARN[p.Name] = out.Arn
	}
	for _, q := range f.JobQueues {
		in := &batch.CreateJobQueueInput{JobQueueName: aws.String(q.Name), Priority: aws.Int32(int32(*q.Priority)),
			JobQueueType:            types.JobQueueTypeSagemakerTraining,
			ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(q.EnvironmentName())}}}
		if q.SchedulingPolicy != "" {
			in.SchedulingPolicyArn = policyARN[q.PolicyName()]
		}
		_, err := s.c.CreateJobQueue(ctx, in)
		must(t, err)
		for _, sh := range q.QuotaShares {
			in := &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh.Name), JobQueue: aws.String(q.Name),
				ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategy(sh.Strategy)},
				PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionState(sh.InSharePreemption)},
				Tags:                         sh.Tags}
			if sh.BorrowLimit != nil {
				in.ResourceSharingConfiguration.BorrowLimit = aws.Int32(int32(*sh.BorrowLimit))
			}
			if sh.State != "" {
				in.State = types.QuotaShareState(sh.State)
			}
			for _, l := range sh.CapacityLimits {
				in.CapacityLimits = append(in.CapacityLimits, types.QuotaShareCapacityLimit{CapacityUnit: aws.String(l.CapacityUnit), MaxCapacity: aws.Int32(int32(l.MaxCapacity))})
			}
			_, err := s.c.CreateQuotaShare(ctx, in)
			must(t, err)
		}
	}
	for _, e := range f.ServiceEnvironments {
		s.waitEnvStatus(e.Name, types.ServiceEnvironmentStatusValid)
	}
	for _, q := range f.JobQueues {
		s.waitQueueStatus(q.Name, types.JQStatusValid)
		for _, sh := range q.QuotaShares {
			s.waitShareStatus(s.shareARN(q.Name, sh.Name), types.QuotaShareStatusValid)
		}
	}
}

// simulatorConfig is the engine configuration the simulator gives its
// engine for f (sim.Run: cfg.Engine().Load), read back from that engine.
func simulatorConfig(t *testing.T, f *config.File) engine.Config {
	t.Helper()
	e := engine.New()
	if err := f.Engine().Load(e); err != nil {
		t.Fatal(err)
	}
	return e.Config()
}

// TestOneMapping feeds the same apply file to the server (through the AWS
// API, then again after a restart, which rebuilds the engine from the
// store) and to the simulator's configuration loading, and requires the two
// engines to hold the same configuration: every environment, queue and
// share, the queues without a quota-share policy included.
func TestOneMapping(t *testing.T) {
	for _, path := range []string{"../examples/three-shares.yaml", "testdata/mapping-mixed.yaml"} {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			must(t, err)
			f, err := config.Parse(path, data, config.Options{})
			must(t, err)
			want := simulatorConfig(t, f)
			if len(want.Queues) != len(f.JobQueues) {
				t.Fatalf("the simulator's engine has %d queues, the file %d", len(want.Queues), len(f.JobQueues))
			}
			minRun := false // the minimum run time (a tag) is part of the mapping
			for _, s := range want.Shares {
				minRun = minRun || s.MinRunTime > 0
			}
			if strings.Contains(path, "mixed") && !minRun {
				t.Fatal("no share of the mixed file has a minimum run time: the test no longer covers its mapping")
			}

			dir := t.TempDir()
			s := startServer(t, dir)
			s.applyFile(f)
			if got := s.d.EngineConfig(); !reflect.DeepEqual(got, want) {
				t.Fatalf("after apply, the server's engine and the simulator's differ:\nserver    %s\nsimulator %s", js(got), js(want))
			}
			s.close()
			s = startServer(t, dir)
			if got := s.d.EngineConfig(); !reflect.DeepEqual(got, want) {
				t.Fatalf("after a restart, the server's engine and the simulator's differ:\nserver    %s\nsimulator %s", js(got), js(want))
			}
		})
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
