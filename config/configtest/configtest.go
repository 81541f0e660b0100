// Package configtest holds the tests' helpers for package config.
package configtest

import (
	"os"
	"testing"

	"qshare/config"
)

// Load reads and parses the configuration file at path with the default
// options, failing t if it cannot be read or is not valid.
func Load(t testing.TB, path string) *config.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Parse(path, data, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
