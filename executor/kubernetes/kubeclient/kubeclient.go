// Package kubeclient gives qshare the typed Kubernetes clients it calls,
// built from client-go's generic client (k8s.io/client-go/gentype) over a
// scheme that holds only the API groups in use, and shared informers over
// them (Informer).
//
// client-go's generated typed clients (k8s.io/client-go/kubernetes/typed/...)
// share one scheme, k8s.io/client-go/kubernetes/scheme, that imports and
// registers every API group Kubernetes serves: some 75 packages, and 675 KB
// allocated at every start of every program that links them, qshare's job
// supervisors included. qshare uses core/v1 (and batch/v1 in its Kueue
// benchmark); the generated clients are the same gentype client, made here
// with a scheme of those groups alone.
package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
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

// Resource returns the typed client of one resource of the group, in
// namespace ns ("" for all namespaces, or for a resource that has none);
// newObj and newList return an empty object and list of its kind.
func Resource[T interface {
	runtime.Object
	metav1.Object
}, L runtime.Object](g *Group, resource, ns string, newObj func() T, newList func() L) *gentype.ClientWithList[T, L] {
	return gentype.NewClientWithList(resource, g.rest, g.params, ns, newObj, newList, gentype.PrefersProtobuf[T]())
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
	Nodes = gentype.ClientWithList[*corev1.Node, *corev1.NodeList]
	// Namespaces is the typed client of namespaces.
	Namespaces = gentype.ClientWithList[*corev1.Namespace, *corev1.NamespaceList]
	// PersistentVolumeClaims is the typed client of one namespace's claims.
	PersistentVolumeClaims = gentype.ClientWithList[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]
	// ConfigMaps is the typed client of one namespace's config maps.
	ConfigMaps = gentype.ClientWithList[*corev1.ConfigMap, *corev1.ConfigMapList]
	// Secrets is the typed client of one namespace's secrets.
	Secrets = gentype.ClientWithList[*corev1.Secret, *corev1.SecretList]
	// Services is the typed client of one namespace's services.
	Services = gentype.ClientWithList[*corev1.Service, *corev1.ServiceList]
	// ServiceAccounts is the typed client of one namespace's service accounts.
	ServiceAccounts = gentype.ClientWithList[*corev1.ServiceAccount, *corev1.ServiceAccountList]
	// ResourceQuotas is the typed client of one namespace's quotas.
	ResourceQuotas = gentype.ClientWithList[*corev1.ResourceQuota, *corev1.ResourceQuotaList]
)

// Pods is the typed client of one namespace's pods ("" for all of them),
// with the pod subresources qshare calls.
type Pods struct {
	*gentype.ClientWithList[*corev1.Pod, *corev1.PodList]
	g *Group
}

// Pods returns the client of namespace ns's pods ("" for all namespaces).
func (c *Core) Pods(ns string) *Pods {
	return &Pods{Resource(c.Group, "pods", ns, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} }), c.Group}
}

// GetLogs returns the request for a pod's log (the log subresource).
func (p *Pods) GetLogs(name string, o *corev1.PodLogOptions) *rest.Request {
	return p.GetClient().Get().Namespace(p.GetNamespace()).Name(name).Resource("pods").SubResource("log").VersionedParams(o, p.g.params)
}

// Bind binds a pod to a node (the binding subresource), as a scheduler does.
func (p *Pods) Bind(ctx context.Context, b *corev1.Binding, o metav1.CreateOptions) error {
	return p.GetClient().Post().Namespace(p.GetNamespace()).Resource("pods").Name(b.Name).VersionedParams(&o, p.g.params).SubResource("binding").Body(b).Do(ctx).Error()
}

// Nodes returns the client of nodes.
func (c *Core) Nodes() *Nodes {
	return Resource(c.Group, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

// Namespaces returns the client of namespaces.
func (c *Core) Namespaces() *Namespaces {
	return Resource(c.Group, "namespaces", "", func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
}

// PersistentVolumeClaims returns the client of namespace ns's claims.
func (c *Core) PersistentVolumeClaims(ns string) *PersistentVolumeClaims {
	return Resource(c.Group, "persistentvolumeclaims", ns, func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} }, func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} })
}

// ConfigMaps returns the client of namespace ns's config maps.
func (c *Core) ConfigMaps(ns string) *ConfigMaps {
	return Resource(c.Group, "configmaps", ns, func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

// Secrets returns the client of namespace ns's secrets.
func (c *Core) Secrets(ns string) *Secrets {
	return Resource(c.Group, "secrets", ns, func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

// Services returns the client of namespace ns's services.
func (c *Core) Services(ns string) *Services {
	return Resource(c.Group, "services", ns, func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} })
}

// ServiceAccounts returns the client of namespace ns's service accounts.
func (c *Core) ServiceAccounts(ns string) *ServiceAccounts {
	return Resource(c.Group, "serviceaccounts", ns, func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} }, func() *corev1.ServiceAccountList { return &corev1.ServiceAccountList{} })
}

// ResourceQuotas returns the client of namespace ns's resource quotas.
func (c *Core) ResourceQuotas(ns string) *ResourceQuotas {
	return Resource(c.Group, "resourcequotas", ns, func() *corev1.ResourceQuota { return &corev1.ResourceQuota{} }, func() *corev1.ResourceQuotaList { return &corev1.ResourceQuotaList{} })
}
