// Package seaweedfs starts SeaweedFS (github.com/seaweedfs/seaweedfs) with
// its S3 gateway: a second S3-compatible server that no one here wrote,
// which the data contract's tests and qshare bench s3 run against beside
// qshare's embedded store and versitygw. `weed mini` runs its master,
// volume server, filer and S3 gateway in one process over one directory,
// and the gateway checks every request's SigV4 signature against one
// identity. .ci/build-seaweedfs builds the binary into a cache outside the
// repository; callers skip, with a message, where it is absent
// (Available).
package seaweedfs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"qshare/internal/toolcache"
)

// Version is the SeaweedFS module version that .ci/build-seaweedfs builds
// (its `weed version` says 4.53).
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// Binary returns where weed is: $QSHARE_SEAWEEDFS, or where
// .ci/build-seaweedfs puts it ($XDG_CACHE_HOME or ~/.cache, then
// qshare/seaweedfs-<Version>/weed).
func Binary() string { return tool.Path() }

var tool = toolcache.Tool{Name: "SeaweedFS", Env: "QSHARE_SEAWEEDFS", Script: "build-seaweedfs", Elem: []string{"seaweedfs-" + Version, "weed"}}

// Available returns nil where the binary is there, and otherwise an error
// that says how to build it.
func Available() error { return tool.Available() }

// Server is a running SeaweedFS; its key is its one identity's.
type Server = toolcache.S3Server

// Start runs `weed mini` over dir, every listener on a free loopback port
// (the Admin UI, its legacy port, WebDAV, Iceberg and Lance endpoints
// off, and no telemetry), its logs in what it prints, with one S3
// identity that may do everything, and returns once the S3 gateway
// answers HTTP: mini starts it after the master, the volume server and
// the filer are ready. ctx bounds the start only; Close stops it.
//
// Once in a while (a .ci/run of 7 December 2026, not reproduced) mini's
// volume server reports to its master a topology id other than the
// master's, and the master freezes volume growth for good ("volume
// growth frozen": every PutObject then fails with an InternalError). It
// says so while the volume server joins, before the filer and the
// gateway start; such a start is thrown away and made again, on a new
// data directory and new ports, up to three times.
func Start(ctx context.Context, dir string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	// weed runs in dir, where the paths below must still hold.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		s, err := start(ctx, dir, filepath.Join(dir, "data"+strconv.Itoa(try)))
		if err != nil || !strings.Contains(s.Log(), frozen) || try == 3 {
			return s, err
		}
		s.Close()
	}
}

// frozen is what the master logs when it has frozen volume growth.
const frozen = "volume growth frozen"

func start(ctx context.Context, dir, data string) (*Server, error) {
	s := &Server{AccessKey: "qshare-root", SecretKey: "qshare-root-secret"}
	// A start thrown away (Start) left its Unix sockets in dir.
	for _, f := range []string{"filer.sock", "s3.sock"} {
		os.Remove(filepath.Join(dir, f))
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	conf, err := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "root",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		return nil, err
	}
	// The listeners, in the order of the ports below (the Admin UI's
	// too, though it is off: mini binds its gRPC port all the same; its
	// legacy port, which mini also binds, is off below).
	names := []string{"master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc"}
	s.Process, _, err = toolcache.StartOnPorts(ctx, "SeaweedFS", len(names), func(ports []int) *exec.Cmd {
		// -logtostderr (a flag of weed's, before the command): its logs go
		// to the output kept, not to files in /tmp.
		args := []string{"-logtostderr", "mini", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.config=" + confPath,
			"-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-admin.port.legacy=0", "-master.telemetry=false"}
		for i, n := range names {
			args = append(args, "-"+n+"="+strconv.Itoa(ports[i]))
		}
		// The filer's and the gateway's Unix sockets go in dir where its
		// path is short enough for one (else in /tmp, removed on Close).
		if len(dir) < 90 {
			args = append(args, "-filer.localSocket="+filepath.Join(dir, "filer.sock"), "-s3.localSocket="+filepath.Join(dir, "s3.sock"))
		}
		cmd := exec.Command(Binary(), args...)
		cmd.Dir = dir
		return cmd
	}, func(ports []int) string {
		// Any status will do: an unsigned request is refused.
		s.URL = fmt.Sprintf("http://127.0.0.1:%d", ports[slices.Index(names, "s3.port")])
		return s.URL + "/"
	}, func(ports []int) {
		// weed mini puts a Unix socket for each gRPC port in /tmp,
		// whatever -dir says (the Admin UI's too, though it is off), and
		// a killed weed leaves them there.
		for i, n := range names {
			if svc, ok := strings.CutSuffix(n, ".port.grpc"); ok {
				os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", svc, ports[i]))
			}
			if svc, ok := strings.CutSuffix(n, ".port"); ok && (svc == "filer" || svc == "s3") {
				os.Remove(fmt.Sprintf("/tmp/seaweedfs-%s-%d.sock", svc, ports[i]))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
