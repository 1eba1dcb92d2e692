// Package check is the server binary's check command: it loads limits files
// as the server would, with the server's own loader and settings, serving
// nothing and touching no backend, and reports every error, what loads but
// is likely a mistake, and what each domain holds; or, with -explain, what
// the service would do with a request, and with -explain-bucket, what its
// Rate Limit Quota Service would do with a bucket id. It answers to envoyproxy/ratelimit's
// config_check_cmd flags (-config_dir, -merge_domain_configs) and exit
// codes, for the CI jobs that run it before a ConfigMap is applied.
package check

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/explain"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// The exit codes of the check command, as envoyproxy/ratelimit's
// config_check_cmd has them: 0 when the limits load (and, with -strict,
// warn of nothing), 1 when they do not or the request to explain is
// refused, and 2, as Go's flag package exits, for a command line it does
// not understand.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// ExitError ends the check command with a code other than ExitOK, once its
// report is written.
type ExitError struct{ Code int }

// Error returns "exit status" and the code.
func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode returns the code.
func (e *ExitError) ExitCode() int { return e.Code }

// maxRequestBytes bounds the request -explain reads, as /json bounds its
// body.
const maxRequestBytes = 4 << 20

// flags are the check command's command line.
type flags struct {
	path    string
	merge   bool
	strict  bool
	json    bool
	explain string
	// bucket is -explain-bucket's.
	bucket string
}

// Run runs the check command with its arguments args (those after
// "check"), the settings that lookup finds, stdin for "-explain -" and
// "-explain-bucket -", the
// report on stdout and usage errors on stderr. It returns nil when the
// check passes, and an *ExitError otherwise, whose code the process should
// exit with: the report says why.
func Run(ctx context.Context, args []string, lookup func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return &ExitError{Code: ExitUsage}
	}
	r := &reporter{out: stdout, json: f.json}
	s, err := settings.Load(lookup)
	if err != nil {
		return r.failed(err)
	}
	if f.path == "" {
		f.path = s.ConfigPath
	}
	opts := s.ConfigOptions()
	opts.MergeDomains = opts.MergeDomains || f.merge
	opts.WarnLifetime, opts.WarnLogSize = s.MaxOverrideLifetime, s.MaxOverrideLogSize
	readCtx, cancel := context.WithTimeout(ctx, s.ConfigReadTimeout)
	defer cancel()
	cfg, err := config.LoadContext(readCtx, f.path, opts)
	if err != nil {
		return r.failed(err)
	}
	if f.bucket != "" {
		body, err := readRequest("-explain-bucket", f.bucket, stdin)
		if err != nil {
			return r.failed(err)
		}
		report, err := explain.Bucket(cfg, body, s, time.Now())
		if err != nil {
			return r.failed(fmt.Errorf("-explain-bucket: %w", err))
		}
		return r.explainedBucket(report)
	}
	if f.explain != "" {
		body, err := readRequest("-explain", f.explain, stdin)
		if err != nil {
			return r.failed(err)
		}
		report, err := explain.Request(cfg, body, s, time.Now())
		if st, ok := status.FromError(err); ok && err != nil {
			// A request the service refuses: its message, without gRPC's
			// frame.
			err = errors.New(st.Message())
		}
		if err != nil {
			return r.failed(fmt.Errorf("-explain: %w", err))
		}
		return r.explained(report)
	}
	return r.loaded(f.path, cfg, f.strict, s.RLQS)
}

// parseFlags reads the command line: flags and at most one PATH, in any
// order. Its errors are reported on stderr, with the usage.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configDir := fs.String("config_dir", "", "the limits to check, as envoyproxy/ratelimit's config_check_cmd names them: the same as PATH")
	fs.BoolVar(&f.merge, "merge_domain_configs", false, "let several files configure one domain, as RLS_CONFIG_MERGE_DOMAINS=true (envoyproxy/ratelimit's flag)")
	fs.BoolVar(&f.strict, "strict", false, "fail (exit 1) on warnings too")
	fs.BoolVar(&f.json, "json", false, "report in JSON, for machines")
	fs.StringVar(&f.explain, "explain", "", "explain a request instead: a RateLimitRequest in JSON as /json takes it, a file holding one, or - for stdin")
	fs.StringVar(&f.bucket, "explain-bucket", "", `explain a bucket id of the Rate Limit Quota Service instead: {"domain": "…", "bucket": {"key": "value", …}} in JSON, a file holding it, or - for stdin`)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: server check [flags] [PATH]")
		fmt.Fprintln(fs.Output(), "Checks the limits at PATH (a file or a directory; default RLS_CONFIG_PATH) as the server loads them, with its RLS_* settings, and serves nothing.")
		fmt.Fprintln(fs.Output(), "Exits 0 when they load, 1 when they do not (or, with -strict, when they warn), 2 for a command line it does not understand.")
		fs.PrintDefaults()
	}
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			return f, err
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *configDir != "" {
		paths = append(paths, *configDir)
	}
	switch {
	case f.explain != "" && f.bucket != "":
		err := errors.New("-explain and -explain-bucket: one of them")
		fmt.Fprintln(stderr, "check:", err)
		fs.Usage()
		return f, err
	case len(paths) > 1:
		err := fmt.Errorf("one PATH to check, not %d: %s", len(paths), strings.Join(paths, ", "))
		fmt.Fprintln(stderr, "check:", err)
		fs.Usage()
		return f, err
	case len(paths) == 1:
		f.path = paths[0]
	}
	return f, nil
}

// readRequest returns what the flag named flagName (-explain or
// -explain-bucket) names: arg itself when it is JSON (it starts with '{'),
// stdin for "-", or the file arg.
func readRequest(flagName, arg string, stdin io.Reader) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(arg), "{") {
		return []byte(arg), nil
	}
	var r io.Reader = stdin
	name := "stdin"
	if arg != "-" {
		file, err := os.Open(arg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
		defer file.Close()
		r, name = file, arg
	}
	body, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: reading %s: %w", flagName, name, err)
	case len(body) > maxRequestBytes:
		return nil, fmt.Errorf("%s: %s holds more than %d bytes", flagName, name, maxRequestBytes)
	}
	return body, nil
}
