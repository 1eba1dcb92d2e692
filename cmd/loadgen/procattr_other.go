//go:build !linux

package main

import "syscall"

// sysProcAttr returns no attributes: only Linux can tie a child's life to
// its parent's.
func sysProcAttr() *syscall.SysProcAttr { return nil }
