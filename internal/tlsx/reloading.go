package tlsx

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// recheckEvery is how often the TLS files are looked at again: at most once
// per interval, when a handshake needs them.
const recheckEvery = time.Second

// File is a file TLS is read from, and the environment variable that
// names it, which its errors name.
type File struct{ Var, Path string }

// reloading is a value parsed from files, parsed again when what they hold
// changes. It reads them at most once per recheckEvery, when its value is
// asked for; comparing contents rather than modification times, it sees
// every change, however soon after the last one it is made. When the files
// fail to read or parse, the value in hand stays, and the failure is logged
// once for each change of the files. Neither the files' contents nor the
// value are ever logged. It is safe for concurrent use.
type reloading[T any] struct {
	what     string
	files    []File
	parse    func(data [][]byte) (T, error)
	describe func(T) []any // what to log about a new value; nil for nothing
	log      *slog.Logger

	mu      sync.Mutex
	value   T
	sum     [sha256.Size]byte // of the contents last read
	checked time.Time         // when the files were last read
	lastErr string            // the failure last logged; "" after a success
}

// newReloading reads and parses the files at now. Its errors name the
// variable of the file at fault, or of every file when parsing fails.
func newReloading[T any](what string, files []File, parse func([][]byte) (T, error), describe func(T) []any, logger *slog.Logger, now time.Time) (*reloading[T], error) {
	r := &reloading[T]{what: what, files: files, parse: parse, describe: describe, log: logger, checked: now}
	data, err := r.read()
	if err == nil {
		r.value, err = r.parseAll(data)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	r.sum = digest(data)
	return r, nil
}

// get returns the value, first reading the files again if it has not for
// recheckEvery, and parsing them if they changed.
func (r *reloading[T]) get(now time.Time) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.checked) < recheckEvery {
		return r.value
	}
	r.checked = now
	data, err := r.read()
	if err == nil {
		sum := digest(data)
		if sum == r.sum {
			return r.value
		}
		// Whatever parsing gives, these contents are not parsed again:
		// broken files are reported once, not once a second.
		r.sum = sum
		var v T
		if v, err = r.parseAll(data); err == nil {
			r.value, r.lastErr = v, ""
			attrs := []any{"files", r.paths()}
			if r.describe != nil {
				attrs = append(attrs, r.describe(v)...)
			}
			r.log.Info("reloaded "+r.what, attrs...)
			return v
		}
	}
	if msg := err.Error(); msg != r.lastErr {
		r.lastErr = msg
		r.log.Error(r.what+" not reloaded; the previous one stays in use", "files", r.paths(), "err", err)
	}
	return r.value
}

// read reads every file; its errors name the file's variable.
func (r *reloading[T]) read() ([][]byte, error) {
	data := make([][]byte, len(r.files))
	for i, f := range r.files {
		b, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Var, err)
		}
		data[i] = b
	}
	return data, nil
}

// parseAll parses the files' contents; its errors name every file.
func (r *reloading[T]) parseAll(data [][]byte) (T, error) {
	v, err := r.parse(data)
	if err != nil {
		envs := make([]string, len(r.files))
		for i, f := range r.files {
			envs[i] = f.Var
		}
		return v, fmt.Errorf("%s: %s: %w", strings.Join(envs, " and "), strings.Join(r.paths(), ", "), err)
	}
	return v, nil
}

func (r *reloading[T]) paths() []string {
	p := make([]string, len(r.files))
	for i, f := range r.files {
		p[i] = f.Path
	}
	return p
}

// digest is a digest of the contents of several files.
func digest(data [][]byte) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, d := range data {
		binary.BigEndian.PutUint64(n[:], uint64(len(d)))
		h.Write(n[:])
		h.Write(d)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
