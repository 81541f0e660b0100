// Package freeport finds free loopback TCP ports for the test harnesses
// that start real servers (PostgreSQL, Slurm, the Kubernetes control plane,
// Kueue) on ports of their own.
package freeport

import (
	"fmt"
	"net"
)

// Ports returns n distinct loopback TCP ports that were free a moment ago:
// each is held open until all n are chosen, so none is returned twice.
func Ports(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
