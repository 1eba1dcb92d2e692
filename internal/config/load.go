package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoConfig is wrapped by the error of Load, and of a Watcher's Check,
// when the path holds nothing to load: it does not exist, or it is a
// directory without files. errors.Is(err, fs.ErrNotExist) tells the first
// case apart.
var ErrNoConfig = errors.New("config: no configuration files")

// Load reads the configuration at path and parses it with Parse. path is a
// file, or a directory whose files are all read, in its subdirectories too,
// as envoyproxy/ratelimit reads its runtime directory: every regular file,
// whatever its name ends with, in lexical order of its path. Names starting
// with '.' are skipped, files and directories, unless opts.DotFiles
// (Kubernetes ConfigMap volumes keep their real files under such names,
// ..data and ..2026_01_01_…, and expose them through symlinks). Symlinks to
// files are followed, symlinks to directories are not, and other files
// (sockets, devices) are skipped.
//
// Every error Load returns is an *Error. A path that does not exist, and a
// directory without files, are errors that wrap ErrNoConfig; the first also
// wraps fs.ErrNotExist. Load is safe for concurrent use.
func Load(path string, opts Options) (*Config, error) {
	s := scan(path, opts.DotFiles)
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

// scan reads the files that Load parses.
func scan(path string, dotFiles bool) scanned {
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
		data, err := os.ReadFile(path)
		if err != nil {
			s.err = fileError(path, err)
			return s
		}
		s.files = []File{{Name: path, Data: data}}
		return s
	}
	var s scanned
	walkErr := filepath.WalkDir(path, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			if s.err == nil {
				s.err = fileError(full, err)
			}
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if full != path && !dotFiles && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
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
		case !info.Mode().IsRegular():
			return nil
		}
		data, err := os.ReadFile(full)
		if err != nil {
			if s.err == nil {
				s.err = fileError(full, err)
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

// fileError returns an *Error for a file that could not be read.
func fileError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = fmt.Sprintf("cannot %s: %v", pe.Op, pe.Err)
	}
	return &Error{File: path, Msg: msg, Err: err}
}
