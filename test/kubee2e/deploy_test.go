package kubee2e_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"qshare"
	"qshare/executor"
	"qshare/executor/kubernetes"
	"qshare/executor/kubernetes/kubeclient"
	"qshare/executor/kubernetes/kubetest"
)

// TestDeployManifests applies deploy/kubernetes (the files its
// kustomization names, every one of them) to the API server with strict
// field validation, and then runs the Kubernetes executor as the
// manifests' ServiceAccount (impersonated): with only the Role's and the
// ClusterRole's verbs it starts a job, reads its log, sees it succeed,
// stops another, recovers it, finds a third lost (its pod deleted while no
// executor ran) and deletes its ConfigMap, counts the nodes, sweeps the
// claims and deletes a finished job's claim; no warning it logs says
// forbidden. A verb the executor needs and the Role lacks fails it.
func TestDeployManifests(t *testing.T) {
	t.Parallel() // its node's type is its own
	c := plane(t)
	dir := "../../deploy/kubernetes"
	var kust struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &kust); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in the kustomization's resources", base)
		}
	}
	ctx := context.Background()
	admin, err := newAdminClients(c.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kust.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	for _, r := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			if err := applyDoc(ctx, admin, []byte(doc), strict); err != nil {
				t.Errorf("%s: %v", r, err)
			}
		}
	}
	if t.Failed() {
		return
	}

	// The executor, as the ServiceAccount.
	cfg := c.Config()
	cfg.Impersonate.UserName = "system:serviceaccount:" + kust.Namespace + ":qshare"
	sa, err := kubeclient.NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The namespace is the manifests'; a run of -count=N names its node
	// and jobs apart from the runs before it.
	run := runSuffix(t)
	node := "deploy-node" + run
	if err := c.Kubelet.AddNode(ctx, node, "deploy.large", 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kubelet.DeleteNode(ctx, node) })
	warns := &warnings{}
	e, err := kubernetes.New(ctx, kubernetes.Options{Client: sa, Namespace: kust.Namespace, StartWait: 30 * time.Second, Log: slog.New(warns)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	spec := func(id string, p kubetest.Program) executor.Spec {
		return executor.Spec{JobID: id, JobName: id, AttemptID: id + "-1", Attempt: 1, Queue: "q", Share: "s",
			Demand: qshare.Capacity{"ml.deploy.large": 1}, Payload: p.Payload("ml.deploy.large", 1, nil)}
	}
	ok := spec("deploy-ok"+run, kubetest.Program{Run: 300 * time.Millisecond, Output: "as the service account", Checkpoints: true})
	stopped := spec("deploy-stopped"+run, kubetest.Program{Run: time.Hour, OnStop: "ignore"})
	for _, s := range []executor.Spec{ok, stopped} {
		if _, err := e.Start(ctx, s); err != nil {
			t.Fatalf("Start as the ServiceAccount: %v", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if x, err := e.Wait(wctx, ok.AttemptID); err != nil || !x.Succeeded() {
		t.Errorf("Wait = %+v, %v", x, err)
	}
	rc, err := e.Logs(wctx, ok.AttemptID, false)
	if err != nil {
		t.Fatalf("Logs as the ServiceAccount: %v", err)
	}
	out, _ := io.ReadAll(rc)
	rc.Close()
	if string(out) != "as the service account\n" {
		t.Errorf("log %q", out)
	}
	// An attempt whose pod is deleted while no executor runs: the next
	// finds it lost, and deletes its ConfigMap by reading it first.
	e3, err := kubernetes.New(ctx, kubernetes.Options{Client: sa, Namespace: kust.Namespace, StartWait: 30 * time.Second, Log: slog.New(warns)})
	if err != nil {
		t.Fatal(err)
	}
	lost := spec("deploy-lost"+run, kubetest.Program{Run: time.Hour})
	// Hyperparameters over the 8 KiB that a pod of one instance carries
	// itself: its files are in a ConfigMap.
	var m map[string]any
	if err := json.Unmarshal([]byte(lost.Payload), &m); err != nil {
		t.Fatal(err)
	}
	hp := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		hp[k] = strings.Repeat("x", 2000)
	}
	m["HyperParameters"] = hp
	pb, _ := json.Marshal(m)
	lost.Payload = string(pb)
	if _, err := e3.Start(ctx, lost); err != nil {
		t.Fatalf("Start as the ServiceAccount: %v", err)
	}
	e3.Close()
	if l, err := admin.core.ConfigMaps(kust.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + lost.JobID}); err != nil || len(l.Items) != 1 {
		t.Fatalf("the lost attempt's ConfigMaps before: %v, %v; want one", err, l)
	}
	// Deleted for good: qshare's finalizer removed too, by a person.
	pods, err := admin.core.Pods(kust.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + lost.JobID})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if _, err := admin.core.Pods(kust.Namespace).Patch(ctx, p.Name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	zero := int64(0)
	if err := admin.core.Pods(kust.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + lost.JobID}); err != nil {
		t.Fatal(err)
	}
	e2, err := kubernetes.New(ctx, kubernetes.Options{Client: sa, Namespace: kust.Namespace, Log: slog.New(warns)})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if r, err := e2.Recover(wctx, executor.Handle{AttemptID: stopped.AttemptID}); err != nil || r != executor.Running {
		t.Errorf("Recover as the ServiceAccount = %v, %v", r, err)
	}
	if r, err := e2.Recover(wctx, executor.Handle{AttemptID: lost.AttemptID}); err != nil || r != executor.Lost {
		t.Errorf("Recover of the attempt whose pod is gone, as the ServiceAccount = %v, %v; want Lost", r, err)
	}
	awaitNone(wctx, t, "the lost attempt's ConfigMap", func() (int, error) {
		l, err := admin.core.ConfigMaps(kust.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + lost.JobID})
		return len(l.Items), err
	})
	if err := e2.Stop(wctx, stopped.AttemptID, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	// While its grace runs, the pod carries qshare's mark (a patch), so a
	// restarted server knows the deletion was its own.
	for marked := false; !marked; {
		l, err := admin.core.Pods(kust.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + stopped.JobID})
		if err != nil || len(l.Items) != 1 || time.Now().After(deadline(wctx)) {
			t.Fatalf("the stopped pod: %v, %d pods", err, len(l.Items))
		}
		p := l.Items[0]
		if p.DeletionTimestamp != nil {
			if p.Annotations["qshare.io/stopped-by-qshare"] == "" {
				t.Fatalf("the pod is being deleted without qshare's mark: the patch was refused")
			}
			marked = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if x, err := e2.Wait(wctx, stopped.AttemptID); err != nil || !x.Stopped {
		t.Errorf("Wait after Stop = %+v, %v", x, err)
	}
	// Its end recorded, the executor removes its finalizer (a patch), and
	// the stopped pod goes.
	e2.Forget(stopped.AttemptID)
	awaitNone(wctx, t, "the stopped pod, after Forget,", func() (int, error) {
		l, err := admin.core.Pods(kust.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + stopped.JobID})
		return len(l.Items), err
	})
	if w := e2.CheckCapacity(qshare.Capacity{"ml.deploy.large": 1}); w != "" {
		t.Errorf("CheckCapacity as the ServiceAccount: %s", w)
	}
	// The sweep after a restart lists the claims: it keeps those of the
	// stopped and the lost jobs (still unfinished in a store, to run
	// again) and that of ok, whose JobFinished comes next.
	if swept, err := e2.SweepJobs(wctx, map[string]bool{stopped.JobID: true, lost.JobID: true, ok.JobID: true}); err != nil || len(swept) != 0 {
		t.Errorf("SweepJobs as the ServiceAccount = %v, %v", swept, err)
	}
	claim := "qs-ckpt-"
	e2.JobFinished(ok.JobID)
	deadline := time.Now().Add(waitLimit)
	for {
		l, err := admin.core.PersistentVolumeClaims(kust.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "qshare.io/job-id=" + ok.JobID})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 || l.Items[0].DeletionTimestamp != nil && strings.HasPrefix(l.Items[0].Name, claim) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claim of a finished job was not deleted as the ServiceAccount")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range warns.forbidden() {
		t.Errorf("the executor, as the ServiceAccount, logged: %s", m)
	}
}

func deadline(ctx context.Context) time.Time { d, _ := ctx.Deadline(); return d }

// awaitNone waits, until ctx's deadline, for count to find none of what
// it counts.
func awaitNone(ctx context.Context, t *testing.T, what string, count func() (int, error)) {
	t.Helper()
	for {
		n, err := count()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline(ctx)) {
			t.Fatalf("%s is still there (%d)", what, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// warnings is a log handler that keeps the executor's warnings, so that a
// verb the Role lacks, which the executor logs and works around, still
// fails the test.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, b.String())
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) forbidden() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range w.msgs {
		if strings.Contains(m, "forbidden") {
			out = append(out, m)
		}
	}
	return out
}

// adminClients are an administrator's clients of the API groups whose
// kinds deploy/kubernetes holds.
type adminClients struct {
	core *kubeclient.Core
	apps *kubeclient.Group
	rbac *kubeclient.Group
}

func newAdminClients(cfg *rest.Config) (a adminClients, err error) {
	if a.core, err = kubeclient.NewCore(cfg); err != nil {
		return a, err
	}
	if a.apps, err = kubeclient.NewGroup(cfg, appsv1.SchemeGroupVersion, appsv1.AddToScheme); err != nil {
		return a, err
	}
	a.rbac, err = kubeclient.NewGroup(cfg, rbacv1.SchemeGroupVersion, rbacv1.AddToScheme)
	return a, err
}

// applyDoc creates one manifest of the kinds deploy/kubernetes holds; an
// unknown field fails it, here or on the server.
func applyDoc(ctx context.Context, a adminClients, doc []byte, o metav1.CreateOptions) error {
	var head metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	create := func(obj any, f func() error) error {
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return err
		}
		if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	// The kinds of the other groups, created as their typed clients do.
	others := map[string]func() error{
		"StatefulSet": func() error {
			return create(creating[appsv1.StatefulSet, appsv1.StatefulSetList](ctx, a.apps, "statefulsets", o))
		},
		"Role": func() error { return create(creating[rbacv1.Role, rbacv1.RoleList](ctx, a.rbac, "roles", o)) },
		"RoleBinding": func() error {
			return create(creating[rbacv1.RoleBinding, rbacv1.RoleBindingList](ctx, a.rbac, "rolebindings", o))
		},
		"ClusterRole": func() error {
			return create(creating[rbacv1.ClusterRole, rbacv1.ClusterRoleList](ctx, a.rbac, "clusterroles", o))
		},
		"ClusterRoleBinding": func() error {
			return create(creating[rbacv1.ClusterRoleBinding, rbacv1.ClusterRoleBindingList](ctx, a.rbac, "clusterrolebindings", o))
		},
	}
	if f, ok := others[head.Kind]; ok {
		return f()
	}
	switch head.Kind {
	case "ServiceAccount":
		var x corev1.ServiceAccount
		return create(&x, func() error { _, err := a.core.ServiceAccounts(x.Namespace).Create(ctx, &x, o); return err })
	case "ConfigMap":
		var x corev1.ConfigMap
		return create(&x, func() error {
			if _, err := kubernetes.ParseConfig([]byte(x.Data["kube.yaml"])); err != nil {
				return err
			}
			_, err := a.core.ConfigMaps(x.Namespace).Create(ctx, &x, o)
			return err
		})
	case "Service":
		var x corev1.Service
		return create(&x, func() error { _, err := a.core.Services(x.Namespace).Create(ctx, &x, o); return err })
	}
	return &unknownKind{head.Kind}
}

// creating returns a new, empty object of kind O for create to read its
// manifest into, and its creation: in group g's resource res, in the
// namespace the manifest gives it.
func creating[O, L any, PO interface {
	*O
	kubeclient.Object
}, PL interface {
	*L
	runtime.Object
}](ctx context.Context, g *kubeclient.Group, res string, o metav1.CreateOptions) (any, func() error) {
	x := PO(new(O))
	return x, func() error {
		_, err := kubeclient.Resource[O, L, PO, PL](g, res, x.GetNamespace()).Create(ctx, x, o)
		return err
	}
}

type unknownKind struct{ kind string }

func (u *unknownKind) Error() string { return "kind " + u.kind + " is not one the test applies" }
