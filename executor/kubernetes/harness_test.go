package kubernetes

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"qshare/executor/kubernetes/kubeclient"

	"qshare/executor/kubernetes/kubetest"
)

// TestPlayedKubelet checks the harness itself against the real API server:
// a pod that asks for more GPUs than any node has is marked unschedulable
// with the scheduler's message; one that fits is bound, runs, writes its
// log (read back through pods/log, which the API server fetches from the
// played kubelet) and ends with its exit code; a deletion honours the
// grace period.
//
// It lives here, not in kubetest, so that it runs beside the executor's
// tests in one test binary: a binary of its own linked client-go again
// in every go test ./... . It runs on the package's shared control plane
// and played kubelet, in a namespace and on a node type of its own: a
// control plane of its own cost another kube-apiserver start (some 2 s of
// CPU, 60,000 page faults).
func TestPlayedKubelet(t *testing.T) {
	t.Parallel()
	cl := getCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, ns := cl.Client(), cl.namespace(t, t.TempDir())
	// The test's one node has a type of its own among the shared
	// cluster's nodes, and goes with its pods at the end.
	if err := cl.Kubelet.AddNode(ctx, "played-n1", "played.xlarge", 1); err != nil {
		t.Fatal(err)
	}
	pods := c.Pods(ns)
	t.Cleanup(func() {
		zero := int64(0)
		_ = pods.DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cl.Kubelet.DeleteNode(context.Background(), "played-n1")
	})
	pod := func(name string, gpus int64, p kubetest.Program) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{kubetest.InstanceTypeLabel: "played.xlarge"},
			Containers: []corev1.Container{{Name: "c", Image: "i", Command: []string{kubetest.PlayCommand}, Args: p.Args(),
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubetest.GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	}
	if _, err := pods.Create(ctx, pod("big", 2, kubetest.Program{Run: time.Hour}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("ok", 1, kubetest.Program{Run: 500 * time.Millisecond, Exit: 3, Output: "hello"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other tests' nodes do not match the pod's selector; the
	// scheduler's message counts them as such, and all nodes in its total.
	unschedulable := regexp.MustCompile(`^0/(\d+) nodes are available: 1 Insufficient nvidia.com/gpu, (\d+) node\(s\) didn't match Pod's node affinity/selector\.$`)
	waitHarnessPod(t, ctx, pods, "big", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if m := unschedulable.FindStringSubmatch(c.Message); c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && m != nil {
				all, _ := strconv.Atoi(m[1])
				other, _ := strconv.Atoi(m[2])
				return all == other+1
			}
		}
		return false
	})
	waitHarnessPod(t, ctx, pods, "ok", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	rc, err := pods.GetLogs("ok", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatalf("pod logs: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello\n" {
		t.Errorf("log = %q", b)
	}
	waitHarnessPod(t, ctx, pods, "ok", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil && cs[0].State.Terminated.ExitCode == 3
	})
	// A pod that ignores SIGTERM is gone only after its grace.
	if _, err := pods.Create(ctx, pod("stubborn", 1, kubetest.Program{Run: time.Hour, OnStop: "ignore"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHarnessPod(t, ctx, pods, "stubborn", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	grace := int64(1)
	t0 := time.Now()
	if err := pods.Delete(ctx, "stubborn", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := pods.Get(ctx, "stubborn", metav1.GetOptions{}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if el := time.Since(t0); el < time.Second {
		t.Errorf("the pod was gone %v after a deletion with 1s of grace", el)
	}
}

func waitHarnessPod(t *testing.T, ctx context.Context, pods *kubeclient.Pods, name string, ok func(*corev1.Pod) bool) {
	t.Helper()
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(p) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("pod %s: %v, %+v", name, err, p.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkAPIServerCreates measures what the test API server takes on
// this machine when nothing else writes to it: 16 clients create a pod
// for each job (objects=1) or a PersistentVolumeClaim, a ConfigMap and the
// pod (objects=3), as the Kubernetes executor did for a one-instance
// attempt before such an attempt's files went on its pod (now it makes
// the claim and the pod). It reports jobs/s, the ceiling for what any controller can
// hand the server (docs/kubernetes.md, "What is measured"):
//
//	go test -run '^$' -bench APIServerCreates -benchtime 2000x ./executor/kubernetes/kubetest
func BenchmarkAPIServerCreates(b *testing.B) {
	kubetest.Require(b)
	ctx := context.Background()
	s, err := kubetest.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := s.Config()
	cfg.QPS, cfg.Burst = 1e6, 1e6 // the server's pace, not the client's limiter
	c, err := kubeclient.NewCore(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, objects := range []int{1, 3} {
		b.Run(fmt.Sprintf("objects=%d", objects), func(b *testing.B) {
			ns := fmt.Sprintf("bench-%d-%d", objects, b.N)
			if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 16 {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						meta := metav1.ObjectMeta{Name: fmt.Sprintf("j%d", i)}
						if objects == 3 {
							claim := &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: corev1.PersistentVolumeClaimSpec{
								AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
								Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
							if _, err := c.PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
								b.Error(err)
								return
							}
							if _, err := c.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"resourceconfig.json": "{}"}}, metav1.CreateOptions{}); err != nil {
								b.Error(err)
								return
							}
						}
						pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
						if _, err := c.Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
