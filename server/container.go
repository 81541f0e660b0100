package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"qshare/executor"
	"qshare/executor/container"
)

func init() { executors[container.Name] = newContainerExecutor }

// newContainerExecutor is --executor container: each attempt runs as
// containers of its TrainingImage through the Docker Engine API at
// --container-host (default DOCKER_HOST, else the usual sockets), with
// images pulled as --pull says (docs/container.md).
func newContainerExecutor(ctx context.Context, s Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
	pull, err := container.ParsePull(s.Pull)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(s.DataDir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	return container.New(ctx, container.Options{DataDir: dir, Host: s.ContainerHost, Pull: pull, StopGrace: grace,
		GPUs: splitList(s.GPUs), InstanceTypes: s.InstanceTypes, RunAs: s.RunAs, Region: s.Region, AccountID: s.AccountID, Logger: log})
}
