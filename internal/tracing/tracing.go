// Package tracing traces ratewarden's ShouldRateLimit calls with
// OpenTelemetry and exports the spans over OTLP. It stays out of the
// service's logic: a gRPC stats handler makes the server span of each call,
// continuing the trace of the caller's metadata (W3C traceparent, or B3 as
// Envoy's Zipkin tracer sends it), an interceptor names the call's domain
// and outcome on it, and a wrapper of the rate.Limiter makes a child span for
// each backend call. Without tracing none of them is installed, so the
// service runs exactly as it does untraced.
//
// The exporter and the resource follow the standard OTEL_* variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, ...),
// which the OpenTelemetry SDK reads itself; Options override some of them.
package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// The OTLP protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultServiceName is the service.name of the spans when neither
// Options.ServiceName nor OTEL_SERVICE_NAME names one.
const DefaultServiceName = "ratewarden"

// Options configure New. The zero value exports over the protocol the OTEL_*
// variables name (http/protobuf by default) as DefaultServiceName, sampled
// as OTEL_TRACES_SAMPLER says (parent-based, always on, by default).
type Options struct {
	// Protocol is ProtocolGRPC or ProtocolHTTP ("http" is taken for it); ""
	// means OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then
	// OTEL_EXPORTER_OTLP_PROTOCOL, then ProtocolHTTP.
	Protocol string
	// ServiceName, ServiceNamespace and ServiceInstanceID set the
	// resource's service.name, service.namespace and service.instance.id
	// over what OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES say; empty
	// leaves them be.
	ServiceName, ServiceNamespace, ServiceInstanceID string
	// SamplingRate, when not nil, samples that share of the traces that
	// start here, in [0, 1], and every trace whose caller sampled it;
	// nil leaves the sampler to OTEL_TRACES_SAMPLER.
	SamplingRate *float64
	// Exporter, when not nil, receives the spans instead of an OTLP
	// exporter, synchronously; for tests.
	Exporter sdktrace.SpanExporter
}

// Tracer makes and exports the spans. It is safe for concurrent use.
type Tracer struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// scope names the instrumentation of the spans this package makes.
const scope = "github.com/ratewarden/ratewarden/internal/tracing"

// New returns a Tracer exporting as opts say. It does not touch
// OpenTelemetry's global providers.
func New(ctx context.Context, opts Options) (*Tracer, error) {
	res, err := newResource(ctx, opts)
	if err != nil {
		return nil, err
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if opts.SamplingRate != nil {
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*opts.SamplingRate))))
	}
	if opts.Exporter != nil {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(opts.Exporter))
	} else {
		exp, err := newExporter(ctx, opts.Protocol)
		if err != nil {
			return nil, err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	return &Tracer{
		provider:   tp,
		tracer:     tp.Tracer(scope),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, b3.New(), propagation.Baggage{}),
	}, nil
}

// Protocol returns the OTLP protocol that opts' Protocol, or else the OTEL_*
// variables, name.
func Protocol(p string) (string, error) { return protocol(p, os.Getenv) }

// protocol is Protocol with the OTEL_ variables read through getenv.
func protocol(p string, getenv func(string) string) (string, error) {
	if p == "" {
		p = getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	}
	if p == "" {
		p = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p {
	case "", "http", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("tracing: unknown OTLP protocol %q (want grpc or http/protobuf)", p)
}

func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	p, err := Protocol(protocol)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if p == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return exp, nil
}

func newResource(ctx context.Context, opts Options) (*resource.Resource, error) {
	var explicit []attribute.KeyValue
	if opts.ServiceName != "" {
		explicit = append(explicit, semconv.ServiceName(opts.ServiceName))
	}
	if opts.ServiceNamespace != "" {
		explicit = append(explicit, semconv.ServiceNamespace(opts.ServiceNamespace))
	}
	if opts.ServiceInstanceID != "" {
		explicit = append(explicit, semconv.ServiceInstanceID(opts.ServiceInstanceID))
	}
	// Later sources win: the default name, then the OTEL_* variables,
	// then the options.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(explicit...),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}

// Shutdown exports the spans still buffered and stops exporting, within
// ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// shouldRateLimitMethod is the full gRPC method name of ShouldRateLimit.
var shouldRateLimitMethod = rlsv3.RateLimitService_ShouldRateLimit_FullMethodName

// ServerOptions returns the options that trace a gRPC server's
// ShouldRateLimit calls: a stats handler that makes each call's server span
// from the caller's trace context, and an interceptor that adds the
// request's domain, its number of descriptors and the answer's overall code
// to it. Other methods (health checks, reflection) are not traced.
func (t *Tracer) ServerOptions() []grpc.ServerOption {
	handler := otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.provider),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithPropagators(t.propagator),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool { return info.FullMethodName == shouldRateLimitMethod }),
	)
	return []grpc.ServerOption{grpc.StatsHandler(handler), grpc.ChainUnaryInterceptor(t.annotate)}
}

// The attributes of the spans.
const (
	attrDomain      = attribute.Key("ratelimit.domain")
	attrDescriptors = attribute.Key("ratelimit.descriptors")
	attrOverallCode = attribute.Key("ratelimit.overall_code")
	attrOps         = attribute.Key("ratewarden.backend.ops")
	attrRefunds     = attribute.Key("ratewarden.backend.refunds")
	attrDenied      = attribute.Key("ratewarden.backend.denied")
	attrErrorKind   = attribute.Key("ratewarden.backend.error")
)

// annotate adds the request's and the answer's facts to the call's span.
func (t *Tracer) annotate(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if info.FullMethod != shouldRateLimitMethod {
		return resp, err
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return resp, err
	}
	if r, ok := req.(*rlsv3.RateLimitRequest); ok {
		span.SetAttributes(attrDomain.String(r.GetDomain()), attrDescriptors.Int(len(r.GetDescriptors())))
	}
	if r, ok := resp.(*rlsv3.RateLimitResponse); ok && err == nil {
		span.SetAttributes(attrOverallCode.String(r.GetOverallCode().String()))
	}
	return resp, err
}

// Limiter returns next with a span around each of its calls, a child of the
// span of the call's context: the number of ops and of refunds among them,
// how many the backend denied, and when the call failed its kind (timeout,
// unavailable, ...) as rate.Classify says.
func (t *Tracer) Limiter(next rate.Limiter) rate.Limiter {
	return &tracedLimiter{next: next, tracer: t.tracer}
}

// tracedLimiter is a Limiter that traces its calls.
type tracedLimiter struct {
	next   rate.Limiter
	tracer trace.Tracer
}

// Do calls the inner Limiter in a span.
func (l *tracedLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	ctx, span := l.tracer.Start(ctx, "ratewarden.backend", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if !span.IsRecording() {
		// Not sampled: nothing to describe.
		return l.next.Do(ctx, ops)
	}
	refunds := 0
	for i := range ops {
		if ops[i].Loosens() {
			refunds++
		}
	}
	results, err := l.next.Do(ctx, ops)
	span.SetAttributes(attrOps.Int(len(ops)), attrRefunds.Int(refunds))
	if kind := rate.Classify(ctx, err); kind != rate.FailureNone {
		span.SetAttributes(attrErrorKind.String(kind.String()))
		span.SetStatus(codes.Error, kind.String())
		span.RecordError(err)
		return results, err
	}
	denied := 0
	for _, r := range results {
		if !r.Allowed {
			denied++
		}
	}
	span.SetAttributes(attrDenied.Int(denied))
	return results, err
}

// ParseSamplingRate parses a sampling rate in [0, 1]; "" is nil.
func ParseSamplingRate(s string) (*float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil || !(f >= 0 && f <= 1) {
		return nil, fmt.Errorf("tracing: sampling rate %q is not a number in [0, 1]", s)
	}
	return &f, nil
}
