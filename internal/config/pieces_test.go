package config

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// parseOne parses data as the one file of a Config, in pieces or whole, and
// returns the Config's dump; errCut when data cannot be cut into pieces.
func parseOne(data []byte, inPieces bool) (string, error) {
	c := &Config{domains: map[string]*domain{}}
	p := &fileParser{decoder: newDecoder("t.yaml", len(data)), def: algorithms.SlidingWindowCounter, domains: c.domains}
	var d *domain
	var err error
	if inPieces {
		ps, ok := cutPieces(data)
		if !ok {
			return "", errCut
		}
		d, err = p.parsePieces(ps)
	} else {
		d, err = p.parseWhole(data)
	}
	if err != nil {
		return "", err
	}
	c.domains[d.name] = d
	c.names = []string{d.name}
	c.rules = p.rules
	return c.String(), nil
}

var errCut = errors.New("not cut")

// checkPieces fails t when data read in pieces gives a Config that data
// read whole does not.
func checkPieces(t *testing.T, data []byte) {
	t.Helper()
	pieces, err := parseOne(data, true)
	if err != nil {
		return // read whole then
	}
	whole, err := parseOne(data, false)
	if err != nil {
		t.Fatalf("read in pieces:\n%s\nread whole: %v\nfile:\n%s", pieces, err, data)
	}
	if pieces != whole {
		t.Fatalf("read in pieces:\n%s\nread whole:\n%s\nfile:\n%s", pieces, whole, data)
	}
}

// piecesCases are files of the shape read in pieces, and files close to it.
var piecesCases = []struct {
	name string
	data string
	cut  bool // whether the file is cut into pieces
}{
	{"indented items", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: b\n    value: v\n    descriptors:\n      - key: c\n        rate_limit: {unit: minute, requests_per_unit: 2}\n", true},
	{"items at column 0, domain after them", "descriptors:\n- key: a\n  rate_limit: {unit: second, requests_per_unit: 1}\n\n# a comment\n- key: b\n  rate_limit:\n    unit: hour\n    requests_per_unit: 3\ndomain: d\n", true},
	{"comments and blank lines", "# limits\ndomain: d # the domain\ndescriptors: # all of them\n\n  # first\n  - key: a\n# at column 0\n    rate_limit: {unit: second, requests_per_unit: 1}\n\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n# trailing\n", true},
	{"CRLF", "domain: d\r\ndescriptors:\r\n  - key: a\r\n    rate_limit: {unit: second, requests_per_unit: 1}\r\n", true},
	{"an anchor used within its item", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &l {unit: second, requests_per_unit: 1}\n    descriptors:\n      - key: b\n        rate_limit: *l\n", true},
	{"an anchor used in another item", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &l {unit: second, requests_per_unit: 1}\n  - key: b\n    rate_limit: *l\n", true},
	{"a block scalar", "domain: d\ndescriptors:\n  - key: a\n    value: |\n      line\n        more\n    rate_limit: {unit: second, requests_per_unit: 1}\n", true},
	{"a quoted value over lines", "domain: d\ndescriptors:\n  - key: a\n    value: \"x\n  - y\"\n    rate_limit: {unit: second, requests_per_unit: 1}\n", true},
	{"a flow list over lines", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second,\n  - requests_per_unit: 1}\n", true},
	{"a quoted domain holding a descriptors line", "domain: \"abc\ndescriptors:\n- key: x\ny\"\ndescriptors:\n", true},
	{"a quoted domain holding the list", "domain: \"abc\ndescriptors:\n- key: x\ny\"\ndescriptors:\n- key: z\n  rate_limit: {unit: second, requests_per_unit: 1}\n", true},
	{"items at two columns", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    - key: b\n", true},
	{"a flow list", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]\n", false},
	{"an anchored list", "domain: d\ndescriptors: &all\n  - key: a\n", false},
	{"a document marker", "---\ndomain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"tabs", "domain: d\ndescriptors:\n  - key: a\n\trate_limit: {unit: second, requests_per_unit: 1}\n", false},
}

// TestPiecesReadAsTheWholeFile: a file read in pieces gives the Config the
// whole file gives, or is read whole.
func TestPiecesReadAsTheWholeFile(t *testing.T) {
	for _, tc := range piecesCases {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := cutPieces([]byte(tc.data))
			assert.Equal(t, tc.cut, ok, "cut")
			checkPieces(t, []byte(tc.data))
			// Parse gives what the whole file gives, error or not.
			c, err := Parse([]File{{Name: "t.yaml", Data: []byte(tc.data)}}, testOptions())
			whole, werr := parseOne([]byte(tc.data), false)
			if werr != nil {
				require.Error(t, err)
				assert.Equal(t, werr.Error(), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, whole, c.String())
		})
	}

	t.Run("the large file", func(t *testing.T) {
		data := largeFile(5000)
		ps, ok := cutPieces(data)
		require.True(t, ok)
		assert.Greater(t, len(ps.groups), 5, "pieces of about %d bytes", pieceBytes)
		checkPieces(t, data)
	})
	t.Run("the files of envoyproxy/ratelimit", func(t *testing.T) {
		names, err := filepath.Glob(filepath.Join("testdata", "envoyproxy", "*.yaml"))
		require.NoError(t, err)
		for _, name := range names {
			checkPieces(t, envoyFile(t, filepath.Base(name)).Data)
		}
	})
}

// FuzzPieces: whatever a file holds, reading it in pieces gives the Config
// that reading it whole gives, or fails (and the file is then read whole).
func FuzzPieces(f *testing.F) {
	for _, tc := range piecesCases {
		f.Add([]byte(tc.data))
	}
	f.Add([]byte(matchConfig))
	f.Add([]byte(precedenceConfig))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPieces(t, data)
	})
}
