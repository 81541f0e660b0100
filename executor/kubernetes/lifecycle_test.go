package kubernetes

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8scorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"qshare/executor"
	"qshare/executor/kubernetes/kubetest"
	"qshare/trainingjob"
)

// waitWithin is wait with a bound of its own, failing (not hanging) when
// the attempt never ends.
func waitWithin(t *testing.T, e *Executor, id string, d time.Duration) (executor.Exit, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	x, err := e.Wait(ctx, id)
	if err != nil {
		t.Errorf("Wait(%s) did not return within %v: %v", id, d, err)
		return x, false
	}
	return x, true
}

// TestStartTimeoutOnlyWhileStarting: the start timeout bounds the wait
// for all pods to be placed, not the run: an attempt of two instances
// whose pods all ran and one of which ends before the other, after the
// start timeout has passed, succeeds; it is no capacity failure.
func TestStartTimeoutOnlyWhileStarting(t *testing.T) {
	c := getCluster(t)
	addNodes(t, c, "late.xlarge", 2, 1)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{StartTimeout: "1s", InstanceTypes: map[string]InstanceType{"ml.late.xlarge": {GPUs: ptr(int64(1))}}}})
	defer e.Close()
	s := spec(kubetest.Program{Run: 2500 * time.Millisecond}, "ml.late.xlarge", 2)
	start(t, e, s)
	if x, ok := waitWithin(t, e, s.AttemptID, time.Minute); ok && !x.Succeeded() {
		t.Errorf("exit of an attempt whose pods both ran and exited 0 = %+v, want success", x)
	}
}

// TestStopAfterRestartBetweenMarkAndDelete: a server that died after it
// marked a pod as stopped by qshare but before the deletion went through
// stops it again after the restart (the daemon does so for a stop decided
// before the restart): the Stop is carried out, not taken as done.
func TestStopAfterRestartBetweenMarkAndDelete(t *testing.T) {
	s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	e2 := restarted(t, Options{}, s, func(pods k8scorev1.PodInterface) error {
		patch := []byte(`{"metadata":{"annotations":{"` + annStopped + `":"true"}}}`)
		_, err := pods.Patch(context.Background(), podName(s.AttemptID, 0), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err := e2.Stop(context.Background(), s.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	if x, ok := waitWithin(t, e2, s.AttemptID, 20*time.Second); ok && !x.Stopped {
		t.Errorf("exit = %+v, want stopped", x)
	}
	noPodsLeft(t, e2, s.AttemptID, 1)
}

// restarted starts s in an executor, closes it, changes the cluster with
// meanwhile, and returns a new executor over the same namespace that has
// recovered s, as after a restart.
func restarted(t *testing.T, o Options, s executor.Spec, meanwhile func(k8scorev1.PodInterface) error) *Executor {
	t.Helper()
	c := getCluster(t)
	dir := t.TempDir()
	e1 := c.newExecutor(t, dir, o)
	start(t, e1, s)
	e1.Close()
	if err := meanwhile(c.Client().CoreV1().Pods(e1.ns)); err != nil {
		t.Fatal(err)
	}
	e2 := c.newExecutor(t, dir, o)
	t.Cleanup(func() { e2.Close() })
	if _, err := e2.Recover(context.Background(), executor.Handle{AttemptID: s.AttemptID}); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return e2
}

// noPodsLeft checks that an attempt of n pods has none left, and deletes
// any that are.
func noPodsLeft(t *testing.T, e *Executor, id string, n int) {
	t.Helper()
	if p := attemptPods(t, e, id); len(p) != 0 {
		t.Errorf("%d pods left, want none", len(p))
		e.deletePods(context.Background(), id, n, 0, false)
	}
}

// TestRecoverWithAPodGone: a pod of a two-instance attempt deleted while
// the server was down; the recovered attempt ends (the other pod deleted,
// all or nothing), with a reason that says so, instead of waiting forever
// for a pod that is not there.
func TestRecoverWithAPodGone(t *testing.T) {
	addNodes(t, getCluster(t), "gone.xlarge", 2, 1)
	o := Options{Config: Config{InstanceTypes: map[string]InstanceType{"ml.gone.xlarge": {GPUs: ptr(int64(1))}}}}
	s := spec(kubetest.Program{Run: time.Hour}, "ml.gone.xlarge", 2)
	e2 := restarted(t, o, s, func(pods k8scorev1.PodInterface) error {
		zero := int64(0)
		return pods.Delete(context.Background(), podName(s.AttemptID, 1), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	x, ok := waitWithin(t, e2, s.AttemptID, 30*time.Second)
	if ok && (x.Succeeded() || !strings.Contains(x.Reason, "deleted outside qshare")) {
		t.Errorf("exit = %+v, want a failure that says a pod was deleted outside qshare", x)
	}
	noPodsLeft(t, e2, s.AttemptID, 2)
}

// TestStartCompletesAPartialSet: a server that died part way through
// creating an attempt's pods starts it again after the restart (the
// daemon does so for an attempt left STARTING): the missing pods are
// created, and the attempt runs as a whole.
func TestStartCompletesAPartialSet(t *testing.T) {
	c := getCluster(t)
	addNodes(t, c, "part.xlarge", 2, 1)
	dir := t.TempDir()
	o := Options{StartWait: 5 * time.Second, Config: Config{StartTimeout: "3s", InstanceTypes: map[string]InstanceType{"ml.part.xlarge": {GPUs: ptr(int64(1))}}}}
	e1 := c.newExecutor(t, dir, o)
	s := spec(kubetest.Program{Run: time.Second}, "ml.part.xlarge", 2)
	p := partialPlan(t, e1, s)
	if err := e1.create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	e1.Close()
	e2 := c.newExecutor(t, dir, o)
	defer e2.Close()
	start(t, e2, s)
	if x, ok := waitWithin(t, e2, s.AttemptID, 30*time.Second); ok && !x.Succeeded() {
		t.Errorf("exit = %+v, want success", x)
	}
	e2.deletePods(context.Background(), s.AttemptID, 2, 0, false)
}

// partialPlan is s's plan with its last pod left out, as a crash part way
// through create leaves it.
func partialPlan(t *testing.T, e *Executor, s executor.Spec) *plan {
	t.Helper()
	req, err := trainingjob.Parse(s.Payload)
	if err != nil {
		t.Fatal(err)
	}
	typ, n, grace, err := e.check(req, s.Demand)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.build(s, req, typ, n, grace, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.pods = p.pods[:len(p.pods)-1]
	return p
}

// TestStartRefusedPartWay: a Start whose second pod the API server
// refuses (a ResourceQuota of one pod) fails, and leaves none of the
// attempt's pods running: the daemon records CannotStartAttempt and gives
// its capacity to others, so a pod left behind would run untracked.
func TestStartRefusedPartWay(t *testing.T) {
	c := getCluster(t)
	dir := t.TempDir()
	e := c.newExecutor(t, dir, Options{})
	defer e.Close()
	ctx := context.Background()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "one-pod"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
	q, err := e.c.CoreV1().ResourceQuotas(e.ns).Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: give the quota the usage it would.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if _, err := e.c.CoreV1().ResourceQuotas(e.ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 2)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := e.Start(sctx, s); err == nil || sctx.Err() != nil {
		t.Fatalf("Start against a quota of one pod = %v, want a refusal", err)
	}
	for _, p := range attemptPods(t, e, s.AttemptID) {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s of the attempt that could not start is left running", p.Name)
		}
	}
	e.deletePods(ctx, s.AttemptID, 2, 0, false)
}

// TestDeletedByHandCheckpointing: a pod deleted by hand whose program
// checkpoints and exits 0 on the SIGTERM did not finish its work: the
// attempt fails with a reason that says so, it does not succeed.
func TestDeletedByHandCheckpointing(t *testing.T) {
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour, OnStop: "checkpoint", Checkpoint: 100 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e, s)
	if err := e.c.CoreV1().Pods(e.ns).Delete(context.Background(), podName(s.AttemptID, 0), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if x, ok := waitWithin(t, e, s.AttemptID, 30*time.Second); ok && (x.Succeeded() || x.Lost || !strings.Contains(x.Reason, "deleted outside qshare")) {
		t.Errorf("exit = %+v, want a failure whose reason says the pod was deleted outside qshare", x)
	}
}

// TestRestartWhileEnding: a server that decided an attempt's end (a node
// lost under one of its pods: a capacity failure) and died while the
// other pod was being deleted with its grace recovers that end after the
// restart; it does not take its own deletion for one by hand.
func TestRestartWhileEnding(t *testing.T) {
	c := getCluster(t)
	addNodes(t, c, "ending.xlarge", 2, 1)
	dir := t.TempDir()
	o := Options{StopGrace: 5 * time.Second, Config: Config{InstanceTypes: map[string]InstanceType{"ml.ending.xlarge": {GPUs: ptr(int64(1))}}}}
	e1 := c.newExecutor(t, dir, o)
	s := spec(kubetest.Program{Run: time.Hour, OnStop: "ignore"}, "ml.ending.xlarge", 2)
	start(t, e1, s)
	var node string
	for _, p := range attemptPods(t, e1, s.AttemptID) {
		if p.Labels[LabelIndex] == "0" {
			node = p.Spec.NodeName
		}
	}
	if err := c.Kubelet.DeleteNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, err := c.Client().CoreV1().Pods(e1.ns).Get(context.Background(), podName(s.AttemptID, 1), metav1.GetOptions{})
		if err == nil && p.DeletionTimestamp != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod 1 is not being deleted after the node loss: %v", err)
		}
	}
	e1.Close()
	e2 := c.newExecutor(t, dir, o)
	defer e2.Close()
	if _, err := e2.Recover(context.Background(), executor.Handle{AttemptID: s.AttemptID}); err != nil {
		t.Fatal(err)
	}
	if x, ok := waitWithin(t, e2, s.AttemptID, 30*time.Second); ok && (!x.Lost || !strings.Contains(x.Reason, "node no longer exists")) {
		t.Errorf("exit after the restart = %+v, want the capacity failure decided before it", x)
	}
}

// TestFailedPodKept: when a pod of a multi-instance attempt fails, the
// others are deleted, but the failed pod stays with its log and exit
// (for keepEnded), as ended pods do.
func TestFailedPodKept(t *testing.T) {
	c := getCluster(t)
	addNodes(t, c, "failkeep.xlarge", 2, 1)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{InstanceTypes: map[string]InstanceType{"ml.failkeep.xlarge": {GPUs: ptr(int64(1))}}}})
	defer e.Close()
	s := spec(kubetest.Program{Run: 300 * time.Millisecond, Exit: 3, Output: "the traceback"}, "ml.failkeep.xlarge", 2)
	start(t, e, s)
	if x, ok := waitWithin(t, e, s.AttemptID, 30*time.Second); ok && x.ExitCode != 3 {
		t.Errorf("exit = %+v, want code 3", x)
	}
	kept := 0
	for _, p := range attemptPods(t, e, s.AttemptID) {
		if ts := terminated(&p); ts == nil || ts.ExitCode != 3 || p.DeletionTimestamp != nil {
			continue // deleted by qshare after the other's failure
		}
		i, _ := strconv.Atoi(p.Labels[LabelIndex])
		rc, err := e.InstanceLogs(context.Background(), s.AttemptID, i, false)
		if err != nil {
			// A pod that ended on its own just before its deletion
			// reached it (both instances fail at once here) is gone.
			continue
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if !strings.Contains(string(b), "the traceback") {
			t.Errorf("log of instance %d = %q", i, b)
		}
		kept++
	}
	if kept == 0 {
		t.Error("no pod that failed on its own is kept with its log")
	}
	e.deletePods(context.Background(), s.AttemptID, 2, 0, false)
}

// TestFollowLogOfPodThatNeverRan: following the log of an attempt whose
// pod failed before its container ran (the node's kubelet refused it)
// ends at once with the empty log, instead of waiting for a start that
// will not come.
func TestFollowLogOfPodThatNeverRan(t *testing.T) {
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{StartWait: 100 * time.Millisecond})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.nowhere.xlarge", 1)
	start(t, e, s)
	ctx := context.Background()
	p, err := e.c.CoreV1().Pods(e.ns).Get(ctx, podName(s.AttemptID, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu"
	if _, err := e.c.CoreV1().Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if x, ok := waitWithin(t, e, s.AttemptID, 30*time.Second); ok && x.Succeeded() {
		t.Errorf("exit = %+v", x)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := e.Logs(lctx, s.AttemptID, true)
	if err != nil {
		t.Fatalf("following the log of a pod that ended without running: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || len(b) != 0 {
		t.Errorf("log = %q, %v; want empty", b, err)
	}
	e.deletePods(ctx, s.AttemptID, 1, 0, false)
}

// TestEvictedByKubelet: a pod that its node's kubelet evicted, with the
// status a kubelet writes (reason Evicted, and a DisruptionTarget
// condition TerminationByKubelet), ends as an eviction that counts as a
// failure (retried or FAILED), as the docs say: not as a capacity
// failure requeued without a retry, which would run a job that makes its
// node evict it (its disk filled) again and again, forever.
func TestEvictedByKubelet(t *testing.T) {
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour, OnStop: "ignore"}, "ml.m5.large", 1)
	start(t, e, s)
	ctx := context.Background()
	p, err := e.c.CoreV1().Pods(e.ns).Get(ctx, podName(s.AttemptID, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi."
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", msg
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "TerminationByKubelet", Message: msg, LastTransitionTime: metav1.Now()})
	if _, err := e.c.CoreV1().Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if x, ok := waitWithin(t, e, s.AttemptID, 30*time.Second); ok && (x.Lost || x.Succeeded() || !strings.HasPrefix(x.Reason, "Evicted:")) {
		t.Errorf("exit = %+v, want a failure whose reason starts Evicted:", x)
	}
	e.deletePods(ctx, s.AttemptID, 1, 0, false)
}

// TestSweptObjectsDeleted: Sweep deletes an orphan attempt's ConfigMap and
// Service with its pods; nothing else would (its pods never end, so they
// never expire).
func TestSweptObjectsDeleted(t *testing.T) {
	c := getCluster(t)
	addNodes(t, c, "swept.xlarge", 2, 0)
	s := spec(kubetest.Program{Run: time.Hour}, "ml.swept.xlarge", 2)
	e2 := restarted(t, Options{}, s, func(k8scorev1.PodInterface) error { return nil })
	e2.mu.Lock()
	delete(e2.attempts, labelValue(s.AttemptID)) // recovered by nobody: an orphan
	e2.mu.Unlock()
	if swept, err := e2.Sweep(context.Background(), nil); err != nil || len(swept) != 1 {
		t.Fatalf("Sweep = %v, %v", swept, err)
	}
	ctx := context.Background()
	if _, err := e2.c.CoreV1().ConfigMaps(e2.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the swept attempt's ConfigMap: %v, want it deleted", err)
	}
	if _, err := e2.c.CoreV1().Services(e2.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the swept attempt's Service: %v, want it deleted", err)
	}
}
