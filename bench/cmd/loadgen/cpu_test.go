package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 50 ticks; the command
	// name holds a space and a parenthesis.
	stat := "1234 (redis (x) 1) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 5 0 100 1000000 500 18446744073709551615"
	d, err := parseProcStat(stat)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d)

	_, err = parseProcStat("1234 no name")
	assert.Error(t, err)
	_, err = parseProcStat("1234 (short) S 1 2")
	assert.Error(t, err)
}

func TestCPUPerDecision(t *testing.T) {
	before := map[string]time.Duration{cpuLoadgen: time.Second, cpuServer: 0}
	after := map[string]time.Duration{cpuLoadgen: 2 * time.Second, cpuServer: 500 * time.Millisecond}
	per := cpuPerDecision(before, after, 10_000)
	assert.InDelta(t, 100.0, per[cpuLoadgen], 1e-9)
	assert.InDelta(t, 50.0, per[cpuServer], 1e-9)
	assert.Nil(t, cpuPerDecision(before, after, 0))
}

func TestCPUMeterReadsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	m := newCPUMeter()
	before, err := m.read()
	require.NoError(t, err)
	// Burn some CPU; the meter must see it.
	deadline := time.Now().Add(100 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after, err := m.read()
	require.NoError(t, err)
	assert.Greater(t, after[cpuLoadgen], before[cpuLoadgen], "%d loops", x)
}
