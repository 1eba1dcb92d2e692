//go:build linux

package proc

import "syscall"

// sysProcAttr makes the kernel kill a child when the program that started
// it dies, so a crashed or killed test run or bench leaves no process
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
