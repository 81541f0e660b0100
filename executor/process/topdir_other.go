//go:build !linux

package process

import "errors"

// markTopDir fails: the attribute is Linux's (ext3, ext4).
func markTopDir(dir string) error { return errors.New("no top-directory attribute here") }
