package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// positions returns "file:line:column" of each error err holds.
func positions(err error) []string {
	var out []string
	for _, e := range ErrorsOf(err) {
		out = append(out, fmt.Sprintf("%s:%d:%d %s", e.File, e.Line, e.Column, e.Field))
	}
	return out
}

// TestParseReportsEveryError: an invalid descriptor does not hide the next
// one, nor a nested one its siblings, nor an invalid file the next file.
func TestParseReportsEveryError(t *testing.T) {
	a := yml(`
domain: a
descriptors:
  - key: k1
    rate_limit: {unit: fortnight, requests_per_unit: 1}
  - key: k2
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: n1
        rate_limit: {unit: second, requests_per_unit: -1}
      - key: n2
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: n3
        bogus: 1
  - key: k2
`)
	b := yml(`
domain: b
descriptors:
  - {key: x, rate_limit: {unit: second, algorithm: sliding_window_log, requests_per_unit: 200000}}
`)
	_, err := Parse([]File{{Name: "a.yaml", Data: a}, {Name: "b.yaml", Data: b}}, testOptions())
	require.Error(t, err)
	assert.Equal(t, []string{
		"a.yaml:4:24 descriptors[0].rate_limit.unit",
		"a.yaml:9:55 descriptors[1].descriptors[0].rate_limit.requests_per_unit",
		"a.yaml:13:9 descriptors[1].descriptors[2].bogus",
		"a.yaml:14:5 descriptors[2]",
		"b.yaml:3:91 descriptors[0].rate_limit.requests_per_unit",
	}, positions(err))
	var es Errors
	require.True(t, errors.As(err, &es))
	assert.Len(t, strings.Split(err.Error(), "\n"), 5, "one error a line")
	assert.Equal(t, es[0].Error(), strings.Split(err.Error(), "\n")[0])
	assert.Contains(t, es[3].Msg, `duplicate descriptor "a.k2"`)

	// errors.As and errors.Is find the first that matches.
	var first *Error
	require.True(t, errors.As(err, &first))
	assert.Equal(t, "a.yaml", first.File)
	assert.Equal(t, 4, first.Line)
	assert.ErrorIs(t, err, algorithms.ErrInvalidLimit, "b.yaml's limit")

	// One error is the *Error itself, as before.
	_, err = Parse([]File{{Name: "b.yaml", Data: b}}, testOptions())
	_, one := err.(*Error)
	assert.True(t, one, "%T", err)
	assert.Len(t, ErrorsOf(err), 1)
	assert.Nil(t, ErrorsOf(errors.New("other")))
}

// TestParseReportsADuplicateDomainOfAFileWithErrors: the domain of a file
// with errors is still known, so the file after it that repeats it is
// reported as it would be once the first is fixed.
func TestParseReportsADuplicateDomainOfAFileWithErrors(t *testing.T) {
	_, err := Parse([]File{
		{Name: "a.yaml", Data: yml("domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: fortnight}}\n")},
		{Name: "b.yaml", Data: yml("domain: d\n")},
	}, testOptions())
	assert.Equal(t, []string{"a.yaml:3:33 descriptors[0].rate_limit.unit", "b.yaml:1:9 domain"}, positions(err))
}

// TestParseStopsAfterMaxErrors bounds what one load reports, in a file read
// in pieces, or whole, alike.
func TestParseStopsAfterMaxErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 2 * MaxErrors {
		fmt.Fprintf(&b, "  - key: k%d\n    rate_limit: {unit: fortnight}\n", i)
	}
	files := []File{{Name: "a.yaml", Data: []byte(b.String())}, {Name: "b.yaml", Data: yml("domain: e\nbogus: 1\n")}}
	_, err := Parse(files, testOptions())
	es := ErrorsOf(err)
	require.Len(t, es, MaxErrors+1)
	assert.Equal(t, 2*MaxErrors+2, es[MaxErrors-1].Line, "the last reported is the 100th descriptor's")
	assert.Equal(t, &Error{File: "b.yaml", Msg: "not read: the load stops after 100 errors"}, es[MaxErrors])

	// The same file with a byte order mark is read whole, with the same
	// errors.
	whole := append([]byte("\xef\xbb\xbf"), files[0].Data...)
	_, errWhole := Parse([]File{{Name: "a.yaml", Data: whole}, files[1]}, testOptions())
	assert.Equal(t, err.Error(), errWhole.Error())
}

// TestParseStopsAFileWhoseBudgetIsSpent: past the budget of aliases, every
// node would fail; the file is reported once.
func TestParseStopsAFileWhoseBudgetIsSpent(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: a}, {key: b}]\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "  - key: l%d\n    descriptors: &l%d [{key: a, descriptors: *l%d}, {key: b, descriptors: *l%d}]\n", i, i, i-1, i-1)
	}
	_, err := Parse([]File{{Name: "bomb.yaml", Data: []byte(b.String())}}, testOptions())
	es := ErrorsOf(err)
	require.Len(t, es, 1, "%v", err)
	assert.Contains(t, es[0].Msg, "too large once aliases are expanded")
}
