package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"qshare/executor/kubernetes/kubeclient"
)

// GPU is the extended resource of NVIDIA's device plugin.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// InstanceTypeLabel is the well-known label of a node's instance type.
const InstanceTypeLabel = "node.kubernetes.io/instance-type"

// FailureFile is SageMaker's failure file; a played container writes its
// Program.Failure there.
const FailureFile = "/opt/ml/output/failure"

// Kubelet plays the scheduler and the kubelets of fake nodes against a
// real API server: it binds each pending pod to a node whose labels match
// the pod's nodeSelector and that has the GPUs it asks for, or marks it
// unschedulable with the scheduler's message; it runs each bound pod's
// container as a Program, reporting Running and then the container's end
// through the pod status subresource; it honours a deletion's grace period
// (SIGTERM at once, SIGKILL when the grace has passed, then the pod's
// final removal); and it serves container logs to the API server, as a
// kubelet does, so that pods/log works. Its methods are safe for
// concurrent use.
type Kubelet struct {
	c      *kubeclient.Core
	ctx    context.Context
	cancel context.CancelFunc
	logs   *httptest.Server
	pods   cache.Indexer
	kick   chan struct{}
	wg     sync.WaitGroup
	// calls bounds the bindings and Running updates in flight: the loop
	// decides in order and hands the API calls to goroutines, as the
	// scheduler's binding cycle and the kubelets of many nodes would, so
	// that a burst of pods does not wait on one round trip at a time.
	calls chan struct{}

	mu      sync.Mutex
	nodes   map[string]*fakeNode
	bound   map[types.UID]string // pods bound by us, to their node, until they end
	binding map[types.UID]bool   // pods whose binding call has not returned
	running map[types.UID]*container
	byName  map[string]*container // namespace/name
	envs    map[string]map[string]string
	volumes map[string]string // namespace/claim: what a container saved there
	ended   map[types.UID]bool
	times   map[string]podTimes // namespace/name
}

// podTimes are when the played kubelet first saw a pod, started its
// container, and saw it gone (deleted for good, or its deletion final while
// a finalizer keeps the object).
type podTimes struct{ seen, started, gone time.Time }

type fakeNode struct {
	name, typ string
	gpus      int
}

// container is a running played container.
type container struct {
	ns, name string
	uid      types.UID
	node     string
	prog     Program
	claim    string // namespace/claim of the checkpoint volume, if any
	msgPath  string
	started  time.Time
	term     chan time.Duration // the deletion's grace, once
	lost     chan struct{}      // closed when its node is lost
	termOnce sync.Once

	mu   sync.Mutex
	out  bytes.Buffer
	done bool
}

// NewKubelet starts a played kubelet and scheduler over c. Close stops it
// (the pods stay as they are).
func NewKubelet(c *kubeclient.Core) (*Kubelet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kubelet{c: c, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), calls: make(chan struct{}, 16),
		nodes: map[string]*fakeNode{}, bound: map[types.UID]string{}, binding: map[types.UID]bool{}, running: map[types.UID]*container{},
		byName: map[string]*container{}, envs: map[string]map[string]string{}, volumes: map[string]string{}, ended: map[types.UID]bool{}, times: map[string]podTimes{}}
	k.logs = httptest.NewUnstartedServer(http.HandlerFunc(k.serveLog))
	k.logs.StartTLS()
	inf := kubeclient.Informer(&corev1.Pod{}, c.Pods("").List, c.Pods("").Watch, nil)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				k.mu.Lock()
				if pt := k.times[p.Namespace+"/"+p.Name]; pt.seen.IsZero() {
					pt.seen = time.Now()
					k.times[p.Namespace+"/"+p.Name] = pt
				}
				k.mu.Unlock()
			}
			k.poke()
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && final(p) {
				k.markGone(p)
			}
			k.poke()
		},
		DeleteFunc: func(any) { k.poke() },
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			k.markGone(p)
		}
	}})
	k.pods = inf.GetIndexer()
	k.wg.Go(func() { inf.RunWithContext(ctx) })
	k.wg.Add(1)
	go k.loop()
	return k, nil
}

// async runs f in a goroutine once one of the calls in flight has ended.
func (k *Kubelet) async(f func()) {
	k.wg.Go(func() {
		select {
		case k.calls <- struct{}{}:
		case <-k.ctx.Done():
			return
		}
		defer func() { <-k.calls }()
		f()
	})
}

func (k *Kubelet) poke() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Close stops the played kubelet, its containers and its log server.
func (k *Kubelet) Close() {
	k.cancel()
	k.wg.Wait()
	k.logs.Close()
}

// AddNode creates a Ready node of an instance type (its label) with gpus
// allocatable GPUs, 96 CPUs and 1 TiB of memory.
func (k *Kubelet) AddNode(ctx context.Context, name, instanceType string, gpus int) error {
	port := k.logs.Listener.Addr().(interface{ String() string }).String()
	_, p, _ := strings.Cut(port, ":")
	pn, _ := strconv.Atoi(p)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{InstanceTypeLabel: instanceType, "kubernetes.io/hostname": name}}}
	created, err := k.c.Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("96"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
		GPU:                   *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	created.Status = corev1.NodeStatus{Capacity: res, Allocatable: res,
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(pn)}}}
	if _, err := k.c.Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	k.mu.Lock()
	k.nodes[name] = &fakeNode{name: name, typ: instanceType, gpus: gpus}
	k.mu.Unlock()
	k.poke()
	return nil
}

// DeleteNode simulates the loss of a node: its containers vanish, its pods
// are marked Failed with a DisruptionTarget condition (as the pod garbage
// collector marks the pods of a node that no longer exists) and deleted,
// and the Node object is deleted.
func (k *Kubelet) DeleteNode(ctx context.Context, name string) error {
	k.mu.Lock()
	delete(k.nodes, name)
	var lost []*container
	for _, c := range k.running {
		if c.node == name {
			lost = append(lost, c)
		}
	}
	k.mu.Unlock()
	for _, c := range lost {
		close(c.lost)
	}
	for _, obj := range k.pods.List() {
		p := obj.(*corev1.Pod)
		if p.Spec.NodeName != name {
			continue
		}
		err := k.updatePod(p.Namespace, p.Name, p.UID, func(cur *corev1.Pod) {
			cur.Status.Phase = corev1.PodFailed
			cur.Status.Reason = "NodeLost"
			cur.Status.Message = "Node " + name + " which was running pod " + p.Name + " is gone"
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists", LastTransitionTime: metav1.Now()})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := k.deletePod(p.Namespace, p.Name, p.UID); err != nil {
			return err
		}
	}
	return k.c.Nodes().Delete(ctx, name, metav1.DeleteOptions{})
}

// Env returns the environment the played kubelet ran a pod's container
// with, or nil.
func (k *Kubelet) Env(namespace, pod string) map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.envs[namespace+"/"+pod]
}

// Volume returns what a container saved on a claim, or "".
func (k *Kubelet) Volume(namespace, claim string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.volumes[namespace+"/"+claim]
}

// Times returns when the played kubelet started a pod's container and
// when it saw the pod deleted for good (zero times when it has not).
func (k *Kubelet) Times(namespace, pod string) (started, gone time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.times[namespace+"/"+pod]
	return t.started, t.gone
}

// Seen returns when the played kubelet's watch first saw a pod (its
// creation, to the watch's delay), or the zero time.
func (k *Kubelet) Seen(namespace, pod string) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.times[namespace+"/"+pod].seen
}

// Started returns the names of the pods of a namespace whose containers
// the played kubelet has started, sorted.
func (k *Kubelet) Started(namespace string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for key := range k.times {
		if ns, name, _ := strings.Cut(key, "/"); ns == namespace {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Running returns the names (namespace/name) of the pods whose containers
// run now, sorted.
func (k *Kubelet) Running() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, c := range k.running {
		out = append(out, c.ns+"/"+c.name)
	}
	sort.Strings(out)
	return out
}

func (k *Kubelet) loop() {
	defer k.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-k.kick:
		case <-t.C:
		}
		k.reconcile()
	}
}

func (k *Kubelet) reconcile() {
	objs := k.pods.List()
	// A container whose pod is gone without the kubelet's doing (deleted
	// with grace 0 by someone) stops.
	exist := make(map[types.UID]bool, len(objs))
	for _, obj := range objs {
		exist[obj.(*corev1.Pod).UID] = true
	}
	var vanished []*container
	k.mu.Lock()
	for uid, c := range k.running {
		if !exist[uid] && time.Since(c.started) > time.Second {
			vanished = append(vanished, c)
			delete(k.running, uid)
		}
	}
	k.mu.Unlock()
	for _, c := range vanished {
		close(c.lost)
	}
	// Only the pods that wait for a binding or a start are decided in the
	// order they were created; the rest are looked at once each. Sorting
	// every pod of the index on each pass, with a key built by string
	// concatenation, was over half of this process's CPU in bench kube.
	type decision struct {
		p    *corev1.Pod
		node string // "" to schedule, else one of ours to start on
	}
	var waiting []decision
	for _, obj := range objs {
		if k.ctx.Err() != nil {
			return
		}
		p := obj.(*corev1.Pod)
		k.mu.Lock()
		c := k.running[p.UID]
		ended := k.ended[p.UID]
		node := k.bound[p.UID]
		if node == "" {
			node = p.Spec.NodeName
		}
		_, ours := k.nodes[node]
		binding := k.binding[p.UID]
		k.mu.Unlock()
		switch {
		case c != nil:
			if p.DeletionTimestamp != nil {
				grace := time.Duration(0)
				if p.DeletionGracePeriodSeconds != nil {
					grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
				}
				c.termOnce.Do(func() { c.term <- grace })
			}
		case p.DeletionTimestamp != nil:
			// Once: a pod whose deletion is final already (grace 0) is
			// kept only by a finalizer, as qshare's are until it has
			// recorded their attempt's end.
			if (ours || p.Spec.NodeName == "") && !final(p) {
				if ours && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					// Its container never ran: a kubelet puts the pod in
					// a terminal phase before its last deletion.
					_ = k.updatePod(p.Namespace, p.Name, p.UID, func(cur *corev1.Pod) {
						if cur.Status.Phase != corev1.PodSucceeded {
							cur.Status.Phase = corev1.PodFailed
						}
					})
				}
				_ = k.deletePod(p.Namespace, p.Name, p.UID)
			}
		case ended, binding:
		case node == "", ours && p.Status.Phase == corev1.PodPending:
			waiting = append(waiting, decision{p, node})
		}
	}
	slices.SortFunc(waiting, func(x, y decision) int {
		a, b := x.p, y.p
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var used map[string]int64
	for _, w := range waiting {
		if k.ctx.Err() != nil {
			return
		}
		if w.node == "" {
			if used == nil {
				used = k.used()
			}
			k.schedule(w.p, used)
		} else {
			k.start(w.p, w.node)
		}
	}
}

func gpusOf(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[GPU]; ok {
			n += q.Value()
		} else if q, ok := c.Resources.Requests[GPU]; ok {
			n += q.Value()
		}
	}
	return n
}

// used sums the GPUs of the pods on each node that have not ended.
func (k *Kubelet) used() map[string]int64 {
	used := map[string]int64{}
	for _, obj := range k.pods.List() {
		q := obj.(*corev1.Pod)
		if q.Status.Phase == corev1.PodSucceeded || q.Status.Phase == corev1.PodFailed {
			continue
		}
		k.mu.Lock()
		n := k.bound[q.UID]
		k.mu.Unlock()
		if n == "" {
			n = q.Spec.NodeName
		}
		if n != "" {
			used[n] += gpusOf(q)
		}
	}
	return used
}

// schedule binds p to a node that fits it, counting it in used, or marks
// it unschedulable.
func (k *Kubelet) schedule(p *corev1.Pod, used map[string]int64) {
	k.mu.Lock()
	nodes := make([]*fakeNode, 0, len(k.nodes))
	for _, n := range k.nodes {
		nodes = append(nodes, n)
	}
	k.mu.Unlock()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	want := gpusOf(p)
	var mismatch, short int
	for _, n := range nodes {
		if !matches(p.Spec.NodeSelector, n) {
			mismatch++
			continue
		}
		if used[n.name]+want > int64(n.gpus) {
			short++
			continue
		}
		k.mu.Lock()
		k.bound[p.UID] = n.name
		k.binding[p.UID] = true
		k.mu.Unlock()
		used[n.name] += want
		ns, name, uid, node := p.Namespace, p.Name, p.UID, n.name
		k.async(func() {
			err := k.c.Pods(ns).Bind(k.ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid},
				Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
			k.mu.Lock()
			delete(k.binding, uid)
			if err != nil {
				// The next pass counts the node's GPUs without it.
				delete(k.bound, uid)
			}
			k.mu.Unlock()
			k.poke()
		})
		return
	}
	var why []string
	if short > 0 {
		why = append(why, fmt.Sprintf("%d Insufficient %s", short, GPU))
	}
	if mismatch > 0 {
		why = append(why, fmt.Sprintf("%d node(s) didn't match Pod's node affinity/selector", mismatch))
	}
	msg := fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(why, ", "))
	if len(nodes) == 0 {
		msg = "no nodes available to schedule pods"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return
		}
	}
	cur := p.DeepCopy()
	setCondition(cur, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg})
	_, _ = k.c.Pods(p.Namespace).UpdateStatus(k.ctx, cur, metav1.UpdateOptions{})
}

func setCondition(p *corev1.Pod, c corev1.PodCondition) {
	c.LastTransitionTime = metav1.Now()
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

func matches(sel map[string]string, n *fakeNode) bool {
	for k, v := range sel {
		switch k {
		case InstanceTypeLabel:
			if v != n.typ {
				return false
			}
		case "kubernetes.io/hostname":
			if v != n.name {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// start runs a bound pod's container: it reports the pod Running and runs
// its Program.
func (k *Kubelet) start(p *corev1.Pod, node string) {
	if len(p.Spec.Containers) == 0 {
		return
	}
	ct := p.Spec.Containers[0]
	prog, err := ParseProgram(ct.Command, ct.Args)
	env := map[string]string{}
	for _, e := range ct.Env {
		env[e.Name] = e.Value
	}
	c := &container{ns: p.Namespace, name: p.Name, uid: p.UID, node: node, prog: prog, msgPath: ct.TerminationMessagePath,
		started: time.Now(), term: make(chan time.Duration, 1), lost: make(chan struct{})}
	for _, m := range ct.VolumeMounts {
		if m.MountPath != env["SM_CHECKPOINT_DIR"] {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				c.claim = p.Namespace + "/" + v.PersistentVolumeClaim.ClaimName
			}
		}
	}
	k.mu.Lock()
	if k.running[p.UID] != nil {
		k.mu.Unlock()
		return
	}
	k.running[p.UID] = c
	k.byName[p.Namespace+"/"+p.Name] = c
	k.envs[p.Namespace+"/"+p.Name] = env
	pt := k.times[p.Namespace+"/"+p.Name]
	pt.started = c.started
	k.times[p.Namespace+"/"+p.Name] = pt
	saved := k.volumes[c.claim]
	k.mu.Unlock()
	if saved != "" {
		c.write("resumed from " + saved)
	}
	if prog.Output != "" {
		c.write(prog.Output)
	}
	if err != nil {
		c.write("played kubelet: " + err.Error())
		c.prog = Program{Exit: 127}
	}
	now := metav1.NewTime(c.started)
	k.async(func() {
		err := k.updatePod(c.ns, c.name, c.uid, func(cur *corev1.Pod) {
			cur.Status.Phase = corev1.PodRunning
			cur.Status.StartTime = &now
			cur.Status.HostIP = "127.0.0.1"
			setCondition(cur, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
			setCondition(cur, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ct.Name, Image: ct.Image, ImageID: "played://" + ct.Image, Ready: true, Started: ptr(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		})
		if err != nil {
			k.forget(c)
			return
		}
		k.wg.Add(1)
		go k.run(c, ct.Name)
	})
}

func ptr[T any](v T) *T { return &v }

func (c *container) write(line string) {
	c.mu.Lock()
	c.out.WriteString(line + "\n")
	c.mu.Unlock()
}

// run plays the container until it ends, then reports its end.
func (k *Kubelet) run(c *container, name string) {
	defer k.wg.Done()
	p := c.prog
	exit, reason, message := 0, "Completed", ""
	var kill <-chan time.Time
	natural := time.NewTimer(p.Run)
	defer natural.Stop()
	var checkpointed <-chan time.Time
	deleting := false
loop:
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-c.lost:
			k.forget(c)
			return
		case <-natural.C:
			if deleting {
				continue
			}
			exit = p.Exit
			if p.Failure != "" && c.msgPath == FailureFile {
				message = p.Failure
			}
			if p.OOM {
				exit, reason = 137, "OOMKilled"
			}
			break loop
		case grace := <-c.term:
			deleting = true
			kill = time.After(grace)
			switch p.OnStop {
			case "ignore":
			case "checkpoint":
				checkpointed = time.After(p.Checkpoint)
			default:
				exit = 143
				break loop
			}
		case <-checkpointed:
			if p.Save != "" && c.claim != "" {
				k.mu.Lock()
				k.volumes[c.claim] = p.Save
				k.mu.Unlock()
			}
			exit = 0
			break loop
		case <-kill:
			exit = 137
			break loop
		}
	}
	if exit != 0 && reason == "Completed" {
		reason = "Error"
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	fin := metav1.Now()
	phase := corev1.PodSucceeded
	if exit != 0 {
		phase = corev1.PodFailed
	}
	var deleted bool
	err := k.updatePod(c.ns, c.name, c.uid, func(cur *corev1.Pod) {
		deleted = cur.DeletionTimestamp != nil
		cur.Status.Phase = phase
		setCondition(cur, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"})
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, Image: cur.Spec.Containers[0].Image, ImageID: "played://" + cur.Spec.Containers[0].Image, Started: ptr(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(exit), Reason: reason, Message: message,
				StartedAt: metav1.NewTime(c.started), FinishedAt: fin}}}}
	})
	k.mu.Lock()
	k.ended[c.uid] = true
	delete(k.running, c.uid)
	delete(k.bound, c.uid)
	k.mu.Unlock()
	if err == nil && deleted {
		_ = k.deletePod(c.ns, c.name, c.uid)
	}
	k.poke()
}

func (k *Kubelet) forget(c *container) {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	k.mu.Lock()
	delete(k.running, c.uid)
	delete(k.bound, c.uid)
	k.ended[c.uid] = true
	k.mu.Unlock()
}

// updatePod changes the status of the pod of that UID through the status
// subresource, retrying as retry does; a pod of the name with another UID
// is a pod gone. The first try starts from the informer's copy, which is
// as new as the pod the caller saw; a conflict reads the pod again.
func (k *Kubelet) updatePod(ns, name string, uid types.UID, change func(*corev1.Pod)) error {
	first := true
	return k.retry(func() error {
		var cur *corev1.Pod
		if obj, ok, _ := k.pods.GetByKey(ns + "/" + name); first && ok {
			cur = obj.(*corev1.Pod).DeepCopy()
		} else {
			var err error
			if cur, err = k.c.Pods(ns).Get(k.ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if cur.UID != uid {
			return apierrors.NewNotFound(corev1.Resource("pods"), name)
		}
		change(cur)
		_, err := k.c.Pods(ns).UpdateStatus(k.ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// deletePod removes a pod for good (grace 0), as a kubelet does once its
// containers are gone.
func (k *Kubelet) deletePod(ns, name string, uid types.UID) error {
	zero := int64(0)
	err := k.retry(func() error {
		return k.c.Pods(ns).Delete(k.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// retry calls f until it succeeds, the object is gone, or the kubelet
// stops: the API server may be away for a while, as in an outage test.
func (k *Kubelet) retry(f func() error) error {
	delay := 20 * time.Millisecond
	for {
		err := f()
		if err == nil || apierrors.IsNotFound(err) || k.ctx.Err() != nil {
			return err
		}
		if apierrors.IsConflict(err) {
			continue
		}
		select {
		case <-k.ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// serveLog answers the API server's /containerLogs/NS/POD/CONTAINER, with
// follow=true streaming until the container ends.
func (k *Kubelet) serveLog(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) < 2 {
		http.NotFound(w, r)
		return
	}
	k.mu.Lock()
	c := k.byName[parts[0]+"/"+parts[1]]
	k.mu.Unlock()
	if c == nil {
		http.Error(w, "container not found", http.StatusNotFound)
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	fl, _ := w.(http.Flusher)
	sent := 0
	for {
		c.mu.Lock()
		b := append([]byte(nil), c.out.Bytes()[sent:]...)
		done := c.done
		c.mu.Unlock()
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return
			}
			sent += len(b)
			if fl != nil {
				fl.Flush()
			}
		}
		if !follow || done {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-k.ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// final reports whether a pod's deletion is final (grace 0): only
// finalizers keep it.
func final(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0
}

// markGone records the first time a pod was seen deleted for good, or
// with its deletion final (a finalizer may keep the object for longer:
// the kubelet is done with it).
func (k *Kubelet) markGone(p *corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pt := k.times[p.Namespace+"/"+p.Name]
	if pt.gone.IsZero() {
		pt.gone = time.Now()
		k.times[p.Namespace+"/"+p.Name] = pt
	}
}
