package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ),
// which Linux fixes at 100 a second for every program.
const clockTicks = 100

// The names under which the bench reports the CPU of its processes.
const (
	cpuLoadgen = "loadgen"
	cpuServer  = "server"
	cpuRedis   = "redis"
)

// cpuMeter reads the CPU time (user and system) that named groups of
// processes have used, from /proc. It works on Linux only; elsewhere read
// fails. It is safe for concurrent use.
type cpuMeter struct {
	procs []cpuProc
}

// cpuProc is one process of a named group; pid 0 means this process.
type cpuProc struct {
	name string
	pid  int
}

// newCPUMeter returns a meter of the load generator itself and of the given
// processes.
func newCPUMeter(procs ...cpuProc) *cpuMeter {
	return &cpuMeter{procs: append([]cpuProc{{name: cpuLoadgen}}, procs...)}
}

// read returns the CPU time used so far by each group.
func (m *cpuMeter) read() (map[string]time.Duration, error) {
	used := map[string]time.Duration{}
	for _, p := range m.procs {
		pid := p.pid
		if pid == 0 {
			pid = os.Getpid()
		}
		d, err := processCPU(pid)
		if err != nil {
			return nil, err
		}
		used[p.name] += d
	}
	return used, nil
}

// processCPU returns the user and system CPU time process pid has used, all
// its threads together.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("loadgen: %w", err)
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15) from the text of
// /proc/<pid>/stat. The command name (field 2) is in parentheses and may hold
// spaces, so fields are counted after its closing parenthesis.
func parseProcStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("loadgen: /proc stat without a command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, errors.New("loadgen: /proc stat too short")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("loadgen: /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuPerDecision divides the CPU each group used between before and after
// by the decisions, in microseconds.
func cpuPerDecision(before, after map[string]time.Duration, decisions uint64) map[string]float64 {
	if decisions == 0 {
		return nil
	}
	per := map[string]float64{}
	for name, a := range after {
		per[name] = micros(a-before[name]) / float64(decisions)
	}
	return per
}
