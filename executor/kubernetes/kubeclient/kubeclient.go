// Package kubeclient gives qshare the typed Kubernetes clients it calls:
// client-go's REST client over a scheme that holds only the API groups in
// use, the typed calls of each resource over it (Client, the calls of
// client-go's generic typed client), and shared informers (Informer).
//
// client-go's generated typed clients (k8s.io/client-go/kubernetes/typed/...)
// share one scheme, k8s.io/client-go/kubernetes/scheme, that imports and
// registers every API group Kubernetes serves: 56 packages of k8s.io/api,
// and 675 KB allocated in its init at every start of every program that
// links them, qshare's job supervisors included. Their generic client (k8s.io/client-go/gentype)
// imports client-go's fakes (k8s.io/client-go/testing), and through them
// strategic merge patch, managed fields and the OpenAPI models: 84
// packages more. qshare uses core/v1 (batch/v1 in its Kueue benchmark,
// apps/v1 and rbac/v1 in a test), so it makes the same requests here, in
// the same way, with a scheme of those groups alone.
package kubeclient

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Group is a REST client for one version of one API group, with a scheme
// of that group alone.
type Group struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

// NewGroup returns a client of the API group version gv on the server
// that cfg names; add registers the group's types (corev1.AddToScheme,
// say). cfg itself is not changed.
func NewGroup(cfg *rest.Config, gv schema.GroupVersion, add func(*runtime.Scheme) error) (*Group, error) {
	s := runtime.NewScheme()
	if err := add(s); err != nil {
		return nil, err
	}
	// The options every call sends (ListOptions, DeleteOptions...) and the
	// Status of an error, as client-go's scheme registers them.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	c := *cfg
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(&c)
	if err != nil {
		return nil, err
	}
	return &Group{rest: rc, params: runtime.NewParameterCodec(s)}, nil
}

// RESTClient returns the group's REST client, for the calls that no typed
// client makes (the server's /version, say).
func (g *Group) RESTClient() rest.Interface { return g.rest }

// ParameterCodec encodes options into a request's query, as the typed
// clients do (Request.VersionedParams).
func (g *Group) ParameterCodec() runtime.ParameterCodec { return g.params }

// Object is what a typed client reads and writes: a Kubernetes object.
type Object interface {
	runtime.Object
	metav1.Object
}

// Client is the typed client of one resource of a group, in one namespace
// ("" for all namespaces, or for a resource that has none). Its calls
// are client-go's generic typed client's (gentype.ClientWithList), made
// the same way: protobuf where the server speaks it, JSON otherwise.
type Client[T Object, L runtime.Object] struct {
	g        *Group
	resource string
	ns       string
	newObj   func() T
	newList  func() L
}

// Resource returns the typed client of one resource of the group, in
// namespace ns ("" for all namespaces, or for a resource that has none):
// Resource[corev1.Pod, corev1.PodList](g, "pods", ns), say.
func Resource[O, L any, PO interface {
	*O
	Object
}, PL interface {
	*L
	runtime.Object
}](g *Group, resource, ns string) *Client[PO, PL] {
	return &Client[PO, PL]{g: g, resource: resource, ns: ns, newObj: func() PO { return new(O) }, newList: func() PL { return new(L) }}
}

// request starts a request of the verb on the client's resource.
func (c *Client[T, L]) request(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefaultIfPreferred(true).NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource)
}

// GetClient returns the group's REST client.
func (c *Client[T, L]) GetClient() rest.Interface { return c.g.rest }

// GetNamespace returns the client's namespace ("" for none).
func (c *Client[T, L]) GetNamespace() string { return c.ns }

// Get reads the object named name.
func (c *Client[T, L]) Get(ctx context.Context, name string, o metav1.GetOptions) (T, error) {
	x := c.newObj()
	err := c.request(c.g.rest.Get()).Name(name).VersionedParams(&o, c.g.params).Do(ctx).Into(x)
	return x, err
}

// List lists the objects that o's selectors match.
func (c *Client[T, L]) List(ctx context.Context, o metav1.ListOptions) (L, error) {
	l := c.newList()
	err := c.request(c.g.rest.Get()).VersionedParams(&o, c.g.params).Timeout(timeout(o.TimeoutSeconds)).Do(ctx).Into(l)
	return l, err
}

// Watch watches the objects that o's selectors match.
func (c *Client[T, L]) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return c.request(c.g.rest.Get()).VersionedParams(&o, c.g.params).Timeout(timeout(o.TimeoutSeconds)).Watch(ctx)
}

// Create creates obj and returns it as the server stored it.
func (c *Client[T, L]) Create(ctx context.Context, obj T, o metav1.CreateOptions) (T, error) {
	x := c.newObj()
	err := c.request(c.g.rest.Post()).VersionedParams(&o, c.g.params).Body(obj).Do(ctx).Into(x)
	return x, err
}

// Update replaces obj and returns it as the server stored it.
func (c *Client[T, L]) Update(ctx context.Context, obj T, o metav1.UpdateOptions) (T, error) {
	x := c.newObj()
	err := c.request(c.g.rest.Put()).Name(obj.GetName()).VersionedParams(&o, c.g.params).Body(obj).Do(ctx).Into(x)
	return x, err
}

// UpdateStatus replaces obj's status (the status subresource).
func (c *Client[T, L]) UpdateStatus(ctx context.Context, obj T, o metav1.UpdateOptions) (T, error) {
	x := c.newObj()
	err := c.request(c.g.rest.Put()).Name(obj.GetName()).SubResource("status").VersionedParams(&o, c.g.params).Body(obj).Do(ctx).Into(x)
	return x, err
}

// Delete deletes the object named name.
func (c *Client[T, L]) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	return c.request(c.g.rest.Delete()).Name(name).Body(&o).Do(ctx).Error()
}

// DeleteCollection deletes the objects that lo's selectors match.
func (c *Client[T, L]) DeleteCollection(ctx context.Context, o metav1.DeleteOptions, lo metav1.ListOptions) error {
	return c.request(c.g.rest.Delete()).VersionedParams(&lo, c.g.params).Timeout(timeout(lo.TimeoutSeconds)).Body(&o).Do(ctx).Error()
}

// Patch patches the object named name (or one of its subresources).
func (c *Client[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, subresources ...string) (T, error) {
	x := c.newObj()
	err := c.request(c.g.rest.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&o, c.g.params).Body(data).Do(ctx).Into(x)
	return x, err
}

// timeout is a request's timeout from its options' TimeoutSeconds.
func timeout(s *int64) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s) * time.Second
}

// Core is a client of the core API group (core/v1), with the resources
// qshare, its test harness and its benchmarks call.
type Core struct{ *Group }

// NewCore returns a client of the core API group on the server cfg names.
func NewCore(cfg *rest.Config) (*Core, error) {
	g, err := NewGroup(cfg, corev1.SchemeGroupVersion, corev1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return &Core{g}, nil
}

type (
	// Nodes is the typed client of nodes.
	Nodes = Client[*corev1.Node, *corev1.NodeList]
	// Namespaces is the typed client of namespaces.
	Namespaces = Client[*corev1.Namespace, *corev1.NamespaceList]
	// PersistentVolumeClaims is the typed client of one namespace's claims.
	PersistentVolumeClaims = Client[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]
	// ConfigMaps is the typed client of one namespace's config maps.
	ConfigMaps = Client[*corev1.ConfigMap, *corev1.ConfigMapList]
	// Secrets is the typed client of one namespace's secrets.
	Secrets = Client[*corev1.Secret, *corev1.SecretList]
	// Services is the typed client of one namespace's services.
	Services = Client[*corev1.Service, *corev1.ServiceList]
	// ServiceAccounts is the typed client of one namespace's service accounts.
	ServiceAccounts = Client[*corev1.ServiceAccount, *corev1.ServiceAccountList]
	// ResourceQuotas is the typed client of one namespace's quotas.
	ResourceQuotas = Client[*corev1.ResourceQuota, *corev1.ResourceQuotaList]
)

// Pods is the typed client of one namespace's pods ("" for all of them),
// with the pod subresources qshare calls.
type Pods struct {
	*Client[*corev1.Pod, *corev1.PodList]
}

// Pods returns the client of namespace ns's pods ("" for all namespaces).
func (c *Core) Pods(ns string) *Pods {
	return &Pods{Resource[corev1.Pod, corev1.PodList](c.Group, "pods", ns)}
}

// GetLogs returns the request for a pod's log (the log subresource).
func (p *Pods) GetLogs(name string, o *corev1.PodLogOptions) *rest.Request {
	return p.GetClient().Get().Namespace(p.GetNamespace()).Name(name).Resource("pods").SubResource("log").VersionedParams(o, p.g.params)
}

// Bind binds a pod to a node (the binding subresource), as a scheduler does.
func (p *Pods) Bind(ctx context.Context, b *corev1.Binding, o metav1.CreateOptions) error {
	return p.GetClient().Post().Namespace(p.GetNamespace()).Resource("pods").Name(b.Name).VersionedParams(&o, p.g.params).SubResource("binding").Body(b).Do(ctx).Error()
}

// The typed clients of the core group's resources that qshare calls; ns is
// a namespace ("" for all of them).
func (c *Core) Nodes() *Nodes { return Resource[corev1.Node, corev1.NodeList](c.Group, "nodes", "") }
func (c *Core) Namespaces() *Namespaces {
	return Resource[corev1.Namespace, corev1.NamespaceList](c.Group, "namespaces", "")
}
func (c *Core) PersistentVolumeClaims(ns string) *PersistentVolumeClaims {
	return Resource[corev1.PersistentVolumeClaim, corev1.PersistentVolumeClaimList](c.Group, "persistentvolumeclaims", ns)
}
func (c *Core) ConfigMaps(ns string) *ConfigMaps {
	return Resource[corev1.ConfigMap, corev1.ConfigMapList](c.Group, "configmaps", ns)
}
func (c *Core) Secrets(ns string) *Secrets {
	return Resource[corev1.Secret, corev1.SecretList](c.Group, "secrets", ns)
}
func (c *Core) Services(ns string) *Services {
	return Resource[corev1.Service, corev1.ServiceList](c.Group, "services", ns)
}
func (c *Core) ServiceAccounts(ns string) *ServiceAccounts {
	return Resource[corev1.ServiceAccount, corev1.ServiceAccountList](c.Group, "serviceaccounts", ns)
}
func (c *Core) ResourceQuotas(ns string) *ResourceQuotas {
	return Resource[corev1.ResourceQuota, corev1.ResourceQuotaList](c.Group, "resourcequotas", ns)
}
