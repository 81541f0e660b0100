package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	moby "github.com/moby/moby/client"

	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/internal/transcript"
)

// containerBlock reports whether a README block is the tour's container
// step: its first command starts a server with --executor container.
// TestDocExamples leaves it to TestReadmeContainer.
func containerBlock(b block) bool {
	cs := commands(b.text)
	return len(cs) > 0 && strings.HasPrefix(cs[0].line, "./qshare serve --executor container")
}

// TestReadmeContainer runs the README's container step against a server
// with --executor container on this machine's Docker Engine (skipped where
// none answers): every ./qshare line but serve, against the test's server
// (the lines' --endpoint aside), and what the block shows after a line must
// be what it prints. `docker pull` is not run (no registry is reachable
// here): where the engine lacks the README's image, the submit line gets
// instead an image imported from the host's static busybox (Debian's
// busybox-static), and the test skips where there is none.
func TestReadmeContainer(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	var blk *block
	for _, b := range fencedBlocks(t, filepath.Join(root, "README.md")) {
		if b.lang == "console" && containerBlock(b) {
			blk = &b
			break
		}
	}
	if blk == nil {
		t.Fatal("README.md has no console block that starts `./qshare serve --executor container`")
	}
	const readmeImage = "busybox"
	img := readmeImage
	cli, err := moby.New(moby.WithHost(host), moby.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, readmeImage); err != nil {
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			t.Skipf("the engine has no %s image and this host no /bin/busybox to make one of (apt-get install busybox-static): %v", readmeImage, err)
		}
		sum := sha256.Sum256(bb)
		img = "localhost/qshare-readme-busybox:" + hex.EncodeToString(sum[:6])
		if err := container.ImportScratch(ctx, cli, img, []container.ScratchFile{{Name: "bin/sh", Mode: 0o755, Data: bb}}); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, "--executor", "container", "--container-host", host, "--pull", "never")
	ran := 0
	for _, c := range commands(blk.text) {
		rest, ok := strings.CutPrefix(c.line, "./qshare ")
		if !ok || strings.HasPrefix(rest, "serve ") {
			continue
		}
		var args []string
		words := unquote(t, rest)
		for i := 0; i < len(words); i++ {
			switch {
			case words[i] == "--endpoint" && i+1 < len(words):
				i++ // the test's server, through the environment
			case words[i] == readmeImage && i > 0 && words[i-1] == "--image":
				args = append(args, img)
			default:
				args = append(args, words[i])
			}
		}
		out := e.OK(args...)
		ran++
		if c.output != "" && transcript.Normalize(out) != transcript.Normalize(c.output) {
			t.Errorf("README.md:%d: %s printed\n%s\nbut the README shows\n%s", blk.line, c.line, out, c.output)
		}
	}
	if ran < 3 {
		t.Errorf("README.md:%d: ran %d qshare commands of the container step, want apply, submit and logs", blk.line, ran)
	}
	if left := containertest.Leftovers(t, host, filepath.Join(e.Dir, "data")); len(left) > 0 {
		t.Logf("containers still there at the end (removed as the server stops): %v", left)
	}
}
