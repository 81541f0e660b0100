// Package versitygw starts versitygw (github.com/versity/versitygw), an
// S3 gateway that no one here wrote, over its POSIX backend: the real
// S3-compatible server that the data contract's tests and qshare bench s3
// run against beside qshare's embedded store. It checks every request's
// SigV4 signature against one root key. .ci/build-versitygw builds the
// binary into a cache outside the repository; callers skip, with a
// message, where it is absent (Available).
package versitygw

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"qshare/internal/toolcache"
)

// Version is the versitygw that .ci/build-versitygw builds.
const Version = "v1.8.0"

// Binary returns where versitygw is: $QSHARE_VERSITYGW, or where
// .ci/build-versitygw puts it ($XDG_CACHE_HOME or ~/.cache, then
// qshare/versitygw-<Version>/versitygw).
func Binary() string { return tool.Path() }

// tool is the binary that .ci/build-versitygw builds.
var tool = toolcache.Tool{Name: "versitygw", Env: "QSHARE_VERSITYGW", Script: "build-versitygw", Elem: []string{"versitygw-" + Version, "versitygw"}}

// Available returns nil where the binary is there, and otherwise an error
// that says how to build it.
func Available() error { return tool.Available() }

// Server is a running versitygw; its key is its root account's.
type Server = toolcache.S3Server

// Start runs versitygw on a free loopback port over the POSIX backend in
// dir (the buckets are its directories; metadata goes to a sidecar
// directory beside it, so that no extended attributes are needed), with a
// fresh root key, and returns once it answers HTTP. ctx bounds the start
// only; Close stops it.
func Start(ctx context.Context, dir string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	root, meta := filepath.Join(dir, "buckets"), filepath.Join(dir, "meta")
	for _, d := range []string{root, meta} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	s := &Server{AccessKey: "qshare-root", SecretKey: "qshare-root-secret"}
	var err error
	s.Process, _, err = toolcache.StartOnPorts(ctx, "versitygw", 1, func(ports []int) *exec.Cmd {
		cmd := exec.Command(Binary(), "--port", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--quiet", "posix", "--sidecar", meta, root)
		// The root key goes through the environment, out of ps's sight.
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
		return cmd
	}, func(ports []int) string {
		// Any status will do: an unsigned request is refused.
		s.URL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		return s.URL + "/"
	}, nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}
