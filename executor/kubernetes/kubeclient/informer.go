package kubeclient

// client-go's informer factory (k8s.io/client-go/informers) takes the whole
// clientset (k8s.io/client-go/kubernetes) and imports the informers,
// listers, typed clients and apply configurations of every API group:
// some 220 packages that qshare never calls. qshare lists and watches a
// few kinds (pods, nodes, Jobs), so it builds their informers here, as the
// factory would.

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Informer returns a shared informer of the objects that list and watch return;
// obj is an empty one of their kind (&corev1.Pod{}, say). tweak, if not
// nil, changes the options of every list and watch (a label selector,
// say). Like the factory's informers it never resyncs and is indexed by
// namespace. Start it with Run.
func Informer[L runtime.Object](obj runtime.Object,
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return watchFn(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}
