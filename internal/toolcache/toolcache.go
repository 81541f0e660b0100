// Package toolcache finds the programs that the .ci/build-* scripts build
// outside the repository for the tests (kube-apiserver and etcd,
// versitygw, SeaweedFS, the image registry): in a directory of qshare's
// own under the user's cache directory, unless an environment variable
// names the place; starts such a server with its output kept
// (StartProcess, StartOnPorts); and waits for one that the caller started
// to answer HTTP.
package toolcache

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Path returns $env where it is set, else the path elem below qshare's
// cache directory ($XDG_CACHE_HOME, or ~/.cache, then qshare), as the
// build scripts compute it.
func Path(env string, elem ...string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(append([]string{cache, "qshare"}, elem...)...)
}

// Tool is a program that a .ci/build-* script builds.
type Tool struct {
	// Name is what the program is called in messages.
	Name string
	// Env is the environment variable that names its path instead.
	Env string
	// Script is the build script's name in .ci.
	Script string
	// Elem is its path below qshare's cache directory.
	Elem []string
}

// Path returns where the program is (Path of its Env and Elem).
func (t Tool) Path() string { return Path(t.Env, t.Elem...) }

// Available returns nil where the program is there, and otherwise an
// error that says how to build it.
func (t Tool) Available() error {
	if _, err := os.Stat(t.Path()); err != nil {
		return fmt.Errorf("%s is not built (%s): run .ci/%s, or set %s", t.Name, t.Path(), t.Script, t.Env)
	}
	return nil
}

// AwaitHTTP waits, for a minute at most, until a program that the build
// scripts built (name, in messages), started by the caller, answers a GET
// of url with a status that up accepts, or has exited (done closed). log
// returns what it printed, for the error.
func AwaitHTTP(ctx context.Context, name, url string, done <-chan struct{}, log func() string, up func(status int) bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited before it answered:\n%s", name, log())
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer at %s: %w\n%s", name, url, ctx.Err(), log())
		case <-time.After(100 * time.Millisecond):
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if up(resp.StatusCode) {
				return nil
			}
		}
	}
}
