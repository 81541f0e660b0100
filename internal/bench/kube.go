package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"qshare/executor/kubernetes/kubetest"
	"qshare/fanout"
)

// KubeOptions configure `qshare bench kube`.
type KubeOptions struct {
	Server ServerOptions
	// Jobs one-pod jobs are submitted by Clients parallel clients onto
	// Capacity instances; the played kubelet ends each pod Run after it
	// starts it (1 s).
	Jobs, Clients, Capacity int
	Run                     time.Duration
	// Timeout bounds the wait for the jobs to finish.
	Timeout time.Duration
	// VsKueue then runs Kueue's controller on a control plane of its own
	// and times the same number of suspended Jobs in a ClusterQueue of
	// Capacity CPUs from creation to admission. Each admitted Job makes
	// its pod (a played Job controller), which the played kubelet runs
	// for Run, unless KueueWithoutPods: no pod work on the API server
	// while Kueue admits (as measured until 2026-12-05), where qshare's
	// half has its pods' creation, binding and status updates.
	VsKueue, KueueWithoutPods bool
}

// KubeResult is what `qshare bench kube` reports for one run.
type KubeResult struct {
	Jobs     int `json:"jobs" row:"jobs;%.0f"`
	Clients  int `json:"clients" row:"clients;%.0f"`
	Capacity int `json:"capacity" row:"capacity (instances);%.0f"`
	// WallS runs from the first submit to the stoppedAt of the last job;
	// JobsPerS is Jobs over it.
	WallS    float64 `json:"wall_s" row:"wall;%.2f;s"`
	JobsPerS float64 `json:"jobs_per_s" row:"jobs/s (first submit → last SUCCEEDED);%.1f"`
	// SubmitToPod is from the start of each SubmitServiceJob call to the
	// played kubelet's watch seeing the job's pod.
	SubmitToPod Latency `json:"submit_to_pod" row:"submit → pod created;%.1f;ms"`
	// PodsPerS is Jobs over the time from the first submit to the last
	// pod created (seen by the watch): qshare's admissions per second,
	// the figure that compares with Kueue's.
	PodsPerS float64 `json:"pods_per_s" row:"pods created/s (first submit → last pod created);%.1f"`
	// ServerCPUPerJobMs is qshare serve's CPU (user and system) over the
	// run, per job.
	ServerCPUPerJobMs float64 `json:"server_cpu_per_job_ms" row:"qshare CPU per job;%.2f;ms"`
	LoadAvg           float64 `json:"load_avg_1m" row:"load average at start (1 min);%.2f"`
	// The Kueue side, with VsKueue: from the first Job created to the
	// last admitted; Ratio is JobsPerS over KueueAdmitPerS.
	KueueWallS float64 `json:"kueue_wall_s,omitempty" row:"Kueue wall;%.2f;s"`
	// KueueCreatedS is when the last of the Jobs had been created: a
	// KueueWallS close to it means Kueue admitted as fast as the clients
	// created.
	KueueCreatedS  float64 `json:"kueue_created_s,omitempty" row:"Kueue's Jobs all created after;%.2f;s"`
	KueueAdmitPerS float64 `json:"kueue_admissions_per_s,omitempty" row:"Kueue admissions/s (first create → last admitted);%.1f;;../shared/recipes/kueue.md measured about 24"`
	// KueuePodsPerS is Jobs over the time from the first Job created to
	// the last of their pods seen by the played kubelet's watch (not with
	// KueueWithoutPods): the figure that matches qshare's PodsPerS.
	KueuePodsPerS float64 `json:"kueue_pods_per_s,omitempty" row:"Kueue pods created/s (first create → last pod created);%.1f"`
	KueueLoadAvg  float64 `json:"kueue_load_avg_1m,omitempty" row:"load average at Kueue's start;%.2f"`
	// Ratio is PodsPerS over KueueAdmitPerS; RunRatio JobsPerS over it.
	Ratio    float64 `json:"ratio,omitempty" row:"ratio (qshare pods created/s / Kueue admissions/s);%.2f;;target ≥ 8"`
	RunRatio float64 `json:"run_ratio,omitempty" row:"ratio (qshare jobs run/s / Kueue admissions/s);%.2f"`
}

// RunKube starts a test control plane (kubetest: etcd and kube-apiserver
// built by .ci/build-kube, with the played kubelet and scheduler), a
// temporary `qshare serve --executor kubernetes` on it, and runs
// opt.Jobs one-pod jobs through the AWS API.
func RunKube(ctx context.Context, opt KubeOptions) (KubeResult, error) {
	if opt.Jobs < 1 || opt.Clients < 1 {
		return KubeResult{}, fmt.Errorf("bench kube: need at least one job and one client")
	}
	if err := kubetest.Available(); err != nil {
		return KubeResult{}, fmt.Errorf("bench kube: %w", err)
	}
	if opt.VsKueue {
		if err := kueueAvailable(); err != nil {
			return KubeResult{}, fmt.Errorf("bench kube --vs-kueue: %w", err)
		}
	}
	if opt.Capacity == 0 {
		opt.Capacity = 200
	}
	if opt.Run == 0 {
		opt.Run = time.Second
	}
	if opt.Timeout == 0 {
		opt.Timeout = 30 * time.Minute
	}
	const ns = "bench"
	cl, err := benchCluster(ctx, ns)
	if err != nil {
		return KubeResult{}, err
	}
	closed := false
	defer func() {
		if !closed {
			cl.Close()
		}
	}()
	dir, err := os.MkdirTemp("", "qshare-bench-kube-")
	if err != nil {
		return KubeResult{}, err
	}
	defer os.RemoveAll(dir)
	kc := filepath.Join(dir, "kube.yaml")
	if err := os.WriteFile(kc, []byte("startTimeout: 30m\n"), 0o600); err != nil {
		return KubeResult{}, err
	}
	so := opt.Server
	so.Executor = "kubernetes"
	so.Args = append(append([]string(nil), so.Args...), "--kubeconfig", cl.Kubeconfig(), "--namespace", ns, "--kube-config", kc)
	res := KubeResult{Jobs: opt.Jobs, Clients: opt.Clients, Capacity: opt.Capacity, LoadAvg: LoadAverage()}
	err = withServer(ctx, "", so, ClientOptions{Conns: opt.Clients}, e2eConfig(opt.Capacity), func(c *batch.Client, queues map[string]string, _ string, srv *Server) error {
		return kubeRun(ctx, c, queues["e2e"], srv, cl, ns, opt, &res)
	})
	if err != nil || !opt.VsKueue {
		return res, err
	}
	// Kueue's half runs on a control plane of its own, as empty as
	// qshare's was at its start: on the same one, the played kubelet
	// would still pass over qshare's ended pods while Kueue admits.
	cl.Close()
	closed = true
	kcl, err := benchCluster(ctx, "kueue-bench")
	if err != nil {
		return res, fmt.Errorf("bench kube --vs-kueue: %w", err)
	}
	defer kcl.Close()
	res.KueueLoadAvg = LoadAverage()
	kr, err := runKueue(ctx, kcl, opt)
	if err != nil {
		return res, fmt.Errorf("bench kube --vs-kueue: %w", err)
	}
	res.KueueWallS = round(kr.wall.Seconds(), 3)
	res.KueueCreatedS = round(kr.created.Seconds(), 3)
	res.KueueAdmitPerS = round(float64(opt.Jobs)/kr.wall.Seconds(), 2)
	if kr.pods > 0 {
		res.KueuePodsPerS = round(float64(opt.Jobs)/kr.pods.Seconds(), 2)
	}
	res.Ratio = round(res.PodsPerS/res.KueueAdmitPerS, 2)
	res.RunRatio = round(res.JobsPerS/res.KueueAdmitPerS, 2)
	return res, nil
}

// benchCluster starts a test control plane with a namespace ns and four
// nodes of m5.large.
func benchCluster(ctx context.Context, ns string) (*kubetest.Cluster, error) {
	cl, err := kubetest.StartCluster(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := cl.Client().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		cl.Close()
		return nil, err
	}
	for i := 0; i < 4; i++ {
		if err := cl.Kubelet.AddNode(ctx, fmt.Sprintf("bench-%d", i), "m5.large", 0); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return cl, nil
}

func kubeRun(ctx context.Context, c *batch.Client, queue string, srv *Server, cl *kubetest.Cluster, ns string, opt KubeOptions, res *KubeResult) error {
	payload := kubetest.Program{Run: opt.Run}.Payload(e2eType, 1, nil)
	var mu sync.Mutex
	submitted := make(map[string]time.Time, opt.Jobs)
	cpu := startCPU(srv)
	start := time.Now()
	if err := fanout.Each(ctx, opt.Clients, opt.Jobs, func(ctx context.Context, i int) error {
		t := time.Now()
		out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
			JobName: aws.String(fmt.Sprintf("kube-%d", i)), JobQueue: aws.String(queue), QuotaShareName: aws.String("s0"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload)})
		if err != nil {
			return fmt.Errorf("bench kube: submit %d: %w", i, err)
		}
		mu.Lock()
		submitted[aws.ToString(out.JobId)] = t
		mu.Unlock()
		return nil
	}); err != nil {
		return err
	}
	if err := waitDone(ctx, c, []string{queue}, srv, 100*time.Millisecond, opt.Timeout); err != nil {
		return err
	}
	cpu.stop()
	done, err := listJobs(ctx, c, queue, types.ServiceJobStatusSucceeded)
	if err != nil {
		return err
	}
	if len(done) != opt.Jobs {
		failed, _ := listJobs(ctx, c, queue, types.ServiceJobStatusFailed)
		why := ""
		if len(failed) > 0 {
			why = ", the first failed because " + aws.ToString(failed[0].StatusReason)
		}
		return fmt.Errorf("bench kube: %d of %d jobs SUCCEEDED%s", len(done), opt.Jobs, why)
	}
	var last time.Time
	for _, j := range done {
		if t := ms(j.StoppedAt); t.After(last) {
			last = t
		}
	}
	wall := last.Sub(start)
	res.WallS = round(wall.Seconds(), 3)
	res.JobsPerS = round(float64(opt.Jobs)/wall.Seconds(), 2)
	var lats []time.Duration
	var lastPod time.Time
	pods := cl.Kubelet.Started(ns)
	sort.Strings(pods)
	for _, name := range pods {
		job := cl.Kubelet.Env(ns, name)["QSHARE_JOB_ID"]
		if t0, ok := submitted[job]; ok {
			if seen := cl.Kubelet.Seen(ns, name); !seen.IsZero() {
				lats = append(lats, seen.Sub(t0))
				if seen.After(lastPod) {
					lastPod = seen
				}
			}
		}
	}
	if len(lats) != opt.Jobs {
		return fmt.Errorf("bench kube: the played kubelet saw %d pods of the %d jobs", len(lats), opt.Jobs)
	}
	res.SubmitToPod = Latencies(lats)
	res.PodsPerS = round(float64(opt.Jobs)/lastPod.Sub(start).Seconds(), 2)
	if d, ok := cpu.server(); ok {
		res.ServerCPUPerJobMs = round(float64(d.Microseconds())/1000/float64(opt.Jobs), 3)
	}
	return nil
}
