// Package freeport finds free loopback TCP ports for the test harnesses
// that start real servers (PostgreSQL, Slurm, the Kubernetes control plane,
// Kueue) on ports of their own.
//
// A port is chosen some time before its server binds it: etcd starts, a
// database is created, configuration is written. Two things can take the
// port in between, and each has made a CI run fail:
//
//   - the kernel, which gives every listen on port 0 and every outgoing
//     connection a port from its ephemeral range, and the tests beside
//     this one make thousands of both. So ports are chosen below that
//     range (ip_local_port_range), where the kernel gives out none.
//   - another harness, in this process or another test binary, choosing
//     the same port. So each chosen port is reserved for the life of the
//     process with a lock on a file named after it, in a directory that
//     every qshare test binary of the same user on the machine shares; a
//     port locked by a live process, or chosen before in this one, is not
//     chosen again.
//
// Where the ephemeral range cannot be read or leaves too little room below
// it, or the lock directory cannot be made (or is not a directory of this
// user's alone: another user may have made the name first, a link
// included), the kernel's choice (port 0) is used, as before.
package freeport

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// low is the lowest port chosen; below it lie many services' defaults.
const low = 15000

var (
	mu    sync.Mutex
	taken = map[int]*os.File{} // ports chosen by this process, with their locks
)

// Ports returns n distinct loopback TCP ports that were free a moment ago
// and that no other caller of Ports, in this process or a live other one,
// has been given.
func Ports(n int) ([]int, error) {
	hi, ok := ephemeralLow()
	if !ok || hi-low < 1000 {
		return kernelPorts(n)
	}
	dir := filepath.Join(os.TempDir(), "qshare-ports-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return kernelPorts(n)
	}
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
		return kernelPorts(n)
	}
	return choose(n, low, hi, dir)
}

// choose returns n ports from [lo, hi) that it could lock in dir and bind.
func choose(n, lo, hi int, dir string) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			for _, p := range ports {
				taken[p].Close()
				delete(taken, p)
			}
			return nil, fmt.Errorf("free port: none found in %d tries between %d and %d", tries, lo, hi-1)
		}
		p := lo + rand.IntN(hi-lo)
		if _, mine := taken[p]; mine {
			continue
		}
		f, ok := lock(dir, p)
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil { // in use by something that is not ours
			f.Close()
			continue
		}
		l.Close()
		taken[p] = f // held open, and so locked, until the process exits
		ports = append(ports, p)
	}
	return ports, nil
}

// lock takes an exclusive lock on the file of port p without waiting.
func lock(dir string, p int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil
}

// kernelPorts lets the kernel choose: each port is held open until all n
// are chosen, so none is returned twice.
func kernelPorts(n int) ([]int, error) {
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
