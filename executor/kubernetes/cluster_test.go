package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"qshare"
	"qshare/executor"
	"qshare/executor/executortest"
	"qshare/executor/kubernetes/kubeclient"
	"qshare/executor/kubernetes/kubetest"
	"qshare/internal/longtest"
	"qshare/trainingjob"
)

var specN struct {
	sync.Mutex
	n int
}

// spec is an attempt of a new job of count instances of typ.
func spec(p kubetest.Program, typ string, count int) executor.Spec {
	specN.Lock()
	specN.n++
	k := specN.n
	specN.Unlock()
	return executor.Spec{JobID: fmt.Sprintf("kjob-%d", k), JobName: "k", AttemptID: fmt.Sprintf("kjob-%d-1", k), Attempt: 1,
		Queue: "q", Share: "team-a", Demand: qshare.Capacity{typ: int64(count)}, Payload: payload(p, typ, count, nil)}
}

func start(t *testing.T, e *Executor, s executor.Spec) executor.Handle {
	t.Helper()
	return executortest.Start(t, e, s, time.Minute)
}

func wait(t *testing.T, e *Executor, id string) executor.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	return x
}

func attemptPods(t *testing.T, e *Executor, id string) []corev1.Pod {
	t.Helper()
	l, err := e.c.Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelAttemptID + "=" + labelValue(id)})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// describePods is what the API server holds of an attempt's pods, for a
// failure's message: each one's phase, deletion, finalizers, annotations
// and containers' states.
func describePods(t *testing.T, e *Executor, id string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range attemptPods(t, e, id) {
		fmt.Fprintf(&b, "  %s on %q: phase %s, deletion %v grace %v, finalizers %v, annotations %v\n",
			p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp, ptrValue(p.DeletionGracePeriodSeconds), p.Finalizers, p.Annotations)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "    container %s: %+v\n", c.Name, c.State)
		}
	}
	return b.String()
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// addNodes adds n nodes of a type only this test uses, and removes them
// at the end.
func addNodes(t *testing.T, c testCluster, typ string, n, gpus int) []string {
	t.Helper()
	var names []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", strings.ReplaceAll(typ, ".", "-"), i)
		if err := c.Kubelet.AddNode(context.Background(), name, typ, gpus); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	t.Cleanup(func() {
		for _, name := range names {
			_ = c.Kubelet.DeleteNode(context.Background(), name)
		}
	})
	return names
}

// TestAPIServerTrouble runs the scenarios that stop or freeze the API
// server, one after another, on a control plane and played kubelet of
// their own: each starts and ends with the server answering, and works in
// a namespace, on nodes and instance types of its own. One control plane
// for the three saves two starts of kube-apiserver and etcd on every
// go test ./... (about 7 s of CPU on CI's 2-core machines). It is the
// package's longest test (some 30 s on a 2-core machine), so it must not
// be the last to start: it is the first test declared, which go test
// resumes first among the paused parallel tests, and TestMain starts its
// control plane (trouble) in the background as the package's tests begin.
// It closes that control plane as it ends. StartTimeoutNotCountingOutage,
// which keeps the server away for 9 s and starts it again (20 s, and a
// kube-apiserver start of some 5 s of CPU on the slower 2-core machines),
// runs where the long scenarios do (longtest.On: .ci/run's long step).
func TestAPIServerTrouble(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	own := testCluster{trouble.Get(t)}
	t.Cleanup(trouble.Close)
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, c testCluster, ns string)
		long bool // runs only where the long scenarios do
	}{
		{"Hung", apiServerHung, false},
		{"Outage", apiServerOutage, false},
		{"StartTimeoutNotCountingOutage", startTimeoutNotCountingOutage, true},
	} {
		if !t.Run(sc.name, func(t *testing.T) {
			if sc.long {
				longtest.Only(t, "a start timeout across a 9 s outage of the API server; in the README's command Outage stops it under the executor")
			}
			sc.run(t, ctx, own, own.namespace(t, sc.name))
		}) {
			return // the server may be left stopped or frozen
		}
	}
}

// TestNodeLoss: a node disappears with a pod on it; the attempt ends as a
// capacity failure (Lost, so the daemon requeues it without using a retry).
func TestNodeLoss(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	nodes := addNodes(t, c, "lossy.xlarge", 1, 0)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.lossy.xlarge", 1)
	start(t, e, s)
	if p := attemptPods(t, e, s.AttemptID); len(p) != 1 || p[0].Status.Phase != corev1.PodRunning || p[0].Spec.NodeName != nodes[0] {
		t.Fatalf("pods after Start: %+v", p)
	}
	if err := c.Kubelet.DeleteNode(context.Background(), nodes[0]); err != nil {
		t.Fatal(err)
	}
	x := wait(t, e, s.AttemptID)
	if !x.Lost || !strings.HasPrefix(x.Reason, "Capacity failure") || !strings.Contains(x.Reason, "node no longer exists") {
		t.Errorf("exit after node loss = %+v, want Lost with a capacity failure naming the node loss", x)
	}
}

// TestDeletedByHand: someone deletes qshare's pod; the attempt ends with a
// reason that says so, and no pod is made again.
func TestDeletedByHand(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	start(t, e, s)
	if err := e.c.Pods(e.ns).Delete(context.Background(), podName(s.AttemptID, 0), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	x := wait(t, e, s.AttemptID)
	if x.Stopped || x.Lost || x.Succeeded() || !strings.Contains(x.Reason, "deleted outside qshare") || x.Signal != "SIGTERM" {
		t.Errorf("exit = %+v, want a failure by SIGTERM whose reason says the pod was deleted outside qshare", x)
	}
	noPodsLeft(t, e, s.AttemptID, 1)
}

// TestPendingAndStartTimeout: pods that cannot be placed report the
// scheduler's reason, and an attempt not all running within the start
// timeout ends as a capacity failure with every pod deleted, all or
// nothing: two of three instances fit, none is left running.
func TestPendingAndStartTimeout(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "gang.xlarge", 2, 1)
	var mu sync.Mutex
	reasons := map[string]string{}
	e := c.newExecutor(t, t.TempDir(), Options{StartWait: 300 * time.Millisecond,
		Config: Config{StartTimeout: "5s", InstanceTypes: map[string]InstanceType{"ml.gang.xlarge": {GPUs: ptr(int64(1))}}}})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.gang.xlarge", 3)
	v0 := e.PendingReasonsVersion()
	start(t, e, s)
	// What the daemon reads each pass (executor.PendingReasoner), when
	// the version says the reasons changed (PendingReasonsVersioner).
	polled, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if why := e.PendingReason(s.AttemptID); why != "" {
				// The count goes up with the change, under the same lock.
				v := e.PendingReasonsVersion()
				mu.Lock()
				reasons[s.AttemptID] = why
				if v == v0 {
					reasons[s.AttemptID] = "reported with the version unchanged: " + why
				}
				mu.Unlock()
				return
			}
			select {
			case <-ended:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	x := wait(t, e, s.AttemptID)
	close(ended)
	if !x.Lost || !strings.Contains(x.Reason, "Capacity failure: 1 of 3 pods were not running") || !strings.Contains(x.Reason, "Insufficient nvidia.com/gpu") {
		t.Errorf("exit = %+v, want Lost: a capacity failure naming the scheduler's reason", x)
	}
	<-polled
	mu.Lock()
	got := reasons[s.AttemptID]
	mu.Unlock()
	if !strings.Contains(got, "Insufficient nvidia.com/gpu") || strings.HasPrefix(got, "reported with") {
		t.Errorf("reported pending reason = %q, want the scheduler's, with a new PendingReasonsVersion", got)
	}
	noPodsLeft(t, e, s.AttemptID, 3)
}

func ptr[T any](v T) *T { return &v }

// TestServiceAccountToken: the pods get their service account's token only
// when the --kube-config file turns it on (TestMultiInstance sees it off by
// default).
func TestServiceAccountToken(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{ServiceAccountName: "train", AutomountServiceAccountToken: true}})
	defer e.Close()
	s := spec(kubetest.Program{Run: 100 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e, s)
	wait(t, e, s.AttemptID)
	p := attemptPods(t, e, s.AttemptID)[0]
	if a := p.Spec.AutomountServiceAccountToken; a == nil || !*a || p.Spec.ServiceAccountName != "train" {
		t.Errorf("automountServiceAccountToken %v, serviceAccountName %q", a, p.Spec.ServiceAccountName)
	}
}

// TestMultiInstance: a 2-instance attempt is two pods with their index,
// a headless Service, per-host resourceconfig.json, and SM_HOSTS.
func TestMultiInstance(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "multi.xlarge", 2, 1)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{InstanceTypes: map[string]InstanceType{"ml.multi.xlarge": {GPUs: ptr(int64(1)), CPU: "3", Memory: "8Gi"}}}})
	defer e.Close()
	s := spec(kubetest.Program{Run: 300 * time.Millisecond}, "ml.multi.xlarge", 2)
	h := start(t, e, s)
	pods := attemptPods(t, e, s.AttemptID)
	if len(pods) != 2 || pods[0].Spec.NodeName == pods[1].Spec.NodeName {
		t.Fatalf("pods: %d on %v", len(pods), []string{pods[0].Spec.NodeName})
	}
	svc, err := e.c.Services(e.ns).Get(context.Background(), baseName(s.AttemptID), metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("headless Service: %v %+v", err, svc)
	}
	cm, err := e.c.ConfigMaps(e.ns).Get(context.Background(), baseName(s.AttemptID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host1 := podName(s.AttemptID, 1) + "." + baseName(s.AttemptID)
	if rc := cm.Data["resourceconfig-1.json"]; !strings.Contains(rc, `"current_host":"`+host1+`"`) {
		t.Errorf("resourceconfig of host 1: %s", rc)
	}
	if hp := cm.Data["hyperparameters.json"]; hp != `{"epochs":"3"}` {
		t.Errorf("hyperparameters.json = %s", hp)
	}
	for _, p := range pods {
		ct := p.Spec.Containers[0]
		if q := ct.Resources.Limits[GPU]; q.Value() != 1 || ct.Resources.Limits.Cpu().String() != "3" || ct.TerminationMessagePath != FailureFile {
			t.Errorf("pod %s: limits %v, terminationMessagePath %q", p.Name, ct.Resources.Limits, ct.TerminationMessagePath)
		}
		if a := p.Spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("pod %s: automountServiceAccountToken %v, want false", p.Name, a)
		}
		if p.Spec.NodeSelector[InstanceTypeLabel] != "multi.xlarge" || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("pod %s: nodeSelector %v, restartPolicy %s", p.Name, p.Spec.NodeSelector, p.Spec.RestartPolicy)
		}
	}
	env := c.Kubelet.Env(e.ns, podName(s.AttemptID, 1))
	if want := `["` + podName(s.AttemptID, 0) + "." + baseName(s.AttemptID) + `","` + host1 + `"]`; env["SM_HOSTS"] != want || env["SM_CURRENT_HOST"] != host1 {
		t.Errorf("SM_HOSTS = %s, SM_CURRENT_HOST = %s; want %s and %s", env["SM_HOSTS"], env["SM_CURRENT_HOST"], want, host1)
	}
	_ = h
	if x := wait(t, e, s.AttemptID); !x.Succeeded() {
		t.Errorf("exit = %+v", x)
	}
}

// TestHowItEnded: OOMKilled and the failure file become the reasons.
func TestHowItEnded(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	oom := spec(kubetest.Program{Run: 50 * time.Millisecond, OOM: true}, "ml.m5.large", 1)
	fail := spec(kubetest.Program{Run: 50 * time.Millisecond, Exit: 2, Failure: "ValueError: no labels in the training channel\nTraceback..."}, "ml.m5.large", 1)
	start(t, e, oom)
	start(t, e, fail)
	if x := wait(t, e, oom.AttemptID); x.Signal != "SIGKILL" || !strings.Contains(x.Reason, "OOMKilled") {
		t.Errorf("OOM exit = %+v", x)
	}
	if x := wait(t, e, fail.AttemptID); x.ExitCode != 2 || x.Reason != "ValueError: no labels in the training channel" {
		t.Errorf("failure-file exit = %+v, want code 2 and the file's first line", x)
	}
}

// TestCheckpointClaim: the second attempt of a job mounts the claim the
// first one checkpointed to, and the claim is deleted once the job is
// finished.
func TestCheckpointClaim(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s1 := spec(kubetest.Program{Run: time.Hour, OnStop: "checkpoint", Checkpoint: 100 * time.Millisecond, Save: "step-7", Checkpoints: true}, "ml.m5.large", 1)
	start(t, e, s1)
	if err := e.Stop(context.Background(), s1.AttemptID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if x := wait(t, e, s1.AttemptID); !x.Stopped || x.ExitCode != 0 {
		t.Fatalf("stopped exit = %+v", x)
	}
	s2 := s1
	s2.Attempt, s2.AttemptID = 2, s1.JobID+"-2"
	s2.Payload = payload(kubetest.Program{Run: 200 * time.Millisecond, Checkpoints: true}, "ml.m5.large", 1, nil)
	start(t, e, s2)
	if x := wait(t, e, s2.AttemptID); !x.Succeeded() {
		t.Fatalf("attempt 2: %+v", x)
	}
	rc, err := e.Logs(context.Background(), s2.AttemptID, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(b), "resumed from step-7") {
		t.Errorf("attempt 2's log %q: it did not find attempt 1's checkpoint", b)
	}
	e.JobFinished(s1.JobID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The claim carries the pvc-protection finalizer, which a
		// controller that these tests do not run removes: its deletion is
		// what the executor does.
		pvc, err := e.c.PersistentVolumeClaims(e.ns).Get(context.Background(), claimName(s1.JobID), metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && pvc.DeletionTimestamp != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claim is still there after JobFinished: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOneInstanceIsOnePod: a job of one instance whose payload has no
// CheckpointConfig is one pod and nothing else: from its Start to its
// JobFinished the executor writes nothing to the API server but the pod's
// creation, and the container has no checkpoint directory (as on
// SageMaker). The same job with a CheckpointConfig gets its claim, mounted
// at the LocalPath that SM_CHECKPOINT_DIR names.
func TestOneInstanceIsOnePod(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	var mu sync.Mutex
	var writes []string
	client := c.seeing(t, func(r *http.Request) {
		if r.Method != http.MethodGet {
			mu.Lock()
			writes = append(writes, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
	})
	e := c.newExecutor(t, t.TempDir(), Options{Client: client})
	defer e.Close()
	ctx := context.Background()
	plain := spec(kubetest.Program{Run: 100 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e, plain)
	if x := wait(t, e, plain.AttemptID); !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	e.Forget(plain.AttemptID)
	e.JobFinished(plain.JobID)
	time.Sleep(200 * time.Millisecond) // what JobFinished would have sent
	mu.Lock()
	got := slices.Clone(writes)
	mu.Unlock()
	if want := []string{"POST /api/v1/namespaces/" + e.ns + "/pods"}; !slices.Equal(got, want) {
		t.Errorf("the executor's writes for a job of one instance without a CheckpointConfig: %q, want %q", got, want)
	}
	claims, err := e.c.PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 0 {
		t.Errorf("claims in the namespace: %v (%v), want none", claims, err)
	}
	env := c.Kubelet.Env(e.ns, podName(plain.AttemptID, 0))
	if v, ok := env["SM_CHECKPOINT_DIR"]; ok || env["SM_MODEL_DIR"] == "" {
		t.Errorf("SM_CHECKPOINT_DIR %q in a job without a CheckpointConfig (SM_MODEL_DIR %q), want none", v, env["SM_MODEL_DIR"])
	}

	ck := spec(kubetest.Program{Run: 100 * time.Millisecond, Checkpoints: true}, "ml.m5.large", 1)
	start(t, e, ck)
	if x := wait(t, e, ck.AttemptID); !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	if _, err := e.c.PersistentVolumeClaims(e.ns).Get(ctx, claimName(ck.JobID), metav1.GetOptions{}); err != nil {
		t.Errorf("the claim of a job with a CheckpointConfig: %v", err)
	}
	p, err := e.c.Pods(e.ns).Get(ctx, podName(ck.AttemptID, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mounted := false
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		mounted = mounted || m.Name == "checkpoints" && m.MountPath == DefaultCheckpointDir
	}
	if env := c.Kubelet.Env(e.ns, p.Name); !mounted || env["SM_CHECKPOINT_DIR"] != DefaultCheckpointDir {
		t.Errorf("claim mounted at %s: %v; SM_CHECKPOINT_DIR %q", DefaultCheckpointDir, mounted, env["SM_CHECKPOINT_DIR"])
	}
}

// TestOrphansDeleted: after a restart, Sweep deletes the pods of an
// attempt that the store does not hold and nobody recovered, and keeps
// those it holds (recovered, or not yet).
func TestOrphansDeleted(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	dir := t.TempDir()
	e1 := c.newExecutor(t, dir, Options{})
	kept := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	orphan := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	begun := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	start(t, e1, kept)
	start(t, e1, orphan)
	start(t, e1, begun)
	e1.Close()
	e2 := c.newExecutor(t, dir, Options{})
	defer e2.Close()
	if r, err := e2.Recover(context.Background(), executor.Handle{AttemptID: kept.AttemptID}); err != nil || r != executor.Running {
		t.Fatalf("Recover = %v, %v", r, err)
	}
	// A Start of begun is under way in e2 (its pods exist before it
	// tracks them): Sweep must leave them.
	e2.startLock(begun.AttemptID)
	var swept []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if swept, err = e2.Sweep(context.Background(), map[string]bool{kept.AttemptID: true}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sweep: %v", err)
		}
	}
	if len(swept) != 1 || swept[0] != orphan.AttemptID {
		t.Errorf("Sweep ended %v, want only %s", swept, orphan.AttemptID)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(attemptPods(t, e2, orphan.AttemptID)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the orphan's pods are still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p := attemptPods(t, e2, kept.AttemptID); len(p) != 1 || p[0].DeletionTimestamp != nil {
		t.Errorf("the recovered attempt's pods: %+v", p)
	}
	if p := attemptPods(t, e2, begun.AttemptID); len(p) != 1 || p[0].DeletionTimestamp != nil {
		t.Errorf("the pods of the Start under way: %+v", p)
	}
	_ = e2.Stop(context.Background(), kept.AttemptID, time.Second)
	wait(t, e2, kept.AttemptID)
	e2.deletePods(context.Background(), begun.AttemptID, 1, 0, "")
}

// apiServerOutage stops the API server in the middle of a run: the
// running attempt keeps its state, a Stop and a Start issued meanwhile are
// carried out once the server is back, and nothing is duplicated.
func apiServerOutage(t *testing.T, ctx context.Context, c testCluster, ns string) {
	s := c.Server
	if err := c.Kubelet.AddNode(ctx, "outage-n", "m5.large", 0); err != nil {
		t.Fatal(err)
	}
	e, err := New(ctx, Options{Client: s.Client(), Namespace: ns, HealthInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	b := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	start(t, e, a)
	s.StopAPIServer()
	awaitHealth(t, e, true)
	if err := e.Stop(ctx, a.AttemptID, time.Second); err != nil {
		t.Fatalf("Stop while the API server is away: %v", err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := e.Start(ctx, b)
		started <- err
	}()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	if x, err := e.Wait(wctx, a.AttemptID); err == nil {
		t.Errorf("Wait returned %+v while the API server was away: the attempt's pod still holds its capacity", x)
	}
	wcancel()
	if msg := e.CheckCapacity(qshare.Capacity{"ml.m5.large": 1}); !strings.Contains(msg, "cannot count the cluster's nodes") {
		t.Errorf("CheckCapacity while the API server is away = %q", msg)
	}
	if err := s.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatalf("Start across the outage: %v", err)
	}
	// Its end may have passed while the informer was away: stopped, by
	// SIGTERM if the watch saw it.
	if x := wait(t, e, a.AttemptID); !x.Stopped || x.Signal != "SIGTERM" && !strings.Contains(x.Reason, "exit is unknown") {
		t.Errorf("exit of the attempt stopped during the outage = %+v", x)
	}
	if p := attemptPods(t, e, b.AttemptID); len(p) != 1 || p[0].Status.Phase != corev1.PodRunning {
		t.Errorf("the attempt started during the outage has %d pods, want 1 running", len(p))
	}
	if msg := e.CheckCapacity(qshare.Capacity{"ml.m5.large": 1}); msg != "" {
		t.Errorf("CheckCapacity after the outage = %q", msg)
	}
	awaitHealth(t, e, false)
}

// awaitHealth waits until the executor's Health (what the daemon shows in
// every environment's statusReason) reports trouble, or none.
func awaitHealth(t *testing.T, e *Executor, trouble bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for (e.Health() != "") != trouble {
		if time.Now().After(deadline) {
			t.Errorf("Health = %q after 30 s, want trouble: %v", e.Health(), trouble)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if trouble && !strings.Contains(e.Health(), "API server does not answer") {
		t.Errorf("Health = %q, want it to say the API server does not answer", e.Health())
	}
}

// TestMissingNamespace: a Start in a namespace that does not exist fails
// with an error that names it, at once, instead of waiting for pods that
// were never made.
func TestMissingNamespace(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{Namespace: "no-such-namespace"})
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := e.Start(ctx, spec(kubetest.Program{Run: time.Second}, "ml.m5.large", 1))
	if err == nil || !strings.Contains(err.Error(), "namespace no-such-namespace") || ctx.Err() != nil {
		t.Errorf("Start in a missing namespace = %v, want an error naming it at once", err)
	}
}

// TestStartListsNoPods: Start looks for an attempt's pods in the pod
// informer's cache, not with a LIST through the API server, which scans
// every pod of the namespace (in a burst of 2,000 starts, O(n²) work for
// the server). A new executor over the same namespace, as after a
// restart, still adopts an attempt that runs, from its first list.
func TestStartListsNoPods(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	var lists atomic.Int64
	client := c.seeing(t, func(r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Query().Get("labelSelector"), LabelAttemptID) {
			lists.Add(1)
		}
	})
	ns := c.namespace(t, t.TempDir())
	newExec := func() *Executor {
		e, err := New(context.Background(), Options{Client: client, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	e1 := newExec()
	var specs []executor.Spec
	var handles []executor.Handle
	for range 3 {
		s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
		specs, handles = append(specs, s), append(handles, start(t, e1, s))
	}
	e1.Close()
	e2 := newExec()
	if h := start(t, e2, specs[0]); !h.StartedAt.Equal(handles[0].StartedAt) {
		t.Errorf("Start after a restart started the attempt again: started %v, was %v", h.StartedAt, handles[0].StartedAt)
	}
	if n := lists.Load(); n != 0 {
		t.Errorf("Start listed an attempt's pods through the API server %d times, want 0", n)
	}
	for _, s := range specs {
		if _, err := e2.Recover(context.Background(), executor.Handle{AttemptID: s.AttemptID}); err != nil {
			t.Fatal(err)
		}
		if err := e2.Stop(context.Background(), s.AttemptID, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range specs {
		wait(t, e2, s.AttemptID)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

// seeing returns a client of the cluster that shows see each request
// before sending it.
func (c testCluster) seeing(t *testing.T, see func(*http.Request)) *kubeclient.Core {
	t.Helper()
	cfg := rest.CopyConfig(c.Config())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			see(r)
			return rt.RoundTrip(r)
		})
	})
	client, err := kubeclient.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitWithin is wait with a bound of its own, failing (not hanging) when
// the attempt never ends.
func waitWithin(t *testing.T, e *Executor, id string, d time.Duration) (executor.Exit, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	x, err := e.Wait(ctx, id)
	if err != nil {
		t.Errorf("Wait(%s) did not return within %v: %v; its pods:\n%s", id, d, err, describePods(t, e, id))
		return x, false
	}
	return x, true
}

// TestStartTimeoutShorterThanStartWait: a start timeout shorter than
// Options.StartWait ends Start's wait for the pods with it. The timeout is
// measured by Wait's clock, which runs once Start has returned, so a
// Start that waited the whole StartWait (here an hour) held the capacity
// failure back that long.
func TestStartTimeoutShorterThanStartWait(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "brief.xlarge", 1, 1)
	e := c.newExecutor(t, t.TempDir(), Options{StartWait: time.Hour,
		Config: Config{StartTimeout: "1s", InstanceTypes: map[string]InstanceType{"ml.brief.xlarge": {GPUs: ptr(int64(1))}}}})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.brief.xlarge", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Start(ctx, s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Start returned only when its context ended (30 s), not at the start timeout of 1 s")
	}
	if x, ok := waitWithin(t, e, s.AttemptID, time.Minute); ok && (!x.Lost || !strings.Contains(x.Reason, "Capacity failure: 1 of 2 pods were not running")) {
		t.Errorf("exit = %+v, want Lost: a capacity failure", x)
	}
	noPodsLeft(t, e, s.AttemptID, 2)
}

// TestStartTimeoutOnlyWhileStarting: the start timeout bounds the wait
// for all pods to be placed, not the run: an attempt of two instances
// whose pods all ran and one of which ends before the other, after the
// start timeout has passed, succeeds; it is no capacity failure.
func TestStartTimeoutOnlyWhileStarting(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "late.xlarge", 2, 1)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{StartTimeout: "3s", InstanceTypes: map[string]InstanceType{"ml.late.xlarge": {GPUs: ptr(int64(1))}}}})
	defer e.Close()
	s := spec(kubetest.Program{Run: 5 * time.Second}, "ml.late.xlarge", 2)
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
	t.Parallel()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
	e2 := restarted(t, Options{}, s, func(e1 *Executor) {
		e1.markPod(context.Background(), podName(s.AttemptID, 0), annStopped, "true")
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
// meanwhile (given the closed executor, whose client still works), and
// returns a new executor over the same namespace that has recovered s,
// as after a restart.
func restarted(t *testing.T, o Options, s executor.Spec, meanwhile func(*Executor)) *Executor {
	t.Helper()
	c := getCluster(t)
	dir := t.TempDir()
	e1 := c.newExecutor(t, dir, o)
	start(t, e1, s)
	e1.Close()
	meanwhile(e1)
	e2 := c.newExecutor(t, dir, o)
	t.Cleanup(func() { e2.Close() })
	if _, err := e2.Recover(context.Background(), executor.Handle{AttemptID: s.AttemptID}); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return e2
}

// podGone waits up to 20 s for a pod to be gone from the API server (an
// expiry or a Forget removes Finalizer in the background), and says
// whether it is.
func podGone(t *testing.T, e *Executor, name string) (bool, error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := e.c.Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return apierrors.IsNotFound(err), err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// releasedPod reports whether a pod holds no capacity after Wait: gone,
// or ended with its deletion final, kept only by Finalizer until the
// attempt's end is recorded.
func releasedPod(t *testing.T, e *Executor, name string) (bool, string) {
	t.Helper()
	p, err := e.c.Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "gone"
	}
	if err != nil {
		return false, err.Error()
	}
	return removed(p) && terminal(p), fmt.Sprintf("phase %s, deleting %v, finalizers %v", p.Status.Phase, p.DeletionTimestamp, p.Finalizers)
}

// deleteForGood deletes a pod as a person who also removes its
// finalizers does: the API server then has no trace of it.
func deleteForGood(t *testing.T, e *Executor, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.c.Pods(e.ns).Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deletePod(ctx, name, 0)
	if ok, err := podGone(t, e, name); !ok {
		t.Fatalf("the pod %s after its deletion for good: %v", name, err)
	}
}

// noPodsLeft checks that an ended attempt of n pods has none left once
// its end is recorded (Forget: until then Finalizer keeps the deleted
// ones), and deletes any that are.
func noPodsLeft(t *testing.T, e *Executor, id string, n int) {
	t.Helper()
	e.Forget(id)
	deadline := time.Now().Add(20 * time.Second)
	for {
		p := attemptPods(t, e, id)
		if len(p) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d pods left, want none:\n%s", len(p), describePods(t, e, id))
			e.deletePods(context.Background(), id, n, 0, "")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRecoverWithAPodGone: a pod of a two-instance attempt deleted while
// the server was down; the recovered attempt ends (the other pod deleted,
// all or nothing), with a reason that says so, instead of waiting forever
// for a pod that is not there.
func TestRecoverWithAPodGone(t *testing.T) {
	t.Parallel()
	addNodes(t, getCluster(t), "gone.xlarge", 2, 1)
	o := Options{Config: Config{InstanceTypes: map[string]InstanceType{"ml.gone.xlarge": {GPUs: ptr(int64(1))}}}}
	s := spec(kubetest.Program{Run: time.Hour}, "ml.gone.xlarge", 2)
	e2 := restarted(t, o, s, func(e1 *Executor) {
		e1.deletePod(context.Background(), podName(s.AttemptID, 1), 0)
	})
	x, ok := waitWithin(t, e2, s.AttemptID, 30*time.Second)
	if ok && (x.Succeeded() || !strings.Contains(x.Reason, "deleted outside qshare")) {
		t.Errorf("exit = %+v, want a failure that says a pod was deleted outside qshare", x)
	}
	noPodsLeft(t, e2, s.AttemptID, 2)
}

// TestRecoverFromAnOlderList: Recover's list of an attempt's pods is made
// before the attempt is tracked, and the watch may show a newer state of a
// pod in between: here its end and final deletion, after which no event of
// it comes. The list's older state must not replace the newer one, or the
// attempt waits forever for a pod that has long ended (it did once, under
// load, in TestRecoverWithAPodGone). The interleaving is made here by
// hand: the list is taken, then the pod deleted and ended, then the new
// executor's watch has seen that, and only then does it adopt the list.
func TestRecoverFromAnOlderList(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "older.xlarge", 2, 1)
	o := Options{Config: Config{InstanceTypes: map[string]InstanceType{"ml.older.xlarge": {GPUs: ptr(int64(1))}}}}
	s := spec(kubetest.Program{Run: time.Hour}, "ml.older.xlarge", 2)
	dir := t.TempDir()
	e1 := c.newExecutor(t, dir, o)
	start(t, e1, s)
	e1.Close()
	var list []*corev1.Pod
	for _, p := range attemptPods(t, e1, s.AttemptID) {
		list = append(list, &p)
	}
	name := podName(s.AttemptID, 1)
	e1.deletePod(context.Background(), name, 0)
	var final *corev1.Pod
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := e1.c.Pods(e1.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if removed(p) && terminal(p) {
			final = p
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not end %s within 30 s:\n%s", name, describePods(t, e1, s.AttemptID))
		}
	}
	e2 := c.newExecutor(t, dir, o)
	t.Cleanup(func() { e2.Close() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		obj, ok, _ := e2.pods.GetStore().GetByKey(e2.ns + "/" + name)
		if p, _ := obj.(*corev1.Pod); ok && p != nil && p.ResourceVersion == final.ResourceVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new executor's watch did not show %s's end within 30 s", name)
		}
	}
	e2.evaluate(e2.adopt(s.AttemptID, list))
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
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "part.xlarge", 2, 1)
	dir := t.TempDir()
	o := Options{StartWait: 5 * time.Second, Config: Config{StartTimeout: "20s", InstanceTypes: map[string]InstanceType{"ml.part.xlarge": {GPUs: ptr(int64(1))}}}}
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
	e2.deletePods(context.Background(), s.AttemptID, 2, 0, "")
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
	t.Parallel()
	c := getCluster(t)
	dir := t.TempDir()
	e := c.newExecutor(t, dir, Options{})
	defer e.Close()
	ctx := context.Background()
	var hard, used corev1.ResourceList
	if err := json.Unmarshal([]byte(`{"pods":"1"}`), &hard); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"pods":"0"}`), &used); err != nil {
		t.Fatal(err)
	}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "one-pod"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	q, err := e.c.ResourceQuotas(e.ns).Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: give the quota the usage it would.
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	if _, err := e.c.ResourceQuotas(e.ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
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
	e.deletePods(ctx, s.AttemptID, 2, 0, "")
}

// TestDeletedByHandCheckpointing: a pod deleted by hand whose program
// checkpoints and exits 0 on the SIGTERM did not finish its work: the
// attempt fails with a reason that says so, it does not succeed.
func TestDeletedByHandCheckpointing(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour, OnStop: "checkpoint", Checkpoint: 100 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e, s)
	if err := e.c.Pods(e.ns).Delete(context.Background(), podName(s.AttemptID, 0), metav1.DeleteOptions{}); err != nil {
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
	t.Parallel()
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
		p, err := c.Client().Pods(e1.ns).Get(context.Background(), podName(s.AttemptID, 1), metav1.GetOptions{})
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
	t.Parallel()
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
	e.deletePods(context.Background(), s.AttemptID, 2, 0, "")
}

// refusedByNode starts an attempt of one pod that no node takes and marks
// the pod failed as a node's kubelet that refused it does (no container
// status), and returns the attempt. Its files are in a ConfigMap (large
// hyperparameters), for the tests of what goes with its pod.
func refusedByNode(t *testing.T, e *Executor) executor.Spec {
	t.Helper()
	s := withHyperParameters(t, spec(kubetest.Program{Run: time.Hour}, "ml.nowhere.xlarge", 1), inlineBudget+1)
	start(t, e, s)
	setPodStatus(t, e, podName(s.AttemptID, 0), func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu"
	})
	return s
}

// setPodStatus changes a pod's status as its node's kubelet would, on
// the pod as it is now: the played scheduler and kubelet write it too,
// so an update made on an older read is retried.
func setPodStatus(t *testing.T, e *Executor, name string, change func(*corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := e.c.Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(p)
		_, err = e.c.Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFollowLogOfPodThatNeverRan: following the log of an attempt whose
// pod failed before its container ran (the node's kubelet refused it)
// ends at once with the empty log, instead of waiting for a start that
// will not come.
func TestFollowLogOfPodThatNeverRan(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{StartWait: 100 * time.Millisecond})
	defer e.Close()
	s := refusedByNode(t, e)
	ctx := context.Background()
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
	e.deletePods(ctx, s.AttemptID, 1, 0, "")
}

// TestEvictedByKubelet: a pod that its node's kubelet evicted, with the
// status a kubelet writes (reason Evicted, and a DisruptionTarget
// condition TerminationByKubelet), ends as an eviction that counts as a
// failure (retried or FAILED), as the docs say: not as a capacity
// failure requeued without a retry, which would run a job that makes its
// node evict it (its disk filled) again and again, forever.
func TestEvictedByKubelet(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour, OnStop: "ignore"}, "ml.m5.large", 1)
	start(t, e, s)
	ctx := context.Background()
	msg := "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi."
	setPodStatus(t, e, podName(s.AttemptID, 0), func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", msg
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "TerminationByKubelet", Message: msg, LastTransitionTime: metav1.Now()})
	})
	if x, ok := waitWithin(t, e, s.AttemptID, 30*time.Second); ok && (x.Lost || x.Succeeded() || !strings.HasPrefix(x.Reason, "Evicted:")) {
		t.Errorf("exit = %+v, want a failure whose reason starts Evicted:", x)
	}
	e.deletePods(ctx, s.AttemptID, 1, 0, "")
}

// TestSweptObjectsDeleted: Sweep deletes an orphan attempt's ConfigMap and
// Service with its pods; nothing else would (its pods never end, so they
// never expire).
func TestSweptObjectsDeleted(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "swept.xlarge", 2, 0)
	s := spec(kubetest.Program{Run: time.Hour}, "ml.swept.xlarge", 2)
	e2 := restarted(t, Options{}, s, func(*Executor) {})
	e2.mu.Lock()
	delete(e2.attempts, labelValue(s.AttemptID)) // recovered by nobody: an orphan
	e2.mu.Unlock()
	if swept, err := e2.Sweep(context.Background(), nil); err != nil || len(swept) != 1 {
		t.Fatalf("Sweep = %v, %v", swept, err)
	}
	ctx := context.Background()
	if _, err := e2.c.ConfigMaps(e2.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the swept attempt's ConfigMap: %v, want it deleted", err)
	}
	if _, err := e2.c.Services(e2.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the swept attempt's Service: %v, want it deleted", err)
	}
}

// apiServerHung: an API server that keeps its connections but answers
// nothing (frozen, as a hung or overloaded one is) is reported by Health
// as one that does not answer, and the report goes once it answers again:
// the health check is bounded, it does not wait on the server for ever.
func apiServerHung(t *testing.T, ctx context.Context, c testCluster, ns string) {
	s := c.Server
	e, err := New(ctx, Options{Client: s.Client(), Namespace: ns, HealthInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		closed := make(chan struct{})
		go func() { e.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Error("Close did not return within 30 s")
		}
	}()
	awaitHealth(t, e, false)
	if err := s.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	awaitHealth(t, e, true)
	if err := s.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	awaitHealth(t, e, false)
}

// TestEndedBeforeRunningExpires: a pod that ended before its container ran
// (refused by its node) has no finish time in its container status; it
// still expires after keepEnded, with its attempt's ConfigMap, instead of
// staying for good.
func TestEndedBeforeRunningExpires(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{StartWait: 100 * time.Millisecond, Config: Config{KeepEnded: "1ms"}})
	defer e.Close()
	s := refusedByNode(t, e)
	ctx := context.Background()
	name := podName(s.AttemptID, 0)
	if _, err := e.c.ConfigMaps(e.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{}); err != nil {
		t.Fatalf("its ConfigMap before: %v", err)
	}
	waitWithin(t, e, s.AttemptID, 30*time.Second)
	e.Forget(s.AttemptID)
	time.Sleep(10 * time.Millisecond)
	e.expireEnded()
	if ok, err := podGone(t, e, name); !ok {
		t.Errorf("the ended pod after keepEnded: %v, want it deleted", err)
		e.deletePods(ctx, s.AttemptID, 1, 0, "")
	}
	if _, err := e.c.ConfigMaps(e.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("its ConfigMap: %v, want it deleted", err)
	}
}

// TestCheckpointPathOverAMount: a CheckpointConfig.LocalPath that is one of
// the pod's own mounts (/opt/ml/model, /opt/ml/input/config) is refused
// by Validate at submit, not accepted and then refused by the API server
// (a mount path twice) at every start.
func TestCheckpointPathOverAMount(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	for _, dir := range []string{"/opt/ml/model", "/opt/ml/input/config", "/opt/ml//model/"} {
		s := spec(kubetest.Program{Run: time.Millisecond}, "ml.m5.large", 1)
		var m map[string]any
		if err := json.Unmarshal([]byte(s.Payload), &m); err != nil {
			t.Fatal(err)
		}
		m["CheckpointConfig"] = map[string]string{"LocalPath": dir}
		b, _ := json.Marshal(m)
		s.Payload = string(b)
		if err := e.Validate(s.Payload, s.Demand); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err := e.Start(ctx, s)
			cancel()
			t.Errorf("Validate accepted CheckpointConfig.LocalPath %q; Start then: %v", dir, err)
			e.deletePods(context.Background(), s.AttemptID, 1, 0, "")
		} else if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "LocalPath") {
			t.Errorf("Validate of CheckpointConfig.LocalPath %q = %v, want EINVALID naming it", dir, err)
		}
	}
}

// TestLostAttemptObjectsDeleted: an attempt whose pods were all deleted
// while the server was down is Lost on Recover, and its ConfigMap goes
// too; no pod of it will ever expire and take it.
func TestLostAttemptObjectsDeleted(t *testing.T) {
	t.Parallel()
	s := withHyperParameters(t, spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1), inlineBudget+1) // files in a ConfigMap
	e2 := restarted(t, Options{}, s, func(e1 *Executor) {
		if _, err := e1.c.ConfigMaps(e1.ns).Get(context.Background(), baseName(s.AttemptID), metav1.GetOptions{}); err != nil {
			t.Fatalf("the attempt's ConfigMap: %v", err)
		}
		deleteForGood(t, e1, podName(s.AttemptID, 0))
	})
	if r, err := e2.Recover(context.Background(), executor.Handle{AttemptID: s.AttemptID}); err != nil || r != executor.Lost {
		t.Fatalf("Recover = %v, %v; want Lost", r, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := e2.c.ConfigMaps(e2.ns).Get(context.Background(), baseName(s.AttemptID), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Lost attempt's ConfigMap: %v, want it deleted", err)
		}
	}
}

// TestClaimsSweptAfterRestart: a job that ended while no server ran (its
// JobFinished never came) keeps its checkpoint claim until the restarted
// executor's SweepJobs, which deletes it and leaves the claims of the
// store's unfinished jobs and of a job this executor started since.
func TestClaimsSweptAfterRestart(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	dir := t.TempDir()
	e1 := c.newExecutor(t, dir, Options{})
	ended := spec(kubetest.Program{Run: 100 * time.Millisecond, Checkpoints: true}, "ml.m5.large", 1)
	live := spec(kubetest.Program{Run: time.Hour, Checkpoints: true}, "ml.m5.large", 1)
	start(t, e1, ended)
	start(t, e1, live)
	if x := wait(t, e1, ended.AttemptID); !x.Succeeded() {
		t.Fatalf("the ended job's attempt: %+v", x)
	}
	e1.Close() // before any JobFinished: the server died

	e2 := c.newExecutor(t, dir, Options{})
	defer e2.Close()
	if r, err := e2.Recover(context.Background(), executor.Handle{AttemptID: live.AttemptID}); err != nil || r != executor.Running {
		t.Fatalf("Recover = %v, %v", r, err)
	}
	since := spec(kubetest.Program{Run: time.Hour, Checkpoints: true}, "ml.m5.large", 1)
	start(t, e2, since)
	swept, err := e2.SweepJobs(context.Background(), map[string]bool{live.JobID: true})
	if err != nil || len(swept) != 1 || swept[0] != ended.JobID {
		t.Fatalf("SweepJobs = %v, %v; want only %s", swept, err, ended.JobID)
	}
	ctx := context.Background()
	claim := func(job string) (*corev1.PersistentVolumeClaim, error) {
		return e2.c.PersistentVolumeClaims(e2.ns).Get(ctx, claimName(job), metav1.GetOptions{})
	}
	// The claim carries the pvc-protection finalizer, which no controller
	// of these tests removes: its deletion is what the executor does.
	if pvc, err := claim(ended.JobID); !apierrors.IsNotFound(err) && (err != nil || pvc.DeletionTimestamp == nil) {
		t.Errorf("the ended job's claim: %v, want it deleted", err)
	}
	for _, s := range []executor.Spec{live, since} {
		if pvc, err := claim(s.JobID); err != nil || pvc.DeletionTimestamp != nil {
			t.Errorf("the claim of %s: %v, want it kept", s.JobID, err)
		}
	}
	if again, err := e2.SweepJobs(ctx, nil); err != nil || len(again) != 0 {
		t.Errorf("a second SweepJobs = %v, %v; want it to do nothing", again, err)
	}
	for _, s := range []executor.Spec{live, since} {
		_ = e2.Stop(ctx, s.AttemptID, time.Second)
		wait(t, e2, s.AttemptID)
	}
}

// TestManyInstancesConfig: the resourceconfig.json files of an attempt of
// 150 instances (each names all 150 hosts twice: over 2 MB in all) do not
// fit one ConfigMap; they are split over the attempt's ConfigMap and
// parts, which the API server takes, and each pod's config volume finds
// its own file and the shared ones. Once the pods are gone, every part
// goes with them; an attempt found lost after a restart (no pod left to
// say how many parts) loses them too. That is the long instance
// (QSHARE_LONG=1, a third of this package's time); the README's `go
// test ./...` runs the same with 20 instances and ConfigMaps cut to 32 KiB
// (its executor's configBudget).
func TestManyInstancesConfig(t *testing.T) {
	t.Parallel()
	n := longtest.Pick(20, 150)
	c := getCluster(t)
	addNodes(t, c, "wide.large", n, 0)
	e := c.newExecutor(t, t.TempDir(), Options{})
	defer e.Close()
	e.configBudget = longtest.Pick(32<<10, e.configBudget)
	ctx := context.Background()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.wide.large", n)
	start(t, e, s)
	cms, err := e.c.ConfigMaps(e.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelAttemptID + "=" + labelValue(s.AttemptID)})
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]map[string]string{}
	for _, cm := range cms.Items {
		data[cm.Name] = cm.Data
	}
	base, err := e.c.ConfigMaps(e.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parts := partsOf(base.Annotations)
	if parts < 2 || len(cms.Items) != parts {
		t.Fatalf("%d ConfigMaps, annotated %d parts; want the files split over more than one", len(cms.Items), parts)
	}
	pods := attemptPods(t, e, s.AttemptID)
	if len(pods) != n {
		t.Fatalf("%d pods, want %d", len(pods), n)
	}
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = podName(s.AttemptID, i) + "." + baseName(s.AttemptID)
	}
	for _, p := range pods {
		i, _ := strconv.Atoi(p.Labels[LabelIndex])
		files := configFiles(t, &p, data)
		var rc executor.ResourceConfig
		if err := json.Unmarshal([]byte(files["resourceconfig.json"]), &rc); err != nil || rc.CurrentHost != hosts[i] || !slices.Equal(rc.Hosts, hosts) {
			t.Fatalf("pod %d: resourceconfig.json %.200q (%v)", i, files["resourceconfig.json"], err)
		}
		if files["hyperparameters.json"] != `{"epochs":"3"}` || files["inputdataconfig.json"] == "" {
			t.Fatalf("pod %d: config files %v", i, slices.Collect(maps.Keys(files)))
		}
	}
	if err := e.Stop(ctx, s.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	wait(t, e, s.AttemptID)
	e.Forget(s.AttemptID) // its end recorded: the pods go, and then the ConfigMaps
	noConfigMaps := func(id string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			l, err := e.c.ConfigMaps(e.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelAttemptID + "=" + labelValue(id)})
			if err == nil && len(l.Items) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the ConfigMaps of %s are still there: %v, %d", id, err, len(l.Items))
			}
		}
	}
	noConfigMaps(s.AttemptID)

	// Lost: its ConfigMaps made, its pods gone while no server ran.
	lost := spec(kubetest.Program{Run: time.Hour}, "ml.wide.large", n)
	req, err := trainingjob.Parse(lost.Payload)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.build(lost, req, "ml.wide.large", n, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range append([]*corev1.ConfigMap{p.config}, p.parts...) {
		if _, err := e.c.ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := e.Recover(ctx, executor.Handle{AttemptID: lost.AttemptID}); err != nil || r != executor.Lost {
		t.Fatalf("Recover = %v, %v; want Lost", r, err)
	}
	noConfigMaps(lost.AttemptID)
}

// configFiles resolves pod's /opt/ml/input/config as a kubelet would:
// path → content, from the ConfigMaps (by name → data) of its config
// volume, or from its own annotations (downward API).
func configFiles(t *testing.T, p *corev1.Pod, data map[string]map[string]string) map[string]string {
	t.Helper()
	files := map[string]string{}
	add := func(cm string, items []corev1.KeyToPath) {
		for _, it := range items {
			if d, ok := data[cm][it.Key]; ok {
				files[it.Path] = d
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Name != "config" {
			continue
		}
		switch {
		case v.ConfigMap != nil:
			add(v.ConfigMap.Name, v.ConfigMap.Items)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				add(src.ConfigMap.Name, src.ConfigMap.Items)
			}
		case v.DownwardAPI != nil:
			for _, it := range v.DownwardAPI.Items {
				if it.FieldRef == nil {
					t.Fatalf("pod %s: config item %+v is not a field", p.Name, it)
				}
				key, ok := strings.CutPrefix(it.FieldRef.FieldPath, "metadata.annotations['")
				key, ok2 := strings.CutSuffix(key, "']")
				if !ok || !ok2 {
					t.Fatalf("pod %s: config item %+v is not an annotation", p.Name, it)
				}
				d, ok := p.Annotations[key]
				if !ok {
					t.Fatalf("pod %s: config item %s names annotation %q, which the pod lacks", p.Name, it.Path, key)
				}
				files[it.Path] = d
			}
		default:
			t.Fatalf("pod %s: config volume %+v", p.Name, v.VolumeSource)
		}
	}
	return files
}

// withHyperParameters gives s hyperparameters of about size bytes.
func withHyperParameters(t *testing.T, s executor.Spec, size int) executor.Spec {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s.Payload), &m); err != nil {
		t.Fatal(err)
	}
	hp := map[string]string{}
	for i := 0; i*260 < size; i++ {
		hp[fmt.Sprintf("h%03d", i)] = strings.Repeat("x", 250)
	}
	m["HyperParameters"] = hp
	b, _ := json.Marshal(m)
	s.Payload = string(b)
	return s
}

// TestOneInstanceFilesOnPod: an attempt of one instance carries its
// input/config files in its pod's annotations, projected by the downward
// API, and has no ConfigMap to create, read or delete; the API server
// takes the volume. Hyperparameters past inlineBudget go to a ConfigMap
// as before.
func TestOneInstanceFilesOnPod(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	var cmRequests atomic.Int64
	client := c.seeing(t, func(r *http.Request) {
		if strings.Contains(r.URL.Path, "/configmaps") {
			cmRequests.Add(1)
		}
	})
	e := c.newExecutor(t, t.TempDir(), Options{Client: client, Config: Config{KeepEnded: "1ms"}})
	defer e.Close()
	ctx := context.Background()
	s := spec(kubetest.Program{Run: 100 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e, s)
	p, err := e.c.Pods(e.ns).Get(ctx, podName(s.AttemptID, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files := configFiles(t, p, nil)
	var rc executor.ResourceConfig
	if err := json.Unmarshal([]byte(files["resourceconfig.json"]), &rc); err != nil || rc.CurrentHost != podName(s.AttemptID, 0) || len(rc.Hosts) != 1 {
		t.Errorf("resourceconfig.json %q (%v)", files["resourceconfig.json"], err)
	}
	if files["hyperparameters.json"] != `{"epochs":"3"}` || files["inputdataconfig.json"] != "{}" || len(files) != 3 {
		t.Errorf("config files %v", files)
	}
	if x := wait(t, e, s.AttemptID); x.ExitCode != 0 {
		t.Errorf("exit %+v", x)
	}
	e.Forget(s.AttemptID)
	time.Sleep(10 * time.Millisecond)
	e.expireEnded()
	if ok, err := podGone(t, e, p.Name); !ok {
		t.Errorf("the ended pod after keepEnded: %v, want it deleted", err)
	}
	if n := cmRequests.Load(); n != 0 {
		t.Errorf("%d ConfigMap requests for an attempt of one instance, want none", n)
	}

	big := withHyperParameters(t, spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1), inlineBudget+1)
	start(t, e, big)
	cm, err := e.c.ConfigMaps(e.ns).Get(ctx, baseName(big.AttemptID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap of an attempt with %d bytes of hyperparameters: %v", inlineBudget+1, err)
	}
	p, err = e.c.Pods(e.ns).Get(ctx, podName(big.AttemptID, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files = configFiles(t, p, map[string]map[string]string{cm.Name: cm.Data})
	if len(files["hyperparameters.json"]) <= inlineBudget || !strings.Contains(files["resourceconfig.json"], podName(big.AttemptID, 0)) {
		t.Errorf("config files from the ConfigMap: %d bytes of hyperparameters, resourceconfig %q", len(files["hyperparameters.json"]), files["resourceconfig.json"])
	}
	if err := e.Stop(ctx, big.AttemptID, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wait(t, e, big.AttemptID)
}

// TestStartTimeoutDeletesPendingFirst: when the start timeout ends an
// attempt, its pod on no node is deleted before its placed siblings, so
// that the scheduler cannot place it on a node a sibling frees and start
// it for nothing.
func TestStartTimeoutDeletesPendingFirst(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "order.xlarge", 2, 1)
	var mu sync.Mutex
	var deletes []string
	client := c.seeing(t, func(r *http.Request) {
		if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/pods/") {
			mu.Lock()
			deletes = append(deletes, path.Base(r.URL.Path))
			mu.Unlock()
		}
	})
	e, err := New(context.Background(), Options{Client: client, Namespace: c.namespace(t, t.TempDir()), StartWait: 300 * time.Millisecond,
		Config: Config{StartTimeout: "5s", InstanceTypes: map[string]InstanceType{"ml.order.xlarge": {GPUs: ptr(int64(1))}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.order.xlarge", 3)
	start(t, e, s)
	pending := ""
	for deadline := time.Now().Add(10 * time.Second); pending == ""; time.Sleep(20 * time.Millisecond) {
		var unplaced []string
		for _, p := range attemptPods(t, e, s.AttemptID) {
			if p.Spec.NodeName == "" {
				unplaced = append(unplaced, p.Name)
			}
		}
		if len(unplaced) == 1 {
			pending = unplaced[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods on no node: %v, want one of three", unplaced)
		}
	}
	if x := wait(t, e, s.AttemptID); !x.Lost {
		t.Fatalf("exit %+v, want the start timeout's capacity failure", x)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deletes) < 3 || deletes[0] != pending {
		t.Errorf("pods deleted in the order %v, want %s (on no node) first", deletes, pending)
	}
}

// startTimeoutNotCountingOutage: the start timeout counts the time
// the pods could have been placed, not the API server's outage: an
// attempt whose pod waits for a node across an outage longer than the
// timeout is still waiting when the server is back, and runs once a node
// comes, instead of ending as a capacity failure at once. The time the
// server answers before it is ready counts (1.6 s at load 5), so the
// timeout (8 s) leaves room for that, the 1.5 s the test waits, and the
// node's placement, on a loaded machine: at 4 s it failed so at load 10.
func startTimeoutNotCountingOutage(t *testing.T, ctx context.Context, c testCluster, ns string) {
	s := c.Server
	e, err := New(ctx, Options{Client: s.Client(), Namespace: ns, HealthInterval: 100 * time.Millisecond, StartWait: 100 * time.Millisecond,
		Config: Config{StartTimeout: "8s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := spec(kubetest.Program{Run: time.Hour}, "ml.late-outage.xlarge", 1)
	start(t, e, a) // no node yet: its pod waits
	s.StopAPIServer()
	awaitHealth(t, e, true)
	time.Sleep(9 * time.Second)
	if err := s.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	awaitHealth(t, e, false)
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	x, err := e.Wait(wctx, a.AttemptID)
	cancel()
	if err == nil {
		t.Fatalf("the attempt ended %+v right after the outage; want it still waiting for a node", x)
	}
	if err := c.Kubelet.AddNode(ctx, "late-outage-n", "late-outage.xlarge", 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p := attemptPods(t, e, a.AttemptID); len(p) == 1 && p[0].Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the attempt's pod is not running 90 s after a node came")
		}
	}
	if err := e.Stop(ctx, a.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	if x := wait(t, e, a.AttemptID); !x.Stopped {
		t.Errorf("exit %+v, want stopped (not a capacity failure)", x)
	}
}
