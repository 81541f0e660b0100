// Package containertest gives the container executor's tests an engine
// (Docker Engine's socket, or a Podman service of the test's own) and a
// test image built here, since no registry is reachable: a FROM-scratch
// image holding one static program (./job) that plays an executortest.Job.
package containertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"qshare/executor/container"
	"qshare/executor/executortest"
)

// Docker returns the address of the Docker Engine on this machine, or
// skips t when none answers.
func Docker(t testing.TB) string {
	t.Helper()
	const host = "unix:///var/run/docker.sock"
	if err := ping(host); err != nil {
		t.Skipf("no Docker Engine answers at %s (%v): install docker.io and start it to run these tests", host, err)
	}
	return host
}

var podman struct {
	once sync.Once
	svc  *PodmanService
	err  error
}

// Podman starts, once per test binary, a Podman service (StartPodman) and
// returns its address; it skips t when podman is not installed or the
// service does not answer. The service runs until StopPodman, which the
// caller's TestMain calls.
func Podman(t testing.TB) string {
	t.Helper()
	skipNoPodman(t)
	podman.once.Do(func() { podman.svc, podman.err = StartPodman() })
	if podman.err != nil {
		t.Skipf("podman system service does not answer (%v): the Podman conformance run is skipped", podman.err)
	}
	return podman.svc.Host
}

func skipNoPodman(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (apt-get install podman runc catatonit; .ci/run does): the Podman run is skipped")
	}
}

// StopPodman ends the service that Podman started, if any.
func StopPodman() {
	if podman.svc != nil {
		podman.svc.Kill()
	}
}

// PodmanService is a `podman system service` of a test's own, on a socket
// in a directory of its own, with runc (crun fails on these machines'
// cgroups) and the recipe's containers.conf (shared/recipes/podman.md).
type PodmanService struct {
	// Host is the service's address, unix://DIR/podman.sock.
	Host       string
	dir        string
	registries string // its registries.conf, where it has one
	cmd        *exec.Cmd
}

// StartPodman starts a Podman service and returns once it answers.
func StartPodman() (*PodmanService, error) { return startPodman(nil) }

// startPodman starts a Podman service that takes insecure (plain HTTP)
// as the registries it names, in a registries.conf of its own: Podman,
// unlike Docker Engine, speaks TLS to a registry on the loopback too.
func startPodman(insecure []string) (*PodmanService, error) {
	dir, err := os.MkdirTemp("", "qshare-podman-")
	if err != nil {
		return nil, err
	}
	// The packaged default ulimits fail here (setrlimit NOFILE: not
	// permitted); the recipe's containers.conf, as the service's own.
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
		return nil, err
	}
	p := &PodmanService{Host: "unix://" + filepath.Join(dir, "podman.sock"), dir: dir}
	if len(insecure) > 0 {
		reg := "unqualified-search-registries = []\n"
		for _, r := range insecure {
			reg += fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n", r)
		}
		p.registries = filepath.Join(dir, "registries.conf")
		if err := os.WriteFile(p.registries, []byte(reg), 0o644); err != nil {
			return nil, err
		}
	}
	return p, p.Start()
}

// PodmanServiceT is StartPodman for one test: it skips t where podman is
// absent or does not answer, and kills the service when t ends. The
// service takes the registries insecure names (HOST:PORT) as plain HTTP,
// through a registries.conf of its own, never /etc's.
func PodmanServiceT(t testing.TB, insecure ...string) *PodmanService {
	t.Helper()
	skipNoPodman(t)
	p, err := startPodman(insecure)
	if err != nil {
		t.Skipf("podman system service does not answer (%v)", err)
	}
	t.Cleanup(p.Kill)
	return p
}

// Start starts the service (again, after Kill) and waits until it answers.
func (p *PodmanService) Start() error {
	args := []string{"system", "service", "--time=0", p.Host}
	if _, err := exec.LookPath("runc"); err == nil {
		args = append([]string{"--runtime", "runc"}, args...)
	}
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(p.dir, "containers.conf"))
	if p.registries != "" {
		cmd.Env = append(cmd.Env, "CONTAINERS_REGISTRIES_CONF="+p.registries)
	}
	if log, err := os.OpenFile(filepath.Join(p.dir, "service.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		cmd.Stdout, cmd.Stderr = log, log // the service's chatter stays out of the tests' output
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	var err error
	for i := 0; i < 100; i++ {
		if err = ping(p.Host); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Kill ends the service with SIGKILL, as a crash would; the containers,
// children of their conmon, run on.
func (p *PodmanService) Kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}

func ping(host string) error {
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{})
	return err
}

var images sync.Map // host -> *imageOnce

type imageOnce struct {
	once sync.Once
	ref  string
	err  error
}

// Image builds the test program (CGO_ENABLED=0, so static), imports a
// FROM-scratch image of it into the engine at host (docker import of a
// tarball: /job, and the directories a read-only root needs), and returns
// its reference. The tag is the program's hash: an engine that has it
// already is not given it again.
func Image(t testing.TB, host string) string {
	t.Helper()
	v, _ := images.LoadOrStore(host, &imageOnce{})
	io := v.(*imageOnce)
	io.once.Do(func() { io.ref, io.err = buildImage(host) })
	if io.err != nil {
		t.Fatalf("building the test image: %v", io.err)
	}
	return io.ref
}

// program builds the test program once per test binary. Not with
// -trimpath: that would compile the program's 75 packages again, apart
// from those the test command built (23 s on a 2-core machine with a
// cache warm from go build ./..., against 2.3 s), on every fresh clone.
var program = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "qshare-testjob-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "job")
	cmd := exec.Command("go", "build", "-o", bin, "qshare/executor/container/containertest/job")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build of the test program: %v\n%s", err, out)
	}
	return os.ReadFile(bin)
})

// imageFiles are the test image's files: /job, /etc/hosts, and extra.
func imageFiles(extra ...container.ScratchFile) ([]container.ScratchFile, []byte, error) {
	prog, err := program()
	if err != nil {
		return nil, nil, err
	}
	hosts := []byte("127.0.0.1 localhost\n")
	return append([]container.ScratchFile{{Name: "etc/hosts", Mode: 0o644, Data: hosts}, {Name: "job", Mode: 0o755, Data: prog}}, extra...), prog, nil
}

func buildImage(host string) (string, error) {
	files, prog, err := imageFiles()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(prog)
	ref := "localhost/qshare-testjob:" + hex.EncodeToString(sum[:6])
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return "", err
	}
	defer cli.Close()
	if err := container.ImportScratch(context.Background(), cli, ref, files); err != nil {
		return "", fmt.Errorf("the test image: %w", err)
	}
	return ref, nil
}

// Args renders j as the test program's arguments.
func Args(j executortest.Job) []string {
	args := []string{"-run=" + j.Run.String(), "-exit=" + strconv.Itoa(j.ExitCode)}
	switch j.OnStop {
	case executortest.StopCheckpoint:
		args = append(args, "-onstop=checkpoint", "-ckpt="+j.CheckpointTime.String())
	case executortest.StopIgnore:
		args = append(args, "-onstop=ignore")
	}
	if j.Output != "" {
		args = append(args, "-output="+j.Output)
	}
	if j.RecordEnv {
		args = append(args, "-env")
	}
	return args
}

// Payload is a CreateTrainingJob payload that runs j in img, on one
// ml.m5.large (no GPUs).
func Payload(img string, j executortest.Job) string {
	p := map[string]any{
		"TrainingJobName": "conformance",
		"AlgorithmSpecification": map[string]any{
			"TrainingImage":       img,
			"TrainingInputMode":   "File",
			"ContainerEntrypoint": []string{"/job"},
			"ContainerArguments":  Args(j),
		},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
		"Environment":    j.Env,
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// Leftovers lists the containers at host that carry dataDir's label: what
// a test leaves behind.
func Leftovers(t testing.TB, host, dataDir string) []string {
	t.Helper()
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "qshare.io/data-dir="+dataDir)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, strings.Join(c.Names, ",")+" ("+string(c.State)+")")
	}
	return out
}
