package fault

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"

	"qshare/config"
	"qshare/daemon"
	"qshare/event"
	"qshare/executor/simulated"
	"qshare/internal/soak"
	"qshare/sqlite"
	"qshare/store"
)

// failingStore is a real SQLite store whose commits fail while broken is
// set, as they do when the disk is full or the data directory turns
// read-only. (The tests run as root, for whom a read-only directory is
// writable, and mounting a tiny filesystem needs privileges, so the fault is
// injected at the store's seam instead.)
type failingStore struct {
	*sqlite.DB
	broken atomic.Bool
	failed atomic.Int64
}

var errDiskFull = errors.New("database or disk is full (injected)")

func (s *failingStore) Commit(ctx context.Context, c *store.Change) error {
	if s.broken.Load() {
		s.failed.Add(1)
		return errDiskFull
	}
	return s.DB.Commit(ctx, c)
}

// TestStoreCannotWrite breaks the store under a running server: requests
// that change something fail with a ServerException and leave no trace,
// reads keep working, and once the store writes again everything works,
// including a change the control loop was still retrying.
func TestStoreCannotWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := &failingStore{DB: openDB(t, dir)}
	evf, err := event.OpenFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evf.Close() })
	url, d := serveInProcess(t, daemon.Config{Store: st, Executor: simulated.New(simulated.Options{}), Tick: 20 * time.Millisecond, Events: evf})
	c := client(url)
	ctx := context.Background()

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pol, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(err)
	_, err = c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}}})
	must(err)
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("q"), Priority: aws.Int32(1), SchedulingPolicyArn: pol.Arn,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}}})
	must(err)
	_, err = c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("A"), JobQueue: aws.String("q"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLend},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateEnabled}})
	must(err)
	submit := func(name string) (*batch.SubmitServiceJobOutput, error) {
		return c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
			ServiceJobType:        types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"300ms"}}`)})
	}
	// A job that waits behind a long one, for the priority update below.
	long, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("long"), JobQueue: aws.String("q"), QuotaShareName: aws.String("A"),
		ServiceJobType:        types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"3s"}}`)})
	must(err)
	waiting, err := submit("waiting")
	must(err)

	st.broken.Store(true)
	serverException := func(what string, err error) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ServerException" || ae.ErrorMessage() == "" {
			t.Fatalf("%s while the store cannot write: %v, want a ServerException with a message", what, err)
		}
		// The store's own error (it can name the database's file, host or
		// user) stays in the server's log.
		if strings.Contains(ae.ErrorMessage(), errDiskFull.Error()) {
			t.Fatalf("%s while the store cannot write: the client is told the store's error: %q", what, ae.ErrorMessage())
		}
	}
	_, err = submit("lost")
	serverException("SubmitServiceJob", err)
	_, err = c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("B"), JobQueue: aws.String("q"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLend},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateEnabled}})
	serverException("CreateQuotaShare", err)
	_, err = c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("env"),
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(5)}}})
	serverException("UpdateServiceEnvironment", err)

	// A change that goes through the control loop is answered as soon as
	// the loop's commit fails, not when the client gives up (the client
	// here would wait a minute): a ServerException, while the change is
	// kept in the commit the loop retries.
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = c.UpdateServiceJob(pctx, &batch.UpdateServiceJobInput{JobId: waiting.JobId, SchedulingPriority: aws.Int32(7)})
	serverException("UpdateServiceJob", err)
	// While the loop retries, further changes are refused at once, and
	// never applied.
	_, err = c.UpdateServiceJob(pctx, &batch.UpdateServiceJobInput{JobId: waiting.JobId, SchedulingPriority: aws.Int32(9)})
	serverException("UpdateServiceJob during the retry", err)
	_, err = c.TerminateServiceJob(pctx, &batch.TerminateServiceJobInput{JobId: waiting.JobId, Reason: aws.String("not now")})
	serverException("TerminateServiceJob", err)

	// Nothing half-applied: reads show the state before the outage.
	shares, err := c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q")})
	must(err)
	if len(shares.QuotaShares) != 1 {
		t.Errorf("%d quota shares after a failed create, want 1", len(shares.QuotaShares))
	}
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{"env"}})
	must(err)
	if n := aws.ToInt32(envs.ServiceEnvironments[0].CapacityLimits[0].MaxCapacity); n != 1 {
		t.Errorf("environment capacity %d after a failed update, want 1", n)
	}
	jobs, err := soak.ListAll(ctx, c)
	must(err)
	for _, j := range jobs {
		if aws.ToString(j.JobName) == "lost" {
			t.Errorf("the job whose submit failed is listed: %+v", j)
		}
	}
	dj, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: waiting.JobId})
	must(err)
	if p := aws.ToInt32(dj.SchedulingPriority); p != 0 {
		t.Errorf("the waiting job shows priority %d while its update is not saved", p)
	}
	if st.failed.Load() == 0 {
		t.Fatal("no commit was attempted while broken")
	}

	// The store writes again: the loop's retried commit lands, new changes work.
	st.broken.Store(false)
	_, err = submit("after")
	must(err)
	// The first update was answered with a ServerException, which promises
	// nothing either way: if the loop was already retrying another commit
	// when it arrived (the long job's end, on a slow machine), it was refused
	// outright. Then the client does what a client does with a 5xx: it
	// retries, and the retry must land.
	deadline := time.Now().Add(20 * time.Second)
	retryAt := time.Now().Add(time.Second)
	for done := false; !done; {
		dj, err = c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: waiting.JobId})
		must(err)
		switch p := aws.ToInt32(dj.SchedulingPriority); {
		case p == 7:
			done = true
		case p != 0:
			t.Fatalf("priority %d after the outage: a refused update was applied", p)
		case !retryAt.IsZero() && time.Now().After(retryAt):
			retryAt = time.Time{}
			t.Logf("the update answered with a ServerException was not kept; the client retries it")
			_, err = c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: waiting.JobId, SchedulingPriority: aws.Int32(7)})
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "ClientException" && strings.Contains(ae.ErrorMessage(), "finished job") {
				t.Logf("too late: the job had already finished (%s)", ae.ErrorMessage())
				done = true
			} else {
				must(err)
			}
		case time.Now().After(deadline):
			t.Fatalf("the priority update never landed, not even the client's retry: priority %d", p)
		}
		if !done {
			time.Sleep(20 * time.Millisecond)
		}
	}
	all, err := soak.WaitAllDone(ctx, c, 30*time.Second)
	must(err)
	for _, j := range all {
		if j.Status != types.ServiceJobStatusSucceeded {
			t.Errorf("job %s ended %s: %s", aws.ToString(j.JobName), j.Status, aws.ToString(j.StatusReason))
		}
	}
	_ = long
	t.Logf("%d commits refused during the outage; %d jobs succeeded after it", st.failed.Load(), len(all))

	// The event log holds what was committed, and keeps the guarantees.
	d.Close()
	evf.Sync()
	cfg, err := config.Parse("store.yaml", []byte(`serviceEnvironments:
  - serviceEnvironmentName: env
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
schedulingPolicies:
  - name: pol
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: q
    priority: 1
    schedulingPolicy: pol
    serviceEnvironment: env
    quotaShares:
      - quotaShareName: A
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND}
        preemptionConfiguration: {inSharePreemption: ENABLED}
`), config.Options{})
	must(err)
	f, err := os.Open(filepath.Join(dir, "events.jsonl"))
	must(err)
	defer f.Close()
	vs, sum, err := event.Check(cfg, f, event.CheckOptions{Settle: 1})
	must(err)
	for _, v := range vs {
		t.Errorf("event log: %s", v)
	}
	// The priority update that lands after the outage preempts "long" for
	// "waiting", unless "long" has finished by then.
	if sum.Jobs != 3 || sum.Finishes != 3 || sum.Preempts > 1 || sum.Starts != 3+sum.Preempts {
		t.Errorf("event log: %+v, want 3 jobs that finished, one of them preempted at most once", sum)
	}
}
