package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxMergeDepth bounds how deeply "<<" merge keys may nest, which also stops
// a merge that refers to its own mapping.
const maxMergeDepth = 16

// maxAliasHops bounds a chain of aliases; the YAML parser makes chains of
// one, but a hand-built tree could loop.
const maxAliasHops = 8

// decoder reads the YAML nodes of one file. It follows aliases and "<<" merge
// keys (as envoyproxy/ratelimit's YAML library does), rejects unknown and
// duplicate fields, and charges every node it visits (and every path it
// builds) to a budget, so that aliases cannot expand a small file into an
// enormous tree.
type decoder struct {
	file   string
	budget int
	// warnings are what the file holds that is likely a mistake; warned
	// records the fields already warned about, which aliases may visit
	// again.
	warnings []Warning
	warned   map[*yaml.Node]bool
}

// field is one field of a mapping: its key as written, and its value as
// written (possibly an alias).
type field struct {
	key, value *yaml.Node
}

// fields holds a mapping's fields by name, merges applied.
type fields map[string]field

// value is a present, non-null field value: the node it resolves to, the
// node as written (whose line is reported), and the field's path.
type value struct {
	node *yaml.Node
	at   *yaml.Node
	path string
}

// newDecoder returns a decoder for the file name holding size bytes. The
// budget allows every node to be visited a few times and every descriptor's
// paths to be built (at most MaxDepth segments each), and aliases to expand
// the file to a few times its size.
func newDecoder(name string, size int) *decoder {
	return &decoder{file: name, budget: 16*size + 1<<16}
}

// errorf returns an *Error located at n.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) *Error {
	line, column := 0, 0
	if n != nil {
		line, column = n.Line, n.Column
	}
	return &Error{File: d.file, Line: line, Column: column, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// readDocument parses data, which must hold exactly one YAML document, and
// returns that document's root node. Empty documents after the first (such as
// a trailing "---") are ignored; a second non-empty document is an error.
func readDocument(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Msg: "empty file: want a mapping with domain and descriptors"}
		}
		return nil, syntaxError(name, err)
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, syntaxError(name, err)
		}
		if len(next.Content) > 0 && !isNull(next.Content[0]) {
			return nil, &Error{File: name, Line: next.Content[0].Line, Column: next.Content[0].Column,
				Msg: "a second YAML document: a file holds one domain, use one file per domain"}
		}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{File: name, Msg: "empty file: want a mapping with domain and descriptors"}
	}
	if isNull(doc.Content[0]) {
		return nil, &Error{File: name, Line: doc.Line, Column: doc.Column, Msg: "empty document: want a mapping with domain and descriptors"}
	}
	return doc.Content[0], nil
}

var yamlErrorLine = regexp.MustCompile(`^yaml: line (\d+): `)

// parserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). For these, yaml.v3 v3.0.1 reports the 0-based line of the
// enclosing construct (or of the problem, when the construct starts on the
// first line) and omits a line 0; scanner errors carry a 1-based line.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError turns an error of the YAML parser into an *Error. Its line is
// where the problem is or, for errors of structure, where the collection
// holding the problem starts; 0 when the parser gives no position (errors in
// the encoding).
func syntaxError(name string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = err.Error()[len(m[0]):]
	}
	switch {
	case parserProblems[msg]:
		line++
	case line == 0 && scannerProblem(msg):
		line = 1
	}
	return &Error{File: name, Line: line, Msg: "invalid YAML: " + msg, Err: err}
}

// scannerProblem reports whether msg is one of yaml.v3's scanner errors,
// which carry a position (the parser omits it when it is the first line).
func scannerProblem(msg string) bool {
	for _, prefix := range []string{"found ", "did not find ", "could not find ", "mapping ", "block sequence ", "exceeded max depth"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// charge takes n units of work from the budget: building a path of b bytes
// costs b/16, as if the path were that many YAML nodes.
func (d *decoder) charge(n int, at *yaml.Node, path string) error {
	d.budget -= n
	if d.budget < 0 {
		return d.errorf(at, path, "too large once aliases are expanded")
	}
	return nil
}

// resolve follows n's alias, if any, and charges one node to the budget.
func (d *decoder) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	at := n
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops >= maxAliasHops {
			return nil, d.errorf(at, path, "alias *%s does not resolve", at.Value)
		}
		n = n.Alias
	}
	if n == nil {
		return nil, d.errorf(at, path, "missing YAML node")
	}
	if err := d.charge(1, at, path); err != nil {
		return nil, err
	}
	return n, nil
}

// isNull reports whether n is a null scalar ("~", "null" or nothing).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what n is, for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		if len(n.Value) > 64 {
			return strconv.Quote(n.Value[:60]) + "..."
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// joinPath returns the path of field name inside path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// mapping reads the mapping n, whose path is path, and returns its fields.
// A field not in allowed is an error (nil allows any), as is a field given
// twice. Fields brought in by "<<" merge keys yield to the mapping's own.
func (d *decoder) mapping(n *yaml.Node, path string, allowed []string) (fields, error) {
	return d.mergedMapping(n, path, allowed, 0)
}

func (d *decoder) mergedMapping(at *yaml.Node, path string, allowed []string, depth int) (fields, error) {
	n, err := d.resolve(at, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errorf(at, path, "want a mapping, got %s", describe(n))
	}
	fs := make(fields, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := d.resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, d.errorf(k, path, "want a field name, got %s", describe(k))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		name := k.Value
		if allowed != nil && !slices.Contains(allowed, name) {
			return nil, d.errorf(k, joinPath(path, name), "unknown field (want %s)", strings.Join(allowed, ", "))
		}
		if prev, ok := fs[name]; ok {
			return nil, d.errorf(k, joinPath(path, name), "field given twice (first at line %d)", prev.key.Line)
		}
		fs[name] = field{key: k, value: n.Content[i+1]}
	}
	for _, m := range merges {
		if depth >= maxMergeDepth {
			return nil, d.errorf(m, path, "merge keys (<<) nested more than %d deep", maxMergeDepth)
		}
		mv, err := d.resolve(m, path)
		if err != nil {
			return nil, err
		}
		var sources []*yaml.Node
		switch mv.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{m}
		case yaml.SequenceNode:
			sources = mv.Content
		default:
			return nil, d.errorf(m, path, "merge key (<<) wants a mapping or a list of mappings, got %s", describe(mv))
		}
		for _, s := range sources {
			merged, err := d.mergedMapping(s, path, allowed, depth+1)
			if err != nil {
				return nil, err
			}
			for name, f := range merged {
				if own, ok := fs[name]; ok {
					d.mergeDropped(own, f, m, path, name)
					continue
				}
				fs[name] = f
			}
		}
	}
	return fs, nil
}

// get returns the value of field name of fs, whose mapping has path path;
// ok is false when the field is absent or null.
func (d *decoder) get(fs fields, path, name string) (v value, ok bool, err error) {
	f, present := fs[name]
	if !present {
		return value{}, false, nil
	}
	p := joinPath(path, name)
	n, err := d.resolve(f.value, p)
	if err != nil {
		return value{}, false, err
	}
	if isNull(n) {
		return value{}, false, nil
	}
	return value{node: n, at: f.value, path: p}, true, nil
}

// str returns v as a string. Like envoyproxy/ratelimit, any scalar is taken
// as written: "value: 200" is the string "200".
func (d *decoder) str(v value) (string, error) {
	if v.node.Kind != yaml.ScalarNode {
		return "", d.errorf(v.at, v.path, "want a string, got %s", describe(v.node))
	}
	return v.node.Value, nil
}

// boolean returns v as a bool. Besides true and false it accepts YAML 1.1's
// plain yes/no/on/off/y/n, as envoyproxy/ratelimit's YAML library does.
func (d *decoder) boolean(v value) (bool, error) {
	n := v.node
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b, nil
			}
		case "!!str":
			if n.Style == 0 {
				switch n.Value {
				case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
					return true, nil
				case "n", "N", "no", "No", "NO", "off", "Off", "OFF":
					return false, nil
				}
			}
		}
	}
	return false, d.errorf(v.at, v.path, "want true or false, got %s", describe(n))
}

// uint returns v as an integer in [lo, hi].
func (d *decoder) uint(v value, lo, hi uint64) (uint64, error) {
	n := v.node
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var u uint64
		if err := n.Decode(&u); err == nil && u >= lo && u <= hi {
			return u, nil
		}
	}
	return 0, d.errorf(v.at, v.path, "want an integer in [%d, %d], got %s", lo, hi, describe(n))
}

// list returns the items of the list v.
func (d *decoder) list(v value) ([]*yaml.Node, error) {
	if v.node.Kind != yaml.SequenceNode {
		return nil, d.errorf(v.at, v.path, "want a list, got %s", describe(v.node))
	}
	return v.node.Content, nil
}
