package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"qshare/executor/kubernetes/kubeclient"
	"qshare/executor/kubernetes/kubetest"
	"qshare/fanout"
)

// KueueVersion is the Kueue release `bench kube --vs-kueue` runs.
const KueueVersion = "v0.17.0"

// kueueBinary is where the Kueue controller is: $QSHARE_KUEUE_BIN, else
// the cache directory beside the Kubernetes binaries, where
// .ci/build-kueue builds it.
func kueueBinary() string {
	if p := os.Getenv("QSHARE_KUEUE_BIN"); p != "" {
		return p
	}
	return filepath.Join(filepath.Dir(kubetest.BinDir()), "kueue-"+KueueVersion, "kueue")
}

// kueueCRDs is the directory of Kueue's CRDs in the module cache.
func kueueCRDs() string {
	mc := os.Getenv("GOMODCACHE")
	if mc == "" {
		gp := os.Getenv("GOPATH")
		if gp == "" {
			home, _ := os.UserHomeDir()
			gp = filepath.Join(home, "go")
		}
		mc = filepath.Join(gp, "pkg", "mod")
	}
	return filepath.Join(mc, "sigs.k8s.io", "kueue@"+KueueVersion, "config", "components", "crd", "bases")
}

// kueueAvailable says why Kueue cannot run here, or nil.
func kueueAvailable() error {
	if _, err := os.Stat(kueueBinary()); err != nil {
		return fmt.Errorf("no Kueue controller at %s (run .ci/build-kueue, or set QSHARE_KUEUE_BIN): %v", kueueBinary(), err)
	}
	if _, err := os.Stat(kueueCRDs()); err != nil {
		return fmt.Errorf("no Kueue CRDs at %s (.ci/build-kueue fetches them with sigs.k8s.io/kueue %s): %v", kueueCRDs(), KueueVersion, err)
	}
	return nil
}

// kueueRun is what runKueue measured: from the first Job created to the
// last admitted (wall), to the last created (created), and, where the
// admitted Jobs make pods, to the last of those the played kubelet's
// watch saw (pods).
type kueueRun struct{ wall, created, pods time.Duration }

// runKueue runs Kueue's controller against cl's API server and times
// opt.Jobs suspended batch/v1 Jobs of one CPU each, created by
// opt.Clients parallel clients into a ClusterQueue with a quota of
// opt.Capacity CPUs, from the first create to the last admission (the
// Job unsuspended). Unless opt.KueueWithoutPods, each admitted Job then
// makes its pod, as the Job controller would (played here: the test
// control plane runs no controller manager), and the played scheduler and
// kubelet bind it and run it for opt.Run, as they do qshare's pods: so
// the API server does for each half the same work of the pods that the
// admissions make while the later admissions are still being made.
func runKueue(ctx context.Context, cl *kubetest.Cluster, opt KubeOptions) (res kueueRun, err error) {
	jobs, clients, capacity := opt.Jobs, opt.Clients, opt.Capacity
	dir, err := os.MkdirTemp("", "qshare-bench-kueue-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	c := cl.Client()
	dyn, err := dynamic.NewForConfig(cl.Config())
	if err != nil {
		return res, err
	}
	batch, err := kubeclient.NewGroup(cl.Config(), batchv1.SchemeGroupVersion, batchv1.AddToScheme)
	if err != nil {
		return res, err
	}
	for _, ns := range []string{"kueue-system"} {
		if _, err := c.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	files, _ := filepath.Glob(filepath.Join(kueueCRDs(), "*.yaml"))
	var plurals []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return res, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			return res, fmt.Errorf("%s: %w", f, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dyn.Resource(crd).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return res, fmt.Errorf("creating the CRD of %s: %w", filepath.Base(f), err)
		}
		if p, _, _ := unstructured.NestedString(obj, "spec", "names", "plural"); p != "" {
			plurals = append(plurals, p)
		}
	}
	// Kueue's caches need every new kind served before it starts.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var rl metav1.APIResourceList
		served := map[string]bool{}
		if err := servedResources(ctx, c, "/apis/kueue.x-k8s.io/v1beta2", &rl); err == nil {
			for _, r := range rl.APIResources {
				served[r.Name] = true
			}
		}
		missing := ""
		for _, p := range plurals {
			if !served[p] {
				missing = p
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("Kueue's CRD %s is not served after two minutes: %v", missing, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Kueue reads its metrics certificate from a fixed path, and its
	// webhook's from a directory; no webhook is registered with the API
	// server, so neither is called.
	for _, d := range []string{"/etc/kueue/metrics/certs", filepath.Join(dir, "webhook")} {
		if err := selfSigned(d); err != nil {
			return res, fmt.Errorf("Kueue's certificates: %w", err)
		}
	}
	conf := filepath.Join(dir, "kueue.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: 127.0.0.1:18081}
metrics: {bindAddress: 127.0.0.1:18443}
webhook: {port: 19443, host: 127.0.0.1, certDir: %s}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
clientConnection: {qps: 1000, burst: 2000}
integrations: {frameworks: ["batch/job"]}
`, filepath.Join(dir, "webhook"))), 0o600); err != nil {
		return res, err
	}
	logf, err := os.Create(filepath.Join(dir, "kueue.log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	cmd := exec.Command(kueueBinary(), "--config", conf, "--kubeconfig", cl.Kubeconfig(), "--feature-gates=VisibilityOnDemand=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	tail := func() string {
		b, _ := os.ReadFile(logf.Name())
		if len(b) > 1500 {
			b = b[len(b)-1500:]
		}
		return string(b)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		resp, err := http.Get("http://127.0.0.1:18081/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("Kueue did not become ready: %v; its log ends:\n%s", err, tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	kq := func(res string) dynamic.NamespaceableResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: res})
	}
	for _, o := range []struct {
		res, ns string
		obj     map[string]any
	}{
		{"resourceflavors", "", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"}}},
		{"clusterqueues", "", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": map[string]any{"name": "cq"},
			"spec": map[string]any{"namespaceSelector": map[string]any{}, "resourceGroups": []any{map[string]any{"coveredResources": []any{"cpu"},
				"flavors": []any{map[string]any{"name": "default", "resources": []any{map[string]any{"name": "cpu", "nominalQuota": fmt.Sprint(capacity)}}}}}}}}},
		{"localqueues", "kueue-bench", map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": map[string]any{"name": "lq", "namespace": "kueue-bench"},
			"spec": map[string]any{"clusterQueue": "cq"}}},
	} {
		var err error
		if o.ns == "" {
			_, err = kq(o.res).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{})
		} else {
			_, err = kq(o.res).Namespace(o.ns).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{})
		}
		if err != nil {
			return res, fmt.Errorf("creating the %s: %w", o.res, err)
		}
	}
	// Count admissions (unsuspended Jobs) as the watch sees them.
	var admitted atomic.Int64
	var last atomic.Int64
	jc := newPlayedJobController(ctx, c, !opt.KueueWithoutPods)
	defer jc.close()
	benchJobs := kubeclient.Resource[batchv1.Job, batchv1.JobList](batch, "jobs", "kueue-bench")
	inf := kubeclient.Informer(&batchv1.Job{}, benchJobs.List, benchJobs.Watch, nil)
	seen := map[string]bool{}
	count := func(obj any) {
		j, ok := obj.(*batchv1.Job)
		if !ok || j.Spec.Suspend == nil || *j.Spec.Suspend || seen[j.Name] {
			return
		}
		seen[j.Name] = true // the informer calls its handlers from one goroutine
		admitted.Add(1)
		last.Store(time.Now().UnixNano())
		jc.admitted(j)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: count, UpdateFunc: func(_, o any) { count(o) }})
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	suspend, one := true, resource.MustParse("1")
	start := time.Now()
	if err := fanout.Each(ctx, clients, jobs, func(ctx context.Context, i int) error {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kueue-%d", i), Namespace: "kueue-bench", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "lq"}},
			Spec: batchv1.JobSpec{Suspend: &suspend, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "example.com/train:1", Command: []string{kubetest.PlayCommand}, Args: kubetest.Program{Run: opt.Run}.Args(),
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: one}}}}}}}}
		_, err := benchJobs.Create(ctx, j, metav1.CreateOptions{})
		return err
	}); err != nil {
		return res, fmt.Errorf("creating the Jobs: %w", err)
	}
	res.created = time.Since(start)
	for deadline := time.Now().Add(30 * time.Minute); admitted.Load() < int64(jobs); {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("Kueue admitted %d of %d Jobs; its log ends:\n%s", admitted.Load(), jobs, tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.wall = time.Unix(0, last.Load()).Sub(start)
	if opt.KueueWithoutPods {
		return res, nil
	}
	if err := jc.wait(); err != nil {
		return res, fmt.Errorf("the played Job controller: %w", err)
	}
	var lastPod time.Time
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		seen, missing := 0, ""
		for i := 0; i < jobs; i++ {
			name := kueuePodName(fmt.Sprintf("kueue-%d", i))
			if t := cl.Kubelet.Seen("kueue-bench", name); !t.IsZero() {
				seen++
				if t.After(lastPod) {
					lastPod = t
				}
			} else {
				missing = name
			}
		}
		if seen == jobs {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("the played kubelet saw %d of Kueue's %d pods (not %s)", seen, jobs, missing)
		}
	}
	res.pods = lastPod.Sub(start)
	return res, nil
}

// playedJobController makes the pod of each Job that Kueue admits, as the
// Job controller of kube-controller-manager would: one pod of the Job's
// template, owned by the Job, created by up to 16 calls at once. It plays
// only the pods' creation, not the Job controller's status updates of the
// Job, which the API server would also have to take in a real cluster.
type playedJobController struct {
	ctx   context.Context
	c     *kubeclient.Core
	on    bool
	calls chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func newPlayedJobController(ctx context.Context, c *kubeclient.Core, on bool) *playedJobController {
	return &playedJobController{ctx: ctx, c: c, on: on, calls: make(chan struct{}, 16)}
}

// kueuePodName names the pod of a Job of Kueue's half.
func kueuePodName(job string) string { return job + "-0" }

// admitted makes the pod of an admitted Job, in the background.
func (jc *playedJobController) admitted(j *batchv1.Job) {
	if !jc.on {
		return
	}
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: kueuePodName(j.Name), Namespace: j.Namespace,
		Labels:          map[string]string{"batch.kubernetes.io/job-name": j.Name, "batch.kubernetes.io/controller-uid": string(j.UID)},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: *j.Spec.Template.Spec.DeepCopy()}
	jc.wg.Go(func() {
		select {
		case jc.calls <- struct{}{}:
		case <-jc.ctx.Done():
			return
		}
		defer func() { <-jc.calls }()
		if _, err := jc.c.Pods(pod.Namespace).Create(jc.ctx, pod, metav1.CreateOptions{}); err != nil {
			jc.mu.Lock()
			if jc.err == nil {
				jc.err = fmt.Errorf("creating pod %s: %w", pod.Name, err)
			}
			jc.mu.Unlock()
		}
	})
}

// wait waits for the creations under way and returns the first error.
func (jc *playedJobController) wait() error {
	jc.wg.Wait()
	jc.mu.Lock()
	defer jc.mu.Unlock()
	return jc.err
}

func (jc *playedJobController) close() { _ = jc.wait() }

// servedResources reads the resources that the server serves in one API
// group version (path is /apis/GROUP/VERSION), as a discovery client would.
func servedResources(ctx context.Context, c *kubeclient.Core, path string, rl *metav1.APIResourceList) error {
	b, err := c.RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, rl)
}

// selfSigned writes a self-signed tls.crt and tls.key for 127.0.0.1 into
// dir.
func selfSigned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}
