package config

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"
)

// maxMetadataDepth bounds how deeply a descriptor's metadata may nest.
const maxMetadataDepth = 64

// metadata reads a descriptor's metadata field v: a mapping of any YAML
// values, turned into the protobuf Struct that the response's dynamic
// metadata carries. An empty mapping is no metadata (nil). Scalars keep the
// type YAML gives them, as in envoyproxy/ratelimit (numbers, booleans
// including yes/no/on/off/y/n, null, and strings for everything else); the
// keys of nested mappings are read as written.
func (p *fileParser) metadata(v value) (*structpb.Struct, error) {
	if v.node.Kind != yaml.MappingNode {
		return nil, p.errorf(v.at, v.path, "want a mapping, got %s", describe(v.node))
	}
	s, err := p.metadataStruct(v.at, v.path, 0)
	if err != nil || len(s.GetFields()) == 0 {
		return nil, err
	}
	return s, nil
}

// metadataStruct reads the mapping at, any field names allowed, aliases
// and "<<" merge keys followed as in the rest of the file.
func (p *fileParser) metadataStruct(at *yaml.Node, path string, depth int) (*structpb.Struct, error) {
	if depth >= maxMetadataDepth {
		return nil, p.errorf(at, path, "metadata nested more than %d deep", maxMetadataDepth)
	}
	fs, err := p.mapping(at, path, nil)
	if err != nil {
		return nil, err
	}
	// In the order written, so that the first mistake is the one reported.
	names := make([]string, 0, len(fs))
	for name := range fs {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		ka, kb := fs[a].key, fs[b].key
		return cmp.Or(cmp.Compare(ka.Line, kb.Line), cmp.Compare(ka.Column, kb.Column), strings.Compare(a, b))
	})
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(fs))}
	for _, name := range names {
		if s.Fields[name], err = p.metadataValue(fs[name].value, joinPath(path, name), depth+1); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// metadataValue reads one metadata value at.
func (p *fileParser) metadataValue(at *yaml.Node, path string, depth int) (*structpb.Value, error) {
	if depth >= maxMetadataDepth {
		return nil, p.errorf(at, path, "metadata nested more than %d deep", maxMetadataDepth)
	}
	n, err := p.resolve(at, path)
	if err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.MappingNode:
		s, err := p.metadataStruct(at, path, depth)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	case yaml.SequenceNode:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(n.Content))}
		for i, item := range n.Content {
			if l.Values[i], err = p.metadataValue(item, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return nil, err
			}
		}
		return structpb.NewListValue(l), nil
	case yaml.ScalarNode:
		return p.metadataScalar(n, at, path)
	}
	return nil, p.errorf(at, path, "want a metadata value, got %s", describe(n))
}

// metadataScalar reads the scalar n, written at at.
func (p *fileParser) metadataScalar(n, at *yaml.Node, path string) (*structpb.Value, error) {
	switch n.ShortTag() {
	case "!!null":
		return structpb.NewNullValue(), nil
	case "!!bool", "!!str":
		v := value{node: n, at: at, path: path}
		if b, err := p.boolean(v); err == nil {
			return structpb.NewBoolValue(b), nil
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return structpb.NewNumberValue(float64(i)), nil
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return structpb.NewNumberValue(float64(u)), nil
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, p.errorf(at, path, "want a finite number, got %s", describe(n))
			}
			return structpb.NewNumberValue(f), nil
		}
	}
	return structpb.NewStringValue(n.Value), nil
}
