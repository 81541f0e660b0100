package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"qshare/data"
	"qshare/executor"
	"qshare/executor/container"
)

func init() { RegisterExecutor(container.Name, newContainerExecutor) }

// newContainerExecutor is --executor container: each attempt runs as
// containers of its TrainingImage through the Docker Engine API at
// --container-host (default DOCKER_HOST, else the usual sockets), with
// images pulled as --pull says, and the jobs' S3 data moved through
// --s3-endpoint (docs/container.md).
func newContainerExecutor(ctx context.Context, s Settings, grace time.Duration, log *slog.Logger) (executor.Executor, error) {
	pull, err := container.ParsePull(s.Pull)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(s.DataDir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	dc, err := data.NewClient(ctx, s3Endpoint(s))
	if err != nil {
		return nil, fmt.Errorf("--s3-endpoint: %w", err)
	}
	return container.New(ctx, container.Options{DataDir: dir, Host: s.ContainerHost, Pull: pull, StopGrace: grace, Data: dc,
		GPUs: splitList(s.GPUs), InstanceTypes: s.InstanceTypes, RunAs: s.RunAs, Region: s.Region, AccountID: s.AccountID, Logger: log})
}
