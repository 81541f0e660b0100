//go:build !linux

package process

import "errors"

// becomeSubreaper fails: child subreapers, like /proc, are Linux's.
func becomeSubreaper() error { return errors.New("the process executor runs on Linux only") }
