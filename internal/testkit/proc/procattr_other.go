//go:build !linux

package proc

import "syscall"

// sysProcAttr returns no special attributes: only Linux can tie a child's
// life to its parent's, so elsewhere only Close and Stop end them.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
