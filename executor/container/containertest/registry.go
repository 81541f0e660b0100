package containertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
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

// PushImage makes an image of the test program and, for each pad, a file
// of that many random bytes in a layer of its own (a layer that does not
// compress, so that its pull takes its bytes and reports its progress):
// the first with the program, imported, each next one built on the one
// before (a Dockerfile's COPY). It names it reg.Host/repo:TAG with a tag
// of its own, pushes it to reg through the engine at host with reg's
// account, then removes it from the engine: whoever runs it must pull it.
// It returns the image's reference.
func PushImage(t testing.TB, host string, reg *registry.Server, repo string, pads ...int) string {
	t.Helper()
	files, _, err := imageFiles(container.ScratchFile{Name: "pad", Mode: 0o644, Data: randomBytes(t, pads[0])})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/" + repo + ":" + hex.EncodeToString(randomBytes(t, 6))
	cli := engine(t, host)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	layer := func(k int) string { // the image of the first k+1 layers
		if k == len(pads)-1 {
			return ref
		}
		return ref + "-" + strconv.Itoa(k)
	}
	if err := container.ImportScratch(ctx, cli, layer(0), files); err != nil {
		t.Fatal(err)
	}
	for k := 1; k < len(pads); k++ {
		name := "pad" + strconv.Itoa(k)
		buildOn(t, cli, layer(k-1), layer(k), container.ScratchFile{Name: name, Mode: 0o644, Data: randomBytes(t, pads[k])})
		defer RemoveImage(t, host, layer(k-1))
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

// buildOn builds the image ref of base and one layer that holds f
// (FROM base, COPY f), through the engine's build API.
func buildOn(t testing.TB, cli *client.Client, base, ref string, f container.ScratchFile) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	docker := []byte("FROM " + base + "\nCOPY " + f.Name + " /" + f.Name + "\n")
	for _, e := range []container.ScratchFile{{Name: "Dockerfile", Mode: 0o644, Data: docker}, f} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.Name, Mode: e.Mode, Size: int64(len(e.Data))})
		tw.Write(e.Data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &b, client.ImageBuildOptions{Tags: []string{ref}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("building %s: %v", ref, err)
	}
	out, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || bytes.Contains(out, []byte(`"errorDetail"`)) {
		t.Fatalf("building %s: %v\n%s", ref, err, out)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		t.Fatalf("building %s: %v\n%s", ref, err, out)
	}
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
