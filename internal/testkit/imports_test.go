package testkit

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module is the import path of the repository's module, the server's.
const module = "github.com/ratewarden/ratewarden"

// benchDir is the folder of the load generator's module, a module of its own
// inside the repository, and benchModule its import path.
const (
	benchDir    = "bench"
	benchModule = module + "/" + benchDir
)

// mayImportTestkit are the folders, besides testkit itself, whose code (not
// only their tests) may import testkit: the load generator's module.
var mayImportTestkit = []string{benchDir, "internal/testkit"}

// TestProductImportsNoTestkit reads the imports of every Go file of the
// repository but tests: none of the product's imports a package under
// internal/testkit.
func TestProductImportsNoTestkit(t *testing.T) {
	read := map[string]bool{}
	forEachImport(t, func(rel, imp string) {
		if strings.HasSuffix(rel, "_test.go") || under(rel, mayImportTestkit...) {
			return
		}
		read[rel] = true
		assert.False(t, imp == module+"/internal/testkit" || strings.HasPrefix(imp, module+"/internal/testkit/"),
			"%s imports %s: the product does not import test support", rel, imp)
	})
	require.Greater(t, len(read), 50, "the product's files were read")
}

// TestServerModuleImportsNoBench reads the imports of every Go file of the
// server's module, tests included: none imports a package of the bench
// module. The load generator depends on the server, never the reverse.
func TestServerModuleImportsNoBench(t *testing.T) {
	read := map[string]bool{}
	forEachImport(t, func(rel, imp string) {
		if under(rel, benchDir) {
			return
		}
		read[rel] = true
		assert.False(t, imp == benchModule || strings.HasPrefix(imp, benchModule+"/"),
			"%s imports %s: the server's module does not depend on the benchmarks", rel, imp)
	})
	require.Greater(t, len(read), 50, "the server module's files were read")
}

// forEachImport calls f with each import path of every Go file of the
// repository and the file's path from the repository's root.
func forEachImport(t *testing.T, f func(rel, imp string)) {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range file.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			f(rel, p)
		}
		return nil
	})
	require.NoError(t, err)
}

// under reports whether the file at rel, a path from the repository's root,
// lies in one of dirs.
func under(rel string, dirs ...string) bool {
	for _, dir := range dirs {
		if strings.HasPrefix(rel, dir+"/") {
			return true
		}
	}
	return false
}
