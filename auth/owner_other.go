//go:build !unix

package auth

import "os"

// checkOwner cannot learn a file's owner on this system.
func checkOwner(os.FileInfo) error { return nil }
