package kubernetes

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
)

// TestKubeClient checks each call of kubeclient's typed client against
// the package's shared control plane (kubeclient has no tests of its own:
// they would start another kube-apiserver): what it sends (the query of
// its options, protobuf asked for), and what it decodes (objects, lists,
// watch events, and the API's errors as apierrors knows them).
func TestKubeClient(t *testing.T) {
	t.Parallel()
	cl := getCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := cl.namespace(t, t.TempDir())
	var mu sync.Mutex
	var seen []*http.Request
	c := cl.seeing(t, func(r *http.Request) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	})
	last := func() *http.Request {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	cms := c.ConfigMaps(ns)
	cm := func(name, team string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}, Data: map[string]string{"k": name}}
	}

	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "team=a"})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	if q := last().URL.Query(); q.Get("watch") != "true" || q.Get("labelSelector") != "team=a" {
		t.Errorf("Watch's query = %v", q)
	}
	a, err := cms.Create(ctx, cm("a", "a"), metav1.CreateOptions{})
	if err != nil || a.Data["k"] != "a" || a.ResourceVersion == "" || a.Namespace != ns {
		t.Fatalf("Create = %+v, %v", a, err)
	}
	if r := last(); r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/"+ns+"/configmaps" {
		t.Errorf("Create sent %s %s", r.Method, r.URL.Path)
	}
	if _, err := cms.Create(ctx, cm("b", "b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, cm("a", "a"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second Create: %v, want AlreadyExists", err)
	}

	got, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || got.UID != a.UID {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if acc := last().Header.Get("Accept"); !strings.HasPrefix(acc, "application/vnd.kubernetes.protobuf") {
		t.Errorf("Get's Accept = %q, want protobuf first", acc)
	}
	if _, err := cms.Get(ctx, "none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing object: %v, want NotFound", err)
	}

	l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "team=a"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "a" {
		t.Fatalf("List(team=a) = %+v, %v", l, err)
	}
	if all, err := c.ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "team in (a,b)", FieldSelector: "metadata.namespace=" + ns}); err != nil || len(all.Items) != 2 {
		t.Errorf("List of all namespaces: %v, %v", all, err)
	}

	// Update with a stale resourceVersion conflicts; with the current one
	// it replaces the object.
	stale := a.DeepCopy()
	got.Data["k"] = "a2"
	if got, err = cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil || got.Data["k"] != "a2" {
		t.Fatalf("Update = %+v, %v", got, err)
	}
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion: %v, want Conflict", err)
	}
	if got, err = cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":"a3"}}`), metav1.PatchOptions{}); err != nil || got.Data["k"] != "a3" {
		t.Fatalf("Patch = %+v, %v", got, err)
	}
	if q := last().URL.Query(); q.Get("dryRun") != "" {
		t.Errorf("Patch's query = %v", q)
	}
	if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":"dry"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if q := last().URL.Query(); q.Get("dryRun") != "All" {
		t.Errorf("a dry-run Patch's query = %v, want dryRun=All", q)
	}
	if got, _ := cms.Get(ctx, "a", metav1.GetOptions{}); got.Data["k"] != "a3" {
		t.Errorf("after a dry-run Patch the object holds %q", got.Data["k"])
	}

	// The watch saw a's creation and its changes, and nothing of b.
	var events []string
	for len(events) < 3 {
		select {
		case ev := <-w.ResultChan():
			o, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("watch event %s of a %T", ev.Type, ev.Object)
			}
			events = append(events, string(ev.Type)+" "+o.Name+" "+o.Data["k"])
		case <-ctx.Done():
			t.Fatalf("the watch saw %v", events)
		}
	}
	if want := []string{string(watch.Added) + " a a", string(watch.Modified) + " a a2", string(watch.Modified) + " a a3"}; strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("watch events %v, want %v", events, want)
	}

	// A pod's status is its subresource's: UpdateStatus changes it, Update
	// does not.
	pods := c.Pods(ns)
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"none": "none"}, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The played scheduler writes the pod's status too: a conflict
	// means the status changed since p was read.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p.Status.Message = "seen"
		u, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			p, _ = pods.Get(ctx, "p", metav1.GetOptions{})
		} else if err == nil && u.Status.Message != "seen" {
			t.Errorf("UpdateStatus returned the status %+v", u.Status)
		}
		return err
	})
	if err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if r := last(); r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/pods/p/status") {
		t.Errorf("UpdateStatus sent %s %s", r.Method, r.URL.Path)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}

	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "team=b"}); err != nil {
		t.Fatal(err)
	}
	if q := last().URL.Query(); q.Get("labelSelector") != "team=b" {
		t.Errorf("DeleteCollection's query = %v", q)
	}
	if l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "team"}); err != nil || len(l.Items) != 1 || l.Items[0].Name != "a" {
		t.Errorf("after deleting team=b: %+v, %v", l, err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a second Delete: %v, want NotFound", err)
	}

	// A resource without a namespace.
	if n, err := c.Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || n.Name != ns {
		t.Errorf("Namespaces().Get = %+v, %v", n, err)
	}
	if r := last(); r.URL.Path != "/api/v1/namespaces/"+ns {
		t.Errorf("Namespaces().Get sent %s", r.URL.Path)
	}
}
