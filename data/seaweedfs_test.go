package data_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/data"
)

// weedVersion is the SeaweedFS that .ci/build-seaweedfs builds.
const weedVersion = "v0.0.0-20261109003541-7506e5f91cd6"

// weedBinary finds SeaweedFS's weed: QSHARE_WEED, or where
// .ci/build-seaweedfs puts it.
func weedBinary() string {
	if p := os.Getenv("QSHARE_WEED"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "qshare", "seaweedfs-"+weedVersion, "weed")
}

// freePort returns a port that is free, and whose gRPC twin (port+10000,
// which SeaweedFS takes beside each) is free too.
func freePort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000)); err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// seaweedFS starts a SeaweedFS server (master, volume, filer and S3
// gateway) that checks signatures against one identity, and returns a
// store for it.
func seaweedFS(t *testing.T) *store {
	t.Helper()
	bin := weedBinary()
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("SeaweedFS's weed is not built (%s): run .ci/build-seaweedfs to test against it", bin)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "s3.json")
	os.WriteFile(cfg, []byte(`{"identities":[{"name":"qshare","credentials":[{"accessKey":"qshare-key","secretKey":"qshare-secret"}],"actions":["Admin","Read","Write","List","Tagging"]}]}`), 0o600)
	s3p := freePort(t)
	args := []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + dir, "-s3", "-s3.config=" + cfg,
		fmt.Sprintf("-s3.port=%d", s3p), fmt.Sprintf("-master.port=%d", freePort(t)), fmt.Sprintf("-volume.port=%d", freePort(t)),
		fmt.Sprintf("-filer.port=%d", freePort(t)), "-volume.max=5"}
	cmd := exec.Command(bin, args...)
	log := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("weed's log:\n%s", log.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", s3p)
	ep := data.Endpoint{URL: url, Region: "us-east-1", AccessKeyID: "qshare-key", SecretAccessKey: "qshare-secret"}
	c, err := data.NewClient(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("SeaweedFS's S3 gateway did not answer within a minute")
		}
	}
	return &store{url: url, ep: ep, c: c}
}

// TestSeaweedFS stages, uploads and keeps checkpoints against SeaweedFS,
// an S3 server no one here wrote, which checks every signature: a wrong
// secret is the job's ClientError.
func TestSeaweedFS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a SeaweedFS server")
	}
	s := seaweedFS(t)
	var err error
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		// The filer takes a moment after the gateway answers.
		if err = s.putErr("swfs-data", map[string]string{"in/a.csv": "a", "in/sub/b.csv": "bb"}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	s.put(t, "swfs-out", nil)
	_, d, fsys := job(t)
	p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://swfs-out/o"},"CheckpointConfig":{"S3Uri":"s3://swfs-out/ck"},
		"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3Uri":"s3://swfs-data/in/"}}}]}`, 0, 1, d)
	if err := s.c.Stage(context.Background(), fsys, p, nil); err != nil {
		t.Fatal(err)
	}
	if got := files(t, d.Channel("train")); fmt.Sprint(got) != "map[a.csv:a sub/b.csv:bb]" {
		t.Fatalf("staged %v", got)
	}
	os.WriteFile(filepath.Join(d.Model, "w.bin"), []byte("weights"), 0o644)
	os.WriteFile(filepath.Join(d.Checkpoint, "step-1"), []byte("1"), 0o644)
	if err := s.c.Upload(context.Background(), fsys, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.NewCheckpointer(fsys, p).Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := untar(t, s.get(t, "swfs-out", "o/"+jobName+"/output/model.tar.gz")); m["w.bin"] != "weights" {
		t.Fatalf("model.tar.gz holds %v", m)
	}
	if got := string(s.get(t, "swfs-out", "ck/step-1")); got != "1" {
		t.Fatalf("checkpoint holds %q", got)
	}

	wrong := s.ep
	wrong.SecretAccessKey = "not-the-secret"
	c, err := data.NewClient(context.Background(), wrong)
	if err != nil {
		t.Fatal(err)
	}
	_, d2, fsys2 := job(t)
	err = c.Stage(context.Background(), fsys2, plan(t, channelPayload("s3://swfs-data/in/", "S3Prefix", ""), 0, 1, d2), nil)
	var de *data.Error
	if !asError(err, &de) || !de.Client || !strings.HasPrefix(de.Reason, "ClientError: Data download failed: ") {
		t.Fatalf("a wrong secret gave %v, want a ClientError", err)
	}
}
