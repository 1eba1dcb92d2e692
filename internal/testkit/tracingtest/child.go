package tracingtest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// childVar names, in a child process that RunChild started, the test it
// runs.
const childVar = "RATEWARDEN_TEST_CHILD"

// IsChild reports whether this process is the child that RunChild started
// to run t.
func IsChild(t *testing.T) bool { return os.Getenv(childVar) == t.Name() }

// RunChild runs the calling test again, alone, in a child process of the
// test binary whose environment adds env (NAME=value), and fails t when the
// child fails; there IsChild reports true, and the test does what needs
// env. It is for code that reads the process's environment and nothing
// else, as the OpenTelemetry SDK reads its OTEL_* variables: a test gives
// the child its variables instead of changing the environment of the tests
// beside it.
func RunChild(t *testing.T, env ...string) {
	t.Helper()
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command(os.Args[0], "-test.run", strings.Join(run, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), env...), childVar+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test in a child process with %v: %v\n%s", env, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the child process ran no test %s:\n%s", t.Name(), out)
	}
}
