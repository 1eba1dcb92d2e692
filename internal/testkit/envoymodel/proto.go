package envoymodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"

	// The typed_config types the configuration names, so that protojson
	// can resolve their "@type" URLs.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// LoadBootstrap reads an Envoy bootstrap YAML file into Envoy's v3 Bootstrap
// and validates it with Validate. It is safe for concurrent use.
func LoadBootstrap(path string) (*bootstrapv3.Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envoy: %w", err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := fromYAML(data, b); err != nil {
		return nil, fmt.Errorf("envoy: %s: %w", path, err)
	}
	if err := validateAll(b); err != nil {
		return nil, fmt.Errorf("envoy: %s: %w", path, err)
	}
	return b, nil
}

// FromYAML decodes one YAML document into m, field names in snake_case or
// camelCase as protobuf's JSON mapping allows. Unknown fields and unknown
// "@type" URLs are errors. It does not validate: see Validate. It is safe for
// concurrent use.
func FromYAML(data []byte, m proto.Message) error {
	if err := fromYAML(data, m); err != nil {
		return fmt.Errorf("envoy: %w", err)
	}
	return nil
}

func fromYAML(data []byte, m proto.Message) error {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return err
	}
	return fromValue(v, m)
}

// FromValue decodes a value that gopkg.in/yaml.v3 decoded (maps, lists and
// scalars) into m, as FromYAML does. It is safe for concurrent use.
func FromValue(v any, m proto.Message) error {
	if err := fromValue(v, m); err != nil {
		return fmt.Errorf("envoy: %w", err)
	}
	return nil
}

func fromValue(v any, m proto.Message) error {
	name := m.ProtoReflect().Descriptor().FullName()
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: not JSON-shaped: %w", name, err)
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		// protojson's positions are in the JSON made from the YAML, and
		// would mislead: the field name says where.
		return fmt.Errorf("%s: %s", name, jsonPosition.ReplaceAllString(err.Error(), ""))
	}
	return nil
}

// jsonPosition matches the position protojson puts in its errors.
var jsonPosition = regexp.MustCompile(`\(line \d+:\d+\): `)

// Validate checks m against the constraints of Envoy's API (the
// protoc-gen-validate rules that Envoy enforces on load), all of them, and
// those of every message packed in an Any inside m (typed_config), which
// m's own ValidateAll does not enter. It is safe for concurrent use.
func Validate(m proto.Message) error {
	if err := validateAll(m); err != nil {
		return fmt.Errorf("envoy: %w", err)
	}
	return nil
}

func validateAll(m proto.Message) error {
	var errs []error
	validate(m.ProtoReflect(), &errs)
	return errors.Join(errs...)
}

func validate(m protoreflect.Message, errs *[]error) {
	if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			*errs = append(*errs, err)
		}
	}
	walkAnys(m, errs)
}

// walkAnys unpacks and validates every Any reachable from m.
func walkAnys(m protoreflect.Message, errs *[]error) {
	if m.Descriptor().FullName() == "google.protobuf.Any" {
		a, ok := m.Interface().(*anypb.Any)
		if !ok {
			*errs = append(*errs, fmt.Errorf("unexpected Any implementation %T", m.Interface()))
			return
		}
		inner, err := a.UnmarshalNew()
		if err != nil {
			*errs = append(*errs, fmt.Errorf("typed_config %s: %w", a.GetTypeUrl(), err))
			return
		}
		validate(inner.ProtoReflect(), errs)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walkAnys(mv.Message(), errs)
					return true
				})
			}
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			for i := range v.List().Len() {
				walkAnys(v.List().Get(i).Message(), errs)
			}
		default:
			walkAnys(v.Message(), errs)
		}
		return true
	})
}

// onlyFields returns an error naming the first populated field of m that is
// not one of names: a setting the model does not know how to follow.
func onlyFields(m proto.Message, names ...string) error {
	var err error
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		for _, n := range names {
			if string(fd.Name()) == n {
				return true
			}
		}
		err = fmt.Errorf("envoy: %s is not modelled", fd.FullName())
		return false
	})
	return err
}
