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
	product := func(rel string) bool { return !strings.HasSuffix(rel, "_test.go") && !under(rel, mayImportTestkit...) }
	read := walkImports(t, product, func(rel, p string) {
		assert.False(t, p == module+"/internal/testkit" || strings.HasPrefix(p, module+"/internal/testkit/"),
			"%s imports %s: the product does not import test support", rel, p)
	})
	require.Greater(t, read, 50, "the product's files were read")
}

// TestServerModuleImportsNoBench reads the imports of every Go file of the
// server's module, tests included: none imports a package of the bench
// module. The load generator depends on the server, never the reverse.
func TestServerModuleImportsNoBench(t *testing.T) {
	serverModule := func(rel string) bool { return !under(rel, benchDir) }
	read := walkImports(t, serverModule, func(rel, p string) {
		assert.False(t, p == benchModule || strings.HasPrefix(p, benchModule+"/"),
			"%s imports %s: the server's module does not depend on the benchmarks", rel, p)
	})
	require.Greater(t, read, 50, "the server module's files were read")
}

// TestOnlyCommandsImportTheServer reads the imports of every Go file under
// internal/, tests included: none but the server's own imports
// internal/server. The server is the wiring at the top, which commands run;
// what it wires (the check command, the explain report, the listeners, TLS)
// stands without it.
func TestOnlyCommandsImportTheServer(t *testing.T) {
	below := func(rel string) bool {
		return strings.HasPrefix(rel, "internal/") && !strings.HasPrefix(rel, "internal/server/")
	}
	read := walkImports(t, below, func(rel, p string) {
		assert.NotEqual(t, module+"/internal/server", p, "%s imports the server: it is wired by it, not the other way", rel)
	})
	require.Greater(t, read, 50, "the files under internal/ were read")
}

// walkImports calls visit with every import of every Go file of the
// repository whose path from the root, rel, files accepts, and returns how
// many files it read.
func walkImports(t *testing.T, files func(rel string) bool, visit func(rel, imp string)) int {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	read := 0
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
		if !strings.HasSuffix(rel, ".go") || !files(rel) {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		read++
		for _, imp := range file.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			visit(rel, p)
		}
		return nil
	})
	require.NoError(t, err)
	return read
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
