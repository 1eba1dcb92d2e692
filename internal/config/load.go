package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Load reads the configuration at path and parses it with Parse. path is a
// file, or a directory whose *.yaml and *.yml files are all read, in name
// order. Inside a directory, names starting with '.' are skipped (Kubernetes
// ConfigMap mounts keep their real files under such names, ..data and
// ..2026_01_01_…, and expose them through symlinks), symlinks are followed,
// and subdirectories are not entered. A directory without YAML files is an
// error, as is a path that cannot be read.
//
// Every error Load returns is an *Error; errors.Is(err, fs.ErrNotExist)
// reports a missing path. Load is safe for concurrent use.
func Load(path string, opts Options) (*Config, error) {
	files, err := readFiles(path)
	if err != nil {
		return nil, err
	}
	return Parse(files, opts)
}

// readFiles reads the files that Load parses. Its errors are *Error.
func readFiles(path string) ([]File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	if !info.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fileError(path, err)
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
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fileError(full, err)
		}
		files = append(files, File{Name: full, Data: data})
	}
	if len(files) == 0 {
		return nil, &Error{File: path, Msg: "no *.yaml or *.yml files in directory"}
	}
	return files, nil
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
