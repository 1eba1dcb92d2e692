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

// module is the import path of the repository's module.
const module = "github.com/ratewarden/ratewarden"

// mayImportTestkit are the folders, besides testkit itself, whose code (not
// only their tests) may import testkit: the load generator.
var mayImportTestkit = []string{"cmd/loadgen", "internal/testkit"}

// TestProductImportsNoTestkit reads the imports of every Go file of the
// repository but tests: none of the product's imports a package under
// internal/testkit.
func TestProductImportsNoTestkit(t *testing.T) {
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
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || allowed(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		read++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			assert.False(t, p == module+"/internal/testkit" || strings.HasPrefix(p, module+"/internal/testkit/"),
				"%s imports %s: the product does not import test support", rel, p)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, read, 50, "the product's files were read")
}

// allowed reports whether the file at rel, a path from the repository's root,
// lies in a folder that may import testkit.
func allowed(rel string) bool {
	for _, dir := range mayImportTestkit {
		if strings.HasPrefix(rel, dir+"/") {
			return true
		}
	}
	return false
}
