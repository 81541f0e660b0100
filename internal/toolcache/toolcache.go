// Package toolcache finds the programs that the .ci/build-* scripts build
// outside the repository for the tests (kube-apiserver and etcd,
// versitygw): in a directory of qshare's own under the user's cache
// directory, unless an environment variable names the place.
package toolcache

import (
	"os"
	"path/filepath"
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
