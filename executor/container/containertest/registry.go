package containertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/authconfig"
	apiregistry "github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"qshare/executor/container"
	"qshare/internal/registry"
)

// Registry starts a registry (internal/registry) for t with one account,
// whose front serves blobs at rate bytes a second; it skips t where the
// registry is not built, and stops it when t ends.
func Registry(t testing.TB, rate int64) *registry.Server {
	t.Helper()
	if err := registry.Available(); err != nil {
		t.Skipf("%v: the tests against a real registry are skipped", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg, err := registry.Start(ctx, t.TempDir(), registry.Options{User: "qshare-pusher", Password: hex.EncodeToString(randomBytes(t, 12)), Rate: rate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests the registry saw: %q\nthe registry's log:\n%s", reg.Requests(), reg.Log())
		}
		reg.Close()
	})
	return reg
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// PushImage makes an image of the test program and a file of pad random
// bytes (a layer that does not compress, so that its pull takes pad bytes
// and reports its progress), named reg.Host/repo:TAG with a tag of its
// own, pushes it to reg through the engine at host with reg's account,
// then removes it from the engine: whoever runs it must pull it. It
// returns the image's reference.
func PushImage(t testing.TB, host string, reg *registry.Server, repo string, pad int) string {
	t.Helper()
	files, _, err := imageFiles(container.ScratchFile{Name: "pad", Mode: 0o644, Data: randomBytes(t, pad)})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/" + repo + ":" + hex.EncodeToString(randomBytes(t, 6))
	cli := engine(t, host)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := container.ImportScratch(ctx, cli, ref, files); err != nil {
		t.Fatal(err)
	}
	auth, err := authconfig.Encode(apiregistry.AuthConfig{Username: reg.User, Password: reg.Password, ServerAddress: reg.Host})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	for m, err := range resp.JSONMessages(ctx) {
		if err == nil && m.Error != nil {
			err = fmt.Errorf("%s", m.Error.Message)
		}
		if err != nil {
			t.Fatalf("pushing %s: %v", ref, err)
		}
	}
	RemoveImage(t, host, ref)
	return ref
}

// RemoveImage removes ref from the engine at host, and fails t unless it
// is gone.
func RemoveImage(t testing.TB, host, ref string) {
	t.Helper()
	cli := engine(t, host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !strings.Contains(strings.ToLower(err.Error()), "no such image") {
		t.Fatalf("removing %s: %v", ref, err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		t.Fatalf("%s is still on the engine after its removal", ref)
	}
}

// engine is a client of the engine at host, closed when t ends.
func engine(t testing.TB, host string) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
