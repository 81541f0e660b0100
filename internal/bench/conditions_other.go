//go:build !linux

package bench

// FileSystem returns "": the file system is named on Linux only.
func FileSystem(string) string { return "" }
