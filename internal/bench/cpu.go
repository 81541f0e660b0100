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
func parseStatCPU(stat string) (time.Duration, error) { return parseStatFields(stat, 11, 13) }

// parseStatFields sums the clock ticks of /proc/PID/stat's fields from+3
// to to+2 (f[from:to] of the fields after the command name) as a duration.
func parseStatFields(stat string, from, to int) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat without a command name: %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < to {
		return 0, fmt.Errorf("bench: /proc stat with %d fields after the command name", len(f))
	}
	var ticks int64
	for _, s := range f[from:to] {
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

// treeCPU returns the CPU time (user and system) that process pid and its
// descendants have used: each one's own and that of the children it has
// reaped (/proc/PID/stat fields 14 to 17), found through
// /proc/PID/task/*/children. The process executor's supervisor is the
// server's child and reaps the jobs, so the server's tree holds every
// cycle a job costs the machine. A process that ended and was not reaped
// by one of them is missed.
func treeCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	total, err := parseStatFields(string(data), 11, 15)
	if err != nil {
		return 0, err
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, k := range strings.Fields(string(kids)) {
			if c, err := strconv.Atoi(k); err == nil {
				if d, err := treeCPU(c); err == nil { // it may have ended meanwhile
					total += d
				}
			}
		}
	}
	return total, nil
}
