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
)

// ErrNoConfig is wrapped by the error of LoadContext, and of a Watcher's Check,
// when the path holds nothing to load: it does not exist, or it is a
// directory without files. errors.Is(err, fs.ErrNotExist) tells the first
// case apart.
var ErrNoConfig = errors.New("config: no configuration files")

// LoadContext reads the configuration at path and parses it with Parse,
// waiting for the files only until ctx ends. path is a file, or a directory
// whose files are all read, in its subdirectories too, as
// envoyproxy/ratelimit reads its runtime directory: every file, whatever its
// name ends with, in lexical order of its path. Names starting with '.' are
// skipped, files and directories, unless opts.DotFiles (Kubernetes ConfigMap
// volumes keep their real files under such names, ..data and
// ..2026_01_01_…, and expose them through symlinks). Symlinks to files are
// followed, symlinks to directories are not. A file to be read that is not a
// regular file (a named pipe, a device or a socket, whose reads may never
// end) is an error naming it.
//
// A read that hangs (a stuck network volume) fails when ctx ends, with an
// *Error naming the file being read and wrapping ctx's error, and goes on
// in the background until the operating system gives it up.
//
// The files may hold opts.MaxBytes together (no bound when it is 0); past
// that, LoadContext fails with an *Error naming the
// file that went past it, without parsing any.
//
// Every error LoadContext returns is an *Error. A path that does not exist,
// and a directory without files, are errors that wrap ErrNoConfig; the
// first also wraps fs.ErrNotExist. LoadContext is safe for concurrent use.
func LoadContext(ctx context.Context, path string, opts Options) (*Config, error) {
	s := startRead(path, opts).wait(ctx)
	if s.err != nil {
		return nil, s.err
	}
	return Parse(s.files, opts)
}

// scanned is what scan found at a path.
type scanned struct {
	files []File
	err   error // an *Error; the files are incomplete then
	// dirs are the directories whose changes may change the files: the
	// path and its subdirectories when it is a directory, the directory of
	// the path when it is a file, and the nearest existing ancestor when
	// the path does not exist.
	dirs []string
	// file is the base name of the path when it is a file.
	file string
	// missing reports that the path does not exist.
	missing bool
}

// read is one scan of a path, in a goroutine of its own, so that a caller
// can stop waiting for a read that hangs. It is safe for concurrent use.
type read struct {
	done chan struct{} // closed when the goroutine has finished
	s    scanned

	mu      sync.Mutex
	current string // the file being read
}

// startRead starts scanning path as opts say.
func startRead(path string, opts Options) *read {
	r := &read{done: make(chan struct{}), current: path}
	go func() {
		defer close(r.done)
		r.s = scan(path, opts.DotFiles, opts.maxBytes(), r.reading)
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

// wait returns what the scan found, or, when ctx ends first, a scanned
// whose error is an *Error naming the file still being read.
func (r *read) wait(ctx context.Context) scanned {
	select {
	case <-r.done:
		return r.s
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return scanned{err: r.hungError(ctx.Err())}
}

// hungError is the error of a read still under way; r.mu must be held.
func (r *read) hungError(cause error) *Error {
	why := "gave up waiting for the read"
	if errors.Is(cause, context.DeadlineExceeded) {
		why = "the read did not finish in time"
	}
	return &Error{File: r.current, Msg: "cannot read: " + why + " (a hung volume?)", Err: cause}
}

// scan reads the files that LoadContext parses, telling reading the name of each
// before it is opened, and fails once they hold more than maxBytes.
func scan(path string, dotFiles bool, maxBytes int64, reading func(name string)) scanned {
	budget := &readBudget{max: maxBytes}
	info, err := os.Stat(path)
	if err != nil {
		s := scanned{err: fileError(path, err)}
		if errors.Is(err, fs.ErrNotExist) {
			s.missing = true
			s.err.(*Error).Err = fmt.Errorf("%w: %w", ErrNoConfig, err)
			if dir := existingAncestor(path); dir != "" {
				s.dirs = []string{dir}
			}
		}
		return s
	}
	if !info.IsDir() {
		s := scanned{dirs: []string{filepath.Dir(path)}, file: filepath.Base(path)}
		data, err := readRegular(path, info, budget, reading)
		if err != nil {
			s.err = err
			return s
		}
		s.files = []File{{Name: path, Data: data}}
		return s
	}
	var s scanned
	root := path
	if l, err := os.Lstat(path); err == nil && l.Mode()&fs.ModeSymlink != 0 {
		// A path that is a symlink to a directory is read as the
		// directory: WalkDir would not enter it. Its files keep the
		// path's name (Join cleans the separator away).
		root = path + string(filepath.Separator)
	}
	walkErr := filepath.WalkDir(root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			if s.err == nil {
				s.err = fileError(full, err)
			}
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if full != root && !dotFiles && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if full == root {
				full = path
			}
			s.dirs = append(s.dirs, full)
			return nil
		}
		info, err := os.Stat(full) // follows a symlink
		switch {
		case err != nil:
			if s.err == nil {
				s.err = fileError(full, err)
			}
			return nil
		case info.IsDir():
			// A symlink to a directory, which is not entered.
			return nil
		}
		data, err := readRegular(full, info, budget, reading)
		if err != nil {
			if s.err == nil {
				s.err = err
			}
			return nil
		}
		s.files = append(s.files, File{Name: full, Data: data})
		return nil
	})
	if walkErr != nil && s.err == nil {
		s.err = fileError(path, walkErr)
	}
	if s.err == nil && len(s.files) == 0 {
		s.err = &Error{File: path, Msg: "no configuration files in directory", Err: ErrNoConfig}
	}
	return s
}

// existingAncestor returns the nearest directory above path that exists, ""
// when there is none.
func existingAncestor(path string) string {
	dir := filepath.Clean(path)
	for {
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			return dir
		}
	}
}

// readBudget counts the bytes of the files read, up to max.
type readBudget struct {
	max, read int64
}

// tooMuch returns the error for the file name, with which the files would
// hold size bytes.
func (b *readBudget) tooMuch(name string, size int64) *Error {
	return &Error{File: name, Msg: fmt.Sprintf("cannot read: the limits files hold %d bytes up to this one, more than the %d they may hold (RLS_CONFIG_MAX_BYTES)", size, b.max)}
}

// readRegular reads the file name, which info describes, refusing any file
// that is not a regular file: reading a named pipe waits for a writer that
// may never come, and reading a device may never end. The file is checked
// again once open, in case it was replaced in between. The bytes read are
// taken from budget: a file that would exceed it is not read, and one that
// grows past it while it is read is an error.
func readRegular(name string, info fs.FileInfo, budget *readBudget, reading func(string)) ([]byte, error) {
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
	left := budget.max - budget.read
	if info.Size() > left {
		return nil, budget.tooMuch(name, budget.read+info.Size())
	}
	// Room for the file as it is, and a byte to see it has not grown.
	data := make([]byte, 0, info.Size()+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if int64(len(data)) > left {
			return nil, budget.tooMuch(name, budget.read+int64(len(data)))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fileError(name, err)
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
	budget.read += int64(len(data))
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
