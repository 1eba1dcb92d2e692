package config

import (
	"math"
	"strconv"

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

// metadataStruct reads the mapping at, following aliases and "<<" merge keys
// (the mapping's own keys win over merged ones).
func (p *fileParser) metadataStruct(at *yaml.Node, path string, depth int) (*structpb.Struct, error) {
	if depth >= maxMetadataDepth {
		return nil, p.errorf(at, path, "metadata nested more than %d deep", maxMetadataDepth)
	}
	n, err := p.resolve(at, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(at, path, "want a mapping, got %s", describe(n))
	}
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(n.Content)/2)}
	own := make(map[string]int, len(n.Content)/2) // the line of each own key
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := p.resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, p.errorf(k, path, "want a field name, got %s", describe(k))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		name := k.Value
		fp := joinPath(path, name)
		if line, ok := own[name]; ok {
			return nil, p.errorf(k, fp, "field given twice (first at line %d)", line)
		}
		own[name] = k.Line
		if s.Fields[name], err = p.metadataValue(n.Content[i+1], fp, depth+1); err != nil {
			return nil, err
		}
	}
	for _, m := range merges {
		mv, err := p.resolve(m, path)
		if err != nil {
			return nil, err
		}
		sources := []*yaml.Node{m}
		switch mv.Kind {
		case yaml.MappingNode:
		case yaml.SequenceNode:
			sources = mv.Content
		default:
			return nil, p.errorf(m, path, "merge key (<<) wants a mapping or a list of mappings, got %s", describe(mv))
		}
		for _, src := range sources {
			merged, err := p.metadataStruct(src, path, depth+1)
			if err != nil {
				return nil, err
			}
			for name, f := range merged.Fields {
				if _, ok := s.Fields[name]; !ok {
					s.Fields[name] = f
				}
			}
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
