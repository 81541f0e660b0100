// Package containertest gives the container executor's tests an engine
// (Docker Engine's socket, or a Podman service of the test's own) and a
// test image built here, since no registry is reachable: a FROM-scratch
// image holding one static program (./job) that plays an executortest.Job.
package containertest

import (
	"archive/tar"
	"bytes"
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
	host string
	err  error
}

// Podman starts, once per test binary, `podman system service` on a
// socket of its own (with runc, as shared/recipes/podman.md says: crun
// fails on these machines' cgroups) and returns its address; it skips t
// when podman is not installed or the service does not answer. The
// service runs until StopPodman, which the caller's TestMain calls.
func Podman(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (apt-get install podman runc; .ci/run does): the Podman conformance run is skipped")
	}
	podman.once.Do(func() {
		dir, err := os.MkdirTemp("", "qshare-podman-")
		if err != nil {
			podman.err = err
			return
		}
		sock := filepath.Join(dir, "podman.sock")
		args := []string{"system", "service", "--time=0", "unix://" + sock}
		if _, err := exec.LookPath("runc"); err == nil {
			args = append([]string{"--runtime", "runc"}, args...)
		}
		// The packaged default ulimits fail here (setrlimit NOFILE: not
		// permitted); the recipe's containers.conf, as the service's own.
		conf := filepath.Join(dir, "containers.conf")
		if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
			podman.err = err
			return
		}
		cmd := exec.Command("podman", args...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		if log, err := os.Create(filepath.Join(dir, "service.log")); err == nil {
			cmd.Stdout, cmd.Stderr = log, log // the service's chatter stays out of the tests' output
		}
		if err := cmd.Start(); err != nil {
			podman.err = err
			return
		}
		podmanCmd = cmd
		host := "unix://" + sock
		for i := 0; i < 100; i++ {
			if podman.err = ping(host); podman.err == nil {
				podman.host = host
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if podman.host == "" {
		t.Skipf("podman system service does not answer (%v): the Podman conformance run is skipped", podman.err)
	}
	return podman.host
}

var podmanCmd *exec.Cmd

// StopPodman ends the Podman service that Podman started, if any, by its
// process; a TestMain calls it after the tests.
func StopPodman() {
	if podmanCmd != nil && podmanCmd.Process != nil {
		podmanCmd.Process.Kill()
		podmanCmd.Wait()
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

func buildImage(host string) (string, error) {
	dir, err := os.MkdirTemp("", "qshare-testjob-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "job")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "qshare/executor/container/containertest/job")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of the test program: %v\n%s", err, out)
	}
	prog, err := os.ReadFile(bin)
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
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, d := range []string{"tmp/", "opt/", "opt/ml/", "etc/", "proc/", "sys/", "dev/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Unix(0, 0)})
	}
	hosts := []byte("127.0.0.1 localhost\n")
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/hosts", Mode: 0o644, Size: int64(len(hosts)), ModTime: time.Unix(0, 0)})
	tw.Write(hosts)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "job", Mode: 0o755, Size: int64(len(prog)), ModTime: time.Unix(0, 0)})
	tw.Write(prog)
	if err := tw.Close(); err != nil {
		return "", err
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &b, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		return "", fmt.Errorf("importing the test image: %w", err)
	}
	var out bytes.Buffer
	out.ReadFrom(res)
	res.Close()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return "", fmt.Errorf("the imported test image is not there (%v): the engine said %s", err, out.String())
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
