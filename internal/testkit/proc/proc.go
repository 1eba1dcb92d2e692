// Package proc starts and stops the processes that ratewarden's tests, its
// load generator and its docs tests run against: redis-server as a
// standalone server (StartRedis), a Redis Cluster (StartCluster), a
// Sentinel setup (StartSentinel), and the ratewarden server binary
// (StartServer), all on loopback addresses, with no Docker.
//
// Nothing is configured with a port picked beforehand where the kernel can
// pick one: the ratewarden server listens on port 0 and names its addresses
// in RLS_ADDR_FILE. redis-server cannot (port 0 turns its TCP listener off),
// so StartRedis reserves ports and, when one was taken before redis-server
// bound it, tries new ones; it is the only place that does.
//
// Every child is started with a parent-death signal (on Linux), so a program
// that crashes or is killed leaves no process behind. The package does not
// import testing: redistest adapts it to tests.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout bounds a graceful stop before the process is killed.
const stopTimeout = 10 * time.Second

// Command says what process to start.
type Command struct {
	// Name names the process in messages: "redis-server 127.0.0.1:6379".
	Name string
	// Bin and Args are the program and its arguments.
	Bin  string
	Args []string
	// Dir is the working directory; empty means the current one.
	Dir string
	// Env is the environment, as exec.Cmd takes it; nil means this
	// process's own.
	Env []string
}

// Process is a running child process whose output (stdout and stderr) is
// kept. Its methods are safe for concurrent use.
type Process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	out    lockedBuffer
}

// Start starts c. The process is killed with the program that started it.
func Start(c Command) (*Process, error) {
	p := &Process{name: c.Name, exited: make(chan struct{})}
	p.cmd = exec.Command(c.Bin, c.Args...)
	p.cmd.Dir = c.Dir
	p.cmd.Env = c.Env
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("proc: start %s: %w", c.Name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// String returns the process's name.
func (p *Process) String() string { return p.name }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitCode returns the process's exit code once it has exited (see
// os.ProcessState.ExitCode), and -1 before.
func (p *Process) ExitCode() int {
	if p.Running() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Output returns everything the process has written so far.
func (p *Process) Output() string { return p.out.String() }

// Tail returns the last n lines the process has written.
func (p *Process) Tail(n int) string { return lastLines(p.out.String(), n) }

// Signal sends sig to the process, unless it has exited.
func (p *Process) Signal(sig os.Signal) {
	if p.Running() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Stop sends SIGTERM (and SIGCONT, in case the process is stopped) and
// waits for the process to exit, killing it after 10 seconds. Stop does
// nothing when the process has exited.
func (p *Process) Stop() {
	p.Signal(syscall.SIGTERM)
	p.Signal(syscall.SIGCONT)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.Kill()
	}
}

// Kill kills the process with SIGKILL, as a crash would, and waits for it
// to exit.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// ErrNotInstalled reports that a program is not in PATH.
var ErrNotInstalled = errors.New("not installed")

// LookPath returns the path of the named program in PATH, or an error that
// wraps ErrNotInstalled and says how to install it: install is the
// command, such as "apt-get install redis-tools".
func LookPath(name, install string) (string, error) {
	return LookPathIn("", name, install)
}

// LookPathIn is LookPath looking in the directories that path lists, as
// PATH does, instead of PATH; an empty path means PATH.
func LookPathIn(path, name, install string) (string, error) {
	found, err := lookPath(path, name)
	if err != nil {
		return "", fmt.Errorf("proc: %s not found in PATH (install it: %s): %w: %w", name, install, ErrNotInstalled, err)
	}
	return found, nil
}

// lookPath is exec.LookPath, looking in the directories that path lists
// instead of PATH's when path is not empty.
func lookPath(path, name string) (string, error) {
	if path == "" || strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "." // as in a shell, an empty entry is the working directory
		}
		file := filepath.Join(dir, name)
		check := file
		if !strings.Contains(check, "/") {
			check = "./" + check // a name with a slash is checked alone
		}
		if _, err := exec.LookPath(check); err != nil {
			continue
		}
		if !filepath.IsAbs(file) {
			// exec.LookPath does not run a program that the working
			// directory happens to hold either.
			return file, &exec.Error{Name: name, Err: exec.ErrDot}
		}
		return file, nil
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// lastLines returns the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockedBuffer is a bytes.Buffer that a process may write while others
// read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
