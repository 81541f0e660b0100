package kubernetes

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"qshare"
	"qshare/executor"
)

// Logs streams the container log of the attempt's pod of index 0 through
// the API server (pods/log), which reads it from the node's kubelet: the
// log lives as long as the pod, which stays after its end until
// Config.KeepEnded has passed. With follow, a pod that has not started yet
// is waited for; without, it has an empty log, as has a pod that ended
// before its container ran.
func (e *Executor) Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error) {
	return e.InstanceLogs(ctx, attemptID, 0, follow)
}

// InstanceLogs is Logs of the pod of index instance.
func (e *Executor) InstanceLogs(ctx context.Context, attemptID string, instance int, follow bool) (io.ReadCloser, error) {
	if instance < 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "instance %d is not valid: give an instance number from 0", instance)
	}
	name := podName(attemptID, instance)
	pods := e.c.Pods(e.ns)
	if instance > 0 {
		// An instance beyond the attempt's is a mistake of the caller's,
		// not a log gone.
		if p0, err := pods.Get(ctx, podName(attemptID, 0), metav1.GetOptions{}); err == nil && p0.Annotations[annAttemptID] == attemptID {
			if n, _ := strconv.Atoi(p0.Annotations[annInstances]); instance >= max(n, 1) {
				return nil, qshare.Errorf(qshare.EINVALID, "the attempt has %d instances (0 to %d): instance %d does not exist", max(n, 1), max(n, 1)-1, instance)
			}
		}
	}
	var pod *corev1.Pod
	for {
		var err error
		pod, err = pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if a := e.lookupAttempt(attemptID); a != nil {
				return nil, executor.ErrNoLog
			}
			return nil, executor.ErrUnknownAttempt
		}
		if err != nil {
			return nil, err
		}
		if pod.Annotations[annAttemptID] != attemptID {
			return nil, executor.ErrUnknownAttempt
		}
		if started(pod) {
			break
		}
		if !follow || terminal(pod) {
			// A pod that ended before its container ran (refused by
			// its node) will not write: its log is empty, followed too.
			return io.NopCloser(strings.NewReader("")), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The API server fetches the log from the node's kubelet; a failure
	// on the way is tried again a few times before it counts.
	var rc io.ReadCloser
	var err error
	for try := 0; try < 5; try++ {
		rc, err = pods.GetLogs(name, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(ctx)
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			break
		}
		e.log.Warn("kubernetes: reading a pod's log failed", "pod", name, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		if terminal(pod) || apierrors.IsNotFound(err) {
			return nil, executor.ErrNoLog
		}
		return nil, err
	}
	return rc, nil
}

// started reports whether a pod's container has run (it has a log).
func started(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}
