package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// machine describes where a bench ran.
type machine struct {
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	Memory     string `json:"memory"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	Redis      string `json:"redis"`
	Commit     string `json:"commit"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

// describeMachine gathers what it can; what it cannot read stays "unknown".
func describeMachine(ctx context.Context, root string, redis *proc.Redis) machine {
	m := machine{
		CPU:    "unknown",
		CPUs:   runtime.NumCPU(),
		Memory: "unknown",
		Kernel: runtime.GOOS + "/" + runtime.GOARCH,
		Go:     runtime.Version(),
		Redis:  "unknown",
		Commit: "unknown",
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if v := procField(string(b), "model name"); v != "" {
			m.CPU = v
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if v := procField(string(b), "MemTotal"); v != "" {
			var kb int64
			if _, err := fmt.Sscanf(v, "%d kB", &kb); err == nil {
				m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b)) + " " + runtime.GOARCH
	}
	m.LoadBefore = loadAverage()
	if redis != nil {
		if info, err := redis.Info(ctx, "server"); err == nil && info["redis_version"] != "" {
			m.Redis = info["redis_version"]
		}
	}
	m.Commit = gitDescribe(ctx, root)
	return m
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "name : value" line of a /proc
// file.
func procField(text, name string) string {
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
