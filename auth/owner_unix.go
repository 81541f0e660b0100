//go:build unix

package auth

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a file owned by a user other than the server's and
// root: whoever owns the auth file can grant themselves anything.
func checkOwner(st os.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := int(sys.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("it is owned by uid %d, neither the server's user (uid %d) nor root, and whoever owns it can grant themselves anything: chown it to the server's user", uid, os.Geteuid())
	}
	return nil
}
