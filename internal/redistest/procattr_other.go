//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns no special attributes: only Linux can tie a child's
// life to its parent's, so elsewhere only Main and test cleanups stop servers.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
