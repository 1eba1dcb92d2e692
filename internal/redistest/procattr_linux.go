//go:build linux

package redistest

import "syscall"

// sysProcAttr makes the kernel kill a server when the test binary dies, so a
// crashed or killed test run leaves no process behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
