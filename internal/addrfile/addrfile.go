// Package addrfile writes and reads the file in which a server names the
// addresses its listeners are bound to (RLS_ADDR_FILE). A server told to
// listen on port 0 gets a port from the kernel; whoever started it reads the
// port here instead of picking one beforehand and hoping it stays free.
//
// The file is a JSON object from listener name ("grpc", "http", "metrics",
// "debug") to "host:port". Write replaces it whole, so a reader sees either
// no file or a complete one.
package addrfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Names of the listeners a ratewarden server reports.
const (
	GRPC    = "grpc"
	HTTP    = "http"
	Metrics = "metrics"
	Debug   = "debug"
)

// Addrs maps a listener's name to the address it is bound to. A listener
// that is not bound has no entry.
type Addrs map[string]string

// Write writes addrs to path: into a temporary file in the same directory,
// renamed over path, so that no reader sees half of it.
func Write(path string, addrs Addrs) error {
	data, err := json.Marshal(addrs)
	if err != nil {
		return fmt.Errorf("addrfile: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("addrfile: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("addrfile: %w", err)
	}
	return nil
}

// ErrNotWritten reports that the file does not exist yet.
var ErrNotWritten = errors.New("addrfile: not written yet")

// Read reads the addresses Write wrote to path. It returns ErrNotWritten
// when there is no file yet.
func Read(path string) (Addrs, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotWritten
	}
	if err != nil {
		return nil, fmt.Errorf("addrfile: %w", err)
	}
	var addrs Addrs
	if err := json.Unmarshal(data, &addrs); err != nil {
		return nil, fmt.Errorf("addrfile: %s: %w", path, err)
	}
	return addrs, nil
}
