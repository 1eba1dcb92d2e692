//go:build linux

package main

import "syscall"

// sysProcAttr makes the kernel kill a child when the load generator dies, so
// an interrupted bench leaves no redis-server or server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
