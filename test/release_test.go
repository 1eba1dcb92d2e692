package test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/semver"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// How scripts/test installs the release's tools: GoReleaser, which builds
// a release from .goreleaser.yaml; syft, which writes its SBOMs; and
// actionlint, GitHub Actions' checker of workflows. The release workflow
// runs the same versions of the first two (TestWorkflows).
const (
	goreleaserInstall = "go install github.com/goreleaser/goreleaser/v2@v2.15.1"
	syftInstall       = "go install github.com/anchore/syft/cmd/syft@v1.57.1"
	actionlintInstall = "go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"
)

// releaseImage is the image a release publishes, which the Helm chart runs.
const releaseImage = "ghcr.io/ratewarden/ratewarden"

// installVersion returns the version an install command names, after its @.
func installVersion(install string) string {
	_, v, _ := strings.Cut(install, "@")
	return v
}

// TestReleaseToolsInstalled: scripts/test installs each tool the release
// tests run, at the version they name.
func TestReleaseToolsInstalled(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "test"))
	require.NoError(t, err)
	for _, install := range []string{goreleaserInstall, syftInstall, actionlintInstall} {
		assert.True(t, strings.Contains(string(script), "\n  "+install+"\n"), "scripts/test runs %s", install)
	}
}

// goreleaserConfig is what the tests read of .goreleaser.yaml. GoReleaser
// itself checks the rest (TestGoreleaserCheck).
type goreleaserConfig struct {
	ProjectName string `yaml:"project_name"`
	Checksum    struct {
		NameTemplate string `yaml:"name_template"`
	} `yaml:"checksum"`
	Builds []struct {
		ID     string   `yaml:"id"`
		Binary string   `yaml:"binary"`
		Goos   []string `yaml:"goos"`
		Goarch []string `yaml:"goarch"`
	} `yaml:"builds"`
	DockersV2 []struct {
		IDs        []string `yaml:"ids"`
		Dockerfile string   `yaml:"dockerfile"`
		Images     []string `yaml:"images"`
		Tags       []string `yaml:"tags"`
		Platforms  []string `yaml:"platforms"`
		ExtraFiles []string `yaml:"extra_files"`
	} `yaml:"dockers_v2"`
}

// readGoreleaserConfig reads .goreleaser.yaml.
func readGoreleaserConfig(t *testing.T) goreleaserConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	require.NoError(t, err)
	var c goreleaserConfig
	require.NoError(t, yaml.Unmarshal(data, &c))
	return c
}

// TestGoreleaserCheck: GoReleaser accepts .goreleaser.yaml, with no
// deprecated field.
func TestGoreleaserCheck(t *testing.T) {
	goreleaser := redistest.NeedProgramIn(t, pathWithGoBin(t), "goreleaser", goreleaserInstall)
	cmd := exec.Command(goreleaser, "check")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "goreleaser check:\n%s", out)
}

// TestReleaseSnapshot builds the release as the release workflow does, but
// as a snapshot that publishes nothing and builds no image, into a
// directory of its own, and checks what a user downloads for linux on
// amd64 and arm64: each archive holds a static binary built with
// -trimpath, the example limits, README and CHANGELOG; each has an SPDX
// SBOM that describes it and the Go modules in its binary; the checksums
// file holds the SHA-256 of every archive and SBOM; and the binary's
// -version prints the version and commit of the build. The darwin targets
// are left out, which halves a build with an empty build cache.
func TestReleaseSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release's binaries: not with -short")
	}
	path := pathWithGoBin(t)
	goreleaser := redistest.NeedProgramIn(t, path, "goreleaser", goreleaserInstall)
	redistest.NeedProgramIn(t, path, "syft", syftInstall)

	dist := t.TempDir()
	cmd := exec.Command(goreleaser, "release", "--config", snapshotConfig(t, dist),
		"--snapshot", "--clean", "--skip=docker,publish,sign", "--parallelism", "2")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "PATH="+path)
	if out, err := exec.Command("git", "-C", repoRoot, "remote").Output(); err == nil && len(bytes.TrimSpace(out)) == 0 {
		// GoReleaser reads no commit from a repository without a remote
		// (it names it "none"); a clone has one.
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.url",
			"GIT_CONFIG_VALUE_0=https://github.com/ratewarden/ratewarden.git")
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "goreleaser release --snapshot:\n%s", out)

	var meta struct{ Version, Commit string }
	data, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &meta))
	require.Regexp(t, `-SNAPSHOT-`, meta.Version)
	require.Regexp(t, `^[0-9a-f]{40}$`, meta.Commit)

	checksums := readChecksums(t, filepath.Join(dist, "ratewarden_"+meta.Version+"_checksums.txt"))
	for name, sum := range checksums {
		assert.Equal(t, sum, fileSHA256(t, filepath.Join(dist, name)), "the checksum of %s", name)
	}
	limits, err := filepath.Glob(filepath.Join(repoRoot, "config", "*.yaml"))
	require.NoError(t, err)
	wantFiles := []string{"CHANGELOG.md", "README.md", "ratewarden"}
	for _, l := range limits {
		wantFiles = append(wantFiles, "config/"+filepath.Base(l))
	}
	slices.Sort(wantFiles)
	modules := goModules(t)
	abs, err := filepath.Abs(repoRoot)
	require.NoError(t, err)

	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			name := fmt.Sprintf("ratewarden_%s_linux_%s.tar.gz", meta.Version, arch)
			archive := filepath.Join(dist, name)
			files := untar(t, archive)
			assert.Equal(t, wantFiles, slices.Sorted(maps.Keys(files)))
			for _, l := range limits {
				want, err := os.ReadFile(l)
				require.NoError(t, err)
				assert.Equal(t, string(want), string(files["config/"+filepath.Base(l)]))
			}
			bin := files["ratewarden"]
			require.NotEmpty(t, bin)

			e, err := elf.NewFile(bytes.NewReader(bin))
			require.NoError(t, err)
			assert.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch], e.Machine)
			for _, p := range e.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary has no dynamic loader")
			}
			bi, err := buildinfo.Read(bytes.NewReader(bin))
			require.NoError(t, err)
			settings := map[string]string{}
			for _, s := range bi.Settings {
				settings[s.Key] = s.Value
			}
			assert.Equal(t, "0", settings["CGO_ENABLED"])
			assert.Equal(t, "true", settings["-trimpath"])
			assert.Equal(t, "linux", settings["GOOS"])
			assert.Equal(t, arch, settings["GOARCH"])
			assert.False(t, bytes.Contains(bin, []byte(abs)), "the binary holds the path of the checkout")

			sbom := name + ".sbom.json"
			assert.Contains(t, checksums, name)
			assert.Contains(t, checksums, sbom)
			checkSBOM(t, filepath.Join(dist, sbom), name, checksums[name], bi.GoVersion, modules)

			if runtime.GOOS == "linux" && runtime.GOARCH == arch {
				exe := filepath.Join(t.TempDir(), "ratewarden")
				require.NoError(t, os.WriteFile(exe, bin, 0o755))
				out, err := exec.Command(exe, "-version").CombinedOutput()
				require.NoError(t, err, "%s", out)
				assert.Regexp(t, fmt.Sprintf(`^ratewarden %s \(commit %s[0-9a-f]*, go\S+ linux/%s\)\n$`,
					regexp.QuoteMeta(meta.Version), meta.Commit[:7], arch), string(out))
			}
		})
	}
}

// snapshotConfig writes .goreleaser.yaml with its dist set to dist and its
// builds for linux alone, and returns its path.
func snapshotConfig(t *testing.T, dist string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".goreleaser.yaml"))
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, yaml.Unmarshal(data, &c))
	c["dist"] = dist
	builds, _ := c["builds"].([]any)
	require.NotEmpty(t, builds, ".goreleaser.yaml has builds")
	for _, b := range builds {
		build := b.(map[string]any)
		require.Contains(t, strs(build["goos"]), "linux")
		build["goos"] = []string{"linux"}
	}
	out, err := yaml.Marshal(c)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "goreleaser.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path
}

// readChecksums reads a checksums file of lines "SHA256  NAME".
func readChecksums(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		m := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`).FindStringSubmatch(line)
		require.NotNil(t, m, "a checksums line: %q", line)
		sums[m[2]] = m[1]
	}
	return sums
}

// fileSHA256 returns the SHA-256 of the file at path, in hex.
func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// untar returns the regular files of a .tar.gz by name.
func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	files := map[string][]byte{}
	r := tar.NewReader(gz)
	for {
		h, err := r.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			files[h.Name], err = io.ReadAll(r)
			require.NoError(t, err)
		}
	}
}

// sbomModules are modules the server links, which its SBOM must list.
var sbomModules = []string{"github.com/redis/go-redis/v9", "google.golang.org/grpc", "github.com/envoyproxy/go-control-plane/envoy"}

// goModules returns the versions of the main module ("" for it) and of
// sbomModules, as the go command selects them.
func goModules(t *testing.T) map[string]string {
	t.Helper()
	modules := map[string]string{}
	for _, args := range [][]string{nil, sbomModules} {
		cmd := exec.Command("go", append([]string{"list", "-m"}, args...)...)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		require.NoError(t, err)
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, version, _ := strings.Cut(l, " ")
			modules[path] = version
		}
	}
	require.Len(t, modules, 1+len(sbomModules))
	return modules
}

// checkSBOM checks the SPDX document at path: it describes the archive
// name, whose SHA-256 is sum, and lists the Go standard library of
// goVersion and each of modules, at its version (any, for "").
func checkSBOM(t *testing.T, path, name, sum, goVersion string, modules map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			SPDXID      string `json:"SPDXID"`
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
			Checksums   []struct {
				Algorithm     string `json:"algorithm"`
				ChecksumValue string `json:"checksumValue"`
			} `json:"checksums"`
		} `json:"packages"`
		Relationships []struct {
			Element string `json:"spdxElementId"`
			Related string `json:"relatedSpdxElement"`
			Type    string `json:"relationshipType"`
		} `json:"relationships"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Regexp(t, `^SPDX-2\.`, doc.SPDXVersion)
	versions := map[string]string{}
	ids := map[string]int{}
	for i, p := range doc.Packages {
		versions[p.Name] = p.VersionInfo
		ids[p.SPDXID] = i
	}
	var described []string
	for _, r := range doc.Relationships {
		if r.Element == "SPDXRef-DOCUMENT" && r.Type == "DESCRIBES" {
			described = append(described, r.Related)
		}
	}
	require.Len(t, described, 1, "the SBOM describes one thing")
	i, ok := ids[described[0]]
	require.True(t, ok, "the SBOM describes a package it lists")
	root := doc.Packages[i]
	assert.Equal(t, name, root.Name)
	assert.Contains(t, root.Checksums, struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}{"SHA256", sum})

	assert.Equal(t, goVersion, versions["stdlib"], "the SBOM names the Go the binary was built with")
	for mod, want := range modules {
		if assert.Contains(t, versions, mod, "the SBOM lists %s", mod) && want != "" {
			assert.Equal(t, want, versions[mod], "the SBOM's version of %s", mod)
		}
	}
}

// TestReleaseImage: the released image is the image ./Dockerfile builds,
// from the release's binaries: release.Dockerfile is ./Dockerfile's final
// stage with the binary copied from the build context, where GoReleaser
// puts the linux binaries of both platforms, and GoReleaser builds it for
// linux/amd64 and linux/arm64 as ghcr.io/ratewarden/ratewarden, tagged
// with the version, which the Helm chart runs.
func TestReleaseImage(t *testing.T) {
	c := readGoreleaserConfig(t)
	require.Len(t, c.Builds, 1, ".goreleaser.yaml builds one binary")
	build := c.Builds[0]
	require.Len(t, c.DockersV2, 1, ".goreleaser.yaml builds one image")
	image := c.DockersV2[0]
	assert.Equal(t, []string{build.ID}, image.IDs)
	assert.Equal(t, "release.Dockerfile", image.Dockerfile)
	assert.Equal(t, []string{releaseImage}, image.Images)
	assert.Equal(t, []string{"{{ .Version }}"}, image.Tags, "the image's tag is the version, as the archives'")
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, image.Platforms)
	for _, p := range image.Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		assert.Contains(t, build.Goos, goos, "the build makes the binary of %s", p)
		assert.Contains(t, build.Goarch, goarch, "the build makes the binary of %s", p)
	}
	assert.Equal(t, []string{"config"}, image.ExtraFiles, "the example limits are in the build context")

	final := dockerStages(t, "Dockerfile")
	require.Len(t, final, 2)
	built := regexp.MustCompile(`go build .*-o (\S+) \./cmd/server`).FindStringSubmatch(strings.Join(final[0], "\n"))
	require.NotNil(t, built, "Dockerfile's builder builds ./cmd/server")
	var want []string
	for _, l := range final[1] {
		if dst, ok := strings.CutPrefix(l, "COPY --from=builder "+built[1]+" "); ok {
			l = "COPY $TARGETPLATFORM/" + build.Binary + " " + dst
		}
		want = append(want, l)
		if strings.HasPrefix(l, "FROM ") {
			want = append(want, "ARG TARGETPLATFORM")
		}
	}
	release := dockerStages(t, "release.Dockerfile")
	require.Len(t, release, 1, "release.Dockerfile has one stage")
	assert.Equal(t, want, release[0])

	values, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "helm", "ratewarden", "values.yaml"))
	require.NoError(t, err)
	var v struct {
		Image struct{ Repository string } `yaml:"image"`
	}
	require.NoError(t, yaml.Unmarshal(values, &v))
	assert.Equal(t, releaseImage, v.Image.Repository, "the Helm chart runs the released image")
}

// dockerStages returns the instructions of each stage of a Dockerfile of
// the repository, its FROM first, without comments and blank lines.
func dockerStages(t *testing.T, name string) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	require.NoError(t, err)
	var stages [][]string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "FROM ") {
			stages = append(stages, nil)
		}
		require.NotEmpty(t, stages, "%s: an instruction before FROM: %s", name, l)
		stages[len(stages)-1] = append(stages[len(stages)-1], l)
	}
	return stages
}

// TestChangelog: CHANGELOG.md opens its releases with Unreleased, then a
// section per version, newest first, each dated and linked at the end;
// scripts/release-notes prints each version's section, which the release
// workflow makes the release's text, and fails for a version without one;
// and the Helm chart's appVersion, the image it runs, is a version of the
// changelog.
func TestChangelog(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	require.NoError(t, err)
	text := string(data)
	headings := regexp.MustCompile(`(?m)^## \[([^]]+)\](.*)$`).FindAllStringSubmatch(text, -1)
	require.NotEmpty(t, headings)
	assert.Equal(t, "Unreleased", headings[0][1], "the first section is Unreleased")
	assert.Empty(t, headings[0][2])
	assert.Regexp(t, `(?m)^\[Unreleased\]: https://github\.com/ratewarden/ratewarden/compare/v\S+\.\.\.HEAD$`, text)
	var versions []string
	for _, h := range headings[1:] {
		version := h[1]
		assert.True(t, semver.IsValid("v"+version) && semver.Build("v"+version) == "" && strings.Count(version, ".") >= 2, "%s is a version X.Y.Z", version)
		assert.Regexp(t, `^ - \d{4}-\d{2}-\d{2}$`, h[2], "%s has a date", version)
		assert.Contains(t, text, "\n["+version+"]: https://github.com/ratewarden/ratewarden/", "%s is linked at the end", version)
		if len(versions) > 0 {
			assert.Positive(t, semver.Compare("v"+versions[len(versions)-1], "v"+version), "%s comes before %s", versions[len(versions)-1], version)
		}
		versions = append(versions, version)

		cmd := exec.Command(filepath.Join(repoRoot, "scripts", "release-notes"), "v"+version)
		out, err := cmd.Output()
		require.NoError(t, err, "scripts/release-notes v%s", version)
		section := text[strings.Index(text, h[0])+len(h[0]):]
		assert.True(t, strings.HasPrefix(strings.TrimLeft(section, "\n"), string(out)), "scripts/release-notes v%s prints its section:\n%s", version, out)
		assert.NotContains(t, string(out), "\n## ", "the notes of v%s end before the next version", version)
	}
	require.NotEmpty(t, versions, "CHANGELOG.md has a release")
	assert.Error(t, exec.Command(filepath.Join(repoRoot, "scripts", "release-notes"), "v999.0.0").Run(), "no notes for a version the changelog lacks")

	chart, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "helm", "ratewarden", "Chart.yaml"))
	require.NoError(t, err)
	var c struct {
		AppVersion string `yaml:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(chart, &c))
	assert.Contains(t, versions, c.AppVersion, "the Helm chart runs the image of a version in CHANGELOG.md")
}

// workflow is what the tests read of a GitHub Actions workflow.
type workflow struct {
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]struct {
		Permissions map[string]string `yaml:"permissions"`
		Steps       []workflowStep    `yaml:"steps"`
	} `yaml:"jobs"`
}

type workflowStep struct {
	ID   string            `yaml:"id"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]any    `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

// workflowFiles returns the paths of the workflows under .github/workflows.
func workflowFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, ".github", "workflows", "*.y*ml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// readWorkflow reads .github/workflows/name, with its one job's steps.
func readWorkflow(t *testing.T, name string) (workflow, []workflowStep) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "workflows", name))
	require.NoError(t, err)
	var w workflow
	require.NoError(t, yaml.Unmarshal(data, &w))
	require.Len(t, w.Jobs, 1, "%s has one job", name)
	for _, j := range w.Jobs {
		return w, j.Steps
	}
	return w, nil
}

// stepUsing returns the step of steps that uses the action named action
// (owner/repo[/path]), whatever its version.
func stepUsing(t *testing.T, steps []workflowStep, action string) workflowStep {
	t.Helper()
	for _, s := range steps {
		if name, _, _ := strings.Cut(s.Uses, "@"); name == action {
			return s
		}
	}
	t.Fatalf("no step uses %s", action)
	return workflowStep{}
}

// TestWorkflowsLint runs actionlint, with shellcheck on the run steps, on
// every workflow.
func TestWorkflowsLint(t *testing.T) {
	path := pathWithGoBin(t)
	actionlint := redistest.NeedProgramIn(t, path, "actionlint", actionlintInstall)
	shellcheck := redistest.NeedProgramIn(t, path, "shellcheck", "apt-get install shellcheck")
	// Run at the root, actionlint checks every file of .github/workflows.
	cmd := exec.Command(actionlint, "-shellcheck", shellcheck, "-pyflakes", "")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "actionlint:\n%s", out)
}

// TestWorkflowsPinActions: every action a workflow uses is pinned to a
// commit, with the version it is in a comment, as Dependabot updates them:
// a tag can be moved, a commit cannot.
func TestWorkflowsPinActions(t *testing.T) {
	pinned := regexp.MustCompile(`^\s*(- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$`)
	for _, f := range workflowFiles(t) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, l := range strings.Split(string(data), "\n") {
			if regexp.MustCompile(`^\s*(- )?uses:`).MatchString(l) {
				assert.Regexp(t, pinned, l, "%s:%d: uses: owner/repo@COMMIT # vX.Y.Z", filepath.Base(f), i+1)
			}
		}
	}
}

// TestWorkflows: CI runs the README's test command with CI=true, on the Go
// of go.mod; the release workflow runs on tags v*, with the goreleaser and
// syft the tests run, on go.mod's Go at its newest patch, with
// CHANGELOG.md's notes, publishes the release and the image, and attests
// the provenance of the archives and of the image.
func TestWorkflows(t *testing.T) {
	ci, steps := readWorkflow(t, "ci.yml")
	assert.Contains(t, ci.On, "pull_request")
	assert.Equal(t, map[string]any{"branches": []any{"main"}}, ci.On["push"])
	assert.Equal(t, map[string]string{"contents": "read"}, ci.Permissions)
	assert.Equal(t, "go.mod", stepUsing(t, steps, "actions/setup-go").With["go-version-file"])
	var test workflowStep
	for _, s := range steps {
		if s.Run == "scripts/test" {
			test = s
		}
	}
	assert.Equal(t, map[string]string{"CI": "true"}, test.Env, "CI runs scripts/test with CI=true")

	release, steps := readWorkflow(t, "release.yml")
	assert.Equal(t, map[string]any{"push": map[string]any{"tags": []any{"v*"}}}, release.On)
	for _, j := range release.Jobs {
		assert.Equal(t, map[string]string{"contents": "write", "packages": "write", "id-token": "write", "attestations": "write"}, j.Permissions)
	}
	goMod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	require.NotNil(t, goVersion)
	setupGo := stepUsing(t, steps, "actions/setup-go")
	assert.Equal(t, string(goVersion[1])+".x", setupGo.With["go-version"], "the release builds with go.mod's Go")
	assert.Equal(t, true, setupGo.With["check-latest"], "at its newest patch")

	goreleaser := stepUsing(t, steps, "goreleaser/goreleaser-action")
	assert.Equal(t, installVersion(goreleaserInstall), goreleaser.With["version"], "the release runs the goreleaser the tests run")
	assert.Equal(t, "${{ secrets.GITHUB_TOKEN }}", goreleaser.Env["GITHUB_TOKEN"])
	args := fmt.Sprint(goreleaser.With["args"])
	assert.Regexp(t, `^release --clean( |$)`, args)
	notes := regexp.MustCompile(`--release-notes=((?:\$\{\{[^}]*\}\}|\S)+)`).FindStringSubmatch(args)
	require.NotNil(t, notes, "the release's text is given with --release-notes")
	notesFile := strings.ReplaceAll(notes[1], "${{ runner.temp }}", "$RUNNER_TEMP")
	assert.Contains(t, stepsRun(steps), `scripts/release-notes "$GITHUB_REF_NAME" > "`+notesFile+`"`, "the notes are the tag's section of CHANGELOG.md")
	assert.Equal(t, installVersion(syftInstall), stepUsing(t, steps, "anchore/sbom-action/download-syft").With["syft-version"], "the release runs the syft the tests run")

	stepUsing(t, steps, "docker/setup-qemu-action")
	stepUsing(t, steps, "docker/setup-buildx-action")
	login := stepUsing(t, steps, "docker/login-action")
	assert.Equal(t, strings.Split(releaseImage, "/")[0], login.With["registry"])
	assert.Equal(t, "${{ secrets.GITHUB_TOKEN }}", login.With["password"])

	// GitHub attests the provenance of every file of the checksums file,
	// and of the image.
	var attested []map[string]any
	for _, s := range steps {
		if name, _, _ := strings.Cut(s.Uses, "@"); name == "actions/attest-build-provenance" {
			attested = append(attested, s.With)
		}
	}
	require.Len(t, attested, 2, "the release attests the archives and the image")
	c := readGoreleaserConfig(t)
	checksums := strings.NewReplacer("{{ .ProjectName }}", c.ProjectName, "{{ .Version }}", "${{ fromJSON(steps.goreleaser.outputs.metadata).version }}").Replace(c.Checksum.NameTemplate)
	assert.Equal(t, "dist/"+checksums, attested[0]["subject-checksums"], "the checksums file .goreleaser.yaml names")
	assert.Equal(t, releaseImage, attested[1]["subject-name"])
	assert.Equal(t, true, attested[1]["push-to-registry"])
}

// stepsRun returns the run scripts of steps, one after the other.
func stepsRun(steps []workflowStep) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.Run + "\n")
	}
	return b.String()
}
