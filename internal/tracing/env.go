package tracing

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// The OpenTelemetry SDK reads its OTEL_* variables from the process's
// environment and from nowhere else. New reads them through Options.Lookup
// instead, and hands the exporter, the resource and the sampler what they
// say as explicit options, which win over what the SDK reads itself. Each
// variable is parsed as the SDK (v1.47) parses it: the exporters' as
// otlpconfig/envconfig.go does, the resource's as resource/env.go does,
// the sampler's as sdk/trace/sampler_env.go does. With os.LookupEnv, then,
// the spans go where, and as, they went when the SDK read the variables
// itself. A value the SDK passes over is passed over here too; the SDK,
// which still reads the process's environment, reports it. What the SDK
// takes from the process's environment whatever the lookup says,
// Options.Lookup lists.

// lookupEnv reads the OTEL_* variables through a lookup function.
type lookupEnv func(string) (string, bool)

// get returns the value of the variable without surrounding white space,
// and whether that is not empty: the SDK takes an empty variable for one
// that is not set.
func (e lookupEnv) get(name string) (string, bool) {
	v, _ := e(name)
	v = strings.TrimSpace(v)
	return v, v != ""
}

// otlpPrefixes are the prefixes of the exporter's variables, in the order
// the SDK reads them: the signal's own (TRACES_) win.
var otlpPrefixes = []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"}

// The exporter's defaults, when no variable says otherwise.
const (
	defaultHTTPEndpoint = "localhost:4318"
	defaultGRPCEndpoint = "localhost:4317"
	defaultTracesPath   = "/v1/traces"
	defaultTimeout      = 10 * time.Second
)

// exporterEnv is what the OTEL_EXPORTER_OTLP_* variables say of the
// exporter of one protocol.
type exporterEnv struct {
	// endpoint is the host and port (OTLP/HTTP) or the target (OTLP/gRPC)
	// to export to, and urlPath the path of OTLP/HTTP's requests.
	endpoint, urlPath string
	// insecure exports without TLS (over plain HTTP, or gRPC without
	// transport security).
	insecure bool
	// tls holds the CA and the client certificate the variables name; nil
	// when they name none (the system's roots, no client certificate).
	tls     *tls.Config
	headers map[string]string
	gzip    bool
	json    bool // OTLP/HTTP sends JSON (http/json), not protobuf
	timeout time.Duration
}

// readExporterEnv reads the exporter's variables for protocol, in the
// order the SDK applies them: the endpoints (whose scheme says whether
// to use TLS), the certificates, the insecure flags, the headers, the
// compression, the protocol and the timeout.
func readExporterEnv(e lookupEnv, protocol string) exporterEnv {
	c := exporterEnv{endpoint: defaultHTTPEndpoint, urlPath: defaultTracesPath, timeout: defaultTimeout}
	grpc := protocol == ProtocolGRPC
	if grpc {
		c.endpoint = defaultGRPCEndpoint
	}
	for i, prefix := range otlpPrefixes {
		u, ok := e.url(prefix + "ENDPOINT")
		if !ok {
			continue
		}
		scheme := strings.ToLower(u.Scheme)
		c.insecure = scheme == "http" || scheme == "unix"
		switch {
		case grpc:
			c.endpoint = grpcTarget(u)
		case i == 0:
			// OTEL_EXPORTER_OTLP_ENDPOINT is a base URL: the traces go to
			// its path's /v1/traces.
			c.endpoint, c.urlPath = u.Host, path.Join(u.Path, defaultTracesPath)
		default:
			// The signal's own endpoint is used as it is, "/" for no path.
			c.endpoint, c.urlPath = u.Host, cmp.Or(u.Path, "/")
		}
	}
	var roots *x509.CertPool
	var certs []tls.Certificate
	for _, prefix := range otlpPrefixes {
		if pool, ok := e.certPool(prefix + "CERTIFICATE"); ok {
			roots = pool
		}
	}
	for _, prefix := range otlpPrefixes {
		if cert, ok := e.clientCert(prefix+"CLIENT_CERTIFICATE", prefix+"CLIENT_KEY"); ok {
			certs = []tls.Certificate{cert}
		}
	}
	if roots != nil || len(certs) > 0 {
		c.tls = &tls.Config{RootCAs: roots, Certificates: certs}
	}
	for _, prefix := range otlpPrefixes {
		if v, ok := e.get(prefix + "INSECURE"); ok {
			c.insecure = strings.EqualFold(v, "true")
		}
	}
	for _, prefix := range otlpPrefixes {
		if v, ok := e.get(prefix + "HEADERS"); ok {
			c.headers = parseHeaders(v)
		}
	}
	for _, prefix := range otlpPrefixes {
		if v, ok := e.get(prefix + "COMPRESSION"); ok {
			c.gzip = v == "gzip"
		}
	}
	for _, prefix := range otlpPrefixes {
		if v, ok := e.get(prefix + "PROTOCOL"); ok {
			c.json = v == "http/json"
		}
	}
	for _, prefix := range otlpPrefixes {
		if v, ok := e.get(prefix + "TIMEOUT"); ok {
			if ms, err := strconv.Atoi(v); err == nil {
				c.timeout = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return c
}

// url returns the variable's value as a URL, when it is set and parses.
func (e lookupEnv) url(name string) (*url.URL, bool) {
	v, ok := e.get(name)
	if !ok {
		return nil, false
	}
	u, err := url.Parse(v)
	return u, err == nil
}

// certPool returns the CA certificates of the PEM file the variable names,
// when it is set and the file holds any.
func (e lookupEnv) certPool(name string) (*x509.CertPool, bool) {
	file, ok := e.get(name)
	if !ok {
		return nil, false
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	pool := x509.NewCertPool()
	return pool, pool.AppendCertsFromPEM(pem)
}

// clientCert returns the certificate and key of the PEM files the two
// variables name, when both are set and the files hold a pair.
func (e lookupEnv) clientCert(certName, keyName string) (tls.Certificate, bool) {
	certFile, okc := e.get(certName)
	keyFile, okk := e.get(keyName)
	if !okc || !okk {
		return tls.Certificate{}, false
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, false
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, false
	}
	pair, err := tls.X509KeyPair(cert, key)
	return pair, err == nil
}

// grpcTarget returns the gRPC target an endpoint URL names: the host of an
// http or https URL, host and path without a scheme, and else the URL as
// it is (unix:///path, dns:///host:port).
func grpcTarget(u *url.URL) string {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.Host
	case "":
		if u.Host != "" {
			return path.Join(u.Host, u.Path)
		}
	}
	return u.String()
}

// parseHeaders parses OTEL_EXPORTER_OTLP_HEADERS: name=value pairs,
// separated by commas, with URL-escaped values. A pair without "=", with a
// name that is not an HTTP token or a value that does not unescape is
// passed over.
func parseHeaders(v string) map[string]string {
	headers := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		name, value, found := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if !found || !isHeaderName(name) {
			continue
		}
		value, err := url.PathUnescape(value)
		if err != nil {
			continue
		}
		headers[name] = strings.TrimSpace(value)
	}
	return headers
}

// isHeaderName reports whether name is an HTTP token.
func isHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if c > unicode.MaxASCII || !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// httpOptions returns the options that make an OTLP/HTTP exporter export
// as c says, whatever the process's environment says.
func (c exporterEnv) httpOptions() []otlptracehttp.Option {
	compression, encoding := otlptracehttp.NoCompression, otlptracehttp.EncodingProtobuf
	if c.gzip {
		compression = otlptracehttp.GzipCompression
	}
	if c.json {
		encoding = otlptracehttp.EncodingJSON
	}
	opts := []otlptracehttp.Option{
		// The exporter has WithInsecure and no option for the opposite
		// but an https URL: it says secure, and the next two options
		// replace its host and path.
		otlptracehttp.WithEndpointURL("https://" + defaultHTTPEndpoint),
		otlptracehttp.WithEndpoint(c.endpoint),
		otlptracehttp.WithURLPath(c.urlPath),
		otlptracehttp.WithTLSClientConfig(c.tls),
		otlptracehttp.WithHeaders(c.headers),
		otlptracehttp.WithCompression(compression),
		otlptracehttp.WithEncoding(encoding),
		otlptracehttp.WithTimeout(c.timeout),
	}
	if c.insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return opts
}

// grpcOptions returns the options that make an OTLP/gRPC exporter export
// as c says, whatever the process's environment says, but for gzip (see
// the top of this file).
func (c exporterEnv) grpcOptions() []otlptracegrpc.Option {
	// The exporter dials with the credentials it is given, else without
	// transport security when insecure, else with TLS and the system's
	// roots: the same, given always.
	creds := credentials.NewTLS(nil)
	switch {
	case c.tls != nil:
		creds = credentials.NewTLS(c.tls)
	case c.insecure:
		creds = insecure.NewCredentials()
	}
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithEndpoint(c.endpoint),
		otlptracegrpc.WithTLSCredentials(creds),
		otlptracegrpc.WithHeaders(c.headers),
		otlptracegrpc.WithTimeout(c.timeout),
	}
	if c.gzip {
		opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
	}
	return opts
}

// resourceAttributes returns the attributes OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME give the resource: the name=value pairs of the first,
// separated by commas, with URL-escaped values, and then service.name,
// which wins. A pair without "=" is an error, as it is to the SDK.
func resourceAttributes(e lookupEnv) ([]attribute.KeyValue, error) {
	var attrs []attribute.KeyValue
	var invalid []string
	if v, ok := e.get("OTEL_RESOURCE_ATTRIBUTES"); ok {
		for _, pair := range strings.Split(v, ",") {
			key, value, found := strings.Cut(pair, "=")
			if !found {
				invalid = append(invalid, pair)
				continue
			}
			unescaped, err := url.PathUnescape(strings.TrimSpace(value))
			if err != nil {
				// The SDK keeps the value as it is, and reports it.
				unescaped = value
				otel.Handle(err)
			}
			attrs = append(attrs, attribute.String(strings.TrimSpace(key), unescaped))
		}
	}
	if name, ok := e.get("OTEL_SERVICE_NAME"); ok {
		attrs = append(attrs, semconv.ServiceName(name))
	}
	if len(invalid) > 0 {
		// The SDK's words.
		return attrs, fmt.Errorf("error detecting resource: %w: missing value: %v", resource.ErrPartialResource, invalid)
	}
	return attrs, nil
}

// sampler returns the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, or the SDK's default,
// ParentBased(AlwaysSample), when they name none it knows. A ratio that is
// not a number in [0, 1] is 1.
func sampler(e lookupEnv) sdktrace.Sampler {
	name, _ := e.get("OTEL_TRACES_SAMPLER")
	arg, hasArg := e.get("OTEL_TRACES_SAMPLER_ARG")
	ratio := func() sdktrace.Sampler {
		r, err := strconv.ParseFloat(arg, 64)
		if !hasArg || err != nil || r < 0 || r > 1 {
			r = 1
		}
		return sdktrace.TraceIDRatioBased(r)
	}
	switch strings.ToLower(name) {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return ratio()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio())
	}
	// parentbased_always_on, none, or one the SDK does not know.
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}
