package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// yml returns s without its leading newline, so that line 1 is the line
// after the opening backquote.
func yml(s string) []byte { return []byte(strings.TrimPrefix(s, "\n")) }

// testAlgorithm is the algorithm of the tests' limits that name none: their
// Options' DefaultAlgorithm, as swc builds such limits.
const testAlgorithm = algorithms.SlidingWindowCounter

// testOptions returns the Options the tests read files with, unless a test
// says otherwise.
func testOptions() Options { return Options{DefaultAlgorithm: testAlgorithm} }

// mustParse parses one file named "test.yaml".
func mustParse(t testing.TB, data string, opts Options) *Config {
	t.Helper()
	c, err := Parse([]File{{Name: "test.yaml", Data: yml(data)}}, opts)
	require.NoError(t, err)
	return c
}

// parseError parses files and returns the *Error it must fail with.
func parseError(t *testing.T, files []File) *Error {
	t.Helper()
	_, err := Parse(files, testOptions())
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "error %v (%T) is not a *config.Error", err, err)
	return e
}

// limit returns a RateLimit of requests per multiplier units, with the given
// algorithm, no burst, one shard and no name.
func limit(alg algorithms.Algorithm, requests uint64, unit Unit, multiplier uint32) RateLimit {
	return RateLimit{
		Limit: algorithms.Limit{
			Algorithm: alg,
			Requests:  requests,
			Window:    time.Duration(multiplier) * unit.Duration(),
		},
		Unit:           unit,
		UnitMultiplier: multiplier,
		Shards:         1,
	}
}

// swc returns a RateLimit of requests per unit of testAlgorithm, a limit
// that names no algorithm.
func swc(requests uint64, unit Unit) RateLimit {
	return limit(testAlgorithm, requests, unit, 1)
}

// named returns l with a name and replaces.
func named(l RateLimit, name string, replaces ...string) RateLimit {
	l.Name = name
	l.Replaces = replaces
	return l
}

// rules returns c's rules as values, for comparison, without their Column
// and Field (TestRuleLocation reads them).
func rules(c *Config) []Rule {
	var out []Rule
	for _, r := range c.Rules() {
		v := *r
		v.Column, v.Field = 0, ""
		out = append(out, v)
	}
	return out
}
