// Package filehold makes reads of a file hang, as reads on a stuck network
// volume do, for tests of code that must not wait for them forever.
package filehold

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Hold makes every open of path, by any process, block until the returned
// function is called or the test ends. It takes a write lease on the file
// (fcntl F_SETLEASE), and the kernel holds back any other opener until the
// lease is given up, or for /proc/sys/fs/lease-break-time (45 s by
// default). The file stays a regular file throughout. It needs to own the
// file (or CAP_LEASE), and fails the test when the lease cannot be had.
func Hold(t testing.TB, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("filehold: %v", err)
	}
	// No lease is granted while another open of the file is still being
	// closed (a reader that just finished): try for a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := lease(f, syscall.F_WRLCK)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Close()
			t.Fatalf("filehold: taking a write lease on %s: %v", path, err)
		}
		time.Sleep(time.Millisecond)
	}
	var released bool
	release = func() {
		if !released {
			released = true
			lease(f, syscall.F_UNLCK)
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}

func lease(f *os.File, how int) error {
	_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_SETLEASE, uintptr(how))
	if errno != 0 {
		return errno
	}
	return nil
}
