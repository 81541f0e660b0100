package kubee2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	corev1 "k8s.io/api/core/v1"

	"qshare/executor/kubernetes/kubetest"
)

// runningJobs returns the job IDs of the namespace's running pods that
// are not being deleted, one per pod, sorted.
func (c *cluster) runningJobs() []string {
	c.t.Helper()
	var ids []string
	for _, p := range c.podsLabelled("") {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			ids = append(ids, p.Labels["qshare.io/job-id"])
		}
	}
	slices.Sort(ids)
	return ids
}

// awaitRunningPods waits until the namespace's running pods are those of
// ids (a job ID once per pod).
func (c *cluster) awaitRunningPods(ids ...string) {
	c.t.Helper()
	slices.Sort(ids)
	deadline := time.Now().Add(waitLimit)
	for got := c.runningJobs(); !slices.Equal(got, ids); got = c.runningJobs() {
		if time.Now().After(deadline) {
			c.t.Fatalf("running pods of jobs %v, want %v after %v", got, ids, waitLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkedExampleSteps plays the three steps of the spec's worked
// example (§6.10) on a cluster of three one-GPU nodes, and checks at each
// step that the cluster runs pods for exactly the jobs qshare runs:
//  1. QS1's qs1-high (priority 3) and qs1-med (2) run, med on the GPU QS2
//     lends; qs1-low (1) waits, as QS3 reserves its own.
//  2. QS2 submits: med, the borrower, is preempted (cross-share) and its
//     pod deleted with its grace; QS2's job runs.
//  3. qs1-low's priority is raised to 4: high is preempted (in-share) and
//     low runs.
func TestWorkedExampleSteps(t *testing.T) {
	c := newCluster(t, "g5.xlarge", 3, 1)
	s := c.startServer("")
	s.apply(threeShares(t))
	long := kubetest.Program{Run: time.Hour, OnStop: "checkpoint", Checkpoint: 500 * time.Millisecond}
	high := s.submit("qs1-high", "QS1", 3, g5, 1, long)
	s.awaitStatus(high, types.ServiceJobStatusRunning)
	med := s.submit("qs1-med", "QS1", 2, g5, 1, long)
	s.awaitStatus(med, types.ServiceJobStatusRunning)
	low := s.submit("qs1-low", "QS1", 1, g5, 1, long)

	// Step 1.
	c.awaitRunningPods(high, med)
	if d := s.describe(low); d.Status != types.ServiceJobStatusRunnable || len(d.Attempts) != 0 {
		t.Errorf("step 1: qs1-low is %s with %d attempts, want RUNNABLE with none", d.Status, len(d.Attempts))
	}

	// Step 2.
	q2 := s.submit("qs2-job-1", "QS2", 1, g5, 1, long)
	d := s.await(med, "RUNNABLE after a cross-share preemption", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunnable && len(d.Attempts) == 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (cross-share)") {
		t.Errorf("step 2: qs1-med's attempt reason %q, want a cross-share preemption", r)
	}
	s.awaitStatus(q2, types.ServiceJobStatusRunning)
	c.awaitRunningPods(high, q2)

	// Step 3.
	if _, err := s.batch.UpdateServiceJob(context.Background(), &batch.UpdateServiceJobInput{JobId: aws.String(low), SchedulingPriority: aws.Int32(4)}); err != nil {
		t.Fatal(err)
	}
	d = s.await(high, "RUNNABLE after an in-share preemption", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunnable && len(d.Attempts) == 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (in-share)") {
		t.Errorf("step 3: qs1-high's attempt reason %q, want an in-share preemption", r)
	}
	s.awaitStatus(low, types.ServiceJobStatusRunning)
	c.awaitRunningPods(low, q2)
	if d := s.describe(med); d.Status != types.ServiceJobStatusRunnable {
		t.Errorf("step 3: qs1-med is %s, want RUNNABLE", d.Status)
	}
}

// TestFourInstancesAllOrNothing: a 4-instance job on a cluster of three
// nodes (the environment promises four). Three of its pods run and the
// fourth cannot be placed: after the start timeout the attempt ends as a
// capacity failure, none of its pods is left, and the job is requeued
// without using a retry (it has none). Once a fourth node joins, an
// attempt runs on all four nodes at once. (Its program runs until it is
// stopped, as a training job's instances wait for each other: one that
// ended on its own before its last pod was placed would free a node for
// that pod.)
func TestFourInstancesAllOrNothing(t *testing.T) {
	c := newCluster(t, "g5.xlarge", 3, 1)
	s := c.startServer("startTimeout: 3s\n")
	s.apply(oneShare(t, 4))
	id := s.submit("four", "S", 1, g5, 4, kubetest.Program{Run: time.Hour, Output: "an instance"})
	d := s.await(id, "requeued after a capacity failure", func(d *batch.DescribeServiceJobOutput) bool {
		return len(d.Attempts) >= 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Attempt lost: Capacity failure") {
		t.Errorf("attempt 1 reason %q, want a capacity failure", r)
	}
	if d.Status == types.ServiceJobStatusFailed {
		t.Fatalf("the job failed (%q), want it requeued", aws.ToString(d.StatusReason))
	}
	// None of attempt 1's pods stays (attempt 2's may already run on the
	// three nodes, and time out in turn).
	deadline := time.Now().Add(waitLimit)
	attempt1 := "qshare.io/attempt-id=" + id + "-1"
	for n := len(c.podsLabelled(attempt1)); n > 0; n = len(c.podsLabelled(attempt1)) {
		if time.Now().After(deadline) {
			t.Fatalf("attempt 1 still has %d pods after %v", n, waitLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	name := fmt.Sprintf("%s-g5-xlarge-extra", c.ns)
	if err := c.Kubelet.AddNode(context.Background(), name, "g5.xlarge", 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kubelet.DeleteNode(context.Background(), name) })
	d = s.awaitStatus(id, types.ServiceJobStatusRunning)
	n := len(d.Attempts)
	for i, a := range d.Attempts[:n-1] {
		if r := aws.ToString(a.StatusReason); !strings.HasPrefix(r, "Attempt lost: Capacity failure") {
			t.Errorf("attempt %d reason %q, want a capacity failure", i+1, r)
		}
	}
	nodes := map[string]bool{}
	pods := c.podsLabelled(fmt.Sprintf("qshare.io/attempt-id=%s-%d", id, n))
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			nodes[p.Spec.NodeName] = true
		}
	}
	if len(pods) != 4 || len(nodes) != 4 {
		t.Errorf("attempt %d: %d pods, running on %d nodes; want 4 on 4", n, len(pods), len(nodes))
	}
	if _, err := s.batch.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String("done")}); err != nil {
		t.Fatal(err)
	}
	s.awaitStatus(id, types.ServiceJobStatusFailed)
}
