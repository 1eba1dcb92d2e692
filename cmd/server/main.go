// Command server runs ratewarden, a rate limit service for Envoy and Istio.
// It is configured entirely by RLS_* environment variables; `server -h`
// lists them. `server check` checks limits files, or explains a request or
// a bucket id of the Rate Limit Quota Service, without serving
// (internal/check). `server -version` prints the release it was built from.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/ratewarden/ratewarden/internal/check"
	"github.com/ratewarden/ratewarden/internal/server"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// version and commit are the release and the commit this binary was built
// from, set by the release build (.goreleaser.yaml) with
// -ldflags "-X main.version=… -X main.commit=…".
var version, commit string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		var exit *check.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code) // its report is written
		}
		fmt.Fprintln(os.Stderr, "ratewarden:", err)
		os.Exit(1)
	}
}

// run starts the server with the settings that lookup finds (the
// environment's, from main) and serves until ctx ends; or, with the
// arguments "check …", runs the check command, whose stdin is stdin.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "check" {
		return check.Run(ctx, args[1:], lookup, stdin, stdout, stderr)
	}
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			fmt.Fprintln(stdout, "ratewarden: a rate limit service for Envoy and Istio (envoy.service.ratelimit.v3).")
			fmt.Fprintln(stdout, "Usage: server   (configured by these environment variables)")
			fmt.Fprintln(stdout, "       server check [flags] [PATH]   (checks limits files without serving; server check -h)")
			fmt.Fprintln(stdout, "       server -version   (prints the release this binary was built from)")
			fmt.Fprintln(stdout)
			return settings.PrintUsage(stdout)
		case "-version", "--version":
			_, err := fmt.Fprintln(stdout, versionLine())
			return err
		default:
			return fmt.Errorf("unknown argument %q: the server is configured by RLS_* environment variables (see -h)", a)
		}
	}
	s, err := settings.Load(lookup)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, s, s.NewLogger(stderr))
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

// versionLine returns what -version prints: "ratewarden VERSION (commit
// COMMIT, GOVERSION GOOS/GOARCH)". A binary the release build did not stamp
// takes its module's version, as go install …@v1.2.3 records it, or
// "devel".
func versionLine() string {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "(devel)" {
			v = strings.TrimPrefix(bi.Main.Version, "v")
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	return fmt.Sprintf("ratewarden %s (commit %s, %s %s/%s)", cmp.Or(v, "devel"), cmp.Or(c, "unknown"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
