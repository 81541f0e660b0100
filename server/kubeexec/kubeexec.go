// Package kubeexec is qshare serve's --executor kubernetes: it registers
// the Kubernetes executor with package server, so that the server, and
// whatever links it (its tests among them), links client-go only where the
// binary imports this package, as cmd/qshare does.
package kubeexec

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/kubernetes"
	"qshare/executor/kubernetes/kubeclient"
	"qshare/server"
)

func init() { server.RegisterExecutor("kubernetes", newKubeExecutor) }

// newKubeExecutor is --executor kubernetes: the client from --kubeconfig
// (else the in-cluster config, then $KUBECONFIG, then ~/.kube/config), the
// namespace from --namespace (else the kubeconfig context's, or the pod's
// own in a cluster, else default), and the --kube-config file.
func newKubeExecutor(ctx context.Context, s server.Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
	cfg, ns, err := kubeClientConfig(s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if s.Namespace != "" {
		ns = s.Namespace
	}
	kc, err := kubernetes.LoadConfig(s.KubeConfig)
	if err != nil {
		return nil, err
	}
	var table gpu.Table
	if s.InstanceTypes != "" {
		if table, err = gpu.LoadTable(s.InstanceTypes); err != nil {
			return nil, err
		}
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := kubeclient.NewCore(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return kubernetes.New(ctx, kubernetes.Options{Client: c, Namespace: ns, Config: kc, GPUs: table, StopGrace: grace, Log: log, S3: server.ExecutorS3(s)})
}

func kubeClientConfig(path string) (*rest.Config, string, error) {
	if path == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			ns := "default"
			if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && strings.TrimSpace(string(b)) != "" {
				ns = strings.TrimSpace(string(b))
			}
			return cfg, ns, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("--kubeconfig: no usable Kubernetes client configuration (in-cluster, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}
