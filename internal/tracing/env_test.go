package tracing

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

// TestExporterVariables reads the exporter's variables as the SDK does.
func TestExporterVariables(t *testing.T) {
	t.Parallel()
	defaults := func(protocol string) exporterEnv {
		c := exporterEnv{endpoint: "localhost:4318", urlPath: "/v1/traces", timeout: 10 * time.Second}
		if protocol == ProtocolGRPC {
			c.endpoint = "localhost:4317"
		}
		return c
	}
	for _, c := range []struct {
		name     string
		protocol string
		env      map[string]string
		want     func(*exporterEnv)
	}{
		{name: "none", protocol: ProtocolHTTP, want: func(*exporterEnv) {}},
		{name: "none", protocol: ProtocolGRPC, want: func(*exporterEnv) {}},
		{
			name: "empty is unset", protocol: ProtocolHTTP,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " ", "OTEL_EXPORTER_OTLP_TIMEOUT": ""},
			want: func(*exporterEnv) {},
		},
		{
			name: "base URL", protocol: ProtocolHTTP,
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/otlp"},
			want: func(c *exporterEnv) {
				c.endpoint, c.urlPath, c.insecure = "collector:4318", "/otlp/v1/traces", true
			},
		},
		{
			name: "the signal's URL, as it is", protocol: ProtocolHTTP,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces:443"},
			want: func(c *exporterEnv) { c.endpoint, c.urlPath = "traces:443", "/" },
		},
		{
			name: "gRPC target", protocol: ProtocolGRPC,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317/ignored"},
			want: func(c *exporterEnv) { c.endpoint, c.insecure = "collector:4317", true },
		},
		{
			name: "gRPC unix socket", protocol: ProtocolGRPC,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "unix:///run/otel.sock"},
			want: func(c *exporterEnv) { c.endpoint, c.insecure = "unix:///run/otel.sock", true },
		},
		{
			name: "insecure over the scheme", protocol: ProtocolGRPC,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4317", "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "TRUE"},
			want: func(c *exporterEnv) { c.endpoint, c.insecure = "collector:4317", true },
		},
		{
			name: "secure over the scheme", protocol: ProtocolHTTP,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_INSECURE": "no"},
			want: func(c *exporterEnv) { c.endpoint, c.urlPath = "collector:4318", "/v1/traces" },
		},
		{
			name: "headers, compression, encoding, timeout", protocol: ProtocolHTTP,
			env: map[string]string{
				"OTEL_EXPORTER_OTLP_HEADERS":         "a=1",
				"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  " Api-Key = se%20cret ,bad key=x,novalue,b=%zz",
				"OTEL_EXPORTER_OTLP_COMPRESSION":     "gzip",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
				"OTEL_EXPORTER_OTLP_TIMEOUT":         "2500",
				"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":  "soon",
			},
			want: func(c *exporterEnv) {
				c.headers = map[string]string{"Api-Key": "se cret"}
				c.gzip, c.json, c.timeout = true, true, 2500*time.Millisecond
			},
		},
		{
			name: "the signal's compression wins", protocol: ProtocolGRPC,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"},
			want: func(*exporterEnv) {},
		},
	} {
		t.Run(c.protocol+" "+c.name, func(t *testing.T) {
			want := defaults(c.protocol)
			c.want(&want)
			assert.Equal(t, want, readExporterEnv(lookupIn(c.env), c.protocol))
		})
	}
}

// TestExporterCertificates reads the CA and the client certificate the
// variables name; files that cannot be read or parsed are passed over.
func TestExporterCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, caFile := tlstest.ServerFiles(t, dir, tlstest.NewCA(t, "collector"), 2)
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not PEM"), 0o600))

	c := readExporterEnv(lookupIn(map[string]string{
		"OTEL_EXPORTER_OTLP_CERTIFICATE":        caFile,
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert,
		"OTEL_EXPORTER_OTLP_CLIENT_KEY":         key,
	}), ProtocolHTTP)
	require.NotNil(t, c.tls)
	assert.NotNil(t, c.tls.RootCAs)
	assert.Len(t, c.tls.Certificates, 1)

	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_CERTIFICATE": garbage},
		{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": filepath.Join(dir, "missing.pem")},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert}, // no key
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": garbage},
	} {
		assert.Nil(t, readExporterEnv(lookupIn(env), ProtocolGRPC).tls, env)
	}
}

// TestResourceVariables: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
// make the resource, under the options, over the default name.
func TestResourceVariables(t *testing.T) {
	t.Parallel()
	res, err := newResource(context.Background(), lookupIn(map[string]string{
		"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes, deployment.environment = prod%2Deu ,team=rate%zz",
		"OTEL_SERVICE_NAME":        " from-name ",
	}), Options{ServiceNamespace: "edge"})
	require.NoError(t, err)
	attrs := map[attribute.Key]string{}
	for _, kv := range res.Attributes() {
		attrs[kv.Key] = kv.Value.AsString()
	}
	assert.Equal(t, "from-name", attrs["service.name"], "OTEL_SERVICE_NAME wins over the attributes")
	assert.Equal(t, "prod-eu", attrs["deployment.environment"])
	assert.Equal(t, "rate%zz", attrs["team"], "a value that does not unescape is kept as it is")
	assert.Equal(t, "edge", attrs["service.namespace"])

	res, err = newResource(context.Background(), lookupIn(map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a=1"}), Options{})
	require.NoError(t, err)
	assert.Equal(t, DefaultServiceName, resourceString(res, "service.name"))

	_, err = newResource(context.Background(), lookupIn(map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a=1,novalue"}), Options{})
	require.ErrorIs(t, err, resource.ErrPartialResource)
	assert.ErrorContains(t, err, "tracing: resource: ")
	assert.ErrorContains(t, err, "[novalue]")
}

func resourceString(res *resource.Resource, key attribute.Key) string {
	v, _ := res.Set().Value(key)
	return v.AsString()
}

// TestSamplerVariables reads OTEL_TRACES_SAMPLER and its argument as the
// SDK does.
func TestSamplerVariables(t *testing.T) {
	t.Parallel()
	parentAlwaysOn := sdktrace.ParentBased(sdktrace.AlwaysSample()).Description()
	for _, c := range []struct {
		sampler, arg string
		want         string
	}{
		{"", "", parentAlwaysOn},
		{"unknown", "", parentAlwaysOn},
		{"parentbased_always_on", "", parentAlwaysOn},
		{" Always_On ", "", sdktrace.AlwaysSample().Description()},
		{"always_off", "", sdktrace.NeverSample().Description()},
		{"traceidratio", "0.25", sdktrace.TraceIDRatioBased(0.25).Description()},
		{"traceidratio", "", sdktrace.TraceIDRatioBased(1).Description()},
		{"traceidratio", "1.5", sdktrace.TraceIDRatioBased(1).Description()},
		{"traceidratio", "half", sdktrace.TraceIDRatioBased(1).Description()},
		{"parentbased_always_off", "", sdktrace.ParentBased(sdktrace.NeverSample()).Description()},
		{"parentbased_traceidratio", " 0.5 ", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.5)).Description()},
		{"parentbased_traceidratio", "-1", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(1)).Description()},
	} {
		env := map[string]string{"OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg}
		assert.Equal(t, c.want, sampler(lookupIn(env)).Description(), "%q %q", c.sampler, c.arg)
	}
}

// TestSamplerVariablesInNew: New samples as OTEL_TRACES_SAMPLER says, and
// as Options.SamplingRate says over it.
func TestSamplerVariablesInNew(t *testing.T) {
	t.Parallel()
	never := lookupIn(map[string]string{"OTEL_TRACES_SAMPLER": "always_off"})
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(context.Background(), Options{Exporter: exp, Lookup: never})
	require.NoError(t, err)
	_, span := tr.tracer.Start(context.Background(), "x")
	assert.False(t, span.IsRecording(), "always_off")
	span.End()

	all := 1.0
	tr, err = New(context.Background(), Options{Exporter: exp, Lookup: never, SamplingRate: &all})
	require.NoError(t, err)
	_, span = tr.tracer.Start(context.Background(), "x")
	assert.True(t, span.IsRecording(), "the option wins over the variable")
	span.End()
}
