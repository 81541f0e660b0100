package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/store"
	"qshare/store/storetest"
)

// waitSettled waits, as the reference client does after each create, until
// the service environment, job queue and quota shares that setup created
// are VALID.
func (s *server) waitSettled(queue string, shares ...shareSpec) {
	s.t.Helper()
	s.waitEnvStatus(queue+"-env", types.ServiceEnvironmentStatusValid)
	s.waitQueueStatus(queue, types.JQStatusValid)
	for _, sh := range shares {
		s.waitShareStatus(s.shareARN(queue, sh.name), types.QuotaShareStatusValid)
	}
}

func (s *server) shareARN(queue, name string) string {
	return "arn:aws:batch:us-east-1:000000000000:job-queue/" + queue + "/quota-share/" + name
}

// poll calls probe until it returns want, for at most 15 s, and fails the
// test with the last status otherwise.
func poll[T comparable](t testing.TB, what string, want T, probe func() T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := probe()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want %v", what, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// firstStatus is the status of the first of the resources a Describe call
// returned, or "" when it returned none.
func firstStatus[T any, S ~string](of []T, status func(T) S) S {
	for _, x := range of {
		return status(x)
	}
	return ""
}

// wantStatus fails t unless a resource (what) has the status want.
func wantStatus[S ~string](t *testing.T, what string, got, want S) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: status %s, want %s", what, got, want)
	}
}

func (s *server) envStatus(name string) types.ServiceEnvironmentStatus {
	s.t.Helper()
	out, err := s.c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{name}})
	must(s.t, err)
	return firstStatus(out.ServiceEnvironments, func(e types.ServiceEnvironmentDetail) types.ServiceEnvironmentStatus { return e.Status })
}

func (s *server) queueStatus(name string) types.JQStatus {
	s.t.Helper()
	out, err := s.c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{name}})
	must(s.t, err)
	return firstStatus(out.JobQueues, func(q types.JobQueueDetail) types.JQStatus { return q.Status })
}

func (s *server) shareStatus(arn string) types.QuotaShareStatus {
	s.t.Helper()
	out, err := s.c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(arn)})
	must(s.t, err)
	return out.Status
}

func (s *server) waitEnvStatus(name string, want types.ServiceEnvironmentStatus) {
	s.t.Helper()
	poll(s.t, "service environment "+name, want, func() types.ServiceEnvironmentStatus { return s.envStatus(name) })
}

func (s *server) waitQueueStatus(name string, want types.JQStatus) {
	s.t.Helper()
	poll(s.t, "job queue "+name, want, func() types.JQStatus { return s.queueStatus(name) })
}

func (s *server) waitShareStatus(arn string, want types.QuotaShareStatus) {
	s.t.Helper()
	poll(s.t, "quota share "+arn, want, func() types.QuotaShareStatus { return s.shareStatus(arn) })
}

// settleGate is a store that holds back the commits that settle a resource
// (those that put an environment, queue or share with status VALID) while
// it is closed, so that a test can look at a resource between its change
// and its settling.
type settleGate struct {
	store.Store
	gate storetest.Gate
}

// newSettleGate returns an open gate: close it to hold back settlings.
func newSettleGate(st store.Store) *settleGate { return &settleGate{Store: st} }

// release lets the held settlings, and later ones, through.
func (g *settleGate) release() { g.gate.Release() }

func settles(c *store.Change) bool {
	for _, e := range c.PutEnvironments {
		if e.Status == qshare.StatusValid {
			return true
		}
	}
	for _, q := range c.PutQueues {
		if q.Status == qshare.StatusValid {
			return true
		}
	}
	for _, s := range c.PutShares {
		if s.Status == qshare.StatusValid {
			return true
		}
	}
	return false
}

func (g *settleGate) Commit(ctx context.Context, c *store.Change) error {
	if settles(c) {
		if err := g.gate.Pass(ctx, nil); err != nil {
			return err
		}
	}
	return g.Store.Commit(ctx, c)
}

// close makes the gate hold back settlings until release.
func (g *settleGate) close() { g.gate.Hold() }

// heldBack makes a change (when says which: "create", "update") while gate
// holds back the settling commits, checks that the resource, read by
// status, is then in its transient status, and releases the gate and waits
// for the resource to settle as valid.
func heldBack[S comparable](t *testing.T, gate *settleGate, what, when string, change func(), status func() S, transient, valid S) {
	t.Helper()
	gate.close()
	change()
	if st := status(); st != transient {
		t.Fatalf("%s is %v right after %s, want %v", what, st, when, transient)
	}
	gate.release()
	poll(t, what, valid, status)
}

// TestResourceStatusTransitions watches a service environment, a job queue
// and a quota share go through CREATING to VALID, and UPDATING to VALID, as
// the spec's status lifecycle has them, with each settling commit held back
// so that the transient status is seen for certain. (A held-back settling
// holds the resource lock, as every resource change's commit does, so the
// changes are made one at a time; describing does not wait for it.)
func TestResourceStatusTransitions(t *testing.T) {
	var gate *settleGate
	s := newServer(t, func(c *daemonConfig) {
		gate = newSettleGate(c.Store)
		c.Store = gate
	})
	c := s.c
	pol := s.createPolicy("p")
	var env, q *string
	var shareARN string
	heldBack(t, gate, "service environment", "create", func() { env = s.createEnv("e", 2) },
		func() types.ServiceEnvironmentStatus { return s.envStatus("e") },
		types.ServiceEnvironmentStatusCreating, types.ServiceEnvironmentStatusValid)
	heldBack(t, gate, "job queue", "create", func() { q = s.createQueue("q", pol, env) },
		func() types.JQStatus { return s.queueStatus("q") }, types.JQStatusCreating, types.JQStatusValid)
	shareStatus := func() types.QuotaShareStatus { return s.shareStatus(shareARN) }
	heldBack(t, gate, "quota share", "create", func() {
		shareARN = s.createShare(q, shareSpec{name: "A", limit: 2, strategy: types.QuotaShareResourceSharingStrategyReserve})
	}, shareStatus, types.QuotaShareStatusCreating, types.QuotaShareStatusValid)

	// Updates: UPDATING until settled, then VALID with the new settings.
	heldBack(t, gate, "service environment", "update", func() {
		_, err := c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("e"),
			CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(3)}}})
		must(t, err)
	}, func() types.ServiceEnvironmentStatus { return s.envStatus("e") },
		types.ServiceEnvironmentStatusUpdating, types.ServiceEnvironmentStatusValid)
	heldBack(t, gate, "job queue", "update", func() {
		_, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), Priority: aws.Int32(5)})
		must(t, err)
	}, func() types.JQStatus { return s.queueStatus("q") }, types.JQStatusUpdating, types.JQStatusValid)
	heldBack(t, gate, "quota share", "update", func() {
		_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(shareARN),
			CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(3)}}})
		must(t, err)
	}, shareStatus, types.QuotaShareStatusUpdating, types.QuotaShareStatusValid)

	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{"e"}})
	must(t, err)
	if n := aws.ToInt32(envs.ServiceEnvironments[0].CapacityLimits[0].MaxCapacity); n != 3 {
		t.Fatalf("service environment limit = %d after update, want 3", n)
	}
	qs, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})
	must(t, err)
	if p := aws.ToInt32(qs.JobQueues[0].Priority); p != 5 {
		t.Fatalf("job queue priority = %d after update, want 5", p)
	}
	s.waitStatus(s.submit("q", "A", "j", 1, payload(g5, 3, time.Millisecond, 0)), types.ServiceJobStatusSucceeded)
}

// TestSubmitWhileCreating submits to a queue and share the moment their
// creates are answered, as a client that does not wait for VALID would: the
// jobs are kept and run, since the scheduler learns about a resource before
// it learns about any job submitted after the create was answered.
func TestSubmitWhileCreating(t *testing.T) {
	s := newServer(t)
	pol := s.createPolicy("p")
	var ids []string
	for i := range 5 {
		n := fmt.Sprint(i)
		env := s.createEnv("e"+n, 1)
		fifo := s.createEnv("f"+n, 1)
		q := s.createQueue("q"+n, pol, env)
		s.createShare(q, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
		ids = append(ids, s.submit("q"+n, "A", "j", 1, payload(g5, 1, time.Millisecond, 0)))
		s.createQueue("fifo"+n, nil, fifo)
		ids = append(ids, s.submit("fifo"+n, "", "j", 1, payload(g5, 1, time.Millisecond, 0)))
	}
	for _, id := range ids {
		s.waitStatus(id, types.ServiceJobStatusSucceeded)
	}
}

// TestResourceStatusRecovery stops servers while a new resource is still
// CREATING or an update still UPDATING (the settling commit held back), and
// starts another on the same data each time: the restart finishes the
// transition, with the change in force, and the resources schedule jobs.
func TestResourceStatusRecovery(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	s.reserved(2)
	s.close()
	// gated starts a server whose settlings are held back once it has
	// started (its recovery settles what the last one left).
	gated := func() *server {
		var gate *settleGate
		s := startServer(t, dir, func(c *daemonConfig) {
			gate = newSettleGate(c.Store)
			c.Store = gate
		})
		gate.close()
		return s
	}

	// A service environment left CREATING.
	s = gated()
	env := s.createEnv("e2", 1)
	wantStatus(t, "service environment after create", s.envStatus("e2"), types.ServiceEnvironmentStatusCreating)
	s.close()

	// A job queue left CREATING, on the environment the restart settled.
	s = gated()
	wantStatus(t, "service environment after restart", s.envStatus("e2"), types.ServiceEnvironmentStatusValid)
	s.createQueue("fifo", nil, env)
	wantStatus(t, "job queue after create", s.queueStatus("fifo"), types.JQStatusCreating)
	s.close()

	// A quota share left UPDATING.
	s = gated()
	wantStatus(t, "job queue after restart", s.queueStatus("fifo"), types.JQStatusValid)
	_, err := s.c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(s.shareARN("q", "A")),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}}})
	must(t, err)
	wantStatus(t, "quota share after update", s.shareStatus(s.shareARN("q", "A")), types.QuotaShareStatusUpdating)
	s.close()

	s = startServer(t, dir)
	out, err := s.c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(s.shareARN("q", "A"))})
	must(t, err)
	if out.Status != types.QuotaShareStatusValid || aws.ToInt32(out.CapacityLimits[0].MaxCapacity) != 1 {
		t.Fatalf("after restart the quota share is %s with limit %d, want VALID with 1", out.Status, aws.ToInt32(out.CapacityLimits[0].MaxCapacity))
	}
	a := s.submit("fifo", "", "a", 1, payload(g5, 1, time.Millisecond, 0))
	b := s.submit("q", "A", "b", 1, payload(g5, 1, time.Millisecond, 0))
	s.waitStatus(a, types.ServiceJobStatusSucceeded)
	s.waitStatus(b, types.ServiceJobStatusSucceeded)
}
