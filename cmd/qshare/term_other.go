//go:build !unix

package main

import "os"

// terminalWidth returns 0: the width of a terminal is asked only on Unix,
// and the caller then assumes a default.
func terminalWidth(*os.File) int { return 0 }
