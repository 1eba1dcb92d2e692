package test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// promtoolInstall is how scripts/test installs promtool, Prometheus's own
// checker of rules files.
const promtoolInstall = "go install github.com/prometheus/prometheus/cmd/promtool@v0.316.0"

// TestRLQSAlertsFire runs promtool's unit tests of the alerts on the Rate
// Limit Quota Service (testdata/monitoring/rlqs-alerts.test.yaml): each
// fires, as Prometheus evaluates it, its for included, on the history it is
// for, with its labels and annotations, and not on histories that look like
// it but are fine.
func TestRLQSAlertsFire(t *testing.T) {
	promtoolTestRules(t, "rlqs-alerts.test.yaml")
}

// TestRedisAlertsFire runs promtool's unit tests of the alerts on the Redis
// that holds the counts (testdata/monitoring/redis-alerts.test.yaml), on
// histories of the Redis exporter's series: memory near maxmemory, or
// growing to it within 4 hours, maxmemory 0 (against the host's memory, or
// nothing), evictions, a master's CPU, a node down, a replica's link down,
// masters that lost replicas, a Cluster down or with slots unserved. Each
// fires on the history it is for, with its labels and annotations, and not
// on healthy histories: steady memory, a failover that completes, a
// replica that restarts, and another job's Redis (a cache) at its
// maxmemory, evicting.
func TestRedisAlertsFire(t *testing.T) {
	promtoolTestRules(t, "redis-alerts.test.yaml")
}

// promtoolTestRules runs promtool test rules on the file of
// testdata/monitoring, and fails with its output when a test fails.
func promtoolTestRules(t *testing.T, file string) {
	t.Helper()
	promtool := redistest.NeedProgramIn(t, pathWithGoBin(t), "promtool", promtoolInstall)
	cmd := exec.Command(promtool, "test", "rules", file)
	cmd.Dir = filepath.Join(repoRoot, "test", "testdata", "monitoring")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
}
