package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSDKExample runs examples/sdk, the AWS SDK for Go program that the
// README quotes, against a real server, and checks that every line of the
// README's Go excerpt is in that program, in order, so the excerpt cannot
// drift from code that runs.
func TestSDKExample(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exe := filepath.Join(t.TempDir(), "sdk")
	build := exec.Command("go", "build", "-o", exe, "./examples/sdk")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/sdk: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "-endpoint", e.Srv.Endpoint).CombinedOutput()
	if err != nil {
		t.Fatalf("examples/sdk: %v\n%s", err, out)
	}
	if want := "submitted hello\njob hello ended SUCCEEDED\n"; string(out) != want {
		t.Fatalf("examples/sdk printed\n%s\nwant\n%s", out, want)
	}

	src, err := os.ReadFile(filepath.Join(root, "examples/sdk/main.go"))
	if err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(root, "README.md")
	var excerpts int
	for _, b := range fencedBlocks(t, readme) {
		if b.lang != "go" {
			continue
		}
		excerpts++
		rest := string(src)
		for _, line := range strings.Split(b.text, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line == "// ..." {
				continue
			}
			i := strings.Index(rest, line)
			if i < 0 {
				t.Errorf("README.md:%d: the Go excerpt's line %q is not in examples/sdk/main.go (in this order)", b.line, line)
				break
			}
			rest = rest[i+len(line):]
		}
	}
	if excerpts == 0 {
		t.Error("README.md has no Go excerpt of examples/sdk")
	}
}
