package container

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"

	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/process"
	"qshare/trainingjob"
)

// Labels that mark qshare's containers and networks, so that Recover finds
// an attempt's containers by its ID alone and Sweep finds those nobody
// claims. LabelDataDir keeps servers with other data directories (and
// tests that run side by side) out of each other's way.
const (
	LabelAttempt  = "qshare.io/attempt-id"
	LabelJob      = "qshare.io/job-id"
	LabelInstance = "qshare.io/instance"
	LabelDataDir  = "qshare.io/data-dir"
)

// The paths of SageMaker's container contract.
const (
	mlRoot       = "/opt/ml"
	mlInput      = "/opt/ml/input"
	mlConfig     = "/opt/ml/input/config"
	mlData       = "/opt/ml/input/data"
	mlModel      = "/opt/ml/model"
	mlOutput     = "/opt/ml/output"
	mlOutputData = "/opt/ml/output/data"
	mlCheckpoint = "/opt/ml/checkpoints"
)

// DefaultShmSize is /dev/shm of every container: PyTorch's data loaders
// pass batches between worker processes through it, and the engines'
// default (64 MiB) makes them fail with "bus error" on real batch sizes.
const DefaultShmSize = 2 << 30

// host is one instance of an attempt as its container sees it.
type host struct {
	Name  string // algo-1 … algo-N
	Index int    // from 0
}

// hostNames returns algo-1 … algo-n, as SageMaker names an attempt's hosts.
func hostNames(n int) []string {
	hs := make([]string, n)
	for i := range hs {
		hs[i] = "algo-" + strconv.Itoa(i+1)
	}
	return hs
}

// build is what the executor knows when it makes an instance's container.
type build struct {
	Spec     executor.Spec
	Req      *trainingjob.Request
	Dirs     process.JobDirs
	HostConf string // the host's own resourceconfig.json on the host
	Type     string // instance type
	Hosts    []string
	Host     host
	User     string // uid:gid
	Groups   []uint32
	GPUs     []gpu.GPU
	Devices  gpuMode
	Limits   limits
	Network  string // "" for the engine's default bridge; "none" for none
	Image    string
	ARN      string // the attempt's training job ARN
	DataDir  string
	ReadOnly bool
}

// limits are an instance's CPUs and memory as container limits; zero is
// no limit.
type limits struct {
	NanoCPUs int64
	Memory   int64
}

// gpuMode is how the engine is asked for GPUs.
type gpuMode int

const (
	// gpuCDIDevice: CDI names as devices (Podman: --device nvidia.com/gpu=0).
	gpuCDIDevice gpuMode = iota
	// gpuCDIRequest: CDI names in a device request of the "cdi" driver
	// (Docker Engine 25 and later, API 1.44).
	gpuCDIRequest
	// gpuNVIDIA: a device request of the NVIDIA runtime's driver, by UUID
	// (older Docker Engines with nvidia-container-toolkit).
	gpuNVIDIA
)

// createRequest builds the container of one instance of an attempt.
func createRequest(b build) (*container.Config, *container.HostConfig) {
	cmd := b.Req.AlgorithmSpecification.ContainerArguments
	var entry []string
	if ep := b.Req.AlgorithmSpecification.ContainerEntrypoint; len(ep) > 0 {
		entry = append([]string(nil), ep...)
	} else if len(cmd) == 0 {
		cmd = []string{"train"} // SageMaker's `docker run IMAGE train`
	}
	labels := map[string]string{
		LabelAttempt:  b.Spec.AttemptID,
		LabelJob:      b.Spec.JobID,
		LabelInstance: strconv.Itoa(b.Host.Index),
		LabelDataDir:  b.DataDir,
	}
	cfg := &container.Config{
		Image:      b.Image,
		Entrypoint: entry,
		Cmd:        append([]string(nil), cmd...),
		Env:        containerEnv(b),
		User:       b.User,
		Labels:     labels,
		Hostname:   b.Host.Name,
	}
	yes := true
	hc := &container.HostConfig{
		Binds:          binds(b),
		Init:           &yes,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: b.ReadOnly,
		ShmSize:        DefaultShmSize,
		// A read-only root still needs somewhere to write scratch files.
		Tmpfs: map[string]string{"/tmp": "rw,nosuid,nodev,size=1g"},
	}
	if b.Network != "" {
		hc.NetworkMode = container.NetworkMode(b.Network)
	}
	for _, g := range b.Groups {
		hc.GroupAdd = append(hc.GroupAdd, strconv.FormatUint(uint64(g), 10))
	}
	hc.Resources.NanoCPUs = b.Limits.NanoCPUs
	hc.Resources.Memory = b.Limits.Memory
	gpuRequest(&hc.Resources, b.Devices, b.GPUs)
	return cfg, hc
}

// gpuRequest asks the engine for the attempt's GPUs in the way it
// understands (see gpuMode).
func gpuRequest(r *container.Resources, mode gpuMode, gs []gpu.GPU) {
	if len(gs) == 0 {
		return
	}
	var cdi, uuids []string
	for _, g := range gs {
		cdi = append(cdi, "nvidia.com/gpu="+strconv.Itoa(g.Index))
		uuids = append(uuids, g.UUID)
	}
	switch mode {
	case gpuCDIDevice:
		for _, n := range cdi {
			r.Devices = append(r.Devices, container.DeviceMapping{PathOnHost: n, PathInContainer: n, CgroupPermissions: "rwm"})
		}
	case gpuCDIRequest:
		r.DeviceRequests = []container.DeviceRequest{{Driver: "cdi", DeviceIDs: cdi}}
	default:
		r.DeviceRequests = []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: uuids, Capabilities: [][]string{{"gpu"}}}}
	}
}

// binds are the bind mounts of SageMaker's /opt/ml: the job's directories,
// the host's own resourceconfig.json over the shared one, and each local
// (file://) channel read-only at /opt/ml/input/data/<channel>.
func binds(b build) []string {
	out := []string{
		b.Dirs.Input + ":" + mlInput,
		b.Dirs.Model + ":" + mlModel,
		b.Dirs.Output + ":" + mlOutput,
	}
	if b.HostConf != "" {
		out = append(out, b.HostConf+":"+mlConfig+"/resourceconfig.json:ro")
	}
	// The checkpoint directory is bound where the job asked (LocalPath),
	// else at /opt/ml/checkpoints; a LocalPath beneath /opt/ml/input,
	// model or output is already there.
	ck := checkpointPath(b.Req)
	if !under(ck, mlInput) && !under(ck, mlModel) && !under(ck, mlOutput) {
		out = append(out, b.Dirs.Checkpoint+":"+ck)
	}
	for _, c := range b.Req.InputDataConfig {
		if p, err := process.ChannelPath(c); err == nil && p != "" {
			out = append(out, p+":"+mlData+"/"+c.ChannelName+":ro")
		}
	}
	return out
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// checkpointPath is the checkpoint directory inside the container:
// CheckpointConfig.LocalPath, else /opt/ml/checkpoints. A relative
// LocalPath is taken beneath /opt/ml, as the job's directory maps it.
func checkpointPath(req *trainingjob.Request) string {
	if req.CheckpointConfig == nil || strings.TrimSpace(req.CheckpointConfig.LocalPath) == "" {
		return mlCheckpoint
	}
	p := filepath.ToSlash(filepath.Clean("/" + req.CheckpointConfig.LocalPath))
	if !under(p, mlRoot) {
		p = mlRoot + p
	}
	return p
}

// containerEnv is the container's environment: the payload's Environment,
// under SageMaker's variables (paths inside the container) and qshare's,
// and nothing of the server's.
func containerEnv(b build) []string {
	d := executor.TrainingDirs{Model: mlModel, Output: mlOutput, OutputData: mlOutputData, Input: mlInput, Config: mlConfig, Checkpoint: checkpointPath(b.Req)}
	env := executor.TrainingEnv(b.Spec, b.Req, d, b.Type)
	hosts, _ := json.Marshal(b.Hosts)
	env["SM_CURRENT_HOST"] = b.Host.Name
	env["SM_HOSTS"] = string(hosts)
	env["SM_NUM_GPUS"] = strconv.Itoa(len(b.GPUs))
	if b.Limits.NanoCPUs > 0 {
		env["SM_NUM_CPUS"] = strconv.FormatInt((b.Limits.NanoCPUs+999_999_999)/1_000_000_000, 10)
	}
	env["SM_NETWORK_INTERFACE_NAME"] = "eth0"
	for _, c := range b.Req.InputDataConfig {
		env["SM_CHANNEL_"+executor.EnvName(c.ChannelName)] = mlData + "/" + c.ChannelName
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = "/tmp" // writable under a read-only root; the job's user may have no home in the image
	}
	env["TRAINING_JOB_NAME"] = trainingjob.NameOfARN(b.ARN)
	env["TRAINING_JOB_ARN"] = b.ARN
	var idx []string
	for _, g := range b.GPUs {
		idx = append(idx, strconv.Itoa(g.Index))
	}
	// Inside the container the attempt's GPUs are the only ones, numbered
	// from 0 in the order the engine exposes them.
	var visible []string
	for i := range b.GPUs {
		visible = append(visible, strconv.Itoa(i))
	}
	env["CUDA_VISIBLE_DEVICES"] = strings.Join(visible, ",")
	if len(idx) == 0 {
		env["NVIDIA_VISIBLE_DEVICES"] = "void"
	} else {
		env["NVIDIA_VISIBLE_DEVICES"] = strings.Join(idx, ",")
	}
	return executor.EnvList(env)
}

// nameRe and validName are ^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,150}$ (the classes
// are of single bytes), without compiling 150 copies of the class at every
// start of the binary.
var nameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// validName reports whether s may name a channel, an attempt or a
// container: a letter or digit, then up to 150 of those, dots, hyphens and
// underscores.
func validName(s string) bool { return len(s) <= 151 && nameRe.MatchString(s) }

// containerName names instance k of an attempt:
// qshare-<data>-<attemptID>-algo-k, where <data> tells apart the servers
// (and tests) with other data directories on one engine, whose attempt
// IDs may be the same.
func containerName(dataDir, attemptID string, k int) string {
	return fmt.Sprintf("%s-%s-algo-%d", namePrefix(dataDir), attemptID, k+1)
}

// namePrefix is qshare-<8 hex digits of the data directory's hash>.
func namePrefix(dataDir string) string {
	h := sha256.Sum256([]byte(dataDir))
	return "qshare-" + hex.EncodeToString(h[:4])
}

// instanceLimits are the CPUs and memory of one instance of typ, from the
// size in its name (large: 2 vCPUs, xlarge: 4, Nxlarge: 4N) and its
// family's memory per vCPU (m: 4 GiB, c: 2, r: 8, and so on), capped at
// the host's CPUs and memory. A type this does not know gets no limit.
func instanceLimits(typ string, hostCPUs int, hostMem int64) limits {
	parts := strings.Split(strings.TrimPrefix(typ, "ml."), ".")
	if len(parts) != 2 {
		return limits{}
	}
	fam, size := parts[0], parts[1]
	var vcpu int64
	switch {
	case size == "medium":
		vcpu = 1
	case size == "large":
		vcpu = 2
	case size == "xlarge":
		vcpu = 4
	case strings.HasSuffix(size, "xlarge"):
		n, err := strconv.Atoi(strings.TrimSuffix(size, "xlarge"))
		if err != nil || n < 1 || n > 1024 {
			return limits{}
		}
		vcpu = int64(4 * n)
	default:
		return limits{}
	}
	perCPU := map[byte]float64{'m': 4, 'c': 2, 'r': 8, 't': 4, 'g': 4, 'p': 8}
	gib, ok := perCPU[fam[0]]
	if !ok {
		return limits{}
	}
	l := limits{NanoCPUs: vcpu * 1_000_000_000, Memory: int64(gib * float64(vcpu) * (1 << 30))}
	if hostCPUs > 0 && l.NanoCPUs > int64(hostCPUs)*1_000_000_000 {
		l.NanoCPUs = int64(hostCPUs) * 1_000_000_000
	}
	if hostMem > 0 && l.Memory > hostMem {
		l.Memory = 0 // the host's own bound holds
	}
	return l
}
