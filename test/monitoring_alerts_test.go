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
	promtool := redistest.NeedProgramIn(t, pathWithGoBin(t), "promtool", promtoolInstall)
	cmd := exec.Command(promtool, "test", "rules", "rlqs-alerts.test.yaml")
	cmd.Dir = filepath.Join(repoRoot, "test", "testdata", "monitoring")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
}
