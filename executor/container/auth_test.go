package container_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/registry"

	"qshare"
	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/executor/executortest"
	"qshare/internal/serveproc"
)

// fakeHelper puts a credential helper docker-credential-NAME on PATH: a
// shell script that, as the real ones do, reads the registry's address on
// stdin for `get`, appends "ARG ADDRESS" to calls.log in dir, and answers
// with user user-of-ADDRESS and the secret s3cret, or with account's user
// and secret where given (letters, digits and '-' only); an address with
// "unknown" in it gets the helpers' "credentials not found" and exit
// status 1.
func fakeHelper(t *testing.T, dir, name string, account ...string) string {
	t.Helper()
	log := filepath.Join(dir, "calls.log")
	user, secret := "user-of-$addr", "s3cret"
	if len(account) == 2 {
		user, secret = account[0], account[1]
	}
	script := `#!/bin/sh
read addr
echo "$1 $addr" >> '` + log + `'
case "$addr" in *unknown*) echo "credentials not found in native keychain"; exit 1;; esac
printf '{"ServerURL":"%s","Username":"%s","Secret":"%s"}' "$addr" "` + user + `" "` + secret + `"
`
	if err := serveproc.WriteExecutable(filepath.Join(dir, "docker-credential-"+name), []byte(script)); err != nil {
		t.Fatal(err)
	}
	setenv(t, "PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// dockerConfig writes config.json into a directory of its own and points
// DOCKER_CONFIG at it, as the server's environment would, until t ends.
func dockerConfig(t *testing.T, conf string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	setenv(t, "DOCKER_CONFIG", dir)
}

// setenv sets k to v until t ends, as t.Setenv does, but in a test that
// runs in parallel: TestRegistryPullDocker runs beside the conformance
// suite, whose executors pull nothing and run no credential helper, so
// they read neither DOCKER_CONFIG nor the helper's directory in PATH.
func setenv(t *testing.T, k, v string) {
	old, had := os.LookupEnv(k)
	os.Setenv(k, v)
	t.Cleanup(func() {
		if had {
			os.Setenv(k, old)
		} else {
			os.Unsetenv(k)
		}
	})
}

func decodeAuth(t *testing.T, s string) registry.AuthConfig {
	t.Helper()
	var ac registry.AuthConfig
	b, err := base64.URLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &ac)
	}
	if err != nil {
		t.Fatalf("X-Registry-Auth %q does not decode: %v", s, err)
	}
	return ac
}

// TestRegistryAuthHelpers: the credentials of a pull come from the Docker
// config file through the credential helper it names for the image's
// registry (credHelpers, as ECR's docker-credential-ecr-login is set up),
// else its credsStore, else its auths; the helper really runs, with `get`
// and the registry's address; Docker Hub's images ask for Docker Hub's
// key; a registry the helper knows nothing of pulls anonymously.
func TestRegistryAuthHelpers(t *testing.T) {
	bin := t.TempDir()
	ecrLog := fakeHelper(t, bin, "fake-ecr")
	dockerConfig(t, `{"credHelpers": {"123456789012.dkr.ecr.us-east-1.amazonaws.com": "fake-ecr"},
		"credsStore": "fake-ecr",
		"auths": {"plain.example:5000": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("alice:pw"))+`"}}}`)

	for _, c := range []struct{ img, addr string }{
		{"123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train:1", "123456789012.dkr.ecr.us-east-1.amazonaws.com"},
		{"registry.example:5000/img@sha256:" + strings.Repeat("a", 64), "registry.example:5000"},
		{"pytorch/pytorch:2.3", container.DockerHub},
	} {
		got, err := container.RegistryAuth(c.img)
		if err != nil {
			t.Fatalf("%s: %v", c.img, err)
		}
		if ac := decodeAuth(t, got); ac.Username != "user-of-"+c.addr || ac.Password != "s3cret" {
			t.Errorf("%s: credentials %+v, want the helper's for %s", c.img, ac, c.addr)
		}
	}
	calls, err := os.ReadFile(ecrLog)
	if err != nil {
		t.Fatalf("the helper never ran: %v", err)
	}
	for _, want := range []string{"get 123456789012.dkr.ecr.us-east-1.amazonaws.com\n", "get registry.example:5000\n", "get " + container.DockerHub + "\n"} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("the helper's calls %q lack %q", calls, want)
		}
	}

	// A helper that has nothing for the registry: an anonymous pull.
	if got, err := container.RegistryAuth("unknown.example/img:1"); err != nil || got != "" {
		t.Errorf("a registry the helper does not know: %q, %v; want an anonymous pull", got, err)
	}

	// Without a store, the file's own auths.
	dockerConfig(t, `{"auths": {"plain.example:5000": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("alice:pw"))+`"}}}`)
	got, err := container.RegistryAuth("plain.example:5000/img:1")
	if err != nil {
		t.Fatal(err)
	}
	if ac := decodeAuth(t, got); ac.Username != "alice" || ac.Password != "pw" {
		t.Errorf("credentials from auths: %+v", ac)
	}
	if got, err := container.RegistryAuth("other.example/img:1"); err != nil || got != "" {
		t.Errorf("a registry with no entry: %q, %v", got, err)
	}
	if _, err := container.RegistryAuth("Not A Reference"); err == nil {
		t.Error("an image that is no reference gave credentials")
	}
}

// TestPullSendsHelperCredentials: a pull through the engine carries the
// credential helper's answer to the registry. The registry is a fake of
// this test's on a loopback port (the engine treats a localhost registry
// as insecure, so plain HTTP): it asks for Basic authentication, records
// what comes, and has no image, so the attempt fails as an image not
// found, with the helper's credentials seen by the registry.
func TestPullSendsHelperCredentials(t *testing.T) {
	host := containertest.Docker(t)
	var mu sync.Mutex
	var seen []string
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		mu.Lock()
		if a != "" {
			seen = append(seen, a)
		}
		mu.Unlock()
		if a == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="qshare-test"`)
			w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
			return
		}
		http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
	}))
	defer reg.Close()
	addr := "localhost" + strings.TrimPrefix(reg.URL, "http://127.0.0.1")
	fakeHelper(t, t.TempDir(), "fake-store")
	dockerConfig(t, `{"credsStore": "fake-store"}`)

	e, err := container.New(context.Background(), container.Options{DataDir: t.TempDir(), Host: host, Pull: container.PullMissing, GPUs: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	img := addr + "/team/private:1"
	s := spec("private", qshare.Capacity{"ml.m5.large": 1}, map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}})
	executortest.Start(t, e, s, 30*time.Second)
	x := waitExit(t, e, s.AttemptID)
	if !strings.HasPrefix(x.Reason, "CannotStartContainerError: ClientError: image not found: "+img) {
		t.Errorf("exit of a pull the registry has no image for = %+v", x)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user-of-"+addr+":s3cret"))
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, want) {
		t.Errorf("the registry saw Authorization %q, want the helper's %q", seen, want)
	}
}
