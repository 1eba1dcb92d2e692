package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratewarden/ratewarden/internal/rate"
)

// FuzzParse feeds arbitrary bytes to Parse: it must not panic, every error
// must be an *Error naming the file, and a Config it returns must match each
// branch of exact values to that branch's own rule.
func FuzzParse(f *testing.F) {
	f.Add([]byte(matchConfig))
	f.Add([]byte(precedenceConfig))
	names, err := filepath.Glob(filepath.Join("testdata", "envoyproxy", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range names {
		f.Add(envoyFile(f, filepath.Base(name)).Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse([]File{{Name: "fuzz.yaml", Data: data}}, testOptions())
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is a %T, not a *config.Error", err, err)
			}
			if e.File != "fuzz.yaml" {
				t.Fatalf("error %v names file %q", err, e.File)
			}
			if e.Msg == "" {
				t.Fatalf("error %v has no message", err)
			}
			_ = e.Error()
			return
		}
		_ = c.String()
		for _, name := range c.Domains() {
			checkBranches(t, c, name, c.domains[name].top, nil)
		}
	})
}

// checkBranches walks the nodes under lvl and asserts that a request naming
// each node's branch matches that node's rule, or nothing when it has none.
// An exact node is reached by its value, which must win over every other
// node; a wildcard or key-only node by a value made up for it (each '*' of a
// wildcard's pattern filled in), where no node that takes precedence claims
// that value.
func checkBranches(t *testing.T, c *Config, domain string, lvl *level, path []rate.Entry) {
	if lvl == nil || len(path) > 8 {
		return
	}
	for key, kn := range lvl.keys {
		nodes := make([]*node, 0, len(kn.values)+1)
		for _, n := range kn.values {
			nodes = append(nodes, n)
		}
		if kn.any != nil {
			nodes = append(nodes, kn.any)
		}
		for _, n := range nodes {
			value := n.value
			switch n.kind {
			case wildcardNode:
				value = strings.Join(n.parts, "\x00fuzz")
			case keyNode:
				value = "\x00fuzz"
			}
			e := rate.Entry{Key: key, Value: value}
			if got := lvl.lookup(e); got != n {
				if n.kind == exactNode {
					t.Fatalf("lookup(%v) found the node of line %d, not the exact one of line %d", e, got.line, n.line)
				}
				continue
			}
			req := append(path[:len(path):len(path)], e)
			m, ok := c.Match(domain, req)
			if ok != (n.rule != nil) || ok && m.Rule != n.rule {
				t.Fatalf("Match(%q, %v) = %v, %v; want the rule of line %d", domain, req, m.Rule, ok, n.line)
			}
			if ok && (m.MetricKey == "" || m.Key.Domain != domain || len(m.Key.Entries) != len(req)) {
				t.Fatalf("Match(%q, %v) = %+v", domain, req, m)
			}
			checkBranches(t, c, domain, n.children, req)
		}
	}
}
