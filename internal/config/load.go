package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultReadTimeout bounds how long Load, and a Watcher whose options set
// no ReadTimeout, wait for the files to be read.
const DefaultReadTimeout = 10 * time.Second

// Load reads the configuration at path and parses it with Parse. path is a
// file, or a directory whose *.yaml and *.yml files are all read, in name
// order. Inside a directory, names starting with '.' are skipped (Kubernetes
// ConfigMap mounts keep their real files under such names, ..data and
// ..2026_01_01_…, and expose them through symlinks), symlinks are followed,
// and subdirectories are not entered. A directory without YAML files is an
// error, as is a path that cannot be read, and a file to be read that is not
// a regular file (a named pipe, a device or a socket, whose reads may never
// end).
//
// Load gives up waiting for the files after DefaultReadTimeout; use
// LoadContext to choose the bound.
//
// Every error Load returns is an *Error; errors.Is(err, fs.ErrNotExist)
// reports a missing path. Load is safe for concurrent use.
func Load(path string, opts Options) (*Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultReadTimeout)
	defer cancel()
	return LoadContext(ctx, path, opts)
}

// LoadContext is Load that waits for the files only until ctx ends: a read
// that hangs (a stuck network volume) then fails with an *Error naming the
// file being read and wrapping ctx's error, and goes on in the background
// until the operating system gives it up.
func LoadContext(ctx context.Context, path string, opts Options) (*Config, error) {
	r := startRead(path)
	files, err := r.wait(ctx)
	if err != nil {
		return nil, err
	}
	return Parse(files, opts)
}

// read is one reading of the files at a path, in a goroutine of its own,
// so that a caller can stop waiting for a read that hangs. It is safe for
// concurrent use.
type read struct {
	path  string
	done  chan struct{} // closed when the goroutine has finished
	files []File
	err   error

	mu      sync.Mutex
	current string // the file being read
}

// startRead starts reading the files at path.
func startRead(path string) *read {
	r := &read{path: path, done: make(chan struct{}), current: path}
	go func() {
		defer close(r.done)
		r.files, r.err = readFiles(path, r.reading)
	}()
	return r
}

// reading records the file being read.
func (r *read) reading(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = name
}

// finished reports whether the read has returned.
func (r *read) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait returns the read's outcome, or an *Error naming the file still
// being read when ctx ends first.
func (r *read) wait(ctx context.Context) ([]File, error) {
	select {
	case <-r.done:
		return r.files, r.err
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return nil, r.hungError(ctx.Err())
}

// hungError is the error of a read still under way; r.mu must be held.
func (r *read) hungError(cause error) *Error {
	why := "gave up waiting for the read"
	if errors.Is(cause, context.DeadlineExceeded) {
		why = "the read did not finish in time"
	}
	return &Error{File: r.current, Msg: "cannot read: " + why + " (a hung volume?)", Err: cause}
}

// readFiles reads the files that Load parses, telling reading the name of
// each before it is opened. Its errors are *Error.
func readFiles(path string, reading func(name string)) ([]File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	if !info.IsDir() {
		data, err := readRegular(path, info, reading)
		if err != nil {
			return nil, err
		}
		return []File{{Name: path, Data: data}}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	var files []File
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		full := filepath.Join(path, name)
		info, err := os.Stat(full)
		if err != nil {
			return nil, fileError(full, err)
		}
		if info.IsDir() {
			continue
		}
		data, err := readRegular(full, info, reading)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: full, Data: data})
	}
	if len(files) == 0 {
		return nil, &Error{File: path, Msg: "no *.yaml or *.yml files in directory"}
	}
	return files, nil
}

// readRegular reads the file name, which info describes, refusing any file
// that is not a regular file: reading a named pipe waits for a writer that
// may never come, and reading a device may never end. The file is checked
// again once open, in case it was replaced in between.
func readRegular(name string, info fs.FileInfo, reading func(string)) ([]byte, error) {
	if !info.Mode().IsRegular() {
		return nil, notRegular(name, info)
	}
	reading(name)
	f, err := os.Open(name)
	if err != nil {
		return nil, fileError(name, err)
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, fileError(name, err)
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(name, info)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fileError(name, err)
	}
	return data, nil
}

// notRegular is the error for a file that is not a regular file.
func notRegular(name string, info fs.FileInfo) *Error {
	kind := "not a regular file"
	switch m := info.Mode(); {
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return &Error{File: name, Msg: fmt.Sprintf("cannot read: %s, not a regular file", kind)}
}

// fileError returns an *Error for a file that could not be read.
func fileError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = fmt.Sprintf("cannot %s: %v", pe.Op, pe.Err)
	}
	return &Error{File: path, Msg: msg, Err: err}
}
