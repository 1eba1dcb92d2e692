package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the table of who imports whom in CONTRIBUTING.md from go list")

// module is the import path of the server's module.
const module = "github.com/ratewarden/ratewarden"

// The table of who imports whom in CONTRIBUTING.md lies between these lines.
const (
	importsBegin = "<!-- imports: begin -->\n"
	importsEnd   = "<!-- imports: end -->\n"
)

// goPackage is what go list says of one package of the module.
type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// productPackage reports whether short, a package's path from the
// repository's root, is a package of the server: any but the black-box tests
// and the test support under internal/testkit.
func productPackage(short string) bool {
	return short != "test" && short != "internal/testkit" && !strings.HasPrefix(short, "internal/testkit/")
}

// modulePackages runs go list once, in the repository's root, and returns the
// packages of the server's module, by their path from the root. The
// load generator's module, in bench/, is not among them.
var modulePackages = sync.OnceValues(func() (map[string]goPackage, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		short, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			return nil, fmt.Errorf("go list: %s is not in %s", p.ImportPath, module)
		}
		pkgs[short] = p
	}
	return pkgs, nil
})

// importGraph returns the server's packages, each with the packages of the
// repository its code imports directly, by their paths from the root, sorted.
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	pkgs, err := modulePackages()
	require.NoError(t, err)
	require.Contains(t, pkgs, "cmd/server", "go list found the server's packages")
	graph := map[string][]string{}
	for short, p := range pkgs {
		if !productPackage(short) {
			continue
		}
		imports := []string{}
		for _, imp := range p.Imports {
			if s, ok := strings.CutPrefix(imp, module+"/"); ok {
				imports = append(imports, s)
			}
		}
		slices.Sort(imports)
		graph[short] = imports
	}
	return graph
}

// importsTable writes the table of who imports whom, one row per package.
func importsTable(graph map[string][]string) string {
	var b strings.Builder
	b.WriteString("| package | imports |\n|---|---|\n")
	for _, p := range slices.Sorted(maps.Keys(graph)) {
		cell := "—"
		if len(graph[p]) > 0 {
			cell = "`" + strings.Join(graph[p], "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", p, cell)
	}
	return b.String()
}

var codeSpanText = regexp.MustCompile("`([^`]+)`")

// tableRows returns the cells of the rows of the markdown table in lines,
// without its header and the line under it.
func tableRows(lines []string) [][]string {
	var rows [][]string
	for i, line := range lines {
		if i < 2 {
			continue
		}
		line = strings.TrimSpace(line)
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	return rows
}

// parseImportsTable reads the table of who imports whom: each row's package
// and the packages it lists. A row written otherwise is a problem.
func parseImportsTable(table string) (map[string][]string, []string) {
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if table == "" || len(lines) < 2 {
		return map[string][]string{}, []string{"the table is empty"}
	}
	graph := map[string][]string{}
	var problems []string
	for _, cells := range tableRows(lines) {
		row := "| " + strings.Join(cells, " | ") + " |"
		if len(cells) != 2 {
			problems = append(problems, fmt.Sprintf("row %q: not two columns", row))
			continue
		}
		m := codeSpanText.FindStringSubmatch(cells[0])
		if m == nil || m[0] != cells[0] {
			problems = append(problems, fmt.Sprintf("row %q: the first column is not one `package`", row))
			continue
		}
		pkg := m[1]
		if _, dup := graph[pkg]; dup {
			problems = append(problems, fmt.Sprintf("`%s`: two rows", pkg))
			continue
		}
		imports := []string{}
		if cells[1] != "—" {
			for _, s := range codeSpanText.FindAllStringSubmatch(cells[1], -1) {
				imports = append(imports, s[1])
			}
			if len(imports) == 0 || "`"+strings.Join(imports, "`, `")+"`" != cells[1] {
				problems = append(problems, fmt.Sprintf("`%s`: its imports are not written as `a`, `b`, … or —", pkg))
			}
		}
		graph[pkg] = imports
	}
	return graph, problems
}

// importsTableDiff names each difference between the table's graph,
// documented, and go list's, actual.
func importsTableDiff(documented, actual map[string][]string) []string {
	var problems []string
	for _, p := range slices.Sorted(maps.Keys(actual)) {
		doc, ok := documented[p]
		if !ok {
			problems = append(problems, fmt.Sprintf("`%s` has no row", p))
			continue
		}
		for _, imp := range actual[p] {
			if !slices.Contains(doc, imp) {
				problems = append(problems, fmt.Sprintf("`%s` imports `%s`, which its row does not list", p, imp))
			}
		}
		for _, imp := range doc {
			if !slices.Contains(actual[p], imp) {
				problems = append(problems, fmt.Sprintf("`%s` does not import `%s`, which its row lists", p, imp))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := actual[p]; !ok {
			problems = append(problems, fmt.Sprintf("`%s` has a row but is no package of the server", p))
		}
	}
	return problems
}

// TestContributingImportsTable holds the table of who imports whom in
// CONTRIBUTING.md to the packages' imports as go list reads them: one row per
// package of the server, with the packages of the repository it imports
// directly. -update-docs rewrites the table.
func TestContributingImportsTable(t *testing.T) {
	const file = "CONTRIBUTING.md"
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	require.NoError(t, err)
	doc := string(data)
	i, j := strings.Index(doc, importsBegin), strings.Index(doc, importsEnd)
	require.True(t, i >= 0 && j > i, "%s holds the table between %q and %q", file, importsBegin, importsEnd)
	actual := importGraph(t)
	want := importsTable(actual)
	if *updateDocs {
		require.NoError(t, os.WriteFile(filepath.Join(repoRoot, file), []byte(doc[:i+len(importsBegin)]+want+doc[j:]), 0o644))
		return
	}
	table := doc[i+len(importsBegin) : j]
	documented, problems := parseImportsTable(table)
	problems = append(problems, importsTableDiff(documented, actual)...)
	for _, p := range problems {
		t.Errorf("%s, who imports whom: %s", file, p)
	}
	if len(problems) == 0 {
		assert.Equal(t, want, table, "%s, who imports whom: written otherwise than -update-docs writes it (the order of rows or imports, spacing)", file)
	}
	if t.Failed() {
		t.Log("to rewrite the table: go test ./test -run ContributingImportsTable -update-docs")
	}
}

// layoutPaths returns the paths the first column of CONTRIBUTING.md's Layout
// table names, from the root, without a trailing slash. In a cell that names
// more than one, a name without a slash is a sibling of the cell's first, as
// in "`internal/testkit/xdstest`, `tracingtest`". A path ending in "/…"
// stands for what lies under it.
func layoutPaths(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "CONTRIBUTING.md"))
	require.NoError(t, err)
	var table []string
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case line == "## Layout":
			in = true
		case in && strings.HasPrefix(line, "|"):
			table = append(table, line)
		case in && len(table) > 0:
			in = false
		}
	}
	require.NotEmpty(t, table, "CONTRIBUTING.md has a table under ## Layout")
	var paths []string
	for _, cells := range tableRows(table) {
		names := codeSpanText.FindAllStringSubmatch(cells[0], -1)
		require.NotEmpty(t, names, "Layout row %q names no path", cells[0])
		first := strings.TrimSuffix(names[0][1], "/")
		for k, n := range names {
			p := strings.TrimSuffix(n[1], "/")
			if k > 0 && !strings.Contains(p, "/") {
				p = path.Join(path.Dir(first), p)
			}
			paths = append(paths, p)
		}
	}
	return paths
}

// TestContributingLayoutNamesEveryPackage checks that the Layout table of
// CONTRIBUTING.md names every package of the server, itself or under a
// "path/…" row, and that every path it names exists.
func TestContributingLayoutNamesEveryPackage(t *testing.T) {
	paths := layoutPaths(t)
	for _, p := range paths {
		_, err := os.Stat(filepath.Join(repoRoot, strings.TrimSuffix(p, "/…")))
		assert.NoError(t, err, "CONTRIBUTING.md's Layout names `%s`, which does not exist", p)
	}
	for pkg := range importGraph(t) {
		named := slices.ContainsFunc(paths, func(p string) bool {
			parent, ok := strings.CutSuffix(p, "/…")
			return p == pkg || ok && strings.HasPrefix(pkg, parent+"/")
		})
		assert.True(t, named, "CONTRIBUTING.md's Layout names no path of the package `%s`", pkg)
	}
}

// redisPackage reports whether the import path p is a Redis package: the
// go-redis client's or internal/redisx.
func redisPackage(p string) bool {
	for _, r := range []string{module + "/internal/redisx", "github.com/redis/go-redis"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// TestContributingRLSReachesNoRedis keeps the service apart from Redis, as
// CONTRIBUTING.md says: internal/rls imports no Redis package, not even
// through its imports. That no product package imports internal/testkit is
// held by TestProductImportsNoTestkit in ./internal/testkit.
func TestContributingRLSReachesNoRedis(t *testing.T) {
	pkgs, err := modulePackages()
	require.NoError(t, err)
	rls, ok := pkgs["internal/rls"]
	require.True(t, ok, "go list found internal/rls")
	require.NotEmpty(t, rls.Deps)
	var redis []string
	for _, dep := range rls.Deps {
		// The packages of a Redis package are named with it.
		if redisPackage(dep) && !slices.ContainsFunc(redis, func(r string) bool { return strings.HasPrefix(dep, r+"/") }) {
			redis = append(redis, dep)
		}
	}
	if len(redis) == 0 {
		return
	}
	var through []string
	for _, imp := range rls.Imports {
		dep, ok := pkgs[strings.TrimPrefix(imp, module+"/")]
		if redisPackage(imp) || ok && slices.ContainsFunc(dep.Deps, redisPackage) {
			through = append(through, imp)
		}
	}
	t.Errorf("internal/rls reaches Redis (%s) by importing %s", strings.Join(redis, ", "), strings.Join(through, ", "))
}

func TestContributingImportsTableDiff(t *testing.T) {
	documented, problems := parseImportsTable("| package | imports |\n|---|---|\n| `a` | `b`, `c` |\n| `d` | — |\n| `e` | b |\n| `a` | — |\n")
	assert.Equal(t, map[string][]string{"a": {"b", "c"}, "d": {}, "e": {}}, documented)
	assert.Equal(t, []string{"`e`: its imports are not written as `a`, `b`, … or —", "`a`: two rows"}, problems)
	actual := map[string][]string{"a": {"b", "x"}, "e": {}, "f": {}}
	assert.Equal(t, []string{
		"`a` imports `x`, which its row does not list",
		"`a` does not import `c`, which its row lists",
		"`f` has no row",
		"`d` has a row but is no package of the server",
	}, importsTableDiff(documented, actual))
	assert.Equal(t, "| package | imports |\n|---|---|\n| `a` | `b`, `x` |\n| `e` | — |\n| `f` | — |\n", importsTable(actual))
}
