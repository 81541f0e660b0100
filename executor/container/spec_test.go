package container

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"

	"qshare"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/gpu/gputest"
	"qshare/executor/process"
	"qshare/trainingjob"
)

// TestCreateRequestGPUs checks the request the executor builds for an
// attempt that holds two of the allocator's (fake) GPUs, for each way an
// engine is asked for them, and the container's hardening.
func TestCreateRequestGPUs(t *testing.T) {
	gputest.FakeSMI(t, 4)
	gs, err := gpu.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := gpu.NewAllocator(gs)
	if _, err := a.Claim("other", 1); err != nil {
		t.Fatal(err)
	}
	held, err := a.Claim("job-1-attempt-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	req, err := trainingjob.Parse(`{"AlgorithmSpecification":{"TrainingImage":"img:1"},"ResourceConfig":{"InstanceType":"ml.g5.2xlarge","InstanceCount":1},
		"CheckpointConfig":{"LocalPath":"/opt/ml/ck"},"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3Uri":"file:///srv/train"}}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	b := build{Spec: executor.Spec{JobID: "job-1", JobName: "n", AttemptID: "job-1-attempt-1", Attempt: 1, Demand: qshare.Capacity{"ml.g5.2xlarge": 1}},
		Req: req, Dirs: process.JobDirs{Input: "/d/jobs/job-1/input", Model: "/d/jobs/job-1/model", Output: "/d/jobs/job-1/output", Checkpoint: "/d/jobs/job-1/ck"},
		HostConf: "/d/attempts/a/resourceconfig-algo-1.json", Type: "ml.g5.2xlarge", Hosts: []string{"algo-1"}, Host: host{Name: "algo-1"},
		User: "1000:1000", GPUs: held, Limits: instanceLimits("ml.g5.2xlarge", 64, 1<<40), Image: "img:1", DataDir: "/d", ReadOnly: true}
	for _, tc := range []struct {
		mode gpuMode
		want func(*container.Resources) bool
	}{
		{gpuCDIDevice, func(r *container.Resources) bool {
			return len(r.Devices) == 2 && r.Devices[0].PathOnHost == "nvidia.com/gpu=1" && r.Devices[1].PathOnHost == "nvidia.com/gpu=2" && r.DeviceRequests == nil
		}},
		{gpuCDIRequest, func(r *container.Resources) bool {
			return len(r.DeviceRequests) == 1 && r.DeviceRequests[0].Driver == "cdi" && slices.Equal(r.DeviceRequests[0].DeviceIDs, []string{"nvidia.com/gpu=1", "nvidia.com/gpu=2"})
		}},
		{gpuNVIDIA, func(r *container.Resources) bool {
			return len(r.DeviceRequests) == 1 && r.DeviceRequests[0].Driver == "nvidia" && slices.Equal(r.DeviceRequests[0].DeviceIDs, []string{held[0].UUID, held[1].UUID})
		}},
	} {
		b.Devices = tc.mode
		cfg, hc := createRequest(b)
		if !tc.want(&hc.Resources) {
			t.Errorf("mode %d: devices %+v, requests %+v", tc.mode, hc.Resources.Devices, hc.Resources.DeviceRequests)
		}
		env := strings.Join(cfg.Env, "\n") + "\n"
		for _, v := range []string{"CUDA_VISIBLE_DEVICES=0,1\n", "NVIDIA_VISIBLE_DEVICES=1,2\n", "SM_NUM_GPUS=2\n", "SM_NUM_CPUS=8\n", "SM_CHECKPOINT_DIR=/opt/ml/ck\n", "SM_CHANNEL_TRAIN=/opt/ml/input/data/train\n"} {
			if !strings.Contains(env, v) {
				t.Errorf("mode %d: the environment lacks %q:\n%s", tc.mode, v, env)
			}
		}
		if cfg.User != "1000:1000" || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges") || !hc.ReadonlyRootfs || hc.Init == nil || !*hc.Init {
			t.Errorf("hardening: user %q, cap-drop %v, security %v, read-only %v, init %v", cfg.User, hc.CapDrop, hc.SecurityOpt, hc.ReadonlyRootfs, hc.Init)
		}
		if hc.ShmSize < 1<<30 || hc.Resources.NanoCPUs != 8e9 || hc.Resources.Memory != 32<<30 {
			t.Errorf("limits: shm %d, cpus %d, memory %d; want 8 CPUs and 32 GiB of ml.g5.2xlarge", hc.ShmSize, hc.Resources.NanoCPUs, hc.Resources.Memory)
		}
		for _, bind := range []string{"/d/jobs/job-1/input:/opt/ml/input", "/d/jobs/job-1/ck:/opt/ml/ck", "/srv/train:/opt/ml/input/data/train:ro",
			"/d/attempts/a/resourceconfig-algo-1.json:/opt/ml/input/config/resourceconfig.json:ro"} {
			if !slices.Contains(hc.Binds, bind) {
				t.Errorf("binds %v lack %s", hc.Binds, bind)
			}
		}
	}
	// No GPUs: none asked for, and none visible.
	b.GPUs = nil
	cfg, hc := createRequest(b)
	if hc.Resources.Devices != nil || hc.Resources.DeviceRequests != nil || !slices.Contains(cfg.Env, "NVIDIA_VISIBLE_DEVICES=void") {
		t.Errorf("an attempt without GPUs: %+v %+v", hc.Resources.Devices, hc.Resources.DeviceRequests)
	}
	// Without an entry point, SageMaker's `docker run IMAGE train`.
	if cfg.Entrypoint != nil || !slices.Equal(cfg.Cmd, []string{"train"}) {
		t.Errorf("entrypoint %v, cmd %v; want the image's own entry point with the argument train", cfg.Entrypoint, cfg.Cmd)
	}
}

func TestGPUModeOf(t *testing.T) {
	for _, tc := range []struct {
		podman       bool
		major, minor int
		want         gpuMode
	}{{true, 1, 41, gpuCDIDevice}, {false, 1, 41, gpuNVIDIA}, {false, 1, 44, gpuCDIRequest}, {false, 1, 51, gpuCDIRequest}} {
		if got := gpuModeOf(tc.podman, tc.major, tc.minor); got != tc.want {
			t.Errorf("gpuModeOf(%v, %d.%d) = %d, want %d", tc.podman, tc.major, tc.minor, got, tc.want)
		}
	}
}
