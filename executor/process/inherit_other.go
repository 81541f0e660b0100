//go:build !linux

package process

// CloseInheritedOnExec does nothing where the process executor does not
// run (it runs on Linux only): see the Linux build.
func CloseInheritedOnExec() {}
