package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// The server builds the benchmarks run: the module's, and one from an
// earlier commit of its repository (the "before" build of `loadgen
// overload` and `loadgen rediscost`).

// serverModule is the module path of ratewarden's server, whose directory
// -root names. The load generator is a module of its own, in its bench/.
const serverModule = "github.com/ratewarden/ratewarden"

// rootUsage is the help of -root.
const rootUsage = "the ratewarden module to build the server from (default: the nearest directory at or above the working directory whose go.mod is " + serverModule + "'s, the repository's root under go -C bench run)"

// orServerRoot returns root, or when it is empty the directory of the
// server's module that findServerRoot finds from the working directory.
func orServerRoot(root string) (string, error) {
	if root != "" {
		return root, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("loadgen: %w", err)
	}
	return findServerRoot(wd)
}

// findServerRoot returns the nearest directory at or above dir whose go.mod
// declares serverModule: from bench/, where `go -C bench run ./cmd/loadgen`
// runs the load generator, the repository's root.
func findServerRoot(dir string) (string, error) {
	for d := dir; ; {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modfile.ModulePath(data) == serverModule {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("loadgen: no go.mod of %s at or above %s: name the server's module with -root", serverModule, dir)
		}
		d = parent
	}
}

// goBuild builds ./cmd/server of the module in dir into bin.
func goBuild(ctx context.Context, dir, bin string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/server")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("loadgen: go build ./cmd/server in %s: %w\n%s", dir, err, out)
	}
	return nil
}

// gitArchive writes the tree of commit, from the repository at root, into
// dir.
func gitArchive(ctx context.Context, root, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	archive.Dir = root
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	untar.Stdin = pipe
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Start(); err != nil {
		return fmt.Errorf("loadgen: git archive %s: %w", commit, err)
	}
	out, untarErr := untar.CombinedOutput()
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("loadgen: git archive %s: %w\n%s", commit, err, stderr.String())
	}
	if untarErr != nil {
		return fmt.Errorf("loadgen: tar: %w\n%s", untarErr, out)
	}
	return nil
}

// gitDescribe names the commit of the module at root.
func gitDescribe(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty", "--abbrev=12")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// buildCommit builds ./cmd/server of commit, from the repository at root,
// into bin, from a copy of the commit's tree it writes into src. noAddrFile
// reports a commit from before RLS_ADDR_FILE, whose server cannot name the
// ports it is bound to (see proc.ServerConfig.NoAddrFile).
func buildCommit(ctx context.Context, root, commit, src, bin string) (noAddrFile bool, err error) {
	if err := gitArchive(ctx, root, commit, src); err != nil {
		return false, err
	}
	if _, err := os.Stat(filepath.Join(src, "internal", "addrfile")); err != nil {
		noAddrFile = true
	}
	return noAddrFile, goBuild(ctx, src, bin)
}

// commitDate returns the date of commit, in the repository at root, in
// UTC.
func commitDate(ctx context.Context, root, commit string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "show", "-s", "--format=%cI", commit)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("loadgen: git show %s: %w", commit, err)
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
	if err != nil {
		return "", fmt.Errorf("loadgen: the date of commit %s: %w", commit, err)
	}
	return t.UTC().Format("2006-01-02 15:04 MST"), nil
}

// settingName matches the name of a setting where the server's -h lists
// it: at the start of a line of its table.
var settingName = regexp.MustCompile(`(?m)^RLS_[A-Z0-9_]*[A-Z0-9]\b`)

// serverSettings returns the RLS_ variables the server binary bin reads,
// as its -h lists them, sorted: what a build from another commit may be
// given.
func serverSettings(ctx context.Context, bin string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-h").Output()
	if err != nil {
		return nil, fmt.Errorf("loadgen: %s -h: %w", bin, err)
	}
	names := slices.Compact(slices.Sorted(slices.Values(settingName.FindAllString(string(out), -1))))
	if len(names) == 0 {
		return nil, fmt.Errorf("loadgen: %s -h lists no RLS_ variable", bin)
	}
	return names, nil
}
