package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"qshare"
)

// CheckCapacity counts the cluster's nodes of each instance type of limits
// (by the type's nodeSelector) and their allocatable GPUs, and warns when
// the environment promises more instances than they hold; it also says
// when the API server cannot be reached or the nodes cannot be read.
func (e *Executor) CheckCapacity(limits qshare.Capacity) string {
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	list, err := e.c.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.setAPIErr(err)
		return "The Kubernetes executor cannot count the cluster's nodes: " + err.Error()
	}
	var warn []string
	for _, typ := range limits.Types() {
		want := limits[typ]
		if want <= 0 {
			continue
		}
		sel, gpus := e.placement(typ)
		var nodes, alloc, fit int64
		for i := range list.Items {
			n := &list.Items[i]
			if !labels.SelectorFromSet(sel).Matches(labels.Set(n.Labels)) {
				continue
			}
			nodes++
			q := n.Status.Allocatable[GPU]
			alloc += q.Value()
			if gpus > 0 {
				fit += q.Value() / gpus
			}
		}
		if gpus == 0 {
			if nodes == 0 {
				warn = append(warn, fmt.Sprintf("%s: no node matches %s", typ, selString(sel)))
			}
			continue
		}
		if fit < want {
			warn = append(warn, fmt.Sprintf("%s: the environment promises %d instances of %d %s, but the %d nodes matching %s have %d allocatable (%d instances)",
				typ, want, gpus, GPU, nodes, selString(sel), alloc, fit))
		}
	}
	if len(warn) == 0 {
		return ""
	}
	return "The cluster has less than the environment promises: " + strings.Join(warn, "; ")
}

// placement returns an instance type's nodeSelector and GPUs per instance.
func (e *Executor) placement(typ string) (map[string]string, int64) {
	it := e.cfg.InstanceTypes[typ]
	gpus := int64(e.gpus.PerInstance(typ))
	if it.GPUs != nil {
		gpus = *it.GPUs
	}
	sel := it.NodeSelector
	if sel == nil {
		sel = map[string]string{InstanceTypeLabel: strings.TrimPrefix(typ, "ml.")}
	}
	return sel, gpus
}

func selString(sel map[string]string) string { return labels.SelectorFromSet(sel).String() }
