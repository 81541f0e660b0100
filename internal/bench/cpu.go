package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/PID/stat's utime and stime (USER_HZ,
// which Linux fixes at 100 for user space).
const clockTick = 10 * time.Millisecond

// selfCPU returns the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns the CPU time (user and system) that process pid has
// used, from /proc/PID/stat, to the clock tick.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may
// hold spaces or parentheses itself, so fields are counted from the last
// ")".
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat without a command name: %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat with %d fields after the command name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// cpuMeter samples the CPU used by the harness and, when it is a child
// process, by the server, so that a result can say how the machine's time
// was split between them.
type cpuMeter struct {
	srv                *Server
	harness0, harness1 time.Duration
	server0, server1   time.Duration
	serverOK           bool
}

func startCPU(srv *Server) *cpuMeter {
	m := &cpuMeter{srv: srv, harness0: selfCPU()}
	if srv != nil {
		if t, err := processCPU(srv.Pid()); err == nil {
			m.server0, m.serverOK = t, true
		}
	}
	return m
}

// stop ends the interval.
func (m *cpuMeter) stop() {
	m.harness1 = selfCPU()
	if m.serverOK {
		t, err := processCPU(m.srv.Pid())
		m.server1, m.serverOK = t, err == nil
	}
}

// harness is the harness's CPU over the interval.
func (m *cpuMeter) harness() time.Duration { return m.harness1 - m.harness0 }

// server is the server's CPU over the interval, and whether it is known
// (only for a server the harness started as a child process).
func (m *cpuMeter) server() (time.Duration, bool) { return m.server1 - m.server0, m.serverOK }
