package kubernetes

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"qshare/executor"
	"qshare/executor/kubernetes/kubeclient"
	"qshare/executor/kubernetes/kubetest"
)

// partition cuts the network between one client and the real API server
// while the rest of the cluster (the played kubelet and scheduler, on
// their own client) carries on: requests fail as a refused connection
// would, and the responses being read (the informer's watch) break.
type partition struct {
	mu      sync.Mutex
	cut     bool
	bodies  map[*cutBody]bool
	refused atomic.Int64 // requests refused that list an attempt's pods
}

type cutBody struct {
	io.ReadCloser
	p *partition
}

func (b *cutBody) Close() error {
	b.p.mu.Lock()
	delete(b.p.bodies, b)
	b.p.mu.Unlock()
	return b.ReadCloser.Close()
}

func (p *partition) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			if strings.Contains(r.URL.Query().Get("labelSelector"), LabelAttemptID) {
				p.refused.Add(1)
			}
			return nil, errors.New("dial tcp: connect: connection refused (test partition)")
		}
		resp, err := rt.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		b := &cutBody{ReadCloser: resp.Body, p: p}
		p.mu.Lock()
		if p.bodies == nil {
			p.bodies = map[*cutBody]bool{}
		}
		p.bodies[b] = true
		p.mu.Unlock()
		resp.Body = b
		return resp, nil
	})
}

// set cuts the partition (closing what is being read) or heals it.
func (p *partition) set(cut bool) {
	p.mu.Lock()
	p.cut = cut
	var open []*cutBody
	if cut {
		for b := range p.bodies {
			open = append(open, b)
		}
	}
	p.mu.Unlock()
	for _, b := range open {
		_ = b.ReadCloser.Close()
	}
}

// TestStartTimeoutOnAStaleWatch: the executor cannot reach the
// API server for a while; meanwhile the cluster places and runs a pod
// that was pending, and the start timeout passes. The executor's watch
// still shows the pod pending, but the start timeout is a capacity
// failure only when the API server says so: the attempt must not be ended
// (Lost, its running pod deleted) on the stale cache. Once the server
// answers again the attempt carries on as running.
func TestStartTimeoutOnAStaleWatch(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	var part partition
	cfg := rest.CopyConfig(c.Config())
	cfg.Wrap(part.wrap)
	client, err := kubeclient.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.namespace(t, t.TempDir())
	e, err := New(context.Background(), Options{Client: client, Namespace: ns, StartWait: 100 * time.Millisecond,
		Config: Config{StartTimeout: "4s", InstanceTypes: map[string]InstanceType{"ml.stale.xlarge": {GPUs: ptr(int64(1))}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	defer part.set(false)
	s := spec(kubetest.Program{Run: time.Hour}, "ml.stale.xlarge", 1)
	start(t, e, s) // pending: no node of its type yet
	a := e.lookupAttempt(s.AttemptID)
	// The daemon waits on every attempt it starts.
	waited := make(chan executor.Exit, 1)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() {
		x, err := e.Wait(wctx, s.AttemptID)
		if err == nil {
			waited <- x
		}
	}()
	part.set(true)
	addNodes(t, c, "stale.xlarge", 1, 1)
	name := podName(s.AttemptID, 0)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.Client().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod does not run on its new node: %v %+v", err, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Now the start timeout passes: the executor either decides on its
	// cache, or asks the server (refused while the partition lasts).
	for {
		e.mu.Lock()
		decided := a.decided
		e.mu.Unlock()
		if decided || part.refused.Load() > 0 && time.Since(a.created) > a.timeout {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the start timeout was neither decided nor checked with the API server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	part.set(false)
	for {
		e.mu.Lock()
		decided, running := a.decided, e.runningLocked(a)
		x := a.exit
		e.mu.Unlock()
		if decided {
			t.Fatalf("the attempt was ended on the stale watch although its pod runs: %+v", x)
		}
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the executor does not see the pod running once the API server answers again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.Stop(context.Background(), s.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-waited:
		if !x.Stopped || x.Lost {
			t.Errorf("exit = %+v, want stopped", x)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return after the Stop")
	}
}

// podHistory records, from a watch of its own, whether each pod of a
// namespace ran on a node, and the grace of its deletion as first seen: 0
// is a forced deletion, which the API server carries out at once (the pod
// still Running there), not its kubelet once the container is gone. (A
// pod bound while its deletion is under way may get 0 from the API server
// itself, which read it unbound; its container never ran.)
type podHistory struct {
	mu           sync.Mutex
	ran          map[string]bool
	deleting     map[string]int64 // the grace of the deletion, as first seen
	goneAbruptly []string         // pods on a node removed without a graceful deletion
	goneCount    atomic.Int64
}

func watchPods(t *testing.T, c *kubeclient.Core, ns string) *podHistory {
	t.Helper()
	w, err := c.Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &podHistory{ran: map[string]bool{}, deleting: map[string]int64{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			h.mu.Lock()
			if p.Spec.NodeName != "" && (p.Status.Phase == corev1.PodRunning || started(p)) {
				h.ran[p.Name] = true
			}
			if _, seen := h.deleting[p.Name]; !seen && p.DeletionTimestamp != nil {
				h.deleting[p.Name] = 0
				if g := p.DeletionGracePeriodSeconds; g != nil {
					h.deleting[p.Name] = *g
				}
			}
			if ev.Type == watch.Deleted {
				if h.ran[p.Name] && h.deleting[p.Name] == 0 {
					h.goneAbruptly = append(h.goneAbruptly, p.Name)
				}
				h.goneCount.Add(1)
			}
			h.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return h
}

// TestStartTimeoutDeletesGracefully: the start timeout ends a
// gang of three of which two pods run; its deletions were made with
// gracePeriodSeconds 0, which the API server takes as a forced deletion:
// the running pods vanish from the API at once while their containers
// still run on their nodes, the attempt's capacity is released, and the
// scheduler may place another pod on the GPU that is still in use. Every
// pod that was on a node must be gone only after its kubelet ended it.
// (Finalizer keeps the pods until the attempt's end is recorded: Forget
// lets them go, and the watch sees each one's removal.)
func TestStartTimeoutDeletesGracefully(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	addNodes(t, c, "abrupt.xlarge", 2, 1)
	e := c.newExecutor(t, t.TempDir(), Options{StartWait: 300 * time.Millisecond,
		Config: Config{StartTimeout: "4s", InstanceTypes: map[string]InstanceType{"ml.abrupt.xlarge": {GPUs: ptr(int64(1))}}}})
	defer e.Close()
	h := watchPods(t, c.Client(), e.ns)
	s := spec(kubetest.Program{Run: time.Hour}, "ml.abrupt.xlarge", 3)
	start(t, e, s)
	x := wait(t, e, s.AttemptID)
	if !x.Lost || !strings.Contains(x.Reason, "Capacity failure: 1 of 3 pods") {
		t.Fatalf("exit = %+v, want the start timeout's capacity failure", x)
	}
	for _, r := range c.Kubelet.Running() {
		if strings.HasPrefix(r, e.ns+"/") {
			t.Errorf("the container of %s still runs after Wait returned", r)
		}
	}
	e.Forget(s.AttemptID)
	deadline := time.Now().Add(20 * time.Second)
	for h.goneCount.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.goneCount.Load(); n < 3 {
		t.Errorf("%d of the 3 pods gone 20 s after Forget, want all", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.goneAbruptly) > 0 {
		t.Errorf("pods removed from the API while on a node, without their kubelet ending them (a grace-0 deletion): %v", h.goneAbruptly)
	}
}

// TestStopGraceZero: a Stop with grace 0, of a job whose grace
// is 0 or unset, uses the executor's default (executor.Executor: "0 means
// the executor's default"), never a forced deletion: the pod gets SIGTERM,
// is killed at the end of the default grace, and the attempt ends as
// stopped once the pod is gone.
func TestStopGraceZero(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{StopGrace: 2 * time.Second})
	defer e.Close()
	for _, env := range []map[string]string{nil, {"QSHARE_STOP_GRACE": "0"}} {
		s := spec(kubetest.Program{Run: time.Hour, OnStop: "ignore"}, "ml.m5.large", 1)
		s.Payload = payload(kubetest.Program{Run: time.Hour, OnStop: "ignore"}, "ml.m5.large", 1, env)
		start(t, e, s)
		if err := e.Stop(context.Background(), s.AttemptID, 0); err != nil {
			t.Fatal(err)
		}
		name := podName(s.AttemptID, 0)
		deadline := time.Now().Add(20 * time.Second)
		for {
			p, err := e.c.Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("env %v: the pod is gone before its deletion was seen: %v", env, err)
			}
			if p.DeletionTimestamp != nil {
				if g := p.DeletionGracePeriodSeconds; g == nil || *g != 2 {
					t.Errorf("env %v: deletion grace = %v, want the default 2 s", env, g)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("env %v: the pod is not being deleted", env)
			}
			time.Sleep(20 * time.Millisecond)
		}
		x := wait(t, e, s.AttemptID)
		if !x.Stopped || x.Signal != "SIGKILL" {
			t.Errorf("env %v: exit = %+v, want stopped by SIGKILL at the end of the grace", env, x)
		}
		if ok, how := releasedPod(t, e, name); !ok {
			t.Errorf("env %v: the pod after Wait: %s, want it gone, or ended and deleted for good", env, how)
		}
		noPodsLeft(t, e, s.AttemptID, 1)
	}
}

// TestLabelRemovedByHand: someone removes one of the labels by
// which the executor follows its pods from a running pod. The executor
// must not lose the pod: the attempt ends, with a reason that names the
// label, and only once the pod (which qshare deletes, as it does the rest
// of an attempt changed by hand) is gone, so that its capacity is never
// given away while it runs unseen.
func TestLabelRemovedByHand(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{StopGrace: time.Second})
	defer e.Close()
	for _, label := range []string{LabelManagedBy, LabelAttemptID, LabelIndex} {
		t.Run(strings.ReplaceAll(label, "/", "_"), func(t *testing.T) {
			s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
			start(t, e, s)
			name := podName(s.AttemptID, 0)
			patch := []byte(`[{"op":"remove","path":"/metadata/labels/` + strings.ReplaceAll(label, "/", "~1") + `"}]`)
			if _, err := e.c.Pods(e.ns).Patch(context.Background(), name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			x, ok := waitWithin(t, e, s.AttemptID, 30*time.Second)
			if !ok {
				_ = e.c.Pods(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
				return
			}
			if ok, how := releasedPod(t, e, name); !ok {
				t.Errorf("Wait returned (capacity released) while the pod holds its node: %s", how)
			}
			noPodsLeft(t, e, s.AttemptID, 1)
			if x.Succeeded() || x.Stopped || x.Lost || !strings.Contains(x.Reason, label) || !strings.Contains(x.Reason, "outside qshare") {
				t.Errorf("exit = %+v, want a failure whose reason names the label removed outside qshare", x)
			}
		})
	}
}

// TestStartAgainAfterEndedPodsExpired: the daemon starts an
// attempt again by its ID after a restart when the store says STARTING
// (the handle was never recorded). If its pods ran and ended while the
// server was down, longer ago than keepEnded, the restarted executor's
// expiry (every minute from New) must not delete them before the daemon
// has had its say (Sweep), or the Start finds nothing and runs the
// attempt a second time. Once the attempt is followed and forgotten, its
// pods expire as before.
func TestStartAgainAfterEndedPodsExpired(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	dir := t.TempDir()
	o := Options{Config: Config{KeepEnded: "1ms"}}
	e1 := c.newExecutor(t, dir, o)
	s := spec(kubetest.Program{Run: 200 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e1, s)
	if x := wait(t, e1, s.AttemptID); !x.Succeeded() {
		t.Fatalf("first run: %+v", x)
	}
	first := attemptPods(t, e1, s.AttemptID)
	e1.Close() // the server dies before the daemon records the attempt
	e2 := c.newExecutor(t, dir, o)
	defer e2.Close()
	time.Sleep(5 * time.Millisecond) // keepEnded (1 ms) has passed
	e2.expireEnded()                 // the first tick, before the daemon's recovery
	if _, err := e2.Sweep(context.Background(), map[string]bool{s.AttemptID: true}); err != nil {
		t.Fatal(err)
	}
	e2.expireEnded() // after the sweep, before the Start
	start(t, e2, s)
	now := attemptPods(t, e2, s.AttemptID)
	if len(first) != 1 || len(now) != 1 || now[0].UID != first[0].UID {
		t.Fatalf("Start after the expiry made a second set of pods: the attempt runs twice (pods before %d, now %d)", len(first), len(now))
	}
	if x := wait(t, e2, s.AttemptID); !x.Succeeded() {
		t.Errorf("exit of the adopted attempt = %+v, want its first run's success", x)
	}
	e2.Forget(s.AttemptID)
	e2.expireEnded()
	noPodsLeft(t, e2, s.AttemptID, 1)
}

// TestEndedBeforeDeletion: a pod seen only once it has ended and its
// deletion is final counts as ended before its deletion only where its
// container finished more than the margin before the deletion was asked
// for. The kubelet's last deletion (grace 0) of a pod deleted while it ran
// moves DeletionTimestamp to that moment, in whole seconds: a container
// killed at 12:00:49.998 and a last deletion at 12:00:50.001 read as a
// finish a second before the deletion, which is how CI once saw a pod
// deleted outside qshare (TestRecoverWithAPodGone) end its attempt as a
// plain exit 143.
func TestEndedBeforeDeletion(t *testing.T) {
	at := func(s string) metav1.Time {
		v, err := time.Parse(time.RFC3339, "2026-12-06T12:00:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return metav1.NewTime(v)
	}
	pod := func(finished, deletion string, grace int64) *corev1.Pod {
		d := at(deletion)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &d, DeletionGracePeriodSeconds: &grace}}
		if finished != "" {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, FinishedAt: at(finished)}}}}
		}
		return p
	}
	for _, c := range []struct {
		name             string
		finished, delete string
		grace            int64
		margin           time.Duration
		want             bool
	}{
		{"killed by the deletion, last deletion a second later", "49", "50", 0, defaultEndedMargin, false},
		{"killed by the deletion, in the same second", "50", "50", 0, defaultEndedMargin, false},
		{"ended, deleted within the margin", "41", "50", 0, defaultEndedMargin, false},
		{"ended, deleted after the margin", "39", "50", 0, defaultEndedMargin, true},
		{"ended, deleted with a grace still running", "29", "50", 10, defaultEndedMargin, true},
		{"a grace that reaches back before the end", "45", "50", 10, defaultEndedMargin, false},
		{"a short margin", "48", "50", 0, time.Second, true},
		{"a short margin, a second apart", "49", "50", 0, time.Second, false},
		{"no container ran", "", "50", 0, defaultEndedMargin, false},
	} {
		if got := endedBeforeDeletion(pod(c.finished, c.delete, c.grace), c.margin); got != c.want {
			t.Errorf("%s: endedBeforeDeletion = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStartAgainAfterPodsGarbageCollected: the ended pods of an attempt
// that the store still says is STARTING (the server died before it
// recorded the start) are deleted while no server runs, as the pod garbage
// collector deletes ended pods (grace 0). Finalizer keeps them: the
// restarted Start adopts them and reports their end, and never runs the
// attempt a second time; the restarted Recover of another such attempt
// (the store said RUNNING) finds it ended, not Lost (which would run the
// job again). Once the daemon has recorded the ends (Forget), the pods go.
func TestStartAgainAfterPodsGarbageCollected(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	dir := t.TempDir()
	// The test's kubelet deletes within milliseconds of an end: a second
	// tells the collector's later deletion apart.
	o := Options{endedMargin: time.Second}
	e1 := c.newExecutor(t, dir, o)
	starting := spec(kubetest.Program{Run: 100 * time.Millisecond}, "ml.m5.large", 1)
	running := spec(kubetest.Program{Run: 100 * time.Millisecond, Exit: 3}, "ml.m5.large", 1)
	var first []corev1.Pod
	for _, s := range []executor.Spec{starting, running} {
		start(t, e1, s)
		wait(t, e1, s.AttemptID)
		first = append(first, attemptPods(t, e1, s.AttemptID)...)
	}
	ran, _ := c.Kubelet.Times(e1.ns, first[0].Name)
	e1.Close() // the server dies before the daemon records the attempts
	// The collector deletes them later than they ended: the deletion is
	// asked for in a later second than their finish (the times are in
	// whole seconds).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(2 * time.Second)))
	zero := int64(0)
	ctx := context.Background()
	for _, p := range first {
		if err := e1.c.Pods(e1.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	e2 := c.newExecutor(t, dir, o)
	defer e2.Close()
	h := start(t, e2, starting)
	now := attemptPods(t, e2, starting.AttemptID)
	if len(now) != 1 || now[0].UID != first[0].UID || now[0].DeletionTimestamp == nil {
		t.Fatalf("Start after the collector deleted the ended pod made a second set: the attempt runs twice (%d pods, was UID %v)", len(now), first[0].UID)
	}
	if x := wait(t, e2, starting.AttemptID); !x.Succeeded() {
		t.Errorf("exit of the adopted attempt = %+v, want its run's success", x)
	}
	if st, _ := c.Kubelet.Times(e2.ns, first[0].Name); !st.Equal(ran) || h.AttemptID != starting.AttemptID {
		t.Errorf("the container of %s started at %v, then at %v: it ran twice", first[0].Name, ran, st)
	}
	if r, err := e2.Recover(ctx, executor.Handle{AttemptID: running.AttemptID}); err != nil || r != executor.Exited {
		t.Fatalf("Recover of the other attempt = %v, %v; want Exited", r, err)
	}
	if x := wait(t, e2, running.AttemptID); x.ExitCode != 3 || x.Lost {
		t.Errorf("exit of the recovered attempt = %+v, want its run's code 3", x)
	}
	// Their ends recorded (Forget), the collector's deletions complete.
	noPodsLeft(t, e2, starting.AttemptID, 1)
	noPodsLeft(t, e2, running.AttemptID, 1)
}

// TestExpiryBeforeForgetKeepsTheMark: ended pods that expire (keepEnded)
// before the daemon has recorded their attempt's end are deleted but kept
// by Finalizer, so that a restart then still finds them; Forget lets them
// go.
func TestExpiryBeforeForgetKeepsTheMark(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{KeepEnded: "1ms"}})
	defer e.Close()
	s := spec(kubetest.Program{Run: 100 * time.Millisecond}, "ml.m5.large", 1)
	start(t, e, s)
	wait(t, e, s.AttemptID)
	time.Sleep(10 * time.Millisecond)
	e.expireEnded()
	time.Sleep(500 * time.Millisecond) // an unfinalize would have gone through
	if p := attemptPods(t, e, s.AttemptID); len(p) != 1 || p[0].DeletionTimestamp == nil {
		t.Errorf("after the expiry, before Forget: %d pods (%v), want the one deleted and kept by the finalizer", len(p), p)
	}
	noPodsLeft(t, e, s.AttemptID, 1)
}

// TestLabelRemovedWhileDown: a label that qshare gave a pod, removed or
// changed by hand while no server ran, hides the pod from the restarted
// executor's list; Recover finds it by its name, so that it is not taken
// for a deletion (the attempt Lost and requeued while the pod runs on,
// unseen), and the attempt ends as with a label removed while qshare
// watches: the pod deleted, the reason naming the label.
func TestLabelRemovedWhileDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ label string }{{LabelManagedBy}, {LabelAttemptID}} {
		t.Run(strings.ReplaceAll(c.label, "/", "_"), func(t *testing.T) {
			s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 1)
			name := podName(s.AttemptID, 0)
			var first *Executor
			e2 := restarted(t, Options{StopGrace: time.Second}, s, func(e1 *Executor) {
				first = e1
				patch := []byte(`[{"op":"replace","path":"/metadata/labels/` + strings.ReplaceAll(c.label, "/", "~1") + `","value":"changed-by-hand"}]`)
				if _, err := e1.c.Pods(e1.ns).Patch(context.Background(), name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			})
			defer func() { _ = first.c.Pods(first.ns).Delete(context.Background(), name, metav1.DeleteOptions{}) }()
			r, err := e2.Recover(context.Background(), executor.Handle{AttemptID: s.AttemptID})
			if err != nil || r == executor.Lost {
				t.Fatalf("Recover = %v, %v; want the attempt found by its pod's name, not Lost", r, err)
			}
			x, ok := waitWithin(t, e2, s.AttemptID, 30*time.Second)
			if !ok {
				return
			}
			if ok, how := releasedPod(t, e2, name); !ok {
				t.Errorf("Wait returned (capacity released) while the pod holds its node: %s", how)
			}
			noPodsLeft(t, e2, s.AttemptID, 1)
			if x.Succeeded() || x.Lost || !strings.Contains(x.Reason, c.label) || !strings.Contains(x.Reason, "outside qshare") {
				t.Errorf("exit = %+v, want a failure whose reason names the label changed outside qshare", x)
			}
		})
	}
}

// TestObserveKeepsTheNewer: a pod's older state (by resource version) does
// not replace a newer one; a deletion is recorded whatever the version of
// the object it comes with, in the newer state kept.
func TestObserveKeepsTheNewer(t *testing.T) {
	a := &attempt{id: "j-1", n: 1, last: map[int]*corev1.Pod{}}
	pod := func(rv string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(a.id, 0), ResourceVersion: rv, Labels: map[string]string{LabelIndex: "0"}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	a.observe(pod("20", corev1.PodFailed), false)
	a.observe(pod("9", corev1.PodRunning), false) // shorter, so older
	if p := a.last[0]; p.ResourceVersion != "20" || p.Status.Phase != corev1.PodFailed {
		t.Fatalf("kept %s (%s), want the newer 20 (Failed)", p.ResourceVersion, p.Status.Phase)
	}
	a.observe(pod("19", corev1.PodRunning), true)
	if p := a.last[0]; !gone(p) || p.ResourceVersion != "20" || p.Status.Phase != corev1.PodFailed {
		t.Fatalf("after an older deletion: gone %v, %s (%s), want gone in the newer state 20 (Failed)", gone(p), p.ResourceVersion, p.Status.Phase)
	}
	a.observe(pod("21", corev1.PodRunning), false)
	if p := a.last[0]; gone(p) || p.ResourceVersion != "21" {
		t.Fatalf("a newer state (a new pod of the name) was not taken: gone %v, %s", gone(p), p.ResourceVersion)
	}
}
