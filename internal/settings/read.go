package settings

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// read is the one reader of the environment: Load reads through it, and
// PrintUsage lists the variables it reads (variables). envconfig.Process
// reads the process's environment and nothing else, where Load reads
// through a lookup function; read keeps envconfig's names (split_words)
// and its rules for parsing a value (envconfig.Decoder, then the types that
// parse themselves, then the kind; TestReadParsesEveryKind), except that it
// never reads a variable without its prefix, as envconfig does for a field
// named by an envconfig tag.

// variable is one variable of a specification: its name, the field it
// sets, and the field's tags (default, desc).
type variable struct {
	name  string
	field reflect.Value
	tag   reflect.StructTag
}

// words splits a field's name into words as envconfig's split_words does
// (with two regular expressions): a capital begins a word, and so does the
// first letter after capitals; of several capitals followed by other
// letters, the last begins a word of its own. GRPCTlsCertFile is GRPC, Tls,
// Cert, File; XDSDefaultAlgorithm is XDS, Default, Algorithm.
func words(name string) []string {
	isUpper := func(c byte) bool { return 'A' <= c && c <= 'Z' }
	var words []string
	for i := 0; i < len(name); {
		capitals := i
		for capitals < len(name) && isUpper(name[capitals]) {
			capitals++
		}
		end := capitals
		for end < len(name) && !isUpper(name[end]) {
			end++
		}
		if capitals-i >= 2 && end > capitals {
			words = append(words, name[i:capitals-1], name[capitals-1:end])
		} else {
			words = append(words, name[i:end])
		}
		i = end
	}
	return words
}

// variables returns the variables of the struct that spec points to, under
// prefix, in the order of its fields, as envconfig names them: the field's
// name, split into words with split_words, or its envconfig tag; a struct
// field that does not parse itself holds variables under its own name.
func variables(prefix string, spec reflect.Value) []variable {
	s := spec.Elem()
	var vars []variable
	for i := range s.NumField() {
		f, sf := s.Field(i), s.Type().Field(i)
		if !f.CanSet() || isTrue(sf.Tag.Get("ignored")) {
			continue
		}
		name := sf.Name
		if isTrue(sf.Tag.Get("split_words")) {
			name = strings.Join(words(sf.Name), "_")
		}
		if alt := sf.Tag.Get("envconfig"); alt != "" {
			name = alt
		}
		if prefix != "" {
			name = prefix + "_" + name
		}
		name = strings.ToUpper(name)
		if f.Kind() == reflect.Struct && !parsesItself(f) {
			inner := name
			if sf.Anonymous {
				inner = prefix
			}
			vars = append(vars, variables(inner, f.Addr())...)
			continue
		}
		vars = append(vars, variable{name: name, field: f, tag: sf.Tag})
	}
	return vars
}

// read sets the fields of the struct that spec points to from the
// variables under prefix that lookup finds, or else from their defaults.
// It stops at the first value a field refuses.
func read(prefix string, spec any, lookup func(string) (string, bool)) error {
	for _, v := range variables(prefix, reflect.ValueOf(spec)) {
		text, ok := lookup(v.name)
		if !ok {
			if text = v.tag.Get("default"); text == "" {
				continue
			}
		}
		if err := v.set(text); err != nil {
			return err
		}
	}
	return nil
}

// set parses text into the variable's field, with the field's own type.
// Its error names the variable: before a choiceError, which follows the
// name, or else before a colon.
func (v variable) set(text string) error {
	err := parse(v.field, text)
	if err == nil {
		return nil
	}
	var choice *choiceError
	if errors.As(err, &choice) {
		return fmt.Errorf("server: %s %w", v.name, err)
	}
	return fmt.Errorf("server: %s: %w", v.name, err)
}

// parse sets field to text as envconfig.Process does: through the first of
// envconfig.Decoder, envconfig.Setter, encoding.TextUnmarshaler and
// encoding.BinaryUnmarshaler that the field implements, or else by its
// kind, with lists separated by commas and maps as key:value pairs.
func parse(field reflect.Value, text string) error {
	if p, ok := parser(field); ok {
		return p(text)
	}
	typ := field.Type()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
		if field.IsNil() {
			field.Set(reflect.New(typ))
		}
		field = field.Elem()
	}
	switch typ.Kind() {
	case reflect.String:
		field.SetString(text)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if typ == reflect.TypeFor[time.Duration]() {
			d, err := time.ParseDuration(text)
			if err != nil {
				return err
			}
			field.SetInt(int64(d))
			return nil
		}
		n, err := strconv.ParseInt(text, 0, typ.Bits())
		if err != nil {
			return err
		}
		field.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(text, 0, typ.Bits())
		if err != nil {
			return err
		}
		field.SetUint(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return err
		}
		field.SetBool(b)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(text, typ.Bits())
		if err != nil {
			return err
		}
		field.SetFloat(f)
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			field.SetBytes([]byte(text))
			return nil
		}
		list := reflect.MakeSlice(typ, 0, 0)
		if strings.TrimSpace(text) != "" {
			items := strings.Split(text, ",")
			list = reflect.MakeSlice(typ, len(items), len(items))
			for i, item := range items {
				if err := parse(list.Index(i), item); err != nil {
					return err
				}
			}
		}
		field.Set(list)
	case reflect.Map:
		m := reflect.MakeMap(typ)
		if strings.TrimSpace(text) != "" {
			for _, pair := range strings.Split(text, ",") {
				kv := strings.Split(pair, ":")
				if len(kv) != 2 {
					return fmt.Errorf("invalid map item: %q", pair)
				}
				k, v := reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem()
				if err := parse(k, kv[0]); err != nil {
					return err
				}
				if err := parse(v, kv[1]); err != nil {
					return err
				}
				m.SetMapIndex(k, v)
			}
		}
		field.Set(m)
	default:
		return fmt.Errorf("settings: a field of type %s cannot be read", typ)
	}
	return nil
}

// parser returns the method with which the field parses itself, if it has
// one: envconfig's order of precedence, each interface tried on the field
// and then on its address.
func parser(field reflect.Value) (func(string) error, bool) {
	for _, as := range []func(any) func(string) error{
		func(v any) func(string) error {
			if d, ok := v.(envconfig.Decoder); ok {
				return d.Decode
			}
			return nil
		},
		func(v any) func(string) error {
			if s, ok := v.(envconfig.Setter); ok {
				return s.Set
			}
			return nil
		},
		func(v any) func(string) error {
			if u, ok := v.(encoding.TextUnmarshaler); ok {
				return func(s string) error { return u.UnmarshalText([]byte(s)) }
			}
			return nil
		},
		func(v any) func(string) error {
			if u, ok := v.(encoding.BinaryUnmarshaler); ok {
				return func(s string) error { return u.UnmarshalBinary([]byte(s)) }
			}
			return nil
		},
	} {
		for _, v := range []reflect.Value{field, addr(field)} {
			if !v.IsValid() || !v.CanInterface() {
				continue
			}
			if p := as(v.Interface()); p != nil {
				return p, true
			}
		}
	}
	return nil, false
}

// addr returns a pointer to field, or the zero Value when it has no
// address.
func addr(field reflect.Value) reflect.Value {
	if !field.CanAddr() {
		return reflect.Value{}
	}
	return field.Addr()
}

// parsesItself reports whether a struct field is one value that parses
// itself, rather than a group of variables.
func parsesItself(field reflect.Value) bool {
	_, ok := parser(field)
	return ok
}

func isTrue(s string) bool {
	b, _ := strconv.ParseBool(s)
	return b
}
