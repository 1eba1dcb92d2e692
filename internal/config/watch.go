package config

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long the files must be quiet after a notification
// before a Watcher reads them, unless WatchOptions.Debounce says otherwise.
// No setting exposes it.
const DefaultDebounce = 150 * time.Millisecond

// maxDebounces bounds how long a steady stream of notifications can put off
// a read: at most maxDebounces times the debounce after the first of them.
const maxDebounces = 5

// maxRescans bounds how often one of Run's checks reads the files again
// because it found new directories to watch.
const maxRescans = 8

// WatchOptions tunes a Watcher. A zero PollInterval never polls and a zero
// ReadTimeout bounds a read by its context alone; a zero Debounce means
// DefaultDebounce. Options.DefaultAlgorithm must be set.
// DefaultWatchOptions are a server's.
type WatchOptions struct {
	// Options are the options of every load.
	Options
	// PollInterval is how often the files are re-read whatever the file
	// system notifications say, for file systems that do not send them
	// (some network and container volume mounts). Zero (or a negative
	// interval) turns polling off.
	PollInterval time.Duration
	// Debounce is how long the files must be quiet after a notification
	// before they are read, so that a burst of writes is read once. Zero
	// means DefaultDebounce.
	Debounce time.Duration
	// Logger receives warnings about watching the file system, such as a
	// watch that cannot be set up. What is wrong with the configuration
	// itself goes to Run's callback, not here. Nil discards them.
	Logger *slog.Logger
	// ReadTimeout bounds how long a Check waits for the files to be read.
	// A read that hangs is not started again while it lasts: later Checks
	// wait for it, each up to ReadTimeout, and report it as an error. Zero
	// sets no bound of the Watcher's own: a Check then waits until its
	// context ends.
	ReadTimeout time.Duration
	// WaitForFiles makes a path with nothing to load (one that does not
	// exist yet, or an empty directory, as when a volume is mounted late)
	// no error for Load: it returns a nil Config, and Run reports the
	// Config once files appear.
	WaitForFiles bool
}

// DefaultWatchOptions returns the WatchOptions of a server: DefaultOptions,
// the files read again every 10s whatever the notifications say, and a
// read that takes longer than 10s an error.
func DefaultWatchOptions() WatchOptions {
	return WatchOptions{Options: DefaultOptions(), PollInterval: 10 * time.Second, ReadTimeout: 10 * time.Second}
}

func (o WatchOptions) withDefaults() WatchOptions {
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Watcher keeps the configuration at a path current: it is the Source of
// limits read from files. Load loads it; Check reloads it when the content
// of its files has changed; Run calls Check whenever the file system
// reports a change, and periodically.
//
// It reads the same files as LoadContext: a file, or a directory's files
// and its subdirectories', which it watches too. That covers editors that
// write a new file and rename it over the old one, files rewritten in
// place, files and subdirectories added or removed, Kubernetes ConfigMap
// volumes, whose update atomically swaps the ..data link that the visible
// files point through, and a path that does not exist yet (its nearest
// existing parent is watched until it does).
//
// A change is the content of the files, with their names, differing from
// what the last Check read: touching a file, or writing the same bytes
// again, is no change. A Watcher is safe for concurrent use.
type Watcher struct {
	path string
	opts WatchOptions

	mu      sync.Mutex
	sum     [sha256.Size]byte // fingerprint of what the last Check read
	scanned scanned           // what the last Check found, files aside
	pending *read             // a read that outlasted its Check; nil when none
	// watching lists the directories Run watches, after its last check.
	watching []string

	afterCheck func() // called after each of Run's checks; for tests
}

// NewWatcher returns a Watcher of the configuration at path. It reads
// nothing: Load does.
func NewWatcher(path string, opts WatchOptions) *Watcher {
	return &Watcher{path: path, opts: opts.withDefaults()}
}

// Path returns the path the Watcher reads.
func (w *Watcher) Path() string { return w.path }

// Origin returns the path, as where the limits come from.
func (w *Watcher) Origin() Origin { return Origin{Name: w.path} }

// Load loads the configuration at path as LoadContext does, waiting for the
// files until ctx ends or for the options' ReadTimeout, and returns it.
// Its errors are LoadContext's, except that with opts.WaitForFiles a path
// with nothing to load (an error wrapping ErrNoConfig) returns a nil Config
// and no error. Load is the first Check: Run reports only what changes
// after it.
func (w *Watcher) Load(ctx context.Context) (*Config, error) {
	cfg, _, err := w.Check(ctx)
	if err != nil {
		if w.opts.WaitForFiles && errors.Is(err, ErrNoConfig) {
			return nil, nil
		}
		return nil, err
	}
	return cfg, nil
}

// Check reads the files at the path. When what it reads is what the last
// Check (or Load) read, it reports changed false, and nothing else.
// Otherwise it reports changed true and either the new Config or the error,
// an *Error as LoadContext's, that keeps it from loading. A content that failed to
// load is not reported again until it changes.
//
// Check waits for the files until ctx ends or for the ReadTimeout, and a
// read that takes longer is an error naming the file being read. Such a
// read goes on in the background, and the next Check waits for it instead
// of starting another: a hung volume holds one goroutine, not one per
// Check.
func (w *Watcher) Check(ctx context.Context) (cfg *Config, changed bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.pending
	if r == nil {
		r = startRead(w.path, w.opts.Options)
	}
	if w.opts.ReadTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.opts.ReadTimeout)
		defer cancel()
	}
	s := r.wait(ctx)
	w.pending = nil
	if !r.finished() {
		w.pending = r
		// What the hung read will find is unknown: keep watching what the
		// last complete scan found.
		s.dirs, s.file, s.missing = w.scanned.dirs, w.scanned.file, w.scanned.missing
	}
	files, err := s.files, s.err
	s.files = nil
	w.scanned = s
	var sum [sha256.Size]byte
	if err != nil {
		sum = sha256.Sum256([]byte("error\x00" + err.Error()))
	} else {
		sum = fingerprint(files)
	}
	if sum == w.sum {
		return nil, false, nil
	}
	w.sum = sum
	if err != nil {
		return nil, true, err
	}
	cfg, err = Parse(files, w.opts.Options)
	return cfg, true, err
}

// watchPlan returns what the last Check found: the directories to watch,
// the base name of the path when it is a file, and whether it is missing.
func (w *Watcher) watchPlan() scanned {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scanned
}

// fingerprint digests the names and contents of files, in order.
func fingerprint(files []File) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Name)))
		h.Write(n[:])
		h.Write([]byte(f.Name))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Run watches the path until ctx ends, calling apply with the result of
// every Check that found a change: the new Config, or the error that keeps
// the files from loading. It checks once at the start (for changes made
// since Load), after every burst of file system notifications about the
// path once it has been quiet for the debounce (or at the latest five
// debounces after the burst began), and every poll interval. apply is
// called from Run's goroutine only, one call at a time; Run returns when ctx
// ends, not in the middle of a call, and without waiting for a read that
// hangs.
func (w *Watcher) Run(ctx context.Context, apply func(Update)) {
	n := w.notifier()
	defer n.close()
	check := func() {
		// A directory that appeared since the last check is watched from
		// now on; what was written into it before that is read by checking
		// again, until no new directory turns up.
		for range maxRescans {
			cfg, changed, err := w.Check(ctx)
			if ctx.Err() != nil {
				return
			}
			added := n.sync(w.watchPlan())
			w.mu.Lock()
			w.watching = n.watching()
			w.mu.Unlock()
			if changed {
				apply(Update{Config: cfg, Err: err})
			}
			if !added {
				break
			}
		}
		if w.afterCheck != nil {
			w.afterCheck()
		}
	}
	var poll <-chan time.Time
	if w.opts.PollInterval > 0 {
		t := time.NewTicker(w.opts.PollInterval)
		defer t.Stop()
		poll = t.C
	}
	// The first check, for changes made since Load, waits for quiet
	// like any other: the files may be in the middle of being written.
	quiet := time.NewTimer(w.opts.Debounce)
	defer quiet.Stop()
	burstStart := time.Now() // zero when no check is waiting

	for {
		var changedNow bool
		select {
		case <-ctx.Done():
			return
		case <-poll:
			check()
		case <-quiet.C:
			burstStart = time.Time{}
			check()
		case ev, ok := <-n.events:
			if !ok {
				n.events = nil
				continue
			}
			changedNow = n.concerns(ev)
		case err, ok := <-n.errors:
			if !ok {
				n.errors = nil
				continue
			}
			// Typically an overflowing event queue: whatever was lost,
			// read the files again.
			w.opts.Logger.Warn("config: file system notifications", "path", w.path, "err", err)
			changedNow = true
		}
		if changedNow {
			now := time.Now()
			if burstStart.IsZero() {
				burstStart = now
			}
			wait := min(w.opts.Debounce, burstStart.Add(maxDebounces*w.opts.Debounce).Sub(now))
			quiet.Reset(max(wait, 0))
		}
	}
}

// notifier is Run's file system watch: the directories that hold the
// files, as the last Check found them. Its channels are nil when no watch
// could be set up, and Run then relies on polling.
type notifier struct {
	fs     *fsnotify.Watcher
	events chan fsnotify.Event
	errors chan error
	path   string
	// watched holds the directories being watched.
	watched map[string]bool
	// file is the base name of the path when it is a file, else "";
	// missing reports that the path does not exist, and an ancestor is
	// watched for it.
	file    string
	missing bool
	warned  bool // whether a directory could not be watched
	log     *slog.Logger
}

func (w *Watcher) notifier() *notifier {
	n := &notifier{path: filepath.Clean(w.path), watched: make(map[string]bool), log: w.opts.Logger}
	fs, err := fsnotify.NewWatcher()
	if err != nil {
		n.log.Warn("config: cannot watch for changes; relying on polling", "path", w.path, "poll_interval", w.opts.PollInterval, "err", err)
		return n
	}
	n.fs, n.events, n.errors = fs, fs.Events, fs.Errors
	n.sync(w.watchPlan())
	return n
}

// sync watches the directories of plan, and no others, and reports whether
// it watches one it did not watch before. It warns once about a directory
// it cannot watch, until it can watch them all again. A directory whose
// watch was lost, as when it was removed and made anew, is watched again.
func (n *notifier) sync(plan scanned) (added bool) {
	n.file, n.missing = plan.file, plan.missing
	if n.fs == nil {
		return false
	}
	want := make(map[string]bool, len(plan.dirs))
	for _, d := range plan.dirs {
		want[filepath.Clean(d)] = true
	}
	watching := make(map[string]bool, len(n.watched))
	for _, d := range n.fs.WatchList() {
		watching[d] = true
	}
	for d := range n.watched {
		if !want[d] {
			n.fs.Remove(d) // fails for a directory that is gone, which is no matter
			delete(n.watched, d)
		}
	}
	failed := false
	for d := range want {
		if watching[d] {
			n.watched[d] = true
			continue
		}
		if err := n.fs.Add(d); err != nil {
			if !n.warned {
				n.log.Warn("config: cannot watch directory for changes; relying on polling", "dir", d, "err", err)
			}
			failed = true
			continue
		}
		n.watched[d] = true
		added = true
	}
	n.warned = failed
	return added
}

// concerns reports whether ev may change what the path holds. In the
// watched directory tree, every event may; next to a watched file, only
// events about that file and about names starting with "..", which
// Kubernetes volumes swap to update the files that link through them; above
// a missing path, only events about the path or a directory on the way to
// it.
func (n *notifier) concerns(ev fsnotify.Event) bool {
	switch {
	case n.missing:
		name := filepath.Clean(ev.Name)
		return name == n.path || strings.HasPrefix(n.path, name+string(filepath.Separator))
	case n.file != "":
		base := filepath.Base(ev.Name)
		return base == n.file || strings.HasPrefix(base, "..")
	}
	return true
}

// watching returns the watched directories, sorted.
func (n *notifier) watching() []string {
	dirs := make([]string, 0, len(n.watched))
	for d := range n.watched {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

func (n *notifier) close() {
	if n.fs != nil {
		n.fs.Close()
	}
}
